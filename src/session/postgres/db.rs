//! The connections to PostgreSQL and the thread that drives them. The
//! session store is called from synchronous code (the agent's `HistorySink`,
//! serve's `Backend`) that runs on the server's runtime, where blocking on a
//! future would stall or panic; so the connections live on a thread of their
//! own with a small runtime, and callers hand it jobs: synchronously, waiting
//! on a plain channel ([`Db::call`]), or asynchronously ([`Db::call_async`]);
//! tasks that live as long as the store (the event appender, lease renewal)
//! get a [`Link`] that hands them the connection of the moment.
//!
//! Three connections: two for statements, shared by every job (tokio-postgres
//! pipelines them), one committing durably and one not ([`Commit`]), and one
//! that only LISTENs, whose notifications go to a broadcast channel.
//!
//! A lost connection (the database restarted, the network dropped) is made
//! again: all three together, after 100 ms, then twice as long after each
//! failed try up to 5 s. The LISTEN is made again before the new connections
//! are handed out, and [`Db::reconnected`] then says so: announcements sent
//! while nobody listened are lost, and a follower reads the rows instead.
//! While the database is away a call fails at once with one sentence, and
//! every call is bounded in time ([`CALL_TIMEOUT`]), so a server answers
//! "retry later" instead of hanging. This module knows no tables;
//! `postgres/mod.rs` has them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_postgres::{AsyncMessage, Client, NoTls};

type Job = Box<dyn FnOnce(&Link) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// How a job's writes are committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Waits until the commit is on the database's disk (its WAL flushed).
    Durable,
    /// Visible to every reader and kept when buddy dies, but a crash of the
    /// database's machine may lose the last fraction of a second of them
    /// (`synchronous_commit = off`); the next durable commit flushes them
    /// too. The journal's own promise between turn ends: a kill loses
    /// nothing, a power cut may.
    Relaxed,
}

/// The statement connections (one per kind of commit) and the listening
/// one, made together and dropped together.
#[derive(Clone)]
struct Clients {
    durable: Arc<Client>,
    relaxed: Arc<Client>,
    /// Held only so that its connection stays open: dropping the last
    /// client ends it.
    _listener: Arc<Client>,
}

impl Clients {
    fn get(&self, commit: Commit) -> Arc<Client> {
        match commit {
            Commit::Durable => self.durable.clone(),
            Commit::Relaxed => self.relaxed.clone(),
        }
    }
}

/// The connections of the moment, or why there are none.
type Current = Result<Clients, DbError>;

/// The channel every instance LISTENs on; a payload is `<session> <event id>`.
pub const CHANNEL: &str = "buddy_events";

/// Notifications a follower may fall behind before it re-reads every
/// session it follows (`RecvError::Lagged`).
const NOTICES: usize = 4096;

/// The longest one call may take, its statements and the wait for their
/// answer together: past it the caller is told the database is not
/// answering (a server answers 503 and "retry later"), instead of holding
/// a request, or a thread, for as long as a dead link takes to be noticed.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection attempt that takes longer than this has failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The first wait before reconnecting, doubled after each failed try up to
/// [`BACKOFF_MAX`]: a restarting database is back within a second or two,
/// and one that is down for longer is not hammered.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A failure of the database, as one line.
pub type DbError = String;

#[derive(Clone)]
pub struct Db {
    jobs: mpsc::UnboundedSender<Job>,
    notices: broadcast::Sender<(String, u64)>,
    reconnected: watch::Receiver<u64>,
}

/// The connections as a long-lived task sees them: whichever are current.
#[derive(Clone)]
pub struct Link {
    current: watch::Receiver<Current>,
}

impl Link {
    /// The connection for `commit` now, or why there is none.
    pub fn now(&self, commit: Commit) -> Result<Arc<Client>, DbError> {
        self.current
            .borrow()
            .as_ref()
            .map(|c| c.get(commit))
            .map_err(Clone::clone)
    }

    /// The connection for `commit`, waiting while the database is away.
    /// `None` once the store is gone (its thread stopped).
    pub async fn client(&mut self, commit: Commit) -> Option<Arc<Client>> {
        let current = self.current.wait_for(Result::is_ok).await.ok()?;
        current.as_ref().ok().map(|c| c.get(commit))
    }

    /// Returns once the connections are lost or made again.
    pub async fn changed(&mut self) {
        if self.current.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Db {
    /// Connects to `url` (statements, LISTEN) on a thread of its own, which
    /// reconnects whenever the connections are lost. The first connection
    /// must succeed: a wrong URL or a database that is not there is said at
    /// start, not retried for ever.
    pub async fn connect(url: &str) -> Result<Db, DbError> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| format!("the database URL is not one PostgreSQL reads: {e}"))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        if config.get_application_name().is_none() {
            config.application_name("buddy");
        }
        let place = redacted(url);
        let (ready_tx, ready_rx) = oneshot::channel();
        let (jobs, mut job_rx) = mpsc::unbounded_channel::<Job>();
        let (notices, _) = broadcast::channel(NOTICES);
        let (reconnects, reconnected) = watch::channel(0u64);
        let notify = notices.clone();
        std::thread::Builder::new()
            .name("buddy-postgres".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("cannot start its runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(async move {
                    let (lost_tx, lost_rx) = mpsc::unbounded_channel();
                    let clients = match open(&config, &notify, &lost_tx, 0).await {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let (current_tx, current) = watch::channel(Ok(clients));
                    let link = Link { current };
                    let _ = ready_tx.send(Ok(()));
                    tokio::spawn(reconnect(Reconnect {
                        config,
                        place,
                        notices: notify,
                        lost_tx,
                        lost_rx,
                        current: current_tx,
                        reconnects,
                    }));
                    // Each job runs as a task: statements of different
                    // callers go down the connection together.
                    while let Some(job) = job_rx.recv().await {
                        tokio::spawn(job(&link));
                    }
                });
            })
            .map_err(|e| format!("cannot start its thread: {e}"))?;
        ready_rx
            .await
            .map_err(|_| "its thread stopped".to_string())??;
        Ok(Db {
            jobs,
            notices,
            reconnected,
        })
    }

    /// Runs `f` on the database's thread and waits for its answer. For
    /// synchronous callers: it blocks the calling thread for a round trip.
    pub fn call<T, F, Fut>(&self, f: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        self.call_as(Commit::Durable, f)
    }

    /// [`Db::call`], its writes committed as `commit` says.
    pub fn call_as<T, F, Fut>(&self, commit: Commit, f: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(commit, f, move |r| {
            let _ = tx.send(r);
        })?;
        rx.recv()
            .map_err(|_| "the database connection is gone".to_string())?
    }

    /// [`Db::call`] for async callers.
    pub async fn call_async<T, F, Fut>(&self, f: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit(Commit::Durable, f, move |r| {
            let _ = tx.send(r);
        })?;
        rx.await
            .map_err(|_| "the database connection is gone".to_string())?
    }

    /// Runs `f` as a task of the database's thread for as long as it likes,
    /// with a [`Link`] to the connections of each moment.
    pub fn spawn_linked<F, Fut>(&self, f: F)
    where
        F: FnOnce(Link) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let job: Job = Box::new(move |link| Box::pin(f(link.clone())));
        let _ = self.jobs.send(job);
    }

    fn submit<T, F, Fut>(
        &self,
        commit: Commit,
        f: F,
        reply: impl FnOnce(Result<T, DbError>) + Send + 'static,
    ) -> Result<(), DbError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let job: Job = Box::new(move |link| {
            let now = link.now(commit);
            Box::pin(async move {
                let answer = match now {
                    Err(e) => Err(e),
                    Ok(c) => match tokio::time::timeout(CALL_TIMEOUT, f(c)).await {
                        Ok(r) => r.map_err(|e| describe(&e)),
                        Err(_) => Err(format!(
                            "the session database did not answer within {} s",
                            CALL_TIMEOUT.as_secs()
                        )),
                    },
                };
                reply(answer)
            })
        });
        self.jobs
            .send(job)
            .map_err(|_| "the database connection is gone".to_string())
    }

    /// Every `(session, event id)` announced on [`CHANNEL`] from now on.
    pub fn notices(&self) -> broadcast::Receiver<(String, u64)> {
        self.notices.subscribe()
    }

    /// How many times the connections were made again; it changes once the
    /// new LISTEN is in place, so what was stored before is in the rows.
    pub fn reconnected(&self) -> watch::Receiver<u64> {
        self.reconnected.clone()
    }
}

/// What the reconnecting task owns.
struct Reconnect {
    config: tokio_postgres::Config,
    /// The URL without its password, for the lines on stderr.
    place: String,
    notices: broadcast::Sender<(String, u64)>,
    lost_tx: mpsc::UnboundedSender<(u64, DbError)>,
    /// `(generation, why)` from each connection that ended.
    lost_rx: mpsc::UnboundedReceiver<(u64, DbError)>,
    current: watch::Sender<Current>,
    reconnects: watch::Sender<u64>,
}

/// Waits for a connection of the current generation to end, then makes all
/// three again, with backoff, and hands them out; until the store is gone.
/// Each try is a generation of its own, so the connections of a try that
/// failed halfway, ending, are not taken for a new loss.
async fn reconnect(mut r: Reconnect) {
    let mut generation = 0u64;
    while let Some((of, why)) = r.lost_rx.recv().await {
        // The connections dropped with an older generation end too.
        if of != generation {
            continue;
        }
        let down = Instant::now();
        let unreachable = |why: &str| {
            format!(
                "the session database is not reachable ({}); buddy is reconnecting, retry shortly",
                crate::text::visible(why)
            )
        };
        eprintln!(
            "buddy: lost the session database {} ({}); reconnecting",
            r.place,
            crate::text::visible(&why)
        );
        drop(r.current.send_replace(Err(unreachable(&why))));
        let mut wait = BACKOFF_FIRST;
        let clients = loop {
            tokio::time::sleep(wait).await;
            generation += 1;
            match open(&r.config, &r.notices, &r.lost_tx, generation).await {
                Ok(c) => break c,
                Err(e) => {
                    drop(r.current.send_replace(Err(unreachable(&e))));
                    wait = (wait * 2).min(BACKOFF_MAX);
                }
            }
        };
        drop(r.current.send_replace(Ok(clients)));
        r.reconnects.send_modify(|n| *n += 1);
        eprintln!(
            "buddy: the session database {} is back after {:.1} s",
            r.place,
            down.elapsed().as_secs_f64()
        );
    }
}

/// A connection whose driver runs as a task of this thread, saying on
/// `lost` when it ends.
async fn connect(
    config: &tokio_postgres::Config,
    lost: &mpsc::UnboundedSender<(u64, DbError)>,
    generation: u64,
) -> Result<Client, DbError> {
    let (client, conn) = config.connect(NoTls).await.map_err(|e| describe(&e))?;
    let lost = lost.clone();
    tokio::spawn(async move {
        let why = match conn.await {
            Ok(()) => "the server closed the connection".to_string(),
            Err(e) => describe(&e),
        };
        let _ = lost.send((generation, why));
    });
    Ok(client)
}

/// The statement connections and the listening one, LISTENing before this
/// returns.
async fn open(
    config: &tokio_postgres::Config,
    notices: &broadcast::Sender<(String, u64)>,
    lost: &mpsc::UnboundedSender<(u64, DbError)>,
    generation: u64,
) -> Result<Clients, DbError> {
    let durable = connect(config, lost, generation).await?;
    let relaxed = connect(config, lost, generation).await?;
    relaxed
        .batch_execute("SET synchronous_commit TO off")
        .await
        .map_err(|e| describe(&e))?;
    let (listener, mut lconn) = config.connect(NoTls).await.map_err(|e| describe(&e))?;
    let (notices, lost) = (notices.clone(), lost.clone());
    tokio::spawn(async move {
        let why = loop {
            match std::future::poll_fn(|cx| lconn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if let Some(notice) = parse_notice(n.payload()) {
                        // Nobody following is fine.
                        let _ = notices.send(notice);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => break describe(&e),
                None => break "the server closed the connection".to_string(),
            }
        };
        let _ = lost.send((generation, why));
    });
    listener
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(|e| describe(&e))?;
    Ok(Clients {
        durable: Arc::new(durable),
        relaxed: Arc::new(relaxed),
        _listener: Arc::new(listener),
    })
}

/// Whether `e` is the connection's failure (it broke, the server is
/// shutting down or out of connections), so the same statement may succeed
/// on the next connection; not the statement's own fault.
pub fn is_connection_failure(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        // Connection exception, insufficient resources, operator
        // intervention (a shutdown, a restart).
        Some(code) => ["08", "53", "57"]
            .iter()
            .any(|c| code.code().starts_with(c)),
        None => true,
    }
}

/// `url` with its password (in the authority or as a parameter) replaced
/// by `***`, for messages: postgres://user:***@host/db.
pub fn redacted(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?']).map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            let at = rest + at;
            if let Some(colon) = out[rest..at].find(':') {
                out.replace_range(rest + colon + 1..at, "***");
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{head}{}", params.join("&"));
    }
    crate::text::visible(&out).into_owned()
}

/// `<session> <id>` as sent by the event append.
fn parse_notice(payload: &str) -> Option<(String, u64)> {
    let (session, id) = payload.rsplit_once(' ')?;
    Some((session.to_string(), id.parse().ok()?))
}

/// The server's own message when it sent one (it says what was wrong), else
/// the client's.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_name_a_session_and_an_event() {
        assert_eq!(parse_notice("abc 42"), Some(("abc".into(), 42)));
        assert_eq!(parse_notice("abc"), None);
        assert_eq!(parse_notice("abc x"), None);
    }

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            redacted("postgres://ann:s3cret@db.example:5432/buddy"),
            "postgres://ann:***@db.example:5432/buddy"
        );
        assert_eq!(
            redacted("postgresql://ann:p@ss:w@rd@db/x?sslmode=disable&password=two"),
            "postgresql://ann:***@db/x?sslmode=disable&password=***"
        );
        assert_eq!(
            redacted("postgres://ann@127.0.0.1/db"),
            "postgres://ann@127.0.0.1/db"
        );
        assert_eq!(redacted("postgres://db"), "postgres://db");
    }
}
