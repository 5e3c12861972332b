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
//! The checkpoints (what files held before the session's tools changed
//! them) and the copies of the images attached to prompts are rows too
//! (`checkpoints.rs`, `images.rs`), so a session continued on another
//! instance rewinds the files a tool changed on the first and sends the
//! model its images. The files themselves are where the tools ran: the
//! instances serving a session must see the same working directory (a
//! shared volume, or the session's own container target). Forking is not
//! offered. See docs/SERVE.md.

mod checkpoints;
mod db;
mod images;
mod rows;
mod schema;

pub use db::{redacted, DbError};
/// The connections, for what other layers keep beside the sessions (the
/// team's rows of `serve::team_pg`).
pub use db::{Commit, Db};
pub use rows::Leases;

use super::checkpoint::CheckpointStore;
use super::{
    assemble, history_of, journal, new_id, parse_error, start, transcript_of, Opened, Place,
    Session, SessionError, SessionInfo, Summary, MAX_SESSION_BYTES,
};
use checkpoints::CheckpointRows;
use images::ImageRows;
use rows::{Refused, RowSink};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, watch};

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
    /// Events to append, in order, by one task on the database's thread.
    events: mpsc::UnboundedSender<(String, String)>,
    /// Events whose insert failed (each counted once, however many tries).
    failed_events: Arc<AtomicU64>,
}

impl Pg {
    /// Connects to `url`, creates the tables if missing, and starts the
    /// lease renewal and the event appender.
    pub async fn connect(url: &str, lease: Duration) -> Result<Arc<Pg>, DbError> {
        let db = Db::connect(url).await?;
        schema::migrate(&db).await?;
        let leases = Leases::default();
        leases.renew_every(&db, lease);
        let (events, queue) = mpsc::unbounded_channel::<(String, String)>();
        let failed_events = Arc::new(AtomicU64::new(0));
        let failed = failed_events.clone();
        db.spawn_linked(move |link| append_events(link, queue, failed));
        Ok(Arc::new(Pg {
            db,
            instance: instance_name(),
            opened: AtomicU64::new(0),
            lease,
            leases,
            events,
            failed_events,
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

    /// What session `id`'s errors name it.
    fn name_of(id: &str) -> PathBuf {
        PathBuf::from(format!("postgres:{id}"))
    }

    /// Session `id`'s images and checkpoints, written under lease `holder`.
    fn place(&self, id: &str, holder: &str) -> Place {
        let log = CheckpointRows::new(self.db.clone(), id.to_string(), holder.to_string());
        Place {
            path: Self::name_of(id),
            images: Box::new(ImageRows::new(self.db.clone(), id.to_string())),
            checkpoints: CheckpointStore::in_log(Box::new(log)),
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
        let place = self.place(&id, &holder);
        let sink = RowSink::new(self.db.clone(), self.leases.clone(), id.clone(), holder, 0);
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
        let place = self.place(id, &holder);
        let sink = RowSink::new(
            self.db.clone(),
            self.leases.clone(),
            id.to_string(),
            holder,
            count,
        );
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
        history_of(&bytes, &Self::name_of(id))
    }

    /// `read_history`, with the sub-agents' histories by the parent's call
    /// id.
    #[allow(clippy::type_complexity)]
    pub fn read_transcript(
        &self,
        id: &str,
    ) -> Result<
        (
            Vec<crate::wire::Message>,
            Vec<(String, Vec<crate::wire::Message>)>,
        ),
        SessionError,
    > {
        let (bytes, _) = self.records(id)?;
        transcript_of(&bytes, &Self::name_of(id))
    }

    /// Session `id`'s title, as a listing shows it.
    pub fn title(&self, id: &str) -> Result<String, SessionError> {
        let q = id.to_string();
        self.db
            .call(move |c| async move {
                c.query_opt("SELECT title FROM buddy_sessions WHERE id = $1", &[&q])
                    .await
            })
            .map_err(Self::failed("read a session"))?
            .map(|r| r.get(0))
            .ok_or_else(|| self.not_found(id))
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

    /// Changes each time the connections were made again after a loss,
    /// once the LISTEN is back: announcements made meanwhile were missed,
    /// and the rows have them.
    pub fn reconnected(&self) -> watch::Receiver<u64> {
        self.db.reconnected()
    }

    /// How many events failed to be stored at their first try (they are
    /// tried again when the failure was the connection's).
    pub fn failed_events(&self) -> u64 {
        self.failed_events.load(Ordering::Relaxed)
    }
}

/// The event appender: stores the queued events one at a time, so a
/// session's events are stored in the order they were published. An insert
/// that fails because the database went away is tried again once it is
/// back (a lost event is a gap every follower sees); one the database
/// refuses for another reason (the session was deleted) is dropped. Each
/// failed event is counted in `failed`, and an outage is said on stderr
/// once when it starts and once when the held events are stored.
async fn append_events(
    mut link: db::Link,
    mut queue: mpsc::UnboundedReceiver<(String, String)>,
    failed: Arc<AtomicU64>,
) {
    // An outage said on stderr and not yet over.
    let mut outage = false;
    while let Some((session, data)) = queue.recv().await {
        let mut counted = false;
        loop {
            // Events are for following a run live, not the record of it
            // (the journal is): they need not wait for the disk. While the
            // database is away the event fails at once, and waits.
            let stored = match link.now(db::Commit::Relaxed) {
                Err(why) => Ok(Err((why, true))),
                Ok(c) => tokio::time::timeout(
                    db::CALL_TIMEOUT,
                    c.execute(
                        "WITH n AS (UPDATE buddy_sessions SET last_event = last_event + 1
                                    WHERE id = $1 RETURNING last_event),
                              ins AS (INSERT INTO buddy_events (session_id, id, data)
                                      SELECT $1, last_event, $2 FROM n RETURNING id)
                         SELECT pg_notify('buddy_events', $1 || ' ' || id) FROM ins",
                        &[&session, &data],
                    ),
                )
                .await
                .map(|r| {
                    r.map_err(|e| (db::describe(&e), db::is_connection_failure(&e)))
                        .map(drop)
                }),
            };
            let (why, again) = match stored {
                Ok(Ok(())) => {
                    if std::mem::take(&mut outage) {
                        eprintln!("buddy: events are stored again, the held ones first");
                    }
                    break;
                }
                Ok(Err(failure)) => failure,
                // A statement that hangs is a link that died unnoticed.
                Err(_) => (
                    format!("no answer within {} s", db::CALL_TIMEOUT.as_secs()),
                    true,
                ),
            };
            if !counted {
                counted = true;
                failed.fetch_add(1, Ordering::Relaxed);
                if !outage {
                    outage = again;
                    eprintln!(
                        "buddy: could not store an event of session {} ({}); {}",
                        crate::text::visible(&session),
                        crate::text::visible(&why),
                        if again {
                            "events are held and stored when the database is back"
                        } else {
                            "it is dropped"
                        }
                    );
                }
            }
            if !again {
                break;
            }
            // Try again once the connections were made again; a failure the
            // reconnecting task has not seen yet (a hung link) is tried
            // again after a while all the same.
            let _ = tokio::time::timeout(RETRY_AFTER_MAX, link.changed()).await;
        }
    }
}

/// The longest an event whose insert failed waits before its next try
/// when nothing says the connections were made again.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(5);

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
