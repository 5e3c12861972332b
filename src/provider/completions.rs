//! The Chat Completions protocol: `POST {base}/chat/completions`, streaming by
//! default (SSE, with usage in the last chunk), plain JSON for servers without
//! streaming. The history is already in this protocol's shape; only fields other
//! protocols keep for themselves (`buddy_*`) are left out.

use super::http::{decode_body, encode_body, ClientSettings, Flow, Protocol, StreamParser};
use super::{ApiError, EventSink, ModelRequest, ModelResponse, StreamEvent};
use crate::provider::error::error_message_from_body;
use crate::wire::sse::SseEvent;
use crate::wire::stream::StreamAccumulator;
use crate::wire::{ChatChunk, ChatRequest, ChatResponse, Message, StreamOptions};

/// Prefix of `Message::extra` keys that belong to another protocol's
/// round-trip data and must not be sent to a Chat Completions server.
pub const PRIVATE_PREFIX: &str = "buddy_";

pub struct Completions;

impl Protocol for Completions {
    fn path(&self) -> &'static str {
        "/chat/completions"
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
        let private = request
            .messages
            .iter()
            .any(|m| m.extra.keys().any(|k| k.starts_with(PRIVATE_PREFIX)));
        let cleaned: Vec<Message>;
        let messages = if private {
            cleaned = request
                .messages
                .iter()
                .map(|m| {
                    let mut m = m.clone();
                    m.extra.retain(|k, _| !k.starts_with(PRIVATE_PREFIX));
                    m
                })
                .collect();
            &cleaned[..]
        } else {
            request.messages
        };
        let body = ChatRequest {
            model: &s.model,
            messages,
            tools: (!request.tools.is_empty()).then_some(request.tools),
            temperature: s.temperature,
            top_p: s.top_p,
            stream: s.stream,
            stream_options: s.stream.then_some(StreamOptions {
                include_usage: true,
            }),
        };
        encode_body(&body)
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(ChunkParser {
            acc: StreamAccumulator::new(),
        })
    }

    fn parse_json(&self, body: &[u8], on_event: EventSink<'_>) -> Result<ModelResponse, ApiError> {
        let raw: serde_json::Value = decode_body(body, "a chat completion")?;
        // Thinking parts of a content array are shown, not kept as text.
        let thinking = raw
            .pointer("/choices/0/message/content")
            .map(crate::wire::chat::content_parts)
            .map(|(_, t)| t)
            .unwrap_or_default();
        let parsed: ChatResponse = serde_json::from_value(raw)
            .map_err(|e| ApiError::InvalidResponse(format!("not a chat completion ({e})")))?;
        let Some(mut choice) = parsed.choices.into_iter().next() else {
            return Err(ApiError::InvalidResponse(
                "the response has no choices".into(),
            ));
        };
        choice.message.adopt_refusal();
        if !thinking.is_empty() {
            on_event(StreamEvent::Reasoning {
                field: "thinking".into(),
                text: thinking,
            });
        }
        for (field, text) in choice.message.reasoning_traces() {
            on_event(StreamEvent::Reasoning { field, text });
        }
        Ok(ModelResponse {
            message: choice.message,
            usage: parsed.usage,
            cut_off: (choice.finish_reason.as_deref() == Some("length"))
                .then(|| "finish_reason: length".to_string()),
        })
    }
}

struct ChunkParser {
    acc: StreamAccumulator,
}

/// A chunk parsed in one pass, straight into its fields (most of a stream's
/// parsing time went into building a `Value` of each chunk first).
#[derive(serde::Deserialize)]
struct Frame {
    #[serde(default)]
    error: Present,
    #[serde(default)]
    choices: Vec<crate::wire::chat::ChunkChoice>,
    #[serde(default)]
    usage: Option<crate::wire::Usage>,
}

/// Whether a field was there at all, even as `null`.
#[derive(Default)]
struct Present(bool);

impl<'de> serde::Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Present(true))
    }
}

/// A chunk that carries an error, or did not parse as one: the error.
fn slow_chunk(data: &str) -> Result<ChatChunk, ApiError> {
    let value: serde_json::Value = serde_json::from_str(data)
        .map_err(|e| ApiError::InvalidResponse(format!("malformed stream chunk ({e})")))?;
    if value.get("error").is_some() {
        let msg = crate::provider::error::error_message(&value)
            .unwrap_or_else(|| error_message_from_body(data));
        return Err(crate::provider::error::stream_error(&value, msg));
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::InvalidResponse(format!("unexpected stream chunk ({e})")))
}

impl StreamParser for ChunkParser {
    fn event(&mut self, ev: &SseEvent, on_event: EventSink<'_>) -> Result<Flow, ApiError> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::More);
        }
        let chunk = match serde_json::from_str::<Frame>(data) {
            Ok(Frame {
                error: Present(false),
                choices,
                usage,
            }) => ChatChunk { choices, usage },
            // Errors, and chunks that do not fit, take the slower path
            // through a `Value`, which has the whole body for the message.
            _ => slow_chunk(data)?,
        };
        let delta = self
            .acc
            .push(chunk)
            .map_err(|e| ApiError::InvalidResponse(e.to_string()))?;
        if let Some(text) = delta.text {
            on_event(StreamEvent::Text(text));
        }
        for (field, text) in delta.reasoning {
            on_event(StreamEvent::Reasoning { field, text });
        }
        Ok(Flow::More)
    }

    fn finish(self: Box<Self>, ended_cleanly: bool) -> Result<ModelResponse, ApiError> {
        // Some servers end with a finish reason and close without `[DONE]`.
        if !ended_cleanly && self.acc.finish_reason().is_none() {
            return Err(ApiError::StreamInterrupted(
                "connection closed before the response was complete".to_string(),
            ));
        }
        // `[DONE]` alone is no answer: saving it would put an empty
        // assistant message in the history.
        if self.acc.is_empty() && self.acc.finish_reason().is_none() {
            return Err(ApiError::InvalidResponse(
                "the server ended the stream without a reply".to_string(),
            ));
        }
        let usage = self.acc.usage();
        let cut_off = (self.acc.finish_reason() == Some("length"))
            .then(|| "finish_reason: length".to_string());
        Ok(ModelResponse {
            message: self.acc.finish(),
            usage,
            cut_off,
        })
    }

    fn answer_bytes(&self) -> usize {
        self.acc.answer_bytes()
    }
}
