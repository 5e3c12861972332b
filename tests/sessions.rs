//! End-to-end tests of sessions: the real binary saving to `.buddyx/sessions`,
//! `buddy sessions`, `buddy resume` and `buddy exec --resume`, against the fake
//! provider, including damaged files, a second writer and `kill -9` mid-tool.

use crate::support;

use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use support::calls::config_no_confirm;
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::{fake_config, BuddyCmd};

const CANCELLED: &str = "operation cancelled by user";
/// A call that was running when buddy stopped, as a resume records it.
const INTERRUPTED_TOOL: &str = "interrupted: buddy stopped while this tool call was running; it may have run in part or in full, so check its effects before running it again";

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

fn messages(req: &RecordedRequest) -> Vec<Value> {
    req.json()["messages"].as_array().expect("messages").clone()
}

/// (role, content or tool-call ids) of each message after the system prompt.
fn shape(req: &RecordedRequest) -> Vec<(String, String)> {
    messages(req)
        .iter()
        .skip(1)
        .map(|m| {
            let role = m["role"].as_str().unwrap_or("").to_string();
            let what = match m["tool_calls"].as_array() {
                Some(calls) => calls
                    .iter()
                    .map(|c| format!("call {}", c["id"].as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(","),
                None => m["content"].as_str().unwrap_or("").to_string(),
            };
            (role, what)
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn sessions_dir(cmd: &BuddyCmd) -> PathBuf {
    cmd.work_dir().join(".buddyx/sessions")
}

/// Session files, by id.
fn session_files(cmd: &BuddyCmd) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = fs::read_dir(sessions_dir(cmd))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().to_string();
                    name.strip_suffix(".jsonl")
                        .map(|id| (id.to_string(), e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn only_session(cmd: &BuddyCmd) -> (String, PathBuf) {
    let files = session_files(cmd);
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

fn set_mtime(path: &Path, secs_ago: u64) {
    let f = fs::File::options().append(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
        .unwrap();
}

/// A hand-written session file (header plus `lines`), as an older run left it.
fn write_session(cmd: &BuddyCmd, id: &str, lines: &[Value]) -> PathBuf {
    let dir = sessions_dir(cmd);
    fs::create_dir_all(&dir).unwrap();
    let mut text =
        json!({"header": {"version": 1, "id": id, "created": 0, "cwd": "/"}}).to_string();
    text.push('\n');
    for l in lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    let path = dir.join(format!("{id}.jsonl"));
    fs::write(&path, text).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn msg(role: &str, content: &str) -> Value {
    json!({"message": {"role": role, "content": content}})
}

#[test]
fn exec_saves_a_session_and_resume_sends_the_whole_history() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "echo from-tool")]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "first prompt"]);
    cmd.run().assert_success();
    let (id, path) = only_session(&cmd);
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = fs::metadata(sessions_dir(&cmd))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);

    let out = cmd.rerun(["exec", "--resume", &id, "second prompt"]);
    out.assert_success();
    assert_eq!(out.stdout, "second answer\n");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(messages(&reqs[2])[0]["role"], "system");
    assert_eq!(
        shape(&reqs[2]),
        pairs(&[
            ("user", "first prompt"),
            ("assistant", "call c1"),
            ("tool", "exit code: 0\nstdout:\nfrom-tool"),
            ("assistant", "first answer"),
            ("user", "second prompt"),
        ])
    );
    // Still one session, now holding both turns.
    assert_eq!(only_session(&cmd).0, id);
    let listing = cmd.rerun(["sessions"]);
    listing.assert_success();
    let line = listing.stdout.lines().nth(1).unwrap().to_string();
    assert!(line.starts_with(&id), "{line}");
    assert!(line.contains(" 6 "), "six messages: {line}");
    assert!(
        line.contains("fake-model") && line.ends_with("first prompt"),
        "{line}"
    );
}

#[test]
fn resume_last_picks_the_most_recently_used_and_prefixes_must_be_unique() {
    let p = FakeProvider::start_repeating(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p).args(["exec", "older"]);
    cmd.run().assert_success();
    cmd.rerun(["exec", "newer"]).assert_success();
    let files = session_files(&cmd);
    assert_eq!(files.len(), 2);
    let find = |prompt: &str| {
        files
            .iter()
            .find(|(_, path)| fs::read_to_string(path).unwrap().contains(prompt))
            .unwrap()
            .clone()
    };
    let (older, older_path) = find("\"older\"");
    let (newer, newer_path) = find("\"newer\"");
    // Make the creation order unambiguous, then use the older one last.
    set_mtime(&newer_path, 200);
    set_mtime(&older_path, 100);
    let listing = cmd.rerun(["sessions"]);
    let ids: Vec<&str> = listing
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids, [older.as_str(), newer.as_str()]);

    cmd.rerun(["exec", "--resume", "last", "follow-up"])
        .assert_success();
    let last = p.chat_requests().pop().unwrap();
    assert_eq!(shape(&last)[0], ("user".to_string(), "older".to_string()));

    // Both ids share their date: a short prefix is ambiguous, a long one is not.
    let common: String = older
        .chars()
        .zip(newer.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let out = cmd.rerun(["exec", "--resume", &common, "x"]);
    out.assert_code(2);
    assert!(out.stderr.contains("ambiguous"), "{}", out.stderr);
    assert!(out.stderr.contains(&older) && out.stderr.contains(&newer));
    let unique = &newer[..common.len() + 1];
    cmd.rerun(["exec", "--resume", unique, "by prefix"])
        .assert_success();
    let last = p.chat_requests().pop().unwrap();
    assert_eq!(shape(&last)[0], ("user".to_string(), "newer".to_string()));

    let out = cmd.rerun(["exec", "--resume", "1999", "x"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("no session matches \"1999\""),
        "{}",
        out.stderr
    );
}

#[test]
fn torn_last_record_is_dropped_with_a_warning() {
    let p = FakeProvider::start(vec![Reply::text("fine")]);
    let cmd = BuddyCmd::new().config_for(&p).args(["sessions"]);
    let path = write_session(
        &cmd,
        "20250101-101010-abcd",
        &[
            msg("user", "kept question"),
            msg("assistant", "kept answer"),
        ],
    );
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"message\":{\"role\":\"user\",\"content\":\"cut of");
    fs::write(&path, &bytes).unwrap();

    let out = cmd.rerun(["exec", "--resume", "20250101", "next"]);
    out.assert_success();
    assert!(
        out.stderr.contains("dropped an incomplete last record"),
        "{}",
        out.stderr
    );
    assert_eq!(
        shape(&p.chat_requests()[0]),
        pairs(&[
            ("user", "kept question"),
            ("assistant", "kept answer"),
            ("user", "next")
        ])
    );
    // The file was repaired: it loads again without a warning.
    let text = fs::read_to_string(&path).unwrap();
    assert!(!text.contains("cut of"));
    assert!(text.ends_with('\n'));
}

#[test]
fn pending_tool_call_of_an_old_file_gets_an_interrupted_result() {
    let p = FakeProvider::start(vec![Reply::text("resumed")]);
    let cmd = BuddyCmd::new().config_for(&p);
    write_session(
        &cmd,
        "20250101-101010-abcd",
        &[
            msg("user", "run it"),
            json!({"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "run_shell", "arguments": "{\"command\":\"sleep 9\"}"}}
            ]}}),
        ],
    );
    let out = cmd.rerun(["exec", "--resume", "last", "what happened?"]);
    out.assert_success();
    // A version 1 file recorded no tool starts: the call may have run.
    assert!(
        out.stderr
            .contains("recorded as interrupted (they may have run)"),
        "{}",
        out.stderr
    );
    assert_eq!(
        shape(&p.chat_requests()[0]),
        pairs(&[
            ("user", "run it"),
            ("assistant", "call t1"),
            ("tool", INTERRUPTED_TOOL),
            ("user", "what happened?"),
        ])
    );
}

#[test]
fn damaged_session_is_a_one_line_error_and_left_untouched() {
    let p = FakeProvider::start_repeating(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let bad = write_session(
        &cmd,
        "20250101-000000-dead",
        &[msg("user", "a"), msg("assistant", "b")],
    );
    let mut text = fs::read_to_string(&bad).unwrap();
    text = text.replacen("{\"message\":{\"role\":\"user\"", "{\"message\":{\"rol", 1);
    fs::write(&bad, &text).unwrap();
    write_session(&cmd, "20250102-000000-beef", &[msg("user", "good one")]);

    let out = cmd.rerun(["exec", "--resume", "20250101", "x"]);
    out.assert_code(2);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].starts_with("error: session file"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&bad.display().to_string()),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("line 2"), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&bad).unwrap(), text);
    assert_eq!(p.chat_requests().len(), 0);

    // The other session still works, and the listing shows it.
    cmd.rerun(["exec", "--resume", "20250102", "y"])
        .assert_success();
    let listing = cmd.rerun(["sessions"]);
    listing.assert_success();
    assert!(listing.stdout.contains("20250102-000000-beef"));
    assert!(listing.stdout.contains("good one"));
}

#[test]
fn unreadable_session_is_named_and_the_others_still_list() {
    let p = FakeProvider::start_repeating(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p);
    write_session(&cmd, "20250102-000000-beef", &[msg("user", "good one")]);
    // A directory where a session file should be: unreadable even for root.
    let odd = sessions_dir(&cmd).join("20250101-000000-0dd0.jsonl");
    fs::create_dir(&odd).unwrap();
    let listing = cmd.rerun(["sessions"]);
    listing.assert_success();
    assert!(listing.stdout.contains("20250102-000000-beef"));
    assert!(
        listing.stderr.contains(&odd.display().to_string()),
        "{}",
        listing.stderr
    );
    let out = cmd.rerun(["exec", "--resume", "20250101", "x"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains(&odd.display().to_string()),
        "{}",
        out.stderr
    );
}

#[test]
fn session_readable_by_others_is_restricted_with_a_warning() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let path = write_session(&cmd, "20250101-000000-abcd", &[msg("user", "hi")]);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let out = cmd.rerun(["exec", "--resume", "last", "again"]);
    out.assert_success();
    assert!(out.stderr.contains("mode 644"), "{}", out.stderr);
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// Starts `buddy exec` whose first tool call records its pid in `pid` and
/// sleeps; returns once the tool is running.
// The child is handed to the caller, which kills and waits for it.
#[allow(clippy::zombie_processes)]
fn start_sleeping_exec(cmd: &BuddyCmd) -> (std::process::Child, u32) {
    let mut child = cmd
        .command_with(&["exec".into(), "sleep for me".into()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = cmd.work_dir().join("pid");
    let pid = support::wait::poll_until(Duration::from_secs(20), || {
        fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    match pid {
        Some(pid) => (child, pid),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the tool never started");
        }
    }
}

fn kill(signal: &str, pid: u32) {
    let _ = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

fn sleeping_provider() -> FakeProvider {
    FakeProvider::start(vec![
        Reply::tool_calls(vec![shell(
            "nap",
            "echo $$ > pid.tmp && mv pid.tmp pid && exec sleep 60",
        )]),
        Reply::text("after the crash"),
    ])
}

#[test]
fn kill_9_mid_tool_leaves_a_session_that_resumes_with_a_valid_history() {
    let p = sleeping_provider();
    let cmd = BuddyCmd::new().config(config_no_confirm(&p, ""));
    let (mut child, sleeper) = start_sleeping_exec(&cmd);
    kill("-KILL", child.id());
    let status = child.wait().unwrap();
    kill("-KILL", sleeper);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );

    let out = cmd.rerun(["exec", "--resume", "last", "are you there?"]);
    out.assert_success();
    assert_eq!(out.stdout, "after the crash\n");
    let reqs = p.chat_requests();
    assert_eq!(
        shape(&reqs[1]),
        pairs(&[
            ("user", "sleep for me"),
            ("assistant", "call nap"),
            ("tool", INTERRUPTED_TOOL),
            ("user", "are you there?"),
        ])
    );
    // The repair was written: the file now loads cleanly, history intact.
    let (_, path) = only_session(&cmd);
    let text = fs::read_to_string(path).unwrap();
    assert_eq!(text.matches(INTERRUPTED_TOOL).count(), 1, "{text}");
    assert!(!text.contains(CANCELLED), "{text}");
}

#[test]
fn a_second_process_cannot_write_a_session_in_use() {
    let p = sleeping_provider();
    let cmd = BuddyCmd::new().config(config_no_confirm(&p, ""));
    let (mut child, sleeper) = start_sleeping_exec(&cmd);
    let (id, path) = only_session(&cmd);
    let before = fs::read(&path).unwrap();
    let out = cmd.rerun(["exec", "--resume", &id, "me too"]);
    kill("-KILL", child.id());
    let _ = child.wait();
    kill("-KILL", sleeper);
    out.assert_code(2);
    assert!(
        out.stderr.contains("in use by another buddy process"),
        "{}",
        out.stderr
    );
    assert_eq!(fs::read(&path).unwrap(), before, "the second process wrote");
    assert_eq!(p.chat_requests().len(), 1);
}

#[test]
fn token_totals_carry_over_and_the_context_warning_counts_the_resumed_history() {
    let p = FakeProvider::start(vec![
        Reply::text("short").with_usage(100, 10),
        Reply::text("again").with_usage(700, 5),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let long_prompt = "word ".repeat(600);
    let out = cmd.rerun(["exec", &long_prompt]);
    out.assert_success();
    assert!(!out.stderr.contains("context is"), "{}", out.stderr);
    // The same model with a window the saved history alone fills past 80%.
    // Compaction off: this is about the warning a full context gives then.
    let small = fake_config(&p)
        .replace(
            "model = \"fake-model\"",
            "model = \"fake-model\"\ncontext_limit = 1500",
        )
        .replace("[agent]\n", "[agent]\nauto_compact = false\n");
    let small_path = cmd.work_dir().join("small.toml");
    fs::write(&small_path, small).unwrap();
    let out = cmd.rerun([
        "--config",
        small_path.to_str().unwrap(),
        "exec",
        "--resume",
        "last",
        "hi",
    ]);
    out.assert_success();
    assert!(out.stderr.contains("warning: context is"), "{}", out.stderr);
    let (_, path) = only_session(&cmd);
    let text = fs::read_to_string(path).unwrap();
    let last_turn: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last_turn["turn"]["tokens"]["prompt_total"], 800);
    assert_eq!(last_turn["turn"]["tokens"]["completion_total"], 15);
}

#[test]
fn keys_never_reach_session_files() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("env", "echo key=$MY_KEY")]),
        Reply::text("done"),
    ]);
    let key = "sk-live-0123456789abcdef";
    let toml =
        config_no_confirm(&p, "").replace("api_key = \"sk-fake\"", "api_key_env = \"MY_KEY\"");
    let cmd = BuddyCmd::new()
        .config(toml)
        .env("MY_KEY", key)
        .args(["exec", "show me"]);
    cmd.run().assert_success();
    assert!(p.chat_requests()[0]
        .header("authorization")
        .unwrap()
        .contains(key));
    let (_, path) = only_session(&cmd);
    let text = fs::read_to_string(path).unwrap();
    assert!(!text.contains(key), "{text}");
    assert!(!text.to_lowercase().contains("authorization"), "{text}");
    // The command never saw the key (buddy's credentials are hidden from
    // commands), so nothing needed redacting; redaction of keys that do get
    // printed is covered in src/session/tests.rs.
    assert!(text.contains("key=\""), "{text}");
}

#[test]
fn an_unwritable_session_directory_costs_the_session_not_the_answer() {
    let p = FakeProvider::start(vec![Reply::text("still answered")]);
    let cmd = BuddyCmd::new().config_for(&p).args(["exec", "hi"]);
    // A file where the directory should be: creating it fails even for root.
    fs::write(cmd.work_dir().join(".buddyx"), "").unwrap();
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "still answered\n");
    assert!(out.stderr.contains("will not be saved"), "{}", out.stderr);
}

/// The lines of `git status --porcelain` (every untracked file) in `dir`
/// that name something under `.buddyx`.
fn git_status(dir: &Path) -> String {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    if !dir.join(".git").exists() {
        git(&["init", "-q"]);
    }
    git(&["status", "--porcelain", "--untracked-files=all"])
        .lines()
        .filter(|l| l.contains(".buddyx"))
        .collect()
}

#[test]
fn the_session_directory_keeps_itself_out_of_git() {
    let p = FakeProvider::start(vec![Reply::text("ok"), Reply::text("again")]);
    let cmd = BuddyCmd::new().config_for(&p).args(["exec", "hi"]);
    let work = cmd.work_dir();
    assert_eq!(git_status(&work), "");
    cmd.run().assert_success();
    assert_eq!(session_files(&cmd).len(), 1);
    assert_eq!(
        git_status(&work),
        "",
        "a new session directory ignores itself"
    );

    // A directory from before, without the file, gets it at its next write.
    fs::remove_file(work.join(".buddyx/.gitignore")).unwrap();
    assert!(
        git_status(&work).contains(".buddyx/"),
        "the test sees sessions"
    );
    cmd.rerun(["exec", "--resume", "last", "more"])
        .assert_success();
    assert_eq!(git_status(&work), "");

    // A user's own file is theirs: left as it is.
    fs::write(work.join(".buddyx/.gitignore"), "sessions/old-*\n").unwrap();
    cmd.rerun(["sessions"]).assert_success();
    let kept = fs::read_to_string(work.join(".buddyx/.gitignore")).unwrap();
    assert_eq!(kept, "sessions/old-*\n");
}

#[test]
fn legacy_agentx_directory_is_used_when_present() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p).args(["exec", "hi"]);
    fs::create_dir(cmd.work_dir().join(".agentx")).unwrap();
    cmd.run().assert_success();
    assert!(!cmd.work_dir().join(".buddyx").exists());
    let files: Vec<_> = fs::read_dir(cmd.work_dir().join(".agentx/sessions"))
        .unwrap()
        .collect();
    assert_eq!(files.len(), 1);
}

#[test]
fn resume_shows_the_last_exchange_and_continues_the_conversation() {
    let p = FakeProvider::start(vec![Reply::text("the first answer"), Reply::text("more")]);
    let cmd = BuddyCmd::new().config_for(&p).stdin("a follow-up\n");
    // The first turn without piped input (it would join the prompt).
    let first = cmd
        .command_with(&["exec".into(), "the first question".into()])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run buddy");
    assert!(first.status.success(), "{first:?}");
    let out = cmd.rerun(["resume", "--last"]);
    out.assert_success();
    assert!(
        out.stderr.contains("you: the first question"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("buddy: the first answer"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "more\n");
    assert_eq!(
        shape(&p.chat_requests()[1]),
        pairs(&[
            ("user", "the first question"),
            ("assistant", "the first answer"),
            ("user", "a follow-up"),
        ])
    );
    let out = cmd.rerun(["resume"]);
    out.assert_code(2);
    assert!(out.stderr.contains("buddy resume --last"), "{}", out.stderr);
}

#[test]
fn sessions_with_none_saved_says_so() {
    let out = BuddyCmd::new().args(["sessions"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("no saved sessions"), "{}", out.stderr);
}

#[test]
fn text_streamed_before_a_kill_9_is_resumed_as_an_interrupted_answer() {
    let p = FakeProvider::start(vec![
        Reply::stamped_text(200).chunk_delay(Duration::from_millis(50)),
        Reply::text("resumed"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let mut child = cmd
        .command_with(&["exec".into(), "tell a long story".into()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once the journal holds a few pieces of the answer.
    support::wait::wait_for("a partial record", Duration::from_secs(30), || {
        session_files(&cmd)
            .first()
            .and_then(|(_, path)| fs::read_to_string(path).ok())
            .is_some_and(|t| t.contains("{\"partial\"") && t.contains("3@"))
    });
    kill("-KILL", child.id());
    child.wait().unwrap();

    let out = cmd.rerun(["exec", "--resume", "last", "go on"]);
    out.assert_success();
    assert!(out.stderr.contains("cut off"), "{}", out.stderr);
    let reqs = p.chat_requests();
    let msgs = messages(&reqs[1]);
    assert_eq!(msgs[msgs.len() - 1]["content"], "go on");
    let cut = &msgs[msgs.len() - 2];
    assert_eq!(cut["role"], "assistant");
    let text = cut["content"].as_str().unwrap();
    assert!(text.starts_with("0@"), "{text}");
    assert!(text.contains("3@"), "{text}");
    assert!(
        text.ends_with("[interrupted: the answer was cut off here]"),
        "{text}"
    );
}

#[test]
fn a_fifo_named_like_a_session_is_reported_not_waited_on() {
    let p = FakeProvider::start_repeating(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new()
        .config_for(&p)
        .timeout(Duration::from_secs(20));
    write_session(&cmd, "20250102-000000-beef", &[msg("user", "good one")]);
    let fifo = sessions_dir(&cmd).join("20250103-000000-f1f0.jsonl");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Before the fix both of these blocked forever opening the FIFO.
    let out = cmd.rerun(["sessions"]);
    out.assert_success();
    assert!(out.stdout.contains("good one"), "{}", out.stdout);
    assert!(
        out.stderr.contains("FIFO (named pipe), not a regular file"),
        "{}",
        out.stderr
    );
    let out = cmd.rerun(["exec", "--resume", "20250103", "hi"]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);
    let errors = out.stderr.lines().filter(|l| l.contains("error")).count();
    assert_eq!(errors, 1, "{}", out.stderr);
}
