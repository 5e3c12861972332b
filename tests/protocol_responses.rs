//! End-to-end tests of the OpenAI Responses protocol: `buddy exec` with a
//! profile saying `api = "responses"`, against the fake provider answering in
//! that protocol's shape, checking output and exactly what went over the wire.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, SseChunk, ToolCallSpec};
use support::BuddyCmd;

/// A profile speaking Responses to `p`, with shell commands needing no approval.
fn config(p: &FakeProvider, profile_extra: &str, extra: &str) -> String {
    format!(
        "[agent]\nmodel = \"fake\"\n\n\
         [models.fake]\napi = \"responses\"\napi_base_url = \"{}\"\n\
         model = \"fake-model\"\napi_key = \"sk-fake\"\n{profile_extra}\n\
         [tools]\nshell_confirm = false\n{extra}\n",
        p.base_url()
    )
}

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

fn input(req: &RecordedRequest) -> Vec<Value> {
    req.json()["input"]
        .as_array()
        .unwrap_or_else(|| panic!("no input array in {}", req.body_text()))
        .clone()
}

fn items_of(req: &RecordedRequest, kind: &str) -> Vec<Value> {
    input(req)
        .into_iter()
        .filter(|i| i["type"] == kind)
        .collect()
}

/// Position of the first input item of `kind` (panics if there is none).
fn position(items: &[Value], kind: &str) -> usize {
    items
        .iter()
        .position(|i| i["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} item in {items:?}"))
}

#[test]
fn streamed_answer_speaks_responses() {
    let p = FakeProvider::start(vec![Reply::text("Hello from responses")]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "say hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "Hello from responses\n");
    let reqs = p.responses_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(p.request_count(), 1, "no other requests");
    let req = &reqs[0];
    assert_eq!(req.path, "/v1/responses");
    assert_eq!(
        req.header("authorization").as_deref(),
        Some("Bearer sk-fake")
    );
    let body = req.json();
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["store"], false);
    assert!(
        body["include"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("reasoning.encrypted_content"))),
        "{body}"
    );
    assert!(body.get("messages").is_none());
    let instructions = body["instructions"].as_str().expect("instructions");
    assert!(!instructions.trim().is_empty());
    let items = input(req);
    assert!(
        items.iter().all(|i| i["role"] != "system"),
        "the system prompt goes to instructions: {items:?}"
    );
    assert_eq!(
        items.last(),
        Some(&json!({"role": "user", "content": [{"type": "input_text", "text": "say hello"}]}))
    );
    let tools = body["tools"].as_array().expect("tools");
    let run_shell = tools
        .iter()
        .find(|t| t["name"] == "run_shell")
        .expect("run_shell tool");
    assert_eq!(run_shell["type"], "function");
    assert!(run_shell["parameters"].is_object());
    assert!(run_shell.get("function").is_none(), "flat tool shape");
}

#[test]
fn non_streamed_profile_reads_the_response_object() {
    let p = FakeProvider::start(vec![Reply::text("plain json answer")]);
    let out = BuddyCmd::new()
        .config(config(&p, "stream = false", ""))
        .args(["exec", "hi"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "plain json answer\n");
    let reqs = p.responses_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].json()["stream"], false);
}

#[test]
fn tool_loop_pairs_call_ids() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("call_abc", "echo hi")]),
        Reply::text("done"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "run it"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let reqs = p.responses_requests();
    assert_eq!(reqs.len(), 2);
    let items = input(&reqs[1]);
    let calls = items_of(&reqs[1], "function_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["call_id"], "call_abc");
    assert_eq!(calls[0]["name"], "run_shell");
    let args: Value =
        serde_json::from_str(calls[0]["arguments"].as_str().expect("arguments text")).unwrap();
    assert_eq!(args["command"], "echo hi");
    let outputs = items_of(&reqs[1], "function_call_output");
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0]["call_id"], "call_abc");
    let output = outputs[0]["output"].as_str().expect("output text");
    assert!(output.contains("hi"), "{output}");
    assert!(
        position(&items, "function_call") < position(&items, "function_call_output"),
        "{items:?}"
    );
    // A tool-call turn without text sends no empty assistant message.
    assert!(
        items
            .iter()
            .all(|i| !(i["type"] == "message" && i["role"] == "assistant")),
        "{items:?}"
    );
}

#[test]
fn parallel_calls_each_get_their_output() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            shell("call_one", "echo first-out"),
            shell("call_two", "echo second-out"),
        ])
        .with_text("Running both."),
        Reply::text("both ran"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "go"])
        .run();
    out.assert_success();
    assert!(out.stdout.ends_with("both ran\n"), "{}", out.stdout);
    let reqs = p.responses_requests();
    assert_eq!(reqs.len(), 2);
    let items = input(&reqs[1]);
    // The assistant turn: its text, then both calls, then both outputs.
    let text_at = items
        .iter()
        .position(|i| i["type"] == "message" && i["role"] == "assistant")
        .expect("assistant message item");
    assert_eq!(
        items[text_at]["content"],
        json!([{"type": "output_text", "text": "Running both."}])
    );
    let kinds: Vec<&str> = items[text_at + 1..]
        .iter()
        .map(|i| i["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        [
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    let calls = items_of(&reqs[1], "function_call");
    let outputs = items_of(&reqs[1], "function_call_output");
    assert_eq!(calls[0]["call_id"], "call_one");
    assert_eq!(calls[1]["call_id"], "call_two");
    assert_eq!(outputs[0]["call_id"], "call_one");
    assert_eq!(outputs[1]["call_id"], "call_two");
    assert!(outputs[0]["output"]
        .as_str()
        .is_some_and(|o| o.contains("first-out")));
    assert!(outputs[1]["output"]
        .as_str()
        .is_some_and(|o| o.contains("second-out")));
}

#[test]
fn reasoning_items_round_trip_before_the_call() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("call_r", "echo hi")])
            .with_reasoning("reasoning", "pondering the shell"),
        Reply::text("It said hi.").with_reasoning("reasoning", "final thoughts"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "think"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "It said hi.\n");
    assert!(
        out.stderr.contains("pondering the shell") && out.stderr.contains("final thoughts"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("pondering"));
    let reqs = p.responses_requests();
    assert_eq!(reqs.len(), 2);
    let first = input(&reqs[0]);
    assert!(first.iter().all(|i| i["type"] != "reasoning"));
    let items = input(&reqs[1]);
    let reasoning = items_of(&reqs[1], "reasoning");
    assert_eq!(reasoning.len(), 1, "{items:?}");
    assert_eq!(
        reasoning[0]["encrypted_content"], "enc-pondering the shell",
        "the item comes back unchanged"
    );
    assert_eq!(reasoning[0]["summary"][0]["text"], "pondering the shell");
    assert!(
        position(&items, "reasoning") < position(&items, "function_call"),
        "{items:?}"
    );
    // Private round-trip keys never leak into the wire items.
    assert!(
        !reqs[1].body_text().contains("buddy_"),
        "{}",
        reqs[1].body_text()
    );
}

#[test]
fn usage_is_reported() {
    let p = FakeProvider::start(vec![Reply::text("a").with_usage(321, 12)]);
    let out = BuddyCmd::new()
        .config(config(&p, "", "[display]\nshow_tokens = true\n"))
        .args(["exec", "x"])
        .run();
    out.assert_success();
    assert!(
        out.stderr
            .contains("tokens: prompt 321, completion 12, session 333"),
        "{}",
        out.stderr
    );
}

fn event(kind: &str, data: Value) -> SseChunk {
    let mut data = data;
    data["type"] = Value::from(kind);
    SseChunk::raw(format!("event: {kind}\ndata: {data}\n\n"))
}

#[test]
fn response_failed_mid_stream_is_one_error_line() {
    let p = FakeProvider::start(vec![Reply::sse(vec![
        event(
            "response.created",
            json!({"response": {"status": "in_progress"}}),
        ),
        event(
            "response.output_text.delta",
            json!({"output_index": 0, "content_index": 0, "delta": "Partial"}),
        ),
        event(
            "response.failed",
            json!({"response": {"status": "failed",
                   "error": {"code": "server_error", "message": "The model crashed."}}}),
        ),
    ])]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "x"])
        .run();
    out.assert_code(1);
    let last = out.stderr.lines().last().unwrap_or("");
    assert!(
        last.contains("server_error") && last.contains("The model crashed."),
        "{}",
        out.stderr
    );
    let naming = out
        .stderr
        .lines()
        .filter(|l| l.contains("The model crashed."))
        .count();
    assert_eq!(naming, 1, "{}", out.stderr);
    assert_eq!(p.responses_requests().len(), 1, "text was shown: no retry");
}

#[test]
fn stream_without_completed_is_an_error() {
    let p = FakeProvider::start(vec![Reply::text("cut short").without_done()]);
    let cfg = config(&p, "", "[network]\nmax_retries = 0\n");
    let out = BuddyCmd::new().config(cfg).args(["exec", "x"]).run();
    out.assert_code(1);
    let last = out.stderr.lines().last().unwrap_or("");
    assert!(last.contains("interrupted"), "{}", out.stderr);
}

#[test]
fn rate_limit_is_retried() {
    let p = FakeProvider::start(vec![
        Reply::json(
            429,
            json!({"error": {"message": "slow down", "type": "rate_limit", "code": null}}),
        )
        .header("retry-after", "0"),
        Reply::text("made it"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "x"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "made it\n");
    assert!(
        out.stderr.contains("429") && out.stderr.contains("slow down"),
        "{}",
        out.stderr
    );
    let reqs = p.responses_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body, reqs[1].body, "the same request is resent");
}
