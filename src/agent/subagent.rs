//! Sub-agents: the `agent` tool. A call runs a child agent on the parent's
//! model, target, sandbox and approvals, with a history of its own (the
//! system prompt and the child's prompt, never the parent's conversation),
//! and the child's final answer is the call's result.
//!
//! The child is an `Agent` like its parent, run inside the parent's tool
//! round (`tool_round.rs` hands it the `agent` calls): its events reach the
//! parent's stream wrapped as `EventKind::Subagent` with the parent's call
//! id; its approvals go to the parent's approver with the child named
//! (`Approver::approve_for`) and its call id prefixed with the parent's, so
//! two children's questions never share an id; its messages reach the
//! parent, which journals them under the call (`HistorySink::subagent`);
//! its usage is summed for the parent (`Spend`), which counts it toward its
//! own totals, cost and limits. Cancelling the parent drops the child's
//! task, and with it the child's model stream and tools.
//!
//! Not here: when calls run (the tool round), the journal format
//! (`session/journal.rs`), how front ends fold a child (`ui/`).

use super::allowlist::SharedAllowList;
use super::cancel::Cancel;
use super::control::{ApprovalRules, Control};
use super::emitter::{Emitter, EVENT_CAPACITY};
use super::protocol::{EventKind, QueueMode, RunEnd, RunOutcome, SubagentEvent, UsageReport};
use super::{Agent, AgentOptions, HistorySink, HostedError, Limits, ModelInfo, TokenTracker};
use crate::provider::ModelClient;
use crate::tools::{
    Approval, ApprovalRequest, Approver, CallResult, Tool, ToolContext, ToolError, ToolOutput,
    ToolRegistry,
};
use crate::wire::{Message, ToolDefinition};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, Semaphore};

/// The tool's name, as the model calls it.
pub const TOOL_NAME: &str = "agent";

/// The tools a read-only child gets (`"tools": "read-only"`, the default):
/// those that only read files, search or look things up.
pub const READ_ONLY_TOOLS: &[&str] = &[
    "read_file",
    "glob",
    "grep",
    "time",
    "skill",
    "fetch_url",
    "web_search",
    "capture-pane",
];

/// Most characters of a child's answer the parent's model gets.
pub const MAX_ANSWER_CHARS: usize = 30_000;

/// What the children of an agent may do (`[agent] subagent_*` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentOptions {
    /// Model requests per child run.
    pub max_turns: u32,
    /// Tokens per child run.
    pub max_tokens: u64,
    /// Children of one reply running at the same time.
    pub max_parallel: usize,
    /// Generations allowed below this agent (0: no `agent` tool).
    pub depth: u32,
}

impl SubagentOptions {
    /// No children (an agent built by hand, a child at the last depth).
    pub const OFF: SubagentOptions = SubagentOptions {
        max_turns: 0,
        max_tokens: 0,
        max_parallel: 0,
        depth: 0,
    };

    pub fn enabled(&self) -> bool {
        self.depth > 0 && self.max_parallel > 0 && self.max_turns > 0
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// A few words saying what the sub-agent is for (shown to the user).
    description: String,
    /// The whole task for the sub-agent: it sees nothing of this
    /// conversation, only this text.
    prompt: String,
    /// "read-only" (the default): tools that only read and search; "all":
    /// every tool, writes and commands included (asked for as usual).
    #[serde(default)]
    tools: Access,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
enum Access {
    #[default]
    ReadOnly,
    All,
}

/// The tool as the model is offered it. Its calls never reach `execute`:
/// the tool round runs them as children (`ChildRun`).
pub(super) struct AgentTool;

#[async_trait]
impl Tool for AgentTool {
    fn name(&self) -> &'static str {
        TOOL_NAME
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            TOOL_NAME,
            "Hand a self-contained task to a sub-agent with a fresh context and get its final answer back. \
             The sub-agent sees only `prompt`, so say everything it needs. Several calls in one reply run at the same time. \
             Use it for research across many files or independent parts of a task.",
            crate::tools::schema::of::<Args>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        MAX_ANSWER_CHARS
    }

    async fn execute(&self, _args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed(
            "the agent tool runs only inside an agent's tool round".into(),
        ))
    }
}

/// The children's spend, summed from their `Usage` events until the parent
/// takes it.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Spend {
    pub prompt: u64,
    pub completion: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cost_nanos: u64,
    pub cost_unknown: bool,
}

impl Spend {
    fn add(&mut self, u: &UsageReport) {
        self.prompt += u.prompt_tokens;
        self.completion += u.completion_tokens;
        self.cache_read += u.cache_read_tokens;
        self.cache_write += u.cache_write_tokens;
        match u.cost_usd {
            Some(c) => self.cost_nanos += super::tokens::usd_to_nanos(c),
            None => self.cost_unknown = true,
        }
    }
}

/// Messages a child added, for the parent to journal under `call_id`.
pub(super) struct ChildRecord {
    pub call_id: String,
    pub messages: Vec<Message>,
}

/// What an agent shares with all its children.
#[derive(Clone)]
pub(super) struct Children {
    /// `max_parallel` permits: a child runs while it holds one.
    slots: Arc<Semaphore>,
    spend: Arc<Mutex<Spend>>,
    records: mpsc::UnboundedSender<ChildRecord>,
}

impl Children {
    /// The shared state and the receiving end of the children's records.
    pub(super) fn new(
        options: SubagentOptions,
    ) -> (Children, mpsc::UnboundedReceiver<ChildRecord>) {
        let (records, rx) = mpsc::unbounded_channel();
        (
            Children {
                slots: Arc::new(Semaphore::new(options.max_parallel.max(1))),
                spend: Arc::default(),
                records,
            },
            rx,
        )
    }

    fn spend(&self) -> std::sync::MutexGuard<'_, Spend> {
        // Plain sums: a panic elsewhere cannot leave them half-changed.
        self.spend.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One `agent` call, ready to run as a task of the tool round.
pub(super) struct ChildRun {
    client: Arc<dyn ModelClient>,
    tools: Arc<ToolRegistry>,
    ctx: ToolContext,
    options: AgentOptions,
    system_prompt: Option<String>,
    model: ModelInfo,
    parent: Emitter,
    children: Children,
    hooks: Option<Arc<super::hooks::HookRunner>>,
}

impl Agent {
    /// The child for an `agent` call, when this agent may have children.
    pub(super) fn child_run(&self, ctx: ToolContext) -> Option<ChildRun> {
        let children = self.children.clone()?;
        let system_prompt = self
            .messages
            .first()
            .filter(|m| m.role == crate::wire::Role::System)
            .map(|m| m.text().to_string());
        Some(ChildRun {
            client: self.client.clone(),
            tools: self.tools.clone(),
            ctx,
            options: self.options,
            system_prompt,
            model: self.model.clone(),
            parent: self.emitter.clone(),
            children,
            hooks: self.hooks.clone(),
        })
    }

    /// Hands the children's messages recorded so far to the sink.
    pub(super) fn save_child_records(
        &mut self,
        rx: &mut Option<mpsc::UnboundedReceiver<ChildRecord>>,
    ) -> Result<(), HostedError> {
        let Some(rx) = rx.as_mut() else {
            return Ok(());
        };
        while let Ok(record) = rx.try_recv() {
            self.save_child_record(record)?;
        }
        Ok(())
    }

    pub(super) fn save_child_record(&mut self, record: ChildRecord) -> Result<(), HostedError> {
        match self.sink.as_mut() {
            Some(sink) => sink.subagent(&record.call_id, &record.messages),
            None => Ok(()),
        }
    }

    /// Counts what the children spent since the last call toward this
    /// agent's totals (one `Usage` event says so); returns the tokens and
    /// the cost in nanodollars, for the run's limits.
    pub(super) async fn take_child_spend(&mut self) -> (u64, u64) {
        let Some(children) = &self.children else {
            return (0, 0);
        };
        let spend = std::mem::take(&mut *children.spend());
        if spend == Spend::default() {
            return (0, 0);
        }
        let t = &mut self.tracker;
        // Not `record`: the last request's counts stay the parent's own,
        // since they measure the parent's context.
        t.total_prompt_tokens += spend.prompt;
        t.total_completion_tokens += spend.completion;
        t.record_cache(spend.cache_read, spend.cache_write);
        let cost = (!spend.cost_unknown).then(|| super::tokens::nanos_to_usd(spend.cost_nanos));
        t.record_cost(cost);
        self.emit(EventKind::Usage(UsageReport {
            prompt_tokens: spend.prompt,
            completion_tokens: spend.completion,
            cache_read_tokens: spend.cache_read,
            cache_write_tokens: spend.cache_write,
            session_total: self.tracker.session_total(),
            estimated: false,
            cost_usd: cost,
            session_cost_usd: self.tracker.session_cost_usd(),
            local: self.model.pricing == super::tokens::Pricing::Local,
        }))
        .await;
        (spend.prompt + spend.completion, spend.cost_nanos)
    }
}

impl ChildRun {
    /// Runs the child for the call `ctx.call_id` with the model's raw
    /// arguments and returns its answer as the call's result. Boxed as
    /// `Send` by name: a child's run holds a tool round that may hold a
    /// child's run, a cycle the compiler cannot see through.
    pub(super) fn run(
        self,
        raw_args: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = CallResult> + Send>> {
        Box::pin(self.run_child(raw_args))
    }

    async fn run_child(self, raw_args: String) -> CallResult {
        let args: Args = match serde_json::from_str(&raw_args) {
            Ok(a) => a,
            Err(e) => {
                return failed(format!(
                    "invalid arguments: {e}; send {{\"description\": \"…\", \"prompt\": \"…\"}}"
                ))
            }
        };
        let ChildRun {
            client,
            tools,
            mut ctx,
            options,
            system_prompt,
            model,
            parent,
            children,
            hooks,
        } = self;
        // Closed never: the semaphore lives as long as `children`.
        let Ok(_slot) = children.slots.clone().acquire_owned().await else {
            return failed("no sub-agent could start".into());
        };
        let all = args.tools == Access::All;
        let registry = tools.filtered(
            |name| name != TOOL_NAME && (all || READ_ONLY_TOOLS.contains(&name)),
            all,
        );
        let sub = options.subagents;
        let child_options = AgentOptions {
            limits: Limits {
                max_turns: sub.max_turns,
                max_total_tokens: Some(sub.max_tokens),
                max_duration: options.limits.max_duration,
                // The parent checks its cost, the children's included.
                max_cost_usd: None,
            },
            subagents: SubagentOptions {
                depth: sub.depth.saturating_sub(1),
                ..sub
            },
            ..options
        };
        let call_id = ctx.call_id.clone();
        let description = crate::text::one_line(&args.description, 80);
        ctx.approver = Arc::new(ChildApprover {
            inner: ctx.approver.clone(),
            name: description.clone(),
            call_id: call_id.clone(),
        });
        let (tx, mut rx) = mpsc::channel(EVENT_CAPACITY);
        let emitter = Emitter::new(tx);
        let control = Control::new(
            emitter.clone(),
            ApprovalRules::default(),
            SharedAllowList::default(),
            QueueMode::OneAtATime,
            QueueMode::OneAtATime,
        );
        let checkpoints = ctx.checkpoints.clone();
        let turn = ctx.turn.clone();
        let mut child = Agent::new(
            client,
            registry,
            ctx,
            child_options,
            system_prompt,
            model,
            emitter,
            control,
        );
        child.sink = Some(Box::new(ChildSink {
            call_id: call_id.clone(),
            records: children.records.clone(),
        }));
        // A child's file changes are kept in the parent's store, under the
        // parent's turn.
        child.tool_ctx.checkpoints = checkpoints;
        child.parent_turn = Some(turn);
        // The user's PreToolUse and PostToolUse hooks see a child's calls
        // as they see the parent's (`hooks_for` keeps the rest away).
        child.hooks = hooks;
        let run = async move {
            // The parent stops a child by dropping this task, not by this
            // handle; it only has to outlive the run.
            let (_handle, cancel) = Cancel::new();
            let outcome = child.run(args.prompt, cancel).await;
            drop(child);
            outcome
        };
        let forward = async {
            while let Some(event) = rx.recv().await {
                if let EventKind::Usage(u) = &event.kind {
                    children.spend().add(u);
                }
                parent
                    .emit(EventKind::Subagent(SubagentEvent {
                        call_id: call_id.clone(),
                        description: description.clone(),
                        event: Box::new(event.kind),
                    }))
                    .await;
            }
        };
        let (outcome, ()) = tokio::join!(run, forward);
        // The child's run is not a service's, which would say how it ended:
        // front ends learn it here, before the call's result.
        parent
            .emit(EventKind::Subagent(SubagentEvent {
                call_id,
                description,
                event: Box::new(EventKind::RunFinished(RunEnd {
                    outcome: outcome.clone(),
                })),
            }))
            .await;
        match outcome {
            RunOutcome::Answered { text, .. } => {
                let (text, truncated) = crate::tools::truncate(&text, MAX_ANSWER_CHARS);
                let text = match truncated {
                    Some(t) => format!("{text}\n{}", crate::tools::marker(t)),
                    None => text,
                };
                CallResult {
                    text,
                    is_error: false,
                    truncated,
                }
            }
            RunOutcome::Failed { message } => failed(format!("the sub-agent failed: {message}")),
            RunOutcome::LimitReached { message } => {
                failed(format!("the sub-agent stopped: {message}"))
            }
            RunOutcome::Interrupted => failed(super::CANCELLED.into()),
        }
    }
}

fn failed(text: String) -> CallResult {
    CallResult {
        text,
        is_error: true,
        truncated: None,
    }
}

/// A child's approvals: the parent's approver, asked with the child named
/// and the child's call id under the parent's (`parent/child`).
struct ChildApprover {
    inner: Arc<dyn Approver>,
    name: String,
    call_id: String,
}

#[async_trait]
impl Approver for ChildApprover {
    async fn approve(&self, request: ApprovalRequest) -> Approval {
        self.approve_for(request, None).await
    }

    async fn approve_for(&self, mut request: ApprovalRequest, subagent: Option<&str>) -> Approval {
        request.call_id = format!("{}/{}", self.call_id, request.call_id);
        let name = match subagent {
            Some(inner) => format!("{} > {inner}", self.name),
            None => self.name.clone(),
        };
        self.inner.approve_for(request, Some(&name)).await
    }

    /// The child's server asks through the parent, the child named.
    async fn elicit(
        &self,
        mut question: crate::tools::elicitation::Question,
        wait: std::time::Duration,
    ) -> crate::tools::elicitation::Outcome {
        question.call_id = format!("{}/{}", self.call_id, question.call_id);
        question.subagent = Some(match question.subagent.take() {
            Some(inner) => format!("{} > {inner}", self.name),
            None => self.name.clone(),
        });
        self.inner.elicit(question, wait).await
    }
}

/// A child's history sink: its messages go to the parent, which journals
/// them under the call (one writer per session file).
struct ChildSink {
    call_id: String,
    records: mpsc::UnboundedSender<ChildRecord>,
}

impl HistorySink for ChildSink {
    fn save(
        &mut self,
        new: &[Message],
        _tokens: &TokenTracker,
        _turn_end: bool,
    ) -> Result<(), HostedError> {
        if new.is_empty() {
            return Ok(());
        }
        // The parent outlives its children's tasks; a closed channel means
        // the parent is gone and nothing is left to save into.
        let _ = self.records.send(ChildRecord {
            call_id: self.call_id.clone(),
            messages: new.to_vec(),
        });
        Ok(())
    }

    /// A grandchild's messages (with `subagent_depth` above 1) go the same
    /// way, under the two calls joined as `CHILD_CALL/ITS_CALL`, so the
    /// session's one journal keeps every generation under its own call.
    fn subagent(&mut self, call_id: &str, new: &[Message]) -> Result<(), HostedError> {
        if new.is_empty() {
            return Ok(());
        }
        let _ = self.records.send(ChildRecord {
            call_id: format!("{}/{call_id}", self.call_id),
            messages: new.to_vec(),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps what it was asked, approves.
    #[derive(Default)]
    struct Recording(Mutex<Vec<(String, Option<String>)>>);

    #[async_trait]
    impl Approver for Recording {
        async fn approve(&self, request: ApprovalRequest) -> Approval {
            self.approve_for(request, None).await
        }
        async fn approve_for(&self, request: ApprovalRequest, who: Option<&str>) -> Approval {
            let mut asked = self.0.lock().unwrap_or_else(|p| p.into_inner());
            asked.push((request.call_id, who.map(str::to_string)));
            Approval::Approved
        }
    }

    fn request(id: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: id.into(),
            tool: "run_shell".into(),
            actor: "me@here".into(),
            command: "make".into(),
            detail: None,
            read_only: false,
        }
    }

    #[tokio::test]
    async fn a_childs_question_names_it_and_nests_its_call_id() {
        let parent = Arc::new(Recording::default());
        let child = ChildApprover {
            inner: parent.clone(),
            name: "build it".into(),
            call_id: "p1".into(),
        };
        assert_eq!(child.approve(request("c1")).await, Approval::Approved);
        // A grandchild asks through its parent's approver.
        let grandchild = ChildApprover {
            inner: Arc::new(child),
            name: "run tests".into(),
            call_id: "c2".into(),
        };
        grandchild.approve(request("g1")).await;
        let asked = parent.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(
            asked,
            [
                ("p1/c1".to_string(), Some("build it".to_string())),
                (
                    "p1/c2/g1".to_string(),
                    Some("build it > run tests".to_string())
                ),
            ]
        );
    }

    #[test]
    fn a_read_only_child_gets_only_the_tools_that_read() {
        let mut reg = ToolRegistry::new();
        reg.register(Arc::new(crate::tools::time::TimeTool));
        reg.register(Arc::new(AgentTool));
        let read_only = reg.filtered(
            |name| name != TOOL_NAME && READ_ONLY_TOOLS.contains(&name),
            false,
        );
        assert_eq!(read_only.names(), ["time"]);
    }

    #[test]
    fn the_options_off_offer_no_children() {
        assert!(!SubagentOptions::OFF.enabled());
        let one = SubagentOptions {
            max_turns: 20,
            max_tokens: 1000,
            max_parallel: 4,
            depth: 1,
        };
        assert!(one.enabled());
        assert!(!SubagentOptions { depth: 0, ..one }.enabled());
    }
}
