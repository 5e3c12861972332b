//! The agent's protocol: what a front end may ask (`Op`) and what the agent
//! reports (`Event`). Both are plain serialisable data, so the same stream can
//! drive the terminal front ends, JSON lines on stdout or a network client.
//! Nothing here holds a channel or a callback: an approval is an event with a
//! call id, answered by an `Op::Approve` naming that id.
//!
//! Every op goes in a `Submission` with an id its sender chose, and every
//! event names the op it answers (`Event::op_id`), as codex's submission ids
//! do: a front end matches replies to its requests by id, never by guessing
//! from their order.

use crate::tools::checkpoint::FileRestore;
pub use crate::tools::elicitation::{Action as ElicitationAction, Question as ElicitationQuestion};
use crate::tools::jobs::JobInfo;
use crate::tools::Truncation;
use crate::wire::Image;
use serde::{Deserialize, Serialize};

/// Names an op for the events that answer it. Unique per agent: the
/// agent's `OpSender`s share one counter, starting at 1.
pub type OpId = u64;

/// An op as it goes to the agent: with the id its replies will carry.
/// Serialised, the op's own object plus `id` (`{"id":3,"op":"status"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    pub id: OpId,
    #[serde(flatten)]
    pub op: Op,
}

/// A request to the agent. Ops that only make sense while a run is going
/// (`Steer`, `Interrupt`, `Approve`) are harmless otherwise; the reply, if any,
/// is an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Starts a run with this user message. While a run is going it is
    /// queued as a follow-up instead, so no message is ever dropped.
    ///
    /// `images` go with the prompt's message. They are taken only while
    /// idle (a prompt with images during a run is handed back with
    /// `Unqueued` and an `Error`), and refused, with nothing sent, when the
    /// model's profile says it takes none. Serialised, an image is its
    /// reference alone (`wire::Image`): a prompt with images is for front
    /// ends in this process.
    Prompt {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
    },
    /// Joins the running conversation as soon as the running tools finish;
    /// the rest of that reply's tool calls are skipped. Idle, it starts a run.
    Steer {
        text: String,
    },
    /// Taken up when the agent would otherwise stop. Idle, it starts a run.
    FollowUp {
        text: String,
    },
    /// Removes queued messages and hands their text back (`Unqueued`).
    ClearQueue {
        queue: QueueKind,
    },
    /// Stops the run: running tools are killed and every call gets a result.
    Interrupt,
    Approve {
        call_id: String,
        decision: Decision,
    },
    SetApprovalPolicy {
        policy: ApprovalPolicy,
    },
    /// Answers a server's question (`ElicitationRequested` with this `id`).
    /// An accepted form's content must fit its fields, else an `Error`
    /// says why and the question still waits. `reason` goes with a
    /// `decline` to the model: why nobody was asked (a front end that
    /// cannot ask); absent when the user declined.
    Elicitation {
        id: String,
        /// Boxed: a form's content would make every op as large.
        answer: Box<ElicitationAction>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Talks to another model profile (a name or a 1-based index) from the
    /// next request on; the history carries over. Refused during a run.
    SwitchModel {
        choice: String,
    },
    /// Shrinks the history now (old tool outputs, then a summary of older
    /// turns). `focus`, when given, is the user's instruction to the
    /// summariser (`/compact keep the numbers`). Refused during a run.
    Compact {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
    },
    /// Starts over with an empty conversation, saved from its first prompt.
    NewSession,
    /// Continues a saved session (`last`, an id or a unique prefix).
    Resume {
        query: String,
    },
    /// Adds a user message to the conversation without starting a run (no
    /// event; the model sees it with the next prompt): a command the user ran
    /// (`!cmd` in the REPL), or files attached to the prompt that follows.
    /// Refused with `Error` during a run. `shown` is the form the user
    /// typed (`!git status`), kept with the message for a replay of the
    /// session (an empty one: the user saw nothing of it, as for attached
    /// files); the model gets `text` only.
    AddContext {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shown: Option<String>,
    },
    /// Runs the user's own shell command now (`!cmd` in the REPL) on the
    /// target the tools use (behind a tmux pane, its host), without asking:
    /// the user typed it. Bounded in output and time (`agent::command`);
    /// one at a time, alongside a run or not. Answered by `CommandRan`;
    /// the exchange joins the conversation as context (as `AddContext`
    /// would) at once when idle, else when the run ends.
    RunCommand {
        command: String,
    },
    /// Stops the `RunCommand` in progress (its process is killed; nothing
    /// joins the conversation). Answered by `CommandRan` with `stopped`.
    StopCommand,
    /// Lists the conversation's turns for a rewind (`Turns`).
    Turns,
    /// Takes the session back to before `turn` (an id from `Turns`): the
    /// files its tools changed since (`code`), the conversation
    /// (`conversation`), or both. Answered by `Rewound`. Refused during a run.
    Rewind {
        turn: String,
        #[serde(default)]
        code: bool,
        #[serde(default)]
        conversation: bool,
    },
    /// Branches a session into a new one that continues separately: the
    /// conversation in use (`query` absent), or a saved one (`last`, an id or
    /// a unique prefix), which is then continued in its fork. Answered by
    /// `SessionForked` (and `SessionResumed` for a saved one). The original
    /// is not changed. Refused during a run.
    Fork {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query: Option<String>,
    },
    /// Reports `Status`.
    Status,
    /// Lists the saved sessions of the working directory (`Sessions`),
    /// idle or during a run.
    ListSessions,
    /// Lists the session's background jobs (`Jobs`), idle or during a run.
    ListJobs,
    /// Stops the run in progress `after_ms` from now, as its duration limit
    /// would (it ends with `LimitReached`); a later one replaces it.
    /// Answered by `TimeoutSet`; refused with `Error` when no run is going.
    SetTimeout {
        after_ms: u64,
    },
    /// Turns plan mode on or off, idle or during a run: in plan mode only
    /// read-only tools run and the model may end planning with
    /// `exit_plan_mode`. Answered by `PlanMode`.
    SetPlanMode {
        on: bool,
    },
    /// Ends a run in progress, saves, reports `ShutdownComplete` and stops.
    Shutdown,
    /// Stops once the run in progress, and whatever was queued for it, is
    /// done (at once when idle): saved, `ShutdownComplete`, gone. For front
    /// ends that hold a session only while it works.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    Steering,
    FollowUp,
    All,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    Approve,
    /// Approves this call and, from now on in this agent, every later command
    /// that starts with the words offered in `ApprovalRequested::always`
    /// (the front end cannot widen them). Where nothing was offered it
    /// approves this call only.
    ApproveAlways,
    /// `reason` goes to the model with the denial.
    Deny {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// When a command that needs consent may run without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Ask the front end each time.
    Ask,
    /// Approve everything (the denylist still applies).
    All,
    /// Deny everything.
    None,
    /// Approve file changes (`write_file`, `edit_file`, `apply_patch`) and
    /// ask for everything else, commands included (the denylist still
    /// applies): an editor's "accept edits" mode.
    Edits,
    /// Approve everything until this moment (Unix milliseconds), then ask.
    Until { unix_ms: u64 },
}

/// How a queue hands over its messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueMode {
    /// One message per opportunity (the default).
    #[default]
    OneAtATime,
    /// Everything queued, at once.
    All,
}

/// One thing the agent reports. `run` numbers the run it belongs to (0 for
/// replies outside a run); `seq` increases by one per event, so a consumer can
/// tell what it missed; `op_id` is the op it answers: for a run's events the
/// op that started the run, for a reply the op asked. Events nobody asked
/// for (a run started by itself from queued messages, the queues handed
/// back after a run) carry none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub run: u64,
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_id: Option<OpId>,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[cfg(test)]
impl Event {
    /// An event of run 1 answering op 1: what the front ends' tests feed
    /// their renderers.
    pub fn fixture(kind: EventKind) -> Event {
        Event {
            run: 1,
            seq: 0,
            op_id: Some(1),
            kind,
        }
    }
}

impl Event {
    /// Whether this is the end of the run that op `op` (a prompt) started;
    /// with no op known, the end of any run. A front end waiting for its
    /// prompt's answer stops on this, not on another run's end.
    pub fn ends_run_of(&self, op: Option<OpId>) -> bool {
        matches!(self.kind, EventKind::RunFinished(_)) && (op.is_none() || self.op_id == op)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A run began with this prompt.
    RunStarted {
        prompt: String,
    },
    /// A model request is about to go out (1-based within the run).
    ModelRequest {
        turn: u32,
    },
    TextDelta {
        text: String,
    },
    /// A piece of a reasoning trace (field name as the provider sent it).
    Reasoning {
        field: String,
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        arguments: String,
    },
    /// The latest lines of a running call's output (a shell command's stdout
    /// and stderr as they come): at most `tools::live::TAIL_LINES` lines of
    /// `LINE_CHARS` characters, sent at most every `INTERVAL` per call. Each
    /// replaces the last; the `ToolResult` that follows supersedes them all.
    ToolProgress {
        call_id: String,
        tail: String,
    },
    /// Results arrive in completion order; the history keeps request order.
    ToolResult(ToolCallResult),
    Usage(UsageReport),
    Retrying {
        attempt: u32,
        max_retries: u32,
        delay_ms: u64,
        error: String,
    },
    Warning {
        message: String,
    },
    /// A hook (`agent::hooks`) blocked what was about to happen: a tool
    /// call (`PreToolUse`, which then does not run), a prompt
    /// (`UserPromptSubmit`), or the end of the run (`Stop`, which goes on);
    /// for `PostToolUse` the reason joins the call's result.
    HookBlocked {
        hook_event: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        reason: String,
    },
    /// A tool waits for consent; answer with `Op::Approve { call_id, .. }`.
    ApprovalRequested(ApprovalQuestion),
    /// A server asks the user something during the call `call_id` (an MCP
    /// elicitation): a form of typed fields, or a page to open. Answer with
    /// `Op::Elicitation { id, .. }`; unanswered within its bound it is
    /// cancelled. Its text is bounded and made safe for a terminal.
    ElicitationRequested(ElicitationQuestion),
    /// How a server's question ended, whoever ended it; never the values
    /// given.
    ElicitationDecided {
        id: String,
        server: String,
        call_id: String,
        /// `accept`, `decline` or `cancel`: what the server was told.
        action: String,
        by: ElicitedBy,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An event of a sub-agent (the `agent` tool's child), tagged with the
    /// parent's call that runs it. Its approvals are not wrapped: they come
    /// as `ApprovalRequested` naming the child (`subagent`).
    Subagent(SubagentEvent),
    /// How a request for consent ended, whoever decided it.
    ApprovalDecided {
        call_id: String,
        tool: String,
        command: String,
        approved: bool,
        by: DecidedBy,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The allow-list prefix involved: the one that approved this
        /// (`by: allow_list`) or the one the user's "always" just added.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        always: Option<String>,
    },
    /// A user message joined the history.
    UserMessage {
        text: String,
        via: UserVia,
        /// The images attached to it, by reference: name, media type,
        /// SHA-256 and size in bytes (never the bytes).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
    },
    /// The queues changed; their full contents, oldest first.
    Queues {
        steering: Vec<String>,
        follow_ups: Vec<String>,
    },
    /// Queued messages taken back (`ClearQueue`, or an interrupted run).
    Unqueued {
        texts: Vec<String>,
    },
    /// The history was compacted.
    Compacted {
        messages_before: usize,
        messages_after: usize,
        tokens_before: u64,
        tokens_after: u64,
        /// Older turns were replaced by a summary (not only shortened).
        summarized: bool,
    },
    RunFinished(RunEnd),
    Status(Box<StatusReport>),
    /// The reply to `ListSessions`: the saved sessions, most recently used
    /// first, in the directory `dir`; `warnings` name files that could not
    /// be read (they do not hide the others).
    Sessions {
        sessions: Vec<SessionSummary>,
        dir: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
    },
    /// The reply to `SetTimeout`: the run (the event's `run`) stops
    /// `after_ms` from now.
    TimeoutSet {
        after_ms: u64,
    },
    /// The reply to `RunCommand` (and `StopCommand`): how the command ended
    /// and what it printed.
    CommandRan(Box<CommandRun>),
    /// The reply to `ListJobs`: the session's background jobs (`run_shell`
    /// with `background`), oldest first.
    Jobs {
        jobs: Vec<JobInfo>,
    },
    ApprovalPolicyChanged {
        policy: ApprovalPolicy,
    },
    ModelSwitched {
        model: String,
        profile: String,
        base_url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Saving started in a new session file.
    SessionStarted {
        id: String,
    },
    SessionResumed {
        id: String,
        messages: usize,
        warnings: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_prompt: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_answer: Option<String>,
        /// The end of the conversation, for a front end to show where it
        /// left off: one item per message, the last `messages` of them at
        /// most `REPLAY_MESSAGES`, long texts clipped. The
        /// `messages - replay.len()` before them are left out.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        replay: Vec<Replayed>,
    },
    /// The conversation was cleared (`NewSession`).
    SessionCleared,
    /// The reply to `Turns`: the conversation's turns, oldest first (at
    /// most the last `MAX_LISTED_TURNS`), each with what rewinding to before
    /// it would do.
    Turns {
        turns: Vec<TurnSummary>,
        /// Why files cannot be rewound here, when they cannot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The reply to `Rewind`.
    Rewound {
        turn: String,
        /// What happened to each file (absent when the code was not asked for).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<Vec<FileRestore>>,
        /// Messages taken out of the conversation (0 when it was not asked for).
        removed: usize,
        /// The prompt of the turn, when the conversation went back to before
        /// it (a front end may offer it for editing).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
        /// Shell commands run since the turn: their effects stay.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        commands: Vec<String>,
    },
    /// The reply to `Fork`: the conversation now continues in session `id`,
    /// branched from `from`, with `messages` messages of shared past.
    SessionForked {
        id: String,
        from: String,
        messages: usize,
    },
    /// An op could not be carried out; the agent is unchanged.
    Error {
        message: String,
        /// What kind of failure, where a front end may act on it (a server
        /// picks its status code by it); absent when no kind applies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
    },
    ShutdownComplete,
    /// The session's plan (`todo_write`) as it is now, whole: each one
    /// replaces the last. Also sent after a resume that restored one.
    Plan {
        entries: Vec<PlanEntry>,
    },
    /// Plan mode was turned on or off (`Op::SetPlanMode`, or the user
    /// accepted a plan from `exit_plan_mode`).
    PlanMode {
        on: bool,
    },
    /// The model finished planning (`exit_plan_mode`): its plan in Markdown.
    /// An approval question for `call_id` follows where someone can answer:
    /// approving it ends plan mode.
    PlanReady {
        call_id: String,
        plan: String,
    },
}

/// One item of the session's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub content: String,
    pub status: PlanStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

impl PlanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Pending => "pending",
            PlanStatus::InProgress => "in_progress",
            PlanStatus::Completed => "completed",
        }
    }
}

/// Kinds of `Error` a front end may tell apart. So far the ways opening a
/// saved session fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Another process holds the session.
    SessionInUse,
    /// No session matches.
    SessionNotFound,
    /// The machine is out of something for the moment (file descriptors,
    /// memory): retry later.
    SessionUnreadable,
    /// The session file is damaged or newer than this buddy understands.
    SessionDamaged,
}

/// One tool call's result (`EventKind::ToolResult`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallResult {
    pub call_id: String,
    /// The tool that was called.
    pub name: String,
    pub text: String,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncation>,
}

/// The tokens (and cost) of one model reply, with the session's totals
/// (`EventKind::Usage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub session_total: u64,
    /// True when the server sent no counts and these are estimates.
    pub estimated: bool,
    /// What this reply cost in US dollars (0 on a local server); absent
    /// when the model's price is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The session's spend so far; absent when any reply's price was
    /// unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_cost_usd: Option<f64>,
    /// The model runs on this machine (a loopback server without a
    /// price): its cost is 0 because it is free, not unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
}

/// What a tool asks consent for (`EventKind::ApprovalRequested`): the
/// question every front end puts to its user, answered with
/// `Op::Approve { call_id, .. }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalQuestion {
    pub call_id: String,
    pub tool: String,
    /// Who would run it (`user@host`, a container).
    pub actor: String,
    pub command: String,
    /// What the change is, for a front end to show before asking: a
    /// unified diff for a file write (bounded in size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The words an `approve_always` answer would allow from now on, as
    /// a command prefix (`cargo test`); absent when "always" is not offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<String>,
    /// The sub-agent that asks (its description), when a child asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

/// Who ended a server's question (`EventKind::ElicitationDecided`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitedBy {
    /// The user answered.
    User,
    /// The front end cannot ask (exec, serve, a client without the
    /// capability), or buddy cannot show the question: declined.
    Refused,
    /// Nobody answered within the bound: cancelled.
    Timeout,
    /// The run ended first: cancelled.
    Interrupted,
}

/// One event of a sub-agent (`EventKind::Subagent`): `event` is what the
/// child reported, `call_id` the parent's `agent` call that runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubagentEvent {
    pub call_id: String,
    /// What the child is for, as the model described it.
    pub description: String,
    pub event: Box<EventKind>,
}

/// How a run ended (`EventKind::RunFinished`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    pub outcome: RunOutcome,
}

impl EventKind {
    /// An `Error` of no particular kind.
    pub fn error(message: impl Into<String>) -> EventKind {
        EventKind::Error {
            message: message.into(),
            code: None,
        }
    }

    /// Replaces known secrets in the text this event carries to whoever
    /// watches: outputs, previews, errors and answers. Ids and names are left
    /// alone; they come from buddy or the model's protocol, not from outside.
    pub fn redact(&mut self, secrets: &crate::redact::Secrets) {
        if secrets.is_empty() {
            return;
        }
        let r = |t: &mut String| secrets.text_in_place(t);
        match self {
            EventKind::RunStarted { prompt } => r(prompt),
            EventKind::TextDelta { text } | EventKind::Reasoning { text, .. } => r(text),
            EventKind::ToolCall { arguments, .. } => r(arguments),
            EventKind::ToolResult(result) => r(&mut result.text),
            EventKind::ToolProgress { tail, .. } => r(tail),
            EventKind::Retrying { error, .. } => r(error),
            EventKind::Warning { message } | EventKind::Error { message, .. } => r(message),
            EventKind::HookBlocked { reason, .. } => r(reason),
            EventKind::Subagent(sub) => sub.event.redact(secrets),
            EventKind::ApprovalRequested(q) => {
                r(&mut q.command);
                q.detail.iter_mut().chain(q.always.iter_mut()).for_each(r);
            }
            EventKind::ElicitationRequested(q) => {
                r(&mut q.message);
                if let crate::tools::elicitation::Mode::Url { url } = &mut q.mode {
                    r(url);
                }
            }
            EventKind::ElicitationDecided { reason, .. } => reason.iter_mut().for_each(r),
            EventKind::ApprovalDecided {
                command,
                reason,
                always,
                ..
            } => {
                r(command);
                reason.iter_mut().chain(always.iter_mut()).for_each(r);
            }
            EventKind::UserMessage { text, images, .. } => {
                r(text);
                images.iter_mut().for_each(|i| r(&mut i.name));
            }
            EventKind::Queues {
                steering,
                follow_ups,
            } => steering.iter_mut().chain(follow_ups.iter_mut()).for_each(r),
            EventKind::Unqueued { texts } => texts.iter_mut().for_each(r),
            EventKind::RunFinished(RunEnd { outcome }) => match outcome {
                RunOutcome::Answered { text, .. } => r(text),
                RunOutcome::Failed { message } | RunOutcome::LimitReached { message } => r(message),
                RunOutcome::Interrupted => {}
            },
            EventKind::SessionResumed {
                warnings,
                note,
                last_prompt,
                last_answer,
                replay,
                ..
            } => {
                warnings.iter_mut().for_each(r);
                note.iter_mut()
                    .chain(last_prompt.iter_mut())
                    .chain(last_answer.iter_mut())
                    .for_each(r);
                redact_items(replay, secrets);
            }
            EventKind::ModelSwitched { note, .. } => note.iter_mut().for_each(r),
            EventKind::CommandRan(ran) => {
                r(&mut ran.command);
                r(&mut ran.output);
                ran.error.iter_mut().for_each(r);
            }
            EventKind::Jobs { jobs } => jobs.iter_mut().for_each(|j| r(&mut j.command)),
            EventKind::Sessions {
                sessions, warnings, ..
            } => {
                warnings.iter_mut().for_each(r);
                sessions.iter_mut().for_each(|s| r(&mut s.title));
            }
            EventKind::Turns { turns, note } => {
                note.iter_mut().for_each(r);
                for t in turns {
                    r(&mut t.text);
                    t.commands.iter_mut().for_each(r);
                }
            }
            EventKind::Rewound {
                prompt, commands, ..
            } => {
                prompt.iter_mut().for_each(r);
                commands.iter_mut().for_each(r);
            }
            EventKind::Plan { entries } => entries.iter_mut().for_each(|e| r(&mut e.content)),
            EventKind::PlanReady { plan, .. } => r(plan),
            EventKind::ModelRequest { .. }
            | EventKind::PlanMode { .. }
            | EventKind::Usage(_)
            | EventKind::Compacted { .. }
            | EventKind::Status(_)
            | EventKind::TimeoutSet { .. }
            | EventKind::ApprovalPolicyChanged { .. }
            | EventKind::SessionStarted { .. }
            | EventKind::SessionCleared
            | EventKind::SessionForked { .. }
            | EventKind::ShutdownComplete => {}
        }
    }
}

/// Replaces known secrets in replayed items, a sub-agent's included.
fn redact_items(items: &mut [Replayed], secrets: &crate::redact::Secrets) {
    let r = |t: &mut String| secrets.text_in_place(t);
    for item in items {
        match item {
            Replayed::User { text, .. } | Replayed::Tool { text, .. } => r(text),
            Replayed::Assistant { text, calls } => {
                r(text);
                calls.iter_mut().for_each(|c| r(&mut c.arguments));
            }
            Replayed::Subagent { description, items } => {
                r(description);
                redact_items(items, secrets);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    User,
    /// The approval policy (`/approve all`, a window, `--dangerously-auto-approve`).
    Policy,
    Denylist,
    /// A prefix the user allowed earlier with "always" (`always` names it).
    AllowList,
    /// A shell command line that only reads (`ls`, `git status`), approved
    /// without asking (`tools.auto_approve_read_only`).
    ReadOnly,
    /// Nobody can be asked (exec without a terminal).
    NoApprover,
    /// Plan mode refuses whatever is not read-only.
    PlanMode,
    /// The run ended first.
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserVia {
    Prompt,
    Steer,
    FollowUp,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunOutcome {
    Answered {
        text: String,
        /// The model declined: `text` is its refusal, not an answer
        /// (ACP's `refusal` stop reason).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        refused: bool,
    },
    Failed {
        message: String,
    },
    Interrupted,
    /// An execution limit (turns, tokens, time) ended it.
    LimitReached {
        message: String,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Most messages a `SessionResumed` event replays.
pub const REPLAY_MESSAGES: usize = 60;

/// One message of a resumed conversation as a front end replays it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Replayed {
    /// A prompt, or context the user added, as the user typed it
    /// (`!git status` and its exit status, not the output sent to the
    /// model). Context the user never saw (files attached for an `@path`) is
    /// left out; `attached` counts those messages just before this one, so
    /// the items still add up to the messages they stand for.
    User {
        text: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        attached: usize,
    },
    /// An answer (possibly empty) and the tool calls it asked for.
    Assistant {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        calls: Vec<ReplayedCall>,
    },
    /// A tool's result; `name` is the tool that was called.
    Tool { name: String, text: String },
    /// The sub-agent an `agent` call ran, right after that call's result:
    /// its own conversation, as items (its prompt, answers, tool calls).
    Subagent {
        description: String,
        items: Vec<Replayed>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayedCall {
    pub name: String,
    /// The JSON text as the model sent it (string values clipped when long).
    pub arguments: String,
}

/// Most turns a `Turns` reply lists (the latest ones).
pub const MAX_LISTED_TURNS: usize = 50;

/// One turn of the conversation, as a rewind picker lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnSummary {
    /// The id a `Rewind` names.
    pub turn: String,
    /// The user's message as typed, clipped.
    pub text: String,
    /// When it was sent (Unix seconds).
    pub at: u64,
    /// What restoring the code to before this turn would do, per file.
    pub files: Vec<FileRestore>,
    /// Shell commands the model ran since this turn began (clipped; their
    /// effects cannot be rewound).
    pub commands: Vec<String>,
}

/// A command the user ran (`Op::RunCommand`) and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRun {
    pub command: String,
    /// The exit code; absent when it was killed (a signal, the time limit,
    /// `StopCommand`) or could not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// stdout and stderr together, in order, at most
    /// `agent::command::MAX_OUTPUT` bytes (control characters are the front
    /// end's to make safe).
    pub output: String,
    /// Bytes of output beyond that, not kept.
    pub dropped: usize,
    pub timed_out: bool,
    /// Why it could not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `StopCommand` ended it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

/// One saved session, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub id: String,
    /// Unix seconds of the last write.
    pub used: u64,
    pub messages: u64,
    pub model: String,
    /// The first prompt, clipped.
    pub title: String,
    /// The front end of its last turn (`exec`, `repl`, …), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A snapshot for `/status` and `/context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub model: String,
    pub profile: String,
    pub base_url: String,
    pub session: Option<String>,
    pub messages: usize,
    pub context_limit: u64,
    pub context_estimate: u64,
    pub total_prompt_tokens: u64,
    pub total_completion_tokens: u64,
    pub last_prompt_tokens: u64,
    pub last_completion_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// The session's spend in US dollars; null when a price was unknown.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The model runs on this machine and costs nothing.
    #[serde(default)]
    pub local: bool,
    pub policy: ApprovalPolicy,
    /// The run in progress, if any.
    pub running: Option<u64>,
    pub steering: Vec<String>,
    pub follow_ups: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_end_is_matched_to_the_prompt_that_started_it() {
        let mut end = Event::fixture(EventKind::RunFinished(RunEnd {
            outcome: RunOutcome::Interrupted,
        }));
        end.op_id = Some(7);
        assert!(end.ends_run_of(Some(7)));
        assert!(!end.ends_run_of(Some(8)), "another prompt's run");
        assert!(end.ends_run_of(None), "no prompt known: any run's end");
        let other = Event::fixture(EventKind::RunStarted {
            prompt: "hi".into(),
        });
        assert!(!other.ends_run_of(Some(1)));
    }

    #[test]
    fn ops_and_events_round_trip_as_tagged_json() {
        let op = Op::Approve {
            call_id: "c1".into(),
            decision: Decision::Deny {
                reason: Some("no".into()),
            },
        };
        let text = serde_json::to_string(&op).unwrap();
        assert_eq!(
            text,
            r#"{"op":"approve","call_id":"c1","decision":{"decision":"deny","reason":"no"}}"#
        );
        assert_eq!(serde_json::from_str::<Op>(&text).unwrap(), op);
        let ev = Event {
            run: 3,
            seq: 9,
            op_id: None,
            kind: EventKind::TextDelta { text: "hi".into() },
        };
        let text = serde_json::to_string(&ev).unwrap();
        assert_eq!(text, r#"{"run":3,"seq":9,"type":"text_delta","text":"hi"}"#);
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), ev);
        let ev = Event {
            op_id: Some(4),
            ..ev
        };
        let text = serde_json::to_string(&ev).unwrap();
        assert_eq!(
            text,
            r#"{"run":3,"seq":9,"op_id":4,"type":"text_delta","text":"hi"}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), ev);
        let sub = Submission {
            id: 7,
            op: Op::Status,
        };
        let text = serde_json::to_string(&sub).unwrap();
        assert_eq!(text, r#"{"id":7,"op":"status"}"#);
        assert_eq!(serde_json::from_str::<Submission>(&text).unwrap(), sub);
        let policy: ApprovalPolicy =
            serde_json::from_str(r#"{"mode":"until","unix_ms":5}"#).unwrap();
        assert_eq!(policy, ApprovalPolicy::Until { unix_ms: 5 });
    }

    /// The payloads that are named structs serialise as the struct variants
    /// they replaced did: the tag, then the fields, flat.
    #[test]
    fn named_payloads_keep_the_flat_json_of_their_events() {
        let cases = [
            (
                EventKind::Usage(UsageReport {
                    prompt_tokens: 1,
                    completion_tokens: 2,
                    session_total: 3,
                    cost_usd: Some(0.5),
                    ..UsageReport::default()
                }),
                r#"{"type":"usage","prompt_tokens":1,"completion_tokens":2,"cache_read_tokens":0,"cache_write_tokens":0,"session_total":3,"estimated":false,"cost_usd":0.5}"#,
            ),
            (
                EventKind::ApprovalRequested(ApprovalQuestion {
                    call_id: "c".into(),
                    tool: "run_shell".into(),
                    actor: "me@here".into(),
                    command: "ls".into(),
                    detail: None,
                    always: Some("ls".into()),
                    subagent: None,
                }),
                r#"{"type":"approval_requested","call_id":"c","tool":"run_shell","actor":"me@here","command":"ls","always":"ls"}"#,
            ),
            (
                EventKind::ToolResult(ToolCallResult {
                    call_id: "c".into(),
                    name: "run_shell".into(),
                    text: "ok".into(),
                    is_error: false,
                    truncated: None,
                }),
                r#"{"type":"tool_result","call_id":"c","name":"run_shell","text":"ok","is_error":false}"#,
            ),
            (
                EventKind::RunFinished(RunEnd {
                    outcome: RunOutcome::Interrupted,
                }),
                r#"{"type":"run_finished","outcome":{"status":"interrupted"}}"#,
            ),
        ];
        for (kind, json) in cases {
            assert_eq!(serde_json::to_string(&kind).unwrap(), json);
            assert_eq!(serde_json::from_str::<EventKind>(json).unwrap(), kind);
        }
    }
}
