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
//! rebinding); bodies are bounded. Connections, running sessions and SSE
//! subscribers are capped ([`Limits`]: a 503 with `Retry-After` when full),
//! and a client slow to send its request is cut off. See docs/SERVE.md.

mod accept;
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
    pub limits: Limits,
}

/// How much of this server a set of clients may hold at once. A server
/// other people reach must not let one of them (or a flood) take every
/// descriptor, thread or megabyte it has; past each cap a client gets a 503
/// with `Retry-After` and tries again.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections, idle kept-alive ones included: each costs a
    /// descriptor and a task.
    pub connections: usize,
    /// Sessions running a prompt at once: each is an agent with a model
    /// stream, tools and an event log of up to 8 MiB.
    pub running: usize,
    /// SSE subscribers of one session: each is a stream the session's every
    /// event is written to.
    pub subscribers: usize,
    /// How long a client has to send a request's head once the connection
    /// waits for one (a new connection, or a kept-alive one between
    /// requests): slow or idle clients cannot hold connection slots.
    pub header_timeout: Duration,
}

/// Far more than one person's browser tabs and scripts use, far fewer than
/// the 1024 descriptors a process often gets (sessions and tools need some).
pub const MAX_CONNECTIONS: usize = 256;
/// Runs at once: more than a team drives and than the 100 prompts at once of
/// the load benchmark (benches/serve.rs), few enough for one machine's
/// memory (a running session's log may reach 8 MiB).
pub const MAX_RUNNING: usize = 128;
/// Tabs following one session; a page holds one.
pub const MAX_SUBSCRIBERS: usize = 32;
/// A browser sends a request's head in one write; ten seconds is ample on
/// any link, and short enough that a slowloris client cannot pile up.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// What a refused client is told to wait before trying again, in seconds.
pub const RETRY_AFTER_SECS: u64 = 5;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: MAX_CONNECTIONS,
            running: MAX_RUNNING,
            subscribers: MAX_SUBSCRIBERS,
            header_timeout: HEADER_TIMEOUT,
        }
    }
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
    let limits = opts.limits.clone();
    let state = http::State::new(opts, backend, addr);
    let router = http::router(state.clone());
    // Ends with the runtime, when `run` has returned.
    tokio::spawn(state.clone().sweep());
    ready(addr);
    let stop = state.clone();
    let stopped = async move {
        shutdown_signal().await;
        // SSE streams end and running sessions are interrupted and saved.
        stop.shut_down().await;
    };
    accept::serve(listener, router, &limits, state.stopping_rx(), stopped).await;
    state.wait_saved().await;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        Some(()) = async { term.as_mut()?.recv().await } => {}
    }
}
