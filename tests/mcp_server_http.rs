//! `buddy mcp-server --listen` driven over Streamable HTTP by clients we did
//! not write for it: the MCP Python SDK's (`tests/fixtures/mcp/http_client.py`)
//! in both eras (2026-07-28 with `server/discover`, and `initialize` with a
//! session id) and buddy's own (`buddy mcp call`), with the scripted fake
//! provider as the model. Also serve's rules: a rebound Host or a foreign
//! Origin is refused, a token is required when set, and off loopback a
//! token must be set. The official conformance suite's server scenarios are
//! in `mcp_conformance.rs`.

use crate::support;

use serde_json::{json, Value};
use std::process::Command;
use support::fake_provider::{FakeProvider, Reply};
use support::http::Client;
use support::mcp;
use support::mcp_http::HttpServer;
use support::BuddyCmd;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp")
        .join(name)
}

/// The Python SDK's client in `era` against `url`: lists the tools, calls
/// `tool` with `args`; what it saw.
fn python_client(url: &str, era: &str, tool: &str, args: Value, token: Option<&str>) -> Value {
    let mut cmd = Command::new(mcp::python());
    cmd.arg(fixture("http_client.py"))
        .args([url, era, tool, &args.to_string()]);
    if let Some(t) = token {
        cmd.arg(t);
    }
    let out = cmd.output().expect("run the Python MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("the client's JSON")
}

/// A 2026-07-28 `tools/list`, stateless, with every header and `_meta`.
fn list_request() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}
        }}
    })
}

const LIST_HEADERS: [(&str, &str); 3] = [
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", "2026-07-28"),
    ("Mcp-Method", "tools/list"),
];

#[test]
fn the_python_sdk_lists_and_calls_the_tools_in_both_eras_over_http() {
    let provider = FakeProvider::start(vec![
        Reply::text("first answer over http"),
        Reply::text("second answer, same session"),
    ]);
    let cmd = BuddyCmd::new().config_for(&provider);
    let server = HttpServer::start(&cmd, &[]);

    let modern = python_client(
        &server.url,
        "2026-07-28",
        "buddy",
        json!({"prompt": "say something"}),
        None,
    );
    assert_eq!(modern["info"]["version"], "2026-07-28", "{modern}");
    assert_eq!(modern["tools"], json!(["buddy", "buddy-reply"]), "{modern}");
    // The list is the same for the server's life: cacheable for an hour.
    assert_eq!(modern["ttl_ms"], 3_600_000, "{modern}");
    assert_eq!(modern["is_error"], false, "{modern}; {}", server.log());
    assert!(
        modern["text"]
            .to_string()
            .contains("first answer over http"),
        "{modern}"
    );
    let session = modern["structured"]["session_id"]
        .as_str()
        .expect("a session id")
        .to_string();

    // The older era continues the session the newer one started.
    let legacy = python_client(
        &server.url,
        "legacy",
        "buddy-reply",
        json!({"session_id": session, "prompt": "and again"}),
        None,
    );
    assert_eq!(legacy["info"]["version"], "2025-11-25", "{legacy}");
    assert_eq!(legacy["info"]["server"], "buddy", "{legacy}");
    assert_eq!(legacy["tools"], json!(["buddy", "buddy-reply"]), "{legacy}");
    assert_eq!(legacy["is_error"], false, "{legacy}; {}", server.log());
    assert!(
        legacy["text"]
            .to_string()
            .contains("second answer, same session"),
        "{legacy}"
    );
    assert_eq!(legacy["structured"]["session_id"], json!(session));
}

#[test]
fn buddys_own_mcp_client_calls_buddy_over_http() {
    let provider = FakeProvider::start(vec![Reply::text("answered through buddy's client")]);
    let cmd = BuddyCmd::new().config_for(&provider);
    let server = HttpServer::start(&cmd, &[]);
    let client = BuddyCmd::new().config(format!(
        "\n[mcp_servers.other]\nurl = {}\n",
        mcp::quoted(&server.url)
    ));
    let out = client.rerun(["mcp", "call", "other", "buddy", r#"{"prompt":"hello"}"#]);
    out.assert_success();
    assert!(
        out.stdout.contains("answered through buddy's client"),
        "{}\n{}\n{}",
        out.stdout,
        out.stderr,
        server.log()
    );
}

#[test]
fn a_rebound_host_or_a_foreign_origin_is_refused_and_a_set_token_is_required() {
    let cmd = BuddyCmd::new();
    let server = HttpServer::start(&cmd, &["--token", "s3cret-token"]);
    let host = server.addr().to_string();
    let client = Client::new(server.addr());
    let with = |extra: &[(&'static str, &str)]| {
        let mut h: Vec<(&str, &str)> = LIST_HEADERS.to_vec();
        h.extend_from_slice(extra);
        let r = client.request("POST", "/mcp", &h, Some(&list_request().to_string()));
        (r.status, r.body)
    };
    let bearer = "Bearer s3cret-token";

    let (status, body) = with(&[("Host", &host), ("Authorization", bearer)]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("buddy-reply"), "{body}");

    // DNS rebinding: a name of the attacker's that resolves here.
    let (status, body) = with(&[("Host", "evil.example:80"), ("Authorization", bearer)]);
    assert_eq!(status, 403, "{body}");
    let (status, body) = with(&[
        ("Host", &host),
        ("Origin", "http://evil.example"),
        ("Authorization", bearer),
    ]);
    assert_eq!(status, 403, "{body}");

    // No token, or a wrong one.
    let (status, body) = with(&[("Host", &host)]);
    assert_eq!(status, 401, "{body}");
    let (status, body) = with(&[("Host", &host), ("Authorization", "Bearer guess")]);
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("s3cret"), "{body}");
}

#[test]
fn off_loopback_a_token_must_be_set() {
    let cmd = BuddyCmd::new();
    let out = cmd.rerun(["mcp-server", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("not a loopback address")
            && out.stderr.contains("BUDDY_MCP_SERVER_TOKEN"),
        "{}",
        out.stderr
    );
}
