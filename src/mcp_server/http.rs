//! `buddy mcp-server --listen ADDR`: the same two tools over MCP's
//! Streamable HTTP at `/mcp`, so programs on other machines can call buddy.
//!
//! Both eras are rmcp's server side (`StreamableHttpService`): a 2026-07-28
//! request is served statelessly (`server/discover`, `_meta` on every
//! request, the `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers
//! checked, `resultType`), an older client `initialize`s and gets an
//! `Mcp-Session-Id`, answers coming as SSE (whose keep-alives hold a long
//! call's connection open). Ours around it: the rules of `buddy serve`
//! (`crate::http_guard`: Host and Origin must name this server, a token
//! required off loopback, bodies bounded in size and time) and serve's
//! accept loop (a connection cap, header and idle timeouts, a drain on
//! stop). Calls still run one at a time on the worker of `super`.
//!
//! Not here: the tools and the calls themselves (`super`), what a call's
//! agent is (the composition root).

use super::{AgentFactory, Handler, Known, Worker, MAX_REQUEST_BYTES, QUEUE};
use crate::http_guard::{self, Refusal};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The one path the tools are served at (the spec's customary endpoint).
pub const PATH: &str = "/mcp";

/// Sessions of older clients (2025-era `initialize`) open at once: each is
/// a task and a channel until it is closed or idle for five minutes (the
/// SDK's keep-alive). Far more than the clients of one machine's buddy; a
/// client that opens session after session gets a 503 past it. Counted as
/// the handlers alive ([`Alive`]), which includes the 2026-07-28 requests
/// in flight: the SDK's own map of sessions keeps those that timed out.
pub const MAX_SESSIONS: usize = 256;
/// What a client refused for want of a session is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 5;

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub listen: SocketAddr,
    /// Required as `Authorization: Bearer …` on every request when set;
    /// must be set off loopback.
    pub token: Option<String>,
}

/// Why `buddy mcp-server --listen` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0} is not a loopback address: set a token with --token or {env} so only clients that know it can call buddy", env = crate::config::MCP_SERVER_TOKEN_ENV)]
    TokenRequired(SocketAddr),
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, #[source] std::io::Error),
}

/// Serves the tools on `opts.listen` until `shutdown` completes, running
/// calls on agents from `factory`, in `home` when a call names no
/// directory. `ready` gets the bound address before the first request.
/// On shutdown, the call running is interrupted (and saved) and open
/// connections are given serve's drain time.
pub async fn serve<F: AgentFactory>(
    factory: F,
    home: PathBuf,
    opts: HttpOptions,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HttpError> {
    if !opts.listen.ip().is_loopback() && opts.token.is_none() {
        return Err(HttpError::TokenRequired(opts.listen));
    }
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| HttpError::Bind(opts.listen, e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| HttpError::Bind(opts.listen, e))?;
    let (jobs, queue) = mpsc::channel(QUEUE);
    let stopped = CancellationToken::new();
    let router = router(addr, opts.token, jobs, stopped.clone());
    let (stopping_tx, stopping) = watch::channel(false);
    ready(addr);
    // One owner for the stop: it ends the SDK's sessions and streams (a
    // call in progress is cancelled, so interrupted), the accept loop and
    // the worker.
    let stop_all = async move {
        shutdown.await;
        stopped.cancel();
        let _ = stopping_tx.send(true);
    };
    let until_stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let limits = crate::serve::Limits::default();
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let accepting = crate::serve::accept_connections(
        listener,
        router,
        &limits,
        open,
        stopping.clone(),
        until_stopped(stopping.clone()),
    );
    let mut worker = Worker {
        factory,
        home,
        known: Known::default(),
    };
    // The worker stays on this task: an agent factory need not be `Send`.
    tokio::join!(
        stop_all,
        accepting,
        worker.work(queue, until_stopped(stopping))
    );
    Ok(())
}

/// What the guard checks against.
#[derive(Clone)]
struct Guard {
    addr: SocketAddr,
    token: Option<Arc<str>>,
    /// The handlers alive, counted before a new session is opened.
    handlers: Arc<AtomicUsize>,
}

/// One handler alive in the count of [`Guard::handlers`], until dropped
/// with its handler (its session closed or timed out, or its stateless
/// request answered).
pub(super) struct Alive(Arc<AtomicUsize>);

impl Alive {
    fn count(n: &Arc<AtomicUsize>) -> Alive {
        n.fetch_add(1, Ordering::Relaxed);
        Alive(Arc::clone(n))
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `/mcp` as rmcp's service behind the guard; any other path is a 404.
fn router(
    addr: SocketAddr,
    token: Option<String>,
    jobs: mpsc::Sender<super::Job>,
    stopped: CancellationToken,
) -> Router {
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked by the guard, with serve's rules
        // (the SDK's own list would refuse this host's other names when
        // bound to every interface).
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
        .with_cancellation_token(stopped);
    let handlers = Arc::new(AtomicUsize::new(0));
    let alive = Arc::clone(&handlers);
    let service = StreamableHttpService::new(
        move || {
            Ok(Handler {
                jobs: jobs.clone(),
                _alive: Some(Alive::count(&alive)),
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard = Guard {
        addr,
        token: token.map(Arc::from),
        handlers,
    };
    Router::new()
        .route_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(guard, check))
}

/// Every request, before rmcp sees it: the Host and Origin name this
/// server, the token when one is set, the body within its bounds.
async fn check(State(guard): State<Guard>, req: Request, next: Next) -> Response {
    if let Err(refusal) = http_guard::same_site(guard.addr, &[], &req) {
        return refused(refusal);
    }
    if let Some(token) = &guard.token {
        let given = http_guard::bearer(req.headers());
        if !given.is_some_and(|g| http_guard::same_secret(g.as_bytes(), token.as_bytes())) {
            let mut response = refused(Refusal {
                status: StatusCode::UNAUTHORIZED,
                message: "a valid token is required (Authorization: Bearer …)".into(),
            });
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    let req = match http_guard::bounded(req, MAX_REQUEST_BYTES).await {
        Ok(req) => req,
        Err(refusal) => return refused(refusal),
    };
    // The SDK opens sessions without a bound: at the cap, a request that
    // could open one is read to see whether it does.
    let full = guard.handlers.load(Ordering::Relaxed) >= MAX_SESSIONS;
    if full && req.method() == Method::POST && req.headers().get(SESSION_ID).is_none() {
        let (parts, body) = req.into_parts();
        let bytes = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
            .await
            .unwrap_or_default();
        if opens_a_session(&bytes) {
            let mut response = refused(Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!("{MAX_SESSIONS} sessions are open; try again later"),
            });
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            return response;
        }
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    }
    next.run(req).await
}

/// The header an older client's session travels in.
const SESSION_ID: &str = "mcp-session-id";

/// Whether a POST body is an `initialize` request (alone, or in a batch):
/// what opens a session.
fn opens_a_session(body: &[u8]) -> bool {
    let is_init =
        |v: &serde_json::Value| v.get("method").and_then(|m| m.as_str()) == Some("initialize");
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(items)) => items.iter().any(is_init),
        Ok(one) => is_init(&one),
        Err(_) => false,
    }
}

/// A refusal as MCP clients read one: a JSON-RPC error with no id (the
/// request was not read), under the refusal's status.
fn refused(refusal: Refusal) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": refusal.message},
    });
    (refusal.status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_initialize_opens_a_session() {
        assert!(opens_a_session(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(opens_a_session(br#"[{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#));
        assert!(!opens_a_session(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!opens_a_session(b"not json"));
    }
}
