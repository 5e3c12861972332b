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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::{Event, EventKind};
    use std::time::Duration;

    /// A store that announces nothing and holds `stored`; `reconnect` says
    /// its connection was made again.
    struct Quiet {
        stored: Vec<(u64, String)>,
        announce: broadcast::Sender<(String, u64)>,
        reconnect: watch::Sender<u64>,
        /// Made with the store, as the PostgreSQL store's is: a reconnect
        /// before the follower started is still news to it.
        reconnected: watch::Receiver<u64>,
    }

    #[async_trait::async_trait]
    impl Relay for Quiet {
        fn append(&self, _: &str, _: String) {}
        fn last_id(&self, _: &str) -> Result<u64, crate::agent::HostedError> {
            Ok(0)
        }
        async fn between(
            &self,
            _: &str,
            after: u64,
            before: u64,
        ) -> Result<Vec<(u64, String)>, crate::agent::HostedError> {
            Ok(self
                .stored
                .iter()
                .filter(|(id, _)| *id > after && *id < before)
                .cloned()
                .collect())
        }
        fn announced(&self) -> broadcast::Receiver<(String, u64)> {
            self.announce.subscribe()
        }
        fn reconnected(&self) -> watch::Receiver<u64> {
            self.reconnected.clone()
        }
    }

    fn text(t: &str) -> String {
        serde_json::to_string(&Event {
            run: 1,
            seq: 0,
            op_id: None,
            kind: EventKind::TextDelta { text: t.into() },
        })
        .unwrap()
    }

    /// Events stored while the store's LISTEN was down were never
    /// announced: after the reconnect the follower reads them from the rows.
    #[tokio::test]
    async fn after_a_reconnect_the_follower_reads_what_was_stored_unannounced() {
        let (reconnect, reconnected) = watch::channel(0);
        let relay = Arc::new(Quiet {
            stored: vec![(3, text("a")), (4, text("b"))],
            announce: broadcast::channel(4).0,
            reconnect,
            reconnected,
        });
        let live = Live::relayed("s".into(), None, relay.clone(), 2);
        let mut sub = live.subscribe(0);
        let sessions = Arc::new(Mutex::new(HashMap::from([("s".to_string(), live.clone())])));
        let (stop, stopping) = watch::channel(false);
        let task = tokio::spawn(follow(relay.clone(), sessions, stopping));
        relay.reconnect.send_modify(|n| *n += 1);
        let mut got = Vec::new();
        while got.len() < 2 {
            let ev = tokio::time::timeout(Duration::from_secs(10), sub.live.recv())
                .await
                .expect("the stored events arrive")
                .unwrap();
            got.push(ev.id);
        }
        assert_eq!(got, vec![3, 4]);
        assert_eq!(live.next_id(), 5);
        let _ = stop.send(true);
        task.await.unwrap();
    }
}
