//! One directory per target: in every target mode (this host directly and in
//! a tmux pane, SSH directly and in a pane, a container directly and in a
//! pane) the shell's `pwd`, a relative file made by `run_shell`, and relative
//! `write_file`/`read_file` all agree on one directory. On this host that is
//! the directory buddy was started in; remotely it is where the target's
//! commands start (the login directory over SSH, the container's working
//! directory). The real binary, the fake provider, a private tmux server per
//! test, the loopback sshd and podman.

use crate::support;

use serde_json::json;
use support::calls::{call, config_no_confirm, result_of};
use support::container::{engine_env, Container};
use support::fake_provider::{FakeProvider, Reply};
use support::sshd::{Sshd, USER};
use support::BuddyCmd;

/// File names unique to one test run, so runs in a shared remote home or in
/// `/` of a container never see each other's files.
fn tag(mode: &str) -> String {
    format!(
        "{mode}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    )
}

/// The script: in a pane, first move the pane's shell elsewhere (a person
/// may have); then `pwd` and a relative file from the shell, a relative
/// write and read by the file tools, and the shell reading the written file.
fn script(tag: &str, pane: bool) -> Vec<Reply> {
    let mut replies = Vec::new();
    if pane {
        replies.push(call(
            "cd",
            "send-keys",
            json!({"text": "cd /tmp", "enter": true}),
        ));
    }
    replies.extend([
        call(
            "pwd",
            "run_shell",
            json!({"command": format!("pwd; echo from-shell > shell-{tag}.txt")}),
        ),
        call(
            "write",
            "write_file",
            json!({"path": format!("tool-{tag}.txt"), "content": "from-tool\n"}),
        ),
        call(
            "read",
            "read_file",
            json!({"path": format!("shell-{tag}.txt")}),
        ),
        call(
            "cat",
            "run_shell",
            json!({"command": format!("cat tool-{tag}.txt; rm -f tool-{tag}.txt shell-{tag}.txt")}),
        ),
        Reply::text("done"),
    ]);
    replies
}

/// Checks the model saw one directory, `dir`, throughout.
fn assert_one_directory(p: &FakeProvider, dir: &str) {
    let reqs = p.chat_requests();
    assert_eq!(
        result_of(&reqs, "pwd"),
        format!("exit code: 0\nstdout:\n{dir}")
    );
    let read = result_of(&reqs, "read");
    assert!(
        read.contains("from-shell"),
        "read_file did not find the shell's file: {read}"
    );
    assert_eq!(
        result_of(&reqs, "cat"),
        "exit code: 0\nstdout:\nfrom-tool",
        "the shell did not find write_file's file"
    );
}

fn local_dir(cmd: &BuddyCmd) -> String {
    cmd.work_dir()
        .canonicalize()
        .expect("work dir")
        .display()
        .to_string()
}

#[test]
fn local_direct_commands_and_files_share_the_working_directory() {
    let tag = tag("local");
    let p = FakeProvider::start(script(&tag, false));
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "go"]);
    cmd.run().assert_success();
    assert_one_directory(&p, &local_dir(&cmd));
}

#[test]
fn local_tmux_commands_and_files_share_the_working_directory() {
    let tag = tag("tmux");
    let p = FakeProvider::start(script(&tag, true));
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--tmux", "go"]);
    cmd.run().assert_success();
    assert_one_directory(&p, &local_dir(&cmd));
}

/// Kills a tmux session buddytest's server holds, after the test.
struct RemoteSession(String);

impl Drop for RemoteSession {
    fn drop(&mut self) {
        let _ = Sshd::as_user(&format!("tmux kill-session -t ={}", self.0));
    }
}

#[test]
fn ssh_commands_and_files_share_the_login_directory() {
    let sshd = Sshd::start();
    let home = format!("/home/{USER}");
    for pane in [false, true] {
        let tag = tag(if pane { "ssh-tmux" } else { "ssh" });
        let p = FakeProvider::start(script(&tag, pane));
        let session = format!("buddy-wd-{tag}");
        let _cleanup = RemoteSession(session.clone());
        let mut cmd = BuddyCmd::new()
            .config(config_no_confirm(&p, ""))
            .arg("exec")
            .args(sshd.buddy_args());
        if pane {
            cmd = cmd.arg(format!("--tmux={session}"));
        }
        cmd.arg("go").run().assert_success();
        assert_one_directory(&p, &home);
    }
}

#[test]
fn container_commands_and_files_share_its_working_directory() {
    let ctr = Container::start();
    ctr.install_tmux();
    let out = ctr.exec("pwd");
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(dir.starts_with('/'), "{dir}");
    for pane in [false, true] {
        let tag = tag(if pane { "ctr-tmux" } else { "ctr" });
        let p = FakeProvider::start(script(&tag, pane));
        let mut cmd = engine_env(BuddyCmd::new())
            .config(config_no_confirm(&p, ""))
            .args(["exec", "--container", ctr.name()]);
        if pane {
            cmd = cmd.arg("--tmux=ctr-wd");
        }
        cmd.arg("go").run().assert_success();
        assert_one_directory(&p, &dir);
    }
}
