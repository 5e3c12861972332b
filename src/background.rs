//! Housekeeping off the runtime's workers: building an agent for a new run,
//! and the durable save at the end of a turn.
//!
//! In a process that relays many sessions (`buddy serve`, which calls
//! [`yield_to_streams`]), each job runs on a thread of its own at a lower CPU
//! priority (nice +10 on Linux), so when the machine is busy the streams being
//! relayed get the CPU first and the housekeeping takes what is left. A thread
//! per job, not a pool: jobs are rare (one or two per run), a thread costs
//! about a tenth of a millisecond, and fsyncs from many sessions still run
//! side by side.
//! A thread that lowered its priority cannot raise it again without
//! privileges, which is why these threads are not shared with other work.
//!
//! Everywhere else (`exec`, the REPL) the job runs on the runtime's blocking
//! pool at normal priority: there the user waits for that save, and a busy
//! machine must not make them wait longer.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

static YIELDING: AtomicBool = AtomicBool::new(false);

/// From now on, this process's housekeeping yields the CPU to live streams.
pub fn yield_to_streams() {
    YIELDING.store(true, Ordering::Relaxed);
}

/// Why a job gave no result.
#[derive(Debug)]
pub enum Lost {
    /// The job panicked: the payload, for the caller to rethrow or report.
    Panicked(Box<dyn std::any::Any + Send>),
    /// No thread could be started and the fallback did not finish.
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

/// Nice value of a housekeeping thread: well below the streams' weight
/// (about a tenth of a default thread's share when both want the CPU).
const NICE: i32 = 10;

/// Runs `job` off the runtime's workers and waits for its result: on a
/// housekeeping thread at a lower priority once [`yield_to_streams`] was
/// called, on the blocking pool otherwise.
pub async fn run<T, F>(job: F) -> Result<T, Lost>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match YIELDING.load(Ordering::Relaxed) {
        true => on_own_thread(job).await,
        false => on_blocking_pool(job).await,
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

/// Runs `job` on a thread of its own at a lower priority. Inside a tokio
/// runtime the job runs in that runtime's context, so it may spawn tasks.
/// When no thread can be started, it falls back to the blocking pool.
async fn on_own_thread<T, F>(job: F) -> Result<T, Lost>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Handle::try_current().ok();
    // `spawn` drops its closure when it fails, so the job is handed over
    // through this slot: whatever the new thread has not taken is still here
    // for the fallback.
    let slot = Arc::new(Mutex::new(Some((job, tx))));
    let handed = slot.clone();
    let spawned = std::thread::Builder::new()
        .name("buddy-housekeeping".into())
        .spawn(move || {
            let Some((job, tx)) = handed.lock().ok().and_then(|mut s| s.take()) else {
                return;
            };
            lower_priority();
            let _guard = runtime.as_ref().map(|r| r.enter());
            let out = std::panic::catch_unwind(AssertUnwindSafe(job));
            let _ = tx.send(out);
        });
    if spawned.is_err() {
        let Some((job, tx)) = slot.lock().ok().and_then(|mut s| s.take()) else {
            return Err(Lost::NotRun("the housekeeping job was lost".into()));
        };
        let done = tokio::task::spawn_blocking(move || {
            let out = std::panic::catch_unwind(AssertUnwindSafe(job));
            let _ = tx.send(out);
        });
        if let Err(e) = done.await {
            return Err(Lost::NotRun(e.to_string()));
        }
    }
    match rx.await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(payload)) => Err(Lost::Panicked(payload)),
        Err(_) => Err(Lost::NotRun("the housekeeping thread ended early".into())),
    }
}

/// Lowers this thread's CPU priority. Best effort: where it is refused or not
/// supported, the job runs at normal priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // On Linux a thread id given as a process id applies to that thread
        // alone (setpriority(2)), which is what is wanted here.
        let me = rustix::thread::gettid();
        let _ = rustix::process::setpriority_process(Some(me), NICE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_job_gives_its_result_and_runs_in_the_runtime_context() {
        let out = on_own_thread(|| {
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
        let inside = on_own_thread(|| {
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
    async fn a_panic_in_a_job_is_given_back() {
        for out in [
            on_own_thread(|| -> u8 { panic!("boom") }).await,
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
