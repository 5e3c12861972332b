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
use serde_json::{json, Value};
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
        let images = request.messages.iter().any(|m| !m.images.is_empty());
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
        let tools =
            match request.tools.is_empty() {
                true => None,
                false => Some(request.tools.chat_json().map_err(|e| {
                    ApiError::InvalidResponse(format!("cannot encode request: {e}"))
                })?),
            };
        let stream_options = s.stream.then_some(StreamOptions {
            include_usage: true,
        });
        let response_format = request.output.map(|o| {
            json!({"type": "json_schema", "json_schema": {
                "name": o.name(),
                "schema": o.schema(),
                "strict": true,
            }})
        });
        if images {
            // Only a request with images is rebuilt as JSON; every other
            // one is encoded exactly as before.
            let with_parts = messages
                .iter()
                .map(with_image_parts)
                .collect::<Result<Vec<Value>, ApiError>>()?;
            return encode_body(&ChatRequest {
                model: &s.model,
                messages: &with_parts[..],
                tools,
                temperature: s.temperature,
                top_p: s.top_p,
                stream: s.stream,
                stream_options,
                response_format,
            });
        }
        let body = ChatRequest {
            model: &s.model,
            messages,
            tools,
            temperature: s.temperature,
            top_p: s.top_p,
            stream: s.stream,
            stream_options,
            response_format,
        };
        encode_body(&body)
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(ChunkParser {
            acc: StreamAccumulator::new(),
            shape: None,
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
        let refused = choice.message.adopt_refusal();
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
            refusal: crate::wire::stream::refusal_reason(refused, choice.finish_reason.as_deref()),
        })
    }
}

/// `m` as JSON; with images, its content is an array of `image_url` parts
/// (data URLs) followed by its text, and the references themselves stay out.
fn with_image_parts(m: &Message) -> Result<Value, ApiError> {
    let mut v = serde_json::to_value(m)
        .map_err(|e| ApiError::InvalidResponse(format!("cannot encode the request ({e})")))?;
    if m.images.is_empty() {
        return Ok(v);
    }
    let mut parts: Vec<Value> = m
        .images
        .iter()
        .map(|img| match img.data_url() {
            Some(url) => json!({"type": "image_url", "image_url": {"url": url}}),
            None => json!({"type": "text", "text": img.missing_text()}),
        })
        .collect();
    if !m.text().is_empty() {
        parts.push(json!({"type": "text", "text": m.text()}));
    }
    if let Value::Object(o) = &mut v {
        o.remove("buddy_images");
        o.insert("content".into(), Value::Array(parts));
    }
    Ok(v)
}

struct ChunkParser {
    acc: StreamAccumulator,
    /// The bytes around the text of the last plain text chunk (see
    /// [`Shape`]), to take the next one's text without parsing it.
    shape: Option<Shape>,
}

/// A text-only chunk cut around its text: what comes before the text's
/// first character and after its closing quote. Servers repeat everything
/// else (id, model, timestamps, `"finish_reason":null`) byte for byte, so
/// most chunks of a stream differ from the last one only there.
///
/// Kept only from a chunk that parsed as one choice of index 0 with unescaped
/// text and nothing else that counts (no finish reason, usage, refusal or
/// error). A later chunk with the same prefix and suffix, whose middle holds
/// no quote, backslash or control character, is then the same JSON with
/// other text: parsing it would give exactly that text.
struct Shape {
    prefix: String,
    suffix: String,
}

impl Shape {
    /// The text of `data` when it has this shape.
    fn text_of<'a>(&self, data: &'a str) -> Option<&'a str> {
        let middle = data
            .strip_prefix(self.prefix.as_str())?
            .strip_suffix(self.suffix.as_str())?;
        let plain = !middle.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20);
        plain.then_some(middle)
    }

    /// The shape of `data`, whose single choice's text `text` borrows from it.
    fn of(data: &str, text: &str) -> Option<Shape> {
        if text.is_empty() {
            return None;
        }
        // Only for text borrowed from `data` itself (no escapes were undone).
        let start = (text.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
        let end = start.checked_add(text.len())?;
        if end > data.len() || !data.get(..start)?.ends_with('"') {
            return None;
        }
        Some(Shape {
            prefix: data[..start].to_string(),
            suffix: data[end..].to_string(),
        })
    }
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
    finish_reason: Option<Text<'a>>,
}

#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TextOnly<'a> {
    #[serde(default)]
    #[allow(dead_code)]
    role: Option<crate::wire::Role>,
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    refusal: Option<Text<'a>>,
}

/// A JSON string, borrowed from the chunk when it has no escapes. (Serde's
/// own `Cow` always copies inside an `Option`.)
struct Text<'a>(Cow<'a, str>);

impl Text<'_> {
    fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(Visit).map(Text)
    }
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
        // The same chunk as the last one but for its text: no parsing.
        if let Some(text) = self.shape.as_ref().and_then(|s| s.text_of(data)) {
            let first = TextDelta {
                text,
                refusal: None,
                finish_reason: None,
            };
            if let Some(text) = self.acc.push_text(None, Some(first)).text {
                on_event(StreamEvent::Text(text));
            }
            return Ok(Flow::More);
        }
        // Most chunks are text alone: taken without building anything else.
        if let Ok(TextFrame {
            error: Present(false),
            choices,
            usage,
        }) = serde_json::from_str::<TextFrame>(data)
        {
            self.shape = match (choices.as_slice(), &usage) {
                ([only], None)
                    if only.index == 0
                        && only.finish_reason.is_none()
                        && only.delta.refusal.is_none() =>
                {
                    match &only.delta.content {
                        Some(Text(Cow::Borrowed(text))) => Shape::of(data, text),
                        _ => None,
                    }
                }
                _ => None,
            };
            let first = choices.iter().find(|c| c.index == 0).map(|c| TextDelta {
                text: c.delta.content.as_ref().map_or("", Text::as_str),
                refusal: c.delta.refusal.as_ref().map(Text::as_str),
                finish_reason: c.finish_reason.as_ref().map(Text::as_str),
            });
            if let Some(text) = self.acc.push_text(usage, first).text {
                on_event(StreamEvent::Text(text));
            }
            return Ok(Flow::More);
        }
        self.shape = None;
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
        let refusal = self.acc.refusal();
        Ok(ModelResponse {
            message: self.acc.finish(),
            usage,
            cut_off,
            refusal,
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
            shape: None,
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

    /// A stream as servers send it: every chunk the same but for its text.
    /// Taken by shape after the first, and still exactly what parsing gives,
    /// including when the text needs unescaping or the shape changes.
    #[test]
    fn chunks_of_the_same_shape_give_what_parsing_gives() {
        let chunk = |text: &str| {
            format!(
                r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":"{text}"}},"logprobs":null,"finish_reason":null}}]}}"#
            )
        };
        let owned: Vec<String> = vec![
            chunk("Hel"),
            chunk("lo, "),
            chunk("wörld 漢字 🦀"),
            chunk(r#"a \"quote\""#),
            chunk(r#"back\\slash \n newline \u00e9"#),
            chunk(" plain again"),
            chunk(""),
            chunk("}]}"),
            chunk(r#"\"},\"x\":{\""#),
            // The id changes: parsed again, a new shape taken.
            chunk("x").replace("chatcmpl-1", "chatcmpl-2"),
            chunk("y").replace("chatcmpl-1", "chatcmpl-2"),
            r#"{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"z"},"logprobs":null,"finish_reason":"stop"}]}"#.to_string(),
            r#"{"id":"chatcmpl-2","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}}"#.to_string(),
        ];
        let chunks: Vec<&str> = owned.iter().map(String::as_str).collect();
        let (shown, message, usage, reason, bytes) = parsed(&chunks);
        assert_eq!(
            (shown.clone(), message.clone(), usage, reason.clone(), bytes),
            general(&chunks)
        );
        assert_eq!(message.text(), "Hello, wörld 漢字 🦀a \"quote\"back\\slash \n newline é plain again}]}\"},\"x\":{\"xyz");
        assert_eq!(reason.as_deref(), Some("stop"));
        assert_eq!(usage.map(|u| u.completion_tokens), Some(9));
    }

    /// A raw control character inside the text is not JSON, shape or not.
    #[test]
    fn a_raw_control_character_is_refused_as_parsing_would() {
        let chunk = |text: &str| {
            format!(r#"{{"id":"c","choices":[{{"index":0,"delta":{{"content":"{text}"}}}}]}}"#)
        };
        let mut parser = ChunkParser {
            acc: StreamAccumulator::new(),
            shape: None,
        };
        let sink = |_: StreamEvent| {};
        for (text, ok) in [("a", true), ("b", true), ("c\u{7}d", false)] {
            let ev = SseEvent {
                event: None,
                data: chunk(text),
            };
            assert_eq!(parser.event(&ev, &sink).is_ok(), ok, "{text:?}");
        }
    }
}
