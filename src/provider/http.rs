//! The HTTP side every wire protocol shares: one POST per attempt, the error
//! body turned into one line, SSE decoding or a capped JSON body, timeouts and
//! retries. A [`Protocol`] supplies what differs: the path, headers, the
//! request body built from the history, and the parsing of what comes back.

use super::retry::{backoff, parse_retry_after};
use super::{ApiError, EventSink, ModelClient, ModelRequest, ModelResponse, StreamEvent};
use crate::auth::LoginCredentials;
use crate::provider::error::error_message_from_body;
use crate::provider::models::{parse_model_list, ListedModel};
use crate::wire::sse::{SseDecoder, SseEvent};
use async_trait::async_trait;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Error bodies larger than this are not read further; the message is in the start.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// A non-streamed response larger than this is refused rather than buffered.
const MAX_JSON_BODY: usize = 64 * 1024 * 1024;

/// What a profile says about talking to its server, whatever the protocol.
#[derive(Clone)]
pub struct ClientSettings {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub stream: bool,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Output cap per response (required by Anthropic Messages).
    pub max_tokens: Option<u64>,
    /// Mark prompt-cache breakpoints where the protocol supports them.
    pub prompt_cache: bool,
    /// Longest wait for the response head, and for each piece of a stream.
    pub timeout: Duration,
    pub max_retries: u32,
    /// Roots trusted on top of the system's: the profile's `ca_file`.
    pub extra_roots: Vec<reqwest::Certificate>,
}

// Hand-written so the key can never end up in a log or trace.
impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("stream", &self.stream)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("extra_roots", &self.extra_roots.len())
            .finish()
    }
}

/// Whether a stream has said all it will.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    More,
    Done,
}

/// Parses one response stream; a fresh one per attempt.
pub trait StreamParser: Send {
    /// Takes one SSE event, reporting text and reasoning through `on_event`.
    /// An error event from the server is an `Err`.
    fn event(&mut self, event: &SseEvent, on_event: EventSink<'_>) -> Result<Flow, ApiError>;
    /// The finished turn, once the stream has ended. `ended_cleanly` says
    /// whether the protocol's own end marker was seen; without it a parser
    /// may still accept a stream that is evidently complete.
    fn finish(self: Box<Self>, ended_cleanly: bool) -> Result<ModelResponse, ApiError>;
}

/// One wire protocol.
pub trait Protocol: Send + Sync {
    /// Appended to the base URL: `/chat/completions`, `/responses`, `/messages`.
    fn path(&self) -> &'static str;
    /// Authentication and protocol headers.
    fn headers(
        &self,
        request: reqwest::RequestBuilder,
        settings: &ClientSettings,
    ) -> reqwest::RequestBuilder;
    /// The request body for this history.
    fn body(
        &self,
        request: ModelRequest<'_>,
        settings: &ClientSettings,
    ) -> Result<Vec<u8>, ApiError>;
    fn stream_parser(&self) -> Box<dyn StreamParser>;
    /// A complete (non-streamed) response body.
    fn parse_json(&self, body: &[u8], on_event: EventSink<'_>) -> Result<ModelResponse, ApiError>;
    /// Appended to the base URL to list the server's models.
    fn models_path(&self) -> &'static str {
        "/models"
    }
    /// The one-line message in an error body.
    fn error_message(&self, body: &str) -> String {
        error_message_from_body(body)
    }
}

/// A request body as JSON bytes.
pub fn encode_body<T: serde::Serialize>(body: &T) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(body)
        .map_err(|e| ApiError::InvalidResponse(format!("cannot encode request: {e}")))
}

/// A complete response body parsed as `T`; the error names what was expected
/// (`what`) and quotes the start of what came instead.
pub fn decode_body<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        ApiError::InvalidResponse(format!("not {what} ({e}): {}", text.trim()))
    })
}

pub struct HttpClient {
    settings: ClientSettings,
    protocol: Box<dyn Protocol>,
    url: String,
    http: reqwest::Client,
    /// Bearer tokens from `buddy login`, for login-backed profiles.
    login: Option<Arc<LoginCredentials>>,
}

impl HttpClient {
    pub fn new(settings: ClientSettings, protocol: Box<dyn Protocol>) -> Result<Self, ApiError> {
        let url = format!(
            "{}{}",
            settings.base_url.trim_end_matches('/'),
            protocol.path()
        );
        let http = crate::net::client_builder(&settings.extra_roots)
            .connect_timeout(settings.timeout.min(Duration::from_secs(30)))
            .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Connect {
                url: url.clone(),
                detail: format!("cannot build HTTP client: {e}"),
            })?;
        Ok(HttpClient {
            settings,
            protocol,
            url,
            http,
            login: None,
        })
    }

    /// Authenticates with login tokens (refreshed as needed) instead of a key.
    pub fn with_login(mut self, login: Arc<LoginCredentials>) -> Self {
        self.login = Some(login);
        self
    }

    /// One HTTP exchange. The flag says whether anything was already shown to the
    /// user, which makes a retry unsafe (it would repeat visible output).
    async fn attempt(
        &self,
        body: &[u8],
        token: Option<&str>,
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, (ApiError, Option<Duration>, bool)> {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_vec());
        req = self.protocol.headers(req, &self.settings);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        // ChatGPT-backed logins name their account on every request.
        if let Some(login) = &self.login {
            if let Some(account) = login.account_id().await {
                req = req.header("chatgpt-account-id", account);
            }
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
            let text = String::from_utf8_lossy(&body);
            let message = self.protocol.error_message(&text);
            // A 429 or 5xx is normally worth retrying, unless the body says
            // why not (no quota, no credit): then fail at once with its text.
            let permanent = serde_json::from_str::<serde_json::Value>(&text)
                .is_ok_and(|v| crate::provider::error::is_permanent(&v));
            let err = if permanent && (status.as_u16() == 429 || status.is_server_error()) {
                ApiError::Refused {
                    status: Some(status.as_u16()),
                    message,
                }
            } else {
                ApiError::Status {
                    status: status.as_u16(),
                    message,
                }
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
            self.protocol
                .parse_json(&body, on_event)
                .map_err(|e| (e, None, false))
        }
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, (ApiError, Option<Duration>, bool)> {
        let timeout = self.settings.timeout;
        let mut decoder = SseDecoder::new();
        let mut parser = self.protocol.stream_parser();
        let mut events: Vec<SseEvent> = Vec::new();
        let shown = AtomicBool::new(false);
        let watch = |e: StreamEvent| {
            shown.store(true, Ordering::Relaxed);
            on_event(e)
        };
        let was_shown = || shown.load(Ordering::Relaxed);
        let mut done = false;
        loop {
            let next = match tokio::time::timeout(timeout, response.chunk()).await {
                Err(_) => {
                    let e =
                        ApiError::StreamInterrupted(format!("no data for {} s", timeout.as_secs()));
                    return Err((e, None, was_shown()));
                }
                Ok(Err(e)) => {
                    let e = ApiError::StreamInterrupted(describe_reqwest(&e));
                    return Err((e, None, was_shown()));
                }
                Ok(Ok(c)) => c,
            };
            let ended = next.is_none();
            match next {
                Some(bytes) => decoder
                    .feed(&bytes, &mut events)
                    .map_err(|e| (ApiError::InvalidResponse(e.to_string()), None, was_shown()))?,
                None => decoder.finish(&mut events),
            }
            for ev in events.drain(..) {
                if done {
                    continue;
                }
                match parser.event(&ev, &watch) {
                    Ok(Flow::Done) => done = true,
                    Ok(Flow::More) => {}
                    Err(e) => return Err((e, None, was_shown())),
                }
            }
            if ended || done {
                break;
            }
        }
        parser.finish(done).map_err(|e| (e, None, was_shown()))
    }

    /// The models the server offers (`GET {base_url}/models`), with the
    /// profile's own authentication; one attempt, no retries.
    pub async fn list_models(&self) -> Result<Vec<ListedModel>, ApiError> {
        let url = format!(
            "{}{}",
            self.settings.base_url.trim_end_matches('/'),
            self.protocol.models_path()
        );
        let mut req = self.protocol.headers(self.http.get(&url), &self.settings);
        if let Some(login) = &self.login {
            let token = login
                .token()
                .await
                .map_err(|e| ApiError::Auth(e.to_string()))?;
            req = req.bearer_auth(token);
            if let Some(account) = login.account_id().await {
                req = req.header("chatgpt-account-id", account);
            }
        }
        let timeout = self.settings.timeout;
        let fail = |e: &reqwest::Error| match e.is_timeout() {
            true => ApiError::Timeout {
                url: url.clone(),
                secs: timeout.as_secs(),
            },
            false => ApiError::Connect {
                url: url.clone(),
                detail: describe_reqwest(e),
            },
        };
        let response = match tokio::time::timeout(timeout, req.send()).await {
            Err(_) => {
                return Err(ApiError::Timeout {
                    url: url.clone(),
                    secs: timeout.as_secs(),
                })
            }
            Ok(Err(e)) => return Err(fail(&e)),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let body = read_capped(response, MAX_ERROR_BODY, timeout)
                .await
                .unwrap_or_default();
            return Err(ApiError::Status {
                status: status.as_u16(),
                message: self.protocol.error_message(&String::from_utf8_lossy(&body)),
            });
        }
        let body = read_capped(response, MAX_JSON_BODY, timeout).await?;
        parse_model_list(&body)
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
        if let Some(detail) = crate::net::certificate_failure(e) {
            return ApiError::Tls {
                url: self.url.clone(),
                detail,
            };
        }
        ApiError::Connect {
            url: self.url.clone(),
            detail: describe_reqwest(e),
        }
    }
}

#[async_trait]
impl ModelClient for HttpClient {
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, ApiError> {
        let body = self.protocol.body(request, &self.settings)?;
        let max = self.settings.max_retries;
        let mut attempt = 0;
        let mut token = match &self.login {
            Some(login) => Some(
                login
                    .token()
                    .await
                    .map_err(|e| ApiError::Auth(e.to_string()))?,
            ),
            None => None,
        };
        let mut refreshed = false;
        loop {
            match self.attempt(&body, token.as_deref(), on_event).await {
                Ok(r) => return Ok(r),
                // A rejected login token is refreshed once, then tried again.
                Err((ApiError::Status { status: 401, .. }, _, false))
                    if !refreshed && self.login.is_some() =>
                {
                    refreshed = true;
                    if let (Some(login), Some(stale)) = (&self.login, token.as_deref()) {
                        token = Some(
                            login
                                .refresh_after_unauthorized(stale)
                                .await
                                .map_err(|e| ApiError::Auth(e.to_string()))?,
                        );
                    }
                }
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

/// For protocol tests: feeds JSON events (named by their `type` field) to a
/// fresh parser, stopping at `Flow::Done`; returns what it reported and the
/// result of `finish`. `ended_cleanly` overrides whether the end marker counts
/// as seen (default: whether `Flow::Done` came).
#[cfg(test)]
pub(crate) fn run_parser(
    protocol: &dyn Protocol,
    events: &[serde_json::Value],
    ended_cleanly: Option<bool>,
) -> (Vec<StreamEvent>, Result<ModelResponse, ApiError>) {
    let seen = std::sync::Mutex::new(Vec::new());
    let sink = |e: StreamEvent| seen.lock().expect("lock").push(e);
    let mut parser = protocol.stream_parser();
    let mut done = false;
    for v in events {
        let ev = SseEvent {
            event: v["type"].as_str().map(str::to_string),
            data: v.to_string(),
        };
        match parser.event(&ev, &sink) {
            Ok(Flow::Done) => {
                done = true;
                break;
            }
            Ok(Flow::More) => {}
            Err(e) => return (seen.into_inner().expect("lock"), Err(e)),
        }
    }
    let result = parser.finish(ended_cleanly.unwrap_or(done));
    (seen.into_inner().expect("lock"), result)
}
