//! (being written) The responses shape of a scripted answer.

use super::{Completion, SseChunk};
use serde_json::Value;

pub(super) fn stream_chunks(
    _c: &Completion,
    _model: &str,
    _id: &str,
    _body_len: usize,
) -> Vec<SseChunk> {
    panic!("fake provider: responses streams are not scripted yet")
}

pub(super) fn response_json(_c: &Completion, _model: &str, _id: &str, _body_len: usize) -> Value {
    panic!("fake provider: responses bodies are not scripted yet")
}
