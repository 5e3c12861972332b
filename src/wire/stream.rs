//! Folds streamed Chat Completions chunks into one assistant message. Tool calls
//! arrive as deltas keyed by `index`: the id and name in the first fragment, the
//! arguments spread over many; content and reasoning arrive as text fragments.

use super::chat::{ChatChunk, Message, Role, ToolCall, Usage};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Most tool calls one reply may make. Far above what a model does in one
/// turn; the server's `index` is only a key, so a huge one costs nothing, but
/// the number of distinct keys is what memory grows with.
pub const MAX_TOOL_CALLS: usize = 128;

/// A reply that asks for more than [`MAX_TOOL_CALLS`] tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the reply has more than {limit} tool calls")]
pub struct TooManyToolCalls {
    pub limit: usize,
}

/// The reason a Chat Completions answer counts as a refusal: the model's
/// `refusal` text, or `finish_reason: content_filter` (the provider withheld
/// the answer).
pub fn refusal_reason(refused: bool, finish_reason: Option<&str>) -> Option<String> {
    if finish_reason == Some("content_filter") {
        Some("finish_reason: content_filter".to_string())
    } else if refused {
        Some("refusal".to_string())
    } else {
        None
    }
}

/// What one chunk contributed, for live rendering.
#[derive(Debug, Default, PartialEq)]
pub struct ChunkDelta {
    pub text: Option<String>,
    /// (field name, fragment) for reasoning-like fields.
    pub reasoning: Vec<(String, String)>,
}

/// The first choice of a chunk that holds only text (see
/// [`StreamAccumulator::push_text`]).
#[derive(Debug, Clone, Copy)]
pub struct TextDelta<'a> {
    pub text: &'a str,
    /// A refusal is the answer: shown and kept as the message's text.
    pub refusal: Option<&'a str>,
    pub finish_reason: Option<&'a str>,
}

#[derive(Debug, Default)]
pub struct StreamAccumulator {
    content: String,
    saw_content: bool,
    /// Calls by the server's `index` (any number: a map, not a vector).
    calls: BTreeMap<usize, PartialCall>,
    extra: Map<String, Value>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    /// A plain text reasoning field was seen: structured twins are not shown.
    saw_text_reasoning: bool,
    /// A non-empty `refusal` was part of the text.
    refused: bool,
    /// Bytes of answer held: text, reasoning, tool names, ids and arguments.
    bytes: usize,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl StreamAccumulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// [`Self::push`] for the common chunk, whose first choice carries text
    /// and nothing else that needs keeping: the same result, without
    /// building the chunk's maps and values first.
    pub fn push_text(&mut self, usage: Option<Usage>, first: Option<TextDelta<'_>>) -> ChunkDelta {
        let mut out = ChunkDelta::default();
        if let Some(u) = usage {
            self.usage = Some(u);
        }
        let Some(first) = first else {
            return out;
        };
        if let Some(r) = first.finish_reason {
            self.finish_reason = Some(r.to_string());
        }
        let refusal = first.refusal.unwrap_or("");
        self.refused |= !refusal.is_empty();
        self.bytes += first.text.len() + refusal.len();
        if !first.text.is_empty() || !refusal.is_empty() {
            let text = [first.text, refusal].concat();
            self.saw_content = true;
            self.content.push_str(&text);
            out.text = Some(text);
        }
        out
    }

    /// Folds in one chunk. A chunk that would make the reply's tool calls
    /// more than [`MAX_TOOL_CALLS`] is refused.
    pub fn push(&mut self, chunk: ChatChunk) -> Result<ChunkDelta, TooManyToolCalls> {
        let mut out = ChunkDelta::default();
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        // Only the first choice matters: buddy never asks for n > 1.
        let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
            return Ok(out);
        };
        if let Some(r) = choice.finish_reason {
            self.finish_reason = Some(r);
        }
        let mut delta = choice.delta;
        let (mut text, thinking) = delta
            .content
            .as_ref()
            .map(super::chat::content_parts)
            .unwrap_or_default();
        // A refusal is the answer: shown and kept as the message's text.
        if let Some(Value::String(refusal)) = delta.extra.remove("refusal") {
            self.refused |= !refusal.is_empty();
            text.push_str(&refusal);
        }
        self.bytes += text.len() + thinking.len();
        if !text.is_empty() {
            self.saw_content = true;
            self.content.push_str(&text);
            out.text = Some(text);
        }
        if !thinking.is_empty() {
            out.reasoning.push(("thinking".to_string(), thinking));
        }
        if delta.extra.iter().any(|(k, v)| {
            super::chat::is_reasoning_key(k) && v.as_str().is_some_and(|s| !s.is_empty())
        }) {
            self.saw_text_reasoning = true;
        }
        for tc in delta.tool_calls.unwrap_or_default() {
            if !self.calls.contains_key(&tc.index) && self.calls.len() >= MAX_TOOL_CALLS {
                return Err(TooManyToolCalls {
                    limit: MAX_TOOL_CALLS,
                });
            }
            let call = self.calls.entry(tc.index).or_default();
            if let Some(id) = tc.id {
                self.bytes += id.len();
                if call.id.is_empty() {
                    call.id = id;
                }
            }
            if let Some(f) = tc.function {
                if let Some(name) = f.name {
                    self.bytes += name.len();
                    if call.name.is_empty() {
                        call.name = name;
                    } else if call.name != name {
                        call.name.push_str(&name);
                    }
                }
                if let Some(args) = f.arguments {
                    self.bytes += args.len();
                    call.arguments.push_str(&args);
                }
            }
        }
        for (key, value) in delta.extra {
            match value {
                Value::Null => {}
                Value::String(fragment) => {
                    self.bytes += fragment.len();
                    if super::chat::is_reasoning_key(&key) && !fragment.is_empty() {
                        out.reasoning.push((key.clone(), fragment.clone()));
                    }
                    match self.extra.get_mut(&key) {
                        Some(Value::String(existing)) => existing.push_str(&fragment),
                        _ => {
                            self.extra.insert(key, Value::String(fragment));
                        }
                    }
                }
                other => {
                    self.bytes += json_size(&other);
                    if super::chat::is_reasoning_key(&key) && !self.saw_text_reasoning {
                        let text = super::chat::value_to_text(&other);
                        if !text.is_empty() {
                            out.reasoning.push((key.clone(), text));
                        }
                    }
                    // Structured fields stream as arrays of fragments: keep them all.
                    match (self.extra.get_mut(&key), other) {
                        (Some(Value::Array(existing)), Value::Array(more)) => existing.extend(more),
                        (_, other) => {
                            self.extra.insert(key, other);
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Bytes of answer received so far (text, reasoning, tool calls, other
    /// fields), for the caller's cap on the size of a reply.
    pub fn answer_bytes(&self) -> usize {
        self.bytes
    }

    /// Why the model declined, when it did: a refusal in the text, or the
    /// content filter stopping the answer.
    pub fn refusal(&self) -> Option<String> {
        refusal_reason(self.refused, self.finish_reason.as_deref())
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    pub fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }

    /// True once anything at all arrived (text, calls or extra fields).
    pub fn is_empty(&self) -> bool {
        !self.saw_content && self.calls.is_empty() && self.extra.is_empty()
    }

    /// The complete assistant message. Tool calls without an id get a generated
    /// one so that results can always be paired.
    pub fn finish(self) -> Message {
        let calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .filter(|(_, c)| !c.name.is_empty() || !c.arguments.is_empty() || !c.id.is_empty())
            .map(|(i, c)| {
                let id = if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                };
                ToolCall::new(id, c.name, c.arguments)
            })
            .collect();
        let mut extra = self.extra;
        if let Some(Value::Array(items)) = extra.get_mut("reasoning_details") {
            *items = merge_fragments(std::mem::take(items));
        }
        let mut m = Message::assistant(String::new());
        m.role = Role::Assistant;
        m.content = if self.saw_content || calls.is_empty() {
            Some(self.content)
        } else {
            None
        };
        if !calls.is_empty() {
            m.tool_calls = Some(calls);
        }
        m.extra = extra;
        m
    }
}

/// The length of `v` as compact JSON, without building the text.
fn json_size(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|i| json_size(i) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + json_size(v))
                .sum::<usize>()
        }
    }
}

/// Joins streamed fragments of one structured item (same `index` and `type`)
/// into one: their text fields concatenated, other fields from the last that
/// had them (a signature comes at the end), so the item round-trips whole.
fn merge_fragments(items: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for item in items {
        let same = |a: &Value, b: &Value| {
            a.get("index").is_some()
                && a.get("index") == b.get("index")
                && a.get("type") == b.get("type")
        };
        match out.last_mut() {
            Some(Value::Object(last)) if same(&Value::Object(last.clone()), &item) => {
                if let Value::Object(fields) = item {
                    for (k, v) in fields {
                        match (last.get_mut(&k), v) {
                            (Some(Value::String(a)), Value::String(b))
                                if matches!(k.as_str(), "text" | "summary" | "data") =>
                            {
                                a.push_str(&b)
                            }
                            (_, Value::Null) => {}
                            (_, v) => {
                                last.insert(k, v);
                            }
                        }
                    }
                }
            }
            _ => out.push(item),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(v: serde_json::Value) -> ChatChunk {
        serde_json::from_value(v).unwrap()
    }

    fn push(acc: &mut StreamAccumulator, c: ChatChunk) -> ChunkDelta {
        acc.push(c).unwrap()
    }

    #[test]
    fn a_huge_index_is_a_key_not_an_allocation() {
        let mut acc = StreamAccumulator::new();
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{
            "tool_calls":[{"index":1_000_000_000usize,"id":"far","function":{"name":"time","arguments":"{}"}}]}}]})),
        );
        let m = acc.finish();
        assert_eq!(m.calls().len(), 1);
        assert_eq!(m.calls()[0].id, "far");
    }

    #[test]
    fn more_tool_calls_than_the_cap_are_refused() {
        let mut acc = StreamAccumulator::new();
        let call = |i: usize| {
            chunk(json!({"choices":[{"index":0,"delta":{
                "tool_calls":[{"index":i * 1000,"function":{"name":"time","arguments":"{}"}}]}}]}))
        };
        for i in 0..MAX_TOOL_CALLS {
            acc.push(call(i)).unwrap();
        }
        // More fragments of a known call are fine; a new call is not.
        acc.push(call(0)).unwrap();
        assert_eq!(
            acc.push(call(MAX_TOOL_CALLS)),
            Err(TooManyToolCalls {
                limit: MAX_TOOL_CALLS
            })
        );
        assert_eq!(
            TooManyToolCalls { limit: 128 }.to_string(),
            "the reply has more than 128 tool calls"
        );
    }

    #[test]
    fn answer_bytes_count_text_reasoning_and_arguments() {
        let mut acc = StreamAccumulator::new();
        push(
            &mut acc,
            chunk(
                json!({"choices":[{"index":0,"delta":{"content":"abc","reasoning_content":"de"}}]}),
            ),
        );
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{
            "tool_calls":[{"index":0,"function":{"name":"time","arguments":"{}"}}]}}]})),
        );
        assert_eq!(acc.answer_bytes(), 3 + 2 + 4 + 2);
    }

    #[test]
    fn tool_call_arguments_accumulate_by_index() {
        let mut acc = StreamAccumulator::new();
        push(
            &mut acc,
            chunk(
                json!({"choices":[{"index":0,"delta":{"role":"assistant","content":null,
            "tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}),
            ),
        );
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{
            "tool_calls":[{"index":1,"id":"b","function":{"name":"time","arguments":"{}"}}]}}]})),
        );
        for frag in ["{\"pa", "th\":", " \"x.txt\"}"] {
            push(
                &mut acc,
                chunk(
                    json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":frag}}]}}]}),
                ),
            );
        }
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})),
        );
        push(
            &mut acc,
            chunk(
                json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}),
            ),
        );
        assert_eq!(acc.usage().unwrap().total_tokens, 15);
        let m = acc.finish();
        assert_eq!(m.content, None);
        let calls = m.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "a");
        assert_eq!(calls[0].function.arguments, "{\"path\": \"x.txt\"}");
        assert_eq!(calls[1].function.name, "time");
    }

    #[test]
    fn reasoning_fragments_concatenate_and_surface() {
        let mut acc = StreamAccumulator::new();
        let d = push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{"reasoning_content":"Let "}}]})),
        );
        assert_eq!(
            d.reasoning,
            vec![("reasoning_content".to_string(), "Let ".to_string())]
        );
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{"reasoning_content":"me think"}}]})),
        );
        let d = push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{"content":"42"}}]})),
        );
        assert_eq!(d.text.as_deref(), Some("42"));
        let m = acc.finish();
        assert_eq!(m.extra["reasoning_content"], "Let me think");
        assert_eq!(m.text(), "42");
    }

    #[test]
    fn plain_text_is_no_refusal_and_a_content_filter_is_one() {
        let mut acc = StreamAccumulator::new();
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{"content":"hi","refusal":null}}]})),
        );
        assert_eq!(acc.refusal(), None);
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]})),
        );
        assert_eq!(
            acc.refusal().as_deref(),
            Some("finish_reason: content_filter")
        );
    }

    #[test]
    fn a_refusal_is_the_answer() {
        let mut acc = StreamAccumulator::new();
        let d = push(
            &mut acc,
            chunk(
                json!({"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":"I can't "}}]}),
            ),
        );
        assert_eq!(d.text.as_deref(), Some("I can't "));
        push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{"refusal":"help with that."}}]})),
        );
        assert_eq!(acc.refusal().as_deref(), Some("refusal"));
        let m = acc.finish();
        assert_eq!(m.text(), "I can't help with that.");
        assert!(!m.extra.contains_key("refusal"));
    }

    #[test]
    fn content_arrays_split_into_text_and_thinking() {
        let mut acc = StreamAccumulator::new();
        let d = push(
            &mut acc,
            chunk(json!({"choices":[{"index":0,"delta":{"content":[
            {"type":"thinking","thinking":[{"type":"text","text":"Hmm, "}]},
            {"type":"text","text":"Paris"}]}}]})),
        );
        assert_eq!(d.text.as_deref(), Some("Paris"));
        assert_eq!(
            d.reasoning,
            vec![("thinking".to_string(), "Hmm, ".to_string())]
        );
        let m = acc.finish();
        assert_eq!(m.text(), "Paris");
    }

    #[test]
    fn one_thought_in_two_fields_is_shown_once_and_kept_whole() {
        let mut acc = StreamAccumulator::new();
        for frag in ["This ", "is it"] {
            let d = push(
                &mut acc,
                chunk(json!({"choices":[{"index":0,"delta":{
                "reasoning": frag,
                "reasoning_details":[{"type":"reasoning.text","text":frag,"index":0,"format":"x"}]}}]})),
            );
            assert_eq!(
                d.reasoning,
                vec![("reasoning".to_string(), frag.to_string())]
            );
        }
        let m = acc.finish();
        assert_eq!(m.extra["reasoning"], "This is it");
        assert_eq!(
            m.extra["reasoning_details"],
            json!([{"type":"reasoning.text","text":"This is it","index":0,"format":"x"}])
        );
        assert_eq!(m.reasoning_traces().len(), 1);
    }
}
