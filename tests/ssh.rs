//! End-to-end tests of `--ssh`: the real binary and the system ssh client
//! against a real sshd on a loopback port (one per test), logging in as the
//! second local user `buddytest`, so what the tools report provably happened
//! on the far side of an SSH connection.

use crate::support;

use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;
use support::calls::{call, config_no_confirm, result_of};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::sshd::{Sshd, USER};
use support::tmux::Tmux;
use support::{BuddyCmd, TempDir};

fn system_prompt(req: &RecordedRequest) -> String {
    req.json()["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn uid_of(user: &str) -> u32 {
    let out = std::process::Command::new("id")
        .args(["-u", user])
        .output()
        .expect("id");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("uid")
}

/// A directory under buddytest's home, unique to this test, removed after.
struct RemoteDir(String);

impl RemoteDir {
    fn new(label: &str) -> RemoteDir {
        RemoteDir(format!(
            "/home/{USER}/buddy-{label}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ))
    }
}

impl Drop for RemoteDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn exec_over_ssh_runs_commands_and_moves_files_as_the_remote_user() {
    let sshd = Sshd::start();
    let dir = RemoteDir::new("files");
    let file = format!("{}/nested/data.txt", dir.0);
    // Quotes, `$`, backslashes, unicode, a tab, no final newline.
    let content = "line 'one' \"two\" $HOME `date` \\n\\\\\n\tüñï 😀 ✓\nlast line without newline";
    let big: String = (0..20_000).map(|i| format!("row {i:05}\n")).collect();
    let big_file = format!("{}/big.txt", dir.0);
    let p = FakeProvider::start(vec![
        call("who", "run_shell", json!({"command": "id -un; pwd"})),
        call("w", "write_file", json!({"path": file, "content": content})),
        call("r", "read_file", json!({"path": file})),
        call(
            "wb",
            "write_file",
            json!({"path": big_file, "content": big}),
        ),
        call(
            "sum",
            "run_shell",
            json!({"command": format!("wc -c < {big_file}; stat -c %U {file}; echo oops >&2; exit 5")}),
        ),
        Reply::text("done"),
    ]);
    let runtime = TempDir::new("xdg-runtime");
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .arg("exec")
        .args(sshd.buddy_args())
        .arg("check the server");
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let reqs = p.chat_requests();
    assert_eq!(
        result_of(&reqs, "who"),
        format!("exit code: 0\nstdout:\n{USER}\n/home/{USER}")
    );
    assert!(
        result_of(&reqs, "w").contains(&format!("to {file} on {USER}@127.0.0.1")),
        "{}",
        result_of(&reqs, "w")
    );
    assert_eq!(result_of(&reqs, "r"), content);
    assert_eq!(
        result_of(&reqs, "sum"),
        format!(
            "exit code: 5\nstdout:\n{}\n{USER}\nstderr:\noops",
            big.len()
        )
    );
    // The bytes on disk are exact, and the file belongs to the remote user.
    assert_eq!(
        std::fs::read_to_string(&file).expect("written file"),
        content
    );
    assert_eq!(std::fs::read_to_string(&big_file).expect("big file"), big);
    let meta = std::fs::metadata(&file).expect("metadata");
    assert_eq!(
        meta.uid(),
        uid_of(USER),
        "the file was not written over SSH"
    );
    // No temporary files left next to it.
    let names: Vec<String> = std::fs::read_dir(format!("{}/nested", dir.0))
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["data.txt".to_string()]);
    // The model was told where it works.
    let system = system_prompt(&reqs[0]);
    assert!(
        system.contains("over SSH") && system.contains(&format!("{USER}@127.0.0.1")),
        "{system}"
    );
    // Five tool calls and the start-up check shared one TCP connection.
    assert_eq!(sshd.connections(), 1, "{}", sshd.log());
    // The control socket's private directory is gone.
    let left: Vec<_> = std::fs::read_dir(runtime.path())
        .expect("runtime")
        .collect();
    assert!(left.is_empty(), "control directory left behind: {left:?}");
}

#[test]
fn without_multiplexing_each_command_connects_again() {
    let sshd = Sshd::start();
    let p = FakeProvider::start(vec![
        call("a", "run_shell", json!({"command": "echo one"})),
        call("b", "run_shell", json!({"command": "echo two"})),
        call("c", "run_shell", json!({"command": "echo three"})),
        Reply::text("done"),
    ]);
    // The user's options come before buddy's, so they win.
    let mut options = sshd.client_options(&sshd.client_key());
    options.push("ControlMaster=no".into());
    options.push("ControlPath=none".into());
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .arg("exec")
        .args(sshd.buddy_args_with(&options))
        .arg("go")
        .run();
    out.assert_success();
    assert_eq!(
        result_of(&p.chat_requests(), "c"),
        "exit code: 0\nstdout:\nthree"
    );
    assert_eq!(sshd.connections(), 4, "{}", sshd.log());
}

/// Runs `exec --ssh … hi` with these ssh options; asserts exit 2, one line on
/// stderr, and no model request; returns the line.
fn failure(sshd_args: Vec<String>) -> String {
    let p = FakeProvider::start(vec![Reply::text("never")]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .arg("exec")
        .args(sshd_args)
        .arg("hi")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_code(2);
    assert_eq!(out.stdout, "");
    // A first run also notes the user config it created; that is not the error.
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("created a default config"))
        .collect();
    assert_eq!(lines.len(), 1, "not one line: {}", out.stderr);
    assert_eq!(p.request_count(), 0, "the model was asked anyway");
    lines[0].to_string()
}

#[test]
fn ssh_failures_are_one_line_and_exit_2() {
    let sshd = Sshd::start();

    // Nothing listens on this port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut args = sshd.buddy_args();
    args[1] = format!("{USER}@127.0.0.1:{closed}");
    let line = failure(args);
    assert!(
        line.contains("cannot reach") && line.contains("Connection refused"),
        "{line}"
    );

    // A key the server does not accept.
    let line = failure(sshd.buddy_args_with(&sshd.client_options(&sshd.stranger_key())));
    assert!(
        line.contains("authentication") && line.contains("refused"),
        "{line}"
    );

    // Strict checking with no known key for the host, then with a wrong one.
    let known = sshd.dir().join("known_hosts");
    std::fs::write(&known, "").expect("known_hosts");
    let strict = |known: &std::path::Path| {
        vec![
            format!("IdentityFile={}", sshd.client_key().display()),
            "IdentitiesOnly=yes".to_string(),
            "StrictHostKeyChecking=yes".to_string(),
            format!("UserKnownHostsFile={}", known.display()),
        ]
    };
    let line = failure(sshd.buddy_args_with(&strict(&known)));
    assert!(line.contains("host key"), "{line}");
    let stranger = std::fs::read_to_string(sshd.dir().join("stranger_key.pub")).expect("key");
    std::fs::write(&known, format!("[127.0.0.1]:{} {stranger}", sshd.port)).expect("known_hosts");
    let line = failure(sshd.buddy_args_with(&strict(&known)));
    assert!(line.contains("host key"), "{line}");

    // A malformed destination is refused before any connection.
    let line = failure(vec!["--ssh".into(), format!("{USER}@127.0.0.1:port")]);
    assert!(line.contains("expected user@host"), "{line}");
    assert_eq!(sshd.connections(), 3, "{}", sshd.log());
}

#[test]
fn exec_over_ssh_in_a_remote_tmux_pane() {
    let sshd = Sshd::start();
    let session = format!("buddy-ssh-test-{}", std::process::id());
    struct KillSession(String);
    impl Drop for KillSession {
        fn drop(&mut self) {
            let _ = Sshd::as_user(&format!("tmux kill-session -t ={}", self.0));
        }
    }
    let _cleanup = KillSession(session.clone());
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "id -un; echo err >&2; exit 7"}),
        ),
        Reply::text("done"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .arg("exec")
        .args(sshd.buddy_args())
        .arg(format!("--tmux={session}"))
        .arg("go")
        .run();
    out.assert_success();
    assert_eq!(
        result_of(&p.chat_requests(), "a"),
        format!("exit code: 7\nstdout:\n{USER}\nstderr:\nerr")
    );
    // The attach line runs tmux on the server, through ssh.
    let attach = out
        .stderr
        .lines()
        .find(|l| l.contains("watch with:"))
        .unwrap_or_else(|| panic!("no attach line: {}", out.stderr));
    assert!(
        attach.contains(&format!("ssh -t -p {}", sshd.port))
            && attach.ends_with(&format!("{USER}@127.0.0.1 tmux attach -t {session}")),
        "{attach}"
    );
    // The pane lives in buddytest's own tmux server on the far side.
    let pane = Sshd::as_user(&format!(
        "tmux capture-pane -p -J -S - -t ={session}:buddy-shared"
    ));
    let text = String::from_utf8_lossy(&pane.stdout);
    assert!(text.contains("id -un") && text.contains(USER), "{text}");
}

#[test]
fn the_repl_names_the_remote_actor_in_its_prompt_and_approvals() {
    let sshd = Sshd::start();
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "one",
            "run_shell",
            json!({"command": "id -un"}).to_string(),
        )]),
        // `env` runs its arguments: not read-only, so it is asked about.
        Reply::tool_calls(vec![ToolCallSpec::new(
            "two",
            "run_shell",
            json!({"command": "env id -un"}).to_string(),
        )]),
        Reply::text("all finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let mut args: Vec<String> = sshd.buddy_args();
    args.push("--no-tmux".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = Tmux::start(&cmd, &args);
    // (capture-pane drops the prompt's trailing space)
    let prompt = format!("(ssh {USER}@127.0.0.1)>");
    t.wait_for("the ssh prompt", |_| t.cursor_line().starts_with(&prompt));
    let banner = t.screen();
    assert!(banner.contains("127.0.0.1"), "{banner}");
    t.line("who are you there?");
    // A read-only command runs on the remote target without a question.
    t.wait_text("auto-approved (read-only): id -un");
    let question = format!("{USER}@127.0.0.1$ env id -un -- approve?");
    t.wait_for("the approval prompt", |_| {
        t.cursor_line().contains(&question)
    });
    t.line("y");
    t.wait_text("all finished");
    for id in ["one", "two"] {
        assert_eq!(
            result_of(&p.chat_requests(), id),
            format!("exit code: 0\nstdout:\n{USER}")
        );
    }
}

/// Whether `buddytest` runs a process whose command line is `pattern`.
fn remote_running(pattern: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-u", USER, "-f", &format!("^{pattern}$")])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("pgrep")
        .success()
}

/// Waits (at most 5 s, the stop's own bound) until no process on the server
/// matches `pattern`; fails with `what` past that.
fn wait_remote_gone(pattern: &str, what: &str) {
    support::wait::wait_for(what, Duration::from_secs(5), || !remote_running(pattern));
}

#[test]
fn a_timeout_or_ctrl_c_stops_the_command_on_the_server() {
    let sshd = Sshd::start();
    // A timeout: the result says the command was killed, and it is gone.
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "sleep 33.125", "timeout": 1}),
        ),
        Reply::text("done"),
    ]);
    BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .arg("exec")
        .args(sshd.buddy_args())
        .arg("go")
        .run()
        .assert_success();
    let a = result_of(&p.chat_requests(), "a");
    assert!(
        a.starts_with("timed out after 1 s; the command was killed"),
        "{a}"
    );
    // The stop waits for the command, with a bound; allow that bound.
    wait_remote_gone("sleep 33.125", "the timed-out command still runs");

    // Ctrl-C while the command runs: buddy exits 130 and the command stops.
    let dir = RemoteDir::new("ctrl-c");
    std::fs::create_dir(&dir.0).expect("dir");
    let started = format!("{}/started", dir.0);
    std::process::Command::new("chown")
        .args([USER, &dir.0])
        .status()
        .expect("chown");
    let p = FakeProvider::start(vec![
        call(
            "b",
            "run_shell",
            json!({"command": format!("touch {started}; sleep 34.375")}),
        ),
        Reply::text("never"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .arg("exec")
        .args(sshd.buddy_args())
        .arg("go");
    let child = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    support::wait::wait_for("the command to start", Duration::from_secs(20), || {
        std::path::Path::new(&started).exists()
    });
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130));
    // The stop is a separate short command; give it a moment to land.
    wait_remote_gone(
        "sleep 34.375",
        "the cancelled command still runs on the server",
    );
}

/// The tails of the `tool_progress` events of an `exec --json` run's stdout,
/// each with whether the call's result had already been reported.
fn progress_tails(stdout: &str) -> Vec<(String, bool)> {
    let mut after_result = false;
    let mut out = Vec::new();
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        match v["type"].as_str() {
            Some("tool_result") => after_result = true,
            Some("tool_progress") => out.push((
                v["tail"].as_str().unwrap_or_default().to_string(),
                after_result,
            )),
            _ => {}
        }
    }
    out
}

#[test]
fn a_command_over_ssh_streams_its_output_while_it_runs() {
    let sshd = Sshd::start();
    let p = FakeProvider::start(vec![
        call(
            "s",
            "run_shell",
            json!({"command": "echo step1; sleep 1; echo done-$((1+1))"}),
        ),
        Reply::text("done"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--json"])
        .args(sshd.buddy_args())
        .arg("go")
        .run();
    out.assert_success();
    let tails = progress_tails(&out.stdout);
    assert!(
        tails.iter().any(|(t, late)| t == "step1" && !late),
        "no live step1 before the result: {}",
        out.stdout
    );
    assert!(result_of(&p.chat_requests(), "s").ends_with("step1\ndone-2"));
}

#[test]
fn a_command_in_a_remote_tmux_pane_streams_its_output_while_it_runs() {
    let sshd = Sshd::start();
    let session = format!("buddy-ssh-live-{}", std::process::id());
    struct KillSession(String);
    impl Drop for KillSession {
        fn drop(&mut self) {
            let _ = Sshd::as_user(&format!("tmux kill-session -t ={}", self.0));
        }
    }
    let _cleanup = KillSession(session.clone());
    let p = FakeProvider::start(vec![
        call(
            "t",
            "run_shell",
            json!({"command": "echo step1; sleep 3; echo done-$((1+1))"}),
        ),
        Reply::text("done"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--json"])
        .args(sshd.buddy_args())
        .arg(format!("--tmux={session}"))
        .arg("go")
        .run();
    out.assert_success();
    let tails = progress_tails(&out.stdout);
    assert!(
        tails.iter().any(|(t, late)| t == "step1" && !late),
        "no live step1 before the result: {}",
        out.stdout
    );
    assert!(result_of(&p.chat_requests(), "t").ends_with("step1\ndone-2"));
}

#[test]
fn edit_file_and_apply_patch_change_files_over_ssh_as_the_remote_user() {
    let sshd = Sshd::start();
    let dir = RemoteDir::new("edits");
    let setup = Sshd::as_user(&format!(
        "mkdir -p '{d}' && printf 'alpha\\r\\n  beta  \\r\\ngamma\\r\\n' > '{d}/win.txt' \
         && chmod 640 '{d}/win.txt' && printf 'one\\ntwo\\n' > '{d}/a.txt' && echo bye > '{d}/old.txt'",
        d = dir.0
    ));
    assert!(setup.status.success(), "{setup:?}");
    let win = format!("{}/win.txt", dir.0);
    let a = format!("{}/a.txt", dir.0);
    // edit_file: a drifted match on a CRLF file, then an ambiguous one.
    let p = FakeProvider::start(vec![
        call(
            "e1",
            "edit_file",
            json!({"path": win, "old_string": "beta\n", "new_string": "BETA\n"}),
        ),
        call(
            "e2",
            "edit_file",
            json!({"path": a, "old_string": "o", "new_string": "0"}),
        ),
        Reply::text("done"),
    ]);
    let runtime = TempDir::new("xdg-runtime");
    BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .arg("exec")
        .args(sshd.buddy_args())
        .arg("edit there")
        .run()
        .assert_success();
    let reqs = p.chat_requests();
    assert_eq!(
        result_of(&reqs, "e1"),
        format!("edited {win}: line 2 (matched ignoring indentation and trailing whitespace)")
    );
    assert!(result_of(&reqs, "e2").contains("matches 2 places"));
    assert_eq!(
        std::fs::read(&win).expect("win.txt"),
        b"alpha\r\n  BETA\r\ngamma\r\n"
    );
    assert_eq!(
        std::fs::read(&a).expect("a.txt"),
        b"one\ntwo\n",
        "ambiguous edit wrote"
    );
    let meta = std::fs::metadata(&win).expect("metadata");
    assert_eq!(meta.mode() & 0o777, 0o640, "mode kept");
    assert_eq!(meta.uid(), uid_of(USER), "not written over SSH");

    // apply_patch (a GPT model): an update, an add and a delete in one patch.
    let patch = format!(
        "*** Begin Patch\n*** Update File: {a}\n one\n-two\n+2\n*** Add File: {d}/new/n.txt\n+fresh\n*** Delete File: {d}/old.txt\n*** End Patch",
        d = dir.0
    );
    let p = FakeProvider::start(vec![
        call("p", "apply_patch", json!({ "input": patch })),
        Reply::text("done"),
    ]);
    BuddyCmd::new()
        .config(config_no_confirm(&p, "").replace("\"fake-model\"", "\"gpt-5\""))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .arg("exec")
        .args(sshd.buddy_args())
        .arg("patch there")
        .run()
        .assert_success();
    let r = result_of(&p.chat_requests(), "p");
    assert!(
        r.starts_with(&format!("applied the patch: update {a}")),
        "{r}"
    );
    assert_eq!(std::fs::read(&a).expect("a.txt"), b"one\n2\n");
    let added = format!("{}/new/n.txt", dir.0);
    assert_eq!(std::fs::read(&added).expect("n.txt"), b"fresh\n");
    assert_eq!(
        std::fs::metadata(&added).expect("n.txt").uid(),
        uid_of(USER)
    );
    assert!(!std::path::Path::new(&format!("{}/old.txt", dir.0)).exists());
    assert!(sshd.connections() >= 2, "{}", sshd.log());
}

#[test]
fn a_rewind_of_code_puts_files_back_over_ssh_byte_for_byte() {
    let sshd = Sshd::start();
    let dir = RemoteDir::new("rewind");
    // CRLF, trailing blanks, no final newline, a mode of its own.
    let original: &[u8] = b"alpha\r\n  beta  \r\nno final newline \xe2\x9c\x93";
    let setup = Sshd::as_user(&format!(
        "mkdir -p '{d}' && printf 'alpha\\r\\n  beta  \\r\\nno final newline \\342\\234\\223' > '{d}/win.txt' \
         && chmod 640 '{d}/win.txt'",
        d = dir.0
    ));
    assert!(setup.status.success(), "{setup:?}");
    let win = format!("{}/win.txt", dir.0);
    let made = format!("{}/made.txt", dir.0);
    assert_eq!(std::fs::read(&win).expect("win.txt"), original);
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "e1",
                "edit_file",
                json!({"path": win, "old_string": "beta", "new_string": "BETA"}).to_string(),
            ),
            ToolCallSpec::new(
                "e2",
                "edit_file",
                json!({"path": made, "old_string": "", "new_string": "made there\n"}).to_string(),
            ),
        ]),
        Reply::text("edited there"),
    ]);
    let cmd = BuddyCmd::new().config(config_no_confirm(&p, ""));
    let mut args: Vec<String> = sshd.buddy_args();
    args.push("--no-tmux".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = Tmux::start(&cmd, &args);
    let prompt = format!("(ssh {USER}@127.0.0.1)>");
    t.wait_for("the ssh prompt", |_| t.cursor_line().starts_with(&prompt));
    t.line("edit over there");
    t.wait_text("edited there");
    assert_eq!(
        std::fs::read(&win).expect("win.txt"),
        b"alpha\r\n  BETA  \r\nno final newline \xe2\x9c\x93"
    );
    assert_eq!(std::fs::read(&made).expect("made.txt"), b"made there\n");

    let screen = t.open_newest_turn("edit over there");
    assert!(
        screen.contains("restore") && screen.contains("win.txt"),
        "{screen}"
    );
    assert!(
        screen.contains("delete  ") && screen.contains("made.txt"),
        "{screen}"
    );
    t.keys(&["c"]);
    t.wait_text("code: 2 file(s) rewound");
    // Back byte for byte, through SSH: the remote user's file, its mode.
    assert_eq!(std::fs::read(&win).expect("win.txt"), original);
    let meta = std::fs::metadata(&win).expect("metadata");
    assert_eq!(meta.mode() & 0o777, 0o640, "mode kept");
    assert_eq!(meta.uid(), uid_of(USER), "not written over SSH");
    assert!(!std::path::Path::new(&made).exists(), "the new file stays");
}

/// A rewind over SSH puts files back where buddy wrote them, not where a
/// directory symlink put in place since leads: the file outside that buddy
/// never wrote is neither deleted nor overwritten.
#[test]
fn a_rewind_over_ssh_does_not_follow_a_directory_symlink_put_in_place_since() {
    let sshd = Sshd::start();
    let dir = RemoteDir::new("rewind-link");
    let setup = Sshd::as_user(&format!(
        "mkdir -p '{d}/sub' '{d}/outside' && printf 'first\\n' > '{d}/sub/old.txt' \
         && printf 'not buddy s\\n' > '{d}/outside/old.txt' && printf 'keep me\\n' > '{d}/outside/new.txt'",
        d = dir.0
    ));
    assert!(setup.status.success(), "{setup:?}");
    let old = format!("{}/sub/old.txt", dir.0);
    let new = format!("{}/sub/new.txt", dir.0);
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "e1",
                "edit_file",
                json!({"path": old, "old_string": "first", "new_string": "second"}).to_string(),
            ),
            ToolCallSpec::new(
                "e2",
                "edit_file",
                json!({"path": new, "old_string": "", "new_string": "made there\n"}).to_string(),
            ),
        ]),
        Reply::text("edited there"),
    ]);
    let cmd = BuddyCmd::new().config(config_no_confirm(&p, ""));
    let mut args: Vec<String> = sshd.buddy_args();
    args.push("--no-tmux".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = Tmux::start(&cmd, &args);
    let prompt = format!("(ssh {USER}@127.0.0.1)>");
    t.wait_for("the ssh prompt", |_| t.cursor_line().starts_with(&prompt));
    t.line("edit over there");
    t.wait_text("edited there");
    assert_eq!(std::fs::read_to_string(&old).expect("old.txt"), "second\n");
    // Later, a command on the host puts a symlink to another directory
    // where `sub` was.
    let swap = Sshd::as_user(&format!(
        "rm -rf '{d}/sub' && ln -s '{d}/outside' '{d}/sub'",
        d = dir.0
    ));
    assert!(swap.status.success(), "{swap:?}");

    t.open_newest_turn("edit over there");
    t.keys(&["c"]);
    t.wait_texts(&["FAILED", "now leads to"]);
    let outside = |f: &str| std::fs::read_to_string(format!("{}/outside/{f}", dir.0));
    assert_eq!(
        outside("old.txt").expect("outside old.txt"),
        "not buddy s\n"
    );
    assert_eq!(outside("new.txt").expect("outside new.txt"), "keep me\n");
}
