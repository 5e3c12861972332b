//! OpenTelemetry traces (`[telemetry] otlp_endpoint`): `buddy exec` sends its
//! spans to a receiver built on the official `opentelemetry-proto` classes
//! (`tests/fixtures/otlp/receiver.py`, installed by `scripts/otlp-receiver`),
//! which refuses anything that is not valid OTLP.

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::serve::Server;
use support::{fake_config, BuddyCmd, TempDir};

/// The receiver's venv python, from `scripts/otlp-receiver`.
fn python() -> PathBuf {
    let dir = match std::env::var_os("BUDDY_OTLP") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache")
            .join("buddy-otlp"),
    };
    let python = dir.join("venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/otlp-receiver (CI's .ci/run does)",
        python.display()
    );
    python
}

/// A running receiver writing what it got to a file; killed when dropped.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Receiver {
        let out = dir.join("otlp.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otlp/receiver.py");
        let mut child = Command::new(python())
            .arg(script)
            .arg(&out)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the OTLP receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("the receiver prints its port");
        let port = line.trim().parse().expect("a port number");
        Receiver { child, port, out }
    }

    /// Every request received so far, as the receiver recorded it.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[test]
fn exec_sends_a_run_span_with_its_requests_and_tool_calls_as_children() {
    let dir = TempDir::new("otlp");
    let receiver = Receiver::start(dir.path());
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "call_1",
            "run_shell",
            json!({"command": "echo tool-output-words"}).to_string(),
        )]),
        Reply::text("answer-words from the model"),
    ]);
    let config = format!(
        "{}\n[tools]\nshell_confirm = false\n\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\n",
        fake_config(&p),
        receiver.port
    );
    let out = BuddyCmd::new()
        .config(config)
        .args(["exec", "prompt-words that stay private"])
        .run();
    out.assert_success();
    assert!(!out.stderr.contains("traces:"), "stderr: {}", out.stderr);

    one_run_traced(&receiver);
}

/// The receiver got one run's trace: the run, two model requests and one
/// `run_shell` call under it, with the session id and no text of the
/// conversation anywhere in the payload.
fn one_run_traced(receiver: &Receiver) -> String {
    let requests = receiver.requests();
    assert!(!requests.is_empty(), "no export reached the receiver");
    let mut spans = Vec::new();
    for r in &requests {
        assert_eq!(r["path"], "/v1/traces");
        assert_eq!(r["content_type"], "application/json");
        assert!(r["error"].is_null(), "refused as OTLP: {}", r["error"]);
        for secret in ["prompt-words", "tool-output-words", "answer-words", "echo"] {
            let raw = r["raw"].as_str().unwrap_or_default();
            assert!(!raw.contains(secret), "{secret:?} in the payload: {raw}");
        }
        spans.extend(r["spans"].as_array().cloned().unwrap_or_default());
    }
    let named = |prefix: &str| -> Vec<&Value> {
        spans
            .iter()
            .filter(|s| s["name"].as_str().unwrap_or("").starts_with(prefix))
            .collect()
    };
    let runs = named("buddy.run");
    let requests = named("chat ");
    let tools = named("execute_tool ");
    assert_eq!(runs.len(), 1, "spans: {spans:#?}");
    assert_eq!(requests.len(), 2, "spans: {spans:#?}");
    assert_eq!(tools.len(), 1, "spans: {spans:#?}");
    assert_eq!(spans.len(), 4, "spans: {spans:#?}");

    let run = runs[0];
    assert_eq!(run["parent_span_id"], "");
    assert_eq!(attr(run, "buddy.outcome"), "answered");
    assert_eq!(attr(run, "gen_ai.request.model"), "fake-model");
    assert_eq!(run["resource"]["service.name"], "buddy");
    let session = attr(run, "session.id").as_str().expect("a session id");
    assert!(!session.is_empty());
    for child in requests.iter().chain(&tools) {
        assert_eq!(child["trace_id"], run["trace_id"]);
        assert_eq!(child["parent_span_id"], run["span_id"]);
        assert_eq!(attr(child, "session.id"), session);
        let (start, end) = (child["start"].as_u64(), child["end"].as_u64());
        assert!(start >= run["start"].as_u64() && end <= run["end"].as_u64());
    }
    assert_eq!(attr(tools[0], "gen_ai.tool.name"), "run_shell");
    assert_eq!(attr(tools[0], "gen_ai.tool.call.id"), "call_1");
    assert_eq!(attr(tools[0], "buddy.outcome"), "ok");
    let mut turns: Vec<_> = requests
        .iter()
        .map(|r| attr(r, "buddy.turn").clone())
        .collect();
    turns.sort_by_key(|t| t.as_i64());
    assert_eq!(turns, vec![json!(1), json!(2)]);
    for r in &requests {
        assert!(attr(r, "gen_ai.usage.input_tokens").as_i64().is_some());
        assert!(attr(r, "gen_ai.usage.output_tokens").as_i64().is_some());
    }
    session.to_string()
}

#[test]
fn an_endpoint_that_is_down_costs_one_warning_and_the_run_still_answers() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let p = FakeProvider::start(vec![Reply::text("still answered")]);
    let config = format!(
        "{}\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n",
        fake_config(&p)
    );
    let out = BuddyCmd::new().config(config).args(["exec", "hi"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "still answered\n");
    assert_eq!(
        out.stderr.matches("warning: traces:").count(),
        1,
        "stderr: {}",
        out.stderr
    );
}

#[test]
fn a_run_in_serve_is_traced_the_same_way() {
    let dir = TempDir::new("otlp-serve");
    let receiver = Receiver::start(dir.path());
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "call_1",
            "run_shell",
            json!({"command": "echo tool-output-words"}).to_string(),
        )]),
        Reply::text("answer-words from the model"),
    ]);
    let config = format!(
        "{}\n[tools]\nshell_confirm = false\n\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:{}\"\n",
        fake_config(&p),
        receiver.port
    );
    let cmd = BuddyCmd::new().config(config);
    let mut server = Server::start(&cmd, &[]);
    let c = server.client();
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap_or_default().to_string();
    let body = json!({ "text": "prompt-words that stay private" }).to_string();
    let (r, stream) = c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    stream.expect("an event stream").until("done");
    // Stopping the server sends what is queued (the exit flush).
    server.terminate();
    assert_eq!(one_run_traced(&receiver), id, "the served session's id");
}
