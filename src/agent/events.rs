//! The one stream every front end renders: what the agent is doing, as typed
//! events. Front ends never reach into the loop; they read these and answer
//! approval requests through the reply channel they carry.

use super::AgentError;
use crate::tools::{Approval, ApprovalRequest, Truncation};
use std::time::Duration;
use tokio::sync::oneshot;

#[derive(Debug)]
pub enum AgentEvent {
    /// Waiting for the model (iteration number, 1-based).
    WaitingForModel {
        iteration: u32,
    },
    /// A piece of assistant text as it streams in.
    TextDelta(String),
    /// A piece of a reasoning trace (field name as the provider sent it).
    Reasoning {
        field: String,
        text: String,
    },
    /// The model asked for a tool.
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// A tool finished (events arrive in completion order; history keeps request order).
    ToolResult {
        id: String,
        name: String,
        text: String,
        is_error: bool,
        truncated: Option<Truncation>,
    },
    /// Token counts after a model call; `estimated` when the server sent none.
    Usage {
        prompt_tokens: u64,
        completion_tokens: u64,
        /// Of the prompt tokens, how many came from or went into the
        /// provider's prompt cache.
        cache_read_tokens: u64,
        cache_write_tokens: u64,
        session_total: u64,
        estimated: bool,
    },
    /// A failed request that will be retried.
    Retrying {
        attempt: u32,
        max_retries: u32,
        delay: Duration,
        error: String,
    },
    Warning(String),
    /// A tool needs consent; answer on `reply` (dropping it denies).
    ApprovalNeeded {
        request: ApprovalRequest,
        reply: oneshot::Sender<Approval>,
    },
    /// The turn ended: the final answer, or why there is none.
    Finished(Result<String, AgentError>),
}
