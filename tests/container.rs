//! End-to-end tests of the `--container NAME` execution target: the real
//! binary, real containers (podman, and the docker client against podman's
//! Docker-compatible API) and the scripted fake provider. Each test has a
//! container of its own, removed when the test ends, pass or fail. See
//! tests/support/container.rs for the image and the engine set-up.

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::calls::{call, config_no_confirm, result_of};
use support::container::{engine_env, Container, DockerService};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::tmux::Tmux;
use support::{fake_config, BuddyCmd, Output, TempDir};

/// The system message of a request.
fn system_prompt(req: &RecordedRequest) -> String {
    let messages = req.json()["messages"].as_array().expect("messages array");
    let first = &messages[0];
    assert_eq!(first["role"], "system", "{first}");
    first["content"].as_str().expect("text content").to_string()
}

/// A buddy run with the container engine's environment and a global config
/// already in place, so no first-run note joins what stderr says.
fn buddy() -> BuddyCmd {
    let cmd = engine_env(BuddyCmd::new());
    let dir = cmd.config_home().join("buddy");
    std::fs::create_dir_all(&dir).expect("create the global config dir");
    std::fs::write(dir.join("buddy.toml"), "").expect("write the global config");
    cmd
}

/// Panics unless stderr is exactly one line containing every one of `parts`.
fn assert_one_line(out: &Output, parts: &[&str]) {
    let text = out.stderr.trim_end_matches('\n');
    assert!(
        !text.is_empty() && !text.contains('\n'),
        "stderr should be one line:\n{}",
        out.stderr
    );
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
}

/// A run_shell script that shows where it ran: the hostname and user, a file
/// left in `/tmp`, and its own stderr and exit code (see [`assert_ran_inside`]).
fn marking_script(mark: &str) -> String {
    format!("hostname; id -un; echo inside > /tmp/{mark}; echo err >&2; exit 4")
}

/// Panics unless `result` is what [`marking_script`] returns in `ctr`, and the
/// file it left is in the container and not on this host.
fn assert_ran_inside(ctr: &Container, result: &str, mark: &str) {
    assert_eq!(
        result,
        format!(
            "exit code: 4\nstdout:\n{}\nroot\nstderr:\nerr",
            ctr.hostname()
        )
    );
    assert_eq!(ctr.read(&format!("/tmp/{mark}")), b"inside\n");
    assert!(
        !std::path::Path::new("/tmp").join(mark).exists(),
        "the command wrote on the host"
    );
}

#[test]
fn run_shell_runs_inside_the_container_with_exact_output_and_exit_code() {
    let ctr = Container::start();
    let mark = format!("mark-{}", ctr.name());
    let cmd = buddy();
    let host_dir = cmd.work_dir().display().to_string();
    let p = FakeProvider::start(vec![
        call("a", "run_shell", json!({"command": marking_script(&mark)})),
        // Nothing is fed to the command, and the host's working directory is
        // not there.
        call(
            "b",
            "run_shell",
            json!({"command": format!("cat; test -d '{host_dir}' || echo no-host-dir; printf 'x\\ty!\\n'")}),
        ),
        Reply::text("done"),
    ]);
    let cmd = cmd
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--container", ctr.name(), "go"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let reqs = p.chat_requests();
    assert_ran_inside(&ctr, &result_of(&reqs, "a"), &mark);
    assert_eq!(
        result_of(&reqs, "b"),
        "exit code: 0\nstdout:\nno-host-dir\nx\ty!"
    );
}

#[test]
fn write_file_and_read_file_round_trip_exact_bytes_in_the_container() {
    let ctr = Container::start();
    let mut content = String::from(
        "first line\n\
         unicode: héllo wörld — ✓ 日本語 🦀\n\
         quotes: \"double\" 'single' `back` it's\n\
         shell: $HOME $(id -un) ${PATH} \\ \\\\n %s %% ; rm -rf / #\n\
         tab:\there, carriage return:\r\n\
         EOF\n",
    );
    let mut i = 0;
    while content.len() < 200_000 {
        content.push_str(&format!(
            "row {i:06}: the quick brown fox jumps over the lazy dog ✓ $VAR 'q' \"qq\"\n"
        ));
        i += 1;
    }
    content.push_str("tail without a newline ✓");
    let dir = "/tmp/dir with space";
    let big = format!("{dir}/it's a \"file\".txt");
    // An existing file, longer than what replaces it, with a mode to keep.
    let old = format!("{dir}/old.txt");
    let setup = ctr.exec(&format!(
        "mkdir -p '{dir}' && seq 1 5000 > '{old}' && chmod 640 '{old}'"
    ));
    assert!(setup.status.success(), "{setup:?}");
    let rel = format!("rel-{}.txt", ctr.name());
    let p = FakeProvider::start(vec![
        call("w1", "write_file", json!({"path": big, "content": content})),
        call("r1", "read_file", json!({"path": big})),
        call("w2", "write_file", json!({"path": old, "content": "short"})),
        call("r2", "read_file", json!({"path": old})),
        // A relative path is the container's, not the host working directory's.
        call(
            "w3",
            "write_file",
            json!({"path": rel, "content": "relative\n"}),
        ),
        Reply::text("done"),
    ]);
    // Unstreamed: the fake provider would send 200 KB of arguments a few
    // characters per event, which costs seconds and tests nothing here.
    let config = config_no_confirm(&p, "files_max_output_chars = 400000").replacen(
        "\n[tools]",
        "stream = false\n\n[tools]",
        1,
    );
    let cmd = buddy()
        .config(config)
        .args(["exec", "--container", ctr.name(), "go"]);
    cmd.run().assert_success();
    let reqs = p.chat_requests();
    let actor = format!("root@{}", ctr.name());
    assert_eq!(
        result_of(&reqs, "w1"),
        format!("wrote {} bytes to {big} on {actor}", content.len())
    );
    let r1 = result_of(&reqs, "r1");
    assert!(
        r1 == content,
        "read_file returned {} bytes, not the {} written; first difference at byte {:?}",
        r1.len(),
        content.len(),
        r1.bytes().zip(content.bytes()).position(|(a, b)| a != b)
    );
    // What the engine's stdin carried arrived unchanged (no newline added, no
    // re-encoding), as seen from outside buddy.
    let inside = ctr.read(&big);
    assert!(
        inside == content.as_bytes(),
        "the container has {} bytes, {} were written",
        inside.len(),
        content.len()
    );
    assert_eq!(
        result_of(&reqs, "w2"),
        format!("wrote 5 bytes to {old} on {actor}")
    );
    assert_eq!(result_of(&reqs, "r2"), "short");
    assert_eq!(ctr.read(&old), b"short");
    let mode = ctr.exec(&format!("stat -c %a '{old}'"));
    assert_eq!(String::from_utf8_lossy(&mode.stdout), "640\n", "mode kept");
    // The atomic writes left no temporary file behind.
    let listing = ctr.exec(&format!("ls -A '{dir}'"));
    assert_eq!(
        String::from_utf8_lossy(&listing.stdout),
        "it's a \"file\".txt\nold.txt\n"
    );
    let relative = ctr.exec(&format!("cat {rel}"));
    assert_eq!(String::from_utf8_lossy(&relative.stdout), "relative\n");
    assert!(!cmd.work_dir().join(&rel).exists(), "written on the host");
}

#[test]
fn edit_file_and_apply_patch_change_files_in_the_container_keeping_crlf_and_mode() {
    let ctr = Container::start();
    let setup = ctr.exec(
        "mkdir -p /srv/app && printf 'alpha\\r\\n  beta  \\r\\ngamma\\r\\n' > /srv/app/win.txt \\
         && chmod 750 /srv/app/win.txt && printf 'one\\ntwo\\n' > /srv/app/a.txt && echo bye > /srv/app/old.txt",
    );
    assert!(setup.status.success(), "{setup:?}");
    // edit_file (the fake model is no GPT): a drifted match, then an
    // ambiguous one that changes nothing.
    let p = FakeProvider::start(vec![
        call(
            "e1",
            "edit_file",
            json!({"path": "/srv/app/win.txt", "old_string": "beta\n", "new_string": "BETA\n"}),
        ),
        call(
            "e2",
            "edit_file",
            json!({"path": "/srv/app/a.txt", "old_string": "o", "new_string": "0"}),
        ),
        Reply::text("done"),
    ]);
    buddy()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--container", ctr.name(), "go"])
        .run()
        .assert_success();
    let reqs = p.chat_requests();
    assert_eq!(
        result_of(&reqs, "e1"),
        "edited /srv/app/win.txt: line 2 (matched ignoring indentation and trailing whitespace)"
    );
    assert!(result_of(&reqs, "e2").contains("matches 2 places"));
    assert_eq!(
        ctr.read("/srv/app/win.txt"),
        b"alpha\r\n  BETA\r\ngamma\r\n"
    );
    let mode = ctr.exec("stat -c %a /srv/app/win.txt");
    assert_eq!(String::from_utf8_lossy(&mode.stdout), "750\n", "mode kept");

    // apply_patch (a GPT model): three files in one patch.
    let patch = "*** Begin Patch\n*** Update File: /srv/app/a.txt\n one\n-two\n+2\n*** Add File: /srv/app/new/n.txt\n+fresh\n*** Delete File: /srv/app/old.txt\n*** End Patch";
    let p = FakeProvider::start(vec![
        call("p", "apply_patch", json!({ "input": patch })),
        Reply::text("done"),
    ]);
    buddy()
        .config(config_no_confirm(&p, "").replace("\"fake-model\"", "\"gpt-5\""))
        .args(["exec", "--container", ctr.name(), "go"])
        .run()
        .assert_success();
    let r = result_of(&p.chat_requests(), "p");
    assert!(
        r.starts_with("applied the patch: update /srv/app/a.txt"),
        "{r}"
    );
    assert_eq!(ctr.read("/srv/app/a.txt"), b"one\n2\n");
    assert_eq!(ctr.read("/srv/app/new/n.txt"), b"fresh\n");
    let gone = ctr.exec("test -e /srv/app/old.txt");
    assert!(!gone.status.success(), "old.txt still there");
}

#[test]
fn the_docker_client_reaches_the_container_through_the_api_socket() {
    let service = DockerService::start();
    let ctr = Container::start();
    let mark = format!("mark-{}", ctr.name());
    let p = FakeProvider::start(vec![
        call("a", "run_shell", json!({"command": marking_script(&mark)})),
        call(
            "w",
            "write_file",
            json!({"path": "/tmp/via-docker.txt", "content": "über\n'$x'"}),
        ),
        call("r", "read_file", json!({"path": "/tmp/via-docker.txt"})),
        Reply::text("done"),
    ]);
    let cmd = service
        .apply(buddy())
        .config(config_no_confirm(&p, ""))
        .args([
            "exec",
            "--container",
            ctr.name(),
            "--container-engine",
            "docker",
            "go",
        ]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let reqs = p.chat_requests();
    assert!(
        system_prompt(&reqs[0]).contains(&format!(
            "the container {} (via docker exec, as root)",
            ctr.name()
        )),
        "{}",
        system_prompt(&reqs[0])
    );
    assert_ran_inside(&ctr, &result_of(&reqs, "a"), &mark);
    assert_eq!(result_of(&reqs, "r"), "über\n'$x'");
    assert_eq!(ctr.read("/tmp/via-docker.txt"), "über\n'$x'".as_bytes());

    // The docker client's own error for a missing container, in one line.
    let asked = p.request_count();
    let missing = format!("no-such-ctr-{}", ctr.name());
    let out = cmd.rerun([
        "exec",
        "--container",
        &missing,
        "--container-engine",
        "docker",
        "go",
    ]);
    out.assert_code(2);
    assert_one_line(&out, &[&missing, "docker"]);
    assert_eq!(p.request_count(), asked, "the model was asked");
}

#[test]
fn a_missing_or_stopped_container_is_one_line_and_no_model_request() {
    let p = FakeProvider::start(vec![Reply::text("never asked")]);
    let cmd = buddy().config(config_no_confirm(&p, ""));
    // Unique, so no container of that name can exist.
    let missing = format!("no-such-ctr-{}", std::process::id());
    let out = cmd.rerun(["exec", "--container", &missing, "hi"]);
    out.assert_code(2);
    assert_one_line(&out, &[&missing, "podman"]);
    assert!(out.stdout.is_empty(), "{}", out.stdout);

    // A name that looks like an option is still a container name: the engine
    // is not told `--help` (which would print help and succeed).
    let out = cmd.rerun(["exec", "--container=--help", "hi"]);
    out.assert_code(2);
    assert_one_line(&out, &["--help", "does not exist"]);

    // Created but never started: it exists, yet nothing can run in it.
    let stopped = Container::created();
    let out = cmd.rerun(["exec", "--container", stopped.name(), "hi"]);
    out.assert_code(2);
    assert_one_line(&out, &[stopped.name()]);
    assert_eq!(p.request_count(), 0);
}

#[test]
fn a_missing_engine_is_one_line_and_no_model_request() {
    let p = FakeProvider::start(vec![Reply::text("never asked")]);
    let cmd = buddy().config(config_no_confirm(&p, ""));
    let out = cmd.rerun([
        "exec",
        "--container",
        "whatever",
        "--container-engine",
        "no-such-engine",
        "hi",
    ]);
    out.assert_code(2);
    assert_one_line(&out, &["no-such-engine"]);

    // Neither podman nor docker on PATH; buddy itself is started by its path.
    let bin = TempDir::new("path");
    std::os::unix::fs::symlink("/bin/sh", bin.join("sh")).expect("link sh");
    let cmd = cmd.env("PATH", bin.path());
    let out = cmd.rerun(["exec", "--container", "whatever", "hi"]);
    out.assert_code(2);
    assert_one_line(&out, &["needs podman or docker"]);
    assert_eq!(p.request_count(), 0);
}

/// A read-only command line runs in the container with nobody to ask.
#[test]
fn a_read_only_command_runs_in_the_container_without_a_terminal() {
    let ctr = Container::start();
    let p = FakeProvider::start(vec![
        call("r", "run_shell", json!({"command": "ls / | head -50"})),
        Reply::text("listed"),
    ]);
    let cmd = buddy().config(fake_config(&p));
    let out = run_detached(&cmd, &["exec", "--container", ctr.name(), "go"]);
    out.assert_success();
    let r = result_of(&p.chat_requests(), "r");
    assert!(r.contains("bin") && r.contains("etc"), "{r}");
    assert!(
        out.stderr
            .contains("auto-approved (read-only): ls / | head -50"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_prompt_names_the_container_and_unapproved_commands_are_refused() {
    let ctr = Container::start();
    let mark = format!("/tmp/mark-{}", ctr.name());
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": format!("touch {mark}")}),
        ),
        Reply::text("could not run it"),
        call(
            "b",
            "run_shell",
            json!({"command": format!("touch {mark}")}),
        ),
        Reply::text("ran it"),
    ]);
    // The default config: run_shell needs approval, and there is no terminal.
    let cmd = buddy().config(fake_config(&p));
    let out = run_detached(&cmd, &["exec", "--container", ctr.name(), "go"]);
    out.assert_success();
    let reqs = p.chat_requests();
    let system = system_prompt(&reqs[0]);
    assert!(
        system.contains(&format!(
            "the container {} (via podman exec, as root); commands and files are inside it, not on the user's host",
            ctr.name()
        )),
        "{system}"
    );
    assert!(system.contains("The target is remote"), "{system}");
    let a = result_of(&reqs, "a");
    assert!(a.contains("no terminal"), "the model is told why: {a}");
    assert!(
        out.stderr.contains("--dangerously-auto-approve"),
        "{}",
        out.stderr
    );
    assert!(!ctr.exists(&mark), "a refused command ran");

    // Approved up front, the same command runs, in the container.
    let out = run_detached(
        &cmd,
        &[
            "exec",
            "--container",
            ctr.name(),
            "--dangerously-auto-approve",
            "go",
        ],
    );
    out.assert_success();
    assert_eq!(
        result_of(&p.chat_requests(), "b"),
        "exit code: 0\nstdout:\n(empty)"
    );
    assert!(ctr.exists(&mark), "the approved command did not run");
    assert!(!std::path::Path::new(&mark).exists(), "it ran on the host");
}

#[test]
fn a_timeout_ends_the_call_promptly() {
    let ctr = Container::start();
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "echo begun; sleep 31.5; echo never", "timeout": 3}),
        ),
        call("b", "run_shell", json!({"command": "echo next"})),
        Reply::text("done"),
    ]);
    let started = Instant::now();
    buddy()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--container", ctr.name(), "go"])
        .run()
        .assert_success();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call waited for the command: {:?}",
        started.elapsed()
    );
    let reqs = p.chat_requests();
    let a = result_of(&reqs, "a");
    assert!(
        a.starts_with("timed out after 3 s; the command was killed"),
        "{a}"
    );
    assert!(a.contains("begun") && !a.contains("never"), "{a}");
    assert_eq!(result_of(&reqs, "b"), "exit code: 0\nstdout:\nnext");
}

#[test]
fn a_timed_out_command_does_not_keep_running_in_the_container() {
    let ctr = Container::start();
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "sleep 31.5", "timeout": 1}),
        ),
        Reply::text("done"),
    ]);
    buddy()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--container", ctr.name(), "go"])
        .run()
        .assert_success();
    assert!(result_of(&p.chat_requests(), "a").starts_with("timed out after 1 s"));
    // The result says "the command was killed": then it is gone (the stop
    // waits for it, with a bound; allow that bound).
    support::wait::wait_for(
        "the timed-out command to be gone",
        Duration::from_secs(5),
        || {
            let ps = ctr.exec("ps -o args");
            !String::from_utf8_lossy(&ps.stdout).contains("sleep 31.5")
        },
    );
}

extern "C" {
    fn setsid() -> i32;
}

/// Runs buddy in a new session, without a controlling terminal (as under cron
/// or CI), so approval cannot be asked for.
fn run_detached(cmd: &BuddyCmd, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    let mut c = cmd.command_with(&args);
    // SAFETY: setsid(2) is async-signal-safe and touches no memory.
    unsafe {
        c.pre_exec(|| {
            if setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = c
        .stdin(std::process::Stdio::null())
        .output()
        .expect("buddy runs");
    Output {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_shared_tmux_pane_inside_the_container() {
    let ctr = Container::start();
    ctr.install_tmux();
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "hostname; echo err >&2; exit 6"}),
        ),
        call(
            "b",
            "run_shell",
            json!({"command": "echo waiting; read x; echo \"got $x\"", "wait": false}),
        ),
        call(
            "c",
            "send-keys",
            json!({"text": "hello-pane", "enter": true}),
        ),
        call("d", "run_shell", json!({"command": "echo after"})),
        Reply::text("done"),
    ]);
    let out = buddy()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--container", ctr.name(), "--tmux=ctr-work", "go"])
        .run();
    out.assert_success();
    let reqs = p.chat_requests();
    assert_eq!(
        result_of(&reqs, "a"),
        format!("exit code: 6\nstdout:\n{}\nstderr:\nerr", ctr.hostname())
    );
    assert!(
        out.stderr.contains(&format!(
            "watch with: podman exec -it -- {} tmux attach -t ctr-work",
            ctr.name()
        )),
        "{}",
        out.stderr
    );
    // The pane in the container ran the interactive command to its end.
    assert_eq!(result_of(&reqs, "d"), "exit code: 0\nstdout:\nafter");
    let pane = ctr.exec("tmux capture-pane -p -J -S - -t =ctr-work:buddy-shared");
    let pane = String::from_utf8_lossy(&pane.stdout);
    assert!(pane.contains("got hello-pane"), "{pane}");
}

#[test]
fn a_command_in_the_container_streams_its_output_while_it_runs() {
    let ctr = Container::start();
    let p = FakeProvider::start(vec![
        call(
            "a",
            "run_shell",
            json!({"command": "echo step1; sleep 1; echo done-$((1+1))"}),
        ),
        Reply::text("done"),
    ]);
    let out = buddy()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--json", "--container", ctr.name(), "go"])
        .run();
    out.assert_success();
    let mut result_seen = false;
    let mut live_step1 = false;
    for line in out.stdout.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        match v["type"].as_str() {
            Some("tool_result") => result_seen = true,
            Some("tool_progress") if !result_seen => {
                live_step1 |= v["call_id"] == "a" && v["tail"] == "step1";
            }
            _ => {}
        }
    }
    assert!(
        live_step1,
        "no live step1 before the result: {}",
        out.stdout
    );
    assert!(result_of(&p.chat_requests(), "a").ends_with("step1\ndone-2"));
}

#[test]
fn a_rewind_of_code_puts_files_back_in_the_container_byte_for_byte() {
    let ctr = Container::start();
    let setup = ctr.exec(
        "mkdir -p /srv/app && printf 'alpha\\r\\n  beta  \\r\\nno final newline \\342\\234\\223' > /srv/app/win.txt \\
         && chmod 750 /srv/app/win.txt",
    );
    assert!(setup.status.success(), "{setup:?}");
    let original = ctr.read("/srv/app/win.txt");
    assert_eq!(
        original,
        b"alpha\r\n  beta  \r\nno final newline \xe2\x9c\x93"
    );
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "e1",
                "edit_file",
                json!({"path": "/srv/app/win.txt", "old_string": "beta", "new_string": "BETA"})
                    .to_string(),
            ),
            ToolCallSpec::new(
                "e2",
                "edit_file",
                json!({"path": "/srv/app/made.txt", "old_string": "", "new_string": "made here\n"})
                    .to_string(),
            ),
        ]),
        Reply::text("edited inside"),
    ]);
    let cmd = buddy().config(config_no_confirm(&p, ""));
    let t = Tmux::start(&cmd, &["--container", ctr.name(), "--no-tmux"]);
    let prompt = format!("(podman {})>", ctr.name());
    t.wait_for("the container prompt", |_| {
        t.cursor_line().starts_with(&prompt)
    });
    t.line("edit in the container");
    t.wait_text("edited inside");
    assert_eq!(
        ctr.read("/srv/app/win.txt"),
        b"alpha\r\n  BETA  \r\nno final newline \xe2\x9c\x93"
    );
    assert_eq!(ctr.read("/srv/app/made.txt"), b"made here\n");

    let screen = t.open_newest_turn("edit in the container");
    assert!(screen.contains("restore /srv/app/win.txt"), "{screen}");
    assert!(screen.contains("delete  /srv/app/made.txt"), "{screen}");
    t.keys(&["c"]);
    t.wait_text("code: 2 file(s) rewound");
    // Back byte for byte inside the container, mode kept, the new file gone.
    assert_eq!(ctr.read("/srv/app/win.txt"), original);
    let mode = ctr.exec("stat -c %a /srv/app/win.txt");
    assert_eq!(String::from_utf8_lossy(&mode.stdout), "750\n", "mode kept");
    let gone = ctr.exec("test -e /srv/app/made.txt");
    assert!(!gone.status.success(), "made.txt still there");
}
