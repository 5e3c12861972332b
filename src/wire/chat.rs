//! Chat Completions request/response types. They serialise straight to and from the
//! JSON the API speaks; fields we do not model are kept in `extra` and sent back
//! unchanged, because some providers (DeepSeek's `reasoning_content`, for one)
//! reject a tool-use turn whose metadata did not round-trip.

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    /// Always serialised, as `null` when absent: an assistant message carrying tool
    /// calls must say `"content": null`, which several servers insist on.
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
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
            extra: Map::new(),
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, Some(text.into()))
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Some(text.into()))
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

    /// Reasoning traces carried in provider-specific fields: any field whose name
    /// mentions reasoning, thinking or thought, rendered as text.
    pub fn reasoning_traces(&self) -> Vec<(String, String)> {
        self.extra
            .iter()
            .filter(|(k, _)| is_reasoning_key(k))
            .filter_map(|(k, v)| {
                let text = value_to_text(v);
                (!text.trim().is_empty()).then(|| (k.clone(), text))
            })
            .collect()
    }
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

#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<&'a [ToolDefinition]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
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
    #[serde(default)]
    pub content: Option<String>,
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
}
