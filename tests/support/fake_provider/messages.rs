//! The Anthropic Messages shape of a scripted answer: an SSE stream of
//! `message_start`, content blocks (thinking, text, tool_use) with their deltas,
//! `message_delta` and `message_stop`, or one `message` object.
//!
//! Each reasoning entry becomes a `thinking` block signed with
//! [`thinking_signature`] (an entry whose field is `redacted_thinking` becomes a
//! `redacted_thinking` block whose `data` is the text). Scripted usage
//! `(prompt, completion)` is sent as `input_tokens` / `output_tokens`; cache
//! counts set with [`Reply::with_cache`] are sent besides.

use super::{pieces, Completion, Reply, SseChunk};
use serde_json::{json, Value};

impl Reply {
    /// Reports these prompt-cache counts (`cache_read_input_tokens`,
    /// `cache_creation_input_tokens`) besides the usage.
    pub fn with_cache(mut self, read: u64, write: u64) -> Reply {
        self.completion_mut("with_cache").cache_tokens = Some((read, write));
        self
    }
}

/// The signature the fake gives a thinking block: `sig-` and the letters and
/// digits of its text (at most 32), so tests can predict it.
pub fn thinking_signature(text: &str) -> String {
    let tail: String = text
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(32)
        .collect();
    format!("sig-{tail}")
}

fn stop_reason(c: &Completion) -> String {
    if c.refusal {
        return "refusal".to_string();
    }
    match c.finish_reason() {
        "stop" => "end_turn".to_string(),
        "tool_calls" => "tool_use".to_string(),
        "length" => "max_tokens".to_string(),
        other => other.to_string(),
    }
}

/// (input, output) tokens: scripted or estimated like the Completions shape.
fn token_counts(c: &Completion, body_len: usize) -> (u64, u64) {
    let u = c.usage_json(body_len);
    (
        u["prompt_tokens"].as_u64().unwrap_or(0),
        u["completion_tokens"].as_u64().unwrap_or(0),
    )
}

fn usage_json(c: &Completion, body_len: usize, output: u64) -> Value {
    let (input, _) = token_counts(c, body_len);
    let mut usage = json!({"input_tokens": input, "output_tokens": output});
    if let Some((read, write)) = c.cache_tokens {
        usage["cache_read_input_tokens"] = json!(read);
        usage["cache_creation_input_tokens"] = json!(write);
    }
    usage
}

fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// `event: <type>\ndata: <json>\n\n`, as Anthropic sends it.
fn event(value: Value) -> SseChunk {
    let name = value["type"].as_str().unwrap_or("unknown").to_string();
    SseChunk::raw(format!("event: {name}\ndata: {value}\n\n"))
}

pub(super) fn stream_chunks(
    c: &Completion,
    model: &str,
    id: &str,
    body_len: usize,
) -> Vec<SseChunk> {
    let mut start_message = json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": null,
        "stop_sequence": null,
    });
    if c.send_usage {
        start_message["usage"] = usage_json(c, body_len, 1);
    }
    let mut events = vec![
        json!({"type": "message_start", "message": start_message}),
        json!({"type": "ping"}),
    ];
    let mut index = 0;
    for (field, text) in &c.reasoning {
        if field == "redacted_thinking" {
            events.push(json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "redacted_thinking", "data": text}}));
        } else {
            events.push(json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
            for piece in pieces(text) {
                events.push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "thinking_delta", "thinking": piece}}));
            }
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "signature_delta", "signature": thinking_signature(text)}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    if let Some(content) = c.content.as_deref().filter(|t| !t.is_empty()) {
        events.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}}));
        for piece in pieces(content) {
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for call in &c.tool_calls {
        events.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}));
        events.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": ""}}));
        for piece in pieces(&call.arguments) {
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let mut message_delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(c), "stop_sequence": null},
    });
    if c.send_usage {
        message_delta["usage"] = json!({"output_tokens": token_counts(c, body_len).1});
    }
    events.push(message_delta);
    if c.send_done {
        events.push(json!({"type": "message_stop"}));
    }
    events
        .into_iter()
        .map(|e| event(e).delay(c.chunk_delay))
        .collect()
}

pub(super) fn response_json(c: &Completion, model: &str, id: &str, body_len: usize) -> Value {
    let mut content = Vec::new();
    for (field, text) in &c.reasoning {
        if field == "redacted_thinking" {
            content.push(json!({"type": "redacted_thinking", "data": text}));
        } else {
            content.push(json!({"type": "thinking", "thinking": text,
                "signature": thinking_signature(text)}));
        }
    }
    if let Some(text) = c.content.as_deref().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in &c.tool_calls {
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name,
            "input": tool_input(&call.arguments)}));
    }
    let mut body = json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(c),
        "stop_sequence": null,
    });
    if c.send_usage {
        body["usage"] = usage_json(c, body_len, token_counts(c, body_len).1);
    }
    body
}
