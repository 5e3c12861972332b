//! The one loop that drives the agent for a front end: it receives the
//! agent's events and hands each to a `Renderer`, answers approval requests
//! through it, waits for the front end's own input (keys, lines, timers)
//! beside the events, and turns Ctrl-C into `Op::Interrupt`. Every front end
//! (exec, exec `--json`, the line session, the REPL, serve's runs, each ACP
//! session, each `buddy mcp-server` call) is a renderer of this loop; a new
//! one is another. What a front end shows, and when it has seen enough, is
//! the renderer's business; this module knows no terminal and no format.
//! It does not own the agent: the caller spawns it, and shuts it down after.

use crate::agent::protocol::{
    ApprovalQuestion, Decision, ElicitationAction, ElicitationQuestion, Event, EventKind, Op,
};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use std::future::Future;
use std::pin::Pin;

/// Whether the loop goes on after the renderer has seen something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The front end has what it wanted (a run ended, the user quit).
    Stop,
}

/// Why `drive` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The renderer said `Flow::Stop`.
    Stopped,
    /// The agent's events ended: it stopped (after `Shutdown`, or it failed).
    AgentGone,
    /// Ctrl-C a second time while the first interrupt was under way: the
    /// user stopped waiting for the run to end (it may still be ending).
    Abandoned,
}

/// A decision on its way (asked on a terminal, say).
pub type Deciding = Pin<Box<dyn Future<Output = Decision> + Send>>;

/// How a renderer answers an approval request.
pub enum Approval {
    /// This decision, awaited before the next event is read (the question
    /// has the user's attention; events wait in the channel meanwhile).
    Ask(Deciding),
    /// The renderer answers later itself, with `Op::Approve` (from its
    /// input, say: the REPL's keys, a client's POST), or lets it time out.
    Later,
}

/// How a renderer answers a server's question (`ElicitationRequested`).
pub enum Elicitation {
    /// Declined at once: this front end cannot ask its user (exec, serve,
    /// `buddy mcp-server`), for this reason, which the model reads.
    Refuse(String),
    /// This answer (and the reason for a decline), awaited before the
    /// next event is read, as an approval's is (an editor's form).
    Ask(Answering),
    /// The renderer answers later itself, with `Op::Elicitation` (the
    /// REPL's form on its input line), or lets it time out.
    Later,
}

/// An answer to a server's question on its way.
pub type Answering = Pin<Box<dyn Future<Output = (ElicitationAction, Option<String>)> + Send>>;

/// A front end as the drive loop sees it. Only `on_event` is required.
pub trait Renderer {
    /// What the front end waits for besides the agent: a key, a line, a
    /// timer's tick. `()` for a front end with nothing of its own.
    type Input;

    /// Whether the loop takes Ctrl-C (SIGINT): the first sends
    /// `Op::Interrupt` and calls `on_ctrl_c(false)`, a second while the run
    /// is still ending calls `on_ctrl_c(true)` and returns `End::Abandoned`.
    /// A front end that reads keys in raw mode sees Ctrl-C as a key instead
    /// and leaves this off (listening would replace SIGINT's default action
    /// for the whole process).
    const CTRL_C: bool = false;

    /// One event from the agent, in order. Ops in answer go through `ops`.
    fn on_event(&mut self, ev: Event, ops: &OpSender) -> Flow;

    /// An `ApprovalRequested` event, after `on_event` has seen it. The
    /// default answers later, through the renderer's own means.
    fn on_approval(&mut self, _req: &ApprovalQuestion) -> Approval {
        Approval::Later
    }

    /// An `ElicitationRequested` event, after `on_event` has seen it. The
    /// default declines: a front end asks only when it says it can.
    fn on_elicitation(&mut self, _question: &ElicitationQuestion) -> Elicitation {
        Elicitation::Refuse("this front end cannot ask the user a server's questions".into())
    }

    /// The next input of the front end's own. The future is dropped when an
    /// event comes first, so it must lose nothing when dropped (a channel's
    /// `recv`, a timer's `tick`). The default never yields.
    fn input(&mut self) -> impl Future<Output = Self::Input> {
        std::future::pending()
    }

    /// Handles an input from `input`; may send ops.
    fn on_input(&mut self, _input: Self::Input, _ops: &OpSender) -> impl Future<Output = Flow> {
        std::future::ready(Flow::Continue)
    }

    /// Ctrl-C came (with `CTRL_C`): `again` when it is the second.
    fn on_ctrl_c(&mut self, _again: bool) {}
}

/// Drives `agent` through `renderer` until the renderer stops, the agent
/// goes away or the user gives up waiting. Ops the caller wants sent first
/// (the prompt) are sent before this is called.
pub async fn drive<R: Renderer>(agent: &mut AgentHandle, renderer: &mut R) -> End {
    let mut interrupted = false;
    loop {
        let ev = tokio::select! {
            ev = agent.events.recv() => ev,
            input = renderer.input() => {
                if renderer.on_input(input, &agent.ops).await == Flow::Stop {
                    return End::Stopped;
                }
                continue;
            }
            _ = ctrl_c(), if R::CTRL_C => {
                renderer.on_ctrl_c(interrupted);
                if interrupted {
                    return End::Abandoned;
                }
                interrupted = true;
                let _ = agent.ops.send(Op::Interrupt).await;
                continue;
            }
        };
        let Some(ev) = ev else {
            return End::AgentGone;
        };
        // The question is put after the renderer has shown the event, so
        // what it asks about is on the screen (or in the stream) first.
        let elicited = match &ev.kind {
            EventKind::ElicitationRequested(question) => Some(question.clone()),
            _ => None,
        };
        let asked = match &ev.kind {
            EventKind::ApprovalRequested(question) => Some(question.clone()),
            EventKind::RunFinished { .. } => {
                // A later Ctrl-C is about the next run, not this one.
                interrupted = false;
                None
            }
            _ => None,
        };
        let flow = renderer.on_event(ev, &agent.ops);
        if let Some(question) = asked {
            if let Approval::Ask(deciding) = renderer.on_approval(&question) {
                let decision = deciding.await;
                let call_id = question.call_id;
                let _ = agent.ops.send(Op::Approve { call_id, decision }).await;
            }
        }
        if let Some(question) = elicited {
            let answered = match renderer.on_elicitation(&question) {
                Elicitation::Refuse(reason) => Some((ElicitationAction::Decline, Some(reason))),
                Elicitation::Ask(answering) => Some(answering.await),
                Elicitation::Later => None,
            };
            if let Some((answer, reason)) = answered {
                let op = Op::Elicitation {
                    id: question.id,
                    answer: Box::new(answer),
                    reason,
                };
                let _ = agent.ops.send(op).await;
            }
        }
        if flow == Flow::Stop {
            return End::Stopped;
        }
    }
}

/// SIGINT; a runtime that cannot listen for it never reports one.
async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Reads events until the run op `op` started has finished (after the
/// user abandoned it), so the next prompt does not see its tail.
pub async fn until_run_end(agent: &mut AgentHandle, op: Option<crate::agent::protocol::OpId>) {
    while let Some(ev) = agent.events.recv().await {
        if ev.ends_run_of(op) {
            return;
        }
    }
}
