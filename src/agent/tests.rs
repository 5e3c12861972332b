//! Unit tests of the loop with an in-process model double (end-to-end tests use a
//! real HTTP server; these pin down cancellation and pairing precisely).

use super::*;
use crate::provider::{ApiError, EventSink, ModelResponse};
use crate::tools::{Tool, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use control::ApprovalRules;
use protocol::QueueMode;
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
        },
        strategy,
        context_limit: 8192,
        compaction: CompactionOptions::default(),
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
        QueueMode::OneAtATime,
        QueueMode::OneAtATime,
    );
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(Sleepy));
    let gate = Arc::new(control::Gate {
        control: control.clone(),
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
            if let EventKind::ToolResult { call_id, .. } = ev.kind {
                assert_eq!(call_id, "a");
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
    fn save(&mut self, new: &[Message], _t: &TokenTracker, turn_end: bool) -> Result<(), String> {
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
            (vec![Role::Assistant], false),
            (vec![], true),
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
