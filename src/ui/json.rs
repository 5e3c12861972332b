//! `buddy exec --json`: the agent's events as JSON lines on stdout, one per
//! event, flushed as they happen, after a first `hello` line that names the
//! schema version. Human diagnostics (warnings, errors, retries, a denied
//! approval) still go to stderr; the answer is the `run_finished` line.
//! The schema is the serialised `agent::protocol::Event`, documented in
//! docs/EVENTS.md.

use super::exec::ExecOutcome;
use super::style::{preview, Style};
use crate::agent::protocol::{
    ApprovalQuestion, DecidedBy, Event, EventKind, OpId, RunEnd, RunOutcome,
};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::drive::{drive, Approval, End, Flow, Renderer};
use std::io::Write;

/// The version of the JSON-lines schema; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

pub struct JsonFrontEnd {
    style: Style,
    /// stdout went away (`| head`); keep running, stop writing.
    closed: bool,
    /// How the run ended, once it has.
    outcome: Option<ExecOutcome>,
    /// The prompt whose run this shows (its end ends the front end).
    prompt: Option<OpId>,
    /// `exec --plan`: the model's finished plan (`plan_ready`) ends the run.
    plan_ends: bool,
}

impl JsonFrontEnd {
    pub fn new(style: Style) -> JsonFrontEnd {
        JsonFrontEnd {
            style,
            closed: false,
            outcome: None,
            prompt: None,
            plan_ends: false,
        }
    }

    /// Shows the run prompt `op` started (any run's end ends it when the
    /// prompt's id is not known).
    pub fn awaiting(mut self, op: Option<OpId>) -> JsonFrontEnd {
        self.prompt = op;
        self
    }

    /// With `on`, stops at the model's finished plan, which is the answer.
    pub fn ending_at_plan(mut self, on: bool) -> JsonFrontEnd {
        self.plan_ends = on;
        self
    }

    /// The first line: what follows and in which version.
    pub fn hello(&mut self) {
        let line = serde_json::json!({
            "type": "hello",
            "v": SCHEMA_VERSION,
            "buddy": env!("CARGO_PKG_VERSION"),
        });
        self.write_line(&line.to_string());
    }

    /// Writes one event as a line.
    pub fn event(&mut self, ev: &Event) {
        match serde_json::to_string(ev) {
            Ok(line) => self.write_line(&line),
            Err(e) => eprintln!(
                "{} cannot encode an event: {e}",
                self.style.warning("warning:")
            ),
        }
    }

    fn write_line(&mut self, line: &str) {
        if self.closed {
            return;
        }
        let mut out = std::io::stdout().lock();
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush())
            .is_err()
        {
            self.closed = true;
        }
    }

    /// Writes events until the run finishes, through the drive loop.
    /// Ctrl-C interrupts the run (a second one gives up waiting).
    pub async fn run(mut self, agent: &mut AgentHandle) -> ExecOutcome {
        match drive(agent, &mut self).await {
            End::Stopped => self.outcome.take().unwrap_or(ExecOutcome::Interrupted),
            End::Abandoned => ExecOutcome::Interrupted,
            End::AgentGone => ExecOutcome::Failed("the agent stopped unexpectedly".into()),
        }
    }

    /// The human side on stderr: what went wrong or needs the user's attention.
    fn diagnose(&self, kind: &EventKind) {
        let st = self.style;
        match kind {
            EventKind::Warning { message } => eprintln!("{} {message}", st.warning("warning:")),
            EventKind::HookBlocked {
                hook_event,
                tool,
                reason,
                ..
            } => eprintln!(
                "{} {}",
                st.warning("hook:"),
                crate::ui::hook_line(hook_event, tool.as_deref(), reason)
            ),
            EventKind::Retrying {
                attempt,
                max_retries,
                delay_ms,
                error,
            } => eprintln!(
                "{}",
                crate::ui::retry_line(st, *attempt, *max_retries, *delay_ms, error)
            ),
            EventKind::Error { message, .. } => eprintln!("{} {message}", st.error("error:")),
            EventKind::ApprovalDecided {
                tool,
                command,
                by: DecidedBy::NoApprover,
                ..
            } => eprintln!(
                "{} {tool} needs approval but there is no terminal to ask; denied `{}`. Rerun with --dangerously-auto-approve to allow commands, or set tools.shell_confirm = false.",
                st.warning("warning:"),
                preview(command, 60)
            ),
            EventKind::ElicitationRequested(question) => {
                eprintln!("{}", super::exec::question_refused_line(st, question))
            }
            _ => {}
        }
    }
}

impl Renderer for JsonFrontEnd {
    type Input = ();
    const CTRL_C: bool = true;

    fn on_event(&mut self, ev: Event, _ops: &OpSender) -> Flow {
        self.event(&ev);
        self.diagnose(&ev.kind);
        match ev.kind {
            EventKind::RunFinished(RunEnd { outcome }) if ev.ends_run_of(self.prompt) => {
                self.outcome = Some(outcome_of(outcome));
                Flow::Stop
            }
            EventKind::PlanReady { plan, .. } if self.plan_ends => {
                self.outcome = Some(ExecOutcome::Answered(plan));
                Flow::Stop
            }
            _ => Flow::Continue,
        }
    }

    fn on_approval(&mut self, req: &ApprovalQuestion) -> Approval {
        Approval::Ask(Box::pin(super::exec::ask(self.style, req.clone())))
    }

    fn on_elicitation(
        &mut self,
        _question: &crate::agent::protocol::ElicitationQuestion,
    ) -> crate::drive::Elicitation {
        crate::drive::Elicitation::Refuse(super::exec::QUESTION_REFUSED.into())
    }

    fn on_ctrl_c(&mut self, again: bool) {
        if !again {
            eprintln!(
                "{}",
                self.style
                    .warning("interrupted: cancelling (Ctrl-C again to quit now)")
            );
        }
    }
}

fn outcome_of(outcome: RunOutcome) -> ExecOutcome {
    match outcome {
        RunOutcome::Answered { text, .. } => ExecOutcome::Answered(text),
        RunOutcome::Interrupted => ExecOutcome::Interrupted,
        RunOutcome::Failed { message } => ExecOutcome::Failed(message),
        RunOutcome::LimitReached { message } => ExecOutcome::LimitReached(message),
    }
}
