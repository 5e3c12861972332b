//! Live output of running commands: the REPL (in a real tmux pane, with
//! commands in the managed tmux pane and run directly) and `exec` on a
//! terminal show a command's latest lines while it runs and nothing of them
//! once its result is in; `exec --json` carries them as bounded,
//! rate-limited, redacted `tool_progress` events.

use crate::support;

use serde_json::{json, Value};
use std::time::Instant;
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::tmux::Tmux;
use support::{fake_config, BuddyCmd};

/// Prints a line a second; its last line (`done-2`) differs from the command
/// text, so seeing it on screen means the command finished.
const COUNT: &str = "for i in 1 2 3; do echo step$i; sleep 1; done; echo done-$((1+1))";

fn shell(id: &str, command: &str) -> Reply {
    Reply::tool_calls(vec![ToolCallSpec::new(
        id,
        "run_shell",
        json!({ "command": command }).to_string(),
    )])
}

fn no_confirm(p: &FakeProvider) -> String {
    format!("{}\n[tools]\nshell_confirm = false\n", fake_config(p))
}

/// The REPL shows the command's first line under its call while it runs,
/// then the result in its place, with no live line left behind.
fn repl_shows_live_output(args: &[&str]) {
    let p = FakeProvider::start(vec![shell("c1", COUNT), Reply::text("counted to three")]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = Tmux::start(&cmd, args);
    t.wait_for("the prompt", |s| {
        s.lines().any(|l| l.starts_with("> ")) || s.contains("\n>")
    });
    t.line("count");
    let running = t.wait_for("step1 live under the call", |s| {
        s.lines().any(|l| l.trim_end() == "  │ step1")
    });
    assert!(!running.contains("done-2"), "finished already:\n{running}");
    let lines: Vec<&str> = running.lines().collect();
    let call = lines
        .iter()
        .position(|l| l.starts_with("▶ $ for i in 1 2 3"))
        .unwrap_or_else(|| panic!("no call line:\n{running}"));
    let live = lines
        .iter()
        .position(|l| l.trim_end() == "  │ step1")
        .unwrap_or_default();
    assert!(live > call, "live output above the call:\n{running}");
    t.wait_for("step2 live", |s| {
        s.lines().any(|l| l.trim_end() == "  │ step2")
    });
    let done = t.wait_text("counted to three");
    assert!(done.contains("  ← step1"), "no result shown:\n{done}");
    assert!(done.contains("    done-2"), "no result shown:\n{done}");
    assert!(
        !done.lines().any(|l| l.starts_with("  │ ")),
        "live output left behind:\n{done}"
    );
}

#[test]
fn repl_shows_a_running_commands_output_in_the_tmux_pane_mode() {
    repl_shows_live_output(&[]);
}

#[test]
fn repl_shows_a_running_commands_output_when_run_directly() {
    repl_shows_live_output(&["--no-tmux"]);
}

#[test]
fn exec_on_a_terminal_shows_the_latest_line_by_the_spinner_and_clears_it() {
    let p = FakeProvider::start(vec![shell("c1", COUNT), Reply::text("counted to three")]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = Tmux::start(&cmd, &["exec", "count"]);
    let running = t.wait_for("the spinner with step1", |s| {
        s.lines()
            .any(|l| l.contains("running run_shell") && l.trim_end().ends_with("· step1"))
    });
    assert!(!running.contains("done-2"), "finished already:\n{running}");
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    let screen = t.wait_text("counted to three");
    assert!(
        !screen.contains("running run_shell") && !screen.contains("· step"),
        "the spinner line was left behind:\n{screen}"
    );
}

#[test]
fn exec_in_a_pipe_prints_no_live_output() {
    let p = FakeProvider::start(vec![shell("c1", COUNT), Reply::text("counted")]);
    let out = BuddyCmd::new()
        .config(no_confirm(&p))
        .args(["exec", "count"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "counted\n");
    // The result shows step1 once; nothing was drawn over and cleared.
    assert_eq!(out.stderr.matches("step1").count(), 1, "{}", out.stderr);
    assert!(
        !out.stderr.contains('\r') && !out.stderr.contains('\x1b'),
        "{:?}",
        out.stderr
    );
}

/// The `tool_progress` events of an `exec --json` run, and how long it took.
fn progress_of(cmd: BuddyCmd) -> (Vec<Value>, f64, String) {
    let started = Instant::now();
    let out = cmd.args(["exec", "--json", "go"]).run();
    let secs = started.elapsed().as_secs_f64();
    out.assert_success();
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let progress = events
        .iter()
        .filter(|e| e["type"] == "tool_progress")
        .cloned()
        .collect();
    (progress, secs, out.stdout)
}

#[test]
fn a_flood_of_output_gives_few_small_progress_events() {
    // 50 MB of 3,000-character lines, then a pause so the end is seen.
    let flood =
        "yes \"$(head -c 3000 /dev/zero | tr '\\0' x)\" | head -c 50000000; echo; echo tail-end";
    let p = FakeProvider::start(vec![shell("f1", flood), Reply::text("flooded")]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let (progress, secs, stdout) = progress_of(cmd);
    assert!(!progress.is_empty(), "no progress events:\n{stdout}");
    // At most one per 150 ms, with room for the first and timer jitter.
    let bound = (secs / 0.1) as usize + 2;
    assert!(
        progress.len() <= bound,
        "{} progress events in {secs:.1} s",
        progress.len()
    );
    for ev in &progress {
        assert_eq!(ev["call_id"], "f1");
        let tail = ev["tail"].as_str().expect("tail");
        assert!(tail.lines().count() <= 5, "{tail}");
        assert!(tail.lines().all(|l| l.chars().count() <= 201), "{tail}");
        assert!(ev.to_string().len() <= 8 * 1024, "{}", ev.to_string().len());
    }
    // The whole output still reached the result, measured.
    let result = stdout
        .lines()
        .find(|l| l.contains("\"tool_result\""))
        .expect("a tool_result");
    assert!(result.contains("\"total\":500"), "{result}");
}

#[test]
fn a_secret_in_live_output_is_redacted() {
    const KEY: &str = "sk-live-output-secret-0123456789";
    let command = "cat leak.txt; sleep 1; echo after";
    let p = FakeProvider::start(vec![shell("s1", command), Reply::text("read it")]);
    let cfg = no_confirm(&p).replace("sk-fake", KEY);
    let cmd = BuddyCmd::new().config(cfg);
    std::fs::write(cmd.work_dir().join("leak.txt"), format!("token={KEY}\n")).unwrap();
    let (progress, _, stdout) = progress_of(cmd);
    assert!(!stdout.contains(KEY), "{stdout}");
    assert!(
        progress.iter().any(|e| e["tail"]
            .as_str()
            .unwrap_or("")
            .contains("token=[REDACTED]")),
        "no redacted progress: {progress:?}"
    );
}
