//! End-to-end tests of the Anthropic Messages protocol: `buddy exec` with a
//! profile saying `api = "messages"`, against the fake provider answering in
//! that protocol's shape, checking output and exactly what went over the wire.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, SseChunk, ToolCallSpec};
use support::BuddyCmd;

/// A profile speaking Messages to `p`, with shell commands needing no approval.
fn config(p: &FakeProvider, profile_extra: &str, extra: &str) -> String {
    format!(
        "[agent]\nmodel = \"fake\"\n\n\
         [models.fake]\napi = \"messages\"\napi_base_url = \"{}\"\n\
         model = \"fake-model\"\napi_key = \"sk-ant-fake\"\n{profile_extra}\n\
         [tools]\nshell_confirm = false\n{extra}\n",
        p.base_url()
    )
}

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

fn messages(req: &RecordedRequest) -> Vec<Value> {
    req.json()["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages array in {}", req.body_text()))
        .clone()
}

/// The content blocks of a message.
fn blocks(message: &Value) -> Vec<Value> {
    message["content"]
        .as_array()
        .unwrap_or_else(|| panic!("content is not a block list: {message}"))
        .clone()
}

fn event(value: Value) -> SseChunk {
    let name = value["type"].as_str().unwrap_or_default().to_string();
    SseChunk::raw(format!("event: {name}\ndata: {value}\n\n"))
}

#[test]
fn streamed_answer_speaks_messages() {
    let p = FakeProvider::start(vec![Reply::text("Hello from messages")]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "say hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "Hello from messages\n");
    let reqs = p.messages_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(p.request_count(), 1, "no other requests");
    let req = &reqs[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key").as_deref(), Some("sk-ant-fake"));
    assert_eq!(
        req.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(req.header("authorization"), None);
    let body = req.json();
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["stream"], true);
    let system = body["system"].as_array().expect("system is a block list");
    assert_eq!(system.len(), 1);
    assert_eq!(system[0]["type"], "text");
    assert!(!system[0]["text"].as_str().unwrap_or_default().is_empty());
    let msgs = messages(req);
    assert!(msgs.iter().all(|m| m["role"] != "system"), "{msgs:?}");
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(blocks(&msgs[0])[0]["text"], "say hello");
    let tools = body["tools"].as_array().expect("tools");
    let shell = tools
        .iter()
        .find(|t| t["name"] == "run_shell")
        .expect("run_shell tool");
    assert!(shell["input_schema"].is_object());
    assert!(shell.get("function").is_none());
}

#[test]
fn non_streamed_profile_reads_a_message_object() {
    let p = FakeProvider::start(vec![Reply::text("plain message answer")]);
    let out = BuddyCmd::new()
        .config(config(&p, "stream = false", ""))
        .args(["exec", "hi"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "plain message answer\n");
    let req = &p.messages_requests()[0];
    assert_eq!(req.json()["stream"], false);
    assert_ne!(req.header("accept").as_deref(), Some("text/event-stream"));
}

#[test]
fn tool_loop_pairs_tool_use_with_tool_result() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("toolu_01", "echo hi")]).with_text("Running it."),
        Reply::text("done"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "say hi in the shell"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let reqs = p.messages_requests();
    assert_eq!(reqs.len(), 2);
    let msgs = messages(&reqs[1]);
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    assert_eq!(msgs[1]["role"], "assistant");
    let assistant = blocks(&msgs[1]);
    assert_eq!(assistant[0], json!({"type": "text", "text": "Running it."}));
    assert_eq!(
        assistant[1],
        json!({"type": "tool_use", "id": "toolu_01", "name": "run_shell",
               "input": {"command": "echo hi"}})
    );
    assert_eq!(msgs[2]["role"], "user");
    let results = blocks(&msgs[2]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    let text = results[0]["content"].as_str().expect("result text");
    assert!(text.contains("hi"), "{text}");
}

#[test]
fn parallel_calls_answer_in_one_user_message() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            shell("toolu_a", "echo first"),
            shell("toolu_b", "echo second"),
        ]),
        Reply::text("both ran"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "run two"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "both ran\n");
    let msgs = messages(&p.messages_requests()[1]);
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    let uses: Vec<Value> = blocks(&msgs[1])
        .into_iter()
        .map(|b| b["id"].clone())
        .collect();
    assert_eq!(uses, vec![json!("toolu_a"), json!("toolu_b")]);
    let results = blocks(&msgs[2]);
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(results.len(), 2, "{results:#?}");
    assert_eq!(results[0]["tool_use_id"], "toolu_a");
    assert!(results[0]["content"]
        .as_str()
        .unwrap_or_default()
        .contains("first"));
    assert_eq!(results[1]["tool_use_id"], "toolu_b");
    assert!(results[1]["content"]
        .as_str()
        .unwrap_or_default()
        .contains("second"));
}

#[test]
fn thinking_is_shown_on_stderr_and_sent_back_signed() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new("toolu_t", "time", "{}")])
            .with_reasoning("thinking", "pondering the clock"),
        Reply::text("It is now.").with_reasoning("thinking", "final thoughts"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "time?"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "It is now.\n");
    assert!(out.stderr.contains("pondering the clock"), "{}", out.stderr);
    assert!(out.stderr.contains("final thoughts"), "{}", out.stderr);
    let reqs = p.messages_requests();
    let msgs = messages(&reqs[1]);
    let assistant = blocks(&msgs[1]);
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": "pondering the clock",
               "signature": "sig-ponderingtheclock"})
    );
    assert_eq!(assistant[1]["type"], "tool_use");
    assert!(
        !reqs[1].body_text().contains("buddy_"),
        "private keys stay private: {}",
        reqs[1].body_text()
    );
}

#[test]
fn redacted_thinking_round_trips_verbatim() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new("toolu_r", "time", "{}")])
            .with_reasoning("redacted_thinking", "EnCrYpTeD"),
        Reply::text("ok"),
    ]);
    BuddyCmd::new()
        .config(config(&p, "stream = false", ""))
        .args(["exec", "time?"])
        .run()
        .assert_success();
    let msgs = messages(&p.messages_requests()[1]);
    assert_eq!(
        blocks(&msgs[1])[0],
        json!({"type": "redacted_thinking", "data": "EnCrYpTeD"})
    );
}

#[test]
fn usage_includes_cached_prompt_tokens() {
    let p = FakeProvider::start(vec![Reply::text("cached answer")
        .with_usage(100, 20)
        .with_cache(300, 50)]);
    let out = BuddyCmd::new()
        .config(config(&p, "", "[display]\nshow_tokens = true\n"))
        .args(["exec", "hi"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "cached answer\n");
    // Prompt tokens count the uncached, cache-read and cache-written input.
    assert!(
        out.stderr.contains("prompt 450") && out.stderr.contains("completion 20"),
        "{}",
        out.stderr
    );
}

#[test]
fn prompt_cache_marks_system_and_latest_turn() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("toolu_c", "echo cached")]),
        Reply::text("fin"),
    ]);
    BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "go"])
        .run()
        .assert_success();
    let ephemeral = json!({"type": "ephemeral"});
    for req in p.messages_requests() {
        let body = req.json();
        assert_eq!(body["system"][0]["cache_control"], ephemeral);
        let msgs = messages(&req);
        let last = blocks(msgs.last().expect("a message"));
        assert_eq!(last.last().expect("a block")["cache_control"], ephemeral);
        assert_eq!(
            req.body_text().matches("cache_control").count(),
            2,
            "only two breakpoints: {}",
            req.body_text()
        );
    }
    let second = messages(&p.messages_requests()[1]);
    assert_eq!(blocks(&second[2])[0]["type"], "tool_result");

    // Turned off in the profile: no breakpoints at all.
    let p = FakeProvider::start(vec![Reply::text("x")]);
    BuddyCmd::new()
        .config(config(&p, "prompt_cache = false", ""))
        .args(["exec", "go"])
        .run()
        .assert_success();
    assert!(!p.messages_requests()[0]
        .body_text()
        .contains("cache_control"));
}

#[test]
fn error_event_mid_stream_fails_with_one_line() {
    let p = FakeProvider::start(vec![Reply::sse(vec![
        event(json!({"type": "message_start", "message": {
            "id": "msg_x", "type": "message", "role": "assistant", "model": "fake-model",
            "content": [], "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}})),
        event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Partial"}})),
        event(json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    ])]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "hi"])
        .run();
    out.assert_code(1);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("overloaded_error: Overloaded") && last.contains("interrupted"),
        "{}",
        out.stderr
    );
    assert_eq!(
        p.messages_requests().len(),
        1,
        "shown output is not retried"
    );
}

#[test]
fn stream_without_message_stop_is_interrupted() {
    let p = FakeProvider::start(vec![Reply::text("cut short").without_done()]);
    let out = BuddyCmd::new()
        .config(config(&p, "", "[network]\nmax_retries = 0\n"))
        .args(["exec", "hi"])
        .run();
    out.assert_code(1);
    assert!(out.stderr.contains("interrupted"), "{}", out.stderr);
}

#[test]
fn rate_limit_error_is_retried() {
    let p = FakeProvider::start(vec![
        Reply::json(
            429,
            json!({"type": "error",
                   "error": {"type": "rate_limit_error", "message": "Slow down please"}}),
        )
        .header("retry-after", "0"),
        Reply::text("after the wait"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "hi"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "after the wait\n");
    assert!(
        out.stderr.contains("429") && out.stderr.contains("rate_limit_error: Slow down please"),
        "{}",
        out.stderr
    );
    assert_eq!(p.messages_requests().len(), 2);
}

#[test]
fn client_error_names_the_error_type() {
    let p = FakeProvider::start(vec![Reply::json(
        400,
        json!({"type": "error",
               "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}),
    )]);
    let out = BuddyCmd::new()
        .config(config(&p, "", ""))
        .args(["exec", "hi"])
        .run();
    out.assert_code(1);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("HTTP 400") && last.contains("invalid_request_error: max_tokens: too large"),
        "{}",
        out.stderr
    );
    assert_eq!(p.messages_requests().len(), 1);
}
