//! The REPL's input features, end to end in a real tmux pane against the fake
//! provider: the completion menu (slash commands, `@path`), file mentions
//! reaching the model, `!command`, Ctrl-R and multi-line entry.

use crate::support;

use support::fake_provider::{FakeProvider, RecordedRequest, Reply};
use support::tmux::Tmux;
use support::BuddyCmd;

fn user_messages(req: &RecordedRequest) -> Vec<String> {
    req.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(String::from))
        .collect()
}

fn last_user(req: &RecordedRequest) -> String {
    user_messages(req).pop().unwrap_or_default()
}

fn repl(cmd: &BuddyCmd) -> Tmux {
    let t = Tmux::start(cmd, &[]);
    t.wait_for("the prompt", |s| {
        s.lines().any(|l| l.starts_with("> ")) || s.contains("\n>")
    });
    t
}

#[test]
fn slash_opens_a_menu_that_filters_and_runs_the_picked_command() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd);
    t.type_text("/");
    t.wait_texts(&["› /help", "/status", "estimated context use"]);
    t.type_text("s");
    t.wait_for("the filtered menu", |s| {
        s.contains("› /status") && s.contains("/session") && !s.contains("list the commands")
    });
    t.keys(&["Down"]);
    t.wait_text("› /session");
    t.keys(&["Enter"]);
    // `/session` lists this directory's sessions (there are none).
    let screen = t.wait_text("no saved sessions");
    assert!(!screen.contains("› /"), "the menu closed: {screen}");
    // Esc closes the menu and leaves the text.
    t.type_text("/st");
    t.wait_text("› /status");
    t.keys(&["Escape"]);
    t.wait_for("the menu to close", |s| !s.contains("› /status"));
    assert_eq!(t.cursor_line(), "> /status");
}

#[test]
fn at_completes_paths_and_the_model_gets_the_file_while_the_echo_stays() {
    let p = FakeProvider::start(vec![Reply::text("read it")]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::create_dir_all(cmd.work_dir().join("notes")).expect("mkdir");
    std::fs::write(
        cmd.work_dir().join("notes/todo-list.txt"),
        "the secret word is pelican\n",
    )
    .expect("write");
    let t = repl(&cmd);
    t.type_text("summarise @no");
    t.wait_text("› @notes/");
    t.keys(&["Tab"]);
    t.wait_text("› @notes/todo-list.txt");
    t.keys(&["Tab"]);
    t.wait_for("the completed path", |_| {
        t.cursor_line() == "> summarise @notes/todo-list.txt"
    });
    t.type_text("and @missing.txt");
    t.keys(&["Enter"]);
    let screen = t.wait_text("read it");
    assert!(
        screen.contains("> summarise @notes/todo-list.txt and @missing.txt"),
        "{screen}"
    );
    assert!(!screen.contains("pelican"), "{screen}");
    assert!(screen.contains("@missing.txt: no such file"), "{screen}");
    let req = &p.chat_requests()[0];
    let users = user_messages(req);
    assert!(
        users
            .iter()
            .any(|m| m.contains("the secret word is pelican") && m.contains("notes/todo-list.txt")),
        "{users:?}"
    );
    assert_eq!(
        last_user(req),
        "summarise @notes/todo-list.txt and @missing.txt"
    );
}

#[test]
fn bang_runs_a_command_and_the_next_request_carries_it() {
    let p = FakeProvider::start(vec![Reply::text("I saw it")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("!echo hi-from-bang");
    t.wait_for("the output", |s| s.lines().any(|l| l == "hi-from-bang"));
    assert!(p.chat_requests().is_empty(), "a ! command asks no model");
    t.line("what did I run?");
    t.wait_text("I saw it");
    let users = user_messages(&p.chat_requests()[0]);
    assert!(
        users
            .iter()
            .any(|m| m.contains("$ echo hi-from-bang") && m.contains("hi-from-bang\n")),
        "{users:?}"
    );
    assert_eq!(users.last().map(String::as_str), Some("what did I run?"));
}

#[test]
fn a_failing_bang_command_shows_its_exit_status() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd);
    t.line("!echo about-to-fail; exit 3");
    let screen = t.wait_text("exit status 3");
    assert!(screen.lines().any(|l| l == "about-to-fail"), "{screen}");
    t.line("!false");
    t.wait_text("exit status 1");
}

#[test]
fn a_resumed_session_replays_bang_and_mentions_as_typed() {
    let p = FakeProvider::start(vec![Reply::text("it prints a bird"), Reply::text("again")]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(cmd.work_dir().join("main.py"), "print('pelican')\n").expect("write");
    let t = repl(&cmd);
    t.line("!echo bang-output-xyz");
    t.wait_for("the output", |s| s.lines().any(|l| l == "bang-output-xyz"));
    t.line("explain @main.py now");
    t.wait_text("it prints a bird");
    t.line("/quit");
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    drop(t);

    let t = Tmux::start(&cmd, &["resume", "--last"]);
    let screen = t.wait_text("it prints a bird");
    let lines: Vec<&str> = screen.lines().collect();
    let bang = lines
        .iter()
        .position(|l| *l == "> !echo bang-output-xyz")
        .unwrap_or_else(|| panic!("no replayed ! command:\n{screen}"));
    assert_eq!(lines[bang + 1], "(exit status 0)", "{screen}");
    assert_eq!(lines[bang + 2], "> explain @main.py now", "{screen}");
    assert_eq!(lines[bang + 3], "it prints a bird", "{screen}");
    for internal in [
        "I ran this command myself",
        "Files I mention",
        "pelican",
        "earlier message",
    ] {
        assert!(!screen.contains(internal), "{internal}:\n{screen}");
    }
    // The model still gets everything it got before.
    t.line("once more");
    t.wait_text("again");
    let users = user_messages(&p.chat_requests()[1]);
    assert_eq!(users.len(), 4, "{users:?}");
    assert!(users[0].contains("$ echo bang-output-xyz"), "{users:?}");
    assert!(users[1].contains("print('pelican')"), "{users:?}");
    assert_eq!(users[2..], ["explain @main.py now", "once more"]);
    let before = p.chat_requests()[0].json()["messages"].clone();
    let after = p.chat_requests()[1].json()["messages"].clone();
    assert_eq!(
        before.as_array().expect("messages")[1..],
        after.as_array().expect("messages")[1..4],
        "the resumed history is the one sent before"
    );
    let body = after.to_string();
    assert!(!body.contains("buddy_shown"), "{body}");
}

#[test]
fn ctrl_l_clears_the_screen_and_clear_also_starts_afresh() {
    let p = FakeProvider::start(vec![
        Reply::text("first answer"),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("hello");
    t.wait_text("first answer");
    t.type_text("kept input");
    t.keys(&["C-l"]);
    let screen = t.wait_for("a cleared screen", |s| !s.contains("first answer"));
    assert_eq!(
        screen.lines().next(),
        Some("> kept input"),
        "the input on top:\n{screen}"
    );
    // Only the screen: the conversation goes on.
    t.keys(&["Enter"]);
    t.wait_text("second answer");
    t.wait_idle();
    assert_eq!(
        user_messages(&p.chat_requests()[1]),
        ["hello", "kept input"]
    );
    t.line("/clear");
    let screen = t.wait_for("a cleared screen and a new session", |s| {
        !s.contains("second answer") && s.contains("new session")
    });
    assert!(!screen.contains("kept input"), "{screen}");
    t.line("fresh");
    t.wait_text("third answer");
    assert_eq!(user_messages(&p.chat_requests()[2]), ["fresh"]);
}

#[test]
fn ctrl_r_finds_an_older_prompt_and_enter_sends_it() {
    let p = FakeProvider::start_repeating(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.line("alpha prompt one");
    t.wait_text("ok");
    t.line("beta prompt two");
    t.wait_for("two answers", |s| s.matches("\nok").count() >= 2);
    t.keys(&["C-r"]);
    t.type_text("prompt");
    t.wait_for("the newest match", |_| {
        t.cursor_line() == "(reverse-i-search)'prompt': beta prompt two"
    });
    t.keys(&["C-r"]);
    t.wait_for("the older match", |_| {
        t.cursor_line() == "(reverse-i-search)'prompt': alpha prompt one"
    });
    t.keys(&["Enter"]);
    t.wait_for("three answers", |s| s.matches("\nok").count() >= 3);
    assert_eq!(last_user(&p.chat_requests()[2]), "alpha prompt one");
    // Esc gives back what was typed before the search.
    t.type_text("draft");
    t.keys(&["C-r"]);
    t.type_text("beta");
    t.wait_for("a match", |_| t.cursor_line().contains("beta prompt two"));
    t.keys(&["Escape"]);
    t.wait_for("the draft back", |_| t.cursor_line() == "> draft");
}

#[test]
fn ctrl_j_and_a_trailing_backslash_continue_the_prompt() {
    let p = FakeProvider::start(vec![Reply::text("three lines")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd);
    t.type_text("line one");
    t.keys(&["C-j"]);
    t.type_text("line two\\");
    t.keys(&["Enter"]);
    t.type_text("line three");
    t.wait_text("  line three");
    assert!(p.chat_requests().is_empty(), "nothing was sent yet");
    t.keys(&["Enter"]);
    t.wait_text("three lines");
    assert_eq!(
        last_user(&p.chat_requests()[0]),
        "line one\nline two\nline three"
    );
}
