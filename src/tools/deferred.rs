//! Large tool sets stay cheap: past a bound on the bytes of the tool
//! definitions that MCP servers bring, the model gets the built-in tools
//! whole and the servers' tools as one line each (in the description of
//! `tool_search`), and `tool_search {"query"}` loads the full definitions
//! of the ones it needs for the next request. Every request otherwise
//! carries every definition (peers send 40-50 KB a turn with a few servers).
//!
//! Not here: where the definitions come from (`ToolSource`, the MCP
//! client) and how a call runs (`ToolRegistry::call`): a deferred tool the
//! model calls by name without loading it still runs.

use crate::wire::ToolDefinition;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The name of the tool that loads deferred definitions.
pub const TOOL_SEARCH: &str = "tool_search";

/// The default bound, in bytes of JSON, on the servers' definitions sent
/// whole (`[tools] tool_search_after_bytes`).
pub const DEFAULT_AFTER_BYTES: usize = crate::config::DEFAULT_TOOL_SEARCH_AFTER_BYTES;

/// The most definitions one search loads.
const MAX_MATCHES: usize = 8;

/// The longest one-line description in the listing, in characters.
const LINE_CHARS: usize = 72;

/// Which of the servers' tools this agent has loaded, and the bound past
/// which the others are deferred. Shared by the clones of one registry.
#[derive(Debug)]
pub struct Deferral {
    after_bytes: usize,
    loaded: Mutex<BTreeSet<String>>,
}

impl Default for Deferral {
    fn default() -> Self {
        Deferral::new(DEFAULT_AFTER_BYTES)
    }
}

impl Deferral {
    /// `after_bytes` of 0 never defers.
    pub fn new(after_bytes: usize) -> Self {
        Deferral {
            after_bytes,
            loaded: Mutex::new(BTreeSet::new()),
        }
    }

    /// How many tools have been loaded (a list built before a search is
    /// stale after it).
    pub fn loaded_count(&self) -> usize {
        self.loaded().len()
    }

    /// The same bound with nothing loaded (a sub-agent's registry).
    pub fn fresh(&self) -> Deferral {
        Deferral::new(self.after_bytes)
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // A panic elsewhere cannot leave a set of names half-changed.
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `defs` (the servers' definitions) are past the bound.
    pub fn applies(&self, defs: &[ToolDefinition]) -> bool {
        self.after_bytes > 0 && json_bytes(defs) > self.after_bytes
    }

    /// What is sent of the servers' `defs` past the bound: the loaded ones
    /// whole, then `tool_search` listing the rest.
    pub fn shrink(&self, defs: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        let loaded = self.loaded().clone();
        let (whole, listed): (Vec<_>, Vec<_>) = defs
            .into_iter()
            .partition(|d| loaded.contains(&d.function.name));
        let mut out = whole;
        if !listed.is_empty() {
            out.push(search_definition(&listed));
        }
        out
    }

    /// Runs `tool_search` over the servers' `defs`: loads the best matches
    /// of `query` (or the names given as `select:a,b`) for the next
    /// request, and says which.
    pub fn search(&self, defs: &[ToolDefinition], query: &str) -> String {
        let picked = matches(defs, query);
        if picked.is_empty() {
            let names: Vec<&str> = defs.iter().map(|d| d.function.name.as_str()).collect();
            return format!(
                "no tool matched {:?}; the tools that can be loaded are: {}",
                crate::text::clip(query, 200),
                crate::text::one_line(&names.join(", "), 4000)
            );
        }
        let mut loaded = self.loaded();
        let mut out = format!(
            "Loaded {} tool(s); their full definitions come with the next request, call them then:\n",
            picked.len()
        );
        for d in picked {
            loaded.insert(d.function.name.clone());
            out.push_str(&format!(
                "- {}: {}\n",
                d.function.name,
                one_line(&d.function.description)
            ));
        }
        out
    }
}

/// The definitions' size as sent (JSON), without keeping the encoding.
fn json_bytes(defs: &[ToolDefinition]) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Plain data: writing into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, defs);
    count.0
}

fn one_line(description: &str) -> String {
    let first = description
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    crate::text::clip(first.trim(), LINE_CHARS).into_owned()
}

/// `tool_search` with the deferred tools named in its description.
fn search_definition(listed: &[ToolDefinition]) -> ToolDefinition {
    let mut description = String::from(
        "Load the full definitions of tools from the user's MCP servers before calling them. \
         These tools exist but only their names are sent, to keep requests small; search by \
         keywords (e.g. \"issue create\") or name them exactly with \"select:name1,name2\". \
         The loaded tools can be called from your next step.\nTools that can be loaded:\n",
    );
    for d in listed {
        description.push_str(&format!(
            "- {}: {}\n",
            d.function.name,
            one_line(&d.function.description)
        ));
    }
    ToolDefinition::function(
        TOOL_SEARCH,
        description.trim_end(),
        serde_json::json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Keywords to match against tool names and descriptions, or select:NAME[,NAME...]"
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    )
}

/// The definitions `query` picks: exact names after `select:`, else the
/// best scored by its words in the name (most) and the description.
fn matches<'a>(defs: &'a [ToolDefinition], query: &str) -> Vec<&'a ToolDefinition> {
    let query = query.trim();
    if let Some(names) = query.strip_prefix("select:") {
        let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
        return defs
            .iter()
            .filter(|d| wanted.contains(&d.function.name.as_str()))
            .take(MAX_MATCHES)
            .collect();
    }
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_lowercase)
        .collect();
    let mut scored: Vec<(usize, usize, &ToolDefinition)> = defs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let name = d.function.name.to_lowercase();
            let text = d.function.description.to_lowercase();
            let score: usize = words
                .iter()
                .map(|w| {
                    if name == *w {
                        10
                    } else if name.contains(w.as_str()) {
                        4
                    } else if text.contains(w.as_str()) {
                        1
                    } else {
                        0
                    }
                })
                .sum();
            (score > 0).then_some((score, i, d))
        })
        .collect();
    // Best first; the servers' order among equals.
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .take(MAX_MATCHES)
        .map(|(.., d)| d)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(n: usize) -> Vec<ToolDefinition> {
        (0..n)
            .map(|i| {
                ToolDefinition::function(
                    &format!("srv__tool_{i}"),
                    &format!("Does thing number {i} with the widget.\nMore detail here."),
                    json!({"type": "object", "properties": {"x": {"type": "string", "description": "a long parameter description to make it weigh"}}}),
                )
            })
            .collect()
    }

    #[test]
    fn under_the_bound_nothing_is_deferred_and_zero_never_defers() {
        let few = tools(2);
        assert!(!Deferral::new(16 * 1024).applies(&few));
        assert!(!Deferral::new(0).applies(&tools(500)));
        assert!(Deferral::new(1024).applies(&tools(50)));
    }

    #[test]
    fn past_the_bound_tools_are_listed_by_one_line_until_searched() {
        let defs = tools(50);
        let d = Deferral::new(1024);
        let sent = d.shrink(defs.clone());
        assert_eq!(sent.len(), 1, "only tool_search");
        let search = &sent[0];
        assert_eq!(search.function.name, TOOL_SEARCH);
        assert!(search
            .function
            .description
            .contains("- srv__tool_7: Does thing number 7 with the widget."));
        assert!(!search.function.description.contains("More detail"));
        assert!(json_bytes(&sent) < json_bytes(&defs) / 2);

        let said = d.search(&defs, "select:srv__tool_7, srv__tool_9");
        assert!(said.starts_with("Loaded 2 tool(s)"), "{said}");
        let sent = d.shrink(defs.clone());
        let names: Vec<&str> = sent.iter().map(|t| t.function.name.as_str()).collect();
        assert_eq!(names, ["srv__tool_7", "srv__tool_9", TOOL_SEARCH]);
        assert_eq!(sent[0], defs[7], "a loaded tool is sent whole");
        assert!(!sent[2].function.description.contains("srv__tool_7:"));
    }

    #[test]
    fn a_search_ranks_names_over_descriptions_and_says_when_nothing_matched() {
        let defs = vec![
            ToolDefinition::function("gh__create_issue", "Open an issue", json!({})),
            ToolDefinition::function(
                "gh__list_prs",
                "List pull requests; not an issue",
                json!({}),
            ),
            ToolDefinition::function("docs__search", "Search the docs", json!({})),
        ];
        let d = Deferral::new(1);
        let said = d.search(&defs, "create issue");
        let first = said.lines().nth(1).unwrap_or_default();
        assert!(first.starts_with("- gh__create_issue"), "{said}");
        assert!(!said.contains("docs__search"), "{said}");
        let none = d.search(&defs, "kubernetes");
        assert!(none.starts_with("no tool matched"), "{none}");
        assert!(none.contains("docs__search"), "{none}");
    }
}
