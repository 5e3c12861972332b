//! The approval choices as a person meets them, in real tmux against the fake
//! provider: one-key `y`/`n`/`a`/`e` in the REPL, "always" allowing a command
//! prefix for the rest of the session, "explain" sending a reason to the
//! model, a file write's diff shown above the question, and the same
//! choices in `buddy exec` on a terminal.

mod support;

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
        Reply::tool_calls(vec![shell("one", "echo first-run")]),
        Reply::tool_calls(vec![shell("two", "echo second-run")]),
        Reply::tool_calls(vec![shell("three", "ls -d /")]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("run some commands");
    wait_question(&t, "echo first-run");
    assert!(
        t.cursor_line().contains("[a]lways `echo`"),
        "{}",
        t.screen()
    );
    // One key, no Enter.
    t.keys(&["a"]);
    t.wait_text("approved, and always `echo` from now on: echo first-run");
    t.wait_text("auto-approved (always `echo`): echo second-run");
    wait_question(&t, "ls -d /");
    t.keys(&["n"]);
    t.wait_text("finished");
    // `/approve` says what "always" allowed.
    t.line("/approve");
    t.wait_text("approval: ask before each shell command; always allowed: `echo`");
    let reqs = p.chat_requests();
    assert!(tool_result(&reqs[1], "one").contains("first-run"));
    assert!(tool_result(&reqs[2], "two").contains("second-run"));
    let denied = tool_result(&reqs[3], "three");
    assert!(denied.contains("denied"), "{denied}");
}

#[test]
fn explain_sends_the_typed_reason_to_the_model_and_esc_goes_back() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "echo never-runs")]),
        Reply::text("understood"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("say something");
    wait_question(&t, "echo never-runs");
    t.keys(&["e"]);
    t.wait_for("the reason prompt", |_| {
        t.cursor_line().contains("reason for the model:")
    });
    t.keys(&["Escape"]);
    wait_question(&t, "echo never-runs");
    t.keys(&["e"]);
    t.wait_for("the reason prompt", |_| {
        t.cursor_line().contains("reason for the model:")
    });
    t.line("use printf instead");
    t.wait_text("denied: echo never-runs — reason: use printf instead");
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
        Reply::tool_calls(vec![shell("one", "echo approved-output")]),
        Reply::tool_calls(vec![shell("two", "echo never-runs")]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("do two things");
    wait_question(&t, "echo approved-output");
    t.line("yes");
    wait_question(&t, "echo never-runs");
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
/// the same choices, a line each.
#[test]
fn exec_on_a_terminal_offers_always_and_explain() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "echo first-run")]),
        Reply::tool_calls(vec![shell("two", "echo second-run")]),
        Reply::tool_calls(vec![shell("three", "echo third && echo more")]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = Tmux::start(&cmd, &["exec", "run some commands"]);
    t.wait_text("$ echo first-run -- approve? [y]es [n]o [a]lways `echo` [e]xplain");
    t.line("a");
    t.wait_text("auto-approved (always `echo`): echo second-run");
    // A compound command is asked about, and "always" is not offered for it.
    t.wait_text("$ echo third && echo more -- approve? [y]es [n]o [e]xplain");
    t.line("e");
    t.wait_text("reason for the model:");
    t.line("one command at a time");
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0, "{}", t.screen());
    let reqs = p.chat_requests();
    assert!(tool_result(&reqs[1], "one").contains("first-run"));
    assert!(tool_result(&reqs[2], "two").contains("second-run"));
    let denied = tool_result(&reqs[3], "three");
    assert!(denied.contains("one command at a time"), "{denied}");
}
