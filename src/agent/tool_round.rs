//! The tool round: one model reply's tool calls run and answered. The calls
//! are announced, run in batches as the tool strategy says (all at once, one
//! by one, or N at a time) with the user's `PreToolUse`/`PostToolUse` hooks
//! around each, and raced against cancellation and the run's deadline. Every
//! call gets exactly one result, pushed in request order and saved as soon as
//! every earlier call has its own; calls cut off by a stop or skipped by a
//! steering message get a filler result. Approvals are asked by the tools
//! themselves through `control`; this file only drops the waiting ones when
//! the round stops. The loop that calls it is `agent/mod.rs`.

use super::control::SKIPPED_FOR_STEER;
use super::hooks::{About, HookEvent, HookRunner, Verdict};
use super::protocol::ToolCallResult;
use super::Cancel;
use super::{stop_signal, Agent, EventKind, Stop, ToolStrategy, CANCELLED, TIME_LIMIT_RESULT};
use crate::tools::{CallResult, ToolContext, ToolRegistry};
use crate::wire::{Message, ToolCall};
use std::sync::Arc;
use tokio::time::Instant;

/// How a batch of tool calls ended.
pub(super) enum ToolsEnd {
    Done,
    Stopped(Stop),
}

/// One reply's tool calls in flight: results by request position, and how
/// many of them are already in the history.
struct Batch<'a> {
    calls: &'a [ToolCall],
    results: Vec<Option<CallResult>>,
    pushed: usize,
}

impl Agent {
    /// Runs one reply's tool calls and pushes one result per call, in request
    /// order, whatever happens, so the history always pairs every call.
    /// Results are pushed and saved as soon as every earlier call has its own,
    /// so a crash mid-batch loses only the calls still running. A steering
    /// message lets the running calls finish and skips the rest.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        cancel: &mut Cancel,
        deadline: Option<Instant>,
    ) -> ToolsEnd {
        for c in calls {
            self.emit(EventKind::ToolCall {
                call_id: c.id.clone(),
                name: c.function.name.clone(),
                arguments: c.function.arguments.clone(),
            })
            .await;
        }
        let mut batch = Batch {
            calls,
            results: vec![None; calls.len()],
            pushed: 0,
        };
        let size = match self.options.strategy {
            ToolStrategy::Parallel => calls.len(),
            ToolStrategy::Sequential => 1,
            ToolStrategy::Batched(n) => n.max(1),
        }
        .max(1);
        let mut start = 0;
        let mut stopped = None;
        let mut steered = false;
        while start < calls.len() && stopped.is_none() && !steered {
            let end = (start + size).min(calls.len());
            match self
                .run_batch(&mut batch, start..end, cancel, deadline)
                .await
            {
                Ok(s) => steered = s,
                Err(stop) => stopped = Some(stop),
            }
            start = end;
        }
        // Calls that never finished or never started still get their result.
        let filler = match stopped {
            Some(Stop::Interrupted) => CANCELLED,
            Some(Stop::TimeLimit | Stop::Timeout) => TIME_LIMIT_RESULT,
            None => SKIPPED_FOR_STEER,
        };
        for (i, call) in calls.iter().enumerate().skip(batch.pushed) {
            if batch.results[i].is_none() {
                let r = CallResult {
                    text: filler.to_string(),
                    is_error: true,
                    truncated: None,
                };
                self.report(call, &r).await;
                batch.results[i] = Some(r);
            }
        }
        self.push_finished(&mut batch).await;
        match stopped {
            Some(stop) => ToolsEnd::Stopped(stop),
            None => ToolsEnd::Done,
        }
    }

    /// Runs `range` of the calls at once. `Ok(true)` when a steering message
    /// arrived meanwhile (the batch still ran to its end).
    async fn run_batch(
        &mut self,
        batch: &mut Batch<'_>,
        range: std::ops::Range<usize>,
        cancel: &mut Cancel,
        deadline: Option<Instant>,
    ) -> Result<bool, Stop> {
        if let Some(sink) = self.sink.as_mut() {
            let ids: Vec<&str> = batch.calls[range.clone()]
                .iter()
                .map(|c| c.id.as_str())
                .collect();
            // Written before anything runs, so a resume after a kill can tell
            // a call that may have run from one that never started.
            if let Err(e) = sink.tools_started(&ids) {
                if !self.save_failing {
                    self.save_failing = true;
                    self.warn(format!("session not saved: {e}")).await;
                }
            }
        }
        let mut set = tokio::task::JoinSet::new();
        for i in range {
            let call = &batch.calls[i];
            let tools = Arc::clone(&self.tools);
            let mut ctx = self.tool_ctx.clone();
            ctx.call_id = call.id.clone();
            ctx.turn = self
                .parent_turn
                .clone()
                .unwrap_or_else(|| self.turn.clone());
            ctx.progress = Some(self.progress_sink(&call.id));
            let name = call.function.name.clone();
            let args = call.function.arguments.clone();
            if name == super::subagent::TOOL_NAME {
                if let Some(child) = self.child_run(ctx.clone()) {
                    let run = child.run(args);
                    set.spawn(async move { (i, run.await) });
                    continue;
                }
            }
            let hooks = self.hooks.clone();
            set.spawn(async move {
                (
                    i,
                    call_hooked(&tools, hooks.as_deref(), &name, &args, &ctx).await,
                )
            });
        }
        let mut steered = false;
        // Taken for the round, so its wait can sit beside the others.
        let mut records = self.child_records.take();
        let end = loop {
            let next = tokio::select! {
                biased;
                stop = stop_signal(cancel, deadline) => {
                    // Aborting the tasks drops their children (kill_on_drop),
                    // sub-agents with their model streams too.
                    set.abort_all();
                    self.control.drop_waiting();
                    break Err(stop);
                }
                record = next_record(&mut records) => {
                    let saved = self.save_child_record(record);
                    self.child_saved(saved).await;
                    continue;
                }
                n = set.join_next() => n,
            };
            // A child's last messages are in before its result.
            let saved = self.save_child_records(&mut records);
            self.child_saved(saved).await;
            match next {
                None => break Ok(steered),
                Some(Ok((i, r))) => {
                    self.report(&batch.calls[i], &r).await;
                    if batch.calls[i].function.name == super::plan::TODO_WRITE && !r.is_error {
                        self.save_plan().await;
                    }
                    batch.results[i] = Some(r);
                    self.push_finished(batch).await;
                    steered |= self.control.has_steering();
                }
                Some(Err(e)) => {
                    // A tool panicked: say so; its call gets a result below.
                    self.warn(format!("a tool task failed: {e}")).await;
                }
            }
        };
        let saved = self.save_child_records(&mut records);
        self.child_saved(saved).await;
        self.child_records = records;
        end
    }

    /// Reports a failure to journal a child's messages, once.
    async fn child_saved(&mut self, saved: Result<(), super::HostedError>) {
        if let Err(e) = saved {
            if !self.save_failing {
                self.save_failing = true;
                self.warn(format!("session not saved: {e}")).await;
            }
        }
    }

    /// Pushes the results of the longest run of finished calls not yet pushed.
    async fn push_finished(&mut self, batch: &mut Batch<'_>) {
        let before = batch.pushed;
        while batch.pushed < batch.calls.len() {
            let Some(r) = batch.results[batch.pushed].take() else {
                break;
            };
            let call = &batch.calls[batch.pushed];
            let (id, name) = (call.id.clone(), call.function.name.clone());
            let text = self
                .fit_in_context(r.text, &format!("the output of {name}"))
                .await;
            self.messages.push(Message::tool_result(&id, text));
            batch.pushed += 1;
        }
        if batch.pushed > before {
            self.persist(false).await;
        }
    }

    /// Where a running call's output tail goes: the event stream, without
    /// waiting (the tool is reading its command's output meanwhile).
    fn progress_sink(&self, call_id: &str) -> crate::tools::live::ProgressFn {
        let emitter = self.emitter.clone();
        let call_id = call_id.to_string();
        Arc::new(move |tail| {
            emitter.delta(EventKind::ToolProgress {
                call_id: call_id.clone(),
                tail,
            })
        })
    }

    async fn report(&self, call: &ToolCall, r: &CallResult) {
        if let Some(t) = r.truncated {
            self.warn(format!(
                "{} output truncated: kept {} of {} characters",
                call.function.name, t.kept, t.total
            ))
            .await;
        }
        self.emit(EventKind::ToolResult(ToolCallResult {
            call_id: call.id.clone(),
            name: call.function.name.clone(),
            text: r.text.clone(),
            is_error: r.is_error,
            truncated: r.truncated,
        }))
        .await;
    }
}

/// The next message record of a child, when this agent has children.
async fn next_record(
    rx: &mut Option<tokio::sync::mpsc::UnboundedReceiver<super::subagent::ChildRecord>>,
) -> super::subagent::ChildRecord {
    match rx {
        // The sending end lives in the agent, so `None` never comes.
        Some(rx) => match rx.recv().await {
            Some(r) => r,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// One tool call with its `PreToolUse` and `PostToolUse` hooks around it.
/// A `PreToolUse` block means the tool never runs and its result is the
/// hook's reason; a `PostToolUse` block or context joins the result.
async fn call_hooked(
    tools: &ToolRegistry,
    hooks: Option<&HookRunner>,
    name: &str,
    args: &str,
    ctx: &ToolContext,
) -> CallResult {
    let Some(hooks) =
        hooks.filter(|h| h.has(HookEvent::PreToolUse) || h.has(HookEvent::PostToolUse))
    else {
        return tools.call(name, args, ctx).await;
    };
    let about = About {
        call_id: Some(&ctx.call_id),
        tool: Some(name),
    };
    // The arguments as JSON when they are (they are meant to be), else as sent.
    let input: serde_json::Value =
        serde_json::from_str(args).unwrap_or_else(|_| serde_json::Value::String(args.into()));
    let fields = |extra: Option<(&str, serde_json::Value)>| {
        let mut f = serde_json::Map::new();
        f.insert("tool_name".into(), name.into());
        f.insert("tool_input".into(), input.clone());
        f.insert("tool_use_id".into(), ctx.call_id.clone().into());
        if let Some((k, v)) = extra {
            f.insert(k.into(), v);
        }
        f
    };
    if hooks.has(HookEvent::PreToolUse) {
        if let Verdict::Block { reason } =
            hooks.fire(HookEvent::PreToolUse, about, fields(None)).await
        {
            return CallResult {
                text: format!("blocked by a PreToolUse hook: {reason}"),
                is_error: true,
                truncated: None,
            };
        }
    }
    let mut result = tools.call(name, args, ctx).await;
    if hooks.has(HookEvent::PostToolUse) {
        let response = serde_json::json!({ "text": result.text, "is_error": result.is_error });
        match hooks
            .fire(
                HookEvent::PostToolUse,
                about,
                fields(Some(("tool_response", response))),
            )
            .await
        {
            Verdict::Block { reason } => {
                result
                    .text
                    .push_str(&format!("\n\n[PostToolUse hook] {reason}"));
            }
            Verdict::Go { context: Some(c) } => {
                result
                    .text
                    .push_str(&format!("\n\n[PostToolUse hook context] {c}"));
            }
            Verdict::Go { context: None } => {}
        }
    }
    result
}
