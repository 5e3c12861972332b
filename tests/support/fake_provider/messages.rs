//! (being written) The messages shape of a scripted answer.

use super::{Completion, SseChunk};
use serde_json::Value;

pub(super) fn stream_chunks(
    _c: &Completion,
    _model: &str,
    _id: &str,
    _body_len: usize,
) -> Vec<SseChunk> {
    panic!("fake provider: messages streams are not scripted yet")
}

pub(super) fn response_json(_c: &Completion, _model: &str, _id: &str, _body_len: usize) -> Value {
    panic!("fake provider: messages bodies are not scripted yet")
}
