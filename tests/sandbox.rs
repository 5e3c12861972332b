//! End-to-end tests of the Landlock sandbox: the real binary runs `run_shell`
//! calls from the fake provider, and the files on disk (and a loopback
//! listener) show what the commands could and could not do.
//!
//! buddy's home and working directory live under Cargo's target dir here, not
//! under /tmp: /tmp is writable in workspace-write mode, so a workdir there
//! would prove nothing.

use crate::support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::fake_provider::{tool_result, FakeProvider, Reply, ToolCallSpec};
use support::{fake_config, BuddyCmd, TempDir};

fn outside_temp() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let temp_dirs = [
        std::env::temp_dir(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/dev/shm"),
    ];
    if !temp_dirs.iter().any(|t| target.starts_with(t)) {
        return target.join("sandbox-tests");
    }
    // A checkout under /tmp (a fresh clone may be): the runner's own cache
    // directory is outside every directory the sandbox leaves writable.
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .expect("HOME is set");
    home.join(".cache").join("buddy-sandbox-tests")
}

fn config(p: &FakeProvider, tools: &str) -> String {
    format!(
        "{}\n[tools]\nshell_confirm = false\n{tools}\n",
        fake_config(p)
    )
}

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

/// Runs `buddy exec` in a workdir outside the temp dirs with one model turn
/// of `calls`, and returns the command (for its dirs) and the tool results.
fn run(tools: &str, extra_args: &[&str], calls: Vec<ToolCallSpec>) -> (BuddyCmd, Vec<Value>) {
    let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
    let p = FakeProvider::start(vec![Reply::tool_calls(calls), Reply::text("done")]);
    let mut args = vec!["exec"];
    args.extend_from_slice(extra_args);
    args.push("go");
    let cmd = BuddyCmd::new_in(&outside_temp())
        .config(config(&p, tools))
        .args(args);
    assert!(
        ["/tmp", "/var/tmp", "/dev/shm"]
            .iter()
            .chain([std::env::temp_dir().to_str().unwrap_or("/tmp")].iter())
            .all(|t| !cmd.work_dir().starts_with(t)),
        "the workdir must be outside the temp dirs"
    );
    let out = cmd.run();
    out.assert_success();
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2, "stderr: {}", out.stderr);
    let results = ids
        .iter()
        .map(|id| Value::String(tool_result(&reqs[1], id)))
        .collect();
    (cmd, results)
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// A fresh file name directly in the system temp dir.
fn temp_file(label: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "buddy-sandbox-{label}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ))
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

#[test]
fn workspace_write_allows_the_workdir_and_temp_but_not_elsewhere() {
    let outside = TempDir::new_in(&outside_temp(), "outside");
    let target = outside.join("escaped.txt");
    let tmp = temp_file("ww");
    let (cmd, r) = run(
        "sandbox = \"workspace-write\"",
        &[],
        vec![
            shell("in", "echo inside > inside.txt && mkdir sub && echo ok"),
            shell("out", &format!("echo x > {}", q(&target))),
            shell("tmp", &format!("echo t > {} && echo tmp-ok", q(&tmp))),
            shell("dev", "echo hi > /dev/null && echo err >&2 && echo dev-ok"),
        ],
    );
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("inside.txt")).ok(),
        Some("inside\n".into())
    );
    assert!(text(&r[0]).starts_with("exit code: 0"), "{}", r[0]);
    assert!(!target.exists(), "a write outside the workdir got through");
    assert!(text(&r[1]).contains("Permission denied"), "{}", r[1]);
    assert!(
        text(&r[1]).contains("sandbox (workspace-write)"),
        "{}",
        r[1]
    );
    assert!(text(&r[1]).starts_with("exit code: 2"), "{}", r[1]);
    assert!(tmp.exists(), "{}", r[2]);
    let _ = std::fs::remove_file(&tmp);
    assert!(text(&r[3]).contains("dev-ok"), "{}", r[3]);
    assert!(!text(&r[3]).contains("note:"), "{}", r[3]);
}

#[test]
fn read_only_refuses_the_workdir_and_temp_too() {
    let tmp = temp_file("ro");
    let (cmd, r) = run(
        "sandbox = \"read-only\"",
        &[],
        vec![
            shell("in", "echo inside > inside.txt"),
            shell("tmp", &format!("echo t > {}", q(&tmp))),
            shell("read", "cat buddy.toml > /dev/null && echo read-ok"),
        ],
    );
    assert!(!cmd.work_dir().join("inside.txt").exists(), "{}", r[0]);
    assert!(text(&r[0]).contains("Permission denied"), "{}", r[0]);
    assert!(text(&r[0]).contains("read-only sandbox"), "{}", r[0]);
    assert!(!tmp.exists(), "{}", r[1]);
    assert!(text(&r[2]).contains("read-ok"), "{}", r[2]);
}

#[test]
fn off_allows_writes_anywhere_even_with_auto_approve() {
    let outside = TempDir::new_in(&outside_temp(), "outside");
    let target = outside.join("written.txt");
    let (_cmd, r) = run(
        "sandbox = \"off\"",
        &["--dangerously-auto-approve"],
        vec![shell("out", &format!("echo x > {}", q(&target)))],
    );
    assert!(target.exists(), "{}", r[0]);
}

#[test]
fn auto_approve_confines_commands_by_default() {
    let outside = TempDir::new_in(&outside_temp(), "outside");
    let target = outside.join("escaped.txt");
    let (cmd, r) = run(
        "",
        &["--dangerously-auto-approve"],
        vec![
            shell("out", &format!("echo x > {}", q(&target))),
            shell("in", "echo y > inside.txt"),
        ],
    );
    assert!(!target.exists(), "{}", r[0]);
    assert!(text(&r[0]).contains("workspace-write"), "{}", r[0]);
    assert!(cmd.work_dir().join("inside.txt").exists(), "{}", r[1]);
}

#[test]
fn exit_status_and_timeouts_are_kept_inside_the_sandbox() {
    let (cmd, r) = run(
        "sandbox = \"workspace-write\"",
        &[],
        vec![
            shell("code", "echo out; echo err >&2; exit 3"),
            ToolCallSpec::new(
                "slow",
                "run_shell",
                json!({"command": "sleep 30 & echo $! > bg.pid; sleep 30", "timeout": "1s"})
                    .to_string(),
            ),
        ],
    );
    assert_eq!(text(&r[0]), "exit code: 3\nstdout:\nout\nstderr:\nerr");
    assert!(text(&r[1]).starts_with("timed out after 1 s"), "{}", r[1]);
    // The background child was in the command's process group, so it died too.
    let pid = std::fs::read_to_string(cmd.work_dir().join("bg.pid")).expect("bg.pid");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    assert!(
        stat.is_empty() || state.starts_with('Z'),
        "background sleep survived: {stat}"
    );
}

/// An extended attribute of `path` read outside the sandbox (python3, as the
/// commands under test use; Rust's std has no xattr calls).
fn xattr(path: &Path, name: &str) -> Option<String> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import os,sys\ntry: print(os.getxattr(sys.argv[1], sys.argv[2]).decode())\nexcept OSError: sys.exit(3)",
        ])
        .arg(path)
        .arg(name)
        .output()
        .expect("python3 runs");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn set_xattr_outside(path: &Path, name: &str, value: &str) {
    let status = std::process::Command::new("python3")
        .args([
            "-c",
            "import os,sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode())",
        ])
        .arg(path)
        .arg(name)
        .arg(value)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "this file system must take user xattrs");
}

/// Each metadata call on a file outside the workspace, one `run_shell` call
/// apiece, under `mode`: owners and extended attributes are refused with
/// EPERM by the system-call filter; modes and times get through (Landlock
/// has no right for them, and the filter leaves them for workspace work).
fn metadata_calls_outside_the_workspace(mode: &str) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let outside = TempDir::new_in(&outside_temp(), "metadata");
    let file = outside.join("victim.txt");
    std::fs::write(&file, "v").expect("write victim");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    set_xattr_outside(&file, "user.keep", "kept");
    let before = std::fs::metadata(&file).expect("stat");
    let f = q(&file);
    let (_cmd, r) = run(
        &format!("sandbox = \"{mode}\""),
        &[],
        vec![
            shell("chmod", &format!("chmod 600 {f} && echo chmod-ok")),
            shell(
                "touch",
                &format!("touch -d 2001-02-03T04:05:06 {f} && echo touch-ok"),
            ),
            shell(
                "setxattr",
                &format!("python3 -c 'import os,sys; os.setxattr(sys.argv[1], \"user.buddy\", b\"x\")' {f} && echo setxattr-ok"),
            ),
            shell(
                "removexattr",
                &format!("python3 -c 'import os,sys; os.removexattr(sys.argv[1], \"user.keep\")' {f} && echo removexattr-ok"),
            ),
            shell("chown", &format!("chown 4321:4321 {f} && echo chown-ok")),
            shell("chattr", &format!("chattr +i {f} && echo chattr-ok")),
        ],
    );
    let after = std::fs::metadata(&file).expect("stat");
    let flags = lsattr(&file);
    // An immutable file would outlive the test's directory.
    let _ = std::process::Command::new("chattr")
        .arg("-i")
        .arg(&file)
        .status();

    // Not stopped: the mode and the times.
    assert!(text(&r[0]).contains("chmod-ok"), "{}", r[0]);
    assert_eq!(after.permissions().mode() & 0o777, 0o600);
    assert!(text(&r[1]).contains("touch-ok"), "{}", r[1]);
    assert!(after.mtime() < 1_000_000_000, "mtime {}", after.mtime());

    // Stopped, with EPERM rather than a killed process, and the note saying why.
    for (i, call) in [
        (2, "setxattr"),
        (3, "removexattr"),
        (4, "chown"),
        (5, "chattr"),
    ] {
        let t = text(&r[i]);
        assert!(
            !t.contains(&format!("{call}-ok")),
            "{call} got through: {t}"
        );
        assert!(t.contains("Operation not permitted"), "{call}: {t}");
        assert!(!t.contains("killed by signal"), "{call}: {t}");
        assert!(t.contains("owner or extended attributes"), "{call}: {t}");
    }
    assert_eq!(xattr(&file, "user.buddy"), None, "{}", r[2]);
    assert_eq!(
        xattr(&file, "user.keep").as_deref(),
        Some("kept"),
        "{}",
        r[3]
    );
    // The file was made by this test: as root (the test machines), chown to
    // another user would succeed without the filter.
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    assert!(!flags.contains('i'), "immutable: {flags}; {}", r[5]);
}

/// The flags field of `lsattr -d` for `path` (`----i---…` when immutable).
fn lsattr(path: &Path) -> String {
    let out = std::process::Command::new("lsattr")
        .arg("-d")
        .arg(path)
        .output()
        .expect("lsattr runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn workspace_write_refuses_owner_and_xattr_changes_outside_but_not_mode_or_times() {
    metadata_calls_outside_the_workspace("workspace-write");
}

#[test]
fn read_only_refuses_owner_and_xattr_changes_outside_but_not_mode_or_times() {
    metadata_calls_outside_the_workspace("read-only");
}

#[test]
fn workspace_work_with_modes_times_and_git_still_works_in_the_sandbox() {
    use std::os::unix::fs::MetadataExt;
    let (cmd, r) = run(
        "sandbox = \"workspace-write\"",
        &[],
        vec![
            shell(
                "script",
                "printf '#!/bin/sh\\necho script-ran\\n' > s.sh && chmod +x s.sh && ./s.sh",
            ),
            shell(
                "touch",
                "touch made.txt && touch -d 2001-02-03T04:05:06 made.txt && echo touch-ok",
            ),
            shell(
                "git",
                "git init -q repo && cd repo && cp ../s.sh . && git add s.sh \
                 && git -c user.name=t -c user.email=t@example.com commit -qm one \
                 && rm s.sh && git checkout -- s.sh && test -x s.sh && echo git-ok",
            ),
            shell("chown", "touch mine && chown 4321 mine && echo chown-ok"),
        ],
    );
    assert!(text(&r[0]).contains("script-ran"), "{}", r[0]);
    assert!(text(&r[1]).contains("touch-ok"), "{}", r[1]);
    let made = std::fs::metadata(cmd.work_dir().join("made.txt")).expect("made.txt");
    assert!(made.mtime() < 1_000_000_000, "{}", r[1]);
    assert!(text(&r[2]).contains("git-ok"), "{}", r[2]);
    // The filter sees no paths: owners are refused inside the workspace too.
    assert!(text(&r[3]).contains("Operation not permitted"), "{}", r[3]);
    assert!(!text(&r[3]).contains("chown-ok"), "{}", r[3]);
}

/// A loopback listener; after the run, whether a connection reached it.
fn listener() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

fn was_connected(l: &std::net::TcpListener) -> bool {
    // The handshake completes in the kernel before buddy's run ends, so a
    // connection that was made is already queued.
    l.set_nonblocking(true).expect("nonblocking");
    l.accept().is_ok()
}

fn connect_to(port: u16) -> String {
    format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo connected")
}

#[test]
fn sandbox_network_false_refuses_tcp_connections() {
    let (l, port) = listener();
    let (_cmd, r) = run(
        "sandbox = \"workspace-write\"\nsandbox_network = false",
        &[],
        vec![shell("net", &connect_to(port))],
    );
    assert!(!was_connected(&l), "{}", r[0]);
    assert!(text(&r[0]).contains("Permission denied"), "{}", r[0]);
    assert!(text(&r[0]).contains("no network connections"), "{}", r[0]);
}

#[test]
fn the_network_is_allowed_by_default() {
    let (l, port) = listener();
    let (_cmd, r) = run(
        "sandbox = \"workspace-write\"",
        &[],
        vec![shell("net", &connect_to(port))],
    );
    assert!(text(&r[0]).contains("connected"), "{}", r[0]);
    assert!(was_connected(&l));
}

#[test]
fn a_configured_sandbox_refuses_an_explicit_tmux_pane() {
    let p = FakeProvider::start(vec![Reply::text("unused")]);
    let out = BuddyCmd::new()
        .config(config(&p, "sandbox = \"read-only\""))
        .args(["exec", "--tmux", "go"])
        .run();
    out.assert_code(2);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(errors[0].contains("tmux pane"), "{}", out.stderr);
    assert_eq!(p.chat_requests().len(), 0);
}

#[test]
fn auto_approve_in_a_tmux_pane_is_refused_rather_than_unconfined() {
    let p = FakeProvider::start_repeating(vec![Reply::text("never")]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--tmux", "--dangerously-auto-approve", "hi"])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("tmux pane"), "{}", out.stderr);
    assert!(out.stderr.contains("sandbox = \"off\""), "{}", out.stderr);
    assert_eq!(p.request_count(), 0);
}
