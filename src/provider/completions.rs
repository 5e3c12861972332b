//! The Chat Completions protocol: `POST {base}/chat/completions`, streaming by
//! default (SSE, with usage in the last chunk), plain JSON for servers without
//! streaming. The history is already in this protocol's shape; only fields other
//! protocols keep for themselves (`buddy_*`) are left out.

use super::http::{decode_body, encode_body, ClientSettings, Flow, Protocol, StreamParser};
use super::{ApiError, EventSink, ModelRequest, ModelResponse, StreamEvent};
use crate::provider::error::error_message_from_body;
use crate::wire::sse::SseEvent;
use crate::wire::stream::{StreamAccumulator, TextDelta};
use crate::wire::{ChatChunk, ChatRequest, ChatResponse, Message, StreamOptions};
use std::borrow::Cow;

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

/// A chunk whose choices hold text and nothing else that needs keeping:
/// every other field of a delta (tool calls, reasoning, anything unknown)
/// fails the parse, and the chunk takes [`Frame`]'s path instead.
#[derive(serde::Deserialize)]
struct TextFrame<'a> {
    #[serde(default)]
    error: Present,
    #[serde(default, borrow)]
    choices: Vec<TextChoice<'a>>,
    #[serde(default)]
    usage: Option<crate::wire::Usage>,
}

#[derive(serde::Deserialize)]
struct TextChoice<'a> {
    #[serde(default)]
    index: u32,
    #[serde(default, borrow)]
    delta: TextOnly<'a>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TextOnly<'a> {
    #[serde(default)]
    #[allow(dead_code)]
    role: Option<crate::wire::Role>,
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    refusal: Option<Cow<'a, str>>,
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
        // Most chunks are text alone: taken without building anything else.
        if let Ok(TextFrame {
            error: Present(false),
            choices,
            usage,
        }) = serde_json::from_str::<TextFrame>(data)
        {
            let first = choices.iter().find(|c| c.index == 0).map(|c| TextDelta {
                text: c.delta.content.as_deref().unwrap_or(""),
                refusal: c.delta.refusal.as_deref(),
                finish_reason: c.finish_reason.as_deref(),
            });
            if let Some(text) = self.acc.push_text(usage, first).text {
                on_event(StreamEvent::Text(text));
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// What a stream of chunks comes to: the texts shown, the message, the
    /// usage, the finish reason and the bytes counted.
    type Outcome = (
        Vec<String>,
        Message,
        Option<crate::wire::Usage>,
        Option<String>,
        usize,
    );

    /// Through the parser, which takes the text-only path where it can.
    fn parsed(chunks: &[&str]) -> Outcome {
        let mut parser = ChunkParser {
            acc: StreamAccumulator::new(),
        };
        let shown = Mutex::new(Vec::new());
        let sink = |e: StreamEvent| {
            if let StreamEvent::Text(t) = e {
                shown.lock().unwrap().push(t);
            }
        };
        for c in chunks {
            let ev = SseEvent {
                event: None,
                data: c.to_string(),
            };
            parser.event(&ev, &sink).unwrap();
        }
        let acc = parser.acc;
        let reason = acc.finish_reason().map(str::to_string);
        let (usage, bytes) = (acc.usage(), acc.answer_bytes());
        (
            shown.into_inner().unwrap(),
            acc.finish(),
            usage,
            reason,
            bytes,
        )
    }

    /// Every chunk through the general path.
    fn general(chunks: &[&str]) -> Outcome {
        let mut acc = StreamAccumulator::new();
        let mut shown = Vec::new();
        for c in chunks {
            let chunk: ChatChunk = serde_json::from_str(c).unwrap();
            if let Some(t) = acc.push(chunk).unwrap().text {
                shown.push(t);
            }
        }
        let reason = acc.finish_reason().map(str::to_string);
        let (usage, bytes) = (acc.usage(), acc.answer_bytes());
        (shown, acc.finish(), usage, reason, bytes)
    }

    #[test]
    fn the_text_only_path_gives_what_the_general_path_gives() {
        let streams: &[&[&str]] = &[
            // OpenAI's usual shape: role and empty text first, refusal null.
            &[
                r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#,
                r#"{"id":"c","choices":[{"index":0,"delta":{"content":"lo \"q\" \u00e9"},"finish_reason":null}]}"#,
                r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                r#"{"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
            ],
            // A refusal is the answer; a second choice is ignored.
            &[
                r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"refusal":"I can't"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}"#,
            ],
            // Mixed with chunks only the general path takes: reasoning, tool calls.
            &[
                r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"run_shell","arguments":"{}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"b"}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"c","x_extra":1},"finish_reason":"tool_calls"}]}"#,
            ],
        ];
        for chunks in streams {
            assert_eq!(parsed(chunks), general(chunks), "{chunks:?}");
        }
    }
}
