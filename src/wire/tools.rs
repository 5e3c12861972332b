//! The list of tools offered to the model, with its Chat Completions JSON
//! encoded once. The list is the same for every request of a session and its
//! descriptions are most of the bytes a short request encodes, so encoding
//! them again on each model call was most of a tool loop's per-call cost.

use super::chat::ToolDefinition;
use serde_json::value::RawValue;
use std::ops::Deref;
use std::sync::OnceLock;

#[derive(Debug, Default, Clone)]
pub struct ToolList {
    defs: Vec<ToolDefinition>,
    /// `defs` as a JSON array, filled on first use; reset by `push`.
    chat: OnceLock<Box<RawValue>>,
}

impl ToolList {
    pub const fn new() -> Self {
        ToolList {
            defs: Vec::new(),
            chat: OnceLock::new(),
        }
    }

    pub fn push(&mut self, def: ToolDefinition) {
        self.defs.push(def);
        self.chat = OnceLock::new();
    }

    /// The definitions as the JSON array Chat Completions takes.
    pub fn chat_json(&self) -> Result<&RawValue, serde_json::Error> {
        if let Some(raw) = self.chat.get() {
            return Ok(raw);
        }
        let raw = serde_json::value::to_raw_value(&self.defs)?;
        Ok(self.chat.get_or_init(|| raw))
    }
}

impl From<Vec<ToolDefinition>> for ToolList {
    fn from(defs: Vec<ToolDefinition>) -> Self {
        ToolList {
            defs,
            chat: OnceLock::new(),
        }
    }
}

impl Deref for ToolList {
    type Target = [ToolDefinition];
    fn deref(&self) -> &[ToolDefinition] {
        &self.defs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cached_json_is_the_list_and_follows_a_push() {
        let mut list = ToolList::from(vec![ToolDefinition::function(
            "a",
            "first",
            json!({"type": "object"}),
        )]);
        let first: serde_json::Value =
            serde_json::from_str(list.chat_json().unwrap().get()).unwrap();
        assert_eq!(first, serde_json::to_value(&*list).unwrap());
        list.push(ToolDefinition::function("b", "second", json!({})));
        let second: serde_json::Value =
            serde_json::from_str(list.chat_json().unwrap().get()).unwrap();
        assert_eq!(second.as_array().map(Vec::len), Some(2));
        assert_eq!(second, serde_json::to_value(&*list).unwrap());
    }
}
