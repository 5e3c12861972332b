//! Chat Completions request/response types. They serialise straight to and from the
//! JSON the API speaks; fields we do not model are kept in `extra` and sent back
//! unchanged, because some providers (DeepSeek's `reasoning_content`, for one)
//! reject a tool-use turn whose metadata did not round-trip.

use super::image::Image;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// `Message::extra` key of a user message's form as the user typed it (`!git
/// status`), where the text the model gets was built from it (the command's
/// output, attached files). An empty form means the user saw nothing of the
/// message. The `buddy_` prefix keeps it out of every request: providers send
/// only what they know, and Chat Completions drops `buddy_*` keys.
pub const SHOWN_KEY: &str = "buddy_shown";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    /// Always serialised, as `null` when absent: an assistant message carrying tool
    /// calls must say `"content": null`, which several servers insist on. An
    /// array of parts (Mistral and others) is read as the text of its text parts.
    #[serde(default, deserialize_with = "content_text")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Images attached to a user message, by reference (their bytes are
    /// never serialised). The `buddy_` name keeps them out of a Chat
    /// Completions request as they are: each protocol sends them as its own
    /// image parts.
    #[serde(
        default,
        rename = "buddy_images",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub images: Vec<Image>,
    /// Provider-specific fields (reasoning traces and the like), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    fn new(role: Role, content: Option<String>) -> Self {
        Message {
            role,
            content,
            tool_calls: None,
            tool_call_id: None,
            name: None,
            images: Vec::new(),
            extra: Map::new(),
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, Some(text.into()))
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Some(text.into()))
    }

    /// A user message with `images` attached.
    pub fn user_with_images(text: impl Into<String>, images: Vec<Image>) -> Self {
        let mut m = Self::user(text);
        m.images = images;
        m
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, Some(text.into()))
    }

    pub fn tool_result(tool_call_id: impl Into<String>, text: impl Into<String>) -> Self {
        let mut m = Self::new(Role::Tool, Some(text.into()));
        m.tool_call_id = Some(tool_call_id.into());
        m
    }

    /// Tool calls of an assistant message; empty for every other message.
    pub fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }

    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }

    /// The message as the user typed it (`SHOWN_KEY`), when that differs
    /// from its text.
    pub fn shown(&self) -> Option<&str> {
        self.extra.get(SHOWN_KEY).and_then(Value::as_str)
    }

    /// Records `shown` as the form the user typed (see `SHOWN_KEY`).
    pub fn with_shown(mut self, shown: impl Into<String>) -> Self {
        self.extra
            .insert(SHOWN_KEY.into(), Value::String(shown.into()));
        self
    }

    /// Reasoning traces carried in provider-specific fields: any field whose name
    /// mentions reasoning, thinking or thought, rendered as text. When a plain
    /// text field carries the trace, structured twins of it (OpenRouter's
    /// `reasoning_details` beside `reasoning`) are not shown a second time.
    pub fn reasoning_traces(&self) -> Vec<(String, String)> {
        let has_text = self
            .extra
            .iter()
            .any(|(k, v)| is_reasoning_key(k) && v.as_str().is_some_and(|s| !s.trim().is_empty()));
        self.extra
            .iter()
            .filter(|(k, v)| is_reasoning_key(k) && (v.is_string() || !has_text))
            .filter_map(|(k, v)| {
                let text = value_to_text(v);
                (!text.trim().is_empty()).then(|| (k.clone(), text))
            })
            .collect()
    }

    /// Moves a refusal (OpenAI's `refusal` field) into the text when there is
    /// no other text: it is the answer the user gets, and the history's.
    /// Whether the message carried a refusal at all.
    pub fn adopt_refusal(&mut self) -> bool {
        let refused =
            matches!(self.extra.get("refusal"), Some(Value::String(r)) if !r.trim().is_empty());
        if refused && self.text().trim().is_empty() {
            if let Some(Value::String(r)) = self.extra.remove("refusal") {
                self.content = Some(r);
            }
        }
        refused
    }
}

/// Text and thinking of a content value: a string, or an array of parts
/// (`{"type":"text","text":…}`, `{"type":"thinking","thinking":…}`).
pub fn content_parts(value: &Value) -> (String, String) {
    match value {
        Value::String(s) => (s.clone(), String::new()),
        Value::Array(parts) => {
            let mut text = String::new();
            let mut thinking = String::new();
            for part in parts {
                match part {
                    Value::String(s) => text.push_str(s),
                    Value::Object(p) => {
                        let kind = p.get("type").and_then(Value::as_str).unwrap_or("text");
                        if kind.contains("thinking") || kind.contains("reasoning") {
                            let inner = p
                                .get("thinking")
                                .or_else(|| p.get("reasoning"))
                                .or_else(|| p.get("text"))
                                .map(value_to_text)
                                .unwrap_or_default();
                            thinking.push_str(&inner);
                        } else if let Some(t) = p.get("text").and_then(Value::as_str) {
                            text.push_str(t);
                        }
                    }
                    _ => {}
                }
            }
            (text, thinking)
        }
        _ => (String::new(), String::new()),
    }
}

fn content_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = Option::<Value>::deserialize(d)?;
    Ok(match value {
        None | Some(Value::Null) => None,
        Some(v @ (Value::String(_) | Value::Array(_))) => Some(content_parts(&v).0),
        Some(other) => {
            return Err(serde::de::Error::custom(format!(
                "content must be a string or an array of parts, not {other}"
            )))
        }
    })
}

pub fn is_reasoning_key(key: &str) -> bool {
    // Another protocol's round-trip data (`buddy_*`) is not a trace to show.
    if key.starts_with("buddy_") {
        return false;
    }
    let k = key.to_ascii_lowercase();
    k.contains("reasoning") || k.contains("thinking") || k.contains("thought")
}

/// Flattens a reasoning value (a string, or the nested objects some providers use)
/// into readable text.
pub fn value_to_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(value_to_text)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(map) => {
            for key in ["text", "content", "summary", "reasoning"] {
                if let Some(v) = map.get(key) {
                    let t = value_to_text(v);
                    if !t.is_empty() {
                        return t;
                    }
                }
            }
            String::new()
        }
        other => other.to_string(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn function_type() -> String {
    "function".to_string()
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_type(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
            extra: Map::new(),
        }
    }
}

/// `arguments` is a JSON document encoded as a string, exactly as the API sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDefinition,
}

impl ToolDefinition {
    pub fn function(name: &str, description: &str, parameters: Value) -> Self {
        ToolDefinition {
            kind: function_type(),
            function: FunctionDefinition {
                name: name.to_string(),
                description: description.to_string(),
                parameters,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDefinition {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// `M` is `Message`, or the JSON of messages rebuilt where they carry
/// images (`provider::completions`).
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest<'a, M = Message> {
    pub model: &'a str,
    pub messages: &'a [M],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// `{"type":"json_schema","json_schema":{…}}` for a structured answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChatResponse {
    #[serde(default)]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Choice {
    pub message: Message,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache (Anthropic
    /// `cache_read_input_tokens`, OpenAI `cached_tokens`); part of
    /// `prompt_tokens`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the cache (Anthropic
    /// `cache_creation_input_tokens`); part of `prompt_tokens`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One `data:` payload of a streamed completion.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatChunk {
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: Delta,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Delta {
    #[serde(default)]
    pub role: Option<Role>,
    /// Text, or an array of text and thinking parts.
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCallDelta {
    #[serde(default)]
    pub index: usize,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn assistant_tool_call_message_keeps_null_content() {
        let mut m = Message::new(Role::Assistant, None);
        m.tool_calls = Some(vec![ToolCall::new("c1", "time", "{}")]);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["content"], Value::Null);
        assert!(v.as_object().unwrap().contains_key("content"));
        assert_eq!(v["tool_calls"][0]["type"], "function");
    }

    #[test]
    fn unknown_fields_round_trip() {
        let raw =
            json!({"role":"assistant","content":"hi","reasoning_content":"think","x":{"a":1}});
        let m: Message = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(m.extra["reasoning_content"], "think");
        assert_eq!(serde_json::to_value(&m).unwrap(), raw);
        assert_eq!(
            m.reasoning_traces(),
            vec![("reasoning_content".into(), "think".into())]
        );
    }

    #[test]
    fn reasoning_keys_match_any_spelling() {
        assert!(is_reasoning_key("reasoning_content"));
        assert!(is_reasoning_key("Thinking"));
        assert!(is_reasoning_key("thoughts"));
        assert!(!is_reasoning_key("refusal"));
    }

    #[test]
    fn content_arrays_are_read_as_their_text_wherever_content_appears() {
        let m: Message = serde_json::from_value(json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"ponder"},{"type":"text","text":"a"},{"type":"text","text":"b"}]}))
        .unwrap();
        assert_eq!(m.text(), "ab");
        let bad = serde_json::from_value::<Message>(json!({"role":"user","content":5}));
        assert!(bad.is_err());
    }

    #[test]
    fn a_refusal_becomes_the_text_when_there_is_none() {
        let mut m: Message =
            serde_json::from_value(json!({"role":"assistant","content":null,"refusal":"No."}))
                .unwrap();
        assert!(m.adopt_refusal());
        assert_eq!(m.text(), "No.");
        assert!(!m.extra.contains_key("refusal"));
    }
}
