//! The OpenAI Responses protocol: `POST {base}/responses`. The history is
//! mapped to `instructions` plus a list of input items (messages, function
//! calls and their outputs); what comes back is a list of output items, read
//! either from a stream of typed events or from one response object.
//!
//! Buddy keeps its own history, so requests say `store: false` and ask for the
//! encrypted content of reasoning items. Those items are kept verbatim on the
//! assistant message (under [`REASONING_KEY`]) and sent back in front of that
//! turn's other items, which lets a reasoning model pick up where it left off.

use super::http::{decode_body, encode_body, ClientSettings, Flow, Protocol, StreamParser};
use super::{ApiError, EventSink, ModelRequest, ModelResponse, StreamEvent};
use crate::wire::sse::SseEvent;
use crate::wire::{Message, Role, ToolCall, Usage};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// `Message::extra` key holding this protocol's reasoning items (a JSON array).
pub const REASONING_KEY: &str = "buddy_responses_reasoning";
/// The field name reasoning summaries are reported under.
const SUMMARY_FIELD: &str = "reasoning_summary";
/// The field name raw reasoning text (from servers that send it) is reported under.
const REASONING_TEXT_FIELD: &str = "reasoning_text";

pub struct Responses;

impl Protocol for Responses {
    fn path(&self) -> &'static str {
        "/responses"
    }

    fn headers(
        &self,
        request: reqwest::RequestBuilder,
        settings: &ClientSettings,
    ) -> reqwest::RequestBuilder {
        match &settings.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    fn body(&self, request: ModelRequest<'_>, s: &ClientSettings) -> Result<Vec<u8>, ApiError> {
        encode_body(&request_body(request, s))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(EventParser::default())
    }

    fn parse_json(&self, body: &[u8], on_event: EventSink<'_>) -> Result<ModelResponse, ApiError> {
        let value: Value = decode_body(body, "a response object")?;
        if let Some(msg) = response_error(&value) {
            return Err(ApiError::InvalidResponse(format!(
                "server reported an error: {msg}"
            )));
        }
        let Some(output) = value.get("output").and_then(Value::as_array) else {
            return Err(ApiError::InvalidResponse(
                "the response has no output".into(),
            ));
        };
        for item in output {
            if item["type"] == "reasoning" {
                for (field, text) in reasoning_texts(item) {
                    on_event(StreamEvent::Reasoning { field, text });
                }
            }
        }
        let (message, refused) = message_from_items(output, None);
        let incomplete = (value["status"] == "incomplete").then(|| incomplete_reason(&value));
        let refusal = refusal_reason(refused, incomplete.as_deref());
        if incomplete.is_some() && refusal.is_none() && is_empty_turn(&message) {
            return Err(ApiError::InvalidResponse(format!(
                "the response is incomplete ({}) and has no output",
                incomplete_reason(&value)
            )));
        }
        Ok(ModelResponse {
            message,
            usage: value.get("usage").and_then(usage_from),
            cut_off: incomplete
                .filter(|_| refusal.is_none())
                .map(|r| format!("incomplete: {r}")),
            refusal,
        })
    }
}

// ---------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------

fn request_body(request: ModelRequest<'_>, s: &ClientSettings) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(s.model.as_str()));
    body.insert("stream".into(), Value::from(s.stream));
    body.insert("store".into(), Value::from(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    let instructions: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .filter(|t| !t.is_empty())
        .collect();
    if !instructions.is_empty() {
        body.insert(
            "instructions".into(),
            Value::from(instructions.join("\n\n")),
        );
    }
    body.insert("input".into(), Value::Array(input_items(request.messages)));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.function.name,
                    "description": t.function.description,
                    "parameters": t.function.parameters,
                    // The tool schemas are not written for strict mode (every
                    // property required, no additional properties).
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = s.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    if let Some(p) = s.top_p {
        body.insert("top_p".into(), Value::from(p));
    }
    if let Some(max) = s.max_tokens {
        body.insert("max_output_tokens".into(), Value::from(max));
    }
    if let Some(output) = request.output {
        body.insert(
            "text".into(),
            json!({"format": {
                "type": "json_schema",
                "name": output.name(),
                "schema": output.schema(),
                "strict": true,
            }}),
        );
    }
    Value::Object(body)
}

/// The history as Responses input items. System messages go to `instructions`.
fn input_items(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for m in messages {
        match m.role {
            Role::System => {}
            Role::User => items.push(json!({
                "role": "user",
                "content": user_content(m),
            })),
            Role::Assistant => {
                if let Some(Value::Array(reasoning)) = m.extra.get(REASONING_KEY) {
                    items.extend(reasoning.iter().cloned());
                }
                if !m.text().is_empty() {
                    items.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": m.text()}],
                    }));
                }
                for call in m.calls() {
                    items.push(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.function.name,
                        "arguments": call.function.arguments,
                    }));
                }
            }
            Role::Tool => items.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "output": m.text(),
            })),
        }
    }
    items
}

/// A user message's content: its images as `input_image` parts (data URLs),
/// then its text. Without images it is the one text part it always was.
fn user_content(m: &Message) -> Vec<Value> {
    let mut parts: Vec<Value> = m
        .images
        .iter()
        .map(|img| match img.data_url() {
            Some(url) => json!({"type": "input_image", "image_url": url}),
            None => json!({"type": "input_text", "text": img.missing_text()}),
        })
        .collect();
    if parts.is_empty() || !m.text().is_empty() {
        parts.push(json!({"type": "input_text", "text": m.text()}));
    }
    parts
}

// ---------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------

/// The assistant message made of these output items. `streamed_text` stands in
/// for the text when no message item carries any (a stream cut short).
fn message_from_items(items: &[Value], streamed_text: Option<&str>) -> (Message, bool) {
    let mut text = String::new();
    let mut refused = false;
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    for item in items {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    match part["type"].as_str() {
                        Some("output_text") => text.push_str(part["text"].as_str().unwrap_or("")),
                        Some("refusal") => {
                            let r = part["refusal"].as_str().unwrap_or("");
                            refused |= !r.trim().is_empty();
                            text.push_str(r);
                        }
                        _ => {}
                    }
                }
            }
            Some("function_call") => calls.push(ToolCall::new(
                item["call_id"].as_str().unwrap_or_default(),
                item["name"].as_str().unwrap_or_default(),
                item["arguments"].as_str().unwrap_or_default(),
            )),
            // With `store: false` a server can only use an item it can read:
            // one that carries encrypted (or plain) content. A bare item, seen
            // only as added in a stream cut short, would be an unknown id.
            Some("reasoning") if has_reasoning_content(item) => reasoning.push(item.clone()),
            _ => {}
        }
    }
    if text.is_empty() {
        if let Some(streamed) = streamed_text {
            text.push_str(streamed);
        }
    }
    let mut message = Message::assistant(text);
    if !calls.is_empty() {
        if message.text().is_empty() {
            message.content = None;
        }
        message.tool_calls = Some(calls);
    }
    if !reasoning.is_empty() {
        message
            .extra
            .insert(REASONING_KEY.into(), Value::Array(reasoning));
    }
    (message, refused)
}

/// Why an answer counts as a refusal: a refusal part, or the content filter
/// ending it (which is then no cut-off).
fn refusal_reason(refused: bool, incomplete: Option<&str>) -> Option<String> {
    if incomplete == Some("content_filter") {
        Some("incomplete: content_filter".to_string())
    } else if refused {
        Some("refusal".to_string())
    } else {
        None
    }
}

fn has_reasoning_content(item: &Value) -> bool {
    item["encrypted_content"]
        .as_str()
        .is_some_and(|e| !e.is_empty())
        || item["content"].as_array().is_some_and(|c| !c.is_empty())
}

fn is_empty_turn(m: &Message) -> bool {
    m.text().is_empty() && m.calls().is_empty()
}

/// Summary (or raw reasoning) texts of a reasoning item, for display.
fn reasoning_texts(item: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let summary: Vec<&str> = item["summary"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .filter(|t| !t.trim().is_empty())
        .collect();
    if !summary.is_empty() {
        out.push((SUMMARY_FIELD.to_string(), summary.join("\n\n")));
    }
    let content: Vec<&str> = item["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .filter(|t| !t.trim().is_empty())
        .collect();
    if !content.is_empty() {
        out.push((REASONING_TEXT_FIELD.to_string(), content.join("\n\n")));
    }
    out
}

fn usage_from(v: &Value) -> Option<Usage> {
    if !v.is_object() {
        return None;
    }
    let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let prompt = n("/input_tokens");
    let completion = n("/output_tokens");
    let total = v
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(prompt + completion);
    Some(Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: total,
        cache_read_tokens: n("/input_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    })
}

/// `code: message` of an error object, or whichever of the two is there.
fn describe_error(err: &Value) -> String {
    let code = err
        .get("code")
        .and_then(Value::as_str)
        .or_else(|| err.get("type").and_then(Value::as_str))
        .filter(|c| !c.is_empty());
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty());
    let text = match (code, message) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (None, Some(m)) => m.to_string(),
        (Some(c), None) => c.to_string(),
        (None, None) => "unknown error".to_string(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The error a response object reports, if it failed.
fn response_error(response: &Value) -> Option<String> {
    match response.get("error") {
        Some(err) if err.is_object() => Some(describe_error(err)),
        _ if response["status"] == "failed" => Some("the response failed".to_string()),
        _ => None,
    }
}

fn incomplete_reason(response: &Value) -> String {
    response
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str)
        .unwrap_or("no reason given")
        .to_string()
}

// ---------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------

#[derive(Default)]
struct EventParser {
    /// Text shown so far, from `response.output_text.delta` and
    /// `response.refusal.delta`.
    text: String,
    /// A refusal was streamed.
    refused: bool,
    /// Output items by `output_index`, as added and then as done.
    items: BTreeMap<u64, Value>,
    /// The item list of the final response object, when it has one.
    final_output: Option<Vec<Value>>,
    usage: Option<Usage>,
    /// `response.incomplete`: done, with whatever arrived.
    incomplete: Option<String>,
    /// Whether a summary part has been reported (later ones need a separator).
    summary_started: bool,
    /// Streamed function-call arguments by `output_index`, joined here and put
    /// into their items at the end (rebuilding the item's string on every
    /// delta made long arguments quadratic).
    arguments: BTreeMap<u64, String>,
    /// Bytes of answer held (deltas, and items as sent), for the reply cap.
    bytes: usize,
}

impl EventParser {
    fn item_at(&mut self, v: &Value) -> Option<&mut Value> {
        let index = v.get("output_index").and_then(Value::as_u64)?;
        self.items.get_mut(&index)
    }

    /// Takes the final response object of `response.completed` / `.incomplete`.
    fn take_response(&mut self, response: &Value) {
        if let Some(u) = response.get("usage").and_then(usage_from) {
            self.usage = Some(u);
        }
        if let Some(output) = response.get("output").and_then(Value::as_array) {
            if !output.is_empty() {
                self.final_output = Some(output.clone());
            }
        }
    }
}

impl StreamParser for EventParser {
    fn event(&mut self, ev: &SseEvent, on_event: EventSink<'_>) -> Result<Flow, ApiError> {
        let data = ev.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Flow::More);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ApiError::InvalidResponse(format!("malformed stream event ({e})")))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or("");
        if let Some(d) = v["delta"].as_str() {
            self.bytes += d.len();
        }
        match kind {
            "response.output_text.delta" => {
                if let Some(d) = v["delta"].as_str().filter(|d| !d.is_empty()) {
                    self.text.push_str(d);
                    on_event(StreamEvent::Text(d.to_string()));
                }
            }
            // A refusal is the answer: shown as it comes, like text.
            "response.refusal.delta" => {
                if let Some(d) = v["delta"].as_str().filter(|d| !d.is_empty()) {
                    self.refused = true;
                    self.text.push_str(d);
                    on_event(StreamEvent::Text(d.to_string()));
                }
            }
            "response.reasoning_summary_part.added" if self.summary_started => {
                on_event(StreamEvent::Reasoning {
                    field: SUMMARY_FIELD.into(),
                    text: "\n\n".into(),
                });
            }
            "response.reasoning_summary_text.delta" => {
                if let Some(d) = v["delta"].as_str().filter(|d| !d.is_empty()) {
                    self.summary_started = true;
                    on_event(StreamEvent::Reasoning {
                        field: SUMMARY_FIELD.into(),
                        text: d.to_string(),
                    });
                }
            }
            "response.reasoning_text.delta" => {
                if let Some(d) = v["delta"].as_str().filter(|d| !d.is_empty()) {
                    on_event(StreamEvent::Reasoning {
                        field: REASONING_TEXT_FIELD.into(),
                        text: d.to_string(),
                    });
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                if let (Some(index), Some(item)) = (v["output_index"].as_u64(), v.get("item")) {
                    // Items are kept whole: they count as sent.
                    self.bytes += data.len();
                    if item["arguments"].as_str().is_some_and(|a| !a.is_empty()) {
                        self.arguments.remove(&index);
                    }
                    self.items.insert(index, item.clone());
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = v["delta"].as_str().unwrap_or("");
                if let Some(index) = v["output_index"].as_u64() {
                    if self.items.contains_key(&index) {
                        self.arguments.entry(index).or_default().push_str(delta);
                    }
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(args) = v["arguments"].as_str() {
                    self.bytes += args.len();
                    if let Some(item) = self.item_at(&v) {
                        item["arguments"] = Value::from(args);
                    }
                    if let Some(index) = v["output_index"].as_u64() {
                        self.arguments.remove(&index);
                    }
                }
            }
            "response.completed" => {
                self.take_response(&v["response"]);
                return Ok(Flow::Done);
            }
            "response.incomplete" => {
                let response = &v["response"];
                self.take_response(response);
                self.incomplete = Some(incomplete_reason(response));
                return Ok(Flow::Done);
            }
            "response.failed" => {
                let response = &v["response"];
                let msg =
                    response_error(response).unwrap_or_else(|| "the response failed".to_string());
                return Err(crate::provider::error::stream_error(response, msg));
            }
            "error" => {
                // The fields are on the event itself, or under `error`.
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                return Err(crate::provider::error::stream_error(
                    err,
                    describe_error(err),
                ));
            }
            _ => {}
        }
        Ok(Flow::More)
    }

    fn finish(self: Box<Self>, ended_cleanly: bool) -> Result<ModelResponse, ApiError> {
        if !ended_cleanly {
            return Err(ApiError::StreamInterrupted(
                "connection closed before the response was complete".to_string(),
            ));
        }
        let mut this = *self;
        for (index, args) in std::mem::take(&mut this.arguments) {
            if let Some(item) = this.items.get_mut(&index) {
                if item["arguments"].as_str().unwrap_or("").is_empty() {
                    item["arguments"] = Value::from(args);
                }
            }
        }
        let items = match this.final_output {
            Some(items) => items,
            None => this.items.into_values().collect(),
        };
        let (message, refused) = message_from_items(&items, Some(&this.text));
        let refusal = refusal_reason(refused || this.refused, this.incomplete.as_deref());
        if let Some(reason) = &this.incomplete {
            if refusal.is_none() && is_empty_turn(&message) {
                return Err(ApiError::StreamInterrupted(format!(
                    "the response is incomplete ({reason}) and has no output"
                )));
            }
        }
        Ok(ModelResponse {
            message,
            usage: this.usage,
            cut_off: this
                .incomplete
                .filter(|_| refusal.is_none())
                .map(|r| format!("incomplete: {r}")),
            refusal,
        })
    }

    fn answer_bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ToolDefinition, ToolList};
    use std::sync::Mutex;

    fn settings() -> ClientSettings {
        ClientSettings {
            api_key: Some("k".into()),
            ..ClientSettings::for_test("http://x/v1")
        }
    }

    fn body_for(messages: &[Message], tools: &[ToolDefinition], s: &ClientSettings) -> Value {
        let bytes = Responses
            .body(
                ModelRequest {
                    messages,
                    tools: &ToolList::from(tools.to_vec()),
                    output: None,
                },
                s,
            )
            .expect("body");
        serde_json::from_slice(&bytes).expect("json body")
    }

    fn reasoning_item(id: &str, summary: &str, enc: &str) -> Value {
        json!({
            "type": "reasoning",
            "id": id,
            "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": enc,
        })
    }

    fn run_stream(
        events: &[Value],
        ended_cleanly: Option<bool>,
    ) -> (Vec<StreamEvent>, Result<ModelResponse, ApiError>) {
        crate::provider::http::run_parser(&Responses, events, ended_cleanly)
    }

    #[test]
    fn body_maps_history_to_instructions_and_items() {
        let mut assistant = Message::assistant("let me look");
        assistant.tool_calls = Some(vec![
            ToolCall::new("call_1", "run_shell", r#"{"command":"ls"}"#),
            ToolCall::new("call_2", "time", "{}"),
        ]);
        assistant.extra.insert(
            REASONING_KEY.into(),
            json!([reasoning_item("rs_1", "thinking", "enc-1")]),
        );
        // Another protocol's private data is not sent.
        assistant
            .extra
            .insert("buddy_messages_thinking".into(), json!([{"x": 1}]));
        let messages = vec![
            Message::system("be brief"),
            Message::system("more rules"),
            Message::user("hi"),
            assistant,
            Message::tool_result("call_1", "a.txt"),
            Message::tool_result("call_2", "noon"),
            Message::assistant("done"),
        ];
        let tools = vec![ToolDefinition::function(
            "run_shell",
            "Run a command",
            json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        )];
        let mut s = settings();
        s.temperature = Some(0.5);
        s.max_tokens = Some(1000);
        let body = body_for(&messages, &tools, &s);
        assert_eq!(body["model"], "m");
        assert_eq!(body["stream"], true);
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["instructions"], "be brief\n\nmore rules");
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["max_output_tokens"], 1000);
        assert!(body.get("top_p").is_none());
        assert!(body.get("messages").is_none());
        assert_eq!(
            body["tools"],
            json!([{
                "type": "function",
                "name": "run_shell",
                "description": "Run a command",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                "strict": false,
            }])
        );
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                reasoning_item("rs_1", "thinking", "enc-1"),
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "let me look"}]},
                {"type": "function_call", "call_id": "call_1", "name": "run_shell",
                 "arguments": r#"{"command":"ls"}"#},
                {"type": "function_call", "call_id": "call_2", "name": "time", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                {"type": "function_call_output", "call_id": "call_2", "output": "noon"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "done"}]},
            ])
        );
    }

    #[test]
    fn body_without_tools_or_system_leaves_them_out() {
        let body = body_for(&[Message::user("x")], &[], &settings());
        assert!(body.get("tools").is_none());
        assert!(body.get("instructions").is_none());
        assert!(body.get("max_output_tokens").is_none());
    }

    #[test]
    fn streamed_text_is_shown_and_kept_with_usage() {
        let (shown, result) = run_stream(
            &[
                json!({"type": "response.created", "response": {"status": "in_progress"}}),
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"type": "message", "role": "assistant", "content": []}}),
                json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}),
                json!({"type": "response.output_text.delta", "output_index": 0, "delta": "lo"}),
                json!({"type": "response.completed", "response": {
                    "status": "completed",
                    "output": [{"type": "message", "role": "assistant",
                                "content": [{"type": "output_text", "text": "Hello"}]}],
                    "usage": {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107,
                              "input_tokens_details": {"cached_tokens": 64}},
                }}),
            ],
            None,
        );
        assert_eq!(
            shown,
            vec![
                StreamEvent::Text("Hel".into()),
                StreamEvent::Text("lo".into())
            ]
        );
        let r = result.expect("response");
        assert_eq!(r.message.role, Role::Assistant);
        assert_eq!(r.message.content.as_deref(), Some("Hello"));
        assert!(r.message.tool_calls.is_none());
        assert!(r.message.extra.is_empty());
        assert_eq!(
            r.usage,
            Some(Usage {
                prompt_tokens: 100,
                completion_tokens: 7,
                total_tokens: 107,
                cache_read_tokens: 64,
                cache_write_tokens: 0,
            })
        );
    }

    #[test]
    fn function_call_is_assembled_from_argument_deltas() {
        // No output in the final object: the streamed items are used.
        let (_, result) = run_stream(
            &[
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"type": "function_call", "id": "fc_1", "call_id": "call_9",
                                "name": "run_shell", "arguments": ""}}),
                json!({"type": "response.function_call_arguments.delta", "output_index": 0,
                       "delta": "{\"command\":"}),
                json!({"type": "response.function_call_arguments.delta", "output_index": 0,
                       "delta": "\"ls\"}"}),
                json!({"type": "response.output_item.added", "output_index": 1,
                       "item": {"type": "function_call", "call_id": "call_10",
                                "name": "time", "arguments": ""}}),
                json!({"type": "response.function_call_arguments.done", "output_index": 1,
                       "arguments": "{}"}),
                json!({"type": "response.completed", "response": {"output": []}}),
            ],
            None,
        );
        let m = result.expect("response").message;
        assert_eq!(m.content, None);
        let calls = m.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "call_9");
        assert_eq!(calls[0].function.name, "run_shell");
        assert_eq!(calls[0].function.arguments, r#"{"command":"ls"}"#);
        assert_eq!(calls[1].id, "call_10");
        assert_eq!(calls[1].function.arguments, "{}");
    }

    #[test]
    fn reasoning_summary_is_shown_and_encrypted_item_kept() {
        let item = reasoning_item("rs_7", "Thinking hard", "enc-secret");
        let (shown, result) = run_stream(
            &[
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"type": "reasoning", "id": "rs_7", "summary": []}}),
                json!({"type": "response.reasoning_summary_part.added", "output_index": 0,
                       "summary_index": 0}),
                json!({"type": "response.reasoning_summary_text.delta", "output_index": 0,
                       "delta": "Thinking"}),
                json!({"type": "response.reasoning_summary_text.delta", "output_index": 0,
                       "delta": " hard"}),
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                json!({"type": "response.output_item.done", "output_index": 1,
                       "item": {"type": "function_call", "call_id": "c1", "name": "time",
                                "arguments": "{}"}}),
                json!({"type": "response.completed", "response": {"status": "completed"}}),
            ],
            None,
        );
        assert_eq!(
            shown,
            vec![
                StreamEvent::Reasoning {
                    field: "reasoning_summary".into(),
                    text: "Thinking".into()
                },
                StreamEvent::Reasoning {
                    field: "reasoning_summary".into(),
                    text: " hard".into()
                },
            ]
        );
        let m = result.expect("response").message;
        assert_eq!(m.extra[REASONING_KEY], json!([item]));
        // Private round-trip data is not a trace to show again.
        assert!(m.reasoning_traces().is_empty());
        assert_eq!(m.calls()[0].id, "c1");
        // And it goes back first, before the call.
        let body = body_for(&[Message::user("q"), m], &[], &settings());
        assert_eq!(body["input"][1], item);
        assert_eq!(body["input"][2]["type"], "function_call");
    }

    #[test]
    fn bare_reasoning_items_are_not_kept() {
        // Only `added` was seen for the reasoning item; nothing to send back.
        let (_, result) = run_stream(
            &[
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
                json!({"type": "response.output_text.delta", "output_index": 1, "delta": "hi"}),
                json!({"type": "response.completed", "response": {"output": []}}),
            ],
            None,
        );
        let m = result.expect("response").message;
        assert_eq!(m.content.as_deref(), Some("hi"));
        assert!(!m.extra.contains_key(REASONING_KEY));
    }

    #[test]
    fn response_failed_is_an_error() {
        let (_, result) = run_stream(
            &[
                json!({"type": "response.output_text.delta", "delta": "par"}),
                json!({"type": "response.failed", "response": {"status": "failed",
                       "error": {"code": "server_error", "message": "The model broke."}}}),
            ],
            None,
        );
        assert_eq!(
            result.expect_err("error"),
            ApiError::StreamInterrupted(
                "server reported an error: server_error: The model broke.".into()
            )
        );
    }

    #[test]
    fn error_event_is_an_error() {
        let (_, result) = run_stream(
            &[json!({"type": "error", "code": "rate_limit_exceeded",
                     "message": "Slow down", "param": null})],
            None,
        );
        assert_eq!(
            result.expect_err("error"),
            ApiError::StreamInterrupted(
                "server reported an error: rate_limit_exceeded: Slow down".into()
            )
        );
    }

    #[test]
    fn stream_without_completed_is_interrupted() {
        let (_, result) = run_stream(
            &[json!({"type": "response.output_text.delta", "delta": "half"})],
            None,
        );
        assert!(
            matches!(result, Err(ApiError::StreamInterrupted(ref m)) if m.contains("closed")),
            "{result:?}"
        );
    }

    #[test]
    fn incomplete_keeps_what_arrived_or_fails_when_empty() {
        let (_, result) = run_stream(
            &[
                json!({"type": "response.output_text.delta", "delta": "partial"}),
                json!({"type": "response.incomplete", "response": {"status": "incomplete",
                       "incomplete_details": {"reason": "max_output_tokens"}}}),
            ],
            None,
        );
        assert_eq!(
            result.expect("response").message.content.as_deref(),
            Some("partial")
        );
        let (_, result) = run_stream(
            &[
                json!({"type": "response.incomplete", "response": {"status": "incomplete",
                       "incomplete_details": {"reason": "max_output_tokens"}}}),
            ],
            None,
        );
        assert!(
            matches!(result, Err(ApiError::StreamInterrupted(ref m)) if m.contains("max_output_tokens")),
            "{result:?}"
        );
    }

    #[test]
    fn a_content_filter_stop_is_a_refusal_not_a_cut_off() {
        let (_, result) = run_stream(
            &[
                json!({"type": "response.output_text.delta", "delta": "Sure, first"}),
                json!({"type": "response.incomplete", "response": {"status": "incomplete",
                       "incomplete_details": {"reason": "content_filter"}}}),
            ],
            None,
        );
        let r = result.expect("response");
        assert_eq!(r.refusal.as_deref(), Some("incomplete: content_filter"));
        assert_eq!(r.cut_off, None);
        let (_, result) = run_stream(
            &[
                json!({"type": "response.output_text.delta", "delta": "partial"}),
                json!({"type": "response.incomplete", "response": {"status": "incomplete",
                       "incomplete_details": {"reason": "max_output_tokens"}}}),
            ],
            None,
        );
        let r = result.expect("response");
        assert_eq!(r.refusal, None);
        assert!(r.cut_off.is_some());
    }

    #[test]
    fn json_response_is_parsed() {
        let body = json!({
            "id": "resp_1", "object": "response", "status": "completed", "error": null,
            "output": [
                reasoning_item("rs_1", "plan", "enc-1"),
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Calling."}]},
                {"type": "function_call", "call_id": "c1", "name": "time", "arguments": "{}"},
            ],
            "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
        });
        let shown = Mutex::new(Vec::new());
        let sink = |e: StreamEvent| shown.lock().expect("lock").push(e);
        let r = Responses
            .parse_json(body.to_string().as_bytes(), &sink)
            .expect("response");
        assert_eq!(r.message.content.as_deref(), Some("Calling."));
        assert_eq!(r.message.calls()[0].id, "c1");
        assert_eq!(
            r.message.extra[REASONING_KEY],
            json!([reasoning_item("rs_1", "plan", "enc-1")])
        );
        assert_eq!(r.usage.map(|u| u.total_tokens), Some(8));
        assert_eq!(
            shown.into_inner().expect("lock"),
            vec![StreamEvent::Reasoning {
                field: "reasoning_summary".into(),
                text: "plan".into()
            }]
        );
    }

    #[test]
    fn json_error_response_is_an_error() {
        let body = json!({"status": "failed", "output": [],
                          "error": {"code": "server_error", "message": "nope"}});
        let err = Responses
            .parse_json(body.to_string().as_bytes(), &|_| {})
            .expect_err("error");
        assert!(err.to_string().contains("server_error: nope"), "{err}");
    }

    #[test]
    fn error_bodies_use_the_openai_shape() {
        assert_eq!(
            Responses.error_message(
                r#"{"error":{"message":"Invalid key","type":"invalid_request_error","code":"x"}}"#
            ),
            "Invalid key"
        );
    }
}
