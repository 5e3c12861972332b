//! The approval choices as a person meets them, in real tmux against the fake
//! provider: one-key `y`/`n`/`a`/`r`/`e` in the REPL, "always" allowing a
//! command prefix for the rest of the session, "remember" saving it in the
//! user's config for later runs, `/approve` listing and dropping rules,
//! "explain" sending a reason to the model, a file write's diff shown above
//! the question, the same keys in `buddy exec` on a terminal, and read-only
//! command lines running without a question (in the REPL and in `exec`
//! without a terminal). `expr` stands for a command that asks: it prints its
//! argument and is not on the read-only list.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{tool_result, FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::tmux::Tmux;
use support::BuddyCmd;

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

fn messages(req: &RecordedRequest) -> Vec<Value> {
    req.json()["messages"].as_array().expect("messages").clone()
}

/// Starts the REPL and waits for its first prompt.
fn repl(cmd: &BuddyCmd) -> Tmux {
    let t = Tmux::start(cmd, &[]);
    t.wait_for("the prompt", |s| {
        s.lines().any(|l| l.starts_with("> ")) || s.contains("\n>")
    });
    t
}

/// Waits until the input line asks about `command`.
fn wait_question(t: &Tmux, command: &str) {
    let asked = format!("$ {command} -- approve?");
    t.wait_for(&format!("the approval of {command:?}"), |_| {
        t.cursor_line().contains(&asked)
    });
}

#[test]
fn always_approves_later_commands_with_the_prefix_and_others_still_ask() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "expr first-run")]),
        Reply::tool_calls(vec![shell("two", "expr second-run")]),
        Reply::tool_calls(vec![shell("three", "touch never.txt")]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("run some commands");
    wait_question(&t, "expr first-run");
    assert!(
        t.cursor_line().contains("[a]lways `expr` [r]emember"),
        "{}",
        t.screen()
    );
    // One key, no Enter.
    t.keys(&["a"]);
    t.wait_text("approved, and always `expr` from now on: expr first-run");
    t.wait_text("auto-approved (always `expr`): expr second-run");
    wait_question(&t, "touch never.txt");
    t.keys(&["n"]);
    t.wait_text("finished");
    // `/approve` says what "always" allowed, numbered.
    t.line("/approve");
    t.wait_text("1. `expr`, this session");
    let reqs = p.chat_requests();
    assert!(tool_result(&reqs[1], "one").contains("first-run"));
    assert!(tool_result(&reqs[2], "two").contains("second-run"));
    let denied = tool_result(&reqs[3], "three");
    assert!(denied.contains("denied"), "{denied}");
}

#[test]
fn explain_sends_the_typed_reason_to_the_model_and_esc_goes_back() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "expr never-runs")]),
        Reply::text("understood"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("say something");
    wait_question(&t, "expr never-runs");
    t.keys(&["e"]);
    t.wait_for("the reason prompt", |_| {
        t.cursor_line().contains("reason for the model:")
    });
    t.keys(&["Escape"]);
    wait_question(&t, "expr never-runs");
    t.keys(&["e"]);
    t.wait_for("the reason prompt", |_| {
        t.cursor_line().contains("reason for the model:")
    });
    t.line("use printf instead");
    t.wait_text("denied: expr never-runs — reason: use printf instead");
    t.wait_text("understood");
    let result = tool_result(&p.chat_requests()[1], "one");
    assert!(result.contains("use printf instead"), "{result}");
    assert!(!result.contains("never-runs\n"), "{result}");
}

/// `yes` and `no` typed out with Enter answer once, and nothing of them is
/// left in the input or sent as a message.
#[test]
fn yes_and_no_typed_as_words_still_answer() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "expr approved-output")]),
        Reply::tool_calls(vec![shell("two", "expr never-runs")]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("do two things");
    wait_question(&t, "expr approved-output");
    t.line("yes");
    wait_question(&t, "expr never-runs");
    t.line("no");
    t.wait_text("finished");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 3, "a stray message was sent");
    assert!(tool_result(&reqs[1], "one").contains("approved-output"));
    assert!(tool_result(&reqs[2], "two").contains("denied"));
    let users: Vec<Value> = messages(&reqs[2])
        .into_iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    t.wait_for("an empty input line", |_| t.cursor_line().trim_end() == ">");
}

#[test]
fn a_file_write_shows_its_diff_above_the_question() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "w",
            "write_file",
            json!({ "path": "notes.txt", "content": "kept line\nnew line here\n" }).to_string(),
        )]),
        Reply::text("written"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(
        cmd.work_dir().join("notes.txt"),
        "kept line\nold line here\n",
    )
    .expect("seed the file");
    let t = repl(&cmd);
    t.line("edit notes");
    t.wait_for("the write question", |_| {
        t.cursor_line().contains("-- approve? [y]es [n]o [e]xplain")
    });
    let screen = t.screen();
    assert!(screen.contains("-old line here"), "{screen}");
    assert!(screen.contains("+new line here"), "{screen}");
    assert!(screen.contains(" kept line"), "{screen}");
    t.keys(&["y"]);
    t.wait_text("written");
    let text = std::fs::read_to_string(cmd.work_dir().join("notes.txt")).expect("read back");
    assert_eq!(text, "kept line\nnew line here\n");
}

/// `buddy exec` with a terminal (stdin and stdout are the tmux pane) offers
/// the same choices, each answered with one key as in the REPL (no Enter).
#[test]
fn exec_on_a_terminal_answers_with_one_key() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "expr first-run")]),
        Reply::tool_calls(vec![shell("two", "expr second-run")]),
        Reply::tool_calls(vec![shell("three", "expr third && expr more")]),
        Reply::tool_calls(vec![shell("four", "touch made.txt")]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = Tmux::start(&cmd, &["exec", "run some commands"]);
    t.wait_text("$ expr first-run -- approve? [y]es [n]o [a]lways `expr` [e]xplain");
    t.keys(&["a"]);
    t.wait_text("auto-approved (always `expr`): expr second-run");
    // A compound command is asked about, and "always" is not offered for it.
    t.wait_text("$ expr third && expr more -- approve? [y]es [n]o [e]xplain");
    // Not an answer: ignored, the question stays.
    t.keys(&["a", "x"]);
    t.keys(&["e"]);
    t.wait_text("reason for the model:");
    t.line("one command at a time");
    t.wait_text("$ touch made.txt -- approve?");
    t.keys(&["y"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0, "{}", t.screen());
    let reqs = p.chat_requests();
    assert!(tool_result(&reqs[1], "one").contains("first-run"));
    assert!(tool_result(&reqs[2], "two").contains("second-run"));
    let denied = tool_result(&reqs[3], "three");
    assert!(denied.contains("one command at a time"), "{denied}");
    assert!(cmd.work_dir().join("made.txt").exists(), "{}", t.screen());
}

/// Read-only command lines run in `exec` without a terminal (where anything
/// else is denied), each decided `read_only`; lines that write, substitute
/// or delete are still denied and leave the files as they were.
#[test]
fn exec_without_a_terminal_runs_read_only_commands_and_denies_the_rest() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            shell("ls", "ls"),
            shell("wc", "wc -l lines.txt"),
            shell("git", "git status --short"),
        ]),
        Reply::tool_calls(vec![
            shell("redirect", "ls > out.txt"),
            shell("subst", "echo $(rm keep.txt)"),
            shell("delete", "find . -name keep.txt -delete"),
        ]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--json", "look around"]);
    let work = cmd.work_dir();
    std::fs::write(work.join("lines.txt"), "a\nb\nc\n").expect("seed");
    std::fs::write(work.join("keep.txt"), "precious").expect("seed");
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&work)
        .status()
        .expect("git runs");
    assert!(git.success());
    let out = cmd.run_detached();
    out.assert_success();
    let reqs = p.chat_requests();
    assert!(tool_result(&reqs[1], "ls").contains("lines.txt"));
    assert!(tool_result(&reqs[1], "wc").contains("3 lines.txt"));
    assert!(tool_result(&reqs[1], "git").contains("?? keep.txt"));
    for id in ["redirect", "subst", "delete"] {
        let r = tool_result(&reqs[2], id);
        assert!(r.contains("command not run"), "{id}: {r}");
    }
    assert!(!work.join("out.txt").exists());
    assert!(work.join("keep.txt").exists());
    let decided: Vec<(String, String)> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "approval_decided")
        .map(|e| {
            (
                e["command"].as_str().unwrap_or_default().to_string(),
                e["by"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let by = |c: &str| decided.iter().find(|d| d.0 == c).map(|d| d.1.as_str());
    assert_eq!(by("ls"), Some("read_only"), "{decided:?}");
    assert_eq!(by("wc -l lines.txt"), Some("read_only"));
    assert_eq!(by("git status --short"), Some("read_only"));
    assert_eq!(by("ls > out.txt"), Some("no_approver"));
    assert_eq!(by("echo $(rm keep.txt)"), Some("no_approver"));
    assert_eq!(by("find . -name keep.txt -delete"), Some("no_approver"));
}

/// `auto_approve_read_only = false` puts every command back to asking.
#[test]
fn read_only_approval_can_be_switched_off() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("ls", "ls")]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(format!(
            "{}\n[tools]\nauto_approve_read_only = false\n",
            support::fake_config(&p)
        ))
        .args(["exec", "look"]);
    let out = cmd.run_detached();
    out.assert_success();
    let r = tool_result(&p.chat_requests()[1], "ls");
    assert!(r.contains("command not run"), "{r}");
}

/// The REPL runs a read-only line without a question and says so.
#[test]
fn the_repl_runs_read_only_commands_without_asking() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "ls -a | wc -l")]),
        Reply::text("counted"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("count the files");
    t.wait_text("auto-approved (read-only): ls -a | wc -l");
    let screen = t.wait_text("counted");
    assert!(!screen.contains("-- approve?"), "{screen}");
    // It ran: the count of entries came back (`.`, `..`, buddy.toml…).
    let r = tool_result(&p.chat_requests()[1], "one");
    let count = r.lines().last().and_then(|l| l.trim().parse::<u32>().ok());
    assert!(count.is_some_and(|n| n >= 3), "{r}");
}

/// "Remember" saves the rule in the user's own config directory (not the
/// project's `buddy.toml`); a new process honours it with nobody to ask;
/// `/approve` lists it and `/approve remove 1` drops it from the file.
#[test]
fn remember_persists_a_rule_that_a_new_process_honours_and_approve_drops() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "touch first.txt")]),
        Reply::text("touched"),
        Reply::tool_calls(vec![shell("two", "touch second.txt")]),
        Reply::text("touched again"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    let project = std::fs::read_to_string(cmd.work_dir().join("buddy.toml")).ok();
    assert!(project.is_some());
    t.line("make a file");
    wait_question(&t, "touch first.txt");
    t.keys(&["r"]);
    t.wait_text("remembered always `touch` in");
    t.wait_text("touched");
    let rules = cmd.config_home().join("buddy").join("approvals.toml");
    let saved = std::fs::read_to_string(&rules).expect("the rules file");
    assert!(saved.contains("always_allow = [\"touch\"]"), "{saved}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&rules)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // The project file was not touched.
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("buddy.toml")).ok(),
        project
    );
    t.line("/approve");
    t.wait_text("1. `touch`, remembered");

    // Another process, with nobody to ask, runs it by the remembered rule.
    let out = cmd.rerun_detached(["exec", "make another"]);
    out.assert_success();
    assert!(cmd.work_dir().join("second.txt").exists(), "{}", out.stderr);
    assert!(
        out.stderr.contains("auto-approved (always `touch`)"),
        "{}",
        out.stderr
    );

    t.line("/approve remove 1");
    t.wait_text("dropped always `touch` (also from the saved rules)");
    let saved = std::fs::read_to_string(&rules).expect("the rules file");
    assert!(!saved.contains("touch"), "{saved}");
}

/// A remembered `git log` never covers `--output`, `--ext-diff` or `-c`:
/// with nobody to ask, those are denied and write nothing.
#[test]
fn a_remembered_rule_does_not_cover_options_that_write_or_run() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            shell("out", "git log --output=pwned.txt -n 1"),
            shell("ext", "git log --ext-diff -p -n 1"),
            shell("cfg", "git -c core.pager=cat log -n 1"),
        ]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--json", "show history"]);
    let dir = cmd.config_home().join("buddy");
    std::fs::create_dir_all(&dir).expect("config dir");
    std::fs::write(dir.join("approvals.toml"), "always_allow = [\"git log\"]\n").expect("rules");
    let work = cmd.work_dir();
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "one",
        ][..],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(&work)
            .status()
            .expect("git runs");
        assert!(ok.success());
    }
    let out = cmd.run_detached();
    out.assert_success();
    let reqs = p.chat_requests();
    for id in ["out", "ext", "cfg"] {
        let r = tool_result(&reqs[1], id);
        assert!(r.contains("command not run"), "{id}: {r}");
    }
    assert!(!work.join("pwned.txt").exists());
    assert!(
        !out.stdout.contains("\"by\":\"allow_list\""),
        "{}",
        out.stdout
    );
}
