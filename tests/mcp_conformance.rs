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

/// The suite's server scenarios that apply to `buddy mcp-server --listen`,
/// each with the revision it is run at. Every check of each must pass but
/// those in [`NOT_APPLICABLE`]. Left out as not applicable (they need what
/// buddy's server does not offer, or tools of the suite's own reference
/// server by name: `test_simple_text`, `test_error_handling`,
/// `test_tool_with_progress`, `json_schema_2020_12_tool`, …):
/// `tools-call-*`, `json-schema-2020-12`, `logging-set-level` (no logging),
/// `completion-complete`, `resources-*`, `prompts-*`,
/// `sep-2164-resource-not-found`, `http-custom-header-server-validation` (no
/// tool with `x-mcp-header` parameters), `input-required-result-*` and
/// `elicitation-*` (buddy's tools never ask the caller), `server-sse-polling`
/// (it passes, with a warning that the server does not close its streams
/// mid-call, which is the server's choice), the extensions (tasks, skills).
const SERVER_SCENARIOS: [(&str, &str); 13] = [
    ("server-stateless", "2026-07-28"),
    ("tools-list", "2026-07-28"),
    ("caching", "2026-07-28"),
    ("http-header-validation", "2026-07-28"),
    ("dns-rebinding-protection", "2026-07-28"),
    ("server-sse-multiple-streams", "2026-07-28"),
    ("server-initialize", "2025-11-25"),
    ("server-session-lifecycle", "2025-11-25"),
    ("ping", "2025-11-25"),
    ("tools-list", "2025-11-25"),
    ("dns-rebinding-protection", "2025-11-25"),
    ("server-sse-multiple-streams", "2025-11-25"),
    ("server-initialize", "2025-06-18"),
];

/// Checks of the scenarios above that cannot pass against buddy's server,
/// and why (the suite marks them failed or skipped).
const NOT_APPLICABLE: [(&str, &str); 13] = [
    // server-stateless: these call the suite's diagnostic tools
    // (`test_missing_capability`, `test_streaming_elicitation`,
    // `test_logging_tool`) and say "Not testable" without them.
    (
        "sep-2575-server-rejects-undeclared-capability",
        "needs the tool test_missing_capability",
    ),
    (
        "sep-2575-missing-capability-http-400",
        "needs the tool test_missing_capability",
    ),
    (
        "sep-2575-http-server-no-independent-requests-on-stream",
        "needs the tool test_streaming_elicitation",
    ),
    (
        "sep-2575-server-no-log-without-loglevel",
        "needs the tool test_logging_tool",
    ),
    // server-stateless: buddy's tool list never changes, so the server
    // offers no `subscriptions/listen` stream (no `listChanged`), and the
    // suite skips these.
    ("sep-2575-server-sends-subscription-ack", "no subscriptions"),
    ("sep-2575-server-tags-subscription-id", "no subscriptions"),
    (
        "sep-2575-server-honors-notification-filter",
        "no subscriptions",
    ),
    (
        "sep-2575-server-sends-prompts-list-changed-on-subscription",
        "no prompts, no subscriptions",
    ),
    (
        "sep-2575-server-sends-tools-list-changed-on-subscription",
        "the tool list never changes",
    ),
    // caching: buddy's server offers tools only; these lists are
    // "method not found" (-32601), and reading a resource is skipped.
    ("sep-2549-prompts-list-caching-hints", "no prompts"),
    ("sep-2549-resources-list-caching-hints", "no resources"),
    (
        "sep-2549-resources-templates-list-caching-hints",
        "no resource templates",
    ),
    ("sep-2549-resources-read-caching-hints", "no resources"),
];

#[test]
fn the_applicable_server_scenarios_pass_against_buddy_mcp_server_listen() {
    let cmd = support::BuddyCmd::new();
    let server = support::mcp_http::HttpServer::start(&cmd, &[]);
    let (node, suite) = mcp::conformance();
    let mut problems = Vec::new();
    for (scenario, revision) in SERVER_SCENARIOS {
        let out = support::TempDir::new("conformance-server");
        let run = Command::new(&node)
            .arg(&suite)
            .args(["server", "--url", &server.url, "--scenario", scenario])
            .args(["--spec-version", revision, "-o"])
            .arg(out.path())
            .output()
            .expect("the conformance suite runs");
        let checks = std::fs::read_dir(out.path())
            .expect("the suite's output directory")
            .flatten()
            .map(|d| d.path().join("checks.json"))
            .find(|p| p.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "{scenario} at {revision} wrote no checks.json:\n{}\n{}",
                    String::from_utf8_lossy(&run.stdout),
                    String::from_utf8_lossy(&run.stderr)
                )
            });
        let checks: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(&checks).expect("checks.json"))
                .expect("checks.json is JSON");
        assert!(!checks.is_empty(), "{scenario} at {revision} ran no checks");
        for check in &checks {
            let id = check["id"].as_str().unwrap_or("?");
            let status = check["status"].as_str().unwrap_or("?");
            // INFO is a report (the server's name), not a verdict.
            if matches!(status, "SUCCESS" | "INFO") || NOT_APPLICABLE.iter().any(|(n, _)| *n == id)
            {
                continue;
            }
            problems.push(format!(
                "{scenario} at {revision}: {id} {status}: {}",
                check["errorMessage"].as_str().unwrap_or("")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n{}",
        problems.join("\n"),
        server.log()
    );
}
