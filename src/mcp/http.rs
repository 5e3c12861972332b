//! The Streamable HTTP side of an MCP server: the SDK's transport (its
//! session, reconnection and message routing) driven by buddy's own reqwest
//! client (`net.rs`: the same trust roots and proxies as the model client,
//! so `https://` servers work), through the SDK's `StreamableHttpClient`
//! trait implemented here. Owns the three HTTP exchanges the protocol has
//! (POST a message, GET the server's stream, DELETE the session) and their
//! bounds: a JSON answer or one SSE event larger than the SDK's limits is an
//! error, never buffered whole. Does not own the protocol itself (rmcp).
//!
//! The bearer token named by `bearer_token_env` is read when the server is
//! connected and registered as a secret, so it never reaches the screen,
//! events or sessions; a changed variable takes effect on the next start.
//! Without one, an OAuth login's token is sent (`oauth::bearer`): a 401 to
//! it is refreshed and the request sent once more, and any refusal is kept
//! there for a login to answer.
//! Each SSE event carries the stream's last event id and `retry` delay to
//! the SDK, which resumes a stream the server closed (a 2025-11-25 server's
//! polling) after that delay with `Last-Event-ID`.

use super::oauth::bearer::Bearer;
use super::oauth::Refusal;
use crate::config::McpServer;
use crate::wire::sse::SseDecoder;
use futures_util::stream::{self, BoxStream, StreamExt};
use reqwest::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::StatusCode;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use sse_stream::Sse;
use std::collections::HashMap;
use std::sync::Arc;

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const ACCEPTS: &str = "application/json, text/event-stream";

type Error = StreamableHttpError<reqwest::Error>;

/// buddy's reqwest client, as the SDK's HTTP side.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    /// The OAuth login's token, when the entry names no `bearer_token_env`.
    bearer: Option<Arc<Bearer>>,
}

/// The transport for `url`, or one line saying why not.
/// `bearer` gives the OAuth access token kept by `mcp::oauth`, sent when
/// the entry names no `bearer_token_env`.
pub fn transport(
    url: &str,
    spec: &McpServer,
    bearer: Option<Arc<Bearer>>,
) -> Result<StreamableHttpClientTransport<Client>, super::McpError> {
    use super::McpError::Setup;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Setup(
            "url: only http:// and https:// MCP servers are supported".into(),
        ));
    }
    let mut headers = HashMap::new();
    for (k, v) in &spec.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            Setup(format!(
                "headers: `{}` is not a header name",
                crate::text::one_line(k, 60)
            ))
        })?;
        let value = HeaderValue::from_str(v).map_err(|_| {
            Setup(format!(
                "headers.{}: not a valid header value",
                crate::text::one_line(k, 60)
            ))
        })?;
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    if let Some(var) = &spec.bearer_token_env {
        let token = crate::process::var(var)
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| Setup(format!("bearer_token_env: ${var} is not set")))?;
        crate::redact::remember([token.clone()]);
        config = config.auth_header(token);
    }
    let bearer = bearer.filter(|_| spec.bearer_token_env.is_none());
    // Plain http:// reads no certificate store (net::plain_client).
    let http = if url.starts_with("https://") {
        crate::net::client_builder(&[]).build()
    } else {
        crate::net::plain_client()
    }
    .map_err(|e| Setup(format!("cannot build an HTTP client: {e}")))?;
    Ok(StreamableHttpClientTransport::with_client(
        Client { http, bearer },
        config,
    ))
}

impl Client {
    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session: Option<&str>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, uri).header(ACCEPT, ACCEPTS);
        if let Some(token) = auth {
            req = req.bearer_auth(token);
        }
        for (name, value) in custom {
            req = req.header(name, value);
        }
        if let Some(id) = session {
            req = req.header(SESSION_ID, id);
        }
        req
    }
}

impl Client {
    /// Sends what `build` makes with the token to send: the login's when
    /// there is one (else `auth`, the SDK's), once more with a refreshed
    /// token when a login's token is refused with a 401. A refusal that
    /// stays is kept with the login's bearer and answered as the SDK's error
    /// for it.
    async fn send(
        &self,
        auth: Option<String>,
        build: impl Fn(Option<String>) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Error> {
        let Some(bearer) = &self.bearer else {
            return build(auth)
                .send()
                .await
                .map_err(StreamableHttpError::Client);
        };
        let mut token = bearer.token().await;
        let mut renewed = false;
        loop {
            let resp = build(token.clone())
                .send()
                .await
                .map_err(StreamableHttpError::Client)?;
            let challenges = resp
                .headers()
                .get_all(reqwest::header::WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok());
            let Some(why) = Refusal::of(resp.status().as_u16(), challenges) else {
                return Ok(resp);
            };
            match bearer.refused(token.as_deref(), why, !renewed).await {
                Some(fresh) => {
                    token = Some(fresh);
                    renewed = true;
                }
                None => return Ok(resp),
            }
        }
    }
}

fn content_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

fn is_type(ct: &str, mime: &str) -> bool {
    ct.split(';').next().is_some_and(|t| t.trim() == mime)
}

/// The body, read chunk by chunk; more than `max` bytes is an error rather
/// than a bigger buffer.
async fn bounded_body(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(StreamableHttpError::Client)? {
        if body.len() + chunk.len() > max {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A 401, or a 403 asking for more scope, as the SDK's errors for them
/// (which `mcp::oauth` acts on: a refresh, or a login to suggest), with the
/// server's `WWW-Authenticate` made one bounded line.
fn refusal(resp: &reqwest::Response) -> Option<Error> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let header = resp
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(|v| crate::text::one_line(v, 300))
        .unwrap_or_default();
    match resp.status() {
        StatusCode::UNAUTHORIZED => Some(StreamableHttpError::AuthRequired(
            AuthRequiredError::new(header),
        )),
        StatusCode::FORBIDDEN if header.contains("insufficient_scope") => {
            let scope = super::oauth::metadata::parse_challenge(&header).and_then(|c| c.scope);
            Some(StreamableHttpError::InsufficientScope(
                InsufficientScopeError::new(header, scope),
            ))
        }
        _ => None,
    }
}

/// A failed exchange as one line: the status and the start of what the
/// server said, control characters made visible.
async fn status_error(resp: reqwest::Response, max: usize) -> Error {
    let status = resp.status();
    let body = bounded_body(resp, max).await.unwrap_or_default();
    let text = crate::text::one_line(&String::from_utf8_lossy(&body), 200);
    StreamableHttpError::UnexpectedServerResponse(
        if text.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {text}")
        }
        .into(),
    )
}

/// The response body as SSE events, each bounded by `max_event` bytes (the
/// decoder in `wire::sse` refuses a longer line or event).
fn sse_events(
    resp: reqwest::Response,
    max_event: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let decoder = SseDecoder::with_limits(max_event, max_event);
    // What the SDK was last told of the stream's id and delay.
    let told: (Option<String>, Option<u64>) = (None, None);
    let state = (Some(resp), decoder, std::collections::VecDeque::new(), told);
    stream::unfold(
        state,
        |(mut resp, mut decoder, mut ready, mut told)| async move {
            loop {
                if let Some(event) = ready.pop_front() {
                    return Some((Ok(event), (resp, decoder, ready, told)));
                }
                let body = resp.as_mut()?;
                let mut out = Vec::new();
                match body.chunk().await {
                    Ok(Some(bytes)) => {
                        if let Err(e) = decoder.feed(&bytes, &mut out) {
                            return Some((
                                Err(SseError::Body(Box::new(e))),
                                (None, decoder, ready, told),
                            ));
                        }
                    }
                    Ok(None) => {
                        decoder.finish(&mut out);
                        resp = None;
                    }
                    Err(e) => {
                        return Some((
                            Err(SseError::Body(Box::new(e))),
                            (None, decoder, ready, told),
                        ))
                    }
                }
                // The id and delay as of this read: the SDK keeps the last of
                // each, as the standard's reader does.
                let id = decoder.last_event_id().map(str::to_string);
                let retry = decoder.retry_ms();
                if out.is_empty() && (id != told.0 || retry != told.1) {
                    // An id or delay with no data (a priming event) still counts.
                    ready.push_back(Sse {
                        event: None,
                        data: None,
                        id: id.clone(),
                        retry,
                    });
                }
                ready.extend(out.into_iter().map(|e| Sse {
                    event: e.event,
                    data: Some(e.data),
                    id: id.clone(),
                    retry,
                }));
                told = (id, retry);
                if resp.is_none() && ready.is_empty() {
                    return None;
                }
            }
        },
    )
    .boxed()
}

impl StreamableHttpClient for Client {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        // Non-exhaustive: built by default, then the one limit set.
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let body = serde_json::to_vec(&message)?;
        let had_session = session_id.is_some();
        let resp = self
            .send(auth_header, |auth| {
                self.request(
                    reqwest::Method::POST,
                    &uri,
                    session_id.as_deref(),
                    auth,
                    custom_headers.clone(),
                )
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
            })
            .await?;
        let status = resp.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        if let Some(refusal) = refusal(&resp) {
            return Err(refusal);
        }
        let ct = content_type(&resp);
        if !status.is_success() {
            // A JSON-RPC error in a failed answer is the server's own reason.
            if is_type(&ct, "application/json") {
                let body = bounded_body(resp, limits.max_json_response_size).await?;
                if let Ok(msg @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&body) {
                    return Ok(StreamableHttpPostResponse::Json(msg, None));
                }
                let text = crate::text::one_line(&String::from_utf8_lossy(&body), 200);
                return Err(StreamableHttpError::UnexpectedServerResponse(
                    format!("HTTP {status}: {text}").into(),
                ));
            }
            return Err(status_error(resp, limits.max_error_response_size).await);
        }
        let session = resp
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if is_type(&ct, "text/event-stream") {
            let events = sse_events(resp, limits.max_sse_event_size);
            return Ok(StreamableHttpPostResponse::Sse(events, session));
        }
        if is_type(&ct, "application/json") {
            let body = bounded_body(resp, limits.max_json_response_size).await?;
            let msg = serde_json::from_slice(&body)?;
            return Ok(StreamableHttpPostResponse::Json(msg, session));
        }
        // Some servers answer a notification with an empty 200.
        let body = bounded_body(resp, limits.max_error_response_size).await?;
        if body.is_empty() && !matches!(message, ClientJsonRpcMessage::Request(_)) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(Some(
            crate::text::one_line(&ct, 100),
        )))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let resp = self
            .send(auth_header, |auth| {
                self.request(
                    reqwest::Method::DELETE,
                    &uri,
                    Some(&session_id),
                    auth,
                    custom_headers.clone(),
                )
            })
            .await?;
        // 405: the server keeps sessions until they expire; nothing to do.
        if resp.status().is_success() || resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(status_error(resp, 1024).await)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let max = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let resp = self
            .send(auth_header, |auth| {
                let req = self.request(
                    reqwest::Method::GET,
                    &uri,
                    session_id.as_deref(),
                    auth,
                    custom_headers.clone(),
                );
                match &last_event_id {
                    Some(id) => req.header(LAST_EVENT_ID, id),
                    None => req,
                }
            })
            .await?;
        if let Some(refusal) = refusal(&resp) {
            return Err(refusal);
        }
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !resp.status().is_success() {
            return Err(status_error(resp, 1024).await);
        }
        let ct = content_type(&resp);
        if !is_type(&ct, "text/event-stream") {
            return Err(StreamableHttpError::UnexpectedContentType(Some(
                crate::text::one_line(&ct, 100),
            )));
        }
        Ok(sse_events(resp, max_sse_event_size))
    }
}

#[cfg(test)]
mod tests {
    use super::is_type;

    #[test]
    fn media_types_ignore_parameters_and_case_is_lowered_first() {
        assert!(is_type(
            "text/event-stream; charset=utf-8",
            "text/event-stream"
        ));
        assert!(is_type("application/json", "application/json"));
        assert!(!is_type("application/jsonx", "application/json"));
        assert!(!is_type("", "application/json"));
    }
}
