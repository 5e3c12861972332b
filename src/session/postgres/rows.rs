//! A session's records as rows, and the lease that makes one instance its
//! only writer.
//!
//! A lease is a row (session, holder, expiry) taken with a conditional
//! upsert: free, expired, or already ours. The instance renews the leases it
//! holds while their sessions are open ([`Leases::renew_every`]), and drops
//! one when its session is closed. A crashed instance renews nothing, so its
//! leases lapse after the bound and another instance may take the session.
//!
//! Every append checks, in the statement that inserts, that the lease is
//! still this writer's (and holds the lease row while it inserts): a writer
//! that lost its lease (paused past the bound, then taken over) cannot add
//! a row after its successor's. An append returns once its rows are
//! committed: a record the agent was told is saved is a committed row.

use super::db::{Commit, Db};
use crate::session::journal::{self, RecordSink};
use std::collections::HashSet;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The holders of this instance whose leases are renewed.
#[derive(Clone, Default)]
pub struct Leases {
    held: Arc<Mutex<HashSet<String>>>,
}

impl Leases {
    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Renews every lease held, three times per bound, for as long as the
    /// database thread runs: a renewal may miss twice before one lapses.
    pub fn renew_every(&self, db: &Db, bound: Duration) {
        let me = self.clone();
        let secs = bound.as_secs_f64();
        db.spawn_linked(move |mut link| async move {
            let mut tick = tokio::time::interval(bound / 3);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let held: Vec<String> = me.held().iter().cloned().collect();
                if held.is_empty() {
                    continue;
                }
                // While the database is away this waits for it: a lease
                // that lapsed meanwhile is renewed if nobody took it.
                let Some(c) = link.client(Commit::Durable).await else {
                    return;
                };
                let _ = c
                    .execute(
                        "UPDATE buddy_leases SET expires = now() + make_interval(secs => $2)
                         WHERE holder = ANY($1)",
                        &[&held, &secs],
                    )
                    .await;
            }
        });
    }
}

/// Why a lease was not taken.
pub enum Refused {
    /// No such session.
    Missing,
    /// Held by `holder` for `secs` more seconds, unless renewed.
    Held { holder: String, secs: u64 },
}

/// Takes session `id`'s lease for `holder`, for `bound`.
pub fn take(
    db: &Db,
    id: &str,
    holder: &str,
    bound: Duration,
) -> Result<Result<(), Refused>, String> {
    let (id, holder) = (id.to_string(), holder.to_string());
    let secs = bound.as_secs_f64();
    db.call(move |c| async move {
        let taken = c
            .query_opt(
                "INSERT INTO buddy_leases (session_id, holder, expires)
                 SELECT id, $2, now() + make_interval(secs => $3) FROM buddy_sessions WHERE id = $1
                 ON CONFLICT (session_id) DO UPDATE
                     SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
                     WHERE buddy_leases.expires < now() OR buddy_leases.holder = EXCLUDED.holder
                 RETURNING holder",
                &[&id, &holder, &secs],
            )
            .await?;
        if taken.is_some() {
            return Ok(Ok(()));
        }
        let row = c
            .query_opt(
                "SELECT holder, ceil(extract(epoch FROM expires - now()))::bigint
                 FROM buddy_leases WHERE session_id = $1",
                &[&id],
            )
            .await?;
        Ok(Err(match row {
            Some(r) => Refused::Held {
                holder: r.get(0),
                secs: u64::try_from(r.get::<_, Option<i64>>(1).unwrap_or(0)).unwrap_or(0),
            },
            None => Refused::Missing,
        }))
    })
}

/// The write end of a session in the database, holding its lease.
pub struct RowSink {
    db: Db,
    leases: Leases,
    id: String,
    holder: String,
    /// The next record's place.
    seq: i64,
}

impl RowSink {
    /// A writer for session `id` whose lease `holder` took; `seq` rows are
    /// there already. The lease is renewed until the sink is dropped.
    pub fn new(db: Db, leases: Leases, id: String, holder: String, seq: i64) -> RowSink {
        leases.held().insert(holder.clone());
        RowSink {
            db,
            leases,
            id,
            holder,
            seq,
        }
    }
}

impl RecordSink for RowSink {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let text = std::str::from_utf8(bytes).map_err(io::Error::other)?;
        let lines: Vec<String> = text.split_terminator('\n').map(str::to_string).collect();
        if lines.is_empty() {
            return Ok(());
        }
        // What a listing shows, kept up to date at each turn's end.
        let turn = journal::summarize_tail(bytes, true).map(|(mark, after)| {
            (
                i64::try_from(mark.messages.saturating_add(after)).unwrap_or(i64::MAX),
                mark.title,
                mark.model,
                mark.origin,
            )
        });
        let ends_turn = turn.is_some();
        let (messages, title, model, origin) = match turn {
            Some((m, t, model, o)) => (Some(m), Some(t), Some(model), o),
            None => (None, None, None, None),
        };
        let n = lines.len() as i64;
        let size = bytes.len() as i64;
        let (id, holder, seq) = (self.id.clone(), self.holder.clone(), self.seq);
        let used = i64::try_from(crate::clock::now_unix()).unwrap_or(i64::MAX);
        // A turn's end (or a compaction's, a rewind's) is made durable, and
        // with it every record before it; the records between are committed
        // without waiting for the disk, as the file is written without a
        // sync between turn ends.
        let commit = if ends_turn {
            Commit::Durable
        } else {
            Commit::Relaxed
        };
        let written = self
            .db
            .call_as(commit, move |c| async move {
                let row = c
                    .query_one(
                        "WITH ins AS (
                             INSERT INTO buddy_records (session_id, seq, line)
                             SELECT $1, $2 + g.i - 1, g.line
                             FROM unnest($3::text[]) WITH ORDINALITY AS g(line, i)
                             WHERE EXISTS (SELECT 1 FROM buddy_leases l
                                           WHERE l.session_id = $1 AND l.holder = $4 FOR SHARE)
                             RETURNING 1)
                         UPDATE buddy_sessions SET used = $5, bytes = bytes + $6,
                             messages = COALESCE($7, messages), title = COALESCE($8, title),
                             model = COALESCE($9, model), origin = COALESCE($10, origin)
                         WHERE id = $1
                         RETURNING (SELECT count(*) FROM ins)",
                        &[
                            &id, &seq, &lines, &holder, &used, &size, &messages, &title, &model,
                            &origin,
                        ],
                    )
                    .await?;
                Ok(row.get::<_, i64>(0))
            })
            .map_err(io::Error::other)?;
        if written != n {
            return Err(io::Error::other(format!(
                "this instance's lease on session {} was taken over; nothing more is written here",
                self.id
            )));
        }
        self.seq += n;
        Ok(())
    }

    /// Every append is a committed transaction already.
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for RowSink {
    /// Gives the lease back and waits until it is: a client told the run is
    /// over may continue the session on another instance at once.
    fn drop(&mut self) {
        self.leases.held().remove(&self.holder);
        let (id, holder) = (self.id.clone(), self.holder.clone());
        let _ = self.db.call(move |c| async move {
            c.execute(
                "DELETE FROM buddy_leases WHERE session_id = $1 AND holder = $2",
                &[&id, &holder],
            )
            .await
        });
    }
}
