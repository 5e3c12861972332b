//! Sessions' events shared between servers. With one server, a session's
//! events live in its record (`live.rs`) and get their ids there. When
//! several servers share a session store (PostgreSQL), a run on one server
//! must reach clients of another, and `Last-Event-ID` must mean the same on
//! each; so events are handed to a [`Relay`], which stores them in order
//! with an id of the store's and announces them to every server. Each
//! server's follower ([`follow`]) then puts them into its own records, its
//! own runs' events included, and clients see them as with one server.
//!
//! This module owns the seam and the follower; the store behind it is the
//! application's (`app/serve.rs` over `session::postgres`).

use super::live::Live;
use crate::agent::HostedError;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
}

/// Puts every announced event of a session this server has a record of
/// into that record, in order, until `stopping`. The one writer of the
/// records' logs when a relay is in use, so no event is taken twice.
pub async fn follow(
    relay: Arc<dyn Relay>,
    sessions: Arc<Mutex<HashMap<String, Arc<Live>>>>,
    mut stopping: watch::Receiver<bool>,
) {
    let mut announced = relay.announced();
    let live_of = |id: &str| {
        sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    };
    loop {
        let notice = tokio::select! {
            _ = stopping.wait_for(|s| *s) => return,
            n = announced.recv() => n,
        };
        match notice {
            Ok((id, event)) => {
                if let Some(live) = live_of(&id) {
                    if event >= live.next_id() {
                        catch_up(relay.as_ref(), &live).await;
                    }
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                // Some announcements were lost: read every record's news.
                let all: Vec<Arc<Live>> = sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .cloned()
                    .collect();
                for live in all {
                    catch_up(relay.as_ref(), &live).await;
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Reads `live`'s stored events after the last it has and takes them in.
/// Also for a record just made: an announcement that came before it was in
/// the map found nothing to feed.
pub async fn catch_up(relay: &dyn Relay, live: &Live) {
    let after = live.next_id().saturating_sub(1);
    if let Ok(events) = relay.between(&live.id, after, u64::MAX).await {
        for (id, data) in events {
            live.ingest(id, data);
        }
    }
}
