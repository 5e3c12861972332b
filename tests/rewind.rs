//! End-to-end tests of checkpoints, `/rewind` and forks: the real binary
//! against the fake provider, the REPL in a real tmux pane. A `write_file`
//! turn is taken back (code, conversation, both), the journal is resumed
//! after a rewind, sessions are forked from the REPL and with `resume
//! --fork`, and a kill -9 during a large write leaves a store that restores.

mod support;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::tmux::Tmux;
use support::{fake_config, BuddyCmd};

const ORIGINAL: &str = "the original notes\n";
const CHANGED: &str = "rewritten by the model\n";

fn no_confirm(p: &FakeProvider) -> String {
    format!("{}\n[tools]\nshell_confirm = false\n", fake_config(p))
}

fn write_call(id: &str, path: &str, content: &str) -> ToolCallSpec {
    ToolCallSpec::new(
        id,
        "write_file",
        json!({ "path": path, "content": content }).to_string(),
    )
}

/// The user and assistant texts a request carried, system prompt left out.
fn texts(req: &RecordedRequest) -> Vec<String> {
    req.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user" || (m["role"] == "assistant" && m["content"].is_string()))
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

fn sessions(cmd: &BuddyCmd) -> PathBuf {
    cmd.work_dir().join(".buddyx/sessions")
}

/// The session journals in the working directory.
fn journals(cmd: &BuddyCmd) -> Vec<PathBuf> {
    std::fs::read_dir(sessions(cmd))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect()
        })
        .unwrap_or_default()
}

fn repl(cmd: &BuddyCmd, args: &[&str]) -> Tmux {
    let t = Tmux::start(cmd, args);
    t.wait_for("the prompt", |s| {
        s.lines().any(|l| l.starts_with("> ")) || s.contains("\n>")
    });
    t
}

/// A REPL session of two turns: a question, then a turn whose model writes
/// notes.txt. Returns the provider (two more answers
/// scripted after them), the command and the pane.
fn two_turns() -> (FakeProvider, BuddyCmd, Tmux) {
    let p = FakeProvider::start(vec![
        Reply::text("noted"),
        Reply::tool_calls(vec![write_call("w1", "notes.txt", CHANGED)]),
        Reply::text("all rewritten"),
        Reply::text("second answer"),
        Reply::text("after the resume"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    std::fs::write(cmd.work_dir().join("notes.txt"), ORIGINAL).unwrap();
    let t = repl(&cmd, &[]);
    t.line("what is in the notes?");
    t.wait_text("noted");
    t.line("rewrite the notes");
    t.wait_text("all rewritten");
    assert_eq!(read(&cmd.work_dir().join("notes.txt")), CHANGED);
    (p, cmd, t)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Opens `/rewind`, picks the newest turn and checks what the picker says
/// about it; leaves the choice list open.
fn pick_newest_turn(t: &Tmux) {
    t.line("/rewind");
    let screen = t.wait_text("rewind to before which turn?");
    assert!(screen.contains("rewrite the notes"), "{screen}");
    assert!(screen.contains("1 file"), "{screen}");
    t.keys(&["Enter"]);
    let screen = t.wait_text("restore code and conversation");
    assert!(screen.contains("restore notes.txt"), "{screen}");
}

#[test]
fn rewind_of_code_and_conversation_restores_the_file_and_the_history() {
    let (p, cmd, t) = two_turns();
    pick_newest_turn(&t);
    t.keys(&["b"]);
    t.wait_text("code: 1 file(s) rewound");
    assert_eq!(read(&cmd.work_dir().join("notes.txt")), ORIGINAL);
    // The rewound prompt is back in the input, ready to send again.
    t.wait_for("the prompt back in the input", |_| {
        t.cursor_line().contains("rewrite the notes")
    });
    t.keys(&["Enter"]);
    let reqs = p.wait_for_requests(4, Duration::from_secs(15));
    assert_eq!(
        texts(&reqs[3]),
        ["what is in the notes?", "noted", "rewrite the notes"]
    );
    t.wait_text("second answer");
    t.line("/quit");
    // The journal says so too: a resume continues from the rewound history.
    cmd.rerun(["exec", "--resume", "last", "and now?"])
        .assert_success();
    let reqs = p.wait_for_requests(5, Duration::from_secs(15));
    assert_eq!(
        texts(&reqs[4]),
        [
            "what is in the notes?",
            "noted",
            "rewrite the notes",
            "second answer",
            "and now?"
        ]
    );
}

#[test]
fn rewind_of_the_conversation_only_keeps_the_files() {
    let (p, cmd, t) = two_turns();
    pick_newest_turn(&t);
    t.keys(&["v"]);
    t.wait_text("conversation: back to before that turn");
    assert_eq!(read(&cmd.work_dir().join("notes.txt")), CHANGED);
    t.wait_for("the prompt back in the input", |_| {
        t.cursor_line().contains("rewrite the notes")
    });
    t.keys(&["Enter"]);
    let reqs = p.wait_for_requests(4, Duration::from_secs(15));
    assert_eq!(
        texts(&reqs[3]),
        ["what is in the notes?", "noted", "rewrite the notes"]
    );
}

#[test]
fn rewind_of_the_code_only_keeps_the_conversation() {
    let (p, cmd, t) = two_turns();
    pick_newest_turn(&t);
    t.keys(&["c"]);
    t.wait_text("code: 1 file(s) rewound");
    assert_eq!(read(&cmd.work_dir().join("notes.txt")), ORIGINAL);
    t.line("go on");
    let reqs = p.wait_for_requests(4, Duration::from_secs(15));
    let sent = texts(&reqs[3]);
    assert_eq!(
        sent.first().map(String::as_str),
        Some("what is in the notes?")
    );
    assert!(sent.iter().any(|s| s == "all rewritten"), "{sent:?}");
    assert_eq!(sent.last().map(String::as_str), Some("go on"));
}

#[test]
fn fork_from_the_repl_goes_on_in_a_new_session_and_leaves_the_original() {
    let p = FakeProvider::start(vec![
        Reply::text("first answer"),
        Reply::text("in the fork"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("the shared question");
    t.wait_text("first answer");
    t.line("/fork");
    t.wait_text("now goes on as session");
    t.line("only in the fork");
    t.wait_text("in the fork");
    let reqs = p.wait_for_requests(2, Duration::from_secs(15));
    assert_eq!(
        texts(&reqs[1]),
        ["the shared question", "first answer", "only in the fork"]
    );
    t.line("/quit");
    t.wait_exit(&cmd.work_dir());
    let files = journals(&cmd);
    assert_eq!(files.len(), 2, "{files:?}");
    let (fork, original): (Vec<&PathBuf>, Vec<&PathBuf>) =
        files.iter().partition(|f| read(f).contains("forked_from"));
    let (fork, original) = (read(fork[0]), read(original[0]));
    assert!(original.contains("the shared question"));
    assert!(!original.contains("only in the fork"), "{original}");
    assert!(fork.contains("the shared question") && fork.contains("only in the fork"));
}

#[test]
fn resume_fork_branches_a_saved_session_without_changing_it() {
    let p = FakeProvider::start(vec![
        Reply::text("saved answer"),
        Reply::text("forked answer"),
    ]);
    let cmd = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "the saved question"]);
    cmd.run().assert_success();
    let original = journals(&cmd).remove(0);
    let before = read(&original);
    let id = original.file_stem().unwrap().to_string_lossy().into_owned();
    // Piped input: the line session.
    let mut child = cmd
        .command_with(&["resume".into(), "--fork".into(), id.clone().into()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start buddy");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"a question for the fork\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("forked session {id}")), "{stderr}");
    let reqs = p.wait_for_requests(2, Duration::from_secs(15));
    assert_eq!(
        texts(&reqs[1]),
        [
            "the saved question",
            "saved answer",
            "a question for the fork"
        ]
    );
    assert_eq!(read(&original), before, "the original is left as it was");
    let forked: Vec<PathBuf> = journals(&cmd)
        .into_iter()
        .filter(|f| *f != original)
        .collect();
    assert_eq!(forked.len(), 1);
    let text = read(&forked[0]);
    assert!(
        text.contains(&format!("\"forked_from\":\"{id}\"")),
        "{text}"
    );
    assert!(text.contains("a question for the fork"));
}

#[test]
fn a_kill_during_a_large_write_leaves_a_checkpoint_that_rewinds() {
    let old = "old line\n".repeat(100_000);
    let new = "new line\n".repeat(700_000);
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![write_call("w1", "big.txt", &new)]),
        Reply::text("written"),
    ]);
    let cmd = BuddyCmd::new()
        .config(no_confirm(&p))
        .args(["exec", "rewrite big.txt"]);
    let big = cmd.work_dir().join("big.txt");
    std::fs::write(&big, &old).unwrap();
    let mut child = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start buddy");
    // Kill as soon as the checkpoint of big.txt is in the store: the write
    // follows it at once.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let kept = std::fs::read_dir(sessions(&cmd))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "checkpoints"))
            .any(|e| {
                std::fs::read(e.path()).is_ok_and(|b| b.windows(8).any(|w| w == b"{\"file\":"))
            });
        if kept {
            break;
        }
        assert!(Instant::now() < deadline, "no checkpoint was written");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().expect("kill -9");
    child.wait().unwrap();
    // The file is whole, old or new: never half of the new one.
    let now = read(&big);
    assert!(now == old || now == new, "a torn file: {} bytes", now.len());
    // The store is valid and takes the file back.
    let t = repl(&cmd, &["resume", "--last"]);
    t.line("/rewind");
    t.wait_text("rewind to before which turn?");
    t.keys(&["Enter"]);
    t.wait_text("restore code and conversation");
    t.keys(&["c"]);
    t.wait_for("the rewind", |s| {
        s.contains("code: 1 file(s) rewound") || s.contains("no files needed restoring")
    });
    assert_eq!(read(&big), old);
}
