//! How answers look on a terminal: Markdown rendered in the REPL and in
//! `exec` on a TTY (never in a pipe), the screen after a resize mid-stream,
//! plain lines for `TERM=dumb`, reasoning labelled without colour, and token
//! and cancel notes after the answer they belong to. The real binary in a
//! real tmux pane (a server of its own per test) against the fake provider.

use crate::support;

use serde_json::json;
use support::fake_provider::{FakeProvider, Gate, Reply, SseChunk};
use support::tmux::Tmux;
use support::BuddyCmd;

/// A reply with headings, a list, code and a table, and one sentence per
/// line inside a paragraph.
const DOC: &str = "# Release notes\n\nTwo changes,\none per line.\n\n- fast *start*\n- 漢字 wide\n\n```sh\necho hi\n```\n\n| name | size |\n|---|---:|\n| a | 1 |\n| long name | 22 |\n\nSee [the docs](https://example.com).";

/// DOC as the REPL shows it without colour (`NO_COLOR`, set for every test).
const SHOWN: &[&str] = &[
    "# Release notes",
    "",
    "Two changes,",
    "one per line.",
    "",
    "- fast start",
    "- 漢字 wide",
    "",
    "```sh",
    "echo hi",
    "```",
    "",
    "| name      | size |",
    "|-----------|------|",
    "| a         |    1 |",
    "| long name |   22 |",
    "",
    "See the docs (https://example.com).",
];

fn delta(text: &str) -> SseChunk {
    SseChunk::data(json!({"choices": [{"index": 0, "delta": {"content": text}}]}))
}

fn start() -> SseChunk {
    SseChunk::data(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    )
}

fn end() -> Vec<SseChunk> {
    vec![
        SseChunk::data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        SseChunk::done(),
    ]
}

/// A streamed answer made of exactly these content deltas.
fn streamed(pieces: &[&str]) -> Reply {
    let mut chunks = vec![start()];
    chunks.extend(pieces.iter().map(|p| delta(p)));
    chunks.extend(end());
    Reply::sse(chunks)
}

/// `text` cut into pieces of `n` characters.
fn every(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// Starts the REPL and waits for its first prompt.
fn repl(cmd: &BuddyCmd) -> Tmux {
    let t = Tmux::start(cmd, &[]);
    t.wait_for("the prompt", |s| s.lines().any(|l| l.starts_with('>')));
    t
}

/// The screen's lines from the echo of `prompt` to the empty prompt after
/// the answer (both left out), once that prompt is there.
fn answer_lines(t: &Tmux, prompt: &str) -> Vec<String> {
    let echo = format!("> {prompt}");
    let screen = t.wait_for("the answer and a fresh prompt", |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines
            .iter()
            .position(|l| *l == echo)
            .is_some_and(|i| lines[i + 1..].contains(&">"))
            && !s.contains("[task ")
    });
    let lines: Vec<&str> = screen.lines().collect();
    let from = lines.iter().position(|l| *l == echo).unwrap_or(0) + 1;
    let to = from + lines[from..].iter().position(|l| *l == ">").unwrap_or(0);
    lines[from..to].iter().map(|l| l.to_string()).collect()
}

#[test]
fn a_markdown_answer_shows_the_same_screen_however_it_is_chunked() {
    let whole = vec![DOC.to_string()];
    let by_line: Vec<String> = DOC.split_inclusive('\n').map(String::from).collect();
    let small = every(DOC, 3);
    // Cuts in the middle of lines, of the fence and of the table rule.
    let odd = vec![
        DOC[..20].to_string(),
        DOC[20..71].to_string(),
        DOC[71..99].to_string(),
        DOC[99..].to_string(),
    ];
    for pieces in [whole, by_line, small, odd] {
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let p = FakeProvider::start(vec![streamed(&refs)]);
        let cmd = BuddyCmd::new().config_for(&p);
        let t = repl(&cmd);
        t.line("notes please");
        assert_eq!(answer_lines(&t, "notes please"), SHOWN, "pieces {refs:?}");
    }
}

#[test]
fn a_resize_mid_stream_keeps_the_transcript_and_the_prompt() {
    // Unfinished lines, shown live under the transcript: the editor cuts
    // them at a space for its width, where the terminal would cut inside a
    // word, so the screen shows when buddy has taken a new width.
    let first = "an unfinished line that the editor cuts at spaces whenever the terminal is narrow";
    let first_cut = [
        "an unfinished line that the editor cuts at spaces whenever",
        "the terminal is narrow",
    ];
    let second = "a second unfinished line, shown on one row again once the terminal is wide";
    let second_cut = "a second unfinished line, shown on one row again once the";
    let narrow = Gate::new();
    let wide = Gate::new();
    let p = FakeProvider::start(vec![
        Reply::text("the first answer"),
        Reply::sse(
            [
                vec![start(), delta(&format!("alpha\n\nbeta one\n{first}"))],
                vec![SseChunk::gate(&narrow), delta(&format!("\n\n{second}"))],
                vec![SseChunk::gate(&wide), delta("\n\ndone")],
                end(),
            ]
            .concat(),
        ),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("first");
    t.wait_text("the first answer");
    t.line("second");
    let screen = t.wait_for("the live line", |s| s.lines().any(|l| l == first));
    // The status says what the task does, with a spinner frame and the time.
    let status = screen
        .lines()
        .find(|l| l.starts_with("[task 2] "))
        .unwrap_or_else(|| panic!("no status line:\n{screen}"));
    let after = status
        .strip_prefix("[task 2] writing the answer · ")
        .unwrap_or_else(|| panic!("{status}"));
    let frame = after.chars().next().unwrap_or(' ');
    assert!("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏".contains(frame), "{status}");
    t.type_text("typed while it streams");
    t.wait_text("> typed while it streams");
    let session = "buddy-test";
    t.tmux_cmd(&["resize-window", "-t", session, "-x", "60"]);
    t.wait_for("the live line cut for 60 columns", |s| {
        s.lines().any(|l| l == first_cut[0])
    });
    narrow.open();
    t.wait_for("the second live line cut", |s| {
        s.lines().any(|l| l == second_cut)
    });
    t.tmux_cmd(&["resize-window", "-t", session, "-x", "100"]);
    t.wait_for("the second live line on one row", |s| {
        s.lines().any(|l| l == second)
    });
    wide.open();
    t.wait_for("the end of the answer", |s| {
        s.contains("done") && !s.contains("[task")
    });
    // A narrower terminal pushes the top lines into its scrollback: the
    // transcript is read from there on.
    let screen = t.tmux_cmd(&["capture-pane", "-p", "-S", "-", "-t", session]);
    let lines: Vec<&str> = screen.lines().collect();
    let from = lines
        .iter()
        .position(|l| *l == "> first")
        .unwrap_or_else(|| panic!("the first prompt's echo is gone:\n{screen}"));
    assert_eq!(
        lines[..from]
            .iter()
            .filter(|l| l.starts_with("buddy fake-model via"))
            .count(),
        1,
        "the banner:\n{screen}"
    );
    // Each block is rendered for the width it was completed at.
    let expected = [
        "> first",
        "the first answer",
        "> second",
        "alpha",
        "",
        "beta one",
        first_cut[0],
        first_cut[1],
        "",
        second,
        "",
        "done",
        "> typed while it streams",
    ];
    let shown = &lines[from..];
    let end = shown
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    assert_eq!(shown[..end], expected, "screen:\n{screen}");
    assert_eq!(t.cursor_line(), "> typed while it streams");
}

#[test]
fn a_dumb_terminal_gets_plain_lines_without_escape_codes() {
    let p = FakeProvider::start(vec![
        // Slow enough for a spinner to tick if one were drawn.
        Reply::text(DOC).chunk_delay(std::time::Duration::from_millis(40)),
    ]);
    let cmd = BuddyCmd::new().config_for(&p).env("TERM", "dumb");
    let t = Tmux::start(&cmd, &[]);
    t.wait_text("one prompt per line");
    let raw = cmd.work_dir().join("pane-bytes");
    let pipe = format!("cat >> '{}'", raw.display());
    t.tmux_cmd(&["pipe-pane", "-o", "-t", "buddy-test", &pipe]);
    t.line("notes please");
    t.wait_text("See the docs (https://example.com).");
    t.wait_for("the next prompt", |s| {
        s.trim_end().ends_with("(https://example.com).\n>")
    });
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    // tmux has written what the pane got once the pipe's reader sees it.
    let bytes = wait_for_file(&raw, "See the docs");
    assert!(
        !bytes.contains(&0x1b),
        "escape codes for a dumb terminal: {:?}",
        String::from_utf8_lossy(&bytes)
    );
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("| long name |   22 |"), "{text:?}");
}

/// The file's bytes once they contain `marker`.
fn wait_for_file(path: &std::path::Path, marker: &str) -> Vec<u8> {
    let found = support::wait::poll_until(support::tmux::WAIT, || {
        let bytes = std::fs::read(path).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .contains(marker)
            .then_some(bytes)
    });
    found.unwrap_or_else(|| {
        let bytes = std::fs::read(path).unwrap_or_default();
        panic!(
            "{} never held {marker:?}: {:?}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        )
    })
}

#[test]
fn reasoning_is_labelled_so_it_reads_apart_from_the_answer_without_colour() {
    let p = FakeProvider::start(vec![Reply::text("the answer itself")
        .with_reasoning("reasoning_content", "weighing the options\nand deciding")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("think first");
    assert_eq!(
        answer_lines(&t, "think first"),
        [
            "thinking: weighing the options",
            "  and deciding",
            "the answer itself"
        ]
    );
}

#[test]
fn the_token_line_comes_after_the_answer_it_counts() {
    let p = FakeProvider::start(vec![Reply::text("para one\n\npara two ends unfinished")]);
    let cmd = BuddyCmd::new().config(format!(
        "{}\n[display]\nshow_tokens = true\n",
        support::fake_config(&p)
    ));
    let t = repl(&cmd);
    t.line("count");
    let lines = answer_lines(&t, "count");
    assert_eq!(lines[..3], ["para one", "", "para two ends unfinished"]);
    assert!(lines[3].starts_with("tokens: "), "{lines:?}");
}

#[test]
fn cancelling_shows_the_answer_so_far_marked_interrupted_above_the_note() {
    let held = Gate::new();
    let p = FakeProvider::start(vec![Reply::sse(vec![
        start(),
        delta("done line\n\nhalf a line"),
        SseChunk::gate(&held),
        delta(" never shown"),
    ])]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("go");
    t.wait_text("half a line");
    t.keys(&["Escape"]);
    let screen = t.wait_text("task 1 cancelled");
    held.open();
    let lines: Vec<&str> = screen.lines().collect();
    let at = |text: &str| {
        lines
            .iter()
            .position(|l| *l == text)
            .unwrap_or_else(|| panic!("no line {text:?}:\n{screen}"))
    };
    assert_eq!(at("done line") + 2, at("half a line"), "{screen}");
    assert_eq!(at("half a line") + 1, at("[interrupted]"), "{screen}");
    assert!(at("[interrupted]") < at("cancelling task 1…"), "{screen}");
    assert!(
        at("cancelling task 1…") < at("task 1 cancelled"),
        "{screen}"
    );
}

#[test]
fn exec_renders_markdown_on_a_terminal_and_a_pipe_gets_the_exact_text() {
    let p = FakeProvider::start_repeating(vec![Reply::text(DOC)]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = Tmux::start(&cmd, &["exec", "notes please"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    let screen = t.wait_texts(SHOWN);
    let lines: Vec<&str> = screen.lines().collect();
    let from = lines
        .iter()
        .position(|l| *l == SHOWN[0])
        .unwrap_or_else(|| panic!("no rendered heading:\n{screen}"));
    assert_eq!(lines[from..from + SHOWN.len()], *SHOWN, "{screen}");
    // A pipe: the model's text exactly, with one newline at the end.
    let out = cmd.rerun(["exec", "notes please"]);
    out.assert_success();
    assert_eq!(out.stdout, format!("{DOC}\n"));
}

#[test]
fn exec_on_a_terminal_prints_the_token_line_after_the_answer() {
    let p = FakeProvider::start(vec![Reply::text("para one\n\npara two ends unfinished")]);
    let cmd = BuddyCmd::new().config(format!(
        "{}\n[display]\nshow_tokens = true\n",
        support::fake_config(&p)
    ));
    let t = Tmux::start(&cmd, &["exec", "count"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    let screen = t.wait_text("tokens: ");
    let lines: Vec<&str> = screen.lines().collect();
    let from = lines
        .iter()
        .position(|l| *l == "para one")
        .unwrap_or_else(|| panic!("no answer:\n{screen}"));
    assert_eq!(lines[from + 1..from + 3], ["", "para two ends unfinished"]);
    assert!(lines[from + 3].starts_with("tokens: "), "{screen}");
}

#[test]
fn an_answer_that_did_not_stream_is_shown_after_tool_calls_too() {
    // A profile with `stream = false`: the server answers with whole JSON
    // completions, so no text arrives as deltas.
    let p = FakeProvider::start(vec![
        Reply::text(DOC),
        Reply::tool_calls(vec![support::fake_provider::ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({"command": "pwd"}).to_string(),
        )]),
        Reply::text(DOC),
    ]);
    let cmd = BuddyCmd::new().config(format!("{}stream = false\n", support::fake_config(&p)));
    let t = repl(&cmd);
    t.line("notes please");
    assert_eq!(answer_lines(&t, "notes please"), SHOWN);
    assert!(!p.chat_requests()[0].wants_stream());
    // After a (read-only, so unasked) tool call the answer shows as well.
    t.line("again with a tool");
    let lines = answer_lines(&t, "again with a tool");
    let from = lines
        .iter()
        .position(|l| l == SHOWN[0])
        .unwrap_or_else(|| panic!("no answer after the tool call:\n{}", lines.join("\n")));
    assert_eq!(&lines[from..], SHOWN);
}

#[test]
fn the_output_limit_warning_comes_after_the_answers_last_line() {
    // The answer's last line has no newline, so the renderer still holds it
    // when the cut-off warning arrives.
    let p = FakeProvider::start(vec![
        Reply::text("para one\n\nthe last line was cut").with_finish_reason("length")
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("long answer");
    let lines = answer_lines(&t, "long answer");
    assert_eq!(
        lines[..3],
        ["para one", "", "the last line was cut"],
        "{lines:?}"
    );
    assert!(
        lines[3].starts_with("warning: the model stopped at the server's own output limit"),
        "{lines:?}"
    );
}
