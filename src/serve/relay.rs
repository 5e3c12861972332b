//! Sessions' events shared between servers. With one server, a session's
//! events live in its record (`live.rs`) and get their ids there. When
//! several servers share a session store (PostgreSQL), a run on one server
//! must reach clients of another, and `Last-Event-ID` must mean the same on
//! each; so events are handed to a [`Relay`], which stores them in order
//! with an id of the store's and announces them to every server. Each
//! server's follower (`follow.rs`) then puts them into its own records, its
//! own runs' events included, and clients see them as with one server.
//!
//! This module owns the seam; the store behind it is the application's
//! (`app/serve_pg.rs` over `session::postgres`).

use crate::agent::HostedError;
use async_trait::async_trait;
use tokio::sync::{broadcast, watch};

/// Events a reconnecting client gets from the store beyond what the
/// server's record still holds: far more than one run makes, and a bound
/// on one answer.
pub const MAX_CATCH_UP: usize = 100_000;

/// Where served events go when servers share their sessions.
#[async_trait]
pub trait Relay: Send + Sync + 'static {
    /// Stores an event of `session` (its JSON) after every one handed over
    /// before it, and announces it. Does not wait.
    fn append(&self, session: &str, data: String);
    /// The id of `session`'s last stored event; 0 for none.
    fn last_id(&self, session: &str) -> Result<u64, HostedError>;
    /// `session`'s stored events with `after < id < before`, in order, at
    /// most [`MAX_CATCH_UP`].
    async fn between(
        &self,
        session: &str,
        after: u64,
        before: u64,
    ) -> Result<Vec<(u64, String)>, HostedError>;
    /// `(session, id)` of each event stored from now on, by any server.
    fn announced(&self) -> broadcast::Receiver<(String, u64)>;
    /// Changes each time the store's connection was lost and made again,
    /// once announcements are heard again: those made meanwhile were
    /// missed, and a follower reads the stored events instead. Never, for
    /// a store that keeps its connection.
    fn reconnected(&self) -> watch::Receiver<u64> {
        watch::channel(0).1
    }
    /// Events the store failed to keep at the first try, since the start
    /// (`/metrics` counts them as store errors).
    fn failures(&self) -> u64 {
        0
    }
}
