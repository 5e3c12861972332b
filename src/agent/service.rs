//! The agent as a service: `spawn` starts it as a task of its own and returns
//! the two ends a front end holds, a sender of `Op`s and a receiver of
//! `Event`s, both bounded. The task reads ops one at a time; while a run (or
//! a compaction) is going it keeps reading them, so steering, follow-ups,
//! approvals, interrupts and status requests are served mid-run. Ops that
//! would change the conversation under a run are refused with an `Error`.
//!
//! It stops on `Op::Shutdown`, or when every op sender is gone: a run in
//! progress is interrupted, everything is journaled, `ShutdownComplete` is
//! the last event.

use super::allowlist::SharedAllowList;
use super::cancel::{Cancel, CancelHandle};
use super::control::{ApprovalRules, Control, Gate};
use super::emitter::{Emitter, EVENT_CAPACITY};
use super::hooks::{About, HookEvent, HookRunner, Hooks, Verdict};
use super::protocol::{ErrorCode, Event, EventKind, Op, QueueKind, QueueMode, RunOutcome};
use super::{Agent, AgentOptions, HistorySink, HostedError, ModelInfo, TokenTracker};
use crate::host::{Target, TmuxTarget};
use crate::provider::ModelClient;
use crate::tools::{ToolContext, ToolRegistry};
use crate::wire::{Image, Message, Role};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Ops a front end may send ahead of the agent.
pub const OP_CAPACITY: usize = 64;

/// Where conversations are saved: the agent asks for a new session at the
/// first prompt and for a saved one on `Op::Resume`.
pub trait SessionHost: Send + Sync {
    fn create(&mut self, model: &ModelInfo) -> Result<NewSession, HostedError>;
    fn open(&mut self, query: &str, model: &ModelInfo) -> Result<OpenedSession, OpenError>;
}

/// Why a saved session could not be opened: a sentence for people, and the
/// kind of failure for programs (a server answers with a status code by it).
#[derive(Debug)]
pub struct OpenError {
    pub message: String,
    pub code: Option<ErrorCode>,
}

pub struct NewSession {
    pub id: String,
    pub sink: Box<dyn HistorySink>,
    pub warnings: Vec<String>,
}

pub struct OpenedSession {
    pub id: String,
    pub sink: Box<dyn HistorySink>,
    /// The conversation, repaired so a provider accepts it.
    pub history: Vec<Message>,
    /// How many of `history`'s messages are already saved.
    pub saved: usize,
    pub tokens: TokenTracker,
    pub warnings: Vec<String>,
    /// The model and profile of its last turn.
    pub last_model: Option<(String, String)>,
}

/// Switches the model on `Op::SwitchModel`.
pub trait ModelSwitcher: Send + Sync {
    fn switch(&mut self, choice: &str, history: &[Message]) -> Result<Switched, HostedError>;
}

pub struct Switched {
    pub client: Arc<dyn ModelClient>,
    pub context_limit: u64,
    pub model: ModelInfo,
    /// Something the user should know about the switch.
    pub note: Option<String>,
}

/// Everything the agent is made of.
pub struct AgentSetup {
    pub client: Arc<dyn ModelClient>,
    pub tools: ToolRegistry,
    pub cwd: PathBuf,
    pub target: Arc<dyn Target>,
    /// The shared tmux pane, when shell work goes through one.
    pub pane: Option<Arc<TmuxTarget>>,
    pub options: AgentOptions,
    pub system_prompt: Option<String>,
    pub model: ModelInfo,
    pub approval: ApprovalRules,
    /// Where "always" answers are kept: a fresh list for an agent of its
    /// own, a served session's list so it outlives this agent.
    pub allowed: SharedAllowList,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub sessions: Option<Box<dyn SessionHost>>,
    pub models: Option<Box<dyn ModelSwitcher>>,
    /// The user's hook commands (none: `Hooks::default()`).
    pub hooks: Hooks,
}

/// A front end's ends of the agent.
pub struct AgentHandle {
    pub ops: mpsc::Sender<Op>,
    pub events: mpsc::Receiver<Event>,
    pub task: JoinHandle<()>,
}

impl AgentHandle {
    /// Asks the agent to stop and waits until it has: the run in progress is
    /// interrupted and the session saved. Events still queued are dropped.
    pub async fn shutdown(mut self) {
        let _ = self.ops.send(Op::Shutdown).await;
        drop(self.ops);
        // Keep draining so the agent never waits for room to say goodbye.
        while self.events.recv().await.is_some() {}
        let _ = self.task.await;
    }
}

pub fn spawn(setup: AgentSetup) -> AgentHandle {
    let (op_tx, op_rx) = mpsc::channel(OP_CAPACITY);
    let (ev_tx, ev_rx) = mpsc::channel(EVENT_CAPACITY);
    let emitter = Emitter::new(ev_tx);
    let control = Control::new(
        emitter.clone(),
        setup.approval,
        setup.allowed,
        setup.steering_mode,
        setup.follow_up_mode,
    );
    let hooks = Arc::new(HookRunner::new(
        setup.hooks,
        setup.cwd.clone(),
        emitter.clone(),
    ));
    let gate = Arc::new(Gate {
        control: control.clone(),
        hooks: Some(hooks.clone()),
    });
    let mut ctx = ToolContext::local(setup.cwd, gate);
    ctx.target = setup.target;
    ctx.pane = setup.pane;
    let mut agent = Agent::new(
        setup.client,
        setup.tools,
        ctx,
        setup.options,
        setup.system_prompt,
        setup.model,
        emitter.clone(),
        control.clone(),
    );
    agent.set_hooks(hooks.clone());
    let core = Core {
        hooks,
        session_start: Some("startup"),
        agent,
        control,
        emitter,
        sessions: setup.sessions,
        models: setup.models,
        session_failed: false,
        next_run: 1,
    };
    let task = tokio::spawn(core.serve(op_rx));
    AgentHandle {
        ops: op_tx,
        events: ev_rx,
        task,
    }
}

struct Core {
    agent: Agent,
    hooks: Arc<HookRunner>,
    /// Why the next run starts a session for the `SessionStart` hooks
    /// (`startup`, `resume`, `clear`); none once they ran.
    session_start: Option<&'static str>,
    control: Arc<Control>,
    emitter: Emitter,
    sessions: Option<Box<dyn SessionHost>>,
    models: Option<Box<dyn ModelSwitcher>>,
    /// Creating a session failed once; not retried for every prompt.
    session_failed: bool,
    next_run: u64,
}

/// What a run does.
enum Work {
    /// A prompt and the images attached to it.
    Converse(String, Vec<Image>),
    Compact,
}

impl Core {
    async fn emit(&self, kind: EventKind) {
        self.emitter.emit(kind).await;
    }

    async fn serve(mut self, mut ops: mpsc::Receiver<Op>) {
        while let Some(op) = ops.recv().await {
            let work = match op {
                Op::Prompt { images, .. } if !images.is_empty() && self.agent.model().no_images => {
                    let message = self.agent.model().images_refused();
                    self.emit(EventKind::error(message)).await;
                    continue;
                }
                Op::Prompt { text, images } => Work::Converse(text, images),
                Op::Steer { text } | Op::FollowUp { text } => Work::Converse(text, Vec::new()),
                Op::Compact => Work::Compact,
                Op::Shutdown | Op::Close => break,
                other => {
                    self.idle_op(other).await;
                    continue;
                }
            };
            if self.work(work, &mut ops).await != After::Continue {
                break;
            }
        }
        self.agent.persist(false).await;
        self.emit(EventKind::ShutdownComplete).await;
    }

    /// Runs `work` to its end while serving ops; then runs whatever was
    /// queued too late for it. Says whether the agent goes on.
    async fn work(&mut self, mut work: Work, ops: &mut mpsc::Receiver<Op>) -> After {
        let mut close = false;
        loop {
            let (outcome, after) = self.run_once(work, ops).await;
            close |= after == After::Close;
            let (steering, follow_ups) = self.control.queues();
            let left = !steering.is_empty() || !follow_ups.is_empty();
            if after == After::Shutdown {
                return After::Shutdown;
            }
            let done = if close { After::Close } else { After::Continue };
            if !left {
                return done;
            }
            if matches!(outcome, Some(RunOutcome::Answered { .. })) {
                // A message that arrived as the run ended starts the next one.
                let mut next = self.control.take_steering();
                next.extend(self.control.take_follow_ups());
                self.emit_queues().await;
                work = Work::Converse(next.join("\n\n"), Vec::new());
                continue;
            }
            // After a failure, a limit or an interrupt the user decides again.
            let texts = self.control.clear(true, true);
            self.emit(EventKind::Unqueued { texts }).await;
            self.emit_queues().await;
            return done;
        }
    }

    async fn emit_queues(&self) {
        let (steering, follow_ups) = self.control.queues();
        self.emit(EventKind::Queues {
            steering,
            follow_ups,
        })
        .await;
    }

    /// One run. Returns its outcome (none for a compaction) and whether a
    /// shutdown or a close was asked for meanwhile.
    async fn run_once(
        &mut self,
        work: Work,
        ops: &mut mpsc::Receiver<Op>,
    ) -> (Option<RunOutcome>, After) {
        let run = self.next_run;
        self.next_run += 1;
        self.emitter.set_run(run);
        if let Work::Converse(text, _) = &work {
            self.ensure_session().await;
            self.emit(EventKind::RunStarted {
                prompt: text.clone(),
            })
            .await;
            self.session_started().await;
        }
        self.control.publish(self.agent.status(Some(run)));
        let (handle, cancel) = Cancel::new();
        let mut after = After::Continue;
        let Core {
            agent,
            control,
            emitter,
            ..
        } = self;
        let outcome = {
            let em = emitter.clone();
            let fut = async move {
                match work {
                    Work::Converse(text, images) => {
                        Some(agent.run_with_images(text, images, cancel).await)
                    }
                    Work::Compact => {
                        if !agent.compact_now(cancel).await {
                            em
                                .emit(EventKind::error("nothing to compact: the conversation is too short, or the summary failed"))
                                .await;
                        }
                        None
                    }
                }
            };
            tokio::pin!(fut);
            let mut ops_open = true;
            loop {
                tokio::select! {
                    outcome = &mut fut => break outcome,
                    op = ops.recv(), if ops_open => match op {
                        None => {
                            ops_open = false;
                            after = After::Shutdown;
                            handle.cancel();
                        }
                        Some(op) => match busy_op(op, control, emitter, &handle, run).await {
                            After::Continue => {}
                            After::Close if after == After::Continue => after = After::Close,
                            After::Close => {}
                            After::Shutdown => after = After::Shutdown,
                        },
                    },
                }
            }
        };
        control.drop_waiting();
        if let Some(outcome) = &outcome {
            emitter
                .emit(EventKind::RunFinished {
                    outcome: outcome.clone(),
                })
                .await;
        }
        emitter.set_run(0);
        (outcome, after)
    }

    /// Starts saving at the first prompt, unless a session is attached or
    /// saving already failed. A session that cannot be created costs the user
    /// the record, not the answer.
    async fn ensure_session(&mut self) {
        if self.agent.has_sink() || self.session_failed {
            return;
        }
        let Some(host) = self.sessions.as_mut() else {
            return;
        };
        match host.create(self.agent.model()) {
            Ok(s) => {
                let id = s.id.clone();
                self.agent.set_history_sink(s.id, s.sink);
                for message in s.warnings {
                    self.emit(EventKind::Warning { message }).await;
                }
                self.emit(EventKind::SessionStarted { id }).await;
            }
            Err(e) => {
                self.session_failed = true;
                self.emit(EventKind::Warning {
                    message: format!("this conversation will not be saved: {e}"),
                })
                .await;
            }
        }
    }

    /// Runs the `SessionStart` hooks once per session, at its first run
    /// (sessions start lazily, so this is when there is one to name); the
    /// context they give goes with the next prompt.
    async fn session_started(&mut self) {
        self.hooks
            .set_session(self.agent.session().unwrap_or_default());
        let Some(source) = self.session_start.take() else {
            return;
        };
        if !self.hooks.has(HookEvent::SessionStart) {
            return;
        }
        let mut fields = serde_json::Map::new();
        fields.insert("source".into(), source.into());
        if let Verdict::Go {
            context: Some(text),
        } = self
            .hooks
            .fire(HookEvent::SessionStart, About::default(), fields)
            .await
        {
            self.agent.add_hook_context(text);
        }
    }

    async fn idle_op(&mut self, op: Op) {
        match op {
            Op::ClearQueue { queue } => {
                let texts = clear(&self.control, queue);
                self.emit(EventKind::Unqueued { texts }).await;
                self.emit_queues().await;
            }
            Op::Interrupt => {}
            Op::Approve { call_id, .. } => {
                self.emit(EventKind::error(format!(
                    "no approval is waiting for call {call_id}"
                )))
                .await;
            }
            Op::SetApprovalPolicy { policy } => {
                self.control.set_policy(policy);
                self.emit(EventKind::ApprovalPolicyChanged { policy }).await;
            }
            Op::SwitchModel { choice } => {
                let result = match self.models.as_mut() {
                    Some(m) => m
                        .switch(&choice, self.agent.messages())
                        .map_err(|e| e.to_string()),
                    None => Err("switching models is not available here".to_string()),
                };
                match result {
                    Ok(s) => {
                        let model = s.model.clone();
                        self.agent.set_client(s.client, s.context_limit, s.model);
                        self.emit(EventKind::ModelSwitched {
                            model: model.model,
                            profile: model.profile,
                            base_url: model.base_url,
                            note: s.note,
                        })
                        .await;
                    }
                    Err(message) => self.emit(EventKind::error(message)).await,
                }
            }
            Op::NewSession => {
                self.agent.reset();
                self.session_failed = false;
                self.session_start = Some("clear");
                self.emit(EventKind::SessionCleared).await;
            }
            Op::Resume { query } => self.resume(&query).await,
            Op::AddContext { text, shown } => self.agent.add_context(text, shown).await,
            Op::Status => {
                let report = self.agent.status(None);
                self.emit(EventKind::Status(Box::new(report))).await;
            }
            // Handled by `serve`.
            Op::Prompt { .. }
            | Op::Steer { .. }
            | Op::FollowUp { .. }
            | Op::Compact
            | Op::Shutdown
            | Op::Close => {}
        }
    }

    async fn resume(&mut self, query: &str) {
        let Some(host) = self.sessions.as_mut() else {
            self.emit(EventKind::error("sessions are not available here"))
                .await;
            return;
        };
        let opened = match host.open(query, self.agent.model()) {
            Ok(o) => o,
            Err(e) => {
                self.emit(EventKind::Error {
                    message: e.message,
                    code: e.code,
                })
                .await;
                return;
            }
        };
        let current = self.agent.model().clone();
        let note = opened
            .last_model
            .as_ref()
            .filter(|(model, _)| *model != current.model)
            .map(|(model, profile)| {
                format!(
                    "note: this session last used {model} ({profile}); continuing with {} ({})",
                    current.model, current.profile
                )
            });
        let (last_prompt, last_answer) = last_exchange(&opened.history);
        let messages = opened.history.len();
        let replay = super::replay::replay_of(&opened.history);
        self.agent.reset();
        self.agent
            .restore(opened.history, opened.tokens, opened.saved);
        self.agent.set_history_sink(opened.id.clone(), opened.sink);
        self.session_failed = false;
        self.session_start = Some("resume");
        self.emit(EventKind::SessionResumed {
            id: opened.id,
            messages,
            warnings: opened.warnings,
            note,
            last_prompt,
            last_answer,
            replay,
        })
        .await;
    }
}

fn clear(control: &Control, queue: QueueKind) -> Vec<String> {
    match queue {
        QueueKind::Steering => control.clear(true, false),
        QueueKind::FollowUp => control.clear(false, true),
        QueueKind::All => control.clear(true, true),
    }
}

/// What the op loop does once the work in hand is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Continue,
    /// `Op::Close`: stop when idle.
    Close,
    /// `Op::Shutdown` or no op senders left: stop now.
    Shutdown,
}

/// Serves an op that arrived during run `run`.
async fn busy_op(
    op: Op,
    control: &Control,
    emitter: &Emitter,
    handle: &CancelHandle,
    run: u64,
) -> After {
    let queues = |(steering, follow_ups): (Vec<String>, Vec<String>)| EventKind::Queues {
        steering,
        follow_ups,
    };
    match op {
        Op::Prompt { text, images } if !images.is_empty() => {
            // The queues hold text; the prompt goes back whole rather than
            // losing its images.
            emitter
                .emit(EventKind::Unqueued { texts: vec![text] })
                .await;
            emitter
                .emit(EventKind::error(
                    "images are attached only to a prompt sent while no task runs; the prompt was handed back",
                ))
                .await;
        }
        Op::Prompt { text, .. } | Op::FollowUp { text } => {
            emitter.emit(queues(control.follow_up(text))).await;
        }
        Op::Steer { text } => emitter.emit(queues(control.steer(text))).await,
        Op::ClearQueue { queue } => {
            let texts = clear(control, queue);
            emitter.emit(EventKind::Unqueued { texts }).await;
            emitter.emit(queues(control.queues())).await;
        }
        Op::Interrupt => handle.cancel(),
        Op::Approve { call_id, decision } => {
            if !control.answer(&call_id, decision) {
                emitter
                    .emit(EventKind::error(format!(
                        "no approval is waiting for call {call_id}"
                    )))
                    .await;
            }
        }
        Op::SetApprovalPolicy { policy } => {
            control.set_policy(policy);
            emitter
                .emit(EventKind::ApprovalPolicyChanged { policy })
                .await;
        }
        Op::Status => {
            if let Some(mut report) = control.snapshot() {
                report.running = Some(run);
                emitter.emit(EventKind::Status(Box::new(report))).await;
            }
        }
        Op::SwitchModel { .. }
        | Op::Compact
        | Op::NewSession
        | Op::Resume { .. }
        | Op::AddContext { .. } => {
            emitter
                .emit(EventKind::error(
                    "not while a task is running: wait for it to end, or interrupt it",
                ))
                .await;
        }
        Op::Shutdown => {
            handle.cancel();
            return After::Shutdown;
        }
        Op::Close => return After::Close,
    }
    After::Continue
}

/// The last prompt and the answer to it, so a resumed conversation can show
/// where it left off.
fn last_exchange(history: &[Message]) -> (Option<String>, Option<String>) {
    // As the user typed it: context they never saw does not count.
    let Some((u, typed)) = history
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::User)
        .find_map(|(i, m)| super::replay::as_typed(m).map(|t| (i, t)))
    else {
        return (None, None);
    };
    let answer = history[u..]
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.text().trim().is_empty())
        .map(|m| m.text().trim_end().to_string());
    (Some(typed.trim_end().to_string()), answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_exchange_is_shown_as_the_user_typed_it() {
        let history = [
            Message::user("files…").with_shown(""),
            Message::user("explain @main.py"),
            Message::assistant("it prints"),
            Message::user("I ran this command myself…").with_shown("!ls\n(exit status 0)"),
        ];
        assert_eq!(
            last_exchange(&history),
            (Some("!ls\n(exit status 0)".to_string()), None)
        );
        assert_eq!(
            last_exchange(&history[..3]),
            (
                Some("explain @main.py".to_string()),
                Some("it prints".to_string())
            )
        );
        // Only context the user never saw: nothing to show.
        assert_eq!(last_exchange(&history[..1]), (None, None));
    }
}
