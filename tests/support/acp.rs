//! The editor side of the ACP tests: `tests/acp/client.mjs` on the real
//! TypeScript client library (`@agentclientprotocol/sdk` from npm, installed
//! by `scripts/mcp-servers` next to the MCP servers), started with buddy's
//! isolated environment so the `buddy acp` it spawns is the test's.

use super::{buddy_bin, BuddyCmd};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// How long one scenario may take, buddy and all.
const SCENARIO_SECS: &str = "60";

/// The SDK's entry file.
pub fn sdk() -> PathBuf {
    let path =
        super::mcp::dir().join("node/node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js");
    assert!(
        path.exists(),
        "{} is missing: run scripts/mcp-servers (CI's .ci/run does)",
        path.display()
    );
    path
}

/// Runs the client's `scenario` against `buddy acp` in `buddy`'s working
/// directory; what the client saw (see client.mjs). Panics with buddy's
/// and node's stderr when the client fails.
pub fn run(buddy: &BuddyCmd, scenario: &str, env: &[(&str, &str)]) -> Value {
    let isolated = buddy.command_with(&[]);
    let mut node = Command::new("timeout");
    node.arg(SCENARIO_SECS).arg("node");
    for (key, value) in isolated.get_envs() {
        match value {
            Some(v) => node.env(key, v),
            None => node.env_remove(key),
        };
    }
    for (key, value) in env {
        node.env(key, value);
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.mjs");
    let out = node
        .arg(script)
        .arg(scenario)
        .env("ACP_TEST_SDK", sdk())
        .env("ACP_TEST_BUDDY", buddy_bin())
        .current_dir(buddy.work_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the ACP client failed ({}):\n{stderr}",
        out.status
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The updates of one kind (`sessionUpdate`), in order.
pub fn updates<'a>(seen: &'a Value, kind: &str) -> Vec<&'a Value> {
    seen["updates"]
        .as_array()
        .map(|a| a.iter().filter(|u| u["sessionUpdate"] == kind).collect())
        .unwrap_or_default()
}
