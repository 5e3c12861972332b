//! The follower of a [`Relay`]: one task per server that takes every event
//! the relay announces into the record of its session, when this server has
//! one, in order and once each. With a relay in use it is the one way events
//! reach the records' logs (`Live::ingest`), this server's own runs' events
//! included. When the store's connection was lost and made again, the
//! announcements of the meantime are gone: every record reads the stored
//! events past the last it has.

use super::live::Live;
use super::relay::Relay;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, watch};

/// Puts every announced event of a session this server has a record of
/// into that record, in order, until `stopping`. The one writer of the
/// records' logs when a relay is in use, so no event is taken twice.
pub async fn follow(
    relay: Arc<dyn Relay>,
    sessions: Arc<Mutex<HashMap<String, Arc<Live>>>>,
    mut stopping: watch::Receiver<bool>,
) {
    let mut announced = relay.announced();
    let mut reconnected = relay.reconnected();
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
            // A store that never reconnects (gone) leaves the others.
            Ok(()) = reconnected.changed() => Err(broadcast::error::RecvError::Lagged(0)),
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
                // Some announcements were lost (too many at once, or while
                // the store was reconnecting): read every record's news.
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
