//! The Anthropic Messages protocol: `POST {base}/messages` with `x-api-key` and
//! `anthropic-version` headers. The history is kept in the Chat Completions shape;
//! this module translates it into Messages content blocks on the way out and
//! translates the answer back:
//!
//! - system messages become the top-level `system` (a list of text blocks);
//! - assistant tool calls become `tool_use` blocks, tool results become
//!   `tool_result` blocks, and everything is folded so roles alternate (all
//!   results of one turn, plus any user text after them, in one user message);
//! - `thinking` / `redacted_thinking` blocks are kept verbatim in the assistant
//!   message's `extra[THINKING_KEY]` and sent back first in that message, since
//!   the server needs them (with their signatures) to continue a tool-use turn;
//! - with prompt caching on, a cache breakpoint is put on the system prompt and
//!   on the last block of the latest turn.

use super::http::{decode_body, encode_body, ClientSettings, Flow, Protocol, StreamParser};
use super::{ApiError, EventSink, ModelRequest, ModelResponse, StreamEvent};
use crate::provider::error::error_message_from_body;
use crate::wire::sse::SseEvent;
use crate::wire::{Message, Role, ToolCall, Usage};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Where an assistant message keeps its thinking blocks (a JSON array, verbatim).
pub const THINKING_KEY: &str = "buddy_anthropic_thinking";
/// The API version this module speaks.
pub const API_VERSION: &str = "2023-06-01";
/// Output cap when the profile sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// Stands in for a message that would otherwise have no content, which the API
/// refuses.
const EMPTY_PLACEHOLDER: &str = "(empty)";

pub struct Messages;

impl Protocol for Messages {
    fn path(&self) -> &'static str {
        "/messages"
    }
    fn default_max_tokens(&self) -> Option<u64> {
        Some(DEFAULT_MAX_TOKENS)
    }

    fn models_path(&self) -> &'static str {
        // One page of the most the API returns, which holds every model.
        "/models?limit=1000"
    }

    fn headers(
        &self,
        request: reqwest::RequestBuilder,
        settings: &ClientSettings,
    ) -> reqwest::RequestBuilder {
        let request = request.header("anthropic-version", API_VERSION);
        match &settings.api_key {
            Some(key) => request.header("x-api-key", key),
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
        let value: Value = decode_body(body, "a Messages response")?;
        if value.get("type").and_then(Value::as_str) == Some("error") {
            return Err(ApiError::InvalidResponse(format!(
                "server reported an error: {}",
                describe_error(&value)
            )));
        }
        let Some(content) = value.get("content").and_then(Value::as_array) else {
            return Err(ApiError::InvalidResponse(
                "the response has no content".into(),
            ));
        };
        let blocks: Vec<Block> = content.iter().filter_map(Block::from_json).collect();
        for block in &blocks {
            if let Block::Thinking { thinking, .. } = block {
                if !thinking.is_empty() {
                    on_event(StreamEvent::Reasoning {
                        field: "thinking".into(),
                        text: thinking.clone(),
                    });
                }
            }
        }
        let mut usage = UsageCounts::default();
        if let Some(u) = value.get("usage") {
            usage.update(u);
        }
        Ok(assemble(
            blocks,
            usage.to_usage(),
            value.get("stop_reason").and_then(Value::as_str),
        ))
    }

    fn error_message(&self, body: &str) -> String {
        match serde_json::from_str::<Value>(body) {
            Ok(v) if v.pointer("/error/type").is_some_and(Value::is_string) => describe_error(&v),
            _ => error_message_from_body(body),
        }
    }
}

/// `"<type>: <message>"` for an Anthropic error object
/// (`{"type":"error","error":{"type":..., "message":...}}`), on one line.
fn describe_error(v: &Value) -> String {
    let kind = v
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or("error");
    let message = error_message_from_body(&v.to_string());
    if message.is_empty() || v.pointer("/error/message").is_none() {
        kind.to_string()
    } else {
        format!("{kind}: {message}")
    }
}

// ---------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------

fn request_body(request: ModelRequest<'_>, s: &ClientSettings) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(s.model.as_str()));
    body.insert(
        "max_tokens".into(),
        Value::from(s.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    body.insert("stream".into(), Value::from(s.stream));
    if let Some(t) = s.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    if let Some(p) = s.top_p {
        body.insert("top_p".into(), Value::from(p));
    }

    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .filter(|t| !t.trim().is_empty())
        .collect();
    if !system.is_empty() {
        let mut block = json!({"type": "text", "text": system.join("\n\n")});
        if s.prompt_cache {
            block["cache_control"] = cache_marker();
        }
        body.insert("system".into(), json!([block]));
    }

    let answer_tool = request.output.map(|o| o.name());
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        // A tool of the answer's name could not be called anyway (the
        // answer tool is forced) and two of one name are refused.
        .filter(|t| Some(t.function.name.as_str()) != answer_tool)
        .map(|t| {
            json!({
                "name": t.function.name,
                "description": t.function.description,
                "input_schema": t.function.parameters,
            })
        })
        .collect();
    if let Some(output) = request.output {
        // The Messages API has no response format: the schema is the input
        // of a tool the model must call, and that call's input is the
        // answer (`OutputSchema::adopt_answer_call`).
        tools.push(json!({
            "name": output.name(),
            "description": "Give your final answer by calling this tool; its input is the answer.",
            "input_schema": output.schema(),
        }));
        body.insert(
            "tool_choice".into(),
            json!({"type": "tool", "name": output.name()}),
        );
    }
    if !tools.is_empty() {
        body.insert("tools".into(), Value::from(tools));
    }

    let mut messages = conversation(request.messages);
    if s.prompt_cache {
        mark_latest_turn(&mut messages);
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    body.insert("messages".into(), Value::from(messages));
    Value::Object(body)
}

fn cache_marker() -> Value {
    json!({"type": "ephemeral"})
}

/// The non-system history as (role, content blocks), with neighbouring
/// messages of the same role merged so that user and assistant alternate.
fn conversation(history: &[Message]) -> Vec<(&'static str, Vec<Value>)> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in history {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", user_blocks(m)),
            Role::Tool => ("user", vec![tool_result_block(m)]),
            Role::Assistant => ("assistant", assistant_blocks(m)),
        };
        match out.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    for (_, content) in &mut out {
        if content.is_empty() {
            content.push(json!({"type": "text", "text": EMPTY_PLACEHOLDER}));
        }
    }
    out
}

fn text_blocks(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// A user message's blocks: its images as base64 `image` blocks, then its
/// text (the order Anthropic recommends).
fn user_blocks(m: &Message) -> Vec<Value> {
    let mut blocks: Vec<Value> = m
        .images
        .iter()
        .map(|img| match img.base64() {
            Some(data) => json!({
                "type": "image",
                "source": {"type": "base64", "media_type": img.media_type, "data": data},
            }),
            None => json!({"type": "text", "text": img.missing_text()}),
        })
        .collect();
    blocks.extend(text_blocks(m.text()));
    blocks
}

fn tool_result_block(m: &Message) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
    });
    // An empty result is sent without content; the API refuses empty text.
    if !m.text().is_empty() {
        block["content"] = Value::from(m.text());
    }
    block
}

fn assistant_blocks(m: &Message) -> Vec<Value> {
    let mut blocks: Vec<Value> = match m.extra.get(THINKING_KEY) {
        Some(Value::Array(thinking)) => {
            thinking.iter().filter(|b| b.is_object()).cloned().collect()
        }
        _ => Vec::new(),
    };
    blocks.extend(text_blocks(m.text()));
    for call in m.calls() {
        blocks.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.function.name,
            "input": tool_input(&call.function.arguments),
        }));
    }
    blocks
}

/// The arguments of a call as the object `input` must be. Arguments that are not
/// a JSON object (a model's malformed output, already answered with an error
/// result) are sent as an empty object.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// Puts a cache breakpoint on the last block of the last message that may carry
/// one (thinking blocks may not).
fn mark_latest_turn(messages: &mut [(&'static str, Vec<Value>)]) {
    let Some((_, content)) = messages.last_mut() else {
        return;
    };
    let target = content.iter_mut().rev().find(|b| {
        !matches!(
            b.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    });
    if let Some(Value::Object(block)) = target {
        block.insert("cache_control".into(), cache_marker());
    }
}

// ---------------------------------------------------------------------------
// The answer
// ---------------------------------------------------------------------------

/// One content block of an answer.
#[derive(Debug, Clone)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// Streamed `partial_json`, joined.
        json: String,
        /// The `input` given whole (non-streamed, or in `content_block_start`).
        input: Value,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    /// A block kept verbatim (`redacted_thinking`).
    Opaque(Value),
    /// A block type this module does not know; dropped.
    Ignored,
}

impl Block {
    fn from_json(v: &Value) -> Option<Block> {
        let str_field = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        let block = match v.get("type").and_then(Value::as_str)? {
            "text" => Block::Text(str_field("text").to_string()),
            "tool_use" => Block::ToolUse {
                id: str_field("id").to_string(),
                name: str_field("name").to_string(),
                json: String::new(),
                input: v.get("input").cloned().unwrap_or(Value::Null),
            },
            "thinking" => Block::Thinking {
                thinking: str_field("thinking").to_string(),
                signature: str_field("signature").to_string(),
            },
            "redacted_thinking" => Block::Opaque(v.clone()),
            _ => Block::Ignored,
        };
        Some(block)
    }
}

/// Turns the blocks of one answer into an assistant message.
fn assemble(blocks: Vec<Block>, usage: Option<Usage>, stop_reason: Option<&str>) -> ModelResponse {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut thinking = Vec::new();
    for block in blocks {
        match block {
            Block::Text(t) => text.push_str(&t),
            Block::ToolUse {
                id,
                name,
                json,
                input,
            } => {
                let arguments = if !json.trim().is_empty() {
                    json
                } else {
                    match input {
                        Value::Object(map) if !map.is_empty() => Value::Object(map).to_string(),
                        _ => "{}".to_string(),
                    }
                };
                calls.push(ToolCall::new(id, name, arguments));
            }
            Block::Thinking {
                thinking: t,
                signature,
            } => thinking.push(json!({"type": "thinking", "thinking": t, "signature": signature})),
            Block::Opaque(v) => thinking.push(v),
            Block::Ignored => {}
        }
    }
    let mut message = Message::assistant(text);
    if !calls.is_empty() {
        if message.text().is_empty() {
            message.content = None;
        }
        message.tool_calls = Some(calls);
    }
    if !thinking.is_empty() {
        message
            .extra
            .insert(THINKING_KEY.into(), Value::Array(thinking));
    }
    ModelResponse {
        message,
        usage,
        cut_off: (stop_reason == Some("max_tokens")).then(|| "stop_reason: max_tokens".to_string()),
        refusal: (stop_reason == Some("refusal")).then(|| "stop_reason: refusal".to_string()),
    }
}

/// Token counts as the API reports them.
#[derive(Debug, Default, Clone, Copy)]
struct UsageCounts {
    seen: bool,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

impl UsageCounts {
    /// Takes whatever counts `u` has; later reports replace earlier ones.
    fn update(&mut self, u: &Value) {
        let fields = [
            ("input_tokens", &mut self.input),
            ("output_tokens", &mut self.output),
            ("cache_read_input_tokens", &mut self.cache_read),
            ("cache_creation_input_tokens", &mut self.cache_write),
        ];
        for (key, slot) in fields {
            if let Some(n) = u.get(key).and_then(Value::as_u64) {
                *slot = n;
                self.seen = true;
            }
        }
    }

    fn to_usage(self) -> Option<Usage> {
        if !self.seen {
            return None;
        }
        let prompt = self.input + self.cache_read + self.cache_write;
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: self.output,
            total_tokens: prompt + self.output,
            cache_read_tokens: self.cache_read,
            cache_write_tokens: self.cache_write,
        })
    }
}

/// Parses one streamed answer: blocks by index, filled in by deltas.
#[derive(Default)]
struct EventParser {
    blocks: BTreeMap<u64, Block>,
    usage: UsageCounts,
    stop_reason: Option<String>,
    /// Bytes of answer held (blocks as started, then their deltas).
    bytes: usize,
}

impl StreamParser for EventParser {
    fn event(&mut self, ev: &SseEvent, on_event: EventSink<'_>) -> Result<Flow, ApiError> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(Flow::More);
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| ApiError::InvalidResponse(format!("malformed stream event ({e})")))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or_default();
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(u) = value.pointer("/message/usage") {
                    self.usage.update(u);
                }
            }
            "content_block_start" => {
                let block = value
                    .get("content_block")
                    .and_then(Block::from_json)
                    .unwrap_or(Block::Ignored);
                self.bytes += data.len();
                if let Block::Thinking { thinking, .. } = &block {
                    if !thinking.is_empty() {
                        on_event(StreamEvent::Reasoning {
                            field: "thinking".into(),
                            text: thinking.clone(),
                        });
                    }
                }
                if let Block::Text(text) = &block {
                    if !text.is_empty() {
                        on_event(StreamEvent::Text(text.clone()));
                    }
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let delta = value.get("delta").unwrap_or(&Value::Null);
                self.bytes += ["text", "partial_json", "thinking", "signature"]
                    .iter()
                    .filter_map(|k| delta.get(*k).and_then(Value::as_str))
                    .map(str::len)
                    .sum::<usize>();
                self.delta(index, delta, on_event)?;
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(u) = value.get("usage") {
                    self.usage.update(u);
                }
            }
            "message_stop" => return Ok(Flow::Done),
            "error" => {
                return Err(crate::provider::error::stream_error(
                    &value,
                    describe_error(&value),
                ))
            }
            // `ping`, `content_block_stop` and event types added later.
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
        let usage = self.usage.to_usage();
        let stop = self.stop_reason.clone();
        Ok(assemble(
            self.blocks.into_values().collect(),
            usage,
            stop.as_deref(),
        ))
    }

    fn answer_bytes(&self) -> usize {
        self.bytes
    }
}

impl EventParser {
    fn delta(
        &mut self,
        index: u64,
        delta: &Value,
        on_event: EventSink<'_>,
    ) -> Result<(), ApiError> {
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let block = self.blocks.get_mut(&index);
        match (kind, block) {
            ("text_delta", Some(Block::Text(text))) => {
                let t = piece("text");
                if !t.is_empty() {
                    text.push_str(t);
                    on_event(StreamEvent::Text(t.to_string()));
                }
            }
            ("input_json_delta", Some(Block::ToolUse { json, .. })) => {
                json.push_str(piece("partial_json"));
            }
            ("thinking_delta", Some(Block::Thinking { thinking, .. })) => {
                let t = piece("thinking");
                if !t.is_empty() {
                    thinking.push_str(t);
                    on_event(StreamEvent::Reasoning {
                        field: "thinking".into(),
                        text: t.to_string(),
                    });
                }
            }
            ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                signature.push_str(piece("signature"));
            }
            ("text_delta" | "input_json_delta" | "thinking_delta" | "signature_delta", None) => {
                return Err(ApiError::InvalidResponse(format!(
                    "stream delta for content block {index}, which was never started"
                )));
            }
            // A delta of a kind this module does not know, or for a block it ignores.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ToolDefinition, ToolList};
    use std::sync::Mutex;

    fn settings(stream: bool, prompt_cache: bool) -> ClientSettings {
        ClientSettings {
            api_key: Some("sk-ant".into()),
            model: "claude-test".into(),
            stream,
            prompt_cache,
            ..ClientSettings::for_test("https://api.anthropic.com/v1")
        }
    }

    fn body_for(messages: &[Message], tools: &[ToolDefinition], cache: bool) -> Value {
        let bytes = Messages
            .body(
                ModelRequest {
                    messages,
                    tools: &ToolList::from(tools.to_vec()),
                    output: None,
                },
                &settings(true, cache),
            )
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    fn assistant_calls(text: Option<&str>, calls: &[(&str, &str, &str)]) -> Message {
        let mut m = Message::assistant(text.unwrap_or_default());
        m.content = text.map(str::to_string);
        m.tool_calls = Some(
            calls
                .iter()
                .map(|(id, name, args)| ToolCall::new(*id, *name, *args))
                .collect(),
        );
        m
    }

    /// Feeds `events` to a fresh parser; `clean_end: false` as if the stream
    /// had closed without its end marker.
    fn run_stream(
        events: &[Value],
        clean_end: bool,
    ) -> (Vec<StreamEvent>, Result<ModelResponse, ApiError>) {
        crate::provider::http::run_parser(&Messages, events, (!clean_end).then_some(false))
    }

    fn start(usage: Value) -> Value {
        json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [], "stop_reason": null, "usage": usage}})
    }

    fn block_start(index: u64, block: Value) -> Value {
        json!({"type": "content_block_start", "index": index, "content_block": block})
    }

    fn delta(index: u64, delta: Value) -> Value {
        json!({"type": "content_block_delta", "index": index, "delta": delta})
    }

    fn stop_block(index: u64) -> Value {
        json!({"type": "content_block_stop", "index": index})
    }

    fn end(reason: &str, output: u64) -> Vec<Value> {
        vec![
            json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": output}}),
            json!({"type": "message_stop"}),
        ]
    }

    #[test]
    fn request_has_model_limits_system_and_tools() {
        let tools = [ToolDefinition::function(
            "time",
            "Tells the time",
            json!({"type": "object", "properties": {}}),
        )];
        let history = [
            Message::system("be brief"),
            Message::system("and kind"),
            Message::user("hi"),
        ];
        let body = body_for(&history, &tools, false);
        assert_eq!(body["model"], "claude-test");
        assert_eq!(body["max_tokens"], 8192);
        assert_eq!(body["stream"], true);
        assert!(body.get("temperature").is_none());
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "be brief\n\nand kind"}])
        );
        assert_eq!(
            body["tools"],
            json!([{"name": "time", "description": "Tells the time",
                    "input_schema": {"type": "object", "properties": {}}}])
        );
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        );
    }

    #[test]
    fn settings_override_limits_and_sampling() {
        let mut s = settings(false, false);
        s.max_tokens = Some(100);
        s.temperature = Some(0.5);
        s.top_p = Some(0.9);
        s.api_key = None;
        let bytes = Messages
            .body(
                ModelRequest {
                    messages: &[Message::user("x")],
                    tools: &ToolList::new(),
                    output: None,
                },
                &s,
            )
            .unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["top_p"], 0.9);
        assert_eq!(body["stream"], false);
        assert!(body.get("tools").is_none());
        assert!(body.get("system").is_none());
    }

    #[test]
    fn tool_calls_pair_with_grouped_results_and_following_user_text() {
        let history = [
            Message::user("do two things"),
            assistant_calls(
                Some("on it"),
                &[
                    ("tu_1", "run_shell", r#"{"command":"echo a"}"#),
                    ("tu_2", "time", ""),
                ],
            ),
            Message::tool_result("tu_1", "a"),
            Message::tool_result("tu_2", ""),
            Message::user("and then?"),
        ];
        let body = body_for(&history, &[], false);
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3, "{msgs:#?}");
        assert_eq!(
            msgs[1],
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "on it"},
                {"type": "tool_use", "id": "tu_1", "name": "run_shell", "input": {"command": "echo a"}},
                {"type": "tool_use", "id": "tu_2", "name": "time", "input": {}},
            ]})
        );
        assert_eq!(
            msgs[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "a"},
                {"type": "tool_result", "tool_use_id": "tu_2"},
                {"type": "text", "text": "and then?"},
            ]})
        );
    }

    #[test]
    fn unparsable_arguments_become_an_empty_object() {
        let history = [
            Message::user("x"),
            assistant_calls(None, &[("t", "f", "{not json"), ("u", "g", "[1]")]),
        ];
        let body = body_for(&history, &[], false);
        let content = body["messages"][1]["content"].as_array().unwrap();
        assert_eq!(content.len(), 2, "no text block for a tool-only turn");
        assert_eq!(content[0]["input"], json!({}));
        assert_eq!(content[1]["input"], json!({}));
    }

    #[test]
    fn thinking_goes_first_and_foreign_private_keys_are_ignored() {
        let mut m = assistant_calls(Some("checking"), &[("t1", "time", "{}")]);
        let thinking = json!([
            {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
        ]);
        m.extra.insert(THINKING_KEY.into(), thinking.clone());
        m.extra.insert(
            "buddy_responses_items".into(),
            json!([{"type": "reasoning"}]),
        );
        let history = [Message::user("q"), m, Message::tool_result("t1", "noon")];
        let body = body_for(&history, &[], false);
        let content = body["messages"][1]["content"].as_array().unwrap();
        assert_eq!(content[0], thinking[0]);
        assert_eq!(content[1], thinking[1]);
        assert_eq!(content[2]["type"], "text");
        assert_eq!(content[3]["type"], "tool_use");
        assert_eq!(content.len(), 4);
        assert!(!body.to_string().contains("buddy_"));
    }

    #[test]
    fn prompt_cache_marks_system_and_latest_turn_only() {
        let history = [
            Message::system("sys"),
            Message::user("first"),
            assistant_calls(None, &[("t1", "time", "{}")]),
            Message::tool_result("t1", "noon"),
        ];
        let body = body_for(&history, &[], true);
        assert_eq!(
            body["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        let text = body.to_string();
        assert_eq!(text.matches("cache_control").count(), 2, "{text}");
        let last = body["messages"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["content"][0]["type"], "tool_result");
        assert_eq!(
            last["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );

        let off = body_for(&history, &[], false);
        assert!(!off.to_string().contains("cache_control"));
    }

    #[test]
    fn headers_carry_key_and_version() {
        let client = reqwest::Client::new();
        let req = Messages
            .headers(client.post("http://x/v1/messages"), &settings(true, true))
            .build()
            .unwrap();
        assert_eq!(req.headers()["x-api-key"], "sk-ant");
        assert_eq!(req.headers()["anthropic-version"], API_VERSION);
        assert!(req.headers().get("authorization").is_none());
        assert_eq!(Messages.path(), "/messages");
    }

    #[test]
    fn streamed_text_is_reported_and_collected() {
        let mut events = vec![
            start(json!({"input_tokens": 12, "output_tokens": 1})),
            json!({"type": "ping"}),
            block_start(0, json!({"type": "text", "text": ""})),
            delta(0, json!({"type": "text_delta", "text": "Hel"})),
            delta(0, json!({"type": "text_delta", "text": "lo"})),
            stop_block(0),
        ];
        events.extend(end("end_turn", 5));
        let (seen, result) = run_stream(&events, true);
        let r = result.unwrap();
        assert_eq!(
            seen,
            vec![
                StreamEvent::Text("Hel".into()),
                StreamEvent::Text("lo".into())
            ]
        );
        assert_eq!(r.message.role, Role::Assistant);
        assert_eq!(r.message.content.as_deref(), Some("Hello"));
        assert!(r.message.tool_calls.is_none());
        assert!(r.message.extra.is_empty());
        let u = r.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.total_tokens),
            (12, 5, 17)
        );
    }

    #[test]
    fn streamed_tool_calls_join_split_input() {
        let mut events = vec![
            start(json!({"input_tokens": 3})),
            block_start(0, json!({"type": "text", "text": ""})),
            delta(0, json!({"type": "text_delta", "text": "Let me look."})),
            stop_block(0),
            block_start(
                1,
                json!({"type": "tool_use", "id": "tu_a", "name": "run_shell", "input": {}}),
            ),
            delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "{\"comm"}),
            ),
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "and\":\"ls\"}"}),
            ),
            stop_block(1),
            block_start(
                2,
                json!({"type": "tool_use", "id": "tu_b", "name": "time", "input": {}}),
            ),
            stop_block(2),
        ];
        events.extend(end("tool_use", 9));
        let (_, result) = run_stream(&events, true);
        let m = result.unwrap().message;
        assert_eq!(m.content.as_deref(), Some("Let me look."));
        let calls = m.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "tu_a");
        assert_eq!(calls[0].function.name, "run_shell");
        assert_eq!(calls[0].function.arguments, r#"{"command":"ls"}"#);
        assert_eq!(calls[1].function.arguments, "{}");
    }

    #[test]
    fn tool_only_turn_has_no_content() {
        let mut events = vec![
            start(json!({"input_tokens": 3})),
            block_start(
                0,
                json!({"type": "tool_use", "id": "t", "name": "time", "input": {}}),
            ),
            stop_block(0),
        ];
        events.extend(end("tool_use", 2));
        let m = run_stream(&events, true).1.unwrap().message;
        assert_eq!(m.content, None);
        assert_eq!(m.calls().len(), 1);
    }

    #[test]
    fn streamed_thinking_is_shown_and_kept_with_signature() {
        let mut events = vec![
            start(json!({"input_tokens": 3})),
            block_start(
                0,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": "pondering "}),
            ),
            delta(0, json!({"type": "thinking_delta", "thinking": "hard"})),
            delta(0, json!({"type": "signature_delta", "signature": "EqABC"})),
            stop_block(0),
            block_start(1, json!({"type": "redacted_thinking", "data": "secret"})),
            stop_block(1),
            block_start(2, json!({"type": "text", "text": ""})),
            delta(2, json!({"type": "text_delta", "text": "42"})),
            stop_block(2),
        ];
        events.extend(end("end_turn", 7));
        let (seen, result) = run_stream(&events, true);
        assert_eq!(
            seen[0],
            StreamEvent::Reasoning {
                field: "thinking".into(),
                text: "pondering ".into()
            }
        );
        assert_eq!(seen.len(), 3);
        let m = result.unwrap().message;
        assert_eq!(m.text(), "42");
        assert_eq!(
            m.extra[THINKING_KEY],
            json!([
                {"type": "thinking", "thinking": "pondering hard", "signature": "EqABC"},
                {"type": "redacted_thinking", "data": "secret"},
            ])
        );
        assert!(m.reasoning_traces().is_empty(), "private key, not a trace");

        // And it goes back first in the next request.
        let history = [Message::user("q"), m];
        let body = body_for(&history, &[], false);
        assert_eq!(body["messages"][1]["content"][0]["signature"], "EqABC");
        assert_eq!(body["messages"][1]["content"][2]["text"], "42");
    }

    #[test]
    fn usage_counts_cached_prompt_tokens() {
        let mut events = vec![
            start(json!({"input_tokens": 10, "output_tokens": 1,
                "cache_read_input_tokens": 200, "cache_creation_input_tokens": 30})),
            block_start(0, json!({"type": "text", "text": ""})),
            delta(0, json!({"type": "text_delta", "text": "ok"})),
            stop_block(0),
        ];
        events.extend(end("end_turn", 4));
        let u = run_stream(&events, true).1.unwrap().usage.unwrap();
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 240,
                completion_tokens: 4,
                total_tokens: 244,
                cache_read_tokens: 200,
                cache_write_tokens: 30,
            }
        );
    }

    #[test]
    fn error_event_interrupts_the_stream() {
        let events = [
            start(json!({"input_tokens": 1})),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ];
        let err = run_stream(&events, true).1.unwrap_err();
        assert_eq!(
            err,
            ApiError::StreamInterrupted(
                "server reported an error: overloaded_error: Overloaded".into()
            )
        );
    }

    #[test]
    fn stream_without_message_stop_is_interrupted() {
        let events = [
            start(json!({"input_tokens": 1})),
            block_start(0, json!({"type": "text", "text": ""})),
            delta(0, json!({"type": "text_delta", "text": "part"})),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ];
        let err = run_stream(&events, false).1.unwrap_err();
        assert!(matches!(err, ApiError::StreamInterrupted(_)), "{err:?}");
    }

    #[test]
    fn delta_for_unknown_block_is_invalid() {
        let events = [
            start(json!({"input_tokens": 1})),
            delta(3, json!({"type": "text_delta", "text": "x"})),
        ];
        let err = run_stream(&events, true).1.unwrap_err();
        assert!(matches!(err, ApiError::InvalidResponse(_)), "{err:?}");
    }

    #[test]
    fn json_response_maps_blocks_and_usage() {
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [
                {"type": "thinking", "thinking": "let me see", "signature": "s1"},
                {"type": "text", "text": "Running it."},
                {"type": "tool_use", "id": "tu_1", "name": "run_shell", "input": {"command": "echo hi"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 5, "output_tokens": 6, "cache_read_input_tokens": 7},
        });
        let seen = Mutex::new(Vec::new());
        let sink = |e: StreamEvent| seen.lock().unwrap().push(e);
        let r = Messages
            .parse_json(body.to_string().as_bytes(), &sink)
            .unwrap();
        assert_eq!(
            seen.into_inner().unwrap(),
            vec![StreamEvent::Reasoning {
                field: "thinking".into(),
                text: "let me see".into()
            }]
        );
        assert_eq!(r.message.text(), "Running it.");
        let call = &r.message.calls()[0];
        assert_eq!(call.id, "tu_1");
        let args: Value = serde_json::from_str(&call.function.arguments).unwrap();
        assert_eq!(args, json!({"command": "echo hi"}));
        assert_eq!(r.message.extra[THINKING_KEY][0]["signature"], "s1");
        let u = r.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.cache_read_tokens, u.total_tokens),
            (12, 7, 18)
        );
    }

    #[test]
    fn json_response_without_content_is_invalid() {
        let sink = |_: StreamEvent| {};
        let err = Messages.parse_json(b"{\"foo\":1}", &sink).unwrap_err();
        assert!(matches!(err, ApiError::InvalidResponse(_)));
    }

    #[test]
    fn error_bodies_name_the_error_type() {
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests\nexceeded"}}"#;
        assert_eq!(
            Messages.error_message(body),
            "rate_limit_error: Number of requests exceeded"
        );
        assert_eq!(Messages.error_message("plain\ntext"), "plain text");
        assert_eq!(Messages.error_message(r#"{"error":{"message":"m"}}"#), "m");
    }
}
