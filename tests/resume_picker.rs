//! End-to-end tests of `buddy resume` without an id on a terminal: the session
//! picker and the replay of the chosen conversation, in a real tmux pane
//! (its own server per test) against the fake provider.

use crate::support;

use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply};
use support::tmux::Tmux;
use support::BuddyCmd;

fn sessions_dir(cmd: &BuddyCmd) -> PathBuf {
    cmd.work_dir().join(".buddyx/sessions")
}

/// The id of the session file whose text contains `needle`.
fn session_with(cmd: &BuddyCmd, needle: &str) -> (String, PathBuf) {
    let path = fs::read_dir(sessions_dir(cmd))
        .expect("the session directory")
        .flatten()
        .map(|e| e.path())
        .find(|p| fs::read_to_string(p).unwrap_or_default().contains(needle))
        .unwrap_or_else(|| panic!("no session mentions {needle}"));
    let id = path.file_stem().unwrap().to_str().unwrap().to_string();
    (id, path)
}

fn set_mtime(path: &Path, secs_ago: u64) {
    let f = fs::File::options().append(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
        .unwrap();
}

/// Saves one session per prompt with `buddy exec`, each `ages[i]` seconds
/// old; returns their ids in the same order.
fn exec_sessions(cmd: &BuddyCmd, prompts: &[&str], ages: &[u64]) -> Vec<String> {
    prompts
        .iter()
        .zip(ages)
        .map(|(prompt, age)| {
            cmd.rerun(["exec", prompt]).assert_success();
            let (id, path) = session_with(cmd, prompt);
            set_mtime(&path, *age);
            id
        })
        .collect()
}

fn user_texts(req: &RecordedRequest) -> Vec<String> {
    req.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .skip(1)
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The pane's whole history, scrollback included.
fn scrollback(t: &Tmux) -> String {
    t.tmux_cmd(&["capture-pane", "-p", "-S", "-", "-t", "buddy-test"])
}

fn position(screen: &str, text: &str) -> usize {
    screen
        .find(text)
        .unwrap_or_else(|| panic!("{text:?} is not on the screen:\n{screen}"))
}

#[test]
fn the_picker_lists_sessions_newest_first_and_enter_resumes_the_chosen_one() {
    let p = FakeProvider::start(vec![
        Reply::text("the alpha answer"),
        Reply::text("the beta answer"),
        Reply::text("the gamma answer"),
        Reply::text("continued after beta"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let ids = exec_sessions(
        &cmd,
        &[
            "alpha: plan the trip",
            "beta: fix the bike",
            "gamma: bake bread",
        ],
        &[3 * 86_400 + 60, 2 * 3_600 + 60, 5 * 60 + 10],
    );
    let t = Tmux::start(&cmd, &["resume"]);
    let screen = t.wait_texts(&[
        "3 saved, newest first",
        "gamma: bake bread",
        "beta: fix the bike",
        "alpha: plan the trip",
        "3 days ago",
    ]);
    let (gamma, beta, alpha) = (
        position(&screen, "gamma: bake bread"),
        position(&screen, "beta: fix the bike"),
        position(&screen, "alpha: plan the trip"),
    );
    assert!(gamma < beta && beta < alpha, "{screen}");
    for age in ["5 min ago", "2 hours ago", "3 days ago"] {
        assert!(screen.contains(age), "{age}: {screen}");
    }
    let first_row = screen.lines().find(|l| l.starts_with('›')).unwrap();
    assert!(first_row.contains("gamma"), "{screen}");
    assert!(first_row.contains("2 msgs"), "{screen}");

    t.keys(&["Down", "Enter"]);
    let screen = t.wait_texts(&[
        &format!("resumed session {}", ids[1]),
        "> beta: fix the bike",
        "the beta answer",
    ]);
    // The chosen conversation, replayed as the REPL showed it.
    let lines: Vec<&str> = screen.lines().collect();
    let asked = lines
        .iter()
        .position(|l| *l == "> beta: fix the bike")
        .unwrap_or_else(|| panic!("no replayed prompt:\n{screen}"));
    assert_eq!(lines[asked + 1], "the beta answer");
    assert!(!screen.contains("earlier message"), "{screen}");
    assert!(!screen.contains("gamma"), "the picker is gone:\n{screen}");

    t.line("and the brakes?");
    let reqs = p.wait_for_requests(4, Duration::from_secs(15));
    assert_eq!(
        user_texts(&reqs[3]),
        ["beta: fix the bike", "the beta answer", "and the brakes?"]
    );
    t.wait_text("continued after beta");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    t.wait_text(&format!(
        "resume this session with: buddy resume {}",
        ids[1]
    ));
}

#[test]
fn escape_cancels_and_gives_the_terminal_back() {
    let p = FakeProvider::start(vec![Reply::text("an answer")]);
    let cmd = BuddyCmd::new().config_for(&p);
    exec_sessions(&cmd, &["the only session"], &[60]);
    let t = Tmux::start(&cmd, &["resume"]);
    t.wait_text("the only session");
    let alternate = |t: &Tmux| {
        t.tmux_cmd(&[
            "display-message",
            "-p",
            "-t",
            "buddy-test",
            "#{alternate_on}",
        ])
        .trim()
        .to_string()
    };
    assert_eq!(
        alternate(&t),
        "1",
        "the picker draws on the alternate screen"
    );
    t.keys(&["Escape"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    t.wait_main_screen();
    let screen = t.wait_text("no session resumed");
    assert!(!screen.contains("the only session"), "{screen}");
    let before = fs::read_to_string(cmd.work_dir().join("tty-before")).unwrap();
    let after = fs::read_to_string(cmd.work_dir().join("tty-after")).unwrap();
    assert_eq!(before, after, "raw mode is left");
    assert_eq!(p.chat_requests().len(), 1, "nothing was sent");
}

/// A hand-written session file, as buddy writes them (format version 2).
fn write_session(cmd: &BuddyCmd, id: &str, exchanges: usize) {
    let dir = sessions_dir(cmd);
    fs::create_dir_all(&dir).unwrap();
    let mut text = json!({"header": {"version": 2, "id": id, "created": 0, "cwd": "/", "model": "fake-model"}}).to_string();
    text.push('\n');
    let record = |role: &str, content: String| -> Value {
        json!({"message": {"role": role, "content": content}})
    };
    for i in 0..exchanges {
        text.push_str(&record("user", format!("question {i}")).to_string());
        text.push('\n');
        text.push_str(&record("assistant", format!("answer {i}")).to_string());
        text.push('\n');
    }
    let path = dir.join(format!("{id}.jsonl"));
    fs::write(&path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn a_long_session_replays_only_its_last_screenfuls() {
    let p = FakeProvider::start(vec![Reply::text("noted")]);
    let cmd = BuddyCmd::new().config_for(&p);
    write_session(&cmd, "20261123-100000-abcd", 200);
    let t = Tmux::start(&cmd, &["resume"]);
    t.wait_text("question 0");
    t.keys(&["Enter"]);
    // The header is above the screen by now: it is read from the scrollback.
    t.wait_for("the resumed header", |_| {
        scrollback(&t).contains("resumed session 20261123-100000-abcd (400 messages)")
    });
    let screen = t.wait_for("the prompt", |s| s.lines().any(|l| l == ">"));
    let lines: Vec<&str> = screen.lines().collect();
    let last = lines
        .iter()
        .position(|l| *l == "answer 199")
        .expect("the last answer");
    assert_eq!(lines[last - 1], "> question 199");
    let all = scrollback(&t);
    let marker = all
        .lines()
        .find(|l| l.starts_with("… ") && l.ends_with(" earlier messages"))
        .unwrap_or_else(|| panic!("no earlier-messages line:\n{all}"));
    let earlier: usize = marker
        .trim_start_matches("… ")
        .trim_end_matches(" earlier messages")
        .parse()
        .unwrap();
    let shown = all
        .lines()
        .filter(|l| l.starts_with("> question ") || l.starts_with("answer "))
        .count();
    assert_eq!(earlier + shown, 400, "{all}");
    // About two screens of 30 rows: the tail, not the whole session.
    assert!((40..=60).contains(&shown), "{shown} lines:\n{all}");
    assert!(!all.contains("> question 0\n"), "{all}");
    t.line("go on");
    let reqs = p.wait_for_requests(1, Duration::from_secs(15));
    // The whole history still reaches the model; only the screen is bounded.
    assert_eq!(user_texts(&reqs[0]).len(), 401);
}

#[test]
fn a_corrupt_session_file_is_an_unreadable_row_not_a_crash() {
    let p = FakeProvider::start(vec![
        Reply::text("the good answer"),
        Reply::text("resumed fine"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let ids = exec_sessions(&cmd, &["the good session"], &[600]);
    let broken = sessions_dir(&cmd).join("20261123-235959-dead.jsonl");
    fs::write(&broken, "this is not a session\u{1b}[2J\n").unwrap();
    let t = Tmux::start(&cmd, &["resume"]);
    let screen = t.wait_text("the good session");
    let bad_row = screen
        .lines()
        .find(|l| l.contains("unreadable:"))
        .unwrap_or_else(|| panic!("no unreadable row:\n{screen}"));
    assert!(bad_row.starts_with('›'), "newest first:\n{screen}");
    // Enter on it says why and keeps the picker open.
    t.keys(&["Enter"]);
    t.wait_text("cannot resume this one");
    t.keys(&["j", "Enter"]);
    t.wait_text(&format!("resumed session {}", ids[0]));
    t.line("still there?");
    t.wait_text("resumed fine");
}

#[test]
fn sigterm_in_the_picker_gives_the_terminal_back() {
    let p = FakeProvider::start(vec![Reply::text("an answer")]);
    let cmd = BuddyCmd::new().config_for(&p);
    exec_sessions(&cmd, &["waiting in the picker"], &[60]);
    let t = Tmux::start(&cmd, &["resume"]);
    t.wait_text("waiting in the picker");
    let shell_pid = t.tmux_cmd(&["display-message", "-p", "-t", "buddy-test", "#{pane_pid}"]);
    // buddy is the only child of the pane's shell.
    let sent = std::process::Command::new("pkill")
        .args(["-TERM", "-P", shell_pid.trim()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert_eq!(t.wait_exit(&cmd.work_dir()), 143);
    let before = fs::read_to_string(cmd.work_dir().join("tty-before")).unwrap();
    let after = fs::read_to_string(cmd.work_dir().join("tty-after")).unwrap();
    assert_eq!(before, after, "raw mode is left");
    t.wait_main_screen();
}

#[test]
fn a_dumb_terminal_gets_a_numbered_list() {
    let p = FakeProvider::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("continued"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p).env("TERM", "dumb");
    let ids = exec_sessions(&cmd, &["older prompt", "newer prompt"], &[600, 60]);
    let t = Tmux::start(&cmd, &["resume"]);
    let screen = t.wait_text("resume which? (number, Enter to cancel):");
    assert!(screen.contains("  1 1 min ago"), "{screen}");
    assert!(
        position(&screen, "newer prompt") < position(&screen, "older prompt"),
        "{screen}"
    );
    t.line("2");
    t.wait_text(&format!("resumed session {}", ids[0]));
    t.line("more");
    let reqs = p.wait_for_requests(3, Duration::from_secs(15));
    assert_eq!(user_texts(&reqs[2]), ["older prompt", "one", "more"]);
}

/// The pane with its colours, as SGR sequences.
fn styled_screen(t: &Tmux) -> String {
    t.tmux_cmd(&["capture-pane", "-p", "-e", "-t", "buddy-test"])
}

#[test]
fn the_picker_follows_the_config_files_colour_setting() {
    let p = FakeProvider::start(vec![Reply::text("one"), Reply::text("two")]);
    for color in [true, false] {
        // The harness sets NO_COLOR; empty, it means nothing.
        let cmd = BuddyCmd::new()
            .config(format!(
                "{}\n[display]\ncolor = {color}\n",
                support::fake_config(&p)
            ))
            .env("NO_COLOR", "");
        exec_sessions(&cmd, &["a coloured row"], &[60]);
        let t = Tmux::start(&cmd, &["resume"]);
        t.wait_text("a coloured row");
        let styled = styled_screen(&t);
        // tmux writes an SGR sequence for every change of style it holds.
        assert_eq!(
            styled.contains("\u{1b}["),
            color,
            "color = {color}:\n{styled:?}"
        );
        t.keys(&["Escape"]);
        assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    }
}
