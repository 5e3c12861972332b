//! Sub-agents in the REPL: while a child runs, one line above the status
//! line says what it is doing (its description, its model requests and its
//! latest tool); its tool calls are kept, bounded, for `/subagents`, which
//! prints each child of the latest runs with them. The child's answer shows
//! as its `agent` call's result, like any tool's.

use super::Repl;
use crate::agent::protocol::{EventKind, Replayed, SubagentEvent, ToolCallResult};
use crate::text::visible;

/// Children `/subagents` remembers (the latest).
const KEPT_CHILDREN: usize = 20;
/// Tool calls kept per child.
const KEPT_CALLS: usize = 200;

/// One child as the REPL knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ChildView {
    pub call_id: String,
    pub description: String,
    /// Model requests so far.
    pub requests: u32,
    /// Its tool calls, one line each, with their outcome once known.
    pub calls: Vec<String>,
    pub done: bool,
}

impl ChildView {
    /// The status line of a running child.
    fn progress(&self) -> String {
        let last = self
            .calls
            .last()
            .map_or("thinking".into(), |c| visible(c).into_owned());
        format!(
            "◆ {} · {} request{} · {}",
            visible(&self.description),
            self.requests,
            if self.requests == 1 { "" } else { "s" },
            last
        )
    }
}

/// Applies one child event to its view; true when the view changed.
pub(super) fn apply(children: &mut Vec<ChildView>, sub: &SubagentEvent) -> bool {
    let index = match children.iter().position(|c| c.call_id == sub.call_id) {
        Some(i) => i,
        None => {
            if children.len() == KEPT_CHILDREN {
                children.remove(0);
            }
            children.push(ChildView {
                call_id: sub.call_id.clone(),
                description: sub.description.clone(),
                ..ChildView::default()
            });
            children.len() - 1
        }
    };
    let child = &mut children[index];
    match sub.event.as_ref() {
        EventKind::ModelRequest { turn } => child.requests = *turn,
        EventKind::ToolCall {
            name, arguments, ..
        } => {
            if child.calls.len() < KEPT_CALLS {
                let line = crate::ui::toolview::call_lines(name, arguments)
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| name.clone());
                child.calls.push(crate::text::one_line(&line, 200));
            }
        }
        EventKind::ToolResult(ToolCallResult { is_error, .. }) => {
            if let Some(last) = child.calls.last_mut() {
                last.push_str(if *is_error { "  ✗" } else { "  ✓" });
            }
        }
        EventKind::RunFinished(_) => child.done = true,
        _ => return false,
    }
    true
}

/// The children of a resumed conversation's replay, for `/subagents`.
pub(super) fn from_replay(items: &[Replayed]) -> Vec<ChildView> {
    let children: Vec<ChildView> = items
        .iter()
        .filter_map(|item| match item {
            Replayed::Subagent { description, items } => Some(ChildView {
                call_id: "resumed".into(),
                description: description.clone(),
                requests: items
                    .iter()
                    .filter(|i| matches!(i, Replayed::Assistant { .. }))
                    .count() as u32,
                calls: items
                    .iter()
                    .flat_map(|i| match i {
                        Replayed::Assistant { calls, .. } => calls.as_slice(),
                        _ => &[],
                    })
                    .take(KEPT_CALLS)
                    .map(|c| {
                        let line = crate::ui::toolview::call_lines(&c.name, &c.arguments)
                            .into_iter()
                            .next()
                            .unwrap_or_else(|| c.name.clone());
                        crate::text::one_line(&line, 200)
                    })
                    .collect(),
                done: true,
            }),
            _ => None,
        })
        .collect();
    let skip = children.len().saturating_sub(KEPT_CHILDREN);
    children.into_iter().skip(skip).collect()
}

/// What `/subagents` prints.
pub(super) fn report(children: &[ChildView]) -> Vec<String> {
    if children.is_empty() {
        return vec!["no sub-agents have run in this conversation".into()];
    }
    let mut lines = Vec::new();
    for c in children {
        lines.push(format!(
            "◆ {} ({} request{}{})",
            visible(&c.description),
            c.requests,
            if c.requests == 1 { "" } else { "s" },
            if c.done { "" } else { ", running" }
        ));
        if c.calls.is_empty() {
            lines.push("    no tool calls".into());
        }
        for call in &c.calls {
            lines.push(format!("    ▶ {}", visible(call)));
        }
    }
    lines
}

impl Repl<'_> {
    /// A child's event: its progress line above the status line.
    pub(super) fn on_subagent_event(&mut self, sub: SubagentEvent) {
        if !apply(&mut self.subagents, &sub) {
            return;
        }
        let Some(child) = self.subagents.iter().find(|c| c.call_id == sub.call_id) else {
            return;
        };
        let line = child.progress();
        let done = child.done;
        // The line goes with the parent's call: its result clears it.
        match self
            .tool_output
            .iter_mut()
            .find(|(id, _)| *id == sub.call_id)
        {
            Some((_, t)) => *t = line,
            None if !done => self.tool_output.push((sub.call_id, line)),
            None => {}
        }
        self.update_status();
        self.redraw();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(call: &str, kind: EventKind) -> SubagentEvent {
        SubagentEvent {
            call_id: call.into(),
            description: "look around".into(),
            event: Box::new(kind),
        }
    }

    #[test]
    fn a_child_keeps_its_requests_and_tool_calls_for_the_view() {
        let mut children = Vec::new();
        assert!(apply(
            &mut children,
            &ev("c1", EventKind::ModelRequest { turn: 2 })
        ));
        assert!(apply(
            &mut children,
            &ev(
                "c1",
                EventKind::ToolCall {
                    call_id: "x".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.txt"}"#.into(),
                }
            )
        ));
        assert!(!apply(
            &mut children,
            &ev("c1", EventKind::TextDelta { text: "hi".into() })
        ));
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].requests, 2);
        assert!(children[0].progress().contains("look around · 2 requests"));
        let shown = report(&children).join("\n");
        assert!(shown.contains("a.txt"), "{shown}");
        assert!(shown.contains("running"), "{shown}");
    }

    #[test]
    fn the_view_forgets_the_oldest_children_past_its_bound() {
        let mut children = Vec::new();
        for i in 0..KEPT_CHILDREN + 3 {
            apply(
                &mut children,
                &ev(&format!("c{i}"), EventKind::ModelRequest { turn: 1 }),
            );
        }
        assert_eq!(children.len(), KEPT_CHILDREN);
        assert_eq!(children[0].call_id, "c3");
    }
}
