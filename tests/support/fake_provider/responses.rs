//! The OpenAI Responses shape of a scripted answer: a `response` object, or a
//! stream of typed events (`event: <type>` plus a `data:` object carrying the
//! same `type`) ending in `response.completed`.
//!
//! Each reasoning entry becomes a `reasoning` output item whose summary is the
//! entry's text (streamed as `response.reasoning_summary_text.delta` pieces)
//! and whose `encrypted_content` is `"enc-" + text`, so a test can check that
//! the item came back unchanged in the next request. A finish reason of
//! `length` ends the stream with `response.incomplete` instead.

use super::{pieces, unix_now, Completion, SseChunk};
use serde_json::{json, Value};

/// The `encrypted_content` of the reasoning item made from `text`.
fn encrypted_content(text: &str) -> String {
    format!("enc-{text}")
}

fn reasoning_item(id: &str, index: usize, text: &str) -> Value {
    json!({
        "id": format!("rs_{id}_{index}"),
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}],
        "encrypted_content": encrypted_content(text),
    })
}

fn message_item(id: &str, text: &str, refusal: bool) -> Value {
    let part = if refusal {
        json!({"type": "refusal", "refusal": text})
    } else {
        json!({"type": "output_text", "text": text, "annotations": []})
    };
    json!({
        "id": format!("msg_{id}"),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    })
}

fn call_item(id: &str, index: usize, call: &super::ToolCallSpec, arguments: &str) -> Value {
    json!({
        "id": format!("fc_{id}_{index}"),
        "type": "function_call",
        "status": "completed",
        "call_id": call.id,
        "name": call.name,
        "arguments": arguments,
    })
}

/// Every output item of the finished response, in order: reasoning, the
/// message, then the function calls.
fn output_items(c: &Completion, id: &str) -> Vec<Value> {
    let mut items: Vec<Value> = c
        .reasoning
        .iter()
        .enumerate()
        .map(|(i, (_, text))| reasoning_item(id, i, text))
        .collect();
    if let Some(text) = &c.content {
        items.push(message_item(id, text, c.refusal));
    }
    for (i, call) in c.tool_calls.iter().enumerate() {
        items.push(call_item(id, i, call, &call.arguments));
    }
    items
}

fn usage(c: &Completion, body_len: usize) -> Value {
    if !c.send_usage {
        return Value::Null;
    }
    let chat = c.usage_json(body_len);
    let input = chat["prompt_tokens"].as_u64().unwrap_or(0);
    let output = chat["completion_tokens"].as_u64().unwrap_or(0);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

fn is_incomplete(c: &Completion) -> bool {
    c.finish_reason.as_deref() == Some("length")
}

fn response_object(
    c: &Completion,
    model: &str,
    id: &str,
    status: &str,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    let incomplete = (status == "incomplete").then(|| json!({"reason": "max_output_tokens"}));
    json!({
        "id": format!("resp_{id}"),
        "object": "response",
        "created_at": unix_now(),
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "store": false,
        "usage": usage,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
        "reasoning": {"effort": if c.reasoning.is_empty() { Value::Null } else { json!("medium") }},
    })
}

pub(super) fn stream_chunks(
    c: &Completion,
    model: &str,
    id: &str,
    body_len: usize,
) -> Vec<SseChunk> {
    let mut events: Vec<Value> = Vec::new();
    let started = response_object(c, model, id, "in_progress", Vec::new(), Value::Null);
    events.push(json!({"type": "response.created", "response": started}));
    events.push(json!({"type": "response.in_progress", "response": started}));
    let mut index = 0;
    for (i, (_, text)) in c.reasoning.iter().enumerate() {
        let done = reasoning_item(id, i, text);
        let item_id = done["id"].clone();
        events.push(json!({
            "type": "response.output_item.added",
            "output_index": index,
            "item": {"id": item_id, "type": "reasoning", "summary": []},
        }));
        let at = json!({"item_id": item_id, "output_index": index, "summary_index": 0});
        let with = |kind: &str, extra: Value| {
            let mut e = at.clone();
            e["type"] = Value::from(kind);
            if let (Some(e), Some(extra)) = (e.as_object_mut(), extra.as_object()) {
                e.extend(extra.clone());
            }
            e
        };
        events.push(with(
            "response.reasoning_summary_part.added",
            json!({"part": {"type": "summary_text", "text": ""}}),
        ));
        for piece in pieces(text) {
            events.push(with(
                "response.reasoning_summary_text.delta",
                json!({"delta": piece}),
            ));
        }
        events.push(with(
            "response.reasoning_summary_text.done",
            json!({"text": text}),
        ));
        events.push(with(
            "response.reasoning_summary_part.done",
            json!({"part": {"type": "summary_text", "text": text}}),
        ));
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": done}),
        );
        index += 1;
    }
    if let Some(text) = &c.content {
        let done = message_item(id, text, c.refusal);
        let item_id = done["id"].clone();
        let (delta_kind, done_kind, empty_part) = if c.refusal {
            (
                "response.refusal.delta",
                "response.refusal.done",
                json!({"type": "refusal", "refusal": ""}),
            )
        } else {
            (
                "response.output_text.delta",
                "response.output_text.done",
                json!({"type": "output_text", "text": "", "annotations": []}),
            )
        };
        events.push(json!({
            "type": "response.output_item.added",
            "output_index": index,
            "item": {"id": item_id, "type": "message", "status": "in_progress",
                     "role": "assistant", "content": []},
        }));
        events.push(json!({
            "type": "response.content_part.added",
            "item_id": item_id, "output_index": index, "content_index": 0,
            "part": empty_part,
        }));
        for piece in pieces(text) {
            events.push(json!({
                "type": delta_kind,
                "item_id": item_id, "output_index": index, "content_index": 0,
                "delta": piece,
            }));
        }
        let mut finished = json!({
            "type": done_kind,
            "item_id": item_id, "output_index": index, "content_index": 0,
        });
        finished[if c.refusal { "refusal" } else { "text" }] = Value::from(text.as_str());
        events.push(finished);
        events.push(json!({
            "type": "response.content_part.done",
            "item_id": item_id, "output_index": index, "content_index": 0,
            "part": done["content"][0],
        }));
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": done}),
        );
        index += 1;
    }
    for (i, call) in c.tool_calls.iter().enumerate() {
        let done = call_item(id, i, call, &call.arguments);
        let mut added = call_item(id, i, call, "");
        added["status"] = Value::from("in_progress");
        let item_id = done["id"].clone();
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        );
        for piece in pieces(&call.arguments) {
            events.push(json!({
                "type": "response.function_call_arguments.delta",
                "item_id": item_id, "output_index": index, "delta": piece,
            }));
        }
        events.push(json!({
            "type": "response.function_call_arguments.done",
            "item_id": item_id, "output_index": index, "arguments": call.arguments,
        }));
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": done}),
        );
        index += 1;
    }
    if c.send_done {
        let (kind, status) = if is_incomplete(c) {
            ("response.incomplete", "incomplete")
        } else {
            ("response.completed", "completed")
        };
        let finished = response_object(
            c,
            model,
            id,
            status,
            output_items(c, id),
            usage(c, body_len),
        );
        events.push(json!({"type": kind, "response": finished}));
    }
    events
        .into_iter()
        .enumerate()
        .map(|(seq, mut e)| {
            e["sequence_number"] = Value::from(seq);
            let kind = e["type"].as_str().unwrap_or("").to_string();
            SseChunk::raw(format!("event: {kind}\ndata: {e}\n\n")).delay(c.chunk_delay)
        })
        .collect()
}

pub(super) fn response_json(c: &Completion, model: &str, id: &str, body_len: usize) -> Value {
    let status = if is_incomplete(c) {
        "incomplete"
    } else {
        "completed"
    };
    response_object(
        c,
        model,
        id,
        status,
        output_items(c, id),
        usage(c, body_len),
    )
}
