//! The plain line session: bare `buddy` when input or output is redirected
//! or the terminal is dumb (`TERM=dumb`). One prompt per line of stdin, each
//! run shown as `exec` shows it (the `ExecFrontEnd` renderer on the drive
//! loop), `/quit` or end of input to leave. The agent is set up, and shut
//! down after, by the caller.

use super::exec::{ExecFrontEnd, ExecOptions, ExecOutcome};
use crate::agent::protocol::Op;
use crate::agent::AgentHandle;
use crate::drive::{drive, End};
use tokio::io::AsyncBufReadExt;

pub struct LineOptions {
    pub exec: ExecOptions,
    /// The model id and server, for the greeting on a terminal.
    pub model: String,
    pub base_url: String,
}

/// How the session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineEnd {
    /// Input ended (or `/quit`) after an answered prompt, or none.
    Ok,
    /// Input ended after a prompt whose run failed (exit 1).
    LastFailed,
    /// Input could not be read.
    Unreadable(String),
}

/// Reads prompts from stdin until it ends, running each to its end.
pub async fn run(agent: &mut AgentHandle, opts: LineOptions) -> LineEnd {
    let style = opts.exec.style;
    let interactive = opts.exec.terminal.stdin;
    if interactive {
        eprintln!(
            "{} {} via {} — one prompt per line, Ctrl-D to quit",
            style.actor("buddy"),
            opts.model,
            opts.base_url
        );
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut last = LineEnd::Ok;
    loop {
        if interactive {
            eprint!("{}", style.actor("> "));
        }
        let line = match lines.next_line().await {
            Ok(Some(l)) => l,
            Ok(None) => return last,
            Err(e) => return LineEnd::Unreadable(format!("cannot read input: {e}")),
        };
        if line.trim().is_empty() {
            continue;
        }
        if matches!(line.trim(), "/quit" | "/exit" | "/q") {
            return last;
        }
        let asked = agent
            .ops
            .send(Op::Prompt {
                text: line,
                images: Vec::new(),
            })
            .await
            .ok();
        let mut shown = ExecFrontEnd::new(opts.exec).awaiting(asked);
        let end = drive(agent, &mut shown).await;
        if end == End::Abandoned {
            // The user stopped waiting; the run still ends before the next
            // prompt goes.
            crate::drive::until_run_end(agent, asked).await;
        }
        last = LineEnd::Ok;
        match shown.outcome(end) {
            ExecOutcome::Answered(_) | ExecOutcome::Interrupted => {}
            ExecOutcome::Failed(m) | ExecOutcome::LimitReached(m) => {
                eprintln!("{} {}", style.error("error:"), crate::text::visible(&m));
                last = LineEnd::LastFailed;
            }
        }
    }
}
