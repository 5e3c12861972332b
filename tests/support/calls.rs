//! Scripting tool calls for the fake provider and reading back what the
//! model was told: the pieces several end-to-end test files need.

use super::fake_provider::{FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use serde_json::Value;

/// A config for `p` under which shell commands run without asking (as
/// the user's own trusted file would have it), then `extra` TOML.
pub fn config_no_confirm(p: &FakeProvider, extra: &str) -> String {
    format!(
        "{}\n[tools]\nshell_confirm = false\n{extra}\n",
        super::fake_config(p)
    )
}

/// A reply that calls one tool.
pub fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::tool_calls(vec![ToolCallSpec::new(id, name, args.to_string())])
}

/// The tool message answering `id`, from the first request that carries it:
/// what the model saw right after the call (later ones may hold it shortened
/// by context compaction).
pub fn result_of(reqs: &[RecordedRequest], id: &str) -> String {
    reqs.iter()
        .find_map(|r| {
            r.json()["messages"].as_array()?.iter().find_map(|m| {
                (m["role"] == "tool" && m["tool_call_id"] == id)
                    .then(|| m["content"].as_str().unwrap_or_default().to_string())
            })
        })
        .unwrap_or_else(|| panic!("no tool result for {id}"))
}
