//! `Op::RunCommand` (`!command` at the REPL prompt): the user's own command,
//! run at once with `sh -c` on the execution target the tools use (this
//! host, the SSH server or the container; not the shared tmux pane, so its
//! output can be captured). Output is bounded in size and time; the service
//! reports it (`CommandRan`) and hands the exchange to the conversation so
//! the model sees it with the next prompt. Showing it is the front end's.

use super::emitter::Emitter;
use super::protocol::{CommandRun, EventKind, Op, OpId};
use crate::host::Target;
use tokio::task::JoinHandle;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Output kept per command (stdout and stderr together); the rest is counted.
pub const MAX_OUTPUT: usize = 64 * 1024;
/// A command still running after this is killed.
pub const TIME_LIMIT: Duration = Duration::from_secs(600);

impl CommandRun {
    /// The message the model gets.
    pub fn context(&self, actor: &str) -> String {
        let status = self.status();
        let mut text = format!(
            "I ran this command myself on {actor} ({status}):\n$ {}\n",
            self.command
        );
        if let Some(e) = &self.error {
            text.push_str(&format!("It could not start: {e}\n"));
            return text;
        }
        text.push_str("Output:\n```\n");
        text.push_str(&self.output);
        if !self.output.ends_with('\n') && !self.output.is_empty() {
            text.push('\n');
        }
        text.push_str("```\n");
        if self.dropped > 0 {
            text.push_str(&format!(
                "({} more bytes of output were cut)\n",
                self.dropped
            ));
        }
        text
    }

    /// The exchange as the user saw it, for a replay of the session: what
    /// they typed and how it ended.
    pub fn as_typed(&self) -> String {
        match &self.error {
            Some(_) => format!("!{}\n(could not start)", self.command),
            None => format!("!{}\n({})", self.command, self.status()),
        }
    }

    pub fn status(&self) -> String {
        match (self.code, self.timed_out) {
            (_, true) => format!("killed after {} s", TIME_LIMIT.as_secs()),
            (Some(c), _) => format!("exit status {c}"),
            (None, _) => "killed by a signal".into(),
        }
    }

    pub fn failed(&self) -> bool {
        self.code != Some(0) || self.error.is_some()
    }
}

/// Runs `command` on `target` in `cwd` (local targets) to its end, the time
/// limit or until the returned future is dropped (the process is killed).
pub async fn run(target: Arc<dyn Target>, cwd: PathBuf, command: String) -> CommandRun {
    let mut ran = CommandRun {
        command: command.clone(),
        code: None,
        output: String::new(),
        dropped: 0,
        timed_out: false,
        error: None,
        stopped: false,
    };
    // stderr joins stdout through the shell, so the two stay in order.
    let mut cmd = target.command(&format!("exec 2>&1; {command}"), &cwd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            ran.error = Some(e.to_string());
            return ran;
        }
    };
    let Some(mut stdout) = child.stdout.take() else {
        ran.error = Some("no output pipe".into());
        return ran;
    };
    let mut kept = Vec::new();
    let read = async {
        let mut buf = [0u8; 8192];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_OUTPUT.saturating_sub(kept.len()).min(n);
                    kept.extend_from_slice(&buf[..room]);
                    ran.dropped += n - room;
                }
            }
        }
        child.wait().await
    };
    let result = tokio::time::timeout(TIME_LIMIT, read).await;
    match result {
        Ok(Ok(status)) => ran.code = status.code(),
        Ok(Err(e)) => ran.error = Some(e.to_string()),
        Err(_) => ran.timed_out = true,
    }
    ran.output = String::from_utf8_lossy(&kept).into_owned();
    ran
}

/// The user's own commands (`Op::RunCommand`): where they run, the one in
/// progress, and those that ended during a run, whose exchange joins the
/// conversation when the run ends.
pub(super) struct Commands {
    target: Arc<dyn Target>,
    cwd: PathBuf,
    running: Option<RunningCommand>,
    /// (the op, the text for the model, the form the user saw).
    pub(super) later: Vec<(OpId, String, String)>,
}

struct RunningCommand {
    id: OpId,
    command: String,
    task: JoinHandle<CommandRun>,
}

impl Drop for RunningCommand {
    fn drop(&mut self) {
        // The process is killed with its future: it never outlives the agent.
        self.task.abort();
    }
}

impl Commands {
    pub(super) fn new(target: Arc<dyn Target>, cwd: PathBuf) -> Commands {
        Commands {
            target,
            cwd,
            running: None,
            later: Vec::new(),
        }
    }

    /// Starts `command` for op `id`; the refusal to send back when one is
    /// running already.
    fn start(&mut self, id: OpId, command: String) -> Option<EventKind> {
        if self.running.is_some() {
            return Some(EventKind::error(
                "a command is already running (stop it first)",
            ));
        }
        if command.trim().is_empty() {
            return Some(EventKind::error("no command to run"));
        }
        let task = tokio::spawn(run(self.target.clone(), self.cwd.clone(), command.clone()));
        self.running = Some(RunningCommand { id, command, task });
        None
    }

    /// Kills the command in progress: its op and the reply saying so.
    fn stop(&mut self) -> Option<(OpId, EventKind)> {
        let running = self.running.take()?;
        let ran = CommandRun {
            command: running.command.clone(),
            code: None,
            output: String::new(),
            dropped: 0,
            timed_out: false,
            error: None,
            stopped: true,
        };
        Some((running.id, EventKind::CommandRan(Box::new(ran))))
    }

    /// Completes when the command in progress ends (never without one).
    pub(super) async fn ended(&mut self) -> (OpId, CommandRun) {
        let Some(running) = self.running.as_mut() else {
            return std::future::pending().await;
        };
        let result = (&mut running.task).await;
        let id = running.id;
        let command = running.command.clone();
        self.running = None;
        let ran = result.unwrap_or_else(|e| CommandRun {
            command,
            code: None,
            output: String::new(),
            dropped: 0,
            timed_out: false,
            error: Some(format!("the command's task failed: {e}")),
            stopped: false,
        });
        (id, ran)
    }

    /// The message for the model and the form the user saw.
    pub(super) fn context(&self, ran: &CommandRun) -> (String, String) {
        (ran.context(&self.target.actor()), ran.as_typed())
    }
}

/// Serves `RunCommand` and `StopCommand` (idle or busy alike).
pub(super) async fn command_op(commands: &mut Commands, emitter: &Emitter, id: OpId, op: Op) {
    match op {
        Op::RunCommand { command } => {
            if let Some(refused) = commands.start(id, command) {
                emitter.reply(id, refused).await;
            }
        }
        Op::StopCommand => match commands.stop() {
            Some((ran_id, reply)) => emitter.reply(ran_id, reply).await,
            None => {
                emitter
                    .reply(id, EventKind::error("no command is running"))
                    .await
            }
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_and_status_are_kept_and_bounded() {
        let cwd = std::env::temp_dir();
        let ran = run(
            Arc::new(crate::host::LocalTarget),
            cwd.clone(),
            "echo hi; echo err >&2; exit 3".into(),
        )
        .await;
        assert_eq!(ran.code, Some(3));
        assert_eq!(ran.output, "hi\nerr\n");
        assert!(ran.failed());
        let ctx = ran.context("me@here");
        assert!(ctx.contains("$ echo hi; echo err >&2; exit 3"), "{ctx}");
        assert!(ctx.contains("exit status 3"), "{ctx}");
        let big = format!("head -c {} /dev/zero | tr '\\0' x", MAX_OUTPUT + 100);
        let ran = run(Arc::new(crate::host::LocalTarget), cwd, big).await;
        assert_eq!(ran.output.len(), MAX_OUTPUT);
        assert_eq!(ran.dropped, 100);
        assert!(!ran.failed());
    }
}
