//! The agent as a service: `spawn` starts it as a task of its own and returns
//! the two ends a front end holds, a sender of `Op`s and a receiver of
//! `Event`s, both bounded. The task reads ops one at a time; while a run (or
//! a compaction) is going it keeps reading them, so steering, follow-ups,
//! approvals, interrupts and status requests are served mid-run. Ops that
//! would change the conversation under a run are refused with an `Error`.
//!
//! It stops on `Op::Shutdown`, or when every op sender is gone: a run in
//! progress is interrupted, everything is journaled, `ShutdownComplete` is
//! the last event. The user's own commands (`Op::RunCommand`) run beside
//! it all (`command::Commands`); their end is one more thing the op loop
//! waits for.

use super::allowlist::SharedAllowList;
use super::cancel::{Cancel, CancelHandle};
use super::command::{command_op, Commands};
use super::control::{ApprovalRules, Control, Gate};
use super::emitter::{Emitter, EVENT_CAPACITY};
use super::hooks::{About, HookEvent, HookRunner, Hooks, Verdict};
use super::plan::Planner;
use super::protocol::{
    ErrorCode, Event, EventKind, Op, OpId, PlanEntry, QueueKind, QueueMode, RunEnd, RunOutcome,
    SessionSummary, Submission,
};
use super::{Agent, AgentOptions, HistorySink, HostedError, ModelInfo, TokenTracker};
use crate::host::{Target, TmuxTarget};
use crate::provider::ModelClient;
use crate::tools::{ToolContext, ToolRegistry};
use crate::wire::OutputSchema;
use crate::wire::{Image, Message, Role};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Branches `source` into a new session that continues separately.
    fn fork(&mut self, source: ForkSource<'_>, model: &ModelInfo) -> Result<Forked, OpenError> {
        let _ = (source, model);
        Err(OpenError {
            message: "forking sessions is not available here".into(),
            code: None,
        })
    }
    /// Names the front end whose turns this host records (`exec`, `repl`).
    fn set_origin(&mut self, origin: &'static str) {
        let _ = origin;
    }
    /// The saved sessions (`Op::ListSessions`); an error is one line.
    fn list(&self) -> Result<SessionListing, HostedError> {
        Err(Box::new(NotHere::Listing))
    }
}

/// What a `SessionHost` does not offer where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotHere {
    #[error("listing sessions is not available here")]
    Listing,
}

/// The saved sessions of a directory, most recently used first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionListing {
    pub sessions: Vec<SessionSummary>,
    /// Where they are kept.
    pub dir: String,
    /// Files that could not be read, one line each.
    pub warnings: Vec<String>,
}

impl SessionListing {
    /// The reply to `Op::ListSessions`.
    pub fn into_event(self) -> EventKind {
        EventKind::Sessions {
            sessions: self.sessions,
            dir: self.dir,
            warnings: self.warnings,
        }
    }
}

/// The reply to `Op::ListSessions` from `host`.
fn sessions_reply(host: Option<&dyn SessionHost>) -> EventKind {
    match host.map(|h| h.list()) {
        Some(Ok(listing)) => listing.into_event(),
        Some(Err(e)) => EventKind::error(e.to_string()),
        None => EventKind::error("sessions are not available here"),
    }
}

/// What `Op::Fork` branches.
pub enum ForkSource<'a> {
    /// The conversation in use, saved as session `id`.
    Current {
        id: &'a str,
        history: &'a [Message],
        tokens: &'a TokenTracker,
    },
    /// A saved session (`last`, an id or a unique prefix), read without
    /// taking it over.
    Saved { query: &'a str },
}

/// A new session branched from `from`.
pub struct Forked {
    pub id: String,
    pub from: String,
    pub sink: Box<dyn HistorySink>,
    /// The shared past, already saved in the new session.
    pub history: Vec<Message>,
    pub tokens: TokenTracker,
    pub warnings: Vec<String>,
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
    /// Sub-agents' histories by the parent's call id, for the replay.
    pub subagents: Vec<(String, Vec<Message>)>,
    /// Its plan as last written (`todo_write`), empty when none.
    pub plan: Vec<PlanEntry>,
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
    /// The schema every final answer must match (`exec --output-schema`).
    pub output: Option<Arc<OutputSchema>>,
    /// Where trace spans go (`[telemetry] otlp_endpoint`); none: not traced.
    pub telemetry: Option<crate::telemetry::Exporter>,
}

/// The sending end of an agent's ops. Each op goes with a fresh id (the
/// clones of one sender share the counter, so ids never repeat for an
/// agent); the events that answer it carry that id.
#[derive(Clone)]
pub struct OpSender {
    tx: mpsc::Sender<Submission>,
    next: Arc<AtomicU64>,
}

impl OpSender {
    /// A sender and the receiving end the agent reads, `capacity` ops deep.
    pub fn channel(capacity: usize) -> (OpSender, mpsc::Receiver<Submission>) {
        let (tx, rx) = mpsc::channel(capacity);
        let sender = OpSender {
            tx,
            next: Arc::new(AtomicU64::new(1)),
        };
        (sender, rx)
    }

    fn id(&self) -> OpId {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `op`, waiting for room; its id, or the op back when the agent
    /// has stopped.
    pub async fn send(&self, op: Op) -> Result<OpId, mpsc::error::SendError<Op>> {
        let id = self.id();
        self.tx
            .send(Submission { id, op })
            .await
            .map(|()| id)
            .map_err(|e| mpsc::error::SendError(e.0.op))
    }

    /// Sends `op` if there is room now; its id, or the op back.
    pub fn try_send(&self, op: Op) -> Result<OpId, mpsc::error::TrySendError<Op>> {
        use mpsc::error::TrySendError;
        let id = self.id();
        match self.tx.try_send(Submission { id, op }) {
            Ok(()) => Ok(id),
            Err(TrySendError::Full(s)) => Err(TrySendError::Full(s.op)),
            Err(TrySendError::Closed(s)) => Err(TrySendError::Closed(s.op)),
        }
    }
}

/// A front end's ends of the agent.
pub struct AgentHandle {
    pub ops: OpSender,
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
    let (op_tx, op_rx) = OpSender::channel(OP_CAPACITY);
    let (ev_tx, ev_rx) = mpsc::channel(EVENT_CAPACITY);
    let emitter = Emitter::new(ev_tx);
    if let Some(exporter) = setup.telemetry {
        emitter.trace(super::spans::Spans::new(
            exporter,
            setup.model.model.clone(),
        ));
    }
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
    // The user's own commands run where the tools do, but not in the shared
    // pane: on the host behind it, so their output can be captured.
    let command_target = match &setup.pane {
        Some(pane) => pane.base().clone(),
        None => setup.target.clone(),
    };
    let cwd = setup.cwd.clone();
    let mut tools = setup.tools;
    // The plan tools come with the others; an agent without tools gets none.
    let planner = (!tools.is_empty()).then(|| {
        let planner = Planner::new(control.plan_mode().clone(), emitter.clone());
        tools.add_source(planner.clone());
        planner
    });
    let mut ctx = ToolContext::local(setup.cwd, gate);
    ctx.target = setup.target;
    ctx.pane = setup.pane;
    ctx.editor = tools.editor_files();
    ctx.terminal = tools.editor_terminal();
    ctx.protected = tools.own_files();
    let mut agent = Agent::new(
        setup.client,
        tools,
        ctx,
        setup.options,
        setup.system_prompt,
        setup.model,
        emitter.clone(),
        control.clone(),
    );
    agent.set_hooks(hooks.clone());
    agent.output = setup.output;
    agent.planner = planner;
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
        commands: Commands::new(command_target, cwd),
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
    commands: Commands,
}

/// What a run does.
enum Work {
    /// A prompt and the images attached to it.
    Converse(String, Vec<Image>),
    /// A compaction now, with the user's instruction for the summary.
    Compact(Option<String>),
}

impl Core {
    async fn emit(&self, kind: EventKind) {
        self.emitter.emit(kind).await;
    }

    async fn serve(mut self, mut ops: mpsc::Receiver<Submission>) {
        // The op that asked the agent to stop, which `ShutdownComplete`
        // answers (none when every sender went away).
        let mut stopped_by = None;
        loop {
            let Submission { id, op } = tokio::select! {
                sub = ops.recv() => match sub {
                    Some(sub) => sub,
                    None => break,
                },
                (id, ran) = self.commands.ended() => {
                    // Idle: the exchange joins the conversation at once.
                    self.emitter.set_op(Some(id));
                    let (text, shown) = self.commands.context(&ran);
                    self.emit(EventKind::CommandRan(Box::new(ran))).await;
                    self.agent.add_context(text, Some(shown)).await;
                    self.emitter.set_op(None);
                    continue;
                }
            };
            let work = match op {
                Op::Prompt { images, .. } if !images.is_empty() && self.agent.model().no_images => {
                    let message = self.agent.model().images_refused();
                    self.emitter.reply(id, EventKind::error(message)).await;
                    continue;
                }
                Op::Prompt { text, images } => Work::Converse(text, images),
                Op::Steer { text } | Op::FollowUp { text } => Work::Converse(text, Vec::new()),
                Op::Compact { focus } => Work::Compact(focus),
                Op::Shutdown | Op::Close => {
                    stopped_by = Some(id);
                    break;
                }
                op @ (Op::RunCommand { .. } | Op::StopCommand) => {
                    command_op(&mut self.commands, &self.emitter, id, op).await;
                    continue;
                }
                other => {
                    self.emitter.set_op(Some(id));
                    self.idle_op(other).await;
                    self.emitter.set_op(None);
                    continue;
                }
            };
            match self.work(work, id, &mut ops).await {
                (After::Continue, _) => {}
                (_, by) => {
                    stopped_by = by;
                    break;
                }
            }
        }
        self.emitter.set_op(stopped_by);
        self.agent.persist(false).await;
        // Background jobs end with the agent (exec's end, the REPL's, a
        // served or ACP session dropped), before it says it is done.
        self.agent.jobs().stop_all().await;
        self.emit(EventKind::ShutdownComplete).await;
    }

    /// Runs `work`, asked for by op `op`, to its end while serving ops; then
    /// runs whatever was queued too late for it. Says whether the agent goes
    /// on, and which op asked it to stop.
    async fn work(
        &mut self,
        mut work: Work,
        op: OpId,
        ops: &mut mpsc::Receiver<Submission>,
    ) -> (After, Option<OpId>) {
        let mut close = false;
        let mut op = Some(op);
        let mut stopped_by = None;
        loop {
            let (outcome, after, by) = self.run_once(work, op, ops).await;
            // Commands that ended during the run join the conversation now,
            // before anything else is sent.
            for (id, text, shown) in std::mem::take(&mut self.commands.later) {
                self.emitter.set_op(Some(id));
                self.agent.add_context(text, Some(shown)).await;
            }
            self.emitter.set_op(None);
            if by.is_some() && (after == After::Shutdown || stopped_by.is_none()) {
                stopped_by = by;
            }
            close |= after == After::Close;
            let (steering, follow_ups) = self.control.queues();
            let left = !steering.is_empty() || !follow_ups.is_empty();
            if after == After::Shutdown {
                return (After::Shutdown, stopped_by);
            }
            let done = if close { After::Close } else { After::Continue };
            if !left {
                return (done, stopped_by);
            }
            if matches!(outcome, Some(RunOutcome::Answered { .. })) {
                // A message that arrived as the run ended starts the next one.
                let mut next = self.control.take_steering();
                next.extend(self.control.take_follow_ups());
                self.emit_queues().await;
                work = Work::Converse(next.join("\n\n"), Vec::new());
                // Started by the queue, not by one op.
                op = None;
                continue;
            }
            // After a failure, a limit or an interrupt the user decides again.
            let texts = self.control.clear(true, true);
            self.emit(EventKind::Unqueued { texts }).await;
            self.emit_queues().await;
            return (done, stopped_by);
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

    /// One run, started by op `op`. Returns its outcome (none for a
    /// compaction), whether a shutdown or a close was asked for meanwhile,
    /// and by which op.
    async fn run_once(
        &mut self,
        work: Work,
        op: Option<OpId>,
        ops: &mut mpsc::Receiver<Submission>,
    ) -> (Option<RunOutcome>, After, Option<OpId>) {
        let run = self.next_run;
        self.next_run += 1;
        self.emitter.set_run(run, op);
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
        let mut stopped_by = None;
        let Core {
            agent,
            control,
            emitter,
            sessions,
            commands,
            ..
        } = self;
        let sessions = sessions.as_deref();
        let jobs = agent.jobs();
        let outcome = {
            let em = emitter.clone();
            let fut = async move {
                match work {
                    Work::Converse(text, images) => {
                        Some(agent.run_with_images(text, images, cancel).await)
                    }
                    Work::Compact(focus) => {
                        if !agent.compact_now(cancel, focus.as_deref()).await {
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
                    (id, ran) = commands.ended() => {
                        let (text, shown) = commands.context(&ran);
                        commands.later.push((id, text, shown));
                        emitter.reply(id, EventKind::CommandRan(Box::new(ran))).await;
                    }
                    op = ops.recv(), if ops_open => match op {
                        None => {
                            ops_open = false;
                            after = After::Shutdown;
                            handle.cancel();
                        }
                        Some(Submission { id, op: op @ (Op::RunCommand { .. } | Op::StopCommand) }) => {
                            command_op(commands, emitter, id, op).await;
                        }
                        Some(Submission { id, op: Op::ListJobs }) => {
                            emitter.reply(id, EventKind::Jobs { jobs: jobs.list() }).await;
                        }
                        Some(Submission { id, op }) => match busy_op(op, id, control, emitter, sessions, &handle, run).await {
                            After::Continue => {}
                            After::Close if after == After::Continue => {
                                after = After::Close;
                                stopped_by = Some(id);
                            }
                            After::Close => {}
                            After::Shutdown => {
                                after = After::Shutdown;
                                stopped_by = Some(id);
                            }
                        },
                    },
                }
            }
        };
        control.drop_waiting();
        if let Some(outcome) = &outcome {
            emitter
                .emit(EventKind::RunFinished(RunEnd {
                    outcome: outcome.clone(),
                }))
                .await;
        }
        emitter.set_run(0, None);
        (outcome, after, stopped_by)
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
            Op::Elicitation { id, .. } => {
                self.emit(EventKind::error(format!(
                    "no question is waiting under the id {id}"
                )))
                .await;
            }
            Op::SetApprovalPolicy { policy } => {
                self.control.set_policy(policy);
                self.emit(EventKind::ApprovalPolicyChanged { policy }).await;
            }
            Op::SetPlanMode { on } => {
                self.control.set_plan_mode(on);
                self.emit(EventKind::PlanMode { on }).await;
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
                // Jobs outlive a turn, not the session they were started in.
                self.agent.jobs().stop_all().await;
                let had_plan = self
                    .agent
                    .planner
                    .as_ref()
                    .is_some_and(|p| !p.entries().is_empty());
                self.agent.reset();
                if had_plan {
                    self.emit(EventKind::Plan {
                        entries: Vec::new(),
                    })
                    .await;
                }
                self.session_failed = false;
                self.session_start = Some("clear");
                self.emit(EventKind::SessionCleared).await;
            }
            Op::Resume { query } => self.resume(&query).await,
            Op::Turns => {
                let reply = self.agent.turns().await;
                self.emit(reply).await;
            }
            Op::Rewind {
                turn,
                code,
                conversation,
            } => {
                let reply = self.agent.rewind(&turn, code, conversation).await;
                self.emit(reply).await;
            }
            Op::Fork { query } => self.fork(query.as_deref()).await,
            Op::AddContext { text, shown } => self.agent.add_context(text, shown).await,
            Op::Status => {
                let report = self.agent.status(None);
                self.emit(EventKind::Status(Box::new(report))).await;
            }
            Op::ListSessions => {
                let reply = sessions_reply(self.sessions.as_deref());
                self.emit(reply).await;
            }
            Op::ListJobs => {
                let jobs = self.agent.jobs().list();
                self.emit(EventKind::Jobs { jobs }).await;
            }
            Op::SetTimeout { .. } => {
                self.emit(EventKind::error("no task is running")).await;
            }
            // Handled by `serve`.
            Op::RunCommand { .. }
            | Op::StopCommand
            | Op::Prompt { .. }
            | Op::Steer { .. }
            | Op::FollowUp { .. }
            | Op::Compact { .. }
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
        let replay = super::replay::replay_with(&opened.history, &opened.subagents);
        // A front end showing the plan of the session left must clear it.
        let had_plan = self
            .agent
            .planner
            .as_ref()
            .is_some_and(|p| !p.entries().is_empty());
        self.agent.reset();
        self.agent
            .restore(opened.history, opened.tokens, opened.saved);
        let plan = opened.plan;
        if let Some(p) = &self.agent.planner {
            p.restore(plan.clone());
        }
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
        if !plan.is_empty() || had_plan {
            self.emit(EventKind::Plan { entries: plan }).await;
        }
    }
}

impl Core {
    /// `Op::Fork`: the conversation in use (saved first) or a saved one
    /// goes on in a new session; the original is left as it is.
    async fn fork(&mut self, query: Option<&str>) {
        let Some(host) = self.sessions.as_mut() else {
            self.emit(EventKind::error("sessions are not available here"))
                .await;
            return;
        };
        let model = self.agent.model().clone();
        let forked = match query {
            Some(query) => host.fork(ForkSource::Saved { query }, &model),
            None => {
                let Some(id) = self.agent.session().map(String::from) else {
                    self.emit(EventKind::error(
                        "nothing to fork yet: this conversation has not been saved (send a prompt first)",
                    ))
                    .await;
                    return;
                };
                // The fork copies the file's past: all of it must be there.
                self.agent.persist(true).await;
                let history: Vec<Message> = self
                    .agent
                    .messages()
                    .iter()
                    .filter(|m| m.role != Role::System)
                    .cloned()
                    .collect();
                let tokens = self.agent.tracker().clone();
                host.fork(
                    ForkSource::Current {
                        id: &id,
                        history: &history,
                        tokens: &tokens,
                    },
                    &model,
                )
            }
        };
        let forked = match forked {
            Ok(f) => f,
            Err(e) => {
                self.emit(EventKind::Error {
                    message: e.message,
                    code: e.code,
                })
                .await;
                return;
            }
        };
        let messages = forked.history.len();
        let replay = query.map(|_| super::replay::replay_of(&forked.history));
        let (last_prompt, last_answer) = last_exchange(&forked.history);
        let history = forked.history;
        self.agent.reset();
        self.agent.restore(history, forked.tokens, messages);
        self.agent.set_history_sink(forked.id.clone(), forked.sink);
        self.session_failed = false;
        for message in forked.warnings {
            self.emit(EventKind::Warning { message }).await;
        }
        self.emit(EventKind::SessionForked {
            id: forked.id.clone(),
            from: forked.from,
            messages,
        })
        .await;
        // A saved session's conversation replaces the one in use: shown as
        // any resume is.
        if let Some(replay) = replay {
            self.emit(EventKind::SessionResumed {
                id: forked.id,
                messages,
                warnings: Vec::new(),
                note: None,
                last_prompt,
                last_answer,
                replay,
            })
            .await;
        }
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

/// Serves op `id` that arrived during run `run`; its replies name it.
async fn busy_op(
    op: Op,
    id: OpId,
    control: &Control,
    emitter: &Emitter,
    sessions: Option<&dyn SessionHost>,
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
                .reply(id, EventKind::Unqueued { texts: vec![text] })
                .await;
            emitter
                .reply(id, EventKind::error(
                    "images are attached only to a prompt sent while no task runs; the prompt was handed back",
                ))
                .await;
        }
        Op::Prompt { text, .. } | Op::FollowUp { text } => {
            emitter.reply(id, queues(control.follow_up(text))).await;
        }
        Op::Steer { text } => emitter.reply(id, queues(control.steer(text))).await,
        Op::ClearQueue { queue } => {
            let texts = clear(control, queue);
            emitter.reply(id, EventKind::Unqueued { texts }).await;
            emitter.reply(id, queues(control.queues())).await;
        }
        Op::Interrupt => handle.cancel(),
        Op::Elicitation {
            id: question,
            answer,
            reason,
        } => {
            if let Err(e) = control.answer_question(&question, *answer, reason) {
                emitter.reply(id, EventKind::error(e)).await;
            }
        }
        Op::Approve { call_id, decision } => {
            if !control.answer(&call_id, decision) {
                emitter
                    .reply(
                        id,
                        EventKind::error(format!("no approval is waiting for call {call_id}")),
                    )
                    .await;
            }
        }
        Op::SetApprovalPolicy { policy } => {
            control.set_policy(policy);
            emitter
                .reply(id, EventKind::ApprovalPolicyChanged { policy })
                .await;
        }
        Op::SetPlanMode { on } => {
            control.set_plan_mode(on);
            emitter.reply(id, EventKind::PlanMode { on }).await;
        }
        Op::ListSessions => emitter.reply(id, sessions_reply(sessions)).await,
        Op::SetTimeout { after_ms } => {
            handle
                .stop_at(tokio::time::Instant::now() + std::time::Duration::from_millis(after_ms));
            emitter.reply(id, EventKind::TimeoutSet { after_ms }).await;
        }
        Op::Status => {
            if let Some(mut report) = control.snapshot() {
                report.running = Some(run);
                emitter.reply(id, EventKind::Status(Box::new(report))).await;
            }
        }
        Op::SwitchModel { .. }
        | Op::Compact { .. }
        | Op::NewSession
        | Op::Resume { .. }
        | Op::Turns
        | Op::Rewind { .. }
        | Op::Fork { .. }
        | Op::AddContext { .. } => {
            emitter
                .reply(
                    id,
                    EventKind::error(
                        "not while a task is running: wait for it to end, or interrupt it",
                    ),
                )
                .await;
        }
        // Served by `command_op`, and beside it (the job table is the agent's).
        Op::RunCommand { .. } | Op::StopCommand | Op::ListJobs => {}
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
