//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`,
//! installed with Node 22 by `scripts/mcp-servers`) run against buddy as the
//! client, with the scenarios the 2026-07-28 revision requires
//! (`client --requirements 2026-07-28`). For each scenario the suite starts a
//! server of its own on loopback and runs
//! `tests/fixtures/mcp/conformance-client.mjs` with its URL; that script only
//! picks which `buddy mcp` commands to run, and every MCP message is buddy's.
//! Every scored scenario must pass, the 25 OAuth ones included (the suite
//! fails the run on any scored failure); for those `buddy mcp call` logs in
//! through `tests/fixtures/mcp/browser.mjs` as `$BROWSER`.

use crate::support;

use std::path::PathBuf;
use std::process::Command;
use support::mcp;

/// The scored client scenarios for 2026-07-28, each named so that one the
/// suite stopped running fails too. First those needing no authorization.
const SCORED: [&str; 32] = [
    "tools_call",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp")
        .join(name)
}

/// Runs the suite's client mode with `args`, buddy as the client; its exit
/// status and the summary it printed.
fn suite(args: &[&str]) -> (std::process::ExitStatus, String) {
    let (node, suite) = mcp::conformance();
    let out = support::TempDir::new("conformance");
    // The suite runs the client command through PATH: Node 22 first.
    let bin = node.parent().expect("node is in a directory").to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("a PATH");
    let run = Command::new(&node)
        .arg(&suite)
        .args(["client", "--command"])
        .arg(format!(
            "node {}",
            fixture("conformance-client.mjs").display()
        ))
        .args(args)
        .arg("-o")
        .arg(out.path())
        .env("PATH", path)
        .env("BUDDY", support::buddy_bin())
        .output()
        .expect("the conformance suite runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let summary = match stdout.split_once("=== SUITE SUMMARY ===") {
        Some((_, s)) => s.to_string(),
        None => format!("{stdout}\n{}", String::from_utf8_lossy(&run.stderr)),
    };
    (run.status, summary)
}

#[test]
fn every_scored_2026_07_28_client_scenario_passes_oauth_included() {
    let (status, summary) = suite(&["--requirements", "2026-07-28"]);
    assert!(status.success(), "the suite failed ({status}):\n{summary}");
    for name in SCORED {
        assert!(
            summary
                .lines()
                .any(|l| l.starts_with(&format!("✓ {name}:"))),
            "scenario {name} did not pass:\n{summary}"
        );
    }
}

#[test]
fn a_2025_11_25_stream_the_server_closes_is_resumed_after_its_retry_with_last_event_id() {
    // The scenario's server is of the older era and answers the probe with
    // an empty result; it then closes the call's stream after a priming
    // event (`id`, `retry: 500`) and answers on the resumed GET.
    let (status, summary) = suite(&["--scenario", "sse-retry", "--spec-version", "2025-11-25"]);
    assert!(status.success(), "sse-retry failed ({status}):\n{summary}");
    assert!(summary.contains("OVERALL: PASSED"), "{summary}");
}

#[test]
fn a_2025_11_25_servers_form_is_answered_with_its_defaults_when_asked_to() {
    // The server asks, during a call, a form whose fields all have
    // defaults (string, integer, number, enum, boolean); `buddy mcp call
    // --accept-defaults` answers with them, each of its type.
    let (status, summary) = suite(&[
        "--scenario",
        "elicitation-sep1034-client-defaults",
        "--spec-version",
        "2025-11-25",
    ]);
    assert!(
        status.success(),
        "elicitation-sep1034-client-defaults failed ({status}):\n{summary}"
    );
    assert!(summary.contains("OVERALL: PASSED"), "{summary}");
}
