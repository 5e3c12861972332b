//! Background jobs end to end: `run_shell` with `"background": true` against
//! the fake model, followed across turns with `shell_output`, fed with
//! `shell_write`, stopped with `shell_kill`, and stopped by buddy itself when
//! it exits; a command the denylist refuses is refused in the background too.
//! Every job writes its shell's pid to a file, so the test can see whether
//! that process is still alive.

use crate::support;

use serde_json::json;
use std::path::Path;
use std::time::Duration;
use support::calls::{call, config_no_confirm, result_of};
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::tmux::Tmux;
use support::wait::{poll_until, wait_until};
use support::BuddyCmd;

/// Alive and not a zombie (a zombie has ended; only its parent's reaping is left).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s.rsplit(')').next().unwrap_or("").trim_start();
        !state.starts_with('Z')
    })
}

/// The pid a job wrote to `file` (it may still be writing it).
fn pid_in(file: &Path) -> u32 {
    wait_until(
        format!("a pid in {}", file.display()),
        Duration::from_secs(10),
        || {
            let text = std::fs::read_to_string(file).ok()?;
            text.ends_with('\n').then(|| text.trim().parse().ok())?
        },
    )
}

/// Gone within `within`: true, or false if it is still there past it.
fn ends_within(pid: u32, within: Duration) -> bool {
    poll_until(within, || (!alive(pid)).then_some(())).is_some()
}

#[test]
fn a_background_job_is_followed_across_turns_and_stopped() {
    // Turn 1 starts two jobs: one that answers its input, one left running.
    // Turn 2 writes to the first, reads its answer, and stops it. The second
    // is stopped by buddy when the line session ends.
    let echo = "echo $$ > echo.pid; while read l; do echo \"got $l\"; done";
    let idle = "echo $$ > idle.pid; echo idling; exec sleep 300";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "start",
                "run_shell",
                json!({"command": echo, "background": true}).to_string(),
            ),
            ToolCallSpec::new(
                "idle",
                "run_shell",
                json!({"command": idle, "background": true}).to_string(),
            ),
        ]),
        Reply::text("both started"),
        call(
            "write",
            "shell_write",
            json!({"job_id": "1", "input": "ping\n"}),
        ),
        call(
            "read",
            "shell_output",
            json!({"job_id": "1", "wait_ms": 10000}),
        ),
        call("kill", "shell_kill", json!({"job_id": "1"})),
        call("after", "shell_output", json!({"job_id": 1})),
        Reply::text("all done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .stdin("start the jobs\nnow use them\n");
    let out = cmd.run();
    out.assert_success();
    assert!(out.stdout.contains("both started"), "{}", out.stdout);
    assert!(out.stdout.contains("all done"), "{}", out.stdout);

    let reqs = p.chat_requests();
    let started = result_of(&reqs, "start");
    assert!(
        started.starts_with("started background job 1 (job_id \"1\")"),
        "{started}"
    );
    assert!(started.contains("job 1: running"), "{started}");
    let idle_started = result_of(&reqs, "idle");
    assert!(
        idle_started.starts_with("started background job 2"),
        "{idle_started}"
    );
    // The second turn's request carries the first turn's results, and
    // reads what the job answered in between.
    assert_eq!(result_of(&reqs, "write"), "sent 5 bytes to job 1");
    let read = result_of(&reqs, "read");
    assert_eq!(read, "job 1: running\noutput:\ngot ping", "{read}");
    let killed = result_of(&reqs, "kill");
    assert_eq!(killed, "job 1: stopped (killed by signal 15)");
    let after = result_of(&reqs, "after");
    assert!(after.starts_with("job 1: stopped"), "{after}");
    assert!(after.ends_with("(no new output)"), "{after}");

    let echo_pid = pid_in(&cmd.work_dir().join("echo.pid"));
    let idle_pid = pid_in(&cmd.work_dir().join("idle.pid"));
    assert!(
        !alive(echo_pid),
        "shell_kill left job 1 ({echo_pid}) running"
    );
    // buddy has exited: the job it left running went with it.
    assert!(
        ends_within(idle_pid, Duration::from_secs(5)),
        "job 2 ({idle_pid}) outlived buddy"
    );
}

#[test]
fn a_job_left_running_is_stopped_when_exec_ends() {
    // It ignores TERM, so only the KILL after the grace ends it.
    let line = "trap '' TERM; echo $$ > job.pid; while :; do sleep 1; done";
    let p = FakeProvider::start(vec![
        call(
            "bg",
            "run_shell",
            json!({"command": line, "background": true}),
        ),
        Reply::text("left it running"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "start a server"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "left it running\n");
    let pid = pid_in(&cmd.work_dir().join("job.pid"));
    assert!(!alive(pid), "the job ({pid}) outlived buddy exec");
}

#[test]
fn a_job_does_not_outlive_buddy_killed_with_sigkill() {
    // buddy gets no chance to stop the job: its guardian notices that
    // buddy's end of a pipe closed and stops the job's group. The job
    // shell and the sleep it started are both in that group.
    let gate = support::fake_provider::Gate::new();
    let line = "echo $$ > job.pid; sleep 300 & echo $! > child.pid; wait";
    let p = FakeProvider::start(vec![
        call(
            "bg",
            "run_shell",
            json!({"command": line, "background": true}),
        ),
        // buddy waits here, with the job running, until it is killed.
        Reply::text("never seen").gated(&gate),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "start a server"]);
    let mut buddy = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start buddy");
    let shell = pid_in(&cmd.work_dir().join("job.pid"));
    let sleeper = pid_in(&cmd.work_dir().join("child.pid"));
    wait_until("the second model request", Duration::from_secs(10), || {
        (p.chat_requests().len() >= 2).then_some(())
    });
    assert!(alive(shell) && alive(sleeper));
    buddy.kill().expect("kill -9 buddy");
    buddy.wait().expect("reap buddy");
    assert!(
        ends_within(shell, Duration::from_secs(10)),
        "the job's shell ({shell}) outlived buddy killed with -9"
    );
    assert!(
        ends_within(sleeper, Duration::from_secs(10)),
        "the job's child ({sleeper}) outlived buddy killed with -9"
    );
    gate.open();
}

#[test]
fn a_denied_command_is_refused_in_the_background_too() {
    // A stub `rm` first on PATH records any call, so nothing is removed even
    // if the check failed.
    let stub = support::TempDir::new("jobs-stub");
    let marker = stub.join("rm-called");
    let rm = stub.join("rm");
    std::fs::write(
        &rm,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\n", marker.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&rm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "bg",
                "run_shell",
                json!({"command": "rm -rf /", "background": true}).to_string(),
            ),
            ToolCallSpec::new(
                "fg",
                "run_shell",
                json!({"command": "rm -rf /"}).to_string(),
            ),
        ]),
        call("list", "shell_output", json!({"job_id": "1"})),
        Reply::text("refused"),
    ]);
    let path = format!(
        "{}:{}",
        stub.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = BuddyCmd::new()
        .config_for(&p)
        .env("PATH", path)
        .args(["exec", "--dangerously-auto-approve", "clean up"])
        .run();
    out.assert_success();
    let reqs = p.chat_requests();
    let refused = result_of(&reqs, "bg");
    assert!(refused.starts_with("error: command refused"), "{refused}");
    assert!(refused.contains("the denylist never allows"), "{refused}");
    // Word for word what the same command gets in the foreground.
    assert_eq!(refused, result_of(&reqs, "fg"));
    // No job was made.
    let listed = result_of(&reqs, "list");
    assert!(
        listed.contains("there are no background jobs in this session"),
        "{listed}"
    );
    assert!(!marker.exists(), "rm ran");
}

#[test]
fn the_repl_lists_jobs_and_stops_them_on_clear_and_on_quit() {
    let first = "echo $$ > first.pid; exec sleep 300";
    let second = "echo $$ > second.pid; exec sleep 300";
    let p = FakeProvider::start(vec![
        call(
            "one",
            "run_shell",
            json!({"command": first, "background": true}),
        ),
        Reply::text("first started"),
        call(
            "two",
            "run_shell",
            json!({"command": second, "background": true}),
        ),
        Reply::text("second started"),
    ]);
    let cmd = BuddyCmd::new().config(config_no_confirm(&p, ""));
    let t = Tmux::start(&cmd, &[]);
    t.wait_for("the prompt", |s| s.contains("\n>") || s.starts_with("> "));
    t.line("start one");
    t.wait_text("first started");
    t.line("/jobs");
    t.wait_text("job 1  running  ");
    t.wait_text(first);
    let first_pid = pid_in(&cmd.work_dir().join("first.pid"));
    // A cleared session takes its jobs with it; the list starts again.
    t.line("/clear");
    assert!(
        ends_within(first_pid, Duration::from_secs(10)),
        "/clear left job 1 ({first_pid}) running"
    );
    t.line("/jobs");
    t.wait_text("no background jobs");
    t.line("start another");
    t.wait_text("second started");
    let second_pid = pid_in(&cmd.work_dir().join("second.pid"));
    assert!(alive(second_pid));
    t.line("/quit");
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    assert!(
        ends_within(second_pid, Duration::from_secs(5)),
        "job ({second_pid}) outlived the REPL"
    );
    assert!(result_of(&p.chat_requests(), "two").starts_with("started background job 1"));
}

/// Whether the SSH test user runs a process whose command line is `line`.
fn remote_running(line: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-u", support::sshd::USER, "-f", &format!("^{line}$")])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("pgrep")
        .success()
}

#[test]
fn over_ssh_a_job_runs_on_the_server_reads_its_stdin_and_stops_with_buddy() {
    let sshd = support::sshd::Sshd::start();
    let line = "read l; echo \"got $l on $(id -un)\"; exec sleep 35.625";
    let p = FakeProvider::start(vec![
        call(
            "bg",
            "run_shell",
            json!({"command": line, "background": true}),
        ),
        call("w", "shell_write", json!({"job_id": "1", "input": "hi\n"})),
        call(
            "out",
            "shell_output",
            json!({"job_id": "1", "wait_ms": 20000}),
        ),
        Reply::text("left it running"),
    ]);
    let runtime = support::TempDir::new("xdg-runtime");
    BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .arg("exec")
        .args(sshd.buddy_args())
        .arg("start it there")
        .run()
        .assert_success();
    let reqs = p.chat_requests();
    assert_eq!(
        result_of(&reqs, "out"),
        format!("job 1: running\noutput:\ngot hi on {}", support::sshd::USER)
    );
    // buddy exec has ended: the job on the server went with it.
    support::wait::wait_for(
        "the job to stop on the server",
        Duration::from_secs(5),
        || !remote_running("sleep 35.625"),
    );
}

#[test]
fn in_a_container_a_job_runs_there_reads_its_stdin_and_stops_with_buddy() {
    let ctr = support::container::Container::start();
    let line = "read l; echo \"got $l on $(hostname)\"; exec sleep 36.875";
    let p = FakeProvider::start(vec![
        call(
            "bg",
            "run_shell",
            json!({"command": line, "background": true}),
        ),
        call("w", "shell_write", json!({"job_id": "1", "input": "hi\n"})),
        call(
            "out",
            "shell_output",
            json!({"job_id": "1", "wait_ms": 20000}),
        ),
        Reply::text("left it running"),
    ]);
    let cmd = support::container::engine_env(BuddyCmd::new());
    // A global config in place, as the container suite has it.
    let dir = cmd.config_home().join("buddy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("buddy.toml"), "").unwrap();
    cmd.config(config_no_confirm(&p, ""))
        .args(["exec", "--container", ctr.name(), "start it there"])
        .run()
        .assert_success();
    assert_eq!(
        result_of(&p.chat_requests(), "out"),
        format!("job 1: running\noutput:\ngot hi on {}", ctr.hostname())
    );
    // buddy exec has ended: the job in the container went with it.
    let running = || {
        let out = ctr.exec("ps -o args 2>/dev/null || ps");
        let listing = String::from_utf8_lossy(&out.stdout).into_owned();
        // ps lists itself: the listing is real, not an error's silence.
        assert!(listing.contains("ps"), "{out:?}");
        listing.contains("sleep 36.875")
    };
    support::wait::wait_for(
        "the job to stop in the container",
        Duration::from_secs(5),
        || !running(),
    );
}

/// Starts `buddy` (`cmd` with `args`) on a script that starts `line` as a
/// background job and then waits at a gate; once the job's first output is
/// back, kills buddy with SIGKILL. The gate is opened afterwards.
fn kill_buddy_while_a_job_runs(cmd: BuddyCmd, args: &[&str], line: &str) {
    let gate = support::fake_provider::Gate::new();
    let p = FakeProvider::start(vec![
        call(
            "bg",
            "run_shell",
            json!({"command": line, "background": true}),
        ),
        Reply::text("never seen").gated(&gate),
    ]);
    let cmd = cmd.config(config_no_confirm(&p, "")).args(args);
    let mut buddy = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start buddy");
    wait_until("the job's start reported", Duration::from_secs(30), || {
        (p.chat_requests().len() >= 2).then_some(())
    });
    assert!(
        result_of(&p.chat_requests(), "bg").contains("started"),
        "{}",
        result_of(&p.chat_requests(), "bg")
    );
    buddy.kill().expect("kill -9 buddy");
    buddy.wait().expect("reap buddy");
    gate.open();
}

#[test]
fn over_ssh_a_job_does_not_outlive_buddy_killed_with_sigkill() {
    // The local ssh client dies with the job's local group; the far side
    // sees its input end and stops the job.
    let sshd = support::sshd::Sshd::start();
    let runtime = support::TempDir::new("xdg-runtime");
    let cmd = BuddyCmd::new().env("XDG_RUNTIME_DIR", runtime.path());
    let mut args = vec!["exec".to_string()];
    args.extend(sshd.buddy_args());
    args.push("start it there".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kill_buddy_while_a_job_runs(cmd, &args, "echo up; exec sleep 37.125");
    support::wait::wait_for(
        "the job to stop on the server",
        Duration::from_secs(15),
        || !remote_running("sleep 37.125"),
    );
}

#[test]
fn in_a_container_a_job_does_not_outlive_buddy_killed_with_sigkill() {
    let ctr = support::container::Container::start();
    let cmd = support::container::engine_env(BuddyCmd::new());
    let dir = cmd.config_home().join("buddy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("buddy.toml"), "").unwrap();
    kill_buddy_while_a_job_runs(
        cmd,
        &["exec", "--container", ctr.name(), "start it there"],
        "echo up; exec sleep 38.375",
    );
    support::wait::wait_for(
        "the job to stop in the container",
        Duration::from_secs(15),
        || {
            let out = ctr.exec("ps -o args 2>/dev/null || ps");
            let listing = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(listing.contains("ps"), "{out:?}");
            !listing.contains("sleep 38.375")
        },
    );
}
