//! End-to-end tests of tmux-backed execution on this host: the real binary, a
//! real tmux server private to each test (`TMUX_TMPDIR`), and the scripted fake
//! provider. They check what the tools returned to the model (the requests the
//! fake recorded) and what the shared pane shows.

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::calls::{call, config_no_confirm, result_of};
use support::fake_provider::{FakeProvider, Reply};
use support::tmux::Tmux;
use support::BuddyCmd;

/// What the managed pane shows (with its scrollback).
fn pane_text(cmd: &BuddyCmd, session: &str) -> String {
    let out = cmd.tmux(&[
        "capture-pane",
        "-p",
        "-J",
        "-S",
        "-",
        "-t",
        &format!("={session}:buddy-shared"),
    ]);
    assert!(
        out.status.success(),
        "no managed pane {session}:buddy-shared: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one session on buddy's private tmux server (its name comes from the
/// working directory's path).
fn only_session(cmd: &BuddyCmd) -> String {
    let out = cmd.tmux(&["list-sessions", "-F", "#{session_name}"]);
    let names = String::from_utf8_lossy(&out.stdout).into_owned();
    let names: Vec<&str> = names.lines().collect();
    assert_eq!(names.len(), 1, "sessions: {names:?}");
    names[0].to_string()
}

/// Fails when the pane shows any of buddy's plumbing rather than just the
/// commands, their output and failing statuses.
fn assert_no_plumbing(pane: &str) {
    for word in [
        "trap",
        "tee ",
        "wait-for",
        "buddy-tmux.",
        "exec tee",
        "3>&1",
    ] {
        assert!(!pane.contains(word), "the pane shows {word:?}:\n{pane}");
    }
}

#[test]
fn run_shell_in_the_pane_returns_exact_output_and_exit_code() {
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "printf 'out line\\n'; printf 'err line\\n' >&2; exit 3"}),
        ),
        // A tab, `!` and a second line: sourced from a file, not typed.
        call(
            "b",
            "run_shell",
            json!({"command": "printf 'x\\ty!\\n'\necho second-line"}),
        ),
        call(
            "c",
            "run_shell",
            json!({"command": "sh -c 'kill -TERM $$'"}),
        ),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--tmux", "go"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let session = only_session(&cmd);
    assert!(session.starts_with("buddy-work-"), "{session}");
    assert!(
        out.stderr.contains(&format!(
            "tmux session {session} (window buddy-shared) in {}; watch with: tmux attach -t {session}",
            cmd.work_dir().display()
        )),
        "attach instructions missing: {}",
        out.stderr
    );
    let reqs = p.chat_requests();
    assert_eq!(
        result_of(&reqs, "a"),
        "exit code: 3\nstdout:\nout line\nstderr:\nerr line"
    );
    assert_eq!(
        result_of(&reqs, "b"),
        "exit code: 0\nstdout:\nx\ty!\nsecond-line"
    );
    assert!(
        result_of(&reqs, "c").starts_with("exit code: 143"),
        "{}",
        result_of(&reqs, "c")
    );
    // A person attached saw each command, its output and failing statuses,
    // and none of the plumbing that runs them.
    let pane = pane_text(&cmd, &session);
    // (stdout and stderr reach the screen through two tees, in either order)
    let first = pane
        .split("$ printf 'out line\\n'; printf 'err line\\n' >&2; exit 3\n")
        .nth(1)
        .unwrap_or_else(|| panic!("first command not shown: {pane}"));
    let first = first.split("$ ").next().unwrap_or_default();
    assert!(
        first.contains("out line\n")
            && first.contains("err line\n")
            && first.ends_with("[exit 3]\n"),
        "{pane}"
    );
    assert!(
        pane.contains("$ printf 'x\\ty!\\n'\n> echo second-line\n"),
        "{pane}"
    );
    assert!(!pane.contains("[exit 0]"), "{pane}");
    assert!(pane.contains("[exit 143]"), "{pane}");
    assert_no_plumbing(&pane);
    // The tool descriptions offered the pane tools and the wait modes.
    let tools = reqs[0].json()["tools"].to_string();
    assert!(tools.contains("capture-pane") && tools.contains("send-keys"));
    assert!(tools.contains("\"wait\""));
}

#[test]
fn wait_false_then_capture_pane_and_send_keys_drive_a_program() {
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "echo step-one; read answer; echo \"got $answer\"", "wait": false}),
        ),
        call("b", "capture-pane", json!({"delay": "1s"})),
        call("c", "send-keys", json!({"text": "hello", "enter": true})),
        call(
            "d",
            "capture-pane",
            json!({"delay": "1s", "join_wrapped": true}),
        ),
        call("e", "run_shell", json!({"command": "echo pane-free"})),
        call("f", "capture-pane", json!({"alternate_screen": true})),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--tmux", "go"]);
    cmd.run().assert_success();
    let reqs = p.chat_requests();
    let a = result_of(&reqs, "a");
    assert!(a.starts_with("started in tmux pane"), "{a}");
    assert!(a.contains("capture-pane"), "says how to follow up: {a}");
    let b = result_of(&reqs, "b");
    assert!(b.contains("step-one") && !b.contains("got hello"), "{b}");
    assert!(result_of(&reqs, "c").contains("sent to pane"));
    let d = result_of(&reqs, "d");
    assert!(d.contains("got hello"), "{d}");
    assert_eq!(result_of(&reqs, "e"), "exit code: 0\nstdout:\npane-free");
    let f = result_of(&reqs, "f");
    assert!(
        f.starts_with("note: the pane is not showing an alternate screen"),
        "{f}"
    );
}

#[test]
fn a_duration_wait_expires_a_busy_pane_refuses_and_ctrl_c_stops_it() {
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "echo partial-output; sleep 31.25; echo never", "wait": "1s"}),
        ),
        call("b", "run_shell", json!({"command": "echo should-not-run"})),
        call("c", "send-keys", json!({"keys": ["C-c"]})),
        call(
            "d",
            "run_shell",
            json!({"command": "pgrep -fx 'sleep 31.25' || echo no-sleep-left"}),
        ),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--tmux", "go"]);
    let started = Instant::now();
    cmd.run().assert_success();
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the sleep was not stopped"
    );
    let reqs = p.chat_requests();
    let a = result_of(&reqs, "a");
    assert!(a.starts_with("still running after 1 s"), "{a}");
    assert!(a.contains("partial-output") && !a.contains("never"), "{a}");
    let b = result_of(&reqs, "b");
    assert!(
        b.contains("still running") && b.contains("sleep 31.25"),
        "{b}"
    );
    let pane = pane_text(&cmd, &only_session(&cmd));
    assert!(!pane.contains("should-not-run\n"), "{pane}");
    assert_eq!(
        result_of(&reqs, "d"),
        "exit code: 0\nstdout:\nno-sleep-left"
    );
}

#[test]
fn the_tool_timeout_interrupts_the_command() {
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "echo begun; sleep 40", "timeout": 1}),
        ),
        call("b", "run_shell", json!({"command": "echo next"})),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--tmux", "go"]);
    cmd.run().assert_success();
    let reqs = p.chat_requests();
    let a = result_of(&reqs, "a");
    assert!(
        a.starts_with("timed out after 1 s; interrupted with Ctrl-C\nexit code: 130"),
        "{a}"
    );
    assert!(a.contains("begun"), "{a}");
    assert_eq!(result_of(&reqs, "b"), "exit code: 0\nstdout:\nnext");
}

#[test]
fn a_named_session_is_reused_and_exec_alone_starts_no_tmux() {
    let p = FakeProvider::start_repeating(vec![
        call("a", "run_shell", json!({"command": "echo via-$((40+2))"})),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "go"]);
    // Plain exec runs commands directly: no tmux server is started.
    cmd.run().assert_success();
    assert!(
        !cmd.tmux(&["list-sessions"]).status.success(),
        "exec without --tmux started tmux"
    );
    assert!(result_of(&p.chat_requests(), "a").contains("via-42"));
    // --tmux NAME creates that session; a second run reuses it.
    for _ in 0..2 {
        let out = cmd.rerun(["exec", "--tmux=mywork", "go"]);
        out.assert_success();
        assert!(
            out.stderr.contains("tmux attach -t mywork"),
            "{}",
            out.stderr
        );
    }
    let sessions = cmd.tmux(&["list-sessions", "-F", "#{session_name}"]);
    assert_eq!(String::from_utf8_lossy(&sessions.stdout), "mywork\n");
    let windows = cmd.tmux(&["list-windows", "-t", "=mywork", "-F", "#{window_name}"]);
    assert_eq!(String::from_utf8_lossy(&windows.stdout), "buddy-shared\n");
    let pane = pane_text(&cmd, "mywork");
    assert_eq!(pane.matches("via-42").count(), 2, "{pane}");
    // A name tmux would misread is refused up front.
    let bad = cmd.rerun(["exec", "--tmux=a:b", "go"]);
    bad.assert_code(2);
    assert!(
        bad.stderr.contains("invalid tmux session name"),
        "{}",
        bad.stderr
    );
}

#[test]
fn starting_inside_the_managed_pane_is_refused() {
    let p = FakeProvider::start(vec![Reply::text("never asked")]);
    let cmd = BuddyCmd::new().config(config_no_confirm(&p, ""));
    // buddy's own pane is the managed one: session buddy-work, window buddy-shared.
    let t = Tmux::start_in(
        &cmd,
        &["exec", "--tmux=buddy-work", "hello"],
        "buddy-work",
        Some("buddy-shared"),
    );
    assert_eq!(t.wait_exit(&cmd.work_dir()), 2);
    t.wait_text("inside its own managed tmux pane");
    assert_eq!(p.chat_requests().len(), 0);
}

#[test]
fn huge_output_in_the_pane_is_cut_with_a_marker() {
    // ~5.9 MB through the pane; the result keeps the head and the tail.
    let p = FakeProvider::start(vec![
        call("a", "run_shell", json!({"command": "seq 1 800000"})),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--tmux", "go"])
        .timeout(std::time::Duration::from_secs(120));
    let out = cmd.run();
    out.assert_success();
    let a = result_of(&p.chat_requests(), "a");
    assert!(
        a.starts_with("exit code: 0\nstdout:\n1\n2\n3\n"),
        "{}",
        &a[..200]
    );
    assert!(a.contains("characters omitted"), "no truncation marker");
    assert!(
        a.contains("799999\n800000\n[output truncated: kept "),
        "tail lost: {}",
        &a[a.len() - 300..]
    );
    assert!(a.len() < 100_000, "result not bounded: {} bytes", a.len());
}

#[test]
fn capture_pane_reads_scrollback_ranges_and_other_panes() {
    // A second pane for the model to drive by name.
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "seq 1 300 | sed 's/^/row-/'"}),
        ),
        call("b", "capture-pane", json!({"start": "-", "end": 5})),
        call("c", "capture-pane", json!({})),
        call(
            "d",
            "run_shell",
            json!({"command": "tmux new-window -d -n side -t buddy-work 'echo side-ready; cat'"}),
        ),
        call(
            "e",
            "send-keys",
            json!({"text": "typed-into-side", "enter": true, "pane": "buddy-work:side"}),
        ),
        call(
            "f",
            "capture-pane",
            json!({"pane": "buddy-work:side", "delay": "1s"}),
        ),
        call("g", "capture-pane", json!({"pane": "nosuch:pane"})),
        Reply::text("done"),
    ]);
    // Named, so the model's commands can address the session.
    let cmd =
        BuddyCmd::new()
            .config(config_no_confirm(&p, ""))
            .args(["exec", "--tmux=buddy-work", "go"]);
    cmd.run().assert_success();
    let reqs = p.chat_requests();
    // From the start of history: the first rows, long scrolled off the screen.
    let b = result_of(&reqs, "b");
    assert!(b.contains("row-1\n") && b.contains("row-2\n"), "{b}");
    assert!(!b.contains("row-300"), "{b}");
    // The visible screen by default: the last rows, not the first.
    let c = result_of(&reqs, "c");
    assert!(c.contains("row-300") && !c.contains("row-1\n"), "{c}");
    let f = result_of(&reqs, "f");
    assert!(
        f.contains("side-ready") && f.contains("typed-into-side"),
        "{f}"
    );
    // cat echoed the typed line back: the keys reached the named pane.
    assert_eq!(f.matches("typed-into-side").count(), 2, "{f}");
    let g = result_of(&reqs, "g");
    assert!(g.to_lowercase().contains("nosuch"), "{g}");
}
