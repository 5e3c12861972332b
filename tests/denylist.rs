//! The denylist end to end: `buddy exec --dangerously-auto-approve` with the
//! fake provider asking for disguised `rm -rf /` commands. A stub `rm` first
//! on PATH records every call, so nothing real is ever removed, and a
//! harmless `rm` call proves the stub would have seen the others.

mod support;

use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::{BuddyCmd, TempDir};

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
    let rm = stub.join("rm");
    std::fs::write(
        &rm,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n",
            marker.display()
        ),
    )
    .expect("write stub rm");
    std::fs::set_permissions(&rm, std::fs::Permissions::from_mode(0o755)).expect("chmod stub");
    // `sudo` may be missing here; a stub that runs its arguments stands in.
    let sudo = stub.join("sudo");
    std::fs::write(&sudo, "#!/bin/sh\n[ \"$1\" = -n ] && shift\nexec \"$@\"\n").expect("stub sudo");
    std::fs::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).expect("chmod stub");

    let mut calls: Vec<ToolCallSpec> = DISGUISED
        .iter()
        .enumerate()
        .map(|(i, cmd)| {
            ToolCallSpec::new(
                format!("bad{i}"),
                "run_shell",
                json!({ "command": cmd }).to_string(),
            )
        })
        .collect();
    calls.push(ToolCallSpec::new(
        "ok",
        "run_shell",
        json!({"command": "sh -c 'rm -r -f ./scratch'"}).to_string(),
    ));
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

    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(
        ran, "-r -f ./scratch\n",
        "only the harmless rm may run; the stub saw: {ran:?}"
    );
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    let messages = reqs[1].json()["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, cmd) in DISGUISED.iter().enumerate() {
        let id = format!("bad{i}");
        let result = messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id.as_str())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_else(|| panic!("no result for {cmd}"));
        assert!(
            result.contains("command refused: it is recursive removal of / or a system directory")
                && result.contains("which the denylist never allows"),
            "{cmd}: {result}"
        );
    }
}
