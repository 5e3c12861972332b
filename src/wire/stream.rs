//! Folds streamed Chat Completions chunks into one assistant message. Tool calls
//! arrive as deltas keyed by `index`: the id and name in the first fragment, the
//! arguments spread over many; content and reasoning arrive as text fragments.

use super::chat::{ChatChunk, Message, Role, ToolCall, Usage};
use serde_json::{Map, Value};

/// What one chunk contributed, for live rendering.
#[derive(Debug, Default, PartialEq)]
pub struct ChunkDelta {
    pub text: Option<String>,
    /// (field name, fragment) for reasoning-like fields.
    pub reasoning: Vec<(String, String)>,
}

#[derive(Debug, Default)]
pub struct StreamAccumulator {
    content: String,
    saw_content: bool,
    calls: Vec<PartialCall>,
    extra: Map<String, Value>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
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

    pub fn push(&mut self, chunk: ChatChunk) -> ChunkDelta {
        let mut out = ChunkDelta::default();
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        // Only the first choice matters: buddy never asks for n > 1.
        let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
            return out;
        };
        if let Some(r) = choice.finish_reason {
            self.finish_reason = Some(r);
        }
        let delta = choice.delta;
        if let Some(text) = delta.content {
            if !text.is_empty() {
                self.saw_content = true;
                self.content.push_str(&text);
                out.text = Some(text);
            }
        }
        for tc in delta.tool_calls.unwrap_or_default() {
            while self.calls.len() <= tc.index {
                self.calls.push(PartialCall::default());
            }
            let call = &mut self.calls[tc.index];
            if let Some(id) = tc.id {
                if call.id.is_empty() {
                    call.id = id;
                }
            }
            if let Some(f) = tc.function {
                if let Some(name) = f.name {
                    if call.name.is_empty() {
                        call.name = name;
                    } else if call.name != name {
                        call.name.push_str(&name);
                    }
                }
                if let Some(args) = f.arguments {
                    call.arguments.push_str(&args);
                }
            }
        }
        for (key, value) in delta.extra {
            match value {
                Value::Null => {}
                Value::String(fragment) => {
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
                    if super::chat::is_reasoning_key(&key) {
                        let text = super::chat::value_to_text(&other);
                        if !text.is_empty() {
                            out.reasoning.push((key.clone(), text));
                        }
                    }
                    self.extra.insert(key, other);
                }
            }
        }
        out
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
            .enumerate()
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
        m.extra = self.extra;
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(v: serde_json::Value) -> ChatChunk {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn tool_call_arguments_accumulate_by_index() {
        let mut acc = StreamAccumulator::new();
        acc.push(chunk(json!({"choices":[{"index":0,"delta":{"role":"assistant","content":null,
            "tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"read_file","arguments":""}}]}}]})));
        acc.push(chunk(json!({"choices":[{"index":0,"delta":{
            "tool_calls":[{"index":1,"id":"b","function":{"name":"time","arguments":"{}"}}]}}]})));
        for frag in ["{\"pa", "th\":", " \"x.txt\"}"] {
            acc.push(chunk(json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":frag}}]}}]})));
        }
        acc.push(chunk(
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
        ));
        acc.push(chunk(json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}})));
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
        let d = acc.push(chunk(
            json!({"choices":[{"index":0,"delta":{"reasoning_content":"Let "}}]}),
        ));
        assert_eq!(
            d.reasoning,
            vec![("reasoning_content".to_string(), "Let ".to_string())]
        );
        acc.push(chunk(
            json!({"choices":[{"index":0,"delta":{"reasoning_content":"me think"}}]}),
        ));
        let d = acc.push(chunk(
            json!({"choices":[{"index":0,"delta":{"content":"42"}}]}),
        ));
        assert_eq!(d.text.as_deref(), Some("42"));
        let m = acc.finish();
        assert_eq!(m.extra["reasoning_content"], "Let me think");
        assert_eq!(m.text(), "42");
    }
}
