//! Stopping a command on a remote target. Killing the local `ssh` or
//! `podman exec` client does not stop what it started on the far side, so a
//! remote command runs in a session of its own (`setsid`, where there is one)
//! with its process id in a file there; stopping it signals that process group
//! through a second, short command.
//!
//! A stop can reach the far side before the command has started (a timeout
//! or Ctrl-C while `ssh` still connects), when there is no process id to
//! signal yet. So the stopper first leaves a stop mark beside the pid file,
//! then reads the pid; the wrapper writes the pid, then looks for the mark.
//! Whatever the order, one of them sees the other and the command is ended
//! (or never started) rather than left running unsupervised.

use super::{shell_quote, Target};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `sig NAME` signals the command's process group (`$p`). `kill -SIG -PGID`
/// is a builtin in bash and ash; dash needs the external kill for a group;
/// without a group, the process alone.
const SIG: &str = "sig() { kill -$1 -$p 2>/dev/null || env kill -$1 -- -$p 2>/dev/null || kill -$1 $p 2>/dev/null; }";

pub struct RemoteJob {
    target: Arc<dyn Target>,
    pid_file: String,
    /// Set once the command has ended or been stopped: nothing left to kill.
    done: bool,
}

impl RemoteJob {
    pub fn new(target: Arc<dyn Target>) -> RemoteJob {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        RemoteJob {
            target,
            // Expanded on the far side, where TMPDIR may differ from ours.
            pid_file: format!(
                "\"${{TMPDIR:-/tmp}}\"/.buddy-job-{}-{n}-{nanos:x}",
                std::process::id()
            ),
            done: false,
        }
    }

    /// The script that runs `command` so that [`RemoteJob::stop`] can reach it;
    /// it exits with the command's status.
    pub fn wrap(&self, command: &str) -> String {
        self.wrap_with(command, false)
    }

    /// As [`RemoteJob::wrap`], with the wrapper's stdin handed to the
    /// command (a background job that reads input). The input goes through
    /// a relay (`cat` into a FIFO) that stops the command when the input
    /// ends: buddy never closes a job's input while it runs, so the end of
    /// it means the connection dropped (buddy was killed, or the network
    /// went), and no one is left to read or stop the job. Without `mkfifo`
    /// the command gets the stdin itself and outlives a dropped connection.
    /// (A command started with `&` reads /dev/null, and dash applies that
    /// before a plain `<&0`, so stdin goes round through descriptor 3.)
    pub fn wrap_keeping_stdin(&self, command: &str) -> String {
        self.wrap_with(command, true)
    }

    fn wrap_with(&self, command: &str, keep_stdin: bool) -> String {
        let f = &self.pid_file;
        let q = shell_quote(command);
        let start = |stdin: &str| {
            format!(
                "if command -v setsid >/dev/null 2>&1; then setsid sh -c {q}{stdin} & else sh -c {q}{stdin} & fi\n\
                 p=$!; echo $p 2>/dev/null >{f}\n"
            )
        };
        let run = if keep_stdin {
            // The relay opens the FIFO read-write, so it never blocks on a
            // command that did not start; it is stopped when the command ends.
            format!(
                "exec 3<&0\n\
                 if mkfifo {f}.in 2>/dev/null; then\n\
                 {}\
                 {SIG}\n\
                 (cat <&3 1<>{f}.in; sig TERM; sleep 1; sig KILL) >/dev/null 2>&1 & r=$!\n\
                 else\n\
                 {}\
                 fi\n\
                 exec 3<&-\n",
                start(&format!(" <{f}.in 3<&-")),
                start(" <&3 3<&-")
            )
        } else {
            start("")
        };
        format!(
            "[ -e {f}.stop ] && {{ rm -f {f}.stop; exit 143; }}\n\
             r=\n\
             {run}\
             {SIG}\n\
             [ -e {f}.stop ] && {{ sig TERM; (sleep 1; sig KILL) </dev/null >/dev/null 2>&1 & }}\n\
             wait $p; s=$?; [ -z \"$r\" ] || kill $r 2>/dev/null; rm -f {f} {f}.stop {f}.in; exit $s"
        )
    }

    /// The command ended by itself.
    pub fn finished(&mut self) {
        self.done = true;
    }

    fn stop_script(&self) -> String {
        let f = &self.pid_file;
        // The mark first: a wrapper that writes its pid after this read
        // finds the mark and stops its command itself. `true`, not `:`: a
        // failed redirection on a special built-in would end the script.
        format!(
            "true 2>/dev/null >{f}.stop\n\
             p=$(cat {f} 2>/dev/null) || exit 0; rm -f {f}\n\
             {SIG}\n\
             sig TERM || exit 0\n\
             i=0; while [ $i -lt 10 ] && kill -0 $p 2>/dev/null; do sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done\n\
             sig KILL; exit 0"
        )
    }

    /// Stops the command and waits (at most `limit`) until that is done.
    pub async fn stop(&mut self, limit: Duration) {
        self.done = true;
        let child = self
            .target
            .command(&self.stop_script(), Path::new("/"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(false)
            .spawn();
        if let Ok(mut child) = child {
            let _ = tokio::time::timeout(limit, child.wait()).await;
        }
    }
}

/// Stoppers started by dropped (cancelled) calls, still to be waited for.
static PENDING: Mutex<Vec<std::process::Child>> = Mutex::new(Vec::new());

/// Waits (at most `limit`) for the stoppers of cancelled calls. A target
/// calls this before it goes away: an SSH stopper rides the shared
/// connection, which must outlive it.
pub fn wait_for_stops(limit: Duration) {
    let Ok(mut pending) = PENDING.lock() else {
        return;
    };
    let deadline = std::time::Instant::now() + limit;
    pending.retain_mut(|child| loop {
        match child.try_wait() {
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            _ => return false,
        }
    });
}

impl Drop for RemoteJob {
    /// A call dropped mid-run (cancelled) cannot wait: it starts the stopper
    /// as a plain process and leaves it to [`wait_for_stops`].
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut cmd = self
            .target
            .command(&self.stop_script(), Path::new("/"))
            .into_std();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Ok(child) = cmd.spawn() {
            if let Ok(mut pending) = PENDING.lock() {
                pending.push(child);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::LocalTarget;

    /// A stand-in for a remote target: the local shell, but the wrapper and
    /// stopper are what a remote one would run.
    fn local() -> Arc<dyn Target> {
        Arc::new(LocalTarget)
    }

    #[tokio::test]
    async fn the_wrapped_command_keeps_its_output_and_status() {
        let job = RemoteJob::new(local());
        let out = job
            .target
            .command(
                &job.wrap("echo 'it''s'; echo err >&2; exit 7"),
                Path::new("/"),
            )
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(7));
        assert_eq!(out.stdout, b"its\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[tokio::test]
    async fn a_wrapped_command_can_keep_the_wrappers_stdin() {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let job = RemoteJob::new(local());
        // The input stays open until the command has ended: its end would
        // stop the command (see the next test).
        let mut child = job
            .target
            .command(
                &job.wrap_keeping_stdin("read l; echo \"got $l\""),
                Path::new("/"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"ping\n").await.unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .await
            .unwrap();
        assert_eq!(line, "got ping\n");
        // It ends by itself, its input still open.
        assert_eq!(child.wait().await.unwrap().code(), Some(0));
        drop(stdin);
        // The plain wrapper gives its command /dev/null, as `&` does.
        let (_, out, _) = crate::host::run_script(
            job.target.as_ref(),
            &job.wrap("read l; echo \"got $l\""),
            Path::new("/"),
            Some(b"ping\n"),
        )
        .await
        .unwrap();
        assert_eq!(out, b"got \n");
    }

    /// The input's end is the connection's: a command that keeps running
    /// (it does not read) is stopped, and the wrapper leaves no files.
    #[tokio::test]
    async fn the_end_of_the_input_stops_a_command_that_keeps_it() {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let job = RemoteJob::new(local());
        let mut child = job
            .target
            .command(
                &job.wrap_keeping_stdin("echo started; exec sleep 300"),
                Path::new("/"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .await
            .unwrap();
        assert_eq!(line, "started\n");
        drop(child.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .expect("the command was not stopped")
            .unwrap();
        assert_eq!(status.code(), Some(143));
        assert_eq!(leftovers(&job), Vec::<String>::new());
    }

    /// Files this job left in the temporary directory.
    fn leftovers(job: &RemoteJob) -> Vec<String> {
        let name = job.pid_file.rsplit('/').next().unwrap().to_string();
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&name))
            .collect()
    }

    /// A stop that reaches the far side before the command (a timeout while
    /// the connection is still made): the command never starts, and the
    /// mark the stop left is gone with the wrapper.
    #[tokio::test]
    async fn a_stop_before_the_start_keeps_the_command_from_running() {
        let dir = std::env::temp_dir().join(format!("buddy-early-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("ran");
        let mut job = RemoteJob::new(local());
        job.stop(Duration::from_secs(5)).await;
        let status = job
            .target
            .command(
                &job.wrap(&format!("touch {}", marker.display())),
                Path::new("/"),
            )
            .status()
            .await
            .unwrap();
        assert_eq!(status.code(), Some(143));
        assert!(!marker.exists(), "the stopped command ran");
        assert_eq!(leftovers(&job), Vec::<String>::new());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The stop lands after the wrapper looked for a mark but before it
    /// wrote the pid: the wrapper finds the mark once its command started
    /// and ends it. (The wrapper is run in two halves around the stop.)
    #[tokio::test]
    async fn a_stop_between_the_check_and_the_pid_ends_the_command() {
        let mut job = RemoteJob::new(local());
        let script = job.wrap("sleep 30");
        let (check, rest) = script.split_once('\n').unwrap();
        let first = job
            .target
            .command(check, Path::new("/"))
            .status()
            .await
            .unwrap();
        assert_eq!(first.code(), Some(1), "no mark yet: {check}");
        job.stop(Duration::from_secs(5)).await;
        let started = std::time::Instant::now();
        let status = tokio::time::timeout(
            Duration::from_secs(10),
            job.target.command(rest, Path::new("/")).status(),
        )
        .await
        .expect("the command was ended")
        .unwrap();
        assert_eq!(status.code(), Some(143));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(leftovers(&job), Vec::<String>::new());
    }

    #[tokio::test]
    async fn stop_ends_the_command_and_its_children() {
        let dir = std::env::temp_dir().join(format!("buddy-remote-job-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("alive");
        let pid_file = dir.join("child.pid");
        let mut job = RemoteJob::new(local());
        // A child in the background that says who it is, then would touch
        // the marker later.
        let script = job.wrap(&format!(
            "sh -c 'echo $$ > {}; sleep 1; touch {}' & sleep 30",
            pid_file.display(),
            marker.display()
        ));
        let mut child = job
            .target
            .command(&script, Path::new("/"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the pid file exists, then stop.
        let started = std::time::Instant::now();
        loop {
            let found = std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .flatten()
                .any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!(".buddy-job-{}-", std::process::id()))
                });
            if found && std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n')) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "no pid file");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        job.stop(Duration::from_secs(5)).await;
        let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .expect("the wrapper ended")
            .unwrap();
        assert_eq!(status.code(), Some(143));
        // The background child is gone (or a zombie: dead, not yet reaped)
        // well before it would have touched the marker.
        let child_pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", child_pid.trim());
        let dead = || {
            std::fs::read_to_string(&stat).map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        };
        let stopped = std::time::Instant::now();
        while !dead() {
            assert!(
                stopped.elapsed() < Duration::from_secs(5),
                "a child survived the stop"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!marker.exists(), "a child survived the stop");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
