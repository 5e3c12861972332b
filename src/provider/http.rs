//! The HTTP side every wire protocol shares: one POST per attempt, the error
//! body turned into one line, SSE decoding or a capped JSON body, timeouts and
//! retries. A [`Protocol`] supplies what differs: the path, headers, the
//! request body built from the history, and the parsing of what comes back.

use super::body::{read_ahead, Ahead, ReadAhead};
use super::direct;
use super::retry::{backoff, parse_retry_after};
use super::{ApiError, EventSink, ModelClient, ModelRequest, ModelResponse, StreamEvent};
use crate::auth::LoginCredentials;
use crate::provider::error::error_message_from_body;
use crate::provider::models::{parse_model_list, ListedModel};
use crate::wire::sse::{SseDecoder, SseEvent};
use crate::wire::stream::{TooManyToolCalls, MAX_TOOL_CALLS};
use async_trait::async_trait;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Error bodies larger than this are not read further; the message is in the start.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// A model list larger than this is refused rather than buffered.
const MAX_JSON_BODY: usize = 64 * 1024 * 1024;
/// Stream bytes decoded in one batch at most before their events are parsed.
const MAX_BATCH: usize = 256 * 1024;
/// How much of an unexpected body an error quotes, in characters.
const QUOTE_CHARS: usize = 200;

/// What one reply may cost, whatever the server sends: the bounds that keep a
/// broken or hostile server from exhausting memory or holding a run forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Largest answer (text, reasoning, tool calls) one reply may carry.
    pub max_answer_bytes: usize,
    /// Longest a stream may go without adding to the answer: keep-alives and
    /// empty events do not count. Separate from the per-read timeout, which
    /// any byte resets.
    pub idle_timeout: Duration,
}

impl StreamLimits {
    pub const DEFAULT_MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

    /// The cap on a non-streamed body: the answer with room for its JSON
    /// escaping and envelope.
    fn max_json_body(&self) -> usize {
        self.max_answer_bytes
            .saturating_mul(4)
            .saturating_add(1024 * 1024)
    }
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_answer_bytes: Self::DEFAULT_MAX_ANSWER_BYTES,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }
}

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

#[cfg(test)]
impl ClientSettings {
    /// Settings for unit tests: streaming, no key, 5 s timeout, no retries.
    pub(crate) fn for_test(base_url: &str) -> ClientSettings {
        ClientSettings {
            base_url: base_url.into(),
            api_key: None,
            model: "m".into(),
            stream: true,
            temperature: None,
            top_p: None,
            max_tokens: None,
            prompt_cache: false,
            timeout: Duration::from_secs(5),
            max_retries: 0,
            extra_roots: Vec::new(),
        }
    }
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
    /// Bytes of answer held so far: text, reasoning and tool calls, not the
    /// protocol's framing. Its growth is what counts as progress.
    fn answer_bytes(&self) -> usize;
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
    /// The output cap sent when the profile sets none (Anthropic Messages
    /// requires one); `None` leaves the cap to the server.
    fn default_max_tokens(&self) -> Option<u64> {
        None
    }
}

/// Which output limit a cut-off answer hit, with the advice that fits it, for
/// the warning: `reason` is the server's word (`finish_reason: length`).
/// Telling the user to raise `max_tokens` is wrong when buddy sent none.
pub fn output_limit(reason: &str, profile: Option<u64>, default: Option<u64>) -> String {
    match (profile, default) {
        (Some(n), _) => format!(
            "its output limit, max_tokens = {n} from the profile ({reason}); raise max_tokens in the profile for longer answers"
        ),
        (None, Some(n)) => format!(
            "buddy's default output limit of {n} tokens, sent because this protocol needs one ({reason}); set max_tokens in the profile to change it"
        ),
        (None, None) => format!(
            "the server's own output limit, not one buddy sent ({reason}); raise it on the server (llama.cpp: --n-predict, or n_predict) or use a model with a larger maximum output"
        ),
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
    serde_json::from_slice(body)
        .map_err(|e| ApiError::InvalidResponse(format!("not {what} ({e}): {}", quote(body))))
}

pub struct HttpClient {
    settings: ClientSettings,
    protocol: Box<dyn Protocol>,
    url: String,
    /// reqwest's client, built at the first exchange that needs it: building
    /// one loads the system's trust store, which a plain-HTTP exchange with
    /// a local server never uses (see `request_builder`).
    http: OnceLock<reqwest::Client>,
    /// Where a shared client comes from, for building `http` later.
    shared: Option<Transports>,
    /// For plain-HTTP servers without a proxy: exchanges driven by the reader
    /// (`direct.rs`); reqwest otherwise.
    direct: Option<direct::Pool>,
    /// Bearer tokens from `buddy login`, for login-backed profiles.
    login: Option<Arc<LoginCredentials>>,
    limits: StreamLimits,
}

impl HttpClient {
    pub fn new(settings: ClientSettings, protocol: Box<dyn Protocol>) -> Result<Self, ApiError> {
        Self::new_shared(settings, protocol, None)
    }

    /// Like [`HttpClient::new`], taking its transport from `shared` when it can.
    pub fn new_shared(
        settings: ClientSettings,
        protocol: Box<dyn Protocol>,
        shared: Option<&Transports>,
    ) -> Result<Self, ApiError> {
        let url = format!(
            "{}{}",
            settings.base_url.trim_end_matches('/'),
            protocol.path()
        );
        let direct =
            direct::applies(&url).then(|| shared.map(|s| s.direct.clone()).unwrap_or_default());
        Ok(HttpClient {
            settings,
            protocol,
            url,
            http: OnceLock::new(),
            shared: shared.cloned(),
            direct,
            login: None,
            limits: StreamLimits::default(),
        })
    }

    /// Bounds replies by these limits instead of the defaults.
    pub fn with_limits(mut self, limits: StreamLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Authenticates with login tokens (refreshed as needed) instead of a key.
    pub fn with_login(mut self, login: Arc<LoginCredentials>) -> Self {
        self.login = Some(login);
        self
    }

    /// reqwest's client for this profile, built on first use.
    fn reqwest(&self) -> Result<&reqwest::Client, ApiError> {
        if let Some(client) = self.http.get() {
            return Ok(client);
        }
        let client =
            transport(&self.settings, self.shared.as_ref()).map_err(|e| ApiError::Connect {
                url: self.url.clone(),
                detail: format!("cannot build HTTP client: {e}"),
            })?;
        Ok(self.http.get_or_init(|| client))
    }

    /// A client to build requests with. A direct exchange only takes the
    /// request it builds (method, URL, headers), never its connections, so
    /// it gets one without trust roots: the trust store is read only when an
    /// https URL (or a proxy) is first used.
    fn request_builder(&self) -> Result<&reqwest::Client, ApiError> {
        if self.direct.is_none() {
            return self.reqwest();
        }
        static BUILDER: OnceLock<Option<reqwest::Client>> = OnceLock::new();
        match BUILDER.get_or_init(|| crate::net::plain_client().ok()) {
            Some(client) => Ok(client),
            None => self.reqwest(),
        }
    }

    /// One HTTP exchange. The flag says whether anything was already shown to the
    /// user, which makes a retry unsafe (it would repeat visible output).
    async fn attempt(
        &self,
        body: &[u8],
        token: Option<&str>,
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, (ApiError, Option<Duration>, bool)> {
        // One copy of the request body per attempt, shared by either transport.
        let payload = bytes::Bytes::copy_from_slice(body);
        let mut req = self
            .request_builder()
            .map_err(|e| (e, None, false))?
            .post(&self.url)
            .header("content-type", "application/json")
            .body(payload.clone());
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
        let reply = match tokio::time::timeout(timeout, self.send(req, payload)).await {
            Err(_) => return Err((self.timeout_error(), None, false)),
            Ok(Err(e)) => return Err((e, None, false)),
            Ok(Ok(r)) => r,
        };
        let status = reply.status;
        if !status.is_success() {
            let retry_after = reply.retry_after;
            let body = read_capped(reply.body, MAX_ERROR_BODY, timeout, timeout)
                .await
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&body);
            let message = self.protocol.error_message(&text);
            // A 429 or 5xx is normally worth retrying, unless the body says
            // why not (no quota, no credit): then fail at once with its text.
            let permanent = serde_json::from_str::<serde_json::Value>(&text)
                .is_ok_and(|v| crate::provider::error::is_permanent(&v));
            let overflow =
                crate::provider::error::context_overflow(Some(status.as_u16()), &text, &message);
            let err = if let Some(overflow) = overflow.filter(|_| status.is_client_error()) {
                overflow
            } else if permanent && (status.as_u16() == 429 || status.is_server_error()) {
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
        let content_type = reply.content_type;
        let response = reply.body;
        let ct = content_type.as_deref().unwrap_or("");
        let response = if ct.contains("text/event-stream") {
            self.read_stream(response, on_event).await?
        } else {
            // No content type is taken as JSON (some servers send none); any
            // other type (an HTML login page, a proxy's notice) is read only
            // as far as an error needs, and quoted.
            let json = ct.is_empty() || ct.contains("json");
            let cap = if json {
                self.limits.max_json_body()
            } else {
                MAX_ERROR_BODY
            };
            let body = read_capped(response, cap, timeout, self.limits.idle_timeout)
                .await
                .map_err(|e| (e, None, false))?;
            // A JSON object under a wrong label is still read, as it was.
            let looks_json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            if !json && !looks_json {
                let wanted = match self.settings.stream {
                    true => "an event stream",
                    false => "JSON",
                };
                let kind = crate::text::one_line(ct.split(';').next().unwrap_or(ct), 80);
                let e = ApiError::InvalidResponse(format!(
                    "the server answered with {kind}, not {wanted}: {}",
                    quote(&body)
                ));
                return Err((e, None, false));
            }
            let r = self
                .protocol
                .parse_json(&body, on_event)
                .map_err(|e| (e, None, false))?;
            let size = answer_size(&r.message);
            if size > self.limits.max_answer_bytes {
                return Err((self.too_large(), None, false));
            }
            r
        };
        let calls = response.message.calls().len();
        if calls > MAX_TOOL_CALLS {
            let e = TooManyToolCalls {
                limit: MAX_TOOL_CALLS,
            };
            return Err((ApiError::InvalidResponse(e.to_string()), None, true));
        }
        Ok(response)
    }

    fn too_large(&self) -> ApiError {
        ApiError::InvalidResponse(format!(
            "the reply is larger than {} bytes (network.max_answer_bytes)",
            self.limits.max_answer_bytes
        ))
    }

    async fn read_stream(
        &self,
        response: Body,
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
        let idle = self.limits.idle_timeout;
        let mut progress = 0;
        let mut last_progress = tokio::time::Instant::now();
        // Any byte moves the read deadline; only answer bytes move the idle
        // one (keep-alives alone never end). One timer for the whole stream,
        // moved only when it fires early: arming a timer per wait cost about
        // 5% of relaying a fast stream.
        let mut last_data = last_progress;
        let idle_error = || {
            ApiError::StreamInterrupted(format!(
                "no new output for {} s, only keep-alives or empty events (network.idle_timeout_secs)",
                idle.as_secs()
            ))
        };
        let timer = tokio::time::sleep(timeout.min(idle));
        tokio::pin!(timer);
        let mut body = Reading::of(response);
        loop {
            let first = loop {
                tokio::select! {
                    biased;
                    item = body.next() => break item,
                    () = &mut timer => {
                        let now = tokio::time::Instant::now();
                        let read_by = last_data + timeout;
                        let idle_by = last_progress + idle;
                        if now >= idle_by && idle_by <= read_by {
                            return Err((idle_error(), None, was_shown()));
                        }
                        if now >= read_by {
                            let e = ApiError::StreamInterrupted(format!(
                                "no data for {} s",
                                timeout.as_secs()
                            ));
                            return Err((e, None, was_shown()));
                        }
                        timer.as_mut().reset(read_by.min(idle_by));
                    }
                }
            };
            // Every chunk already read ahead is decoded with the first, and
            // their events parsed together below: one pass per batch.
            let mut ended = false;
            let mut taken = 0;
            let mut next = Some(first);
            while let Some(item) = next.take() {
                match item {
                    Ahead::Chunk(bytes) => {
                        taken += bytes.len();
                        decoder.feed(&bytes, &mut events).map_err(|e| {
                            (ApiError::InvalidResponse(e.to_string()), None, was_shown())
                        })?;
                    }
                    Ahead::End => {
                        ended = true;
                        decoder.finish(&mut events);
                        if let Some(e) = decoder.failure() {
                            let e = ApiError::InvalidResponse(e.to_string());
                            return Err((e, None, was_shown()));
                        }
                    }
                    Ahead::Failed(e) => {
                        let e = ApiError::StreamInterrupted(e);
                        return Err((e, None, was_shown()));
                    }
                    Ahead::Lost => {
                        let e =
                            ApiError::StreamInterrupted("the response body reader stopped".into());
                        return Err((e, None, was_shown()));
                    }
                }
                // Bounded so that a body arriving as fast as it is decoded
                // still gets parsed (and its size checked) as it goes.
                if !ended && taken < MAX_BATCH {
                    next = body.ready();
                }
            }
            let before = progress;
            for ev in events.drain(..) {
                if done {
                    continue;
                }
                match parser.event(&ev, &watch) {
                    Ok(Flow::Done) => done = true,
                    Ok(Flow::More) => {}
                    Err(e) => return Err((e, None, was_shown())),
                }
                // Checked per event: one event adds at most the decoder's
                // event cap, so memory stays near the answer cap.
                let held = parser.answer_bytes();
                if held > self.limits.max_answer_bytes {
                    return Err((self.too_large(), None, was_shown()));
                }
                progress = progress.max(held);
            }
            if ended {
                break;
            }
            if done {
                // The answer is whole; what follows is the body's end.
                body.let_go();
                break;
            }
            // Once per batch: a clock read per event was a visible cost.
            let now = tokio::time::Instant::now();
            last_data = now;
            if progress > before {
                last_progress = now;
            } else if now >= last_progress + idle {
                // Checked here too: a flood of keep-alives is always ready
                // to read, so the timer above would never be polled.
                return Err((idle_error(), None, was_shown()));
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
        let mut req = self
            .protocol
            .headers(self.reqwest()?.get(&url), &self.settings);
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
            let body = read_capped(Body::Reqwest(response), MAX_ERROR_BODY, timeout, timeout)
                .await
                .unwrap_or_default();
            return Err(ApiError::Status {
                status: status.as_u16(),
                message: self.protocol.error_message(&String::from_utf8_lossy(&body)),
            });
        }
        let body = read_capped(
            Body::Reqwest(response),
            MAX_JSON_BODY,
            timeout,
            self.limits.idle_timeout,
        )
        .await?;
        parse_model_list(&body)
    }

    fn timeout_error(&self) -> ApiError {
        ApiError::Timeout {
            url: self.url.clone(),
            secs: self.settings.timeout.as_secs(),
        }
    }

    /// Sends the request by whichever transport serves this server, up to the
    /// response head. `payload` is the body `req` carries, for the direct
    /// exchange to send without copying it out of reqwest's request.
    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        payload: bytes::Bytes,
    ) -> Result<Reply, ApiError> {
        let Some(pool) = &self.direct else {
            let response = req.send().await.map_err(|e| self.transport_error(&e))?;
            let headers = response.headers();
            return Ok(Reply {
                status: response.status(),
                retry_after: retry_after(headers),
                content_type: content_type(headers),
                body: Body::Reqwest(response),
            });
        };
        let request = req.build().map_err(|e| self.transport_error(&e))?;
        let connect = connect_timeout(&self.settings);
        let r = direct::send(pool, request, payload, connect)
            .await
            .map_err(|e| match e {
                direct::Failure::ConnectTimeout => self.timeout_error(),
                direct::Failure::Connect(detail) => ApiError::Connect {
                    url: self.url.clone(),
                    detail: format!("connection failed ({detail})"),
                },
                direct::Failure::Exchange(detail) => ApiError::Connect {
                    url: self.url.clone(),
                    detail: format!("request failed ({detail})"),
                },
            })?;
        Ok(Reply {
            status: r.status,
            retry_after: retry_after(&r.headers),
            content_type: content_type(&r.headers),
            body: Body::Direct(r.body),
        })
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
        let images = request.messages.iter().any(|m| !m.images.is_empty());
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
                Ok(mut r) => {
                    if let Some(output) = request.output {
                        output.adopt_answer_call(&mut r.message);
                    }
                    if let Some(reason) = r.cut_off.take() {
                        r.cut_off = Some(output_limit(
                            &reason,
                            self.settings.max_tokens,
                            self.protocol.default_max_tokens(),
                        ));
                    }
                    return Ok(r);
                }
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
                // Sent without a key (a local server needs none) and refused
                // for want of one: say that, not just the status.
                Err((
                    ApiError::Status {
                        status: 401,
                        message,
                    },
                    _,
                    _,
                )) if self.login.is_none() && self.settings.api_key.is_none() => {
                    return Err(ApiError::Auth(missing_key_message(
                        &self.settings.base_url,
                        &message,
                    )));
                }
                Err((err, retry_after, shown)) => {
                    let transient = err.is_retryable()
                        || matches!(err, ApiError::StreamInterrupted(_)) && !shown;
                    if !transient || shown || attempt >= max {
                        return Err(if images {
                            err.for_request_with_image()
                        } else {
                            err
                        });
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

    fn reads_in_place(&self) -> bool {
        // A direct exchange's connection is driven by the reader; reqwest's
        // runs on a task of its own.
        self.direct.is_some()
    }
}

/// The error for a 401 to a request sent without a key.
fn missing_key_message(base_url: &str, server_said: &str) -> String {
    let mut m = format!("no API key for {base_url}: the server answered 401 Unauthorized");
    if !server_said.is_empty() {
        m.push_str(&format!(" ({server_said})"));
    }
    m.push_str("; export BUDDY_API_KEY=... for it, or add a profile with its api_base_url and api_key_env to buddy.toml");
    m
}

/// A response head from either transport, and its body to read.
struct Reply {
    status: reqwest::StatusCode,
    retry_after: Option<Duration>,
    content_type: Option<String>,
    body: Body,
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after)
}

fn content_type(headers: &reqwest::header::HeaderMap) -> Option<String> {
    headers
        .get("content-type")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
}

/// The timeout for making a connection: the request's, at most 30 s.
fn connect_timeout(settings: &ClientSettings) -> Duration {
    settings.timeout.min(Duration::from_secs(30))
}

/// A response body, from reqwest or read directly.
enum Body {
    Reqwest(reqwest::Response),
    Direct(direct::DirectBody),
}

impl Body {
    /// The next chunk; `None` at the end. A failure is the body breaking off.
    async fn chunk(&mut self) -> Result<Option<bytes::Bytes>, ApiError> {
        let broke = ApiError::StreamInterrupted;
        match self {
            Body::Reqwest(r) => r.chunk().await.map_err(|e| broke(describe_reqwest(&e))),
            Body::Direct(d) => match d.next().await {
                Ahead::Chunk(c) => Ok(Some(c)),
                Ahead::End => Ok(None),
                Ahead::Failed(e) => Err(broke(format!("error reading response ({e})"))),
                Ahead::Lost => Err(broke("error reading response".into())),
            },
        }
    }
}

/// A streamed body as the parser takes it: a chunk (waiting for it), then all
/// those already here. reqwest's is read ahead on a task of its own (see
/// `body.rs`); a direct one needs no task, its connection is driven here.
enum Reading {
    Ahead(ReadAhead<bytes::Bytes, reqwest::Error>),
    Direct(direct::DirectBody),
}

impl Reading {
    fn of(body: Body) -> Reading {
        match body {
            Body::Reqwest(response) => Reading::Ahead(read_ahead(futures_util::stream::unfold(
                response,
                |mut r| async move {
                    match r.chunk().await {
                        Ok(Some(bytes)) => Some((Ok(bytes), r)),
                        Ok(None) => None,
                        Err(e) => Some((Err(e), r)),
                    }
                },
            ))),
            Body::Direct(d) => Reading::Direct(d),
        }
    }

    async fn next(&mut self) -> Ahead<bytes::Bytes, String> {
        match self {
            Reading::Ahead(a) => reading_error(a.next().await),
            Reading::Direct(d) => direct_error(d.next().await),
        }
    }

    fn ready(&mut self) -> Option<Ahead<bytes::Bytes, String>> {
        match self {
            Reading::Ahead(a) => a.ready().map(reading_error),
            Reading::Direct(d) => d.ready().map(direct_error),
        }
    }

    /// The parser needs nothing more: a direct body is read to its end in
    /// the background so its connection can serve the next request.
    fn let_go(self) {
        if let Reading::Direct(d) = self {
            d.finish_in_background();
        }
    }
}

fn reading_error(a: Ahead<bytes::Bytes, reqwest::Error>) -> Ahead<bytes::Bytes, String> {
    match a {
        Ahead::Chunk(c) => Ahead::Chunk(c),
        Ahead::End => Ahead::End,
        Ahead::Failed(e) => Ahead::Failed(describe_reqwest(&e)),
        Ahead::Lost => Ahead::Lost,
    }
}

fn direct_error(a: Ahead<bytes::Bytes, String>) -> Ahead<bytes::Bytes, String> {
    match a {
        Ahead::Failed(e) => Ahead::Failed(format!("error reading response ({e})")),
        other => other,
    }
}

/// A whole body, at most `cap` bytes (an error body is cut there, anything
/// else refused), each read within `timeout` and all of it within `total`.
async fn read_capped(
    mut response: Body,
    cap: usize,
    timeout: Duration,
    total: Duration,
) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + total;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(timeout.min(left), response.chunk()).await {
            Err(_) => return Err(ApiError::StreamInterrupted("response body stalled".into())),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(None)) => return Ok(out),
            Ok(Ok(Some(bytes))) => {
                if out.len() + bytes.len() > cap {
                    // An error body or an unexpected page: its start says enough.
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

/// The start of a body for an error message: one visible line.
fn quote(body: &[u8]) -> String {
    // Enough bytes for QUOTE_CHARS characters of any width.
    let head = &body[..body.len().min(QUOTE_CHARS * 4)];
    crate::text::one_line(&String::from_utf8_lossy(head), QUOTE_CHARS)
}

/// The size of an answer as the cap counts it: text, reasoning and other
/// kept fields, tool names and arguments.
fn answer_size(m: &crate::wire::Message) -> usize {
    let calls: usize = m
        .calls()
        .iter()
        .map(|c| c.id.len() + c.function.name.len() + c.function.arguments.len())
        .sum();
    let extra: usize = m
        .extra
        .values()
        .map(|v| match v {
            serde_json::Value::String(s) => s.len(),
            other => other.to_string().len(),
        })
        .sum();
    m.text().len() + calls + extra
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

/// HTTP clients to share between the [`HttpClient`]s one runtime builds, one
/// per connect timeout. Building a client parses the trust store
/// (milliseconds), which `buddy serve` would otherwise pay for every session
/// it starts, and sharing also shares the provider's keep-alive connections.
/// Kept per runtime, not per process: a pooled connection belongs to the
/// runtime that opened it.
#[derive(Clone, Default)]
pub struct Transports {
    clients: Arc<std::sync::Mutex<Vec<(Duration, reqwest::Client)>>>,
    /// Idle connections of the direct exchanges (`direct.rs`).
    direct: direct::Pool,
}

fn transport(
    settings: &ClientSettings,
    shared: Option<&Transports>,
) -> reqwest::Result<reqwest::Client> {
    let connect = connect_timeout(settings);
    let build = || {
        crate::net::client_builder(&settings.extra_roots)
            .connect_timeout(connect)
            .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
            .build()
    };
    // A `ca_file` gets a client of its own.
    let Some(shared) = shared.filter(|_| settings.extra_roots.is_empty()) else {
        return build();
    };
    let mut shared = shared.clients.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, client)) = shared.iter().find(|(t, _)| *t == connect) {
        return Ok(client.clone());
    }
    let client = build()?;
    shared.push((connect, client.clone()));
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(base_url: &str) -> HttpClient {
        let settings = ClientSettings::for_test(base_url);
        HttpClient::new(settings, Box::new(super::super::completions::Completions)).unwrap()
    }

    /// The journal skips its look-again round only where the reader drives
    /// the connection itself: direct exchanges, never reqwest's.
    #[test]
    fn only_direct_exchanges_read_in_place() {
        let plain = client("http://127.0.0.1:9/v1");
        assert_eq!(plain.reads_in_place(), plain.direct.is_some());
        assert_eq!(
            plain.direct.is_some(),
            direct::applies("http://127.0.0.1:9/v1/chat/completions")
        );
        assert!(!client("https://127.0.0.1:9/v1").reads_in_place());
    }
}
