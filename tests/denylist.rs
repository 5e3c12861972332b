//! The denylist end to end: `buddy exec --dangerously-auto-approve` with the
//! fake provider asking for disguised `rm -rf /` commands (and `git clean`,
//! `rsync --delete`). Stubs first on PATH record every call, so nothing real
//! is ever removed, and harmless calls prove the stubs would have seen the
//! others.

use crate::support;

use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::{BuddyCmd, TempDir};

/// Writes an executable `name` in `dir` that appends its arguments, one
/// call a line, to `marker` and does nothing else.
fn recording_stub(dir: &TempDir, name: &str, marker: &std::path::Path) {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n",
            marker.display()
        ),
    )
    .expect("write stub");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod stub");
}

/// Runs `exec --dangerously-auto-approve` with one round of `run_shell`
/// calls (ids `c0`, `c1`…) and PATH starting at `stub`; returns each call's
/// result text, in order.
fn run_calls(stub: &TempDir, commands: &[&str]) -> Vec<String> {
    let calls: Vec<ToolCallSpec> = commands
        .iter()
        .enumerate()
        .map(|(i, cmd)| {
            ToolCallSpec::new(
                format!("c{i}"),
                "run_shell",
                json!({ "command": cmd }).to_string(),
            )
        })
        .collect();
    let p = FakeProvider::start(vec![Reply::tool_calls(calls), Reply::text("done")]);
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
    assert_eq!(out.stdout, "done\n");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    let messages = reqs[1].json()["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (0..commands.len())
        .map(|i| {
            let id = format!("c{i}");
            messages
                .iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == id.as_str())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_else(|| panic!("no result for {}", commands[i]))
                .to_string()
        })
        .collect()
}

const DISGUISED: &[&str] = &[
    "sh -c \"rm -r -f /\"",
    "bash -c 'rm --recursive --force \"/\"'",
    "rm -Rf /",
    "x=rm; $x -rf /",
    "sudo -n env FOO=1 rm -r -f -- /",
    "echo / | xargs rm -rf",
    "eval \"rm -fr /*\"",
];

#[test]
fn denylist_refuses_disguised_rm_even_when_everything_is_approved() {
    let stub = TempDir::new("deny-stub");
    let marker = stub.join("rm-calls");
    recording_stub(&stub, "rm", &marker);
    // `sudo` may be missing here; a stub that runs its arguments stands in.
    let sudo = stub.join("sudo");
    std::fs::write(&sudo, "#!/bin/sh\n[ \"$1\" = -n ] && shift\nexec \"$@\"\n").expect("stub sudo");
    std::fs::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).expect("chmod stub");

    let mut commands = DISGUISED.to_vec();
    commands.push("sh -c 'rm -r -f ./scratch'");
    let results = run_calls(&stub, &commands);

    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(
        ran, "-r -f ./scratch\n",
        "only the harmless rm may run; the stub saw: {ran:?}"
    );
    for (cmd, result) in DISGUISED.iter().zip(&results) {
        assert!(
            result.contains("command refused: it is recursive removal of / or a system directory")
                && result.contains("which the denylist never allows"),
            "{cmd}: {result}"
        );
    }
}

/// Spellings from issue 34 that reached `rm -rf /`: brace expansion,
/// positional parameters, functions, loops, here-strings into xargs and
/// the deleting modes of git and rsync. Each is refused by the rule it
/// hides from; the harmless loop, function, `git clean` and `rsync` beside
/// them still run.
#[test]
fn shell_constructs_hiding_rm_rf_root_are_refused_under_auto_approve() {
    let stub = TempDir::new("deny-shell-stub");
    let marker = stub.join("calls");
    for name in ["rm", "git", "rsync"] {
        recording_stub(&stub, name, &marker);
    }
    let refused: &[(&str, &str)] = &[
        (
            "bash -c 'rm -rf /{etc,usr}'",
            "recursive removal of / or a system directory",
        ),
        (
            "bash -c '{rm,-rf,/}'",
            "recursive removal of / or a system directory",
        ),
        (
            "bash -c 'set -- rm -rf /; \"$@\"'",
            "recursive removal of / or a system directory",
        ),
        (
            "f(){ rm -rf \"$1\"; }; f /",
            "recursive removal of / or a system directory",
        ),
        (
            "for d in /; do rm -rf $d; done",
            "recursive removal of / or a system directory",
        ),
        (
            "bash -c 'xargs rm -rf <<< /'",
            "recursive removal of / or a system directory",
        ),
        ("git clean -ffdx /", "git clean of /"),
        ("rsync -a --delete empty/ /", "rsync deleting in /"),
        ("\"$@\"", "running a command that cannot be known here"),
    ];
    let allowed = [
        "for d in a b; do rm -r -f ./scratch-$d; done",
        "f(){ rm -r -f \"./$1\"; }; f build",
        "git clean -fd",
        "rsync -a src/ dst/",
    ];
    let mut commands: Vec<&str> = refused.iter().map(|(c, _)| *c).collect();
    commands.extend(allowed);
    let results = run_calls(&stub, &commands);

    for ((cmd, rule), result) in refused.iter().zip(&results) {
        assert!(
            result.contains(&format!("command refused: it is {rule}"))
                && result.contains("which the denylist never allows"),
            "{cmd}: {result}"
        );
    }
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    let mut ran: Vec<&str> = ran.lines().collect();
    ran.sort_unstable();
    assert_eq!(
        ran,
        [
            "-a src/ dst/",
            "-r -f ./build",
            "-r -f ./scratch-a",
            "-r -f ./scratch-b",
            "clean -fd",
        ],
        "only the harmless calls may run"
    );
}
