//! A team's facts in PostgreSQL, for `buddy serve` instances that share a
//! session database (`--store postgres://…`): who owns which session (the
//! `owner` column of `buddy_sessions`, written with the session's row), the
//! runs each user has going on any instance (`buddy_runs`), and what each
//! user's runs cost per UTC day (`buddy_spending`). Every instance reads and
//! writes the same rows, so a user's sessions, running limit and spending
//! are one across the instances, and the day's spending outlasts a restart.
//!
//! A run holds one of its user's places: a row (user, place number from 0
//! to the limit, session, instance, expiry) taken with a conditional upsert,
//! as a session's lease is: free, or lapsed. The instance renews its rows
//! three times per lease bound and deletes each when its run ends; a crashed
//! instance renews nothing, so its runs stop counting after the bound.
//!
//! Not here: the decisions (`team.rs` says who may see what and which limit
//! refuses), the tables' creation (`session::postgres`'s schema), the
//! connections (`session::postgres::Db`).

use super::metrics::{self, Metrics};
use crate::session::postgres::{Commit, Db, DbError, Pg};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A user's sessions beyond this many are not listed: one answer is
/// bounded, as a directory listing is by the sessions it holds.
const MAX_OWNED: i64 = 100_000;

/// The team's rows, as this instance reads and writes them.
pub struct TeamDb {
    db: Db,
    /// Names this instance in `buddy_runs` (the store's instance name).
    instance: String,
    /// How long a run's place outlives its instance's last renewal.
    lease: Duration,
    /// Places this instance's runs hold: no renewal statement while none.
    held: Arc<AtomicUsize>,
}

impl std::fmt::Debug for TeamDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamDb")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl TeamDb {
    /// The team's rows of `pg`'s database; starts renewing this instance's
    /// runs' places, for as long as the database's thread runs.
    pub fn new(pg: &Pg) -> Arc<TeamDb> {
        let team = Arc::new(TeamDb {
            db: pg.db().clone(),
            instance: pg.instance().to_string(),
            lease: pg.lease(),
            held: Arc::new(AtomicUsize::new(0)),
        });
        let (held, instance) = (team.held.clone(), team.instance.clone());
        let (bound, secs) = (team.lease, team.lease.as_secs_f64());
        team.db.spawn_linked(move |mut link| async move {
            let mut tick = tokio::time::interval(bound / 3);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if held.load(Ordering::Relaxed) == 0 {
                    continue;
                }
                // While the database is away this waits for it. A missed
                // renewal is tried again at the next tick; two may fail
                // before a place lapses.
                let Some(c) = link.client(Commit::Durable).await else {
                    return;
                };
                let _ = c
                    .execute(
                        "UPDATE buddy_runs SET expires = now() + make_interval(secs => $2)
                         WHERE instance = $1",
                        &[&instance, &secs],
                    )
                    .await;
            }
        });
        team
    }

    /// The user who created session `id`, if a user did.
    pub fn owner_of(&self, id: &str) -> Result<Option<String>, DbError> {
        let id = id.to_string();
        self.db.call(move |c| async move {
            let row = c
                .query_opt("SELECT owner FROM buddy_sessions WHERE id = $1", &[&id])
                .await?;
            Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
        })
    }

    /// The ids of `user`'s sessions.
    pub fn sessions_of(&self, user: &str) -> Result<HashSet<String>, DbError> {
        let user = user.to_string();
        self.db.call(move |c| async move {
            let rows = c
                .query(
                    "SELECT id FROM buddy_sessions WHERE owner = $1 LIMIT $2",
                    &[&user, &MAX_OWNED],
                )
                .await?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    /// One of `user`'s `max` places for a run of `session`, or `None` when
    /// runs of theirs hold every one (on any instance).
    pub async fn take_place(
        &self,
        user: &str,
        session: &str,
        max: usize,
    ) -> Result<Option<RunPlace>, DbError> {
        let (u, s, me) = (user.to_string(), session.to_string(), self.instance.clone());
        let max = i32::try_from(max).unwrap_or(i32::MAX);
        let secs = self.lease.as_secs_f64();
        let taken = self
            .db
            .call_async(move |c| async move {
                // Two instances may pick the same free place at once: the
                // loser's upsert takes nothing, and it tries again while a
                // place is free. Each try that fails is a place another run
                // took, so the tries are bounded by the limit.
                for _ in 0..=max {
                    let row = c
                        .query_opt(
                            "INSERT INTO buddy_runs (user_name, place, session_id, instance, expires)
                             SELECT $1, p, $2, $3, now() + make_interval(secs => $5)
                             FROM generate_series(0, $4 - 1) AS p
                             WHERE NOT EXISTS (SELECT 1 FROM buddy_runs r WHERE r.user_name = $1
                                               AND r.place = p AND r.expires >= now())
                               AND (SELECT count(*) FROM buddy_runs r WHERE r.user_name = $1
                                    AND r.expires >= now()) < $4
                             ORDER BY p LIMIT 1
                             ON CONFLICT (user_name, place) DO UPDATE
                                 SET session_id = EXCLUDED.session_id,
                                     instance = EXCLUDED.instance, expires = EXCLUDED.expires
                                 WHERE buddy_runs.expires < now()
                             RETURNING place",
                            &[&u, &s, &me, &max, &secs],
                        )
                        .await?;
                    if let Some(row) = row {
                        return Ok(Some(row.get::<_, i32>(0)));
                    }
                    let running: i64 = c
                        .query_one(
                            "SELECT count(*) FROM buddy_runs
                             WHERE user_name = $1 AND expires >= now()",
                            &[&u],
                        )
                        .await?
                        .get(0);
                    if running >= i64::from(max) {
                        return Ok(None);
                    }
                }
                Ok(None)
            })
            .await?;
        Ok(taken.map(|place| {
            self.held.fetch_add(1, Ordering::Relaxed);
            RunPlace {
                db: self.db.clone(),
                held: self.held.clone(),
                key: Some((
                    user.to_string(),
                    place,
                    session.to_string(),
                    self.instance.clone(),
                )),
            }
        }))
    }

    /// What `user`'s runs have cost on UTC day `day` (days since 1970).
    pub async fn spent(&self, user: &str, day: u64) -> Result<f64, DbError> {
        let user = user.to_string();
        let day = i64::try_from(day).unwrap_or(i64::MAX);
        self.db
            .call_async(move |c| async move {
                let row = c
                    .query_opt(
                        "SELECT usd FROM buddy_spending WHERE user_name = $1 AND day = $2",
                        &[&user, &day],
                    )
                    .await?;
                Ok(row.map_or(0.0, |r| r.get::<_, f64>(0)))
            })
            .await
    }

    /// Adds `usd` to the spending of session `id`'s owner on UTC day `day`
    /// (nothing for a session nobody owns). Does not wait: a run's events
    /// must not; a failure is counted as a store error.
    pub fn charge(&self, id: &str, day: u64, usd: f64, metrics: &Arc<Metrics>) {
        let id = id.to_string();
        let day = i64::try_from(day).unwrap_or(i64::MAX);
        let metrics = Arc::clone(metrics);
        self.db.spawn_linked(move |link| async move {
            let Ok(c) = link.now(Commit::Durable) else {
                metrics.inc(metrics::STORE_ERRORS, &[]);
                return;
            };
            let charged = c
                .execute(
                    "INSERT INTO buddy_spending (user_name, day, usd)
                     SELECT owner, $2, $3 FROM buddy_sessions WHERE id = $1 AND owner IS NOT NULL
                     ON CONFLICT (user_name, day) DO UPDATE
                         SET usd = buddy_spending.usd + EXCLUDED.usd",
                    &[&id, &day, &usd],
                )
                .await;
            if charged.is_err() {
                metrics.inc(metrics::STORE_ERRORS, &[]);
            }
        });
    }
}

/// A run's place among its user's, held until the run is over. Given back
/// with [`RunPlace::give_back`] (waiting until it is, so a client told the
/// run is over may start another on any instance at once), or on drop
/// without waiting.
pub struct RunPlace {
    db: Db,
    held: Arc<AtomicUsize>,
    /// (user, place, session, instance); `None` once given back.
    key: Option<(String, i32, String, String)>,
}

impl std::fmt::Debug for RunPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPlace").field("key", &self.key).finish()
    }
}

/// Deletes a place's row, if it is still this run's (a place that lapsed
/// and was taken again is another run's).
const GIVE_BACK: &str = "DELETE FROM buddy_runs
    WHERE user_name = $1 AND place = $2 AND session_id = $3 AND instance = $4";

impl RunPlace {
    /// Gives the place back and waits until the row is gone. A failure
    /// leaves the row to lapse after the lease bound.
    pub async fn give_back(mut self) {
        let Some((user, place, session, instance)) = self.key.take() else {
            return;
        };
        self.held.fetch_sub(1, Ordering::Relaxed);
        let _ = self
            .db
            .call_async(move |c| async move {
                c.execute(GIVE_BACK, &[&user, &place, &session, &instance])
                    .await
            })
            .await;
    }
}

impl Drop for RunPlace {
    fn drop(&mut self) {
        let Some((user, place, session, instance)) = self.key.take() else {
            return;
        };
        self.held.fetch_sub(1, Ordering::Relaxed);
        self.db.spawn_linked(move |link| async move {
            // Without the database the place lapses with its expiry.
            if let Ok(c) = link.now(Commit::Durable) {
                let _ = c
                    .execute(GIVE_BACK, &[&user, &place, &session, &instance])
                    .await;
            }
        });
    }
}
