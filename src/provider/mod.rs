//! Provider layer: talking to a model server over HTTP. The agent loop sees only
//! the `ModelClient` trait; this layer owns endpoints, auth headers, streaming,
//! retries and timeouts. It knows nothing of tools' behaviour or rendering.

pub mod body;
pub mod completions;
pub mod direct;
pub mod error;
pub mod http;
pub mod messages;
pub mod models;
pub mod responses;
pub mod retry;

pub use error::ApiError;

use crate::wire::{Message, OutputSchema, ToolList, Usage};
use async_trait::async_trait;
use std::time::Duration;

/// What the loop asks of the model: the full history and the enabled tools.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    pub messages: &'a [Message],
    pub tools: &'a ToolList,
    /// The schema the answer must match (`exec --output-schema`); each
    /// protocol sends it its own way.
    pub output: Option<&'a OutputSchema>,
}

/// One finished model turn.
#[derive(Debug, Clone)]
pub struct ModelResponse {
    pub message: Message,
    pub usage: Option<Usage>,
    /// Set when the model stopped at its output limit rather than finishing
    /// (`finish_reason: length`, `stop_reason: max_tokens`, an incomplete
    /// response): the server's reason, which `HttpClient` turns into the
    /// limit that was hit and how to raise it (`http::output_limit`).
    pub cut_off: Option<String>,
    /// Set when the model declined to answer (a `refusal` field or part,
    /// `stop_reason: refusal`, a content filter): the server's reason, so
    /// front ends can tell a refusal from an answer.
    pub refusal: Option<String>,
}

/// Things worth showing while a response is being produced.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    Text(String),
    Reasoning {
        field: String,
        text: String,
    },
    /// A failed attempt that will be retried after `delay`.
    Retrying {
        attempt: u32,
        max_retries: u32,
        delay: Duration,
        error: String,
    },
}

pub type EventSink<'a> = &'a (dyn Fn(StreamEvent) + Send + Sync);

#[async_trait]
pub trait ModelClient: Send + Sync {
    /// Produces the next assistant message, reporting progress through `on_event`.
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        on_event: EventSink<'_>,
    ) -> Result<ModelResponse, ApiError>;

    /// The model id requests are sent for.
    fn model(&self) -> &str;

    /// True when `complete` reads the reply's bytes itself, in the task that
    /// polls it: a `Pending` then means nothing more has arrived. False when
    /// they come through another task, where a `Pending` may only mean the
    /// next piece has not been handed over yet (see `agent/partial.rs`).
    fn reads_in_place(&self) -> bool {
        false
    }
}
