//! The agent loop: owns the conversation history and drives it: ask the model,
//! run the tools it asks for, feed the results back, until it answers. It talks
//! to the model through `ModelClient` and to tools through `ToolRegistry`, reports
//! everything as `AgentEvent`s, and keeps the history valid however a turn ends.

pub mod cancel;
pub mod events;
pub mod prompt;
pub mod tokens;

pub use cancel::Cancel;
pub use events::AgentEvent;
pub use tokens::TokenTracker;

use crate::provider::{ApiError, ModelClient, ModelRequest, StreamEvent};
use crate::tools::{Approval, ApprovalRequest, Approver, CallResult, ToolContext, ToolRegistry};
use crate::wire::{Message, Role, ToolCall, Usage};
use async_trait::async_trait;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};

/// Text of every tool result that never ran because the user cancelled.
pub const CANCELLED: &str = "operation cancelled by user";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentError {
    Api(ApiError),
    /// The model kept calling tools past the iteration cap.
    MaxIterations(u32),
    Cancelled,
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::Api(e) => write!(f, "{e}"),
            AgentError::MaxIterations(n) => write!(
                f,
                "stopped after {n} model calls without a final answer (raise agent.max_iterations to allow more)"
            ),
            AgentError::Cancelled => write!(f, "{CANCELLED}"),
        }
    }
}

impl std::error::Error for AgentError {}

impl From<ApiError> for AgentError {
    fn from(e: ApiError) -> Self {
        AgentError::Api(e)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct AgentOptions {
    pub max_iterations: u32,
    pub parallel_tools: bool,
    pub context_limit: u64,
}

pub type EventSender = mpsc::UnboundedSender<AgentEvent>;

/// Where the agent hands its history for safe keeping (a session journal). It
/// is called whenever messages were added: after the prompt, after each model
/// reply, after each batch of tool results, and once more when the turn ends
/// (`turn_end`), which is when the sink should make everything durable.
pub trait HistorySink: Send {
    /// `new` holds the messages added since the last successful call, oldest first.
    fn save(
        &mut self,
        new: &[Message],
        tokens: &TokenTracker,
        turn_end: bool,
    ) -> Result<(), String>;

    /// The model the next turns run on (after a switch), for the record.
    fn set_model(&mut self, _model: &str, _profile: &str) {}
}

pub struct Agent {
    client: Arc<dyn ModelClient>,
    tools: Arc<ToolRegistry>,
    tool_ctx: ToolContext,
    options: AgentOptions,
    messages: Vec<Message>,
    tracker: TokenTracker,
    events: EventSender,
    sink: Option<Box<dyn HistorySink>>,
    /// Messages before this index have reached the sink (or never go to it).
    saved: usize,
    /// Saving failed and the user was told; later failures stay quiet.
    save_failing: bool,
}

impl Agent {
    pub fn new(
        client: Arc<dyn ModelClient>,
        tools: ToolRegistry,
        options: AgentOptions,
        system_prompt: Option<String>,
        cwd: PathBuf,
        events: EventSender,
    ) -> Self {
        let approver = Arc::new(EventApprover {
            events: events.clone(),
            one_at_a_time: Mutex::new(()),
        });
        let mut messages = Vec::new();
        if let Some(p) = system_prompt.filter(|p| !p.trim().is_empty()) {
            messages.push(Message::system(p));
        }
        // The system prompt is rebuilt at every start, so it is never saved.
        let saved = messages.len();
        Agent {
            client,
            tools: Arc::new(tools),
            tool_ctx: ToolContext::local(cwd, approver),
            tracker: TokenTracker::new(options.context_limit),
            options,
            messages,
            events,
            sink: None,
            saved,
            save_failing: false,
        }
    }

    /// Talks to another model from the next request on (a `/model` switch);
    /// the history carries over.
    pub fn set_client(&mut self, client: Arc<dyn ModelClient>, context_limit: u64) {
        self.client = client;
        self.tracker.context_limit = context_limit;
    }

    /// Runs tools on `target` from now on (SSH, a container).
    pub fn set_target(&mut self, target: Arc<dyn crate::target::Target>) {
        self.tool_ctx.target = target;
    }

    /// Tells the history sink which model the next turns use.
    pub fn note_model(&mut self, model: &str, profile: &str) {
        if let Some(sink) = self.sink.as_mut() {
            sink.set_model(model, profile);
        }
    }

    /// Drops the conversation (a new session); the system prompt stays.
    pub fn reset(&mut self) {
        let base = usize::from(
            self.messages
                .first()
                .is_some_and(|m| m.role == Role::System),
        );
        self.messages.truncate(base);
        self.saved = base;
        self.tracker = TokenTracker::new(self.tracker.context_limit);
        self.sink = None;
    }

    /// Sends every message added from now on to `sink`.
    pub fn set_history_sink(&mut self, sink: Box<dyn HistorySink>) {
        self.sink = Some(sink);
    }

    /// Continues an earlier conversation: `history` follows the current system
    /// prompt and the token totals are taken over. The first `already_saved`
    /// messages came from the sink's own store; any after them (repairs made on
    /// load) are saved with the next turn.
    pub fn restore(&mut self, history: Vec<Message>, tokens: TokenTracker, already_saved: usize) {
        let base = usize::from(
            self.messages
                .first()
                .is_some_and(|m| m.role == Role::System),
        );
        self.messages.truncate(base);
        self.messages.extend(history);
        self.saved = base + already_saved.min(self.messages.len() - base);
        self.tracker = TokenTracker {
            context_limit: self.tracker.context_limit,
            ..tokens
        };
    }

    /// Hands unsaved messages to the sink. A failure is reported once and the
    /// messages stay pending, so a later save (the disk has room again) catches up.
    fn persist(&mut self, turn_end: bool) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        if self.saved == self.messages.len() && !turn_end {
            return;
        }
        match sink.save(&self.messages[self.saved..], &self.tracker, turn_end) {
            Ok(()) => {
                self.saved = self.messages.len();
                self.save_failing = false;
            }
            Err(e) => {
                if !self.save_failing {
                    self.save_failing = true;
                    let _ = self
                        .events
                        .send(AgentEvent::Warning(format!("session not saved: {e}")));
                }
            }
        }
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn tracker(&self) -> &TokenTracker {
        &self.tracker
    }

    fn emit(&self, event: AgentEvent) {
        // A front end that stopped listening must not stop the loop.
        let _ = self.events.send(event);
    }

    /// Runs one user turn to its end and reports it as `Finished` on the event
    /// stream, returning the same outcome.
    pub async fn run_turn(&mut self, prompt: &str, cancel: Cancel) -> Result<String, AgentError> {
        let outcome = self.send(prompt, cancel).await;
        self.emit(AgentEvent::Finished(outcome.clone()));
        outcome
    }

    /// Pushes `prompt` and loops until the model answers without tool calls.
    /// However the turn ends, what it added is handed to the history sink.
    pub async fn send(&mut self, prompt: &str, cancel: Cancel) -> Result<String, AgentError> {
        let outcome = self.converse(prompt, cancel).await;
        self.persist(true);
        outcome
    }

    async fn converse(&mut self, prompt: &str, mut cancel: Cancel) -> Result<String, AgentError> {
        if cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        self.messages.push(Message::user(prompt));
        self.persist(false);
        let mut warned = false;
        for iteration in 1..=self.options.max_iterations {
            if !warned {
                warned = self.warn_if_context_full();
            }
            self.emit(AgentEvent::WaitingForModel { iteration });
            let events = self.events.clone();
            let sink = move |ev: StreamEvent| {
                let _ = events.send(match ev {
                    StreamEvent::Text(t) => AgentEvent::TextDelta(t),
                    StreamEvent::Reasoning { field, text } => AgentEvent::Reasoning { field, text },
                    StreamEvent::Retrying {
                        attempt,
                        max_retries,
                        delay,
                        error,
                    } => AgentEvent::Retrying {
                        attempt,
                        max_retries,
                        delay,
                        error,
                    },
                });
            };
            let request = ModelRequest {
                messages: &self.messages,
                tools: self.tools.definitions(),
            };
            let response = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(AgentError::Cancelled),
                r = self.client.complete(request, &sink) => r?,
            };
            self.record_usage(response.usage.as_ref(), &response.message);
            if let Some(reason) = &response.cut_off {
                self.emit(AgentEvent::Warning(format!(
                    "the model stopped at its output limit ({reason}); the answer may be cut short (raise max_tokens in the profile)"
                )));
            }
            let mut message = response.message;
            message.role = Role::Assistant;
            let calls = message.calls().to_vec();
            self.messages.push(message);
            self.persist(false);
            if calls.is_empty() {
                let text = self
                    .messages
                    .last()
                    .map(|m| m.text().to_string())
                    .unwrap_or_default();
                return Ok(text);
            }
            self.run_tools(&calls, &mut cancel).await?;
        }
        Err(AgentError::MaxIterations(self.options.max_iterations))
    }

    fn warn_if_context_full(&self) -> bool {
        let estimate = tokens::estimate_messages(&self.messages)
            + self
                .tools
                .definitions()
                .iter()
                .map(|d| tokens::estimate_text(&d.function.description) + 32)
                .sum::<u64>();
        // The server's own count of the last request, when known, beats the heuristic.
        let reported = self.tracker.last_prompt_tokens + self.tracker.last_completion_tokens;
        let estimate = estimate.max(reported);
        let fill = self.tracker.fill(estimate);
        if fill >= tokens::WARN_FRACTION {
            self.emit(AgentEvent::Warning(format!(
                "context is {:.0}% full (~{} of {} tokens); the model may start to lose earlier parts of the conversation",
                fill * 100.0,
                estimate,
                self.tracker.context_limit
            )));
            return true;
        }
        false
    }

    fn record_usage(&mut self, usage: Option<&Usage>, reply: &Message) {
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
        self.emit(AgentEvent::Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cache_read_tokens: read,
            cache_write_tokens: write,
            session_total: self.tracker.session_total(),
            estimated,
        });
    }

    /// Runs one batch of tool calls and pushes one result per call, in request
    /// order, whatever happens, so the history always pairs every call. Results
    /// are pushed and saved as soon as every earlier call has its own, so a crash
    /// mid-batch loses only the calls still running.
    async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        cancel: &mut Cancel,
    ) -> Result<(), AgentError> {
        for c in calls {
            self.emit(AgentEvent::ToolCall {
                id: c.id.clone(),
                name: c.function.name.clone(),
                arguments: c.function.arguments.clone(),
            });
        }
        let mut batch = Batch {
            calls,
            results: vec![None; calls.len()],
            pushed: 0,
        };
        let cancelled = if self.options.parallel_tools && calls.len() > 1 {
            self.run_parallel(&mut batch, cancel).await
        } else {
            self.run_sequential(&mut batch, cancel).await
        };
        // Calls that never finished (cancelled) still get their result.
        for r in batch.results.iter_mut().skip(batch.pushed) {
            r.get_or_insert_with(|| CallResult {
                text: CANCELLED.to_string(),
                is_error: true,
                truncated: None,
            });
        }
        self.push_finished(&mut batch);
        if cancelled {
            return Err(AgentError::Cancelled);
        }
        Ok(())
    }

    /// Pushes the results of the longest run of finished calls not yet pushed.
    fn push_finished(&mut self, batch: &mut Batch<'_>) {
        let before = batch.pushed;
        while batch.pushed < batch.calls.len() {
            let Some(r) = batch.results[batch.pushed].take() else {
                break;
            };
            let id = &batch.calls[batch.pushed].id;
            self.messages.push(Message::tool_result(id, r.text));
            batch.pushed += 1;
        }
        if batch.pushed > before {
            self.persist(false);
        }
    }

    async fn run_sequential(&mut self, batch: &mut Batch<'_>, cancel: &mut Cancel) -> bool {
        for (i, call) in batch.calls.iter().enumerate() {
            let fut = self.tools.call(
                &call.function.name,
                &call.function.arguments,
                &self.tool_ctx,
            );
            let r = tokio::select! {
                biased;
                _ = cancel.cancelled() => return true,
                r = fut => r,
            };
            self.report(call, &r);
            batch.results[i] = Some(r);
            self.push_finished(batch);
        }
        false
    }

    async fn run_parallel(&mut self, batch: &mut Batch<'_>, cancel: &mut Cancel) -> bool {
        let mut set = tokio::task::JoinSet::new();
        for (i, call) in batch.calls.iter().enumerate() {
            let tools = Arc::clone(&self.tools);
            let ctx = self.tool_ctx.clone();
            let name = call.function.name.clone();
            let args = call.function.arguments.clone();
            set.spawn(async move { (i, tools.call(&name, &args, &ctx).await) });
        }
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    // Dropping the set aborts the tasks; their children die with them.
                    set.abort_all();
                    return true;
                }
                n = set.join_next() => n,
            };
            match next {
                None => return false,
                Some(Ok((i, r))) => {
                    self.report(&batch.calls[i], &r);
                    batch.results[i] = Some(r);
                    self.push_finished(batch);
                }
                Some(Err(e)) => {
                    // A tool panicked: say so instead of losing the pairing.
                    self.emit(AgentEvent::Warning(format!("a tool task failed: {e}")));
                }
            }
        }
    }

    fn report(&self, call: &ToolCall, r: &CallResult) {
        if let Some(t) = r.truncated {
            self.emit(AgentEvent::Warning(format!(
                "{} output truncated: kept {} of {} characters",
                call.function.name, t.kept, t.total
            )));
        }
        self.emit(AgentEvent::ToolResult {
            id: call.id.clone(),
            name: call.function.name.clone(),
            text: r.text.clone(),
            is_error: r.is_error,
            truncated: r.truncated,
        });
    }
}

/// One batch of tool calls in flight: results by request position, and how
/// many of them are already in the history.
struct Batch<'a> {
    calls: &'a [ToolCall],
    results: Vec<Option<CallResult>>,
    pushed: usize,
}

/// Fills in a result for every tool call that has none, so a history cut off
/// mid-batch (cancellation, a crash) is one a provider will accept.
pub fn repair_history(messages: &mut Vec<Message>) -> usize {
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
                messages.insert(j, Message::tool_result(id.clone(), CANCELLED));
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

/// Asks the front end through the event stream, one request at a time.
struct EventApprover {
    events: EventSender,
    one_at_a_time: Mutex<()>,
}

#[async_trait]
impl Approver for EventApprover {
    async fn approve(&self, request: ApprovalRequest) -> Approval {
        let _turn = self.one_at_a_time.lock().await;
        let (reply, answer) = oneshot::channel();
        if self
            .events
            .send(AgentEvent::ApprovalNeeded { request, reply })
            .is_err()
        {
            return Approval::Denied {
                reason: "no one is available to approve it".into(),
            };
        }
        answer.await.unwrap_or(Approval::Denied {
            reason: "the approval request was dropped".into(),
        })
    }
}

#[cfg(test)]
mod tests;
