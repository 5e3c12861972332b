//! Housekeeping off the runtime's workers: building an agent for a new run,
//! and the durable save at the end of a turn.
//!
//! In a process that relays many sessions (`buddy serve`, which calls
//! [`yield_to_streams`]), jobs run on a pool of housekeeping threads at a
//! lower CPU priority (nice +10 on Linux), so when the machine is busy the
//! streams being relayed get the CPU first and the housekeeping takes what is
//! left. The pool is tokio's blocking pool of a runtime kept for that alone:
//! it grows while jobs wait, so fsyncs from many sessions run side by side,
//! and keeps an idle thread for a while, so a burst of runs does not start
//! (and tear down) a thread per job, which was about a tenth of the CPU of a
//! run's set-up. A thread that lowered its priority cannot raise it again
//! without privileges, which is why these threads are not shared with other
//! work.
//!
//! In the REPL the job runs on the runtime's blocking pool at normal
//! priority: there the user waits for that save, and a busy machine must not
//! make them wait longer, while the terminal stays live. In `exec` (which calls
//! [`run_inline`]) the job runs on the calling thread: one conversation is all
//! that process does and its user waits for the save anyway, so a thread
//! started for it would be pure start-up cost.

use std::sync::atomic::{AtomicU8, Ordering};

/// Where jobs run: [`POOL`], [`YIELDING`] or [`INLINE`].
static MODE: AtomicU8 = AtomicU8::new(POOL);
const POOL: u8 = 0;
const YIELDING: u8 = 1;
const INLINE: u8 = 2;

/// From now on, this process's housekeeping yields the CPU to live streams.
pub fn yield_to_streams() {
    MODE.store(YIELDING, Ordering::Relaxed);
}

/// From now on, this process's housekeeping runs on the caller's thread.
pub fn run_inline() {
    MODE.store(INLINE, Ordering::Relaxed);
}

/// Why a job gave no result.
#[derive(Debug)]
pub enum Lost {
    /// The job panicked: the payload, for the caller to rethrow or report.
    Panicked(Box<dyn std::any::Any + Send>),
    /// The job's pool shut down before it ran (only as the process ends).
    NotRun(String),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Panicked(p) => {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                write!(f, "it panicked: {what}")
            }
            Lost::NotRun(why) => f.write_str(why),
        }
    }
}

/// How much nicer a housekeeping thread is than the process: well below the
/// streams' weight (about a tenth of their share when both want the CPU).
const NICE: i32 = 10;

/// Runs `job` off the runtime's workers and waits for its result: on a
/// housekeeping thread at a lower priority once [`yield_to_streams`] was
/// called, on the blocking pool otherwise.
pub async fn run<T, F>(job: F) -> Result<T, Lost>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match MODE.load(Ordering::Relaxed) {
        YIELDING => on_housekeeping_pool(job).await,
        // A panic goes on as it would from the pool: given back to the caller.
        INLINE => {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).map_err(Lost::Panicked)
        }
        _ => on_blocking_pool(job).await,
    }
}

async fn on_blocking_pool<T, F>(job: F) -> Result<T, Lost>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(job).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => Err(Lost::Panicked(e.into_panic())),
        // Only when the runtime shuts down.
        Err(e) => Err(Lost::NotRun(e.to_string())),
    }
}

/// The pool of housekeeping threads: a runtime that is never driven, kept
/// for its blocking pool, whose threads lower their priority as they start.
/// The pool grows while jobs wait (fsyncs from many sessions run side by
/// side) and an idle thread ends after a while, so a burst of runs pays for
/// its threads once, not per job.
fn pool() -> Option<&'static tokio::runtime::Runtime> {
    static POOL: std::sync::OnceLock<Option<tokio::runtime::Runtime>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .thread_name("buddy-housekeeping")
            .on_thread_start(lower_priority)
            // Jobs beyond this many wait for a thread; each is short.
            .max_blocking_threads(64)
            .thread_keep_alive(std::time::Duration::from_secs(10))
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `job` on a housekeeping thread at a lower priority. Inside a tokio
/// runtime the job runs in that runtime's context, so it may spawn tasks.
/// When the pool cannot be built, it falls back to the blocking pool.
async fn on_housekeeping_pool<T, F>(job: F) -> Result<T, Lost>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let Some(pool) = pool() else {
        return on_blocking_pool(job).await;
    };
    let runtime = tokio::runtime::Handle::try_current().ok();
    let done = pool.spawn_blocking(move || {
        let _guard = runtime.as_ref().map(|r| r.enter());
        job()
    });
    match done.await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => Err(Lost::Panicked(e.into_panic())),
        Err(e) => Err(Lost::NotRun(e.to_string())),
    }
}

/// Lowers this thread's CPU priority. Best effort: where it is refused or not
/// supported, the job runs at normal priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // On Linux a thread id given as a process id applies to that thread
        // alone (setpriority(2)), which is what is wanted here. Relative to
        // the thread's own value: a server started under `nice -n 19` must
        // not get housekeeping threads above itself (root may raise them).
        let me = rustix::thread::gettid();
        if let Ok(now) = rustix::process::getpriority_process(Some(me)) {
            let _ = rustix::process::setpriority_process(Some(me), (now + NICE).min(19));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_job_gives_its_result_and_runs_in_the_runtime_context() {
        let out = on_housekeeping_pool(|| {
            // A job may spawn onto the runtime it was started from.
            let h = tokio::spawn(async { 2 + 2 });
            drop(h);
            std::thread::current().name().map(str::to_string)
        })
        .await
        .expect("ran");
        assert_eq!(out.as_deref(), Some("buddy-housekeeping"));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_job_runs_at_a_lower_priority_and_the_caller_keeps_its_own() {
        let before =
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).expect("priority");
        let inside = on_housekeeping_pool(|| {
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).expect("priority")
        })
        .await
        .expect("ran");
        assert_eq!(inside, (before + NICE).min(19));
        // Outside a serving process: the blocking pool, at normal priority.
        let pooled = on_blocking_pool(|| {
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).expect("priority")
        })
        .await
        .expect("ran");
        assert_eq!(pooled, before);
        let after =
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).expect("priority");
        assert_eq!(after, before);
    }

    #[tokio::test]
    async fn housekeeping_threads_are_reused_not_started_per_job() {
        let mut threads = std::collections::HashSet::new();
        for _ in 0..20 {
            let id = on_housekeeping_pool(|| std::thread::current().id()).await;
            threads.insert(id.expect("ran"));
        }
        // One job at a time: an idle thread takes the next one, save when the
        // job comes in just before that thread reports itself idle.
        assert!(threads.len() <= 10, "{} threads for 20 jobs", threads.len());
    }

    #[tokio::test]
    async fn inline_jobs_run_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let pooled = on_blocking_pool(move || std::thread::current().id()).await;
        assert_ne!(pooled.expect("ran"), caller);
        // The mode is process-wide; no other test of this binary depends on
        // where `run` puts a job, only on its result.
        run_inline();
        let inline = run(move || std::thread::current().id()).await;
        assert_eq!(inline.expect("ran"), caller);
        match run(|| -> u8 { panic!("boom") }).await {
            Err(Lost::Panicked(p)) => assert_eq!(p.downcast_ref::<&str>().copied(), Some("boom")),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_panic_in_a_job_is_given_back() {
        for out in [
            on_housekeeping_pool(|| -> u8 { panic!("boom") }).await,
            on_blocking_pool(|| -> u8 { panic!("boom") }).await,
        ] {
            match out {
                Err(Lost::Panicked(p)) => {
                    assert_eq!(p.downcast_ref::<&str>().copied(), Some("boom"))
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
