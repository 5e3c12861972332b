//! Sessions in PostgreSQL, for several `buddy serve` instances that share
//! them (`buddy serve --store postgres://…`). The records are the file
//! journal's own lines, one row each in order (`buddy_records`), so opening
//! a session parses them with `journal::parse` and repairs them exactly as a
//! file is repaired; a session's writer is the file store's `Session` with
//! rows for its sink (`rows.rs`), under a lease instead of a file lock.
//!
//! Served events go to `buddy_events` in order, one row each with an id the
//! database gives, announced with NOTIFY (`<session> <id>`; the payload is
//! small, followers read the rows), so any instance can relay any session's
//! run and a client's `Last-Event-ID` means the same everywhere.
//!
//! Not in the database: the images attached to prompts and the checkpoints
//! (copies of files before tools changed them) stay in the serving
//! directory of the instance that wrote them, as they are beside a session
//! file; forking is not offered. See docs/SERVE.md.

mod db;
mod rows;
mod schema;

pub use db::DbError;
/// The connections, for what other layers keep beside the sessions (the
/// team's rows of `serve::team_pg`).
pub use db::{Commit, Db};
pub use rows::Leases;

use super::{
    assemble, history_of, images_dir, journal, new_id, parse_error, start, Opened, Place, Session,
    SessionError, SessionInfo, Store, Summary, MAX_SESSION_BYTES,
};
use rows::{Refused, RowSink};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// How long a crashed instance's sessions stay taken: its successor waits
/// this long at most. Three renewals fit in it, so a busy database or a
/// paused process does not lose a lease that is still in use.
pub const LEASE: Duration = Duration::from_secs(15);

/// The session database of this instance.
pub struct Pg {
    db: Db,
    /// Names this instance in leases (`host:pid:random`).
    instance: String,
    opened: AtomicU64,
    lease: Duration,
    leases: Leases,
    /// Where images and checkpoints are kept (this instance's directory).
    local: Store,
    /// Events to append, in order, by one task on the database's thread.
    events: mpsc::UnboundedSender<(String, String)>,
}

impl Pg {
    /// Connects to `url`, creates the tables if missing, and starts the
    /// lease renewal and the event appender.
    pub async fn connect(url: &str, lease: Duration, local: Store) -> Result<Arc<Pg>, DbError> {
        let db = Db::connect(url).await?;
        schema::migrate(&db).await?;
        let leases = Leases::default();
        leases.renew_every(&db, lease);
        let (events, mut queue) = mpsc::unbounded_channel::<(String, String)>();
        // Events are for following a run live, not the record of it (the
        // journal is): they need not wait for the disk.
        db.spawn(db::Commit::Relaxed, move |c| async move {
            // One at a time, so a session's events are stored in the order
            // they were published.
            while let Some((session, data)) = queue.recv().await {
                let _ = c
                    .execute(
                        "WITH n AS (UPDATE buddy_sessions SET last_event = last_event + 1
                                    WHERE id = $1 RETURNING last_event),
                              ins AS (INSERT INTO buddy_events (session_id, id, data)
                                      SELECT $1, last_event, $2 FROM n RETURNING id)
                         SELECT pg_notify('buddy_events', $1 || ' ' || id) FROM ins",
                        &[&session, &data],
                    )
                    .await;
            }
        });
        Ok(Arc::new(Pg {
            db,
            instance: instance_name(),
            opened: AtomicU64::new(0),
            lease,
            leases,
            local,
            events,
        }))
    }

    /// This instance's name in leases.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The connections this store uses.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// How long a crashed instance's sessions stay taken.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    fn holder(&self) -> String {
        let n = self.opened.fetch_add(1, Ordering::Relaxed);
        format!("{}#{n}", self.instance)
    }

    fn place(&self, id: &str) -> Place {
        Place {
            path: PathBuf::from(format!("postgres:{id}")),
            images: images_dir(&self.local.path_of(id)),
            checkpoints: self.local.checkpoints_of(id),
        }
    }

    fn failed(action: &'static str) -> impl Fn(DbError) -> SessionError {
        move |reason| SessionError::Database { action, reason }
    }

    /// A new session, its lease taken for the caller.
    pub fn create(&self, info: SessionInfo) -> Result<Session, SessionError> {
        self.create_owned(info, None)
    }

    /// [`Pg::create`], the session's row naming `owner` (a user of `buddy
    /// serve`): written with the row, so no instance sees it ownerless.
    pub fn create_owned(
        &self,
        info: SessionInfo,
        owner: Option<&str>,
    ) -> Result<Session, SessionError> {
        let owner = owner.map(str::to_string);
        let now = crate::clock::now_unix();
        let holder = self.holder();
        let (cwd, model, h) = (info.cwd.clone(), info.model.clone(), holder.clone());
        let secs = self.lease.as_secs_f64();
        let used = i64::try_from(now).unwrap_or(i64::MAX);
        let id = self
            .db
            .call(move |c| async move {
                // A clash of two new ids is as unlikely as in a directory;
                // try again a few times all the same.
                for _ in 0..8 {
                    let id = new_id(now);
                    let made = c
                        .execute(
                            "INSERT INTO buddy_sessions (id, created, used, cwd, model, owner)
                             VALUES ($1, $2, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
                            &[&id, &used, &cwd, &model, &owner],
                        )
                        .await?;
                    if made == 1 {
                        c.execute(
                            "INSERT INTO buddy_leases (session_id, holder, expires)
                             VALUES ($1, $2, now() + make_interval(secs => $3))",
                            &[&id, &h, &secs],
                        )
                        .await?;
                        return Ok(Some(id));
                    }
                }
                Ok(None)
            })
            .map_err(Self::failed("create a session"))?
            .ok_or_else(|| SessionError::Database {
                action: "create a session",
                reason: "every new id was taken".into(),
            })?;
        let sink = RowSink::new(self.db.clone(), self.leases.clone(), id.clone(), holder, 0);
        let place = self.place(&id);
        start(id, info, place, Box::new(sink), None)
    }

    /// Opens session `id` for continuing: takes its lease (refused while
    /// another instance holds it), reads its rows and repairs them as a
    /// file would be.
    pub fn open(&self, id: &str, info: SessionInfo) -> Result<Opened, SessionError> {
        let holder = self.holder();
        match rows::take(&self.db, id, &holder, self.lease)
            .map_err(Self::failed("take the session's lease"))?
        {
            Ok(()) => {}
            Err(Refused::Missing) => return Err(self.not_found(id)),
            Err(Refused::Held { holder, secs }) => {
                return Err(SessionError::Leased {
                    id: id.to_string(),
                    holder: holder.split('#').next().unwrap_or_default().to_string(),
                    secs,
                })
            }
        }
        // From here the sink owns the lease: any failure below drops it,
        // which gives the lease back.
        let (bytes, count) = match self.records(id) {
            Ok(r) => r,
            Err(e) => {
                drop(RowSink::new(
                    self.db.clone(),
                    self.leases.clone(),
                    id.to_string(),
                    holder,
                    0,
                ));
                return Err(e);
            }
        };
        let sink = RowSink::new(
            self.db.clone(),
            self.leases.clone(),
            id.to_string(),
            holder,
            count,
        );
        let place = self.place(id);
        let parsed = journal::parse(&bytes).map_err(|e| parse_error(&place.path, e))?;
        assemble(id, parsed, info, place, Box::new(sink), Vec::new())
    }

    /// Session `id`'s records as the file would hold them, and how many.
    fn records(&self, id: &str) -> Result<(Vec<u8>, i64), SessionError> {
        let id = id.to_string();
        let rows = self
            .db
            .call(move |c| async move {
                c.query(
                    "SELECT line FROM buddy_records WHERE session_id = $1 ORDER BY seq",
                    &[&id],
                )
                .await
            })
            .map_err(Self::failed("read a session"))?;
        let mut bytes = Vec::new();
        for row in &rows {
            let line: &str = row.get(0);
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            if bytes.len() as u64 > MAX_SESSION_BYTES {
                return Err(SessionError::Database {
                    action: "read a session",
                    reason: format!("it is larger than {} MiB", MAX_SESSION_BYTES >> 20),
                });
            }
        }
        Ok((bytes, rows.len() as i64))
    }

    fn not_found(&self, query: &str) -> SessionError {
        SessionError::NotFound {
            query: query.to_string(),
            dir: PathBuf::from("postgres"),
        }
    }

    /// The id `query` names: an id, a unique prefix, or `last`.
    pub fn resolve(&self, query: &str) -> Result<String, SessionError> {
        let q = query.to_string();
        let found: Vec<String> = self
            .db
            .call(move |c| async move {
                let rows = if q == "last" {
                    c.query(
                        "SELECT id FROM buddy_sessions ORDER BY used DESC, id DESC LIMIT 1",
                        &[],
                    )
                    .await?
                } else {
                    let exact = c
                        .query("SELECT id FROM buddy_sessions WHERE id = $1", &[&q])
                        .await?;
                    if !exact.is_empty() || q.is_empty() {
                        exact
                    } else {
                        c.query(
                            "SELECT id FROM buddy_sessions WHERE starts_with(id, $1)
                             ORDER BY id LIMIT 6",
                            &[&q],
                        )
                        .await?
                    }
                };
                Ok(rows.iter().map(|r| r.get(0)).collect())
            })
            .map_err(Self::failed("look a session up"))?;
        match found.len() {
            0 if query == "last" => Err(SessionError::NoSessions {
                dir: PathBuf::from("postgres"),
            }),
            0 => Err(self.not_found(query)),
            1 => Ok(found.into_iter().next().unwrap_or_default()),
            _ => Err(SessionError::Ambiguous {
                query: query.to_string(),
                matches: found,
            }),
        }
    }

    /// Every session, most recently used first.
    pub fn list(&self) -> Result<Vec<Summary>, SessionError> {
        let rows = self
            .db
            .call(|c| async move {
                c.query(
                    "SELECT id, used, messages, bytes, model, title, origin
                     FROM buddy_sessions ORDER BY used DESC, id DESC",
                    &[],
                )
                .await
            })
            .map_err(Self::failed("list the sessions"))?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(rows
            .iter()
            .map(|r| Summary {
                id: r.get(0),
                used: n(r.get(1)),
                messages: n(r.get(2)),
                bytes: n(r.get(3)),
                model: r.get(4),
                title: r.get(5),
                origin: r.get(6),
            })
            .collect())
    }

    /// Session `id`'s conversation, read without taking its lease.
    pub fn read_history(&self, id: &str) -> Result<Vec<crate::wire::Message>, SessionError> {
        let (bytes, _) = self.records(id)?;
        history_of(&bytes, &self.place(id).path)
    }

    /// Deletes session `id` with its records and events; refused while an
    /// instance holds its lease.
    pub fn delete(&self, id: &str) -> Result<(), SessionError> {
        let q = id.to_string();
        let (deleted, holder) = self
            .db
            .call(move |c| async move {
                let n = c
                    .execute(
                        "DELETE FROM buddy_sessions WHERE id = $1 AND NOT EXISTS
                         (SELECT 1 FROM buddy_leases WHERE session_id = $1 AND expires > now())",
                        &[&q],
                    )
                    .await?;
                let holder = c
                    .query_opt(
                        "SELECT holder FROM buddy_leases WHERE session_id = $1",
                        &[&q],
                    )
                    .await?
                    .map(|r| r.get::<_, String>(0));
                Ok((n, holder))
            })
            .map_err(Self::failed("delete a session"))?;
        match (deleted, holder) {
            (1, _) => Ok(()),
            (_, Some(holder)) => Err(SessionError::Leased {
                id: id.to_string(),
                holder: holder.split('#').next().unwrap_or_default().to_string(),
                secs: self.lease.as_secs(),
            }),
            _ => Err(self.not_found(id)),
        }
    }

    /// Queues an event of session `id` (its JSON) to be stored after every
    /// one queued before it and announced to every instance.
    pub fn append_event(&self, id: &str, data: String) {
        let _ = self.events.send((id.to_string(), data));
    }

    /// The id of session `id`'s last stored event (0 for none).
    pub fn last_event(&self, id: &str) -> Result<u64, SessionError> {
        let q = id.to_string();
        let last = self
            .db
            .call(move |c| async move {
                c.query_opt("SELECT last_event FROM buddy_sessions WHERE id = $1", &[&q])
                    .await
            })
            .map_err(Self::failed("read the session's events"))?
            .map_or(0, |r| r.get::<_, i64>(0));
        Ok(u64::try_from(last).unwrap_or(0))
    }

    /// Session `id`'s stored events with `after < id < before`, in order,
    /// at most `limit`.
    pub async fn events_between(
        &self,
        id: &str,
        after: u64,
        before: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, SessionError> {
        let q = id.to_string();
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let (after, before) = (i(after), i(before));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .db
            .call_async(move |c| async move {
                c.query(
                    "SELECT id, data FROM buddy_events
                     WHERE session_id = $1 AND id > $2 AND id < $3 ORDER BY id LIMIT $4",
                    &[&q, &after, &before, &limit],
                )
                .await
            })
            .await
            .map_err(Self::failed("read the session's events"))?;
        Ok(rows
            .iter()
            .map(|r| (u64::try_from(r.get::<_, i64>(0)).unwrap_or(0), r.get(1)))
            .collect())
    }

    /// `(session, event id)` of every event stored from now on, by any
    /// instance.
    pub fn announced(&self) -> broadcast::Receiver<(String, u64)> {
        self.db.notices()
    }
}

/// `host:pid:random`: unique among the instances sharing a database, and
/// telling a person where a session is running.
fn instance_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}:{}:{nanos:08x}", std::process::id())
}
