//! End-to-end tests of checkpoints, `/rewind` and forks: the real binary
//! against the fake provider, the REPL in a real tmux pane. A `write_file`
//! turn is taken back (code, conversation, both), the journal is resumed
//! after a rewind, sessions are forked from the REPL and with `resume
//! --fork`, and a kill -9 during a large write leaves a store that restores.

use crate::support;

use buddy::session::checkpoint::{read_index, sha256_hex, Before, CheckpointStore};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::calls::call;
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
    t.wait_idle();
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
    t.wait_texts(&[
        "rewind to before which turn?",
        "rewrite the notes",
        "1 file",
    ]);
    t.keys(&["Enter"]);
    t.wait_texts(&["restore code and conversation", "restore notes.txt"]);
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
    // The REPL holds the session until it has exited.
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
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
    t.wait_idle();
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

fn id_of(journal: &Path) -> String {
    journal
        .file_stem()
        .expect("a journal's name")
        .to_string_lossy()
        .into_owned()
}

/// `buddy resume --fork ID` with one line of piped input (the line
/// session); checks it said which session it forked.
fn resume_fork(cmd: &BuddyCmd, id: &str, line: &str) {
    let mut child = cmd
        .command_with(&["resume".into(), "--fork".into(), id.into()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start buddy");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("forked session {id}")), "{stderr}");
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
    let id = id_of(&original);
    resume_fork(&cmd, &id, "a question for the fork");
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
    let old = "old line\n".repeat(150_000);
    let new = "new line\n".repeat(300_000);
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![write_call("w1", "big.txt", &new)]),
        Reply::text("written"),
    ]);
    let cmd = BuddyCmd::new()
        .config(no_confirm(&p))
        .args(["exec", "rewrite big.txt"]);
    let big = cmd.work_dir().join("big.txt");
    std::fs::write(&big, &old).unwrap();
    let log = cmd.work_dir().join("stderr.txt");
    let mut child = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start buddy");
    // Kill as soon as the checkpoint of big.txt is in the store: the write
    // follows it at once.
    if wait_for_checkpoint(&cmd, Instant::now() + Duration::from_secs(30)).is_none() {
        let _ = child.kill();
        panic!(
            "no checkpoint was written; buddy said: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
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

#[test]
fn rewind_takes_back_an_edit_file_change() {
    let p = FakeProvider::start(vec![
        call(
            "e1",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "the original", "new_string": "the edited"}),
        ),
        Reply::text("the edit is in"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let notes = cmd.work_dir().join("notes.txt");
    std::fs::write(&notes, ORIGINAL).unwrap();
    let t = repl(&cmd, &[]);
    t.line("edit the notes");
    t.wait_text("the edit is in");
    assert_eq!(read(&notes), "the edited notes\n");
    let screen = t.open_newest_turn("edit the notes");
    assert!(screen.contains("restore notes.txt"), "{screen}");
    t.keys(&["c"]);
    t.wait_text("code: 1 file(s) rewound");
    assert_eq!(read(&notes), ORIGINAL);
}

#[test]
fn rewind_takes_back_an_apply_patch_across_files_with_its_add_delete_and_move() {
    let patch = "*** Begin Patch\n\
                 *** Update File: a.txt\n@@\n-alpha\n+ALPHA\n\
                 *** Add File: new.txt\n+brand new\n\
                 *** Delete File: gone.txt\n\
                 *** Update File: old_name.txt\n*** Move to: moved.txt\n@@\n-keep me\n+kept and moved\n\
                 *** End Patch";
    let p = FakeProvider::start(vec![
        call("p1", "apply_patch", json!({ "input": patch })),
        Reply::text("the patch is in"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p) + "edit_format = \"patch\"\n");
    let dir = cmd.work_dir();
    let before = [
        ("a.txt", "alpha\nbeta\n"),
        ("gone.txt", "soon gone\n"),
        ("old_name.txt", "keep me\n"),
    ];
    for (name, text) in before {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let t = repl(&cmd, &[]);
    t.line("patch the files");
    t.wait_text("the patch is in");
    // The patch did all it says, so the rewind has each kind to undo.
    assert_eq!(read(&dir.join("a.txt")), "ALPHA\nbeta\n");
    assert_eq!(read(&dir.join("new.txt")), "brand new\n");
    assert_eq!(read(&dir.join("moved.txt")), "kept and moved\n");
    assert!(!dir.join("gone.txt").exists() && !dir.join("old_name.txt").exists());

    let screen = t.open_newest_turn("patch the files");
    for line in [
        "restore a.txt",
        "delete  new.txt",
        "restore gone.txt",
        "restore old_name.txt",
        "delete  moved.txt",
    ] {
        assert!(screen.contains(line), "{line:?} missing:\n{screen}");
    }
    t.keys(&["c"]);
    t.wait_text("code: 5 file(s) rewound");
    for (name, text) in before {
        assert_eq!(read(&dir.join(name)), text, "{name}");
    }
    assert!(!dir.join("new.txt").exists() && !dir.join("moved.txt").exists());
}

#[test]
fn the_rewind_picker_lists_the_shell_commands_run_since_a_turn_and_leaves_their_effects() {
    let p = FakeProvider::start(vec![
        call(
            "s1",
            "run_shell",
            json!({"command": "echo made-by-the-shell > shell.txt"}),
        ),
        call(
            "w1",
            "write_file",
            json!({"path": "notes.txt", "content": CHANGED}),
        ),
        Reply::text("both done"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let dir = cmd.work_dir();
    std::fs::write(dir.join("notes.txt"), ORIGINAL).unwrap();
    let t = repl(&cmd, &[]);
    t.line("run it and rewrite the notes");
    t.wait_text("both done");
    t.wait_idle();
    assert_eq!(read(&dir.join("shell.txt")), "made-by-the-shell\n");

    t.line("/rewind");
    t.wait_texts(&["rewind to before which turn?", "1 file, 1 command"]);
    t.keys(&["Enter"]);
    t.wait_texts(&[
        "restore code and conversation",
        "their effects cannot be rewound",
        "$ echo made-by-the-shell > shell.txt",
    ]);
    t.keys(&["c"]);
    t.wait_text("code: 1 file(s) rewound");
    assert_eq!(read(&dir.join("notes.txt")), ORIGINAL);
    // What the command did stays, as the picker said.
    assert_eq!(read(&dir.join("shell.txt")), "made-by-the-shell\n");
}

/// The session's checkpoint store, once one holds a file record.
fn wait_for_checkpoint(cmd: &BuddyCmd, deadline: Instant) -> Option<PathBuf> {
    // Looked at often: the caller kills buddy as soon as it is there.
    let within = deadline.saturating_duration_since(Instant::now());
    support::wait::poll_every(Duration::from_millis(1), within, || {
        std::fs::read_dir(sessions(cmd))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "checkpoints"))
            .find(|p| std::fs::read(p).is_ok_and(|b| b.windows(8).any(|w| w == b"{\"file\":")))
    })
}

#[test]
fn a_kill_9_during_an_edit_leaves_the_old_or_new_file_and_a_checkpoint_of_the_old() {
    // About 5 MB, so the edit's write takes long enough to be cut into.
    let old: String = (0..250_000)
        .map(|i| format!("line {i:07} of the file\n"))
        .collect();
    let new = old.replace("line 0125000 of the file\n", "the edited line\n");
    let (mut saw_old, mut saw_new) = (0, 0);
    for trial in 0..12u64 {
        let p = FakeProvider::start(vec![
            call(
                "e1",
                "edit_file",
                json!({"path": "big.txt", "old_string": "line 0125000 of the file", "new_string": "the edited line"}),
            ),
            Reply::text("edited"),
        ]);
        let cmd = BuddyCmd::new()
            .config(no_confirm(&p))
            .args(["exec", "edit big.txt"]);
        let big = cmd.work_dir().join("big.txt");
        std::fs::write(&big, &old).unwrap();
        let mut child = cmd
            .command()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start buddy");
        let store = wait_for_checkpoint(&cmd, Instant::now() + Duration::from_secs(30))
            .expect("no checkpoint was written");
        // The edit follows the checkpoint at once; each trial kills a little
        // later into it (the kill's moment is what varies, not a wait for
        // something to happen).
        std::thread::sleep(Duration::from_micros(trial * 700));
        child.kill().expect("kill -9");
        child.wait().unwrap();

        let now = std::fs::read(&big).unwrap();
        if now == old.as_bytes() {
            saw_old += 1;
        } else if now == new.as_bytes() {
            saw_new += 1;
        } else {
            panic!("trial {trial}: a torn file of {} bytes", now.len());
        }
        // The store reads back whole and holds the old content.
        let file = std::fs::File::open(&store).unwrap();
        let len = file.metadata().unwrap().len();
        let (index, damage) = read_index(std::io::BufReader::new(file), len).unwrap();
        assert_eq!(damage, None, "trial {trial}");
        let record = index
            .records
            .iter()
            .find(|r| r.path.ends_with("big.txt"))
            .expect("a record of big.txt");
        assert_eq!(
            record.before,
            Before::Kept {
                sha256: sha256_hex(old.as_bytes()),
                len: old.len() as u64
            },
            "trial {trial}"
        );
        CheckpointStore::new(store)
            .restore_turn(&record.turn)
            .unwrap();
        assert!(
            std::fs::read(&big).unwrap() == old.as_bytes(),
            "trial {trial}: the checkpoint did not restore the old file"
        );
    }
    eprintln!("kill -9 during an edit: {saw_old} old, {saw_new} new, 0 torn");
}

#[test]
fn a_fork_carries_the_sessions_images_in_its_own_copy() {
    // A GIF's signature is all buddy checks of the format.
    let gif: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\x00\x00\x00\x00\x00;";
    let p = FakeProvider::start(vec![
        Reply::text("a red dot"),
        Reply::text("forked answer"),
        Reply::text("still the dot"),
    ]);
    let cmd = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--image", "dot.gif", "what is this?"]);
    std::fs::write(cmd.work_dir().join("dot.gif"), gif).unwrap();
    cmd.run().assert_success();
    let original = journals(&cmd).remove(0);
    let id = id_of(&original);
    resume_fork(&cmd, &id, "and in the fork?");
    let data_url = "data:image/gif;base64,";
    let reqs = p.wait_for_requests(2, Duration::from_secs(15));
    assert!(
        reqs[1].body_text().contains(data_url),
        "the fork's request carries the image"
    );

    let fork = journals(&cmd)
        .into_iter()
        .find(|f| *f != original)
        .expect("the fork's journal");
    let names = |journal: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(journal.with_extension("images"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    assert_eq!(names(&original).len(), 1);
    assert_eq!(names(&fork), names(&original));
    // The fork stands alone: the original's copies gone, it still sends the image.
    std::fs::remove_dir_all(original.with_extension("images")).unwrap();
    cmd.rerun(["exec", "--resume", &id_of(&fork), "still there?"])
        .assert_success();
    let reqs = p.wait_for_requests(3, Duration::from_secs(15));
    assert!(reqs[2].body_text().contains(data_url));
}

#[test]
fn a_rewind_keeps_the_users_later_work_flags_it_and_can_itself_be_undone() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            write_call("w1", "a.txt", "a by buddy\n"),
            write_call("w2", "notes.md", "notes by buddy\n"),
        ]),
        Reply::text("both written"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let dir = cmd.work_dir();
    std::fs::write(dir.join("a.txt"), ORIGINAL).unwrap();
    let t = repl(&cmd, &[]);
    t.line("write a and the notes");
    t.wait_text("both written");
    t.wait_idle();
    // The user goes on with both files outside buddy.
    std::fs::write(dir.join("a.txt"), "the user's a\n").unwrap();
    std::fs::write(dir.join("notes.md"), "the user's notes\n").unwrap();

    t.line("/rewind");
    t.wait_texts(&["rewind to before which turn?", "2 files; 2 changed since"]);
    t.keys(&["Enter"]);
    t.wait_texts(&[
        "restore a.txt (19 bytes) — changed since buddy wrote it",
        "delete  notes.md (it did not exist before) — changed since buddy wrote it",
        "what it holds now is kept",
    ]);
    t.keys(&["c"]);
    t.wait_texts(&["code: 2 file(s) rewound", "undo the last rewind"]);
    assert_eq!(read(&dir.join("a.txt")), ORIGINAL);
    assert!(!dir.join("notes.md").exists());

    // The newest entry takes the rewind back: the user's work returns.
    t.line("/rewind");
    t.wait_texts(&["rewind to before which turn?", "undo the last rewind"]);
    t.keys(&["Enter"]);
    t.wait_texts(&[
        "restore the code as it was just before the last rewind",
        "restore notes.md (17 bytes)",
    ]);
    t.keys(&["c"]);
    // The first rewind's report is on the screen too: wait for a second.
    t.wait_for("the undo's report", |s| {
        s.matches("code: 2 file(s) rewound").count() >= 2
    });
    assert_eq!(read(&dir.join("a.txt")), "the user's a\n");
    assert_eq!(read(&dir.join("notes.md")), "the user's notes\n");
}

#[test]
fn a_rewind_does_not_follow_a_directory_symlink_put_in_place_since() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            write_call("w1", "sub/x.txt", "made by buddy\n"),
            write_call("w2", "cfg/trusted.json", "{}\n"),
        ]),
        Reply::text("both written"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let dir = cmd.work_dir();
    let t = repl(&cmd, &[]);
    t.line("make the two files");
    t.wait_text("both written");
    t.wait_idle();
    // Later, the directories become symlinks: one to a directory outside
    // the workspace holding a file buddy never wrote, one to buddy's own
    // config directory.
    let outside = cmd.home_dir().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("x.txt"), "not buddy's\n").unwrap();
    let own = cmd.config_home().join("buddy");
    std::fs::create_dir_all(&own).unwrap();
    let trusted = own.join("trusted.json");
    std::fs::write(&trusted, "{\"the\": \"user's trust list\"}\n").unwrap();
    std::fs::remove_dir_all(dir.join("sub")).unwrap();
    std::fs::remove_dir_all(dir.join("cfg")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("sub")).unwrap();
    std::os::unix::fs::symlink(&own, dir.join("cfg")).unwrap();

    t.open_newest_turn("make the two files");
    t.keys(&["c"]);
    t.wait_texts(&[
        "FAILED  sub/x.txt",
        "FAILED  cfg/trusted.json",
        "now leads to",
    ]);
    assert_eq!(read(&outside.join("x.txt")), "not buddy's\n");
    assert_eq!(read(&trusted), "{\"the\": \"user's trust list\"}\n");
}
