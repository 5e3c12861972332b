//! `buddy serve`: the agent over HTTP, a front end like the REPL. Each
//! conversation is a session of the same store the CLI uses; a prompt posted
//! to it runs the session's agent (`agent::spawn`, built at its first prompt
//! and kept until idle) that resumes the session, streams the run's events as
//! Server-Sent Events, and releases the session file when the run is done, so
//! it is free for `buddy resume` between runs.
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
//! rebinding); bodies are bounded. Connections, live agents, running
//! sessions and SSE subscribers are capped ([`Limits`]: a 503 with
//! `Retry-After` when full; at the connection cap the connection waiting
//! longest for a request head makes room first), and a client slow to send
//! its request, or on whose connection nothing moves, is cut off. See docs/SERVE.md.
//!
//! For a team (`team.rs`): users with their own tokens (`users.rs`), each
//! seeing only the sessions they created, with limits of their own (kept in
//! PostgreSQL for every instance when the sessions are: `team_pg.rs`); an
//! audit log of what changed (`audit.rs`); `GET /metrics` (`metrics.rs`).

mod accept;
mod admission;
mod audit;
pub mod descriptors;
mod follow;
mod forwarded;
mod guard;
mod http;
mod live;
mod metrics;
pub mod relay;
mod rewind;
mod team;
pub mod team_pg;
mod users;
mod view;

pub use crate::http_guard::public_name;
/// The accept loop (connection cap, header and idle timeouts, drain), for
/// `buddy mcp-server --listen`, which serves other routes with these limits.
pub(crate) use accept::serve as accept_connections;
pub use audit::{AuditOptions, AUDIT_MAX_BYTES};
pub use forwarded::TrustedProxies;
pub use live::SseName;
pub use team::TeamOptions;
pub use users::{add_user, Users, UsersError};

use crate::agent::allowlist::SharedAllowList;
use crate::agent::protocol::SessionSummary;
use crate::agent::{AgentHandle, HostedError};
use crate::wire::Message;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What the server needs from the application: the session store and a way
/// to start an agent.
pub trait Backend: Send + Sync + 'static {
    /// Creates an empty session now, owned by `owner` (a user's name) where
    /// the store keeps owners with the sessions (PostgreSQL); its id.
    fn create_session(&self, owner: Option<&str>) -> Result<String, HostedError>;
    /// The id `query` names (an id, a unique prefix, `last`).
    fn resolve(&self, query: &str) -> Result<String, HostedError>;
    /// Sessions, most recently used first.
    fn list(&self) -> Result<Vec<SessionSummary>, HostedError>;
    /// A session's conversation, read without taking it.
    fn history(&self, id: &str) -> Result<Vec<Message>, HostedError>;
    /// `history`, with the sub-agents' conversations by the call id that
    /// ran each (a grandchild's under `CHILD_CALL/ITS_CALL`).
    #[allow(clippy::type_complexity)]
    fn transcript(
        &self,
        id: &str,
    ) -> Result<(Vec<Message>, Vec<(String, Vec<Message>)>), HostedError> {
        Ok((self.history(id)?, Vec::new()))
    }
    /// A fresh agent with no session attached, keeping its "always"
    /// answers in `allowed` (the served session's list).
    fn spawn(&self, allowed: SharedAllowList) -> Result<AgentHandle, HostedError>;
    /// The model and the directory, for the page's header.
    fn about(&self) -> About {
        About::default()
    }
    /// Deletes a session nothing holds: its file and what lies beside it.
    /// Refused (`SessionInUse`) while another process holds it.
    fn delete(&self, id: &str) -> Result<(), HostedError> {
        Err(format!("session {id} cannot be deleted here").into())
    }
    /// Where events go when several servers share this store; none when
    /// this server is the only one (`relay.rs`).
    fn relay(&self) -> Option<Arc<dyn relay::Relay>> {
        None
    }
}

/// What the page shows about the server it talks to.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct About {
    pub model: String,
    pub profile: String,
    /// The directory whose sessions are listed and where tools work.
    pub cwd: String,
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
    /// Users, their limits and the audit log; the default is none of them.
    pub team: TeamOptions,
    /// Public names and trusted proxies, for a server behind a load
    /// balancer; the default is neither.
    pub balancer: BalancerOptions,
}

/// How a server behind a load balancer meets its clients.
#[derive(Debug, Clone, Default)]
pub struct BalancerOptions {
    /// Names the balancer is reached by, answered in Host and Origin as the
    /// server's own (checked and lowercased by [`public_name`]). Any of
    /// them makes a token required, as a non-loopback address does.
    pub public_hosts: Vec<String>,
    /// Peers whose `X-Forwarded-For` names the client (the audit log's
    /// address); from any other peer the header is ignored.
    pub trusted_proxies: TrustedProxies,
}

/// How much of this server a set of clients may hold at once. A server
/// other people reach must not let one of them (or a flood) take every
/// descriptor, thread or megabyte it has; past each cap a client gets a 503
/// with `Retry-After` and tries again.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections, idle kept-alive ones included: each costs a
    /// descriptor and a task. When full, the connection that has waited
    /// longest for a request head is closed to make room; with every one
    /// busy with a request, a 503. Lowered at start-up to what the
    /// descriptor limit leaves room for ([`Limits::connections_within`]).
    pub connections: usize,
    /// Sessions with a live agent, running or kept idle for the next
    /// prompt: each holds its tools, prompt and history in memory. When
    /// full, the agent idle longest is closed to make room; with none idle,
    /// a 503.
    pub sessions: usize,
    /// Sessions running a prompt at once: each is an agent with a model
    /// stream, tools and an event log of up to 8 MiB.
    pub running: usize,
    /// SSE subscribers of one session: each is a stream the session's every
    /// event is written to.
    pub subscribers: usize,
    /// SSE subscribers of the whole server (`GET …/events`).
    pub subscribers_total: usize,
    /// How long a client has to send a request's head once the connection
    /// waits for one (a new connection, or a kept-alive one between
    /// requests): slow or idle clients cannot hold connection slots.
    pub header_timeout: Duration,
    /// A connection on which no byte moved either way for this long is
    /// closed: a client that stops reading its response (a stream's
    /// keep-alives then pile up unread) cannot hold its slot for ever.
    pub idle_timeout: Duration,
    /// A session's agent idle this long (no run) is closed; the next prompt
    /// builds a new one.
    pub agent_idle: Duration,
}

/// Far more than one person's browser tabs and scripts use, far fewer than
/// the 1024 descriptors a process often gets (sessions and tools need some).
pub const MAX_CONNECTIONS: usize = 256;
/// Live agents: a team's open conversations, each some hundreds of KiB
/// (docs/PERFORMANCE.md, idle session), so 256 stay well under a gigabyte.
pub const MAX_SESSIONS: usize = 256;
/// Runs at once: more than a team drives and than the 100 prompts at once of
/// the load benchmark (benches/serve.rs), few enough for one machine's
/// memory (a running session's log may reach 8 MiB).
pub const MAX_RUNNING: usize = 128;
/// Tabs following one session; a page holds one.
pub const MAX_SUBSCRIBERS: usize = 32;
/// Three quarters of the connections: streams never take the places the
/// requests that end (prompts, approvals, the page) need.
pub const MAX_SUBSCRIBERS_TOTAL: usize = 192;
/// A browser sends a request's head in one write; ten seconds is ample on
/// any link, and short enough that a slowloris client cannot pile up.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Four of a quiet stream's keep-alives (every 15 s): a client reading its
/// stream is never idle this long, one that stopped reading is.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// A person reading an answer and typing the next prompt keeps the agent;
/// one who went away gives its memory back within minutes.
pub const AGENT_IDLE: Duration = Duration::from_secs(5 * 60);
/// Request bodies larger than this are refused (413): a prompt of a
/// thousand pages still fits.
pub const MAX_BODY: usize = 1024 * 1024;
/// What a refused client is told to wait before trying again, in seconds.
pub const RETRY_AFTER_SECS: u64 = 5;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: MAX_CONNECTIONS,
            sessions: MAX_SESSIONS,
            running: MAX_RUNNING,
            subscribers: MAX_SUBSCRIBERS,
            subscribers_total: MAX_SUBSCRIBERS_TOTAL,
            header_timeout: HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            agent_idle: AGENT_IDLE,
        }
    }
}

/// Descriptors the process keeps for itself beyond connections and
/// sessions: the listener, the runtime, logs, the tools' pipes.
const OWN_DESCRIPTORS: u64 = 64;

impl Limits {
    /// Descriptors the server may hold at these limits: one per connection
    /// (with those being refused or closing after an eviction), and per
    /// running session its model connection, its session file and one for
    /// its tools, with room for the process's own.
    pub fn descriptors(&self) -> u64 {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        n(self.connections)
            .saturating_add(n(accept::REFUSING_AT_ONCE + admission::CLOSING_AT_ONCE))
            .saturating_add(n(self.running).saturating_mul(3))
            .saturating_add(OWN_DESCRIPTORS)
    }

    /// The connection cap that fits in `nofile` descriptors next to
    /// everything else [`Limits::descriptors`] counts, never above the one
    /// asked for and never below a quarter of `nofile`. An accept that fails
    /// for want of a descriptor cannot make room by evicting anyone, so the
    /// cap must be reached first.
    pub fn connections_within(&self, nofile: u64) -> usize {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let others = self.descriptors().saturating_sub(n(self.connections));
        let room = nofile.saturating_sub(others).max(nofile / 4).max(1);
        usize::try_from(room).map_or(self.connections, |r| r.min(self.connections))
    }
}

/// What the server started with, for the caller to show.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    pub addr: SocketAddr,
    /// The connection cap in force: the one asked for, or lower when the
    /// descriptor limit leaves room for fewer.
    pub connections: usize,
    /// The cap asked for (flag, config or default).
    pub connections_asked: usize,
    /// The soft descriptor limit after the server raised it.
    pub nofile: u64,
}

/// Why the server could not run.
#[derive(Debug)]
pub enum ServeError {
    /// Binding a non-loopback address without a token.
    TokenRequired(SocketAddr),
    /// Public host names without a token: the balancer brings anyone.
    PublicHostsNeedToken,
    Bind(SocketAddr, std::io::Error),
    Serve(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::TokenRequired(a) => write!(
                f,
                "{a} is not a loopback address: set a token with --token or BUDDY_SERVE_TOKEN (or add users: buddy serve add-user NAME) so only clients that know one can drive buddy"
            ),
            ServeError::PublicHostsNeedToken => write!(
                f,
                "public host names bring clients from beyond this machine: set a token with --token or BUDDY_SERVE_TOKEN (or add users: buddy serve add-user NAME) so only clients that know one can drive buddy"
            ),
            ServeError::Bind(a, e) => write!(f, "cannot listen on {a}: {e}"),
            ServeError::Serve(e) => write!(f, "the server stopped: {e}"),
        }
    }
}

impl std::error::Error for ServeError {}

/// Serves until `shutdown` completes (the caller's to choose: a signal for
/// `buddy serve`, anything for a test or a bench), then interrupts running
/// sessions, waits until they are saved, stops the session sweep and
/// returns. `ready` gets the bound address and the connection cap in force.
pub async fn run(
    opts: ServeOptions,
    backend: Arc<dyn Backend>,
    ready: impl FnOnce(Started),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    if !opts.listen.ip().is_loopback() && opts.token.is_none() && opts.team.users.is_empty() {
        return Err(ServeError::TokenRequired(opts.listen));
    }
    if !opts.balancer.public_hosts.is_empty() && opts.token.is_none() && opts.team.users.is_empty()
    {
        return Err(ServeError::PublicHostsNeedToken);
    }
    let listener = listen(opts.listen).map_err(|e| ServeError::Bind(opts.listen, e))?;
    let addr = listener.local_addr().map_err(ServeError::Serve)?;
    let mut limits = opts.limits.clone();
    // Before the first connection: growing the table now waits once, with
    // nothing streaming yet (descriptors.rs).
    let nofile = descriptors::raise(limits.descriptors());
    let asked = limits.connections;
    limits.connections = limits.connections_within(nofile);
    let state = http::State::new(opts, backend, addr);
    let router = http::router(state.clone(), rewind::routes());
    // Owned here: it ends when the server is stopping, and is awaited below.
    let sweep = tokio::spawn(state.clone().sweep());
    // The same for the relay's follower, when servers share sessions.
    let follower = state.follow().map(tokio::spawn);
    ready(Started {
        addr,
        connections: limits.connections,
        connections_asked: asked,
        nofile,
    });
    let stop = state.clone();
    let stopped = async move {
        shutdown.await;
        // SSE streams end and running sessions are interrupted and saved.
        stop.shut_down().await;
    };
    let open = state.open_connections();
    accept::serve(
        listener,
        router,
        &limits,
        open,
        state.stopping_rx(),
        stopped,
    )
    .await;
    // `stopping` is sent again (the accept loop ends only after it was) so
    // the sweep surely ends; a sweep that panicked has nothing left to stop.
    state.shut_down().await;
    let _ = sweep.await;
    if let Some(f) = follower {
        let _ = f.await;
    }
    Ok(())
}

/// Connections the kernel completes and queues for the accept loop. When the
/// queue is full it drops new handshakes, and a dropped client tries again
/// only after a second; a flood must not cost other clients that second
/// while the loop catches up. The kernel caps it at `net.core.somaxconn`
/// (4096 by default since Linux 5.4); tokio's own `bind` asks for 1024.
const LISTEN_BACKLOG: u32 = 4096;

fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restart can bind while the old
    // server's connections are in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// SIGINT or SIGTERM: what stops `buddy serve` run from a shell or a
/// service manager.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        Some(()) = async { term.as_mut()?.recv().await } => {}
    }
}

/// An empty directory of this test process's own, for unit tests that
/// write files.
#[cfg(test)]
pub(crate) fn scratch_dir(label: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("buddy-serve-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a scratch directory");
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_fits_in_the_descriptor_limit() {
        let asked = Limits {
            connections: 5_000,
            ..Limits::default()
        };
        // Room enough: the cap asked for.
        assert_eq!(asked.connections_within(asked.descriptors()), 5_000);
        // 4,096 descriptors: what the running sessions (3 x 128), refusals
        // and closings (128) and the process (64) leave.
        assert_eq!(asked.connections_within(4_096), 4_096 - 384 - 128 - 64);
        // Too few for the rest: a quarter of the limit, never none.
        assert_eq!(asked.connections_within(512), 128);
        assert_eq!(asked.connections_within(2), 1);
        assert_eq!(
            Limits::default().connections_within(u64::MAX),
            MAX_CONNECTIONS
        );
    }
}
