//! Background jobs: commands `run_shell` started with `"background": true`
//! that keep running after the call returns. The table is one per agent
//! session (it travels in `ToolContext::jobs`); each job has a supervising
//! task that owns the process, feeds its output (stdout and stderr as they
//! come, in one stream) into a bounded ring (`ring.rs`) and records how it
//! ended. Stopping is TERM to the process group, then KILL after a short
//! grace; on a remote target the far side's group is stopped first
//! (`host::remote_job`). A local job also has a guardian (`guard.rs`) that
//! stops its group if buddy is killed outright. The table does not decide whether a command may run
//! (`run_shell` asks the approval gate before it starts anything) and does
//! not build processes (the target or the sandbox does); the tools that read,
//! write and stop jobs are in `tools.rs`.

pub mod guard;
pub mod ring;
pub mod tools;

use crate::host::remote_job::RemoteJob;
use guard::Guard;
use ring::{Chunk, Ring};
use serde::{Deserialize, Serialize};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// Output kept per job: older output is dropped (and the reader told) past it.
pub const RING_BYTES: usize = 1 << 20;
/// Jobs that may run at once in one session: each holds a process, pipes and a task.
pub const MAX_RUNNING: usize = 16;
/// Jobs a session keeps listed; the oldest ended ones leave first.
const MAX_LISTED: usize = 64;
/// Between TERM and KILL: long enough for a dev server to close its sockets.
pub const STOP_GRACE: Duration = Duration::from_secs(2);
/// The longest `shell_output` may wait for news, so a call cannot hang a turn.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// The most one `shell_write` sends.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// How long a write may wait for a job that does not read its stdin.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A job as `/jobs` (`Event::Jobs`) shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: String,
    pub command: String,
    pub running: bool,
    /// Its exit code, once it exited by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Milliseconds from its start to now, or to its end.
    pub runtime_ms: u64,
}

impl JobInfo {
    /// `running`, `exited 0`, `killed by signal 15`: how a person reads the state.
    pub fn state(&self) -> String {
        match (self.running, self.exit_code, self.signal) {
            (true, ..) => "running".into(),
            (false, Some(code), _) => format!("exited {code}"),
            (false, None, Some(sig)) => format!("killed by signal {sig}"),
            (false, None, None) => "ended".into(),
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Stopped by `shell_kill` or the session's end, not by itself.
    pub stopped: bool,
    at: Instant,
}

impl Ended {
    pub fn describe(&self) -> String {
        let how = match (self.code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => "no exit status".into(),
        };
        if self.stopped {
            format!("stopped ({how})")
        } else {
            format!("exited ({how})")
        }
    }
}

struct Shared {
    ring: Ring,
    ended: Option<Ended>,
    /// Both pipes reached their end: no more output will come.
    drained: bool,
}

pub struct Job {
    pub id: String,
    pub command: String,
    started: Instant,
    shared: Mutex<Shared>,
    /// Bumped at every change (output, exit), for readers that wait.
    changed: watch::Sender<u64>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// The local process group, killed outright if the job is dropped running.
    group: Option<i32>,
    /// Stops the group if buddy dies first; dismissed once the job is over.
    guard: Mutex<Option<Guard>>,
}

/// What one `shell_output` read found.
pub struct Output {
    pub chunk: Chunk,
    pub ended: Option<Ended>,
}

impl Job {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub fn ended(&self) -> Option<Ended> {
        self.lock().ended
    }

    pub fn info(&self) -> JobInfo {
        let ended = self.ended();
        let until = ended.map_or_else(Instant::now, |e| e.at);
        JobInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            running: ended.is_none(),
            exit_code: ended.and_then(|e| e.code),
            signal: ended.and_then(|e| e.signal),
            runtime_ms: until.duration_since(self.started).as_millis() as u64,
        }
    }

    /// Output since the last read (at most `limit` bytes) and whether the
    /// job has ended. With nothing new and the job running, waits up to
    /// `wait` for output or the end.
    pub async fn read(&self, wait: Duration, limit: usize) -> Output {
        let mut rx = self.changed.subscribe();
        let idle = {
            let s = self.lock();
            s.ring.unread() == 0 && !(s.ended.is_some() && s.drained)
        };
        if idle && !wait.is_zero() {
            let _ = tokio::time::timeout(wait.min(MAX_WAIT), rx.changed()).await;
        }
        let mut s = self.lock();
        Output {
            chunk: s.ring.read(limit),
            ended: s.ended,
        }
    }

    /// Sends `input` to the job's stdin.
    pub async fn write(&self, input: &[u8]) -> Result<(), String> {
        if input.len() > MAX_INPUT_BYTES {
            return Err(format!(
                "input is {} bytes; send at most {MAX_INPUT_BYTES} at a time",
                input.len()
            ));
        }
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err("the job's stdin is closed".into());
        };
        let sent = async {
            pipe.write_all(input).await?;
            pipe.flush().await
        };
        match tokio::time::timeout(WRITE_TIMEOUT, sent).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                *stdin = None;
                Err(format!("cannot write to the job's stdin: {e}"))
            }
            Err(_) => Err(format!(
                "the job did not take the input within {} s (it is not reading its stdin)",
                WRITE_TIMEOUT.as_secs()
            )),
        }
    }

    /// Stops the job (TERM to its process group, KILL after the grace) and
    /// waits for its supervisor to finish. Returns how it ended (it may
    /// have ended by itself before).
    pub async fn kill(&self) -> Option<Ended> {
        let stop = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(stop) = stop {
            let _ = stop.send(());
        }
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            // The supervisor bounds its own stop; this bound is for a stuck remote client.
            if tokio::time::timeout(STOP_GRACE * 4, task).await.is_err() {
                kill_group(self.group, rustix::process::Signal::Kill);
            }
        }
        self.ended()
    }
}

impl Drop for Job {
    /// A table dropped without `stop_all` (a runtime torn down): the
    /// process group is killed at once, since nobody can wait for a grace.
    fn drop(&mut self) {
        if self.lock().ended.is_none() {
            kill_group(self.group, rustix::process::Signal::Kill);
        }
    }
}

fn kill_group(group: Option<i32>, signal: rustix::process::Signal) {
    if let Some(pid) = group.and_then(rustix::process::Pid::from_raw) {
        // Gone already is fine.
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// The jobs of one session.
#[derive(Default)]
pub struct JobTable {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The last id given; ids count from 1 per session.
    last: u64,
    jobs: Vec<Arc<Job>>,
}

impl JobTable {
    pub fn new() -> JobTable {
        JobTable::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `command` (built by the target or the sandbox, for the line
    /// `line`) as a job; `remote` reaches its far side on a remote target.
    pub fn start(
        &self,
        line: &str,
        mut command: Command,
        remote: Option<RemoteJob>,
    ) -> Result<Arc<Job>, String> {
        let mut inner = self.lock();
        let running = inner.jobs.iter().filter(|j| j.ended().is_none()).count();
        if running >= MAX_RUNNING {
            return Err(format!(
                "{running} background jobs are running, the most a session may have; stop one with shell_kill first"
            ));
        }
        // The guardian first: a job never runs without one.
        let mut guard = Guard::start(STOP_GRACE)?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the command: {e}"))?;
        let group = child.id().map(|p| p as i32);
        if let Some(group) = group {
            guard.watch(group);
        }
        inner.last += 1;
        let (stop_tx, stop_rx) = oneshot::channel();
        let job = Arc::new(Job {
            id: inner.last.to_string(),
            command: line.to_string(),
            started: Instant::now(),
            shared: Mutex::new(Shared {
                ring: Ring::new(RING_BYTES),
                ended: None,
                drained: false,
            }),
            changed: watch::Sender::new(0),
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            stop: Mutex::new(Some(stop_tx)),
            task: Mutex::new(None),
            group,
            guard: Mutex::new(Some(guard)),
        });
        // The supervisor holds the job weakly: a table that is gone takes its jobs with it.
        let task = tokio::spawn(supervise(Arc::downgrade(&job), child, remote, stop_rx));
        *job.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        inner.jobs.push(job.clone());
        // Forget the oldest ended jobs beyond the listing's bound.
        while inner.jobs.len() > MAX_LISTED {
            match inner.jobs.iter().position(|j| j.ended().is_some()) {
                Some(i) => drop(inner.jobs.remove(i)),
                None => break,
            }
        }
        Ok(job)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        let id = id.trim();
        self.lock().jobs.iter().find(|j| j.id == id).cloned()
    }

    /// Every job still listed, oldest first.
    pub fn list(&self) -> Vec<JobInfo> {
        self.lock().jobs.iter().map(|j| j.info()).collect()
    }

    /// The ids a model could use, for a message about an unknown one.
    pub fn ids(&self) -> Vec<String> {
        self.lock().jobs.iter().map(|j| j.id.clone()).collect()
    }

    /// Stops every job and forgets them all; ids start again from 1 (a
    /// session cleared, or the agent shutting down). The jobs stop at once,
    /// each with its own grace.
    pub async fn stop_all(&self) {
        let jobs = {
            let mut inner = self.lock();
            inner.last = 0;
            std::mem::take(&mut inner.jobs)
        };
        futures_util::future::join_all(jobs.iter().map(|j| j.kill())).await;
    }
}

/// Owns the job's process: reads its output into the ring, records its end,
/// and stops it when asked.
async fn supervise(
    job: std::sync::Weak<Job>,
    mut child: tokio::process::Child,
    mut remote: Option<RemoteJob>,
    mut stop: oneshot::Receiver<()>,
) {
    let group = child.id().map(|p| p as i32);
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut out_buf = vec![0u8; 16 * 1024];
    let mut err_buf = vec![0u8; 8 * 1024];
    let mut status = None;
    let push = |bytes: &[u8]| {
        if let Some(job) = job.upgrade() {
            job.lock().ring.push(bytes);
            job.bump();
        }
    };
    loop {
        if status.is_some() && stdout.is_none() && stderr.is_none() {
            break;
        }
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf), if stdout.is_some() => match n {
                Some(n) => push(&out_buf[..n]),
                None => stdout = None,
            },
            n = read_some(&mut stderr, &mut err_buf), if stderr.is_some() => match n {
                Some(n) => push(&err_buf[..n]),
                None => stderr = None,
            },
            s = child.wait(), if status.is_none() => {
                let s = s.ok();
                status = Some(s);
                if let Some(job) = job.upgrade() {
                    job.lock().ended = Some(ended_from(s, false));
                    job.bump();
                }
                if let Some(r) = &mut remote {
                    r.finished();
                }
            }
            // Asked, or the job is gone (its table was dropped): stop either way.
            _ = &mut stop => {
                let s = stop_process(&mut child, group, status.is_none(), remote.as_mut()).await;
                if status.is_none() {
                    if let Some(job) = job.upgrade() {
                        job.lock().ended = Some(ended_from(s, true));
                        job.bump();
                    }
                }
                // Whatever still holds the pipes was in the group and is gone;
                // do not wait for stragglers that left it.
                break;
            }
        }
    }
    if let Some(job) = job.upgrade() {
        job.lock().drained = true;
        *job.stdin.lock().await = None;
        // Ended by itself or stopped: nothing is left for the guardian.
        drop(job.guard.lock().unwrap_or_else(|p| p.into_inner()).take());
        job.bump();
    }
}

/// TERM to the group (and the far side's group first, on a remote target),
/// KILL after the grace; returns the leader's status if it was still running.
async fn stop_process(
    child: &mut tokio::process::Child,
    group: Option<i32>,
    running: bool,
    remote: Option<&mut RemoteJob>,
) -> Option<std::process::ExitStatus> {
    use rustix::process::Signal;
    if let Some(r) = remote {
        if running {
            r.stop(STOP_GRACE).await;
        }
    }
    if !running {
        // The leader exited; members of its group may still run.
        kill_group(group, Signal::Kill);
        return None;
    }
    kill_group(group, Signal::Term);
    let status = match tokio::time::timeout(STOP_GRACE, child.wait()).await {
        Ok(s) => s.ok(),
        Err(_) => None,
    };
    // Members that outlived the leader, or a leader that ignored TERM.
    kill_group(group, Signal::Kill);
    match status {
        Some(s) => Some(s),
        None => child.wait().await.ok(),
    }
}

fn ended_from(status: Option<std::process::ExitStatus>, stopped: bool) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    Ended {
        code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stopped,
        at: Instant::now(),
    }
}

/// Reads one chunk; `None` at end of stream or on error.
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let p = pipe.as_mut()?;
    match p.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{LocalTarget, Target};
    use std::path::Path;

    fn start(table: &JobTable, line: &str) -> Arc<Job> {
        table
            .start(line, LocalTarget.command(line, Path::new("/")), None)
            .unwrap()
    }

    #[tokio::test]
    async fn a_job_is_read_written_and_stopped() {
        let table = JobTable::new();
        let job = start(&table, "echo ready; while read l; do echo \"got $l\"; done");
        assert_eq!(job.id, "1");
        let first = job.read(Duration::from_secs(10), 1000).await;
        assert_eq!(first.chunk.bytes, b"ready\n");
        assert!(first.ended.is_none());
        job.write(b"ping\n").await.unwrap();
        let mut seen = Vec::new();
        while !seen.ends_with(b"got ping\n") {
            let r = job.read(Duration::from_secs(10), 1000).await;
            assert!(!r.chunk.bytes.is_empty(), "no echo of the input");
            seen.extend(r.chunk.bytes);
        }
        let ended = job.kill().await.expect("ended");
        assert!(ended.stopped);
        assert_eq!(ended.signal, Some(15));
        assert!(!table.list()[0].running);
        assert_eq!(table.list()[0].state(), "killed by signal 15");
    }

    #[tokio::test]
    async fn an_exit_is_reported_with_its_code() {
        let table = JobTable::new();
        let job = start(&table, "echo done; exit 4");
        let mut ended = None;
        let mut out = Vec::new();
        while ended.is_none() {
            let r = job.read(Duration::from_secs(10), 1000).await;
            out.extend(r.chunk.bytes);
            ended = r.ended;
        }
        // Output written before the exit is there (now or at the next read).
        out.extend(job.read(Duration::ZERO, 1000).await.chunk.bytes);
        assert_eq!(out, b"done\n");
        let e = ended.unwrap();
        assert_eq!((e.code, e.stopped), (Some(4), false));
        assert_eq!(start(&table, "true").id, "2");
    }

    #[tokio::test]
    async fn stop_all_ends_the_whole_group_even_if_term_is_ignored() {
        let table = JobTable::new();
        let job = start(&table, "trap '' TERM; sleep 30 & echo $!; wait");
        let pid =
            String::from_utf8(job.read(Duration::from_secs(10), 100).await.chunk.bytes).unwrap();
        let pid: i32 = pid.trim().parse().unwrap();
        let t0 = Instant::now();
        table.stop_all().await;
        assert!(t0.elapsed() < STOP_GRACE * 3);
        assert!(table.list().is_empty());
        // The background sleep was in the job's group: gone (or a zombie)
        // once the KILL sent to the group is delivered, which on a busy
        // machine may take a moment after the call returns.
        let stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let dead = |s: &str| {
            s.is_empty()
                || s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
        };
        let killed = Instant::now();
        while !dead(&stat()) {
            assert!(killed.elapsed() < Duration::from_secs(5), "{}", stat());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(job.ended().is_some());
        assert_eq!(start(&table, "true").id, "1");
    }
}
