//! What the REPL prints when it continues a saved session: the conversation's
//! tail as the user saw it live (prompts echoed after the prompt mark,
//! answers, tool calls in their compact form), bounded to a few screenfuls,
//! with a dim "… N earlier messages" line when cut. Pure: the event's data
//! and the terminal's size in, lines out. It does not load sessions; the
//! agent's `SessionResumed` event brings the items.

use crate::agent::protocol::{EventKind, Replayed};
use crate::text::visible;
use crate::ui::markdown::MarkdownRenderer;
use crate::ui::style::Style;
use crate::ui::toolview;
use unicode_width::UnicodeWidthChar;

/// How replayed lines look: as the REPL draws the same things live.
pub struct Look<'a> {
    pub style: Style,
    /// The input prompt (`> `) that marks a user's message.
    pub prompt: &'a str,
    pub show_tool_calls: bool,
}

/// Screenfuls of replay above the first prompt; the rest of the session is a
/// `/session` or a scroll away only in the file, so keep enough to reorient.
const SCREENS: usize = 2;

/// The whole resumed notice for a `SessionResumed` event: warnings, the
/// model note, the header line, then the replayed tail fitting in
/// `SCREENS` screens of `rows` rows of `cols` columns. `None` for other events.
pub fn resumed(ev: &EventKind, look: &Look, cols: usize, rows: usize) -> Option<String> {
    let EventKind::SessionResumed {
        id,
        messages,
        warnings,
        note,
        replay,
        ..
    } = ev
    else {
        return None;
    };
    if replay.is_empty() {
        // Nothing to replay (an empty session): the plain notice says it all.
        return crate::ui::resumed_text(ev, look.style);
    }
    let st = look.style;
    let mut out: Vec<String> = warnings
        .iter()
        .map(|w| format!("{} {}", st.warning("warning:"), visible(w)))
        .collect();
    if let Some(n) = note {
        out.push(st.dim(&visible(n)));
    }
    out.push(format!(
        "{} session {id} ({messages} messages)",
        st.accent("resumed")
    ));
    let budget = (rows.max(4) * SCREENS).saturating_sub(out.len() + 2);
    out.extend(tail_lines(replay, *messages, look, cols.max(10), budget));
    Some(out.join("\n"))
}

/// The last items' lines that fit in `budget` terminal rows, after a dim
/// line saying how many of `total` messages are not shown.
pub fn tail_lines(
    items: &[Replayed],
    total: usize,
    look: &Look,
    cols: usize,
    budget: usize,
) -> Vec<String> {
    let mut blocks: Vec<Vec<String>> = Vec::new();
    let mut used = 0;
    let mut shown = 0;
    for item in items.iter().rev() {
        let lines = item_lines(item, look, cols);
        // Messages never shown (files attached to a prompt) go with their item.
        let stands_for = 1 + match item {
            Replayed::User { attached, .. } => *attached,
            _ => 0,
        };
        let rows: usize = lines.iter().map(|l| rows_of(l, cols)).sum();
        if used + rows > budget {
            if blocks.iter().all(Vec::is_empty) && !lines.is_empty() {
                // The newest message alone is too long: its end is where the
                // user left off, so that part is shown.
                let mut part = Vec::new();
                for line in lines.iter().rev() {
                    let r = rows_of(line, cols);
                    if used + r > budget {
                        break;
                    }
                    used += r;
                    part.push(line.clone());
                }
                part.reverse();
                part.insert(0, look.style.dim("…"));
                blocks.push(part);
                shown += stands_for;
            }
            break;
        }
        used += rows;
        shown += stands_for;
        blocks.push(lines);
    }
    let mut out = Vec::new();
    let earlier = total.saturating_sub(shown);
    if earlier > 0 {
        out.push(look.style.dim(&format!(
            "… {earlier} earlier message{}",
            if earlier == 1 { "" } else { "s" }
        )));
    }
    out.extend(blocks.into_iter().rev().flatten());
    out
}

/// One message as the REPL shows it live: answers rendered as Markdown at
/// the terminal's width, like the live stream.
fn item_lines(item: &Replayed, look: &Look, cols: usize) -> Vec<String> {
    let st = look.style;
    match item {
        Replayed::User { text, .. } => {
            let text = visible(text);
            let mut lines = text.split('\n');
            let first = lines.next().unwrap_or_default();
            let mut out = vec![format!("{}{first}", st.dim(look.prompt))];
            out.extend(lines.map(String::from));
            out
        }
        Replayed::Assistant { text, calls } => {
            let mut out: Vec<String> = if text.is_empty() {
                Vec::new()
            } else {
                // The renderer makes the text visible itself.
                let mut md = MarkdownRenderer::new(cols, look.style.color);
                let mut shown = md.push(text);
                shown.push_str(&md.finish());
                shown
                    .trim_end_matches('\n')
                    .split('\n')
                    .map(String::from)
                    .collect()
            };
            if look.show_tool_calls {
                for c in calls {
                    for (i, line) in toolview::call_lines(&c.name, &c.arguments)
                        .iter()
                        .enumerate()
                    {
                        out.push(if i == 0 {
                            format!("{} {}", st.tool("▶"), st.tool(line))
                        } else {
                            format!("  {}", st.dim(line))
                        });
                    }
                }
            }
            out
        }
        Replayed::Tool { name, text } if look.show_tool_calls => {
            toolview::result_lines(name, text, false, st)
        }
        Replayed::Tool { .. } => Vec::new(),
        // Folded to a line; `/subagents` lists its tool calls.
        Replayed::Subagent { description, items } => {
            let calls: usize = items
                .iter()
                .map(|i| match i {
                    Replayed::Assistant { calls, .. } => calls.len(),
                    _ => 0,
                })
                .sum();
            vec![st.dim(&format!(
                "  ◆ sub-agent {}: {} message{}, {calls} tool call{} (Ctrl-O)",
                visible(description),
                items.len(),
                if items.len() == 1 { "" } else { "s" },
                if calls == 1 { "" } else { "s" },
            ))]
        }
    }
}

/// Terminal rows `line` takes at `cols` columns; colour codes take none.
fn rows_of(line: &str, cols: usize) -> usize {
    let mut width = 0;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // Our own SGR sequences: ESC [ … m.
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
            continue;
        }
        width += if c == '\t' { 8 } else { c.width().unwrap_or(0) };
    }
    width.div_ceil(cols).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look() -> Look<'static> {
        Look {
            style: Style::plain(),
            prompt: "> ",
            show_tool_calls: true,
        }
    }

    fn exchange(i: usize) -> [Replayed; 2] {
        [
            Replayed::User {
                text: format!("question {i}"),
                attached: 0,
            },
            Replayed::Assistant {
                text: format!("answer {i}"),
                calls: Vec::new(),
            },
        ]
    }

    #[test]
    fn a_short_session_is_replayed_whole_with_prompts_marked() {
        let items: Vec<Replayed> = (0..2).flat_map(exchange).collect();
        let lines = tail_lines(&items, 4, &look(), 80, 40);
        assert_eq!(
            lines,
            ["> question 0", "answer 0", "> question 1", "answer 1"]
        );
    }

    #[test]
    fn a_long_session_keeps_the_tail_and_counts_what_it_left_out() {
        let items: Vec<Replayed> = (0..30).flat_map(exchange).collect();
        // 400 messages in the session, 60 in the event, 10 rows to fill.
        let lines = tail_lines(&items, 400, &look(), 80, 10);
        assert_eq!(lines[0], "… 390 earlier messages");
        assert_eq!(lines.last().map(String::as_str), Some("answer 29"));
        assert_eq!(lines.len(), 11);
    }

    #[test]
    fn wrapped_lines_count_as_the_rows_they_take() {
        let long = "y".repeat(250);
        let items = vec![
            Replayed::User {
                text: "old".into(),
                attached: 0,
            },
            Replayed::Assistant {
                text: long.clone(),
                calls: Vec::new(),
            },
        ];
        // 250 columns at 100 a row are 3 rows: the prompt line does not fit in 3.
        let lines = tail_lines(&items, 2, &look(), 100, 3);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[0], "… 1 earlier message");
        assert_eq!(lines[1..].concat(), long);
    }

    #[test]
    fn tool_calls_and_results_show_compactly_and_controls_are_visible() {
        let items = vec![
            Replayed::User {
                text: "list\x1b[2J".into(),
                attached: 0,
            },
            Replayed::Assistant {
                text: String::new(),
                calls: vec![crate::agent::protocol::ReplayedCall {
                    name: "run_shell".into(),
                    arguments: r#"{"command":"ls"}"#.into(),
                }],
            },
            Replayed::Tool {
                name: "run_shell".into(),
                text: "exit code: 0\nstdout:\nCargo.toml".into(),
            },
        ];
        let lines = tail_lines(&items, 3, &look(), 80, 20);
        assert_eq!(lines, ["> list␛[2J", "▶ $ ls", "  ← Cargo.toml"]);
    }

    #[test]
    fn messages_attached_unseen_count_with_their_prompt_not_as_earlier() {
        let items = vec![
            Replayed::User {
                text: "explain @main.py".into(),
                attached: 1,
            },
            Replayed::Assistant {
                text: "it prints".into(),
                calls: Vec::new(),
            },
        ];
        // Three messages in the session: the file, the prompt, the answer.
        let lines = tail_lines(&items, 3, &look(), 80, 20);
        assert_eq!(lines, ["> explain @main.py", "it prints"]);
        let lines = tail_lines(&items, 5, &look(), 80, 20);
        assert_eq!(lines[0], "… 2 earlier messages");
    }

    #[test]
    fn the_newest_message_alone_too_long_shows_its_end() {
        let text = (0..50).map(|i| format!("line {i}")).collect::<Vec<_>>();
        let items = vec![Replayed::Assistant {
            text: text.join("\n"),
            calls: Vec::new(),
        }];
        let lines = tail_lines(&items, 1, &look(), 80, 5);
        assert_eq!(
            lines,
            ["…", "line 45", "line 46", "line 47", "line 48", "line 49"]
        );
    }

    #[test]
    fn answers_are_rendered_as_markdown_like_the_live_stream() {
        let items = vec![Replayed::Assistant {
            text: "# Title\n\n- **one**\n- two".into(),
            calls: Vec::new(),
        }];
        // Without colour the structure stays as plain text, emphasis marks go.
        let lines = tail_lines(&items, 1, &look(), 80, 20);
        assert_eq!(lines, ["# Title", "", "- one", "- two"]);
        let colour = Look {
            style: Style { color: true },
            ..look()
        };
        let lines = tail_lines(&items, 1, &colour, 80, 20);
        assert!(
            lines[0].contains('\x1b') && !lines[0].contains('#'),
            "{lines:?}"
        );
        assert!(lines[2].contains('•'), "{lines:?}");
    }
}
