//! The connections to PostgreSQL and the thread that drives them. The
//! session store is called from synchronous code (the agent's `HistorySink`,
//! serve's `Backend`) that runs on the server's runtime, where blocking on a
//! future would stall or panic; so the connections live on a thread of their
//! own with a small runtime, and callers hand it jobs: synchronously, waiting
//! on a plain channel ([`Db::call`]), or asynchronously ([`Db::call_async`]).
//!
//! Three connections: two for statements, shared by every job (tokio-postgres
//! pipelines them), one committing durably and one not ([`Commit`]), and one
//! that only LISTENs, whose notifications go to a broadcast channel. A lost connection is not re-made: the store's calls
//! fail with a sentence and the server keeps answering (a restart
//! reconnects). This module knows no tables; `postgres/mod.rs` has them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_postgres::{AsyncMessage, Client, NoTls};

type Job = Box<dyn FnOnce(&Clients) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

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

/// The statement connections: one per kind of commit.
struct Clients {
    durable: Arc<Client>,
    relaxed: Arc<Client>,
}

impl Clients {
    fn get(&self, commit: Commit) -> Arc<Client> {
        match commit {
            Commit::Durable => self.durable.clone(),
            Commit::Relaxed => self.relaxed.clone(),
        }
    }
}

/// The channel every instance LISTENs on; a payload is `<session> <event id>`.
pub const CHANNEL: &str = "buddy_events";

/// Notifications a follower may fall behind before it re-reads every
/// session it follows (`RecvError::Lagged`).
const NOTICES: usize = 4096;

/// A failure of the database, as one line.
pub type DbError = String;

#[derive(Clone)]
pub struct Db {
    jobs: mpsc::UnboundedSender<Job>,
    notices: broadcast::Sender<(String, u64)>,
}

impl Db {
    /// Connects twice to `url` (statements, LISTEN) on a thread of its own.
    pub async fn connect(url: &str) -> Result<Db, DbError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| format!("the database URL is not one PostgreSQL reads: {e}"))?;
        let (ready_tx, ready_rx) = oneshot::channel();
        let (jobs, mut job_rx) = mpsc::unbounded_channel::<Job>();
        let (notices, _) = broadcast::channel(NOTICES);
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
                    let clients = match open(&config, notify).await {
                        Ok(c) => {
                            let _ = ready_tx.send(Ok(()));
                            c
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    // Each job runs as a task: statements of different
                    // callers go down the connection together.
                    while let Some(job) = job_rx.recv().await {
                        tokio::spawn(job(&clients));
                    }
                });
            })
            .map_err(|e| format!("cannot start its thread: {e}"))?;
        ready_rx
            .await
            .map_err(|_| "its thread stopped".to_string())??;
        Ok(Db { jobs, notices })
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

    /// Runs `f` without waiting for it (a task of the database's thread),
    /// its writes committed as `commit` says.
    pub fn spawn<F, Fut>(&self, commit: Commit, f: F)
    where
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let job: Job = Box::new(move |c| Box::pin(f(c.get(commit))));
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
        let job: Job = Box::new(move |c| {
            let c = c.get(commit);
            Box::pin(async move { reply(f(c).await.map_err(|e| describe(&e))) })
        });
        self.jobs
            .send(job)
            .map_err(|_| "the database connection is gone".to_string())
    }

    /// Every `(session, event id)` announced on [`CHANNEL`] from now on.
    pub fn notices(&self) -> broadcast::Receiver<(String, u64)> {
        self.notices.subscribe()
    }
}

/// A connection whose driver runs as a task of this thread.
async fn connect(config: &tokio_postgres::Config) -> Result<Client, DbError> {
    let (client, conn) = config.connect(NoTls).await.map_err(|e| describe(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// The statement connections, with the listening one started beside them.
async fn open(
    config: &tokio_postgres::Config,
    notices: broadcast::Sender<(String, u64)>,
) -> Result<Clients, DbError> {
    let durable = connect(config).await?;
    let relaxed = connect(config).await?;
    relaxed
        .batch_execute("SET synchronous_commit TO off")
        .await
        .map_err(|e| describe(&e))?;
    let (listener, mut lconn) = config.connect(NoTls).await.map_err(|e| describe(&e))?;
    tokio::spawn(async move {
        while let Some(Ok(message)) = std::future::poll_fn(|cx| lconn.poll_message(cx)).await {
            if let AsyncMessage::Notification(n) = message {
                if let Some(notice) = parse_notice(n.payload()) {
                    // Nobody following is fine.
                    let _ = notices.send(notice);
                }
            }
        }
    });
    listener
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(|e| describe(&e))?;
    // The listening client must outlive this function: its connection task
    // ends when the client is dropped. It lives as long as the thread.
    tokio::spawn(async move {
        let _keep = listener;
        std::future::pending::<()>().await;
    });
    Ok(Clients {
        durable: Arc::new(durable),
        relaxed: Arc::new(relaxed),
    })
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
}
