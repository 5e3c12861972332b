//! Unit tests of the loop with an in-process model double (end-to-end tests use a
//! real HTTP server; these pin down cancellation and pairing precisely).

use super::*;
use crate::provider::{ApiError, EventSink, ModelResponse};
use crate::tools::{Tool, ToolError, ToolOutput};
use crate::wire::{ToolCall, ToolDefinition};
use async_trait::async_trait;
use control::ApprovalRules;
use protocol::{Decision, QueueMode, RunEnd, ToolCallResult, UsageReport};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Mutex as StdMutex;
use tokio::sync::mpsc;

struct Scripted {
    replies: StdMutex<Vec<Message>>,
}

#[async_trait]
impl ModelClient for Scripted {
    async fn complete(
        &self,
        _r: ModelRequest<'_>,
        _s: EventSink<'_>,
    ) -> Result<ModelResponse, ApiError> {
        let mut replies = self.replies.lock().unwrap();
        if replies.is_empty() {
            return Err(ApiError::InvalidResponse("script exhausted".into()));
        }
        Ok(ModelResponse {
            message: replies.remove(0),
            usage: None,
            cut_off: None,
            refusal: None,
        })
    }
    fn model(&self) -> &str {
        "scripted"
    }
}

/// Waits forever unless its argument says `fast`.
struct Sleepy;

#[async_trait]
impl Tool for Sleepy {
    fn name(&self) -> &'static str {
        "sleepy"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function("sleepy", "test", serde_json::json!({"type":"object"}))
    }
    fn max_output_chars(&self) -> usize {
        100
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.get("fast").is_some() {
            return Ok(ToolOutput::text("fast done"));
        }
        std::future::pending::<()>().await;
        unreachable!()
    }
}

fn calls_message(calls: Vec<ToolCall>) -> Message {
    let mut m = Message::assistant("");
    m.content = None;
    m.tool_calls = Some(calls);
    m
}

fn options(strategy: ToolStrategy) -> AgentOptions {
    AgentOptions {
        limits: Limits {
            max_turns: 5,
            max_total_tokens: None,
            max_duration: None,
            max_cost_usd: None,
        },
        strategy,
        context_limit: 8192,
        compaction: CompactionOptions::default(),
        subagents: super::subagent::SubagentOptions::OFF,
    }
}

fn agent_with(replies: Vec<Message>, parallel: bool) -> (Agent, mpsc::Receiver<Event>) {
    let strategy = if parallel {
        ToolStrategy::Parallel
    } else {
        ToolStrategy::Sequential
    };
    agent_opts(replies, options(strategy))
}

fn agent_opts(replies: Vec<Message>, opts: AgentOptions) -> (Agent, mpsc::Receiver<Event>) {
    let client = Arc::new(Scripted {
        replies: StdMutex::new(replies),
    });
    agent_client(client, opts)
}

fn agent_client(
    client: Arc<dyn ModelClient>,
    opts: AgentOptions,
) -> (Agent, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel(4096);
    let emitter = Emitter::new(tx);
    let control = Control::new(
        emitter.clone(),
        ApprovalRules {
            confirm: false,
            ..ApprovalRules::default()
        },
        super::allowlist::SharedAllowList::default(),
        QueueMode::OneAtATime,
        QueueMode::OneAtATime,
    );
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(Sleepy));
    let gate = Arc::new(control::Gate {
        control: control.clone(),
        hooks: None,
    });
    let ctx = ToolContext::local(PathBuf::from("/"), gate);
    (
        Agent::new(
            client,
            reg,
            ctx,
            opts,
            Some("sys".into()),
            ModelInfo::default(),
            emitter,
            control,
        ),
        rx,
    )
}

async fn cancel_mid_batch(parallel: bool) {
    let calls = vec![
        ToolCall::new("a", "sleepy", "{\"fast\":true}"),
        ToolCall::new("b", "sleepy", "{}"),
        ToolCall::new("c", "sleepy", "{}"),
    ];
    let (mut agent, mut rx) = agent_with(vec![calls_message(calls)], parallel);
    let (handle, cancel) = Cancel::new();
    let watcher = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if let EventKind::ToolResult(result) = ev.kind {
                assert_eq!(result.call_id, "a");
                handle.cancel();
                return handle;
            }
        }
        panic!("no tool result");
    });
    let out = agent.run("go".into(), cancel).await;
    let _handle = watcher.await.unwrap();
    assert_eq!(out, RunOutcome::Interrupted);
    let m = agent.messages();
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Tool
        ]
    );
    let results: Vec<(&str, &str)> = m[3..]
        .iter()
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.text()))
        .collect();
    assert_eq!(
        results,
        vec![("a", "fast done"), ("b", CANCELLED), ("c", CANCELLED)]
    );
}

#[tokio::test]
async fn cancellation_mid_parallel_batch_pairs_every_call() {
    cancel_mid_batch(true).await;
}

#[tokio::test]
async fn cancellation_mid_sequential_batch_pairs_every_call() {
    cancel_mid_batch(false).await;
}

#[tokio::test]
async fn cancelled_before_start_touches_nothing() {
    let (mut agent, _rx) = agent_with(vec![Message::assistant("hi")], true);
    let (handle, cancel) = Cancel::new();
    handle.cancel();
    assert_eq!(
        agent.run("go".into(), cancel).await,
        RunOutcome::Interrupted
    );
    assert_eq!(agent.messages().len(), 1);
}

#[tokio::test]
async fn iteration_cap_is_an_error_with_a_valid_history() {
    let replies = (0..5)
        .map(|i| {
            calls_message(vec![ToolCall::new(
                format!("c{i}"),
                "sleepy",
                "{\"fast\":1}",
            )])
        })
        .collect();
    let (mut agent, _rx) = agent_with(replies, true);
    let out = agent.run("loop".into(), Cancel::never()).await;
    assert!(
        matches!(&out, RunOutcome::LimitReached { message } if message.contains("5 model calls")),
        "{out:?}"
    );
    let mut copy = agent.messages().to_vec();
    assert_eq!(
        repair_history(&mut copy),
        0,
        "every call already has its result"
    );
}

#[test]
fn repair_fills_missing_results_after_the_answered_ones() {
    let mut h = vec![
        Message::user("x"),
        calls_message(vec![
            ToolCall::new("1", "t", "{}"),
            ToolCall::new("2", "t", "{}"),
        ]),
        Message::tool_result("1", "ok"),
    ];
    assert_eq!(repair_history(&mut h), 1);
    assert_eq!(h.len(), 4);
    assert_eq!(h[3].tool_call_id.as_deref(), Some("2"));
    assert_eq!(h[3].text(), CANCELLED);
}

/// The roles of one save and whether it ended the turn.
type SaveCall = (Vec<Role>, bool);

/// Records what the agent hands over, and can be told to fail.
#[derive(Clone, Default)]
struct Recorder {
    calls: Arc<StdMutex<Vec<SaveCall>>>,
    fail: Arc<StdMutex<bool>>,
}

impl HistorySink for Recorder {
    fn save(
        &mut self,
        new: &[Message],
        _t: &TokenTracker,
        turn_end: bool,
    ) -> Result<(), HostedError> {
        if *self.fail.lock().unwrap() {
            return Err("disk full".into());
        }
        self.calls
            .lock()
            .unwrap()
            .push((new.iter().map(|m| m.role).collect(), turn_end));
        Ok(())
    }
}

#[tokio::test]
async fn history_reaches_the_sink_step_by_step_and_never_the_system_prompt() {
    let replies = vec![
        calls_message(vec![ToolCall::new("a", "sleepy", "{\"fast\":1}")]),
        Message::assistant("done"),
    ];
    let (mut agent, _rx) = agent_with(replies, true);
    let rec = Recorder::default();
    agent.set_history_sink("s".into(), Box::new(rec.clone()));
    agent.run("go".into(), Cancel::never()).await;
    let calls = rec.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            (vec![Role::User], false),
            (vec![Role::Assistant], false),
            (vec![Role::Tool], false),
            // The final answer goes with the turn-end save (off the worker).
            (vec![Role::Assistant], true),
        ]
    );
}

#[tokio::test]
async fn a_failed_save_warns_once_and_is_retried_with_the_next_one() {
    let replies = vec![Message::assistant("one"), Message::assistant("two")];
    let (mut agent, mut rx) = agent_with(replies, true);
    let rec = Recorder::default();
    agent.set_history_sink("s".into(), Box::new(rec.clone()));
    *rec.fail.lock().unwrap() = true;
    agent.run("first".into(), Cancel::never()).await;
    let mut warnings = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        if let EventKind::Warning { message } = ev.kind {
            warnings.push(message);
        }
    }
    assert_eq!(warnings, vec!["session not saved: disk full".to_string()]);
    *rec.fail.lock().unwrap() = false;
    agent.run("second".into(), Cancel::never()).await;
    let calls = rec.calls.lock().unwrap().clone();
    // Everything the failed saves missed arrives in the first good one.
    assert_eq!(calls[0].0, vec![Role::User, Role::Assistant, Role::User]);
}

#[tokio::test]
async fn restored_history_is_sent_after_the_new_system_prompt() {
    let (mut agent, _rx) = agent_with(vec![Message::assistant("again")], true);
    let rec = Recorder::default();
    agent.set_history_sink("s".into(), Box::new(rec.clone()));
    let mut tokens = TokenTracker::new(1);
    tokens.record(300, 30);
    let old = vec![
        Message::user("before"),
        Message::assistant("answer"),
        Message::tool_result("x", CANCELLED),
    ];
    agent.restore(old.clone(), tokens, 2);
    assert_eq!(agent.messages()[0], Message::system("sys"));
    assert_eq!(&agent.messages()[1..], &old[..]);
    assert_eq!(agent.tracker().total_prompt_tokens, 300);
    assert_eq!(
        agent.tracker().context_limit,
        8192,
        "the limit stays the model's"
    );
    agent.run("more".into(), Cancel::never()).await;
    // The repaired message (not yet in the store) goes out with the new prompt.
    let calls = rec.calls.lock().unwrap().clone();
    assert_eq!(calls[0].0, vec![Role::Tool, Role::User]);
    assert_eq!(
        agent.tracker().total_prompt_tokens,
        300 + agent.tracker().last_prompt_tokens
    );
}

#[tokio::test]
async fn finished_results_are_saved_in_order_before_the_batch_ends() {
    let calls = vec![
        ToolCall::new("a", "sleepy", "{\"fast\":true}"),
        ToolCall::new("b", "sleepy", "{}"),
        ToolCall::new("c", "sleepy", "{\"fast\":true}"),
    ];
    let (mut agent, mut rx) = agent_with(vec![calls_message(calls)], true);
    let rec = Recorder::default();
    agent.set_history_sink("s".into(), Box::new(rec.clone()));
    let (handle, cancel) = Cancel::new();
    let saved = rec.calls.clone();
    let watcher = tokio::spawn(async move {
        let mut done = 0;
        while let Some(ev) = rx.recv().await {
            if let EventKind::ToolResult { .. } = ev.kind {
                done += 1;
                if done == 2 {
                    // `a` is saved already; `c` waits for `b`, which never ends.
                    let so_far = saved.lock().unwrap().clone();
                    handle.cancel();
                    return so_far;
                }
            }
        }
        panic!("no tool results");
    });
    let out = agent.run("go".into(), cancel).await;
    let before_cancel = watcher.await.unwrap();
    assert_eq!(out, RunOutcome::Interrupted);
    assert_eq!(
        before_cancel,
        vec![
            (vec![Role::User], false),
            (vec![Role::Assistant], false),
            (vec![Role::Tool], false),
        ]
    );
    let all = rec.calls.lock().unwrap().clone();
    assert_eq!(
        &all[3..],
        &[(vec![Role::Tool, Role::Tool], false), (vec![], true)]
    );
    let ids: Vec<&str> = agent.messages()[3..]
        .iter()
        .map(|m| m.tool_call_id.as_deref().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(agent.messages()[4].text(), CANCELLED);
}

// ---------------------------------------------------------------------------
// Steering, follow-ups, limits, strategies and compaction.

/// A tool that does something to the agent's queues while it runs (as a user
/// typing at that moment would), then answers.
struct Act {
    name: &'static str,
    control: Arc<Control>,
    act: fn(&Control),
    delay_ms: u64,
}

#[async_trait]
impl Tool for Act {
    fn name(&self) -> &'static str {
        self.name
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(self.name, "test", serde_json::json!({"type":"object"}))
    }
    fn max_output_chars(&self) -> usize {
        1000
    }
    async fn execute(&self, _args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
        (self.act)(&self.control);
        Ok(ToolOutput::text(format!("{} done", self.name)))
    }
}

fn steer_left(c: &Control) {
    c.steer("turn left".into());
}

fn follow_twice(c: &Control) {
    c.follow_up("then this".into());
    c.follow_up("and that".into());
}

/// An `Act` tool: its name, what it does, and after how many milliseconds.
type ActSpec = (&'static str, fn(&Control), u64);

/// An agent whose registry also holds `Act` tools bound to its control.
fn agent_acting(
    replies: Vec<Message>,
    opts: AgentOptions,
    acts: &[ActSpec],
    follow_up_mode: QueueMode,
) -> (Agent, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel(4096);
    let emitter = Emitter::new(tx);
    let control = Control::new(
        emitter.clone(),
        ApprovalRules {
            confirm: false,
            ..ApprovalRules::default()
        },
        super::allowlist::SharedAllowList::default(),
        QueueMode::OneAtATime,
        follow_up_mode,
    );
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(Sleepy));
    for &(name, act, delay_ms) in acts {
        reg.register(Arc::new(Act {
            name,
            control: control.clone(),
            act,
            delay_ms,
        }));
    }
    let gate = Arc::new(control::Gate {
        control: control.clone(),
        hooks: None,
    });
    let client = Arc::new(Scripted {
        replies: StdMutex::new(replies),
    });
    let agent = Agent::new(
        client,
        reg,
        ToolContext::local(PathBuf::from("/"), gate),
        opts,
        Some("sys".into()),
        ModelInfo::default(),
        emitter,
        control,
    );
    (agent, rx)
}

fn texts(m: &[Message]) -> Vec<(Role, String)> {
    m.iter().map(|m| (m.role, m.text().to_string())).collect()
}

/// Every assistant call answered, in order, by the tool messages right after
/// it; no tool message without its call.
fn assert_valid(history: &[Message]) {
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        assert_ne!(
            m.role,
            Role::Tool,
            "orphan tool message at {i}: {history:?}"
        );
        i += 1;
        if m.role == Role::Assistant {
            for call in m.calls() {
                let r = history
                    .get(i)
                    .unwrap_or_else(|| panic!("no result for {}: {history:?}", call.id));
                assert_eq!(r.role, Role::Tool, "{history:?}");
                assert_eq!(r.tool_call_id.as_deref(), Some(call.id.as_str()));
                i += 1;
            }
        }
    }
}

#[tokio::test]
async fn a_steer_lets_the_running_tool_finish_and_skips_the_rest() {
    let calls = vec![
        ToolCall::new("a", "sleepy", "{\"fast\":1}"),
        ToolCall::new("b", "steer", "{}"),
        ToolCall::new("c", "sleepy", "{\"fast\":1}"),
    ];
    let replies = vec![calls_message(calls), Message::assistant("turning left")];
    let (mut agent, _rx) = agent_acting(
        replies,
        options(ToolStrategy::Sequential),
        &[("steer", steer_left, 0)],
        QueueMode::OneAtATime,
    );
    let out = agent.run("go".into(), Cancel::never()).await;
    assert_eq!(
        out,
        RunOutcome::Answered {
            text: "turning left".into(),
            refused: false
        }
    );
    let h = agent.messages();
    assert_valid(h);
    assert_eq!(
        texts(&h[3..]),
        vec![
            (Role::Tool, "fast done".into()),
            (Role::Tool, "steer done".into()),
            (Role::Tool, control::SKIPPED_FOR_STEER.into()),
            (Role::User, "turn left".into()),
            (Role::Assistant, "turning left".into()),
        ]
    );
}

#[tokio::test]
async fn batches_run_n_at_a_time_and_a_steer_skips_the_later_batches() {
    let calls = vec![
        ToolCall::new("a", "steer", "{}"),
        ToolCall::new("b", "sleepy", "{\"fast\":1}"),
        ToolCall::new("c", "sleepy", "{\"fast\":1}"),
    ];
    let replies = vec![calls_message(calls), Message::assistant("ok")];
    let (mut agent, _rx) = agent_acting(
        replies,
        options(ToolStrategy::Batched(2)),
        &[("steer", steer_left, 20)],
        QueueMode::OneAtATime,
    );
    agent.run("go".into(), Cancel::never()).await;
    let h = agent.messages();
    assert_valid(h);
    // `b` ran beside `a` in the first batch; `c` never started.
    assert_eq!(h[4].text(), "fast done");
    assert_eq!(h[5].text(), control::SKIPPED_FOR_STEER);
    assert_eq!(h[6].text(), "turn left");
}

#[tokio::test]
async fn follow_ups_are_taken_when_the_agent_would_stop() {
    for (mode, requests_after_first) in [(QueueMode::OneAtATime, 2), (QueueMode::All, 1)] {
        let replies = vec![
            calls_message(vec![ToolCall::new("q", "queue", "{}")]),
            Message::assistant("first answer"),
            Message::assistant("second answer"),
            Message::assistant("third answer"),
        ];
        let (mut agent, _rx) = agent_acting(
            replies,
            options(ToolStrategy::Parallel),
            &[("queue", follow_twice, 0)],
            mode,
        );
        let out = agent.run("go".into(), Cancel::never()).await;
        let h = agent.messages();
        assert_valid(h);
        let users: Vec<&str> = h
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.text())
            .collect();
        assert_eq!(users, ["go", "then this", "and that"], "{mode:?}");
        let answers = h
            .iter()
            .filter(|m| m.role == Role::Assistant && m.calls().is_empty())
            .count();
        assert_eq!(answers, 1 + requests_after_first, "{mode:?}: {h:?}");
        let last = if requests_after_first == 2 {
            "third answer"
        } else {
            "second answer"
        };
        assert_eq!(
            out,
            RunOutcome::Answered {
                text: last.into(),
                refused: false
            }
        );
    }
}

#[tokio::test]
async fn a_token_limit_ends_the_run_with_every_call_answered() {
    let replies = (0..4)
        .map(|i| {
            calls_message(vec![ToolCall::new(
                format!("c{i}"),
                "sleepy",
                "{\"fast\":1}",
            )])
        })
        .collect();
    let mut opts = options(ToolStrategy::Parallel);
    opts.limits.max_total_tokens = Some(1);
    let (mut agent, _rx) = agent_opts(replies, opts);
    let out = agent.run("go".into(), Cancel::never()).await;
    assert!(
        matches!(&out, RunOutcome::LimitReached { message } if message.contains("max_total_tokens")),
        "{out:?}"
    );
    assert_valid(agent.messages());
    // One request, then the limit: its tool call still got its result.
    assert_eq!(agent.messages().len(), 4);
}

#[tokio::test]
async fn a_time_limit_stops_a_running_tool_and_answers_its_call() {
    let replies = vec![calls_message(vec![
        ToolCall::new("slow", "sleepy", "{}"),
        ToolCall::new("fast", "sleepy", "{\"fast\":1}"),
    ])];
    let mut opts = options(ToolStrategy::Sequential);
    opts.limits.max_duration = Some(Duration::from_millis(200));
    let (mut agent, _rx) = agent_opts(replies, opts);
    let started = std::time::Instant::now();
    let out = agent.run("go".into(), Cancel::never()).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(&out, RunOutcome::LimitReached { message } if message.contains("time limit")),
        "{out:?}"
    );
    let h = agent.messages();
    assert_valid(h);
    assert_eq!(h[3].text(), TIME_LIMIT_RESULT);
    assert_eq!(h[4].text(), TIME_LIMIT_RESULT);
}

/// Answers summary requests (no tools offered) with a summary, others from a
/// script; records every request's estimated size.
struct Summarizing {
    replies: StdMutex<Vec<Message>>,
    sizes: StdMutex<Vec<(bool, u64)>>,
}

#[async_trait]
impl ModelClient for Summarizing {
    async fn complete(
        &self,
        r: ModelRequest<'_>,
        _s: EventSink<'_>,
    ) -> Result<ModelResponse, ApiError> {
        let summary = r.tools.is_empty();
        self.sizes
            .lock()
            .unwrap()
            .push((summary, tokens::estimate_messages(r.messages)));
        let message = if summary {
            assert_eq!(r.messages[0].role, Role::System);
            assert_eq!(r.messages[1].role, Role::User);
            assert_eq!(r.messages.len(), 2);
            Message::assistant("the user asked for listings; all were done")
        } else {
            let mut replies = self.replies.lock().unwrap();
            if replies.is_empty() {
                return Err(ApiError::InvalidResponse("script exhausted".into()));
            }
            replies.remove(0)
        };
        Ok(ModelResponse {
            message,
            usage: None,
            cut_off: None,
            refusal: None,
        })
    }
    fn model(&self) -> &str {
        "summarizing"
    }
}

/// A sink that keeps the journal the way a session file would: messages
/// appended, compactions applied to the loaded history.
#[derive(Clone, Default)]
struct Journal {
    loaded: Arc<StdMutex<Vec<Message>>>,
    compactions: Arc<StdMutex<usize>>,
}

impl HistorySink for Journal {
    fn save(&mut self, new: &[Message], _t: &TokenTracker, _end: bool) -> Result<(), HostedError> {
        self.loaded.lock().unwrap().extend_from_slice(new);
        Ok(())
    }
    fn compacted(
        &mut self,
        replaces: usize,
        with: &[Message],
        _t: &TokenTracker,
    ) -> Result<(), HostedError> {
        let mut l = self.loaded.lock().unwrap();
        assert!(replaces <= l.len());
        l.splice(0..replaces, with.iter().cloned());
        *self.compactions.lock().unwrap() += 1;
        Ok(())
    }
}

#[tokio::test]
async fn compaction_keeps_requests_under_the_limit_and_resume_sees_the_same_history() {
    let big = "x".repeat(3000);
    // Six turns, each a tool call with a big output and an answer.
    let mut replies = Vec::new();
    for i in 0..6 {
        replies.push(calls_message(vec![ToolCall::new(
            format!("c{i}"),
            "big",
            "{}",
        )]));
        replies.push(Message::assistant(format!("answer {i}")));
    }
    let client = Arc::new(Summarizing {
        replies: StdMutex::new(replies),
        sizes: StdMutex::new(Vec::new()),
    });
    let mut opts = options(ToolStrategy::Parallel);
    opts.context_limit = 2000;
    let (mut agent, mut rx) = agent_client(client.clone(), opts);
    struct Big(String);
    #[async_trait]
    impl Tool for Big {
        fn name(&self) -> &'static str {
            "big"
        }
        fn definition(&self) -> ToolDefinition {
            ToolDefinition::function("big", "test", serde_json::json!({"type":"object"}))
        }
        fn max_output_chars(&self) -> usize {
            100_000
        }
        async fn execute(&self, _a: Value, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(self.0.clone()))
        }
    }
    Arc::get_mut(&mut agent.tools)
        .unwrap()
        .register(Arc::new(Big(big)));
    let journal = Journal::default();
    agent.set_history_sink("s".into(), Box::new(journal.clone()));
    for i in 0..6 {
        let out = agent.run(format!("list {i}"), Cancel::never()).await;
        assert_eq!(
            out,
            RunOutcome::Answered {
                text: format!("answer {i}"),
                refused: false
            }
        );
        assert_valid(agent.messages());
    }
    let sizes = client.sizes.lock().unwrap().clone();
    assert!(sizes.iter().any(|(summary, _)| *summary), "{sizes:?}");
    for (summary, size) in &sizes {
        assert!(
            *size < 2000,
            "a request of ~{size} tokens (summary: {summary})"
        );
    }
    let mut compacted = 0;
    while let Ok(ev) = rx.try_recv() {
        if let EventKind::Compacted { summarized, .. } = ev.kind {
            compacted += 1;
            let _ = summarized;
        }
    }
    assert!(compacted > 0);
    assert_eq!(*journal.compactions.lock().unwrap(), compacted);
    // What a resume would load is exactly the history in memory.
    assert_eq!(
        *journal.loaded.lock().unwrap(),
        agent.messages()[1..].to_vec()
    );
    assert!(agent.messages()[1..].iter().any(compact::is_summary));
}

/// A tiny deterministic generator, so the property test needs no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A tool that sleeps for the milliseconds its arguments name.
struct Nap;

#[async_trait]
impl Tool for Nap {
    fn name(&self) -> &'static str {
        "nap"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function("nap", "test", serde_json::json!({"type":"object"}))
    }
    fn max_output_chars(&self) -> usize {
        100
    }
    async fn execute(&self, args: Value, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(ToolOutput::text(format!("napped {ms}")))
    }
}

/// Property: whatever interleaving of steering, follow-ups, interrupts and
/// tool completions, under every strategy, the history stays valid and the
/// journal holds exactly it.
/// On the paused clock, so each seed is one reproducible interleaving.
#[tokio::test(start_paused = true)]
async fn any_interleaving_of_steer_follow_up_interrupt_and_tools_keeps_the_history_valid() {
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut replies = Vec::new();
        for r in 0..6 {
            if rng.below(3) == 0 {
                replies.push(Message::assistant(format!("answer {r}")));
            } else {
                let n = 1 + rng.below(4);
                let calls = (0..n)
                    .map(|i| {
                        ToolCall::new(
                            format!("r{r}c{i}"),
                            "nap",
                            format!("{{\"ms\":{}}}", rng.below(6)),
                        )
                    })
                    .collect();
                replies.push(calls_message(calls));
            }
        }
        replies.push(Message::assistant("done"));
        let strategy = match rng.below(3) {
            0 => ToolStrategy::Parallel,
            1 => ToolStrategy::Sequential,
            _ => ToolStrategy::Batched(1 + rng.below(3) as usize),
        };
        let mut opts = options(strategy);
        opts.limits.max_turns = 8;
        let (mut agent, _rx) = agent_opts(replies.clone(), opts);
        Arc::get_mut(&mut agent.tools)
            .unwrap()
            .register(Arc::new(Nap));
        let journal = Journal::default();
        agent.set_history_sink("s".into(), Box::new(journal.clone()));
        let control = agent.control.clone();
        let (handle, cancel) = Cancel::new();
        // The user: a few actions at random moments while the run goes on.
        let actions: Vec<(u64, u64)> = (0..rng.below(5))
            .map(|_| (rng.below(12), rng.below(4)))
            .collect();
        let user = tokio::spawn(async move {
            for (at, what) in actions {
                tokio::time::sleep(Duration::from_millis(at)).await;
                match what {
                    0 => {
                        control.steer("steer".into());
                    }
                    1 => {
                        control.follow_up("more".into());
                    }
                    2 => handle.cancel(),
                    _ => {
                        control.clear(true, true);
                    }
                }
            }
            handle
        });
        let out = agent.run("go".into(), cancel).await;
        let _handle = user.await.unwrap();
        let h = agent.messages();
        assert_valid(h);
        assert_eq!(
            *journal.loaded.lock().unwrap(),
            h[1..].to_vec(),
            "seed {seed}: the journal differs from the history"
        );
        assert!(
            matches!(
                out,
                RunOutcome::Answered { .. }
                    | RunOutcome::Interrupted
                    | RunOutcome::LimitReached { .. }
                    | RunOutcome::Failed { .. }
            ),
            "seed {seed}"
        );
        // The history always ends in a state a provider accepts for the next prompt.
        let last = h.last().unwrap();
        assert!(
            last.role != Role::Assistant || last.calls().is_empty(),
            "seed {seed}: ends on unanswered calls"
        );
    }
}

/// The agent as a service with the scripted model and the `sleepy` tool.
fn service(replies: Vec<Message>) -> AgentHandle {
    service_with(replies, options(ToolStrategy::Parallel))
}

fn service_with(replies: Vec<Message>, options: AgentOptions) -> AgentHandle {
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Sleepy));
    spawn(AgentSetup {
        client: Arc::new(Scripted {
            replies: StdMutex::new(replies),
        }),
        tools,
        cwd: PathBuf::from("/"),
        target: Arc::new(crate::host::LocalTarget),
        pane: None,
        options,
        system_prompt: None,
        model: ModelInfo::default(),
        approval: ApprovalRules {
            confirm: false,
            ..ApprovalRules::default()
        },
        allowed: super::allowlist::SharedAllowList::default(),
        steering_mode: QueueMode::OneAtATime,
        follow_up_mode: QueueMode::OneAtATime,
        sessions: None,
        models: None,
        hooks: super::hooks::Hooks::default(),
        output: None,
        telemetry: None,
    })
}

async fn next_of(agent: &mut AgentHandle, what: fn(&EventKind) -> bool) -> Event {
    loop {
        let ev = agent.events.recv().await.expect("the agent stopped");
        if what(&ev.kind) {
            return ev;
        }
    }
}

/// Every event names the op it answers: a reply its own op, even mid-run;
/// a run's events the prompt that started it; the end the op that asked.
#[tokio::test]
async fn every_event_carries_the_id_of_the_op_it_answers() {
    let mut agent = service(vec![calls_message(vec![ToolCall::new(
        "c1", "sleepy", "{}",
    )])]);
    let is_status = |k: &EventKind| matches!(k, EventKind::Status(_));
    let idle = agent.ops.send(Op::Status).await.unwrap();
    let ev = next_of(&mut agent, is_status).await;
    assert_eq!((ev.op_id, ev.run), (Some(idle), 0));
    let prompt = agent
        .ops
        .send(Op::Prompt {
            text: "go".into(),
            images: Vec::new(),
        })
        .await
        .unwrap();
    let call = next_of(&mut agent, |k| matches!(k, EventKind::ToolCall { .. })).await;
    assert_eq!(call.op_id, Some(prompt));
    // Two status requests while the tool runs: each reply names its own op,
    // not the run's, in whatever order a front end expected them.
    let first = agent.ops.send(Op::Status).await.unwrap();
    let second = agent.ops.send(Op::Status).await.unwrap();
    assert_ne!(first, second);
    let a = next_of(&mut agent, is_status).await;
    let b = next_of(&mut agent, is_status).await;
    assert_eq!((a.op_id, b.op_id), (Some(first), Some(second)));
    assert_eq!(a.run, call.run);
    agent.ops.send(Op::Interrupt).await.unwrap();
    let end = next_of(&mut agent, |k| matches!(k, EventKind::RunFinished { .. })).await;
    assert_eq!(end.op_id, Some(prompt));
    let refused = agent
        .ops
        .send(Op::Approve {
            call_id: "nope".into(),
            decision: Decision::Approve,
        })
        .await
        .unwrap();
    let err = next_of(&mut agent, |k| matches!(k, EventKind::Error { .. })).await;
    assert_eq!((err.op_id, err.run), (Some(refused), 0));
    let stop = agent.ops.send(Op::Shutdown).await.unwrap();
    let done = next_of(&mut agent, |k| matches!(k, EventKind::ShutdownComplete)).await;
    assert_eq!(done.op_id, Some(stop));
}

/// `/timeout` is the agent's own limit: set mid-run it ends the run as a
/// limit (every call answered); idle there is nothing to time.
#[tokio::test(start_paused = true)]
async fn a_timeout_set_during_a_run_ends_it_as_a_limit() {
    let mut agent = service(vec![calls_message(vec![ToolCall::new(
        "c1", "sleepy", "{}",
    )])]);
    let idle = agent
        .ops
        .send(Op::SetTimeout { after_ms: 1000 })
        .await
        .unwrap();
    let err = next_of(&mut agent, |k| matches!(k, EventKind::Error { .. })).await;
    assert_eq!(err.op_id, Some(idle));
    agent
        .ops
        .send(Op::Prompt {
            text: "go".into(),
            images: Vec::new(),
        })
        .await
        .unwrap();
    let call = next_of(&mut agent, |k| matches!(k, EventKind::ToolCall { .. })).await;
    let started = tokio::time::Instant::now();
    let set = agent
        .ops
        .send(Op::SetTimeout { after_ms: 1500 })
        .await
        .unwrap();
    let reply = next_of(&mut agent, |k| matches!(k, EventKind::TimeoutSet { .. })).await;
    assert_eq!(
        (reply.op_id, reply.run, reply.kind),
        (
            Some(set),
            call.run,
            EventKind::TimeoutSet { after_ms: 1500 }
        )
    );
    let result = next_of(&mut agent, |k| matches!(k, EventKind::ToolResult { .. })).await;
    let EventKind::ToolResult(ToolCallResult { text, .. }) = result.kind else {
        unreachable!()
    };
    assert!(text.contains("time limit"), "{text}");
    let end = next_of(&mut agent, |k| matches!(k, EventKind::RunFinished { .. })).await;
    assert!(
        matches!(
            &end.kind,
            EventKind::RunFinished(RunEnd {
                outcome: RunOutcome::LimitReached { message }
            }) if message.contains("timeout set for this run")
        ),
        "{end:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(1500));
    agent.shutdown().await;
}

#[tokio::test]
async fn without_a_session_store_listing_sessions_is_refused_with_one_line() {
    let mut agent = service(Vec::new());
    let id = agent.ops.send(Op::ListSessions).await.unwrap();
    let err = next_of(&mut agent, |k| matches!(k, EventKind::Error { .. })).await;
    assert_eq!(err.op_id, Some(id));
    agent.shutdown().await;
}

/// `!cmd` is the agent's: it runs on the agent's target, its reply names
/// the op, and its exchange joins the conversation at once when idle, only
/// after the run when one is going; a stopped one adds nothing.
#[tokio::test]
async fn a_users_command_runs_in_the_agent_and_joins_the_conversation_after_the_run() {
    let mut agent = service(vec![calls_message(vec![ToolCall::new(
        "c1", "sleepy", "{}",
    )])]);
    let is_ran = |k: &EventKind| matches!(k, EventKind::CommandRan(_));
    let is_status = |k: &EventKind| matches!(k, EventKind::Status(_));
    let messages = |ev: Event| match ev.kind {
        EventKind::Status(r) => r.messages,
        _ => unreachable!(),
    };
    let idle = agent
        .ops
        .send(Op::RunCommand {
            command: "echo hi-from-bang; exit 3".into(),
        })
        .await
        .unwrap();
    let ran = next_of(&mut agent, is_ran).await;
    assert_eq!(ran.op_id, Some(idle));
    let EventKind::CommandRan(r) = &ran.kind else {
        unreachable!()
    };
    assert_eq!((r.code, r.output.as_str()), (Some(3), "hi-from-bang\n"));
    agent.ops.send(Op::Status).await.unwrap();
    let before_run = messages(next_of(&mut agent, is_status).await);
    // The system prompt is absent here: the one message is the command.
    assert_eq!(before_run, 1);
    agent
        .ops
        .send(Op::Prompt {
            text: "go".into(),
            images: Vec::new(),
        })
        .await
        .unwrap();
    next_of(&mut agent, |k| matches!(k, EventKind::ToolCall { .. })).await;
    let busy = agent
        .ops
        .send(Op::RunCommand {
            command: "echo during".into(),
        })
        .await
        .unwrap();
    let ran = next_of(&mut agent, is_ran).await;
    assert_eq!(ran.op_id, Some(busy));
    let slow = agent
        .ops
        .send(Op::RunCommand {
            command: "sleep 30".into(),
        })
        .await
        .unwrap();
    agent.ops.send(Op::StopCommand).await.unwrap();
    let stopped = next_of(&mut agent, is_ran).await;
    assert_eq!(stopped.op_id, Some(slow));
    assert!(matches!(&stopped.kind, EventKind::CommandRan(r) if r.stopped));
    agent.ops.send(Op::Interrupt).await.unwrap();
    next_of(&mut agent, |k| matches!(k, EventKind::RunFinished { .. })).await;
    agent.ops.send(Op::Status).await.unwrap();
    let after = messages(next_of(&mut agent, is_status).await);
    // The prompt, the call, its result, then the command that ran during
    // the run; the stopped one left nothing.
    assert_eq!(after, before_run + 4, "messages after the run");
    agent.shutdown().await;
}

/// A sub-agent's answer is its call's result; its events come wrapped
/// under the call, ending with how its run ended; its usage (estimated
/// here) counts toward the parent's totals.
#[tokio::test]
async fn a_childs_answer_is_its_calls_result_and_its_events_come_wrapped() {
    let mut opts = options(ToolStrategy::Parallel);
    opts.subagents = subagent::SubagentOptions {
        max_turns: 3,
        max_tokens: 100_000,
        max_parallel: 2,
        depth: 1,
    };
    let mut agent = service_with(
        vec![
            calls_message(vec![ToolCall::new(
                "a1",
                "agent",
                r#"{"description":"look","prompt":"find it"}"#,
            )]),
            Message::assistant("it is in a.rs"),
            Message::assistant("done"),
        ],
        opts,
    );
    agent
        .ops
        .send(Op::Prompt {
            text: "go".into(),
            images: Vec::new(),
        })
        .await
        .unwrap();
    let mut wrapped = Vec::new();
    let mut usage = Vec::new();
    let mut result = None;
    let outcome = loop {
        let ev = agent.events.recv().await.expect("the agent runs");
        match ev.kind {
            EventKind::Subagent(sub) => {
                assert_eq!(
                    (sub.call_id.as_str(), sub.description.as_str()),
                    ("a1", "look")
                );
                wrapped.push(*sub.event);
            }
            EventKind::Usage(u) => usage.push(u),
            EventKind::ToolResult(r) => result = Some(r),
            EventKind::RunFinished(end) => break end.outcome,
            _ => {}
        }
    };
    let result = result.expect("the call's result");
    assert_eq!(
        (result.call_id.as_str(), result.text.as_str()),
        ("a1", "it is in a.rs")
    );
    assert!(!result.is_error);
    assert!(matches!(
        wrapped.first(),
        Some(EventKind::UserMessage { text, .. }) if text == "find it"
    ));
    assert!(matches!(
        wrapped.last(),
        Some(EventKind::RunFinished(RunEnd { outcome: RunOutcome::Answered { text, .. } })) if text == "it is in a.rs"
    ));
    // The parent's first reply, the child's spend (counted once, as the
    // child reported it), the parent's answer.
    let child: Vec<&UsageReport> = wrapped
        .iter()
        .filter_map(|k| match k {
            EventKind::Usage(u) => Some(u),
            _ => None,
        })
        .collect();
    assert_eq!((usage.len(), child.len()), (3, 1), "{usage:?}");
    assert_eq!(usage[1].prompt_tokens, child[0].prompt_tokens);
    assert_eq!(
        usage[1].session_total,
        usage[0].session_total + child[0].prompt_tokens + child[0].completion_tokens
    );
    assert_eq!(
        outcome,
        RunOutcome::Answered {
            text: "done".into(),
            refused: false
        }
    );
}
