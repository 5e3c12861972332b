//! What the web page shows, made on the server: a conversation as display
//! items, as the terminal shows it. An answer is its Markdown as safe HTML
//! (`ui::markdown::html`: raw HTML escaped, code coloured by the terminal's
//! lexer); a tool call is the line the REPL prints (`$ cmd`, `write path (3
//! lines, 60 B)`, from `ui::toolview`), a result its lines with how many
//! more there were. The page sets every string here as text, except `html`.
//!
//! Owns the shapes and their bounds, not the HTTP: `http.rs` serves them for
//! a session's saved history (`GET /api/sessions/{id}/view`) and for the
//! events of a run as it streams (`POST /api/render`), so an answer never
//! gets rendered on the path of its text deltas.

use crate::ui::markdown::html::to_html;
use crate::ui::toolview::{call_lines, result_view, RESULT_LINES};
use crate::wire::{Message, Role};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Messages of a history shown at most: the latest ones; the page says how
/// many earlier ones were left out.
pub const MAX_MESSAGES: usize = 400;
/// Bytes of one answer rendered; the rest is cut with a note. Far above an
/// ordinary answer, and it bounds the work and the reply for any session.
const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// Bytes of one user message shown.
const MAX_USER_BYTES: usize = 64 * 1024;
/// Lines of a result the page can expand to; what is past them is counted.
const MAX_RESULT_LINES: usize = 400;

/// One thing the page shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    /// What the user sent, as text.
    User { text: String },
    /// An answer: HTML made by the Markdown writer, safe to insert.
    Answer { html: String },
    /// A tool call: `lines[0]` goes after `▶ `, the rest under it.
    Call {
        call_id: String,
        name: String,
        lines: Vec<String>,
    },
    /// A result: the page shows the first `shown` lines and offers the rest
    /// (`lines` beyond them, then `more` not sent at all) as "… +N more lines".
    Result {
        call_id: String,
        name: String,
        lines: Vec<String>,
        shown: usize,
        more: usize,
        /// `exit 2`, `timed out`, `error` when the call failed.
        failure: Option<String>,
    },
    /// What a sub-agent did, folded under the `agent` call (`call_id`) that
    /// ran it; its own calls' ids are `CALL/THEIRS`, as the live events name
    /// them, and a grandchild is one of its items.
    Subagent {
        call_id: String,
        description: String,
        items: Vec<Item>,
        /// Its messages before the ones shown.
        omitted: usize,
    },
}

/// What the page asks to have rendered while a run streams.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Render {
    /// An answer's text so far, or whole.
    Markdown(String),
    Call {
        call_id: String,
        name: String,
        arguments: String,
    },
    Result {
        call_id: String,
        name: String,
        text: String,
        #[serde(default)]
        is_error: bool,
    },
}

impl Render {
    pub fn item(&self) -> Item {
        match self {
            Render::Markdown(text) => answer(text),
            Render::Call {
                call_id,
                name,
                arguments,
            } => call(call_id, name, arguments),
            Render::Result {
                call_id,
                name,
                text,
                is_error,
            } => result(call_id, name, text, *is_error),
        }
    }
}

pub fn answer(text: &str) -> Item {
    let (text, cut) = crate::text::head(text, MAX_ANSWER_BYTES);
    let mut html = to_html(text);
    if cut > 0 {
        html.push_str(&format!(
            "<p class=\"cut\">… {cut} more bytes not shown</p>\n"
        ));
    }
    Item::Answer { html }
}

pub fn call(call_id: &str, name: &str, arguments: &str) -> Item {
    Item::Call {
        call_id: call_id.to_string(),
        name: crate::text::one_line(name, 80),
        lines: call_lines(name, arguments),
    }
}

/// How the agent words the result of a call a `PreToolUse` hook blocked
/// (`call_hooked` in `agent/tool_round.rs`): the call did not run.
const HOOK_BLOCKED: &str = "blocked by a PreToolUse hook:";

pub fn result(call_id: &str, name: &str, text: &str, is_error: bool) -> Item {
    let mut v = result_view(name, text, is_error, MAX_RESULT_LINES);
    if is_error && text.starts_with(HOOK_BLOCKED) {
        v.failure = Some("blocked by a hook".to_string());
    }
    Item::Result {
        call_id: call_id.to_string(),
        name: crate::text::one_line(name, 80),
        shown: RESULT_LINES.min(v.lines.len()),
        lines: v.lines,
        more: v.more,
        failure: v.failure,
    }
}

/// The plan a saved conversation left: its last `todo_write` call that
/// the plan tools would take (empty when none, or when a compaction took it).
pub fn plan(messages: &[Message]) -> Vec<crate::agent::protocol::PlanEntry> {
    messages
        .iter()
        .rev()
        .flat_map(|m| m.calls().iter().rev())
        .filter(|c| c.function.name == crate::agent::plan::TODO_WRITE)
        .find_map(|c| crate::agent::plan::parse_todos(&c.function.arguments))
        .unwrap_or_default()
}

/// A saved conversation as items: the last [`MAX_MESSAGES`] messages, and
/// how many came before them; each `agent` call is followed by what its
/// sub-agent did (from `subagents`, by call id), bounded the same way.
pub fn history(messages: &[Message], subagents: &[(String, Vec<Message>)]) -> (Vec<Item>, usize) {
    conversation(messages, subagents, "")
}

/// The items of one conversation; `prefix` is `CALL/` for a sub-agent's,
/// so its ids are the ones its live events use.
fn conversation(
    messages: &[Message],
    subagents: &[(String, Vec<Message>)],
    prefix: &str,
) -> (Vec<Item>, usize) {
    let skip = messages.len().saturating_sub(MAX_MESSAGES);
    // Results name their tool through the call they answer, which may sit
    // before the window.
    let names: HashMap<&str, &str> = messages
        .iter()
        .flat_map(|m| m.calls())
        .map(|c| (c.id.as_str(), c.function.name.as_str()))
        .collect();
    let mut items = Vec::new();
    for m in &messages[skip..] {
        match m.role {
            Role::System => {}
            Role::User => {
                let (text, cut) = crate::text::head(m.text(), MAX_USER_BYTES);
                let mut text = crate::text::visible(text).into_owned();
                if cut > 0 {
                    text.push_str(&format!("\n… {cut} more bytes"));
                }
                // An image is a line naming it, never its bytes.
                for image in &m.images {
                    text.push('\n');
                    text.push_str(&crate::text::visible(&image.label()));
                }
                items.push(Item::User { text });
            }
            Role::Assistant => {
                if !m.text().trim().is_empty() {
                    items.push(answer(m.text()));
                }
                for c in m.calls() {
                    let id = format!("{prefix}{}", c.id);
                    items.push(call(&id, &c.function.name, &c.function.arguments));
                    let Some((_, theirs)) = subagents.iter().find(|(call, _)| *call == id) else {
                        continue;
                    };
                    let description =
                        serde_json::from_str::<serde_json::Value>(&c.function.arguments)
                            .ok()
                            .and_then(|v| v.get("description")?.as_str().map(str::to_owned))
                            .unwrap_or_default();
                    let (child, omitted) = conversation(theirs, subagents, &format!("{id}/"));
                    items.push(Item::Subagent {
                        call_id: id,
                        description: crate::text::one_line(&description, 200),
                        items: child,
                        omitted,
                    });
                }
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let name = names
                    .get(id)
                    .copied()
                    .or(m.name.as_deref())
                    .unwrap_or("tool");
                // The journal keeps no error flag; as the REPL's replay, a
                // saved result reads as output (a command's exit status is
                // in its text and still shows). A call a hook stopped never
                // ran, and its text says so: it shows as failed.
                let blocked = m.text().starts_with(HOOK_BLOCKED);
                items.push(result(&format!("{prefix}{id}"), name, m.text(), blocked));
            }
        }
    }
    (items, skip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;
    use serde_json::json;

    #[test]
    fn a_history_reads_as_the_terminal_shows_it() {
        let mut asked = Message::assistant("Let me look.");
        asked.tool_calls = Some(vec![ToolCall::new(
            "c1",
            "run_shell",
            json!({ "command": "ls -l" }).to_string(),
        )]);
        let out: String = (1..=10).map(|i| format!("file{i}\n")).collect();
        let messages = vec![
            Message::user("what is here? <b>"),
            asked,
            Message::tool_result("c1", format!("exit code: 0\nstdout:\n{out}")),
            Message::assistant("| a | b |\n|---|---|\n| 1 | 2 |"),
        ];
        let (items, omitted) = history(&messages, &[]);
        assert_eq!(omitted, 0);
        assert_eq!(
            items[0],
            Item::User {
                text: "what is here? <b>".into()
            }
        );
        assert!(matches!(&items[1], Item::Answer { html } if html == "<p>Let me look.</p>\n"));
        assert!(
            matches!(&items[2], Item::Call { lines, name, .. } if lines == &["$ ls -l"] && name == "run_shell")
        );
        let Item::Result {
            lines,
            shown,
            more,
            failure,
            name,
            ..
        } = &items[3]
        else {
            panic!("{:?}", items[3]);
        };
        assert_eq!(name, "run_shell", "named by its call");
        assert_eq!(lines.len(), 10);
        assert_eq!((*shown, *more, failure), (4, 0, &None));
        assert!(matches!(&items[4], Item::Answer { html } if html.starts_with("<table>")));
    }

    #[test]
    fn an_image_is_a_line_naming_it_never_its_bytes() {
        let image =
            crate::wire::Image::from_bytes("shot.png", b"\x89PNG\r\n\x1a\nxyz".to_vec()).unwrap();
        let (items, _) = history(&[Message::user_with_images("look", vec![image])], &[]);
        assert_eq!(
            items,
            [Item::User {
                text: "look\n[image: shot.png 11 bytes]".into()
            }]
        );
    }

    #[test]
    fn a_sub_agent_and_its_own_child_fold_under_the_calls_that_ran_them() {
        let run = |id: &str, what: &str| {
            let mut m = Message::assistant("");
            m.tool_calls = Some(vec![ToolCall::new(
                id,
                "agent",
                json!({ "description": what, "prompt": "look" }).to_string(),
            )]);
            m
        };
        let mut looked = Message::assistant("");
        looked.tool_calls = Some(vec![ToolCall::new(
            "k1",
            "run_shell",
            json!({ "command": "ls" }).to_string(),
        )]);
        let messages = vec![
            Message::user("go"),
            run("a1", "survey\u{1b}[2J"),
            Message::tool_result("a1", "found two"),
        ];
        let subagents = vec![
            (
                "a1".to_string(),
                vec![
                    Message::user("look"),
                    looked,
                    Message::tool_result("k1", "x\ny"),
                    run("g1", "deeper"),
                    Message::tool_result("g1", "none"),
                ],
            ),
            (
                "a1/g1".to_string(),
                vec![Message::assistant("nothing below")],
            ),
        ];
        let (items, _) = history(&messages, &subagents);
        assert!(matches!(&items[1], Item::Call { call_id, .. } if call_id == "a1"));
        let Item::Subagent {
            call_id,
            description,
            items: child,
            ..
        } = &items[2]
        else {
            panic!("{items:?}")
        };
        assert_eq!(call_id, "a1");
        assert!(!description.contains('\u{1b}'), "{description:?}");
        assert!(matches!(&items[3], Item::Result { call_id, .. } if call_id == "a1"));
        assert!(matches!(&child[1], Item::Call { call_id, .. } if call_id == "a1/k1"));
        assert!(matches!(&child[2], Item::Result { call_id, .. } if call_id == "a1/k1"));
        let Item::Subagent {
            call_id,
            items: grand,
            ..
        } = &child[4]
        else {
            panic!("{child:?}")
        };
        assert_eq!(call_id, "a1/g1");
        assert!(matches!(&grand[0], Item::Answer { html } if html.contains("nothing below")));
        // Without the sub-agents it is the plain history.
        assert_eq!(history(&messages, &[]).0.len(), 3);
    }

    #[test]
    fn a_long_history_keeps_its_latest_messages() {
        let messages: Vec<Message> = (0..MAX_MESSAGES + 5)
            .map(|i| Message::user(format!("m{i}")))
            .collect();
        let (items, omitted) = history(&messages, &[]);
        assert_eq!(omitted, 5);
        assert_eq!(items.len(), MAX_MESSAGES);
        assert_eq!(items[0], Item::User { text: "m5".into() });
    }

    #[test]
    fn a_huge_answer_is_cut_with_a_note() {
        let text = "é".repeat(MAX_ANSWER_BYTES);
        let Item::Answer { html } = answer(&text) else {
            panic!()
        };
        assert!(html.len() < MAX_ANSWER_BYTES + 200);
        assert!(html.ends_with(&format!(
            "<p class=\"cut\">… {} more bytes not shown</p>\n",
            MAX_ANSWER_BYTES
        )));
    }

    #[test]
    fn a_call_a_hook_blocked_shows_as_failed_live_and_saved() {
        let mut asked = Message::assistant("");
        asked.tool_calls = Some(vec![ToolCall::new(
            "c1",
            "run_shell",
            json!({ "command": "rm -r build" }).to_string(),
        )]);
        let text = "blocked by a PreToolUse hook: no rm in this repo";
        let (items, _) = history(&[asked, Message::tool_result("c1", text)], &[]);
        let Item::Result { failure, lines, .. } = &items[1] else {
            panic!("{items:?}")
        };
        assert_eq!(failure.as_deref(), Some("blocked by a hook"));
        assert_eq!(lines, &[text]);
        // Live, the event says it is an error; the page names why.
        let Item::Result { failure, .. } = result("c1", "run_shell", text, true) else {
            panic!()
        };
        assert_eq!(failure.as_deref(), Some("blocked by a hook"));
        // A saved result that only mentions a hook is output.
        let said = "exit code: 0\nstdout:\nblocked by a PreToolUse hook: x";
        let (items, _) = history(&[Message::tool_result("c2", said)], &[]);
        assert!(matches!(&items[0], Item::Result { failure: None, .. }));
    }

    #[test]
    fn a_write_is_its_path_and_size_not_its_content() {
        let args = json!({ "path": "a.txt", "content": "x\ny\n" }).to_string();
        let Render::Call { .. } = serde_json::from_value::<Render>(json!({
            "call": { "call_id": "w", "name": "write_file", "arguments": args }
        }))
        .unwrap() else {
            panic!()
        };
        let item = call("w", "write_file", &args);
        assert!(
            matches!(item, Item::Call { lines, .. } if lines == ["write a.txt (2 lines, 4 B)"])
        );
    }
}
