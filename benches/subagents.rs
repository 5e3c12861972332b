//! What a sub-agent costs beyond its model calls, for docs/PERFORMANCE.md:
//! a run whose first reply asks for K calls answered without a child (a tool
//! no registry has: an error result, the cheapest call there is) against the
//! same run whose K calls are `agent` calls, each a child that asks the
//! model once and answers. The model is an in-process client that answers
//! at once by the request's content, so a child's model call costs
//! microseconds and the difference per child is the child's own overhead
//! (the agent built, tools filtered, events forwarded, usage summed,
//! messages handed to the parent) with its model call on top. The issue
//! asks for under 5 ms.
//!
//! ```text
//! cargo bench --bench subagents [-- --rounds N --children K]
//! ```

use async_trait::async_trait;
use buddy::agent::control::ApprovalRules;
use buddy::agent::protocol::QueueMode;
use buddy::agent::subagent::SubagentOptions;
use buddy::agent::{
    spawn, AgentHandle, AgentSetup, CompactionOptions, EventKind, Limits, ModelInfo, Op,
    ToolStrategy,
};
use buddy::agent::{AgentOptions, RunOutcome};
use buddy::provider::{ApiError, EventSink, ModelClient, ModelRequest, ModelResponse};
use buddy::tools::ToolRegistry;
use buddy::wire::{Message, Role, ToolCall};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Answers by content: a child's prompt gets an answer, a request with the
/// calls' results gets the final answer, the first request K calls of `tool`.
struct Instant_ {
    tool: &'static str,
    calls: usize,
}

#[async_trait]
impl ModelClient for Instant_ {
    async fn complete(
        &self,
        r: ModelRequest<'_>,
        _s: EventSink<'_>,
    ) -> Result<ModelResponse, ApiError> {
        let last = r.messages.last().map(|m| (m.role, m.text().to_string()));
        let message = match last {
            Some((Role::User, text)) if text.starts_with("child") => {
                Message::assistant("the child's answer")
            }
            Some((Role::Tool, _)) => Message::assistant("done"),
            _ => {
                let mut m = Message::assistant("");
                m.tool_calls = Some(
                    (0..self.calls)
                        .map(|i| {
                            let args = serde_json::json!({
                                "description": format!("child {i}"),
                                "prompt": format!("child {i}: answer"),
                            });
                            ToolCall::new(format!("c{i}"), self.tool, args.to_string())
                        })
                        .collect(),
                );
                m
            }
        };
        Ok(ModelResponse {
            message,
            usage: None,
            cut_off: None,
            refusal: None,
        })
    }

    fn model(&self) -> &str {
        "instant"
    }
}

fn agent(tool: &'static str, calls: usize) -> AgentHandle {
    spawn(AgentSetup {
        client: Arc::new(Instant_ { tool, calls }),
        // One tool, so the agent (which gives no `agent` tool to an agent
        // with no tools) has children to start; the model never calls it.
        tools: {
            let mut reg = ToolRegistry::new();
            reg.register(Arc::new(buddy::tools::time::TimeTool));
            reg
        },
        cwd: PathBuf::from("/"),
        target: Arc::new(buddy::host::LocalTarget),
        pane: None,
        options: AgentOptions {
            limits: Limits {
                max_turns: 10,
                max_total_tokens: None,
                max_duration: None,
                max_cost_usd: None,
            },
            strategy: ToolStrategy::Parallel,
            context_limit: 1_000_000,
            compaction: CompactionOptions::default(),
            subagents: SubagentOptions {
                max_turns: 5,
                max_tokens: 1_000_000,
                max_parallel: 4,
                depth: 1,
            },
        },
        system_prompt: Some("You are a benchmark.".into()),
        model: ModelInfo::default(),
        approval: ApprovalRules::default(),
        allowed: Default::default(),
        steering_mode: QueueMode::OneAtATime,
        follow_up_mode: QueueMode::OneAtATime,
        sessions: None,
        models: None,
        hooks: Default::default(),
        output: None,
        telemetry: None,
    })
}

/// One run from prompt to its end, every event read as a front end would.
async fn run(agent: &mut AgentHandle) -> Duration {
    let t0 = Instant::now();
    agent
        .ops
        .send(Op::Prompt {
            text: "go".into(),
            images: Vec::new(),
        })
        .await
        .expect("the agent listens");
    loop {
        let ev = agent.events.recv().await.expect("the agent runs");
        if let EventKind::RunFinished(end) = ev.kind {
            assert!(
                matches!(end.outcome, RunOutcome::Answered { .. }),
                "{:?}",
                end.outcome
            );
            return t0.elapsed();
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rounds = arg("--rounds", 200);
    let children = arg("--children", 4);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut plain = agent("no_such_tool", children);
        let mut parent = agent("agent", children);
        // Warm both (allocations, the first definitions' encoding).
        for _ in 0..10 {
            run(&mut plain).await;
            run(&mut parent).await;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // Interleaved, so a busy moment on the machine hits both alike.
        for _ in 0..rounds {
            a.push(run(&mut plain).await);
            b.push(run(&mut parent).await);
        }
        let (a, b) = (median(a), median(b));
        let per_child = b.saturating_sub(a) / children as u32;
        println!("subagents: {rounds} runs each, {children} calls per run (medians)");
        println!(
            "  run with {children} calls of an unknown tool   {:.3} ms",
            a.as_secs_f64() * 1e3
        );
        println!(
            "  run with {children} sub-agents                 {:.3} ms",
            b.as_secs_f64() * 1e3
        );
        println!(
            "  per sub-agent, its model call included     {:.3} ms (limit 5 ms)",
            per_child.as_secs_f64() * 1e3
        );
    });
}
