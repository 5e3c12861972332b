//! The Chat Completions client: `POST {base}/chat/completions`, streaming by default
//! (SSE, with usage in the last chunk), plain JSON for servers without streaming,
//! retried on transient failures.

use super::retry::{backoff, parse_retry_after};
use super::{ApiError, EventSink, ModelClient, ModelRequest, ModelResponse, StreamEvent};
use crate::provider::error::error_message_from_body;
use crate::wire::sse::{SseDecoder, SseEvent};
use crate::wire::stream::StreamAccumulator;
use crate::wire::{ChatChunk, ChatRequest, ChatResponse, StreamOptions};
use async_trait::async_trait;
use std::fmt;
use std::time::Duration;

/// Error bodies larger than this are not read further; the message is in the start.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// A non-streamed completion larger than this is refused rather than buffered.
const MAX_JSON_BODY: usize = 64 * 1024 * 1024;

#[derive(Clone)]
pub struct CompletionsSettings {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub stream: bool,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Longest wait for the response head, and for each piece of a stream.
    pub timeout: Duration,
    pub max_retries: u32,
}

// Hand-written so the key can never end up in a log or trace.
impl fmt::Debug for CompletionsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionsSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("stream", &self.stream)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

pub struct CompletionsClient {
    settings: CompletionsSettings,
    url: String,
    http: reqwest::Client,
}

impl CompletionsClient {
    pub fn new(settings: CompletionsSettings) -> Result<Self, ApiError> {
        let url = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        let http = reqwest::Client::builder()
            .connect_timeout(settings.timeout.min(Duration::from_secs(30)))
            .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Connect {
                url: url.clone(),
                detail: format!("cannot build HTTP client: {e}"),
            })?;
        Ok(CompletionsClient {
            settings,
            url,
            http,
        })
    }

    fn body(&self, request: ModelRequest<'_>) -> Result<Vec<u8>, ApiError> {
        let s = &self.settings;
        let body = ChatRequest {
            model: &s.model,
            messages: request.messages,
            tools: (!request.tools.is_empty()).then_some(request.tools),
            temperature: s.temperature,
            top_p: s.top_p,
            stream: s.stream,
            stream_options: s.stream.then_some(StreamOptions {
                include_usage: true,
            }),
        };
        serde_json::to_vec(&body)
            .map_err(|e| ApiError::InvalidResponse(format!("cannot encode request: {e}")))
    }

    /// One HTTP exchange. The flag says whether anything was already shown to the
    /// user, which makes a retry unsafe (it would repeat visible output).
    async fn attempt(
        &self,
        body: &[u8],
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, (ApiError, Option<Duration>, bool)> {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(key) = &self.settings.api_key {
            req = req.bearer_auth(key);
        }
        if self.settings.stream {
            req = req.header("accept", "text/event-stream");
        }
        let timeout = self.settings.timeout;
        let response = match tokio::time::timeout(timeout, req.send()).await {
            Err(_) => return Err((self.timeout_error(), None, false)),
            Ok(Err(e)) => return Err((self.transport_error(&e), None, false)),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let body = read_capped(response, MAX_ERROR_BODY, timeout)
                .await
                .unwrap_or_default();
            let message = error_message_from_body(&String::from_utf8_lossy(&body));
            let err = ApiError::Status {
                status: status.as_u16(),
                message,
            };
            return Err((err, retry_after, false));
        }
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if is_sse {
            self.read_stream(response, on_event).await
        } else {
            let body = read_capped(response, MAX_JSON_BODY, timeout)
                .await
                .map_err(|e| (e, None, false))?;
            parse_json_completion(&body, on_event).map_err(|e| (e, None, false))
        }
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, (ApiError, Option<Duration>, bool)> {
        let timeout = self.settings.timeout;
        let mut decoder = SseDecoder::new();
        let mut acc = StreamAccumulator::new();
        let mut events: Vec<SseEvent> = Vec::new();
        let mut shown = false;
        let mut done = false;
        loop {
            let next = match tokio::time::timeout(timeout, response.chunk()).await {
                Err(_) => {
                    let e =
                        ApiError::StreamInterrupted(format!("no data for {} s", timeout.as_secs()));
                    return Err((e, None, shown));
                }
                Ok(Err(e)) => {
                    let e = ApiError::StreamInterrupted(describe_reqwest(&e));
                    return Err((e, None, shown));
                }
                Ok(Ok(c)) => c,
            };
            let ended = next.is_none();
            match next {
                Some(bytes) => decoder
                    .feed(&bytes, &mut events)
                    .map_err(|e| (ApiError::InvalidResponse(e.to_string()), None, shown))?,
                None => decoder.finish(&mut events),
            }
            for ev in events.drain(..) {
                let data = ev.data.trim();
                if data == "[DONE]" {
                    done = true;
                    continue;
                }
                if data.is_empty() {
                    continue;
                }
                let value: serde_json::Value = serde_json::from_str(data).map_err(|e| {
                    let e = ApiError::InvalidResponse(format!("malformed stream chunk ({e})"));
                    (e, None, shown)
                })?;
                if let Some(err) = value.get("error") {
                    let msg = error_message_from_body(&err.to_string());
                    let e = ApiError::StreamInterrupted(format!("server reported an error: {msg}"));
                    return Err((e, None, shown));
                }
                let chunk: ChatChunk = serde_json::from_value(value).map_err(|e| {
                    let e = ApiError::InvalidResponse(format!("unexpected stream chunk ({e})"));
                    (e, None, shown)
                })?;
                let delta = acc.push(chunk);
                if let Some(text) = delta.text {
                    shown = true;
                    on_event(StreamEvent::Text(text));
                }
                for (field, text) in delta.reasoning {
                    shown = true;
                    on_event(StreamEvent::Reasoning { field, text });
                }
            }
            if ended || done {
                break;
            }
        }
        if !done && acc.finish_reason().is_none() {
            let e = ApiError::StreamInterrupted(
                "connection closed before the response was complete".to_string(),
            );
            return Err((e, None, shown));
        }
        let usage = acc.usage();
        Ok(ModelResponse {
            message: acc.finish(),
            usage,
        })
    }

    fn timeout_error(&self) -> ApiError {
        ApiError::Timeout {
            url: self.url.clone(),
            secs: self.settings.timeout.as_secs(),
        }
    }

    fn transport_error(&self, e: &reqwest::Error) -> ApiError {
        if e.is_timeout() {
            return self.timeout_error();
        }
        ApiError::Connect {
            url: self.url.clone(),
            detail: describe_reqwest(e),
        }
    }
}

#[async_trait]
impl ModelClient for CompletionsClient {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, ApiError> {
        let body = self.body(request)?;
        let max = self.settings.max_retries;
        let mut attempt = 0;
        loop {
            match self.attempt(&body, on_event).await {
                Ok(r) => return Ok(r),
                Err((err, retry_after, shown)) => {
                    let transient = err.is_retryable()
                        || matches!(err, ApiError::StreamInterrupted(_)) && !shown;
                    if !transient || shown || attempt >= max {
                        return Err(err);
                    }
                    attempt += 1;
                    let delay = backoff(attempt, retry_after);
                    on_event(StreamEvent::Retrying {
                        attempt,
                        max_retries: max,
                        delay,
                        error: err.to_string(),
                    });
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    fn model(&self) -> &str {
        &self.settings.model
    }
}

fn parse_json_completion(body: &[u8], on_event: EventSink<'_>) -> Result<ModelResponse, ApiError> {
    let parsed: ChatResponse = serde_json::from_slice(body).map_err(|e| {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        ApiError::InvalidResponse(format!("not a chat completion ({e}): {}", text.trim()))
    })?;
    let Some(choice) = parsed.choices.into_iter().next() else {
        return Err(ApiError::InvalidResponse(
            "the response has no choices".into(),
        ));
    };
    for (field, text) in choice.message.reasoning_traces() {
        on_event(StreamEvent::Reasoning { field, text });
    }
    Ok(ModelResponse {
        message: choice.message,
        usage: parsed.usage,
    })
}

async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    timeout: Duration,
) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(timeout, response.chunk()).await {
            Err(_) => return Err(ApiError::StreamInterrupted("response body stalled".into())),
            Ok(Err(e)) => return Err(ApiError::StreamInterrupted(describe_reqwest(&e))),
            Ok(Ok(None)) => return Ok(out),
            Ok(Ok(Some(bytes))) => {
                if out.len() + bytes.len() > cap {
                    if cap == MAX_ERROR_BODY {
                        out.extend_from_slice(&bytes[..cap - out.len()]);
                        return Ok(out);
                    }
                    return Err(ApiError::InvalidResponse(format!(
                        "response body larger than {cap} bytes"
                    )));
                }
                out.extend_from_slice(&bytes);
            }
        }
    }
}

/// reqwest's errors nest the useful part ("connection refused") several sources
/// deep; join the chain into one line.
fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    let head = if e.is_connect() {
        "connection failed".to_string()
    } else if e.is_body() || e.is_decode() {
        "error reading response".to_string()
    } else {
        "request failed".to_string()
    };
    match parts.last() {
        Some(last) => format!("{head} ({last})"),
        None => head,
    }
}
