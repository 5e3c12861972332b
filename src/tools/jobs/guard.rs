//! A job's guardian: a tiny `sh` that ends a background job's process group
//! when buddy dies without stopping it (kill -9, a crash), since nothing of
//! buddy's own runs then. It owns that one watch; stopping a job while buddy
//! lives is the supervisor's (`super::supervise`).
//!
//! The guardian reads its stdin, a pipe whose write end only buddy holds
//! (close-on-exec, so no job or other child inherits it). buddy sends the
//! job's process group, and a line more when the job is over; end of file
//! before that line means buddy is gone, and the guardian stops the group as
//! a stop does (TERM, KILL after the grace). The kernel closes the pipe for
//! every kind of death, which is why this is a pipe and not a signal: the
//! alternative, `PR_SET_PDEATHSIG` on the job, fires when the *thread* that
//! forked it ends (tokio's blocking threads come and go), reaches only the
//! group's leader, not what it started, and is Linux-only.
//!
//! The guardian is in a process group of its own and ignores the terminal's
//! signals, so Ctrl-C or a hang-up that ends buddy does not end its guard.
//! One window is left open: buddy killed between starting the job and
//! sending its group (a few system calls) leaves that job unguarded.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

/// The guardian's script: `$1` is the grace in seconds. It waits for the
/// group, then for the dismissal; end of file in either place before the
/// group is known means no job started.
const SCRIPT: &str = "trap '' INT HUP TERM QUIT\n\
    read g || exit 0\n\
    read x && exit 0\n\
    sig() { kill -$1 -$g 2>/dev/null || env kill -$1 -- -$g 2>/dev/null; }\n\
    sig TERM || exit 0\n\
    sleep \"$1\"\n\
    sig KILL\n\
    exit 0";

/// The write end of one guardian's pipe. Dropping it dismisses the guardian.
pub struct Guard {
    pipe: Option<std::fs::File>,
}

impl Guard {
    /// Starts a guardian that waits to be told the group to watch.
    pub fn start(grace: Duration) -> Result<Guard, String> {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg("buddy-job-guard")
            .arg(grace.as_secs().max(1).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            // It must outlive buddy; tokio reaps it once it exits.
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| format!("cannot start the job's guardian (sh): {e}"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or("the job's guardian has no stdin")?;
        let fd: OwnedFd = stdin
            .into_owned_fd()
            .map_err(|e| format!("cannot keep the job's guardian's pipe: {e}"))?;
        Ok(Guard {
            pipe: Some(std::fs::File::from(fd)),
        })
    }

    /// Tells the guardian which process group to stop if buddy dies.
    pub fn watch(&mut self, group: i32) {
        self.send(&format!("{group}\n"));
    }

    /// The job is over (or stopped by buddy): the guardian leaves without
    /// signalling anything.
    pub fn dismiss(&mut self) {
        self.send("done\n");
        self.pipe = None;
    }

    fn send(&mut self, line: &str) {
        // A few bytes into an empty pipe do not block; a guardian that is
        // already gone has nothing to be told.
        if let Some(pipe) = &mut self.pipe {
            if pipe.write_all(line.as_bytes()).is_err() {
                self.pipe = None;
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.dismiss();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// buddy's end as the kernel makes it: the pipe closes with no dismissal.
    #[tokio::test]
    async fn the_group_is_stopped_when_the_pipe_closes_without_a_dismissal() {
        let mut job = std::process::Command::new("sleep")
            .arg("300")
            .process_group(0)
            .spawn()
            .unwrap();
        let mut guard = Guard::start(Duration::from_secs(1)).unwrap();
        guard.watch(job.id() as i32);
        guard.pipe = None;
        let status = tokio::task::spawn_blocking(move || job.wait())
            .await
            .unwrap()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(15));
    }
}
