//! The agent: owns the conversation history and drives it: ask the model, run
//! the tools it asks for, feed the results back, until it answers. It runs as
//! a task of its own (`service::spawn`); front ends send it `Op`s and read its
//! `Event`s (`protocol`), so none of them holds the agent or its history.
//!
//! This file is the loop. It talks to the model through `ModelClient`, hands
//! each reply's tool calls to the tool round (`tool_round`), takes steering
//! and follow-up messages from `control`, enforces the run's limits, asks
//! `compact` to shrink the context when it fills, journals every change
//! through a `HistorySink`, and keeps the history valid (every tool call
//! answered) however a run ends.

pub mod allowlist;
pub mod cancel;
pub mod command;
pub mod compact;
pub mod control;
pub mod emitter;
pub mod hooks;
mod overflow;
mod partial;
pub mod plan;
pub mod prompt;
pub mod protocol;
pub mod replay;
pub mod rewind;
pub mod service;
pub mod spans;
pub mod subagent;
pub mod tokens;
mod tool_round;

pub use cancel::Cancel;
pub use protocol::{Event, EventKind, Op, RunOutcome};
pub use service::{spawn, AgentHandle, AgentSetup};
pub use tokens::TokenTracker;

use crate::provider::{ModelClient, ModelRequest, StreamEvent};
use crate::tools::{ToolContext, ToolRegistry};
use crate::wire::{Image, Message, OutputSchema, Role, Usage};
use control::Control;
use emitter::Emitter;
use hooks::{About, HookEvent, HookRunner, Verdict};
use protocol::{StatusReport, UsageReport, UserVia};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tool_round::ToolsEnd;

/// Text of every tool result that never ran because the user cancelled.
pub const CANCELLED: &str = "operation cancelled by user";
/// Text of the tool results a run's time limit cut off.
pub const TIME_LIMIT_RESULT: &str = "stopped: the run reached its time limit";
/// Appended to an answer whose streaming was cut off (a stop, a failure, or
/// a kill found on load), so the model and the user know it is incomplete.
pub const INTERRUPTED_NOTE: &str = "[interrupted: the answer was cut off here]";
/// The history's text for a refusal that came with no words.
pub const REFUSED_WITHOUT_TEXT: &str = "[the model refused to answer]";

/// The history entry for an answer streamed only as far as `text`.
pub fn interrupted_answer(text: &str) -> Message {
    let sep = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    Message::assistant(format!("{text}{sep}{INTERRUPTED_NOTE}"))
}

/// How the tool calls of one reply are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStrategy {
    /// All at once (the default).
    Parallel,
    /// One after another.
    Sequential,
    /// N at a time.
    Batched(usize),
}

/// What may end a run early. `max_turns` counts model requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_turns: u32,
    pub max_total_tokens: Option<u64>,
    pub max_duration: Option<Duration>,
    /// US dollars per run, checked after each model reply (`exec --max-cost`).
    pub max_cost_usd: Option<f64>,
}

/// When and how the history is compacted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionOptions {
    /// Compact on its own when the context passes `threshold`.
    pub auto: bool,
    /// Fraction of the context window.
    pub threshold: f64,
    /// User turns kept verbatim when older ones are summarised.
    pub keep_turns: usize,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            auto: true,
            threshold: tokens::WARN_FRACTION,
            keep_turns: 2,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct AgentOptions {
    pub limits: Limits,
    pub strategy: ToolStrategy,
    pub context_limit: u64,
    pub compaction: CompactionOptions,
    /// The `agent` tool's children.
    pub subagents: subagent::SubagentOptions,
}

/// The model in use, as the user knows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelInfo {
    pub model: String,
    pub profile: String,
    pub base_url: String,
    /// The profile says the model takes no images (`images = false`).
    pub no_images: bool,
    /// What its tokens cost.
    pub pricing: tokens::Pricing,
}

impl ModelInfo {
    /// The one line for images attached to a prompt for a model that takes
    /// none; nothing is sent.
    pub fn images_refused(&self) -> String {
        format!(
            "model {} (profile {}) takes no images (images = false in [models.{}]); nothing was sent",
            self.model, self.profile, self.profile
        )
    }
}

/// The error of whatever implements one of the agent's outward traits (a
/// session store, a model switcher): its own typed error, boxed, so the agent
/// needs to know none of those types and still keeps their `source()` chain.
pub type HostedError = Box<dyn std::error::Error + Send + Sync>;

/// Where the agent hands its history for safe keeping (a session journal). It
/// is called whenever messages were added: after the prompt, after each model
/// reply, after each batch of tool results, and once more when the run ends
/// (`turn_end`), which is when the sink should make everything durable.
pub trait HistorySink: Send + Sync {
    /// `new` holds the messages added since the last successful call, oldest first.
    fn save(
        &mut self,
        new: &[Message],
        tokens: &TokenTracker,
        turn_end: bool,
    ) -> Result<(), HostedError>;

    /// The model the next turns run on (after a switch), for the record.
    fn set_model(&mut self, _model: &str, _profile: &str) {}

    /// Answer text streamed since the last call, about to be shown. Called at
    /// a bounded rate while a reply streams; the reply's message, saved when
    /// it is whole, replaces these.
    fn partial(&mut self, text: &str) -> Result<(), HostedError> {
        let _ = text;
        Ok(())
    }

    /// The tool calls `ids` (already saved with their reply) are about to run.
    fn tools_started(&mut self, ids: &[&str]) -> Result<(), HostedError> {
        let _ = ids;
        Ok(())
    }

    /// The first `replaces` saved messages of the history (system prompt not
    /// counted) were replaced by `with` (a compaction). The sink keeps the
    /// full transcript and records the replacement for the next load.
    fn compacted(
        &mut self,
        replaces: usize,
        with: &[Message],
        tokens: &TokenTracker,
    ) -> Result<(), HostedError> {
        let _ = (replaces, with, tokens);
        Ok(())
    }

    /// The user took the conversation back: only the first `keep` saved
    /// messages (system prompt not counted) stay. The sink records it so a
    /// resume loads the rewound conversation.
    fn rewound(&mut self, keep: usize, tokens: &TokenTracker) -> Result<(), HostedError> {
        let _ = (keep, tokens);
        Ok(())
    }

    /// A sub-agent run by the call `call_id` added `new` to its own
    /// history (its system prompt not included): kept under the call.
    fn subagent(&mut self, call_id: &str, new: &[Message]) -> Result<(), HostedError> {
        let _ = (call_id, new);
        Ok(())
    }

    /// The session's plan is now `entries` (a `todo_write`): the sink
    /// records it so a resume shows it again.
    fn plan(&mut self, entries: &[protocol::PlanEntry]) -> Result<(), HostedError> {
        let _ = entries;
        Ok(())
    }

    /// Where the content of files is kept before the tools change them, if
    /// this sink keeps it.
    fn checkpoints(&self) -> Option<Arc<dyn crate::tools::checkpoint::Checkpoints>> {
        None
    }
}

/// Why a wait was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Interrupted,
    TimeLimit,
    /// The timeout set for this run while it went (`Op::SetTimeout`).
    Timeout,
}

/// What became of a final answer under an output schema.
enum Structured {
    /// The answer to give (the JSON, with a schema).
    Answer(String),
    /// It did not match; the model was told why and asked again.
    Retry,
    /// It did not match again: why.
    Invalid(String),
}

pub struct Agent {
    client: Arc<dyn ModelClient>,
    tools: Arc<ToolRegistry>,
    tool_ctx: ToolContext,
    options: AgentOptions,
    messages: Vec<Message>,
    tracker: TokenTracker,
    emitter: Emitter,
    control: Arc<Control>,
    sink: Option<Box<dyn HistorySink>>,
    /// Messages before this index have reached the sink (or never go to it).
    saved: usize,
    /// Saving failed and the user was told; later failures stay quiet.
    save_failing: bool,
    model: ModelInfo,
    session: Option<String>,
    /// The context-full warning was given (compaction off or impossible).
    warned_full: bool,
    /// The turn (latest user message) tool calls serve: their file
    /// checkpoints are kept under it.
    turn: String,
    /// Turn ids made by this agent, so two in the same millisecond differ.
    turn_seq: u32,
    /// The user's hooks; none in tests that build an agent by hand.
    hooks: Option<Arc<HookRunner>>,
    /// Context hooks gave outside a prompt (`SessionStart`), sent with the next one.
    hook_context: Vec<String>,
    /// The schema a final answer must match; the answer is then its JSON.
    pub(crate) output: Option<Arc<OutputSchema>>,
    /// The window is known (configured, catalogued, reported or named by
    /// a refusal), not the fallback guess: only then is anything cut to it.
    context_known: bool,
    /// What the `agent` tool's children share; none when this agent may
    /// have none.
    children: Option<subagent::Children>,
    /// A child's file changes are checkpointed under its parent's turn, so
    /// rewinding the parent's turn takes them back too.
    parent_turn: Option<String>,
    /// The children's messages, for the sink (taken while a round runs).
    child_records: Option<tokio::sync::mpsc::UnboundedReceiver<subagent::ChildRecord>>,
    /// The plan tools, whose list is journaled after each `todo_write`;
    /// none where the agent has no tools.
    pub(crate) planner: Option<Arc<plan::Planner>>,
}

impl Agent {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: Arc<dyn ModelClient>,
        tools: ToolRegistry,
        tool_ctx: ToolContext,
        options: AgentOptions,
        system_prompt: Option<String>,
        model: ModelInfo,
        emitter: Emitter,
        control: Arc<Control>,
    ) -> Self {
        let mut messages = Vec::new();
        if let Some(p) = system_prompt.filter(|p| !p.trim().is_empty()) {
            messages.push(Message::system(p));
        }
        // The system prompt is rebuilt at every start, so it is never saved.
        let saved = messages.len();
        let mut tools = tools;
        // A child with no tools could only answer from its prompt: no tool.
        let (children, child_records) = if options.subagents.enabled() && !tools.is_empty() {
            tools.register(Arc::new(subagent::AgentTool));
            let (children, rx) = subagent::Children::new(options.subagents);
            (Some(children), Some(rx))
        } else {
            (None, None)
        };
        Agent {
            client,
            tools: Arc::new(tools),
            tool_ctx,
            tracker: TokenTracker::new(options.context_limit),
            context_known: overflow::known_limit(options.context_limit),
            options,
            messages,
            emitter,
            control,
            sink: None,
            saved,
            save_failing: false,
            model,
            session: None,
            warned_full: false,
            turn: String::new(),
            turn_seq: 0,
            hooks: None,
            hook_context: Vec::new(),
            output: None,
            children,
            child_records,
            parent_turn: None,
            planner: None,
        }
    }

    pub fn set_hooks(&mut self, hooks: Arc<HookRunner>) {
        self.hooks = Some(hooks);
    }

    /// Text a hook gave for the model, sent with the next prompt.
    pub fn add_hook_context(&mut self, text: String) {
        self.hook_context.push(text);
    }

    /// The hooks, when any is configured for `event`.
    fn hooks_for(&self, event: HookEvent) -> Option<Arc<HookRunner>> {
        // A sub-agent (it runs under its parent's turn) gets the user's
        // tool hooks only: its prompt is the model's, and its end is its
        // parent's call ending.
        if self.parent_turn.is_some() {
            return None;
        }
        self.hooks.clone().filter(|h| h.has(event))
    }

    /// Talks to another model from the next request on; the history carries over.
    pub fn set_client(
        &mut self,
        client: Arc<dyn ModelClient>,
        context_limit: u64,
        model: ModelInfo,
    ) {
        self.client = client;
        self.tracker.context_limit = context_limit;
        self.options.context_limit = context_limit;
        self.context_known = overflow::known_limit(context_limit);
        if let Some(sink) = self.sink.as_mut() {
            sink.set_model(&model.model, &model.profile);
        }
        self.model = model;
    }

    pub fn model(&self) -> &ModelInfo {
        &self.model
    }

    fn base(&self) -> usize {
        usize::from(
            self.messages
                .first()
                .is_some_and(|m| m.role == Role::System),
        )
    }

    /// Drops the conversation (a new session); the system prompt stays.
    pub fn reset(&mut self) {
        let base = self.base();
        self.messages.truncate(base);
        self.saved = base;
        self.tracker = TokenTracker::new(self.tracker.context_limit);
        self.sink = None;
        self.session = None;
        self.save_failing = false;
        self.warned_full = false;
        self.tool_ctx.checkpoints = None;
        self.hook_context.clear();
        if let Some(p) = &self.planner {
            p.restore(Vec::new());
        }
    }

    /// Hands the plan as it is now to the sink (after a `todo_write`).
    async fn save_plan(&mut self) {
        let (Some(planner), Some(sink)) = (&self.planner, self.sink.as_mut()) else {
            return;
        };
        if let Err(e) = sink.plan(&planner.entries()) {
            if !self.save_failing {
                self.save_failing = true;
                self.warn(format!("session not saved: {e}")).await;
            }
        }
    }

    /// Sends every message added from now on to `sink`, a session called `id`.
    pub fn set_history_sink(&mut self, id: String, sink: Box<dyn HistorySink>) {
        self.tool_ctx.checkpoints = sink.checkpoints();
        self.sink = Some(sink);
        self.session = Some(id);
    }

    /// The session's background jobs, which the service stops when the
    /// session is cleared or the agent ends.
    pub(crate) fn jobs(&self) -> Arc<crate::tools::jobs::JobTable> {
        self.tool_ctx.jobs.clone()
    }

    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    pub fn has_sink(&self) -> bool {
        self.sink.is_some()
    }

    /// Continues an earlier conversation: `history` follows the current system
    /// prompt and the token totals are taken over. The first `already_saved`
    /// messages came from the sink's own store; any after them (repairs made on
    /// load) are saved with the next turn.
    pub fn restore(&mut self, history: Vec<Message>, tokens: TokenTracker, already_saved: usize) {
        let base = self.base();
        self.messages.truncate(base);
        self.messages.extend(history);
        self.saved = base + already_saved.min(self.messages.len() - base);
        self.tracker = TokenTracker {
            context_limit: self.tracker.context_limit,
            ..tokens
        };
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn tracker(&self) -> &TokenTracker {
        &self.tracker
    }

    /// The context in use: the larger of the estimate and the server's count
    /// of the last request. The tools count as the definitions a request
    /// sends, schemas and all (their JSON is encoded once per list and kept).
    pub fn context_estimate(&self) -> u64 {
        let tools = self.tools.definitions();
        let tools = match tools.chat_json() {
            Ok(json) => tokens::estimate_text(json.get()),
            // Encoding plain JSON values does not fail; count something anyway.
            Err(_) => tools
                .iter()
                .map(|d| tokens::estimate_text(&d.function.description) + 32)
                .sum::<u64>(),
        };
        let estimate = tokens::estimate_messages(&self.messages) + tools;
        let reported = self.tracker.last_prompt_tokens + self.tracker.last_completion_tokens;
        estimate.max(reported)
    }

    pub fn status(&self, running: Option<u64>) -> StatusReport {
        let t = &self.tracker;
        let (steering, follow_ups) = self.control.queues();
        StatusReport {
            model: self.model.model.clone(),
            profile: self.model.profile.clone(),
            base_url: self.model.base_url.clone(),
            session: self.session.clone(),
            messages: self.messages.len(),
            context_limit: t.context_limit,
            context_estimate: self.context_estimate(),
            total_prompt_tokens: t.total_prompt_tokens,
            total_completion_tokens: t.total_completion_tokens,
            last_prompt_tokens: t.last_prompt_tokens,
            last_completion_tokens: t.last_completion_tokens,
            cache_read_tokens: t.total_cache_read_tokens,
            cache_write_tokens: t.total_cache_write_tokens,
            cost_usd: t.session_cost_usd(),
            local: self.model.pricing == tokens::Pricing::Local,
            policy: self.control.policy(),
            running,
            steering,
            follow_ups,
        }
    }

    /// Hands unsaved messages to the sink. A failure is reported once and the
    /// messages stay pending, so a later save (the disk has room again) catches up.
    async fn persist(&mut self, turn_end: bool) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        if self.saved == self.messages.len() && !turn_end {
            return;
        }
        let result = if turn_end {
            self.save_turn_end().await
        } else {
            sink.save(&self.messages[self.saved..], &self.tracker, false)
        };
        match result {
            Ok(()) => {
                self.saved = self.messages.len();
                self.save_failing = false;
            }
            Err(e) => {
                if !self.save_failing {
                    self.save_failing = true;
                    self.warn(format!("session not saved: {e}")).await;
                }
            }
        }
    }

    /// The end-of-turn save, which makes the file durable (an fsync: up to
    /// tens of milliseconds on a busy disk). It runs off the runtime's workers
    /// (`crate::background`; in `buddy serve` on a housekeeping thread at
    /// a lower priority, so a busy server's streams get the CPU first), and it
    /// is awaited, so the turn is still durable before the run is reported
    /// finished.
    async fn save_turn_end(&mut self) -> Result<(), HostedError> {
        let Some(mut sink) = self.sink.take() else {
            return Ok(());
        };
        let new = self.messages[self.saved..].to_vec();
        let tracker = self.tracker.clone();
        let saving = crate::background::run(move || {
            let result = sink.save(&new, &tracker, true);
            (sink, result)
        });
        match saving.await {
            Ok((sink, result)) => {
                self.sink = Some(sink);
                result
            }
            // A panic in the sink goes on as it would have inline.
            Err(crate::background::Lost::Panicked(p)) => std::panic::resume_unwind(p),
            // No thread could run it: the sink went with the job.
            Err(crate::background::Lost::NotRun(e)) => {
                Err(format!("the session save did not run: {e}").into())
            }
        }
    }

    async fn emit(&self, kind: EventKind) {
        self.emitter.emit(kind).await;
    }

    async fn warn(&self, message: String) {
        self.emit(EventKind::Warning { message }).await;
    }

    async fn push_user(&mut self, text: String, via: UserVia, images: Vec<Image>) {
        let turn = self.next_turn_id();
        self.messages.push(rewind::with_turn(
            Message::user_with_images(text.clone(), images.clone()),
            &turn,
        ));
        self.turn = turn;
        self.emit(EventKind::UserMessage { text, via, images })
            .await;
    }

    /// A user message that starts no run (`Op::AddContext`); saved with the
    /// conversation like any other, with the form the user typed, if given.
    pub async fn add_context(&mut self, text: String, shown: Option<String>) {
        let text = self.fit_in_context(text, "the attached text").await;
        let message = Message::user(text);
        self.messages.push(match shown {
            Some(s) => message.with_shown(s),
            None => message,
        });
        self.persist(false).await;
    }

    async fn announce_queues(&self) {
        let (steering, follow_ups) = self.control.queues();
        self.emit(EventKind::Queues {
            steering,
            follow_ups,
        })
        .await;
    }

    /// Runs the conversation from `prompt` until the model answers with no
    /// steering or follow-up left, a limit is hit, or `cancel` fires. However
    /// it ends, what it added is handed to the history sink and the history
    /// stays valid.
    pub async fn run(&mut self, prompt: String, cancel: Cancel) -> RunOutcome {
        self.run_with_images(prompt, Vec::new(), cancel).await
    }

    /// `run`, with `images` attached to the prompt's message.
    pub async fn run_with_images(
        &mut self,
        prompt: String,
        images: Vec<Image>,
        cancel: Cancel,
    ) -> RunOutcome {
        let outcome = self.converse(prompt, images, cancel).await;
        self.persist(true).await;
        outcome
    }

    async fn converse(
        &mut self,
        prompt: String,
        images: Vec<Image>,
        mut cancel: Cancel,
    ) -> RunOutcome {
        if cancel.is_cancelled() {
            return RunOutcome::Interrupted;
        }
        let started = Instant::now();
        let deadline = self.options.limits.max_duration.map(|d| started + d);
        // Where this run's messages start: set aside if the server refuses
        // them as too long for the window.
        let run_start = self.messages.len();
        let mut context = std::mem::take(&mut self.hook_context);
        if let Some(hooks) = self.hooks_for(HookEvent::UserPromptSubmit) {
            let mut fields = serde_json::Map::new();
            fields.insert("prompt".into(), prompt.clone().into());
            let verdict = tokio::select! {
                biased;
                stop = stop_signal(&mut cancel, deadline) => {
                    self.hook_context = context;
                    return self.stopped(stop, started);
                }
                v = hooks.fire(HookEvent::UserPromptSubmit, About::default(), fields) => v,
            };
            match verdict {
                Verdict::Block { .. } => {
                    // The prompt never joins the history; the hook's event
                    // said why.
                    self.hook_context = context;
                    return RunOutcome::Failed {
                        message: "the prompt was not sent: a UserPromptSubmit hook blocked it"
                            .into(),
                    };
                }
                Verdict::Go { context: Some(c) } => context.push(c),
                Verdict::Go { context: None } => {}
            }
        }
        if context.is_empty() {
            self.push_user(prompt, UserVia::Prompt, images).await;
        } else {
            // The model reads the hooks' context after the prompt; the
            // session and every front end show the prompt as typed.
            let full = format!("{prompt}\n\n{}", context.join("\n\n"));
            self.messages
                .push(Message::user_with_images(full, images.clone()).with_shown(prompt.clone()));
            self.emit(EventKind::UserMessage {
                text: prompt,
                via: UserVia::Prompt,
                images,
            })
            .await;
        }
        self.persist(false).await;
        let mut turns = 0u32;
        let mut stop_hook_active = false;
        let mut schema_retried = false;
        let mut tokens_used = 0u64;
        let mut cost_nanos = 0u64;
        loop {
            let steering = self.control.take_steering();
            if !steering.is_empty() {
                self.announce_queues().await;
                for text in steering {
                    self.push_user(text, UserVia::Steer, Vec::new()).await;
                }
                self.persist(false).await;
            }
            let limits = self.options.limits;
            if turns >= limits.max_turns {
                return RunOutcome::LimitReached {
                    message: format!(
                        "stopped after {turns} model calls without a final answer (the limit is agent.max_turns = {}; raise it, or --max-turns for exec)",
                        limits.max_turns
                    ),
                };
            }
            if let Some(max) = limits.max_total_tokens {
                if tokens_used >= max {
                    return RunOutcome::LimitReached {
                        message: format!(
                            "stopped after using {tokens_used} tokens (the limit is agent.max_total_tokens = {max}; raise it, or --max-tokens for exec)"
                        ),
                    };
                }
            }
            if let Some(max) = limits.max_cost_usd {
                let spent = tokens::nanos_to_usd(cost_nanos);
                if cost_nanos >= tokens::usd_to_nanos(max) {
                    return RunOutcome::LimitReached {
                        message: format!(
                            "stopped after spending {} (the limit is --max-cost {})",
                            tokens::format_usd(spent),
                            tokens::format_usd(max)
                        ),
                    };
                }
            }
            if let Some(stop) = self.compact_if_full(&mut cancel, deadline).await {
                return self.stopped(stop, started);
            }
            turns += 1;
            self.emit(EventKind::ModelRequest { turn: turns }).await;
            // Streamed text is journaled before it is shown (partial.rs).
            let journal = partial::StreamJournal::new(self.sink.take(), self.emitter.clone());
            // Asked per request: tools from MCP servers come and go.
            self.tools.refresh().await;
            let definitions = self.tools.definitions();
            let response = {
                let on_event = |ev: StreamEvent| match ev {
                    StreamEvent::Text(text) => journal.text(text),
                    other => {
                        // Held text came first: it goes first.
                        journal.release_held();
                        self.emitter.delta(stream_event(other))
                    }
                };
                let request = ModelRequest {
                    messages: &self.messages,
                    tools: &definitions,
                    output: self.output.as_deref(),
                };
                let look_again = !self.client.reads_in_place();
                let reply = self.client.complete(request, &on_event);
                tokio::pin!(reply);
                tokio::select! {
                    biased;
                    stop = stop_signal(&mut cancel, deadline) => Err(stop),
                    r = partial::release_when_waiting(reply, &journal, look_again) => Ok(r),
                }
            };
            let (sink, shown) = journal.finish();
            self.sink = sink;
            self.emitter.flush().await;
            if !matches!(response, Ok(Ok(_))) && !shown.is_empty() {
                // The user saw part of an answer: keep it, marked, so the
                // history says what was shown (a kill is caught on load).
                self.messages.push(interrupted_answer(&shown));
            }
            let response = match response {
                Err(stop) => return self.stopped(stop, started),
                Ok(Err(e)) => {
                    let message = e.to_string();
                    let message = match e {
                        crate::provider::ApiError::ContextOverflow { limit, .. } => {
                            self.set_aside_overflowing_turn(run_start, limit, message)
                                .await
                        }
                        _ => message,
                    };
                    return RunOutcome::Failed { message };
                }
                Ok(Ok(r)) => r,
            };
            let (tokens, cost) = self
                .record_usage(response.usage.as_ref(), &response.message)
                .await;
            tokens_used += tokens;
            cost_nanos += cost.map_or(0, tokens::usd_to_nanos);
            if let Some(reason) = &response.cut_off {
                self.warn(format!(
                    "the model stopped at {reason}; the answer may be cut short"
                ))
                .await;
            }
            let refused = response.refusal.is_some();
            let mut message = response.message;
            message.role = Role::Assistant;
            if let Some(reason) = &response.refusal {
                // A refusal field says it all; other reasons are named.
                let why = match reason.as_str() {
                    "refusal" => String::new(),
                    other => format!(" ({other})"),
                };
                self.warn(format!("the model refused to answer{why}")).await;
                if message.text().trim().is_empty() && message.calls().is_empty() {
                    // An empty assistant turn is refused by some servers on
                    // the next request; the history says what happened.
                    message.content = Some(REFUSED_WITHOUT_TEXT.to_string());
                }
            }
            let calls = message.calls().to_vec();
            let text = message.text().to_string();
            self.messages.push(message);
            if calls.is_empty() {
                if self.control.has_steering() {
                    self.persist(false).await;
                    continue;
                }
                let follow_ups = self.control.take_follow_ups();
                if follow_ups.is_empty() {
                    if let Some(hooks) = self.hooks_for(HookEvent::Stop) {
                        let mut fields = serde_json::Map::new();
                        fields.insert("stop_hook_active".into(), stop_hook_active.into());
                        fields.insert("last_assistant_message".into(), text.clone().into());
                        let verdict = tokio::select! {
                            biased;
                            stop = stop_signal(&mut cancel, deadline) => return self.stopped(stop, started),
                            v = hooks.fire(HookEvent::Stop, About::default(), fields) => v,
                        };
                        if let Verdict::Block { reason } = verdict {
                            // Claude Code's meaning: the model must go on,
                            // told why; max_turns still bounds the loop.
                            stop_hook_active = true;
                            self.messages.push(Message::user(format!(
                                "[a Stop hook asks you to continue] {reason}"
                            )));
                            self.persist(false).await;
                            continue;
                        }
                    }
                    if refused && self.output.is_some() {
                        // A refusal is no JSON, and asking again is unlikely
                        // to change the model's mind.
                        return RunOutcome::Failed {
                            message: format!("the model refused to answer: {text}"),
                        };
                    }
                    let text = match self.structured(&text, &mut schema_retried).await {
                        Structured::Answer(text) => text,
                        Structured::Retry => continue,
                        Structured::Invalid(message) => return RunOutcome::Failed { message },
                    };
                    // Saved by the turn-end save in `run`, before the run is
                    // reported finished, on a blocking thread: a long answer's
                    // encoding stays off the runtime worker.
                    return RunOutcome::Answered { text, refused };
                }
                self.persist(false).await;
                self.announce_queues().await;
                for text in follow_ups {
                    self.push_user(text, UserVia::FollowUp, Vec::new()).await;
                }
                self.persist(false).await;
                continue;
            }
            self.persist(false).await;
            let end = self.run_tools(&calls, &mut cancel, deadline).await;
            // What the children spent counts as this run's own.
            let (child_tokens, child_cost) = self.take_child_spend().await;
            tokens_used += child_tokens;
            cost_nanos += child_cost;
            if let ToolsEnd::Stopped(stop) = end {
                return self.stopped(stop, started);
            }
        }
    }

    /// A final answer checked against the output schema, if there is one:
    /// the first answer that does not match is sent back once with the
    /// reason; a second ends the run with that reason.
    async fn structured(&mut self, text: &str, retried: &mut bool) -> Structured {
        let Some(schema) = self.output.clone() else {
            return Structured::Answer(text.to_string());
        };
        match schema.check(text) {
            // The JSON alone, on one line, whatever the model wrapped it in.
            Ok(value) => Structured::Answer(value.to_string()),
            Err(why) if !*retried => {
                *retried = true;
                self.warn(format!("{why}; asking the model once more"))
                    .await;
                self.messages.push(Message::user(format!(
                    "{why}. Answer again with only the JSON value that matches the output schema."
                )));
                self.persist(false).await;
                Structured::Retry
            }
            Err(why) => Structured::Invalid(why.to_string()),
        }
    }

    fn stopped(&self, stop: Stop, started: Instant) -> RunOutcome {
        match stop {
            Stop::Interrupted => RunOutcome::Interrupted,
            Stop::TimeLimit => RunOutcome::LimitReached {
                message: format!(
                    "stopped after {:.0} s, the run's time limit (agent.max_duration; --timeout for exec)",
                    started.elapsed().as_secs_f64()
                ),
            },
            Stop::Timeout => RunOutcome::LimitReached {
                message: format!(
                    "stopped after {:.0} s, at the timeout set for this run",
                    started.elapsed().as_secs_f64()
                ),
            },
        }
    }

    /// Records a reply's usage; returns the tokens it took and what it
    /// cost in US dollars (`None`: the price is unknown).
    async fn record_usage(&mut self, usage: Option<&Usage>, reply: &Message) -> (u64, Option<f64>) {
        let (prompt, completion, estimated) = match usage {
            Some(u) => (u.prompt_tokens, u.completion_tokens, false),
            None => {
                let p = tokens::estimate_messages(&self.messages);
                let c = tokens::estimate_messages(std::slice::from_ref(reply));
                (p, c, true)
            }
        };
        let (read, write) = usage.map_or((0, 0), |u| (u.cache_read_tokens, u.cache_write_tokens));
        self.tracker.record(prompt, completion);
        self.tracker.record_cache(read, write);
        let cost = self.model.pricing.cost(prompt, completion, read);
        self.tracker.record_cost(cost);
        // Status asked for mid-run is answered from this snapshot; once per
        // model reply is often enough, and keeps the history walk off the
        // per-message save path.
        self.control.publish(self.status(Some(self.emitter.run())));
        self.emit(EventKind::Usage(UsageReport {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cache_read_tokens: read,
            cache_write_tokens: write,
            session_total: self.tracker.session_total(),
            estimated,
            cost_usd: cost,
            session_cost_usd: self.tracker.session_cost_usd(),
            local: self.model.pricing == tokens::Pricing::Local,
        }))
        .await;
        (prompt + completion, cost)
    }
}

fn stream_event(ev: StreamEvent) -> EventKind {
    match ev {
        StreamEvent::Text(text) => EventKind::TextDelta { text },
        StreamEvent::Reasoning { field, text } => EventKind::Reasoning { field, text },
        StreamEvent::Retrying {
            attempt,
            max_retries,
            delay,
            error,
        } => EventKind::Retrying {
            attempt,
            max_retries,
            delay_ms: delay.as_millis() as u64,
            error,
        },
    }
}

/// Completes when the run must stop: cancelled, or past a deadline.
async fn stop_signal(cancel: &mut Cancel, deadline: Option<Instant>) -> Stop {
    let stop = |why| match why {
        cancel::Why::Cancelled => Stop::Interrupted,
        cancel::Why::Deadline => Stop::Timeout,
    };
    match deadline {
        Some(d) => tokio::select! {
            biased;
            why = cancel.stopped() => stop(why),
            _ = tokio::time::sleep_until(d) => Stop::TimeLimit,
        },
        None => stop(cancel.stopped().await),
    }
}

/// Fills in a result for every tool call that has none, so a history cut off
/// mid-batch (cancellation, a crash) is one a provider will accept.
pub fn repair_history(messages: &mut Vec<Message>) -> usize {
    repair_history_with(messages, |_| CANCELLED)
}

/// `repair_history` with the result text for each unanswered call id chosen
/// by `result_for` (a loaded session knows which calls had started).
pub fn repair_history_with(
    messages: &mut Vec<Message>,
    mut result_for: impl FnMut(&str) -> &'static str,
) -> usize {
    let mut repaired = 0;
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role == Role::Assistant && !messages[i].calls().is_empty() {
            let calls: Vec<String> = messages[i].calls().iter().map(|c| c.id.clone()).collect();
            let mut j = i + 1;
            let mut answered = Vec::new();
            while j < messages.len() && messages[j].role == Role::Tool {
                if let Some(id) = &messages[j].tool_call_id {
                    answered.push(id.clone());
                }
                j += 1;
            }
            for id in calls.iter().filter(|id| !answered.contains(id)) {
                messages.insert(j, Message::tool_result(id.clone(), result_for(id)));
                j += 1;
                repaired += 1;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    repaired
}

#[cfg(test)]
mod tests;
