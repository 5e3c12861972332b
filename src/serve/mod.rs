//! `buddy serve`: the agent over HTTP, a front end like the REPL. Each
//! conversation is a session of the same store the CLI uses; a prompt posted
//! to it runs an agent (`agent::spawn`) that resumes the session, streams the
//! run's events as Server-Sent Events, and closes when the run is done, so the
//! session file is free for `buddy resume` between runs.
//!
//! Events get ids per session and are kept (bounded), so a client that
//! reconnects with `Last-Event-ID` gets what it missed; a dropped client does
//! not stop the run, an interrupt does. A session's record is dropped after
//! ten idle minutes and made again when needed, its ids above the old ones.
//! One run at a time per session: a second prompt is refused (409) unless
//! sent as a steer or a follow-up.
//! Prefixes approved with "always" are kept per session in memory and handed
//! to each run's agent, so they last until the server stops, never on disk.
//!
//! Security: loopback unless a token is set; the token is checked in constant
//! time on every request; `Host` and `Origin` must name this server (DNS
//! rebinding); bodies are bounded. See docs/SERVE.md.

pub mod descriptors;
mod http;
mod live;
mod view;

pub use live::SseName;

use crate::agent::allowlist::SharedAllowList;
use crate::agent::{AgentHandle, HostedError};
use crate::wire::Message;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What the server needs from the application: the session store and a way
/// to start an agent.
pub trait Backend: Send + Sync + 'static {
    /// Creates an empty session now; its id.
    fn create_session(&self) -> Result<String, HostedError>;
    /// The id `query` names (an id, a unique prefix, `last`).
    fn resolve(&self, query: &str) -> Result<String, HostedError>;
    /// Sessions, most recently used first.
    fn list(&self) -> Result<Vec<SessionInfo>, HostedError>;
    /// A session's conversation, read without taking it.
    fn history(&self, id: &str) -> Result<Vec<Message>, HostedError>;
    /// A fresh agent with no session attached, keeping its "always"
    /// answers in `allowed` (the served session's list).
    fn spawn(&self, allowed: SharedAllowList) -> Result<AgentHandle, HostedError>;
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionInfo {
    pub id: String,
    /// Unix seconds of the last write.
    pub used: u64,
    pub messages: u64,
    pub model: String,
    pub title: String,
}

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Required on every request when set; must be set off loopback.
    pub token: Option<String>,
    /// An approval nobody answers is denied after this long.
    pub approval_timeout: Duration,
    /// Largest request body accepted.
    pub max_body: usize,
}

/// Why the server could not run.
#[derive(Debug)]
pub enum ServeError {
    /// Binding a non-loopback address without a token.
    TokenRequired(SocketAddr),
    Bind(SocketAddr, std::io::Error),
    Serve(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::TokenRequired(a) => write!(
                f,
                "{a} is not a loopback address: set a token with --token or BUDDY_SERVE_TOKEN so only clients that know it can drive buddy"
            ),
            ServeError::Bind(a, e) => write!(f, "cannot listen on {a}: {e}"),
            ServeError::Serve(e) => write!(f, "the server stopped: {e}"),
        }
    }
}

impl std::error::Error for ServeError {}

/// Serves until SIGINT or SIGTERM, then interrupts running sessions, waits
/// until they are saved, and returns. `ready` gets the bound address.
pub async fn run(
    opts: ServeOptions,
    backend: Arc<dyn Backend>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    if !opts.listen.ip().is_loopback() && opts.token.is_none() {
        return Err(ServeError::TokenRequired(opts.listen));
    }
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| ServeError::Bind(opts.listen, e))?;
    let addr = listener.local_addr().map_err(ServeError::Serve)?;
    let state = http::State::new(opts, backend, addr);
    let router = http::router(state.clone());
    // Ends with the runtime, when `run` has returned.
    tokio::spawn(state.clone().sweep());
    ready(addr);
    let stop = state.clone();
    axum::serve(without_nagle(listener), router)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            // SSE streams end and running sessions are interrupted and saved.
            stop.shut_down().await;
        })
        .await
        .map_err(ServeError::Serve)?;
    state.wait_saved().await;
    Ok(())
}

/// Every accepted connection sends each write at once. An SSE event is one
/// small write; with Nagle's algorithm on, one written while the last is not
/// yet acknowledged waits for the client's delayed ACK, up to 40 ms.
fn without_nagle(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        // Failing only costs latency; the connection itself is fine.
        let _ = tcp.set_nodelay(true);
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        Some(()) = async { term.as_mut()?.recv().await } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;

    #[tokio::test]
    async fn accepted_connections_do_not_wait_for_acks() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = without_nagle(listener);
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().unwrap(), "Nagle's algorithm is still on");
        drop(client);
    }
}
