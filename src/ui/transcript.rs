//! A saved conversation as a Markdown document a person reads (`buddy
//! export`, the REPL's `/export`): the title, then each prompt, answer and
//! compaction summary in order, and each tool call folded with its result in
//! `<details>`.
//!
//! Owns the document's shape and keeping it intact whatever the texts hold:
//! a fence left open by an answer is closed where the answer ends, a line
//! that would open a raw HTML block is escaped, code is fenced longer than
//! any backtick run inside it, and `</details>` in arguments or results
//! cannot close its fold early. It does not read sessions (`app::export`
//! does) and takes the items a resume replays (`agent::replay`), whole.

use crate::agent::compact::SUMMARY_MARKER;
use crate::agent::protocol::{Replayed, ReplayedCall};
use crate::ui::toolview::call_lines;
use std::collections::VecDeque;
use std::fmt::Write;

/// Bytes of one result or one call's arguments written; the rest is cut
/// with a note. Results are capped far below this when a tool makes them,
/// so only arguments (a whole file written) usually reach it.
const MAX_BLOCK_BYTES: usize = 16 * 1024;
/// Characters of a call's line in its `<summary>`.
const SUMMARY_CHARS: usize = 120;

/// The conversation `items` under the heading `title`.
pub fn markdown(title: &str, items: &[Replayed]) -> String {
    let mut out = String::new();
    let title = if title.trim().is_empty() {
        "buddy session"
    } else {
        title
    };
    let _ = writeln!(
        out,
        "# {}\n",
        escape_inline(&crate::text::one_line(title, 200))
    );
    push_items(&mut out, items, "##");
    out
}

/// `items` with `heading` for the prompts and answers; a sub-agent's
/// conversation nested one level down in a fold of its own.
fn push_items(out: &mut String, items: &[Replayed], heading: &str) {
    // Calls wait here for their results, which follow in the calls' order.
    let mut pending: VecDeque<&ReplayedCall> = VecDeque::new();
    for item in items {
        // A sub-agent comes right after its call's result, among the
        // results of the reply's other calls.
        if !matches!(item, Replayed::Tool { .. } | Replayed::Subagent { .. }) {
            flush_unanswered(out, &mut pending);
        }
        match item {
            Replayed::User { text, .. } => match text.strip_prefix(SUMMARY_MARKER) {
                Some(body) => {
                    let _ = write!(out, "{heading} Summary of the earlier conversation\n\n");
                    out.push_str(
                        "*Written by the assistant when the context filled up; it stands for the messages before it.*\n\n",
                    );
                    push_prose(out, body.trim_start_matches('\n'));
                }
                None => {
                    let _ = write!(out, "{heading} You\n\n");
                    push_prose(out, text);
                }
            },
            Replayed::Assistant { text, calls } => {
                if !text.trim().is_empty() {
                    let _ = write!(out, "{heading} Assistant\n\n");
                    push_prose(out, text);
                }
                pending.extend(calls);
            }
            Replayed::Tool { name, text } => {
                let call = pending.pop_front();
                push_call(out, name, call.map(|c| c.arguments.as_str()), Some(text));
            }
            Replayed::Subagent { description, items } => {
                let _ = write!(
                    out,
                    "<details>\n<summary>sub-agent: {}</summary>\n\n",
                    escape_html(&crate::text::one_line(description, SUMMARY_CHARS)),
                );
                push_items(out, items, &format!("{heading}#"));
                out.push_str("</details>\n\n");
            }
        }
    }
    flush_unanswered(out, &mut pending);
}

/// Calls that got no result (the history was cut after them) still show.
fn flush_unanswered(out: &mut String, pending: &mut VecDeque<&ReplayedCall>) {
    while let Some(c) = pending.pop_front() {
        push_call(out, &c.name, Some(&c.arguments), None);
    }
}

/// One call and its result folded in `<details>`, its line as the summary.
fn push_call(out: &mut String, name: &str, arguments: Option<&str>, result: Option<&str>) {
    let line = arguments
        .and_then(|a| call_lines(name, a).into_iter().next())
        .unwrap_or_else(|| name.to_string());
    let _ = write!(
        out,
        "<details>\n<summary>{}: {}</summary>\n\n",
        escape_html(&crate::text::one_line(name, 80)),
        escape_html(&crate::text::one_line(&line, SUMMARY_CHARS)),
    );
    if let Some(arguments) = arguments {
        // Pretty JSON reads better than the model's one line; anything else as sent.
        let pretty = serde_json::from_str::<serde_json::Value>(arguments)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| arguments.to_string());
        out.push_str("Arguments:\n\n");
        push_code(out, "json", &pretty);
    }
    match result {
        Some(text) => {
            out.push_str("Result:\n\n");
            push_code(out, "text", text);
        }
        None => out.push_str("*No result was recorded.*\n\n"),
    }
    out.push_str("</details>\n\n");
}

/// `text` in a fence longer than any backtick run in it, bounded, with
/// `</details>` unable to end the fold around it.
fn push_code(out: &mut String, lang: &str, text: &str) {
    let (text, cut) = crate::text::head(text, MAX_BLOCK_BYTES);
    let text = defuse_details(text);
    let fence = "`".repeat(longest_run(&text, '`').max(2) + 1);
    let _ = writeln!(out, "{fence}{lang}");
    out.push_str(&text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{fence}\n");
    if cut > 0 {
        let _ = writeln!(out, "*… {cut} more bytes not shown.*\n");
    }
}

/// A prompt or an answer as Markdown, kept from spilling into what follows:
/// a fence it leaves open is closed, and a line that would start a raw HTML
/// block (which can run to the end of the document) has its `<` escaped.
fn push_prose(out: &mut String, text: &str) {
    let mut open: Option<(char, usize)> = None;
    for line in text.trim_end().lines() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        if indent <= 3 {
            if let Some(fence) = fence_of(rest) {
                open = match open {
                    None => Some(fence),
                    // A closing fence: the same character, at least as long,
                    // nothing after it.
                    Some((c, n))
                        if fence.0 == c
                            && fence.1 >= n
                            && rest.trim_end().chars().all(|x| x == c) =>
                    {
                        None
                    }
                    still => still,
                };
            } else if open.is_none() && rest.starts_with('<') {
                out.push_str(&line[..indent]);
                out.push('\\');
                out.push_str(rest);
                out.push('\n');
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    if let Some((c, n)) = open {
        out.push_str(&c.to_string().repeat(n));
        out.push('\n');
    }
    out.push('\n');
}

/// The fence character and length a line opens with (three or more
/// backticks or tildes), if any.
fn fence_of(line: &str) -> Option<(char, usize)> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = line.chars().take_while(|x| *x == c).count();
    // A backtick fence's info string may not hold a backtick.
    if n < 3 || (c == '`' && line[n..].contains('`')) {
        return None;
    }
    Some((c, n))
}

/// The longest run of `c` in `s`.
fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for x in s.chars() {
        run = if x == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// `</details` (any case) with its slash escaped, so no renderer that scans
/// for the tag ends the fold inside a result.
fn defuse_details(s: &str) -> String {
    const TAG: &str = "</details";
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (at, _) in lower.match_indices(TAG) {
        out.push_str(&s[last..at]);
        out.push_str("<\\/");
        out.push_str(&s[at + 2..at + TAG.len()]);
        last = at + TAG.len();
    }
    out.push_str(&s[last..]);
    out
}

/// Text for inside an HTML element (the `<summary>`).
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// One line as literal Markdown text (the title): each mark that can start
/// emphasis, code, a link, HTML, an entity or a table cell backslash-escaped
/// (CommonMark allows it for any ASCII punctuation; the rest stay plain to read).
fn escape_inline(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\`*_[]<>#&|~!".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ReplayedCall {
        ReplayedCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn a_conversation_reads_in_order_with_calls_folded() {
        let items = [
            Replayed::User {
                text: "list it".into(),
                attached: 0,
            },
            Replayed::Assistant {
                text: String::new(),
                calls: vec![call("run_shell", r#"{"command":"ls"}"#)],
            },
            Replayed::Tool {
                name: "run_shell".into(),
                text: "exit code: 0\nstdout:\na.txt".into(),
            },
            Replayed::Assistant {
                text: "There is **a.txt**.".into(),
                calls: vec![],
            },
        ];
        let md = markdown("list it", &items);
        let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s:?} not in\n{md}"));
        assert!(md.starts_with("# list it\n\n"));
        assert!(at("## You\n\nlist it") < at("<details>\n<summary>run_shell: $ ls</summary>"));
        assert!(at("\"command\": \"ls\"") < at("a.txt\n```\n\n</details>"));
        assert!(at("</details>") < at("## Assistant\n\nThere is **a.txt**."));
    }

    #[test]
    fn a_sub_agent_nests_under_its_call_one_heading_down() {
        let items = [
            Replayed::User {
                text: "find it".into(),
                attached: 0,
            },
            Replayed::Assistant {
                text: String::new(),
                calls: vec![
                    call("agent", r#"{"description":"look","prompt":"where?"}"#),
                    call("time", "{}"),
                ],
            },
            Replayed::Tool {
                name: "agent".into(),
                text: "in a.rs".into(),
            },
            Replayed::Subagent {
                description: "look <here>".into(),
                items: vec![
                    Replayed::User {
                        text: "where?".into(),
                        attached: 0,
                    },
                    Replayed::Assistant {
                        text: "in a.rs".into(),
                        calls: vec![],
                    },
                ],
            },
            Replayed::Tool {
                name: "time".into(),
                text: "noon".into(),
            },
        ];
        let md = markdown("find it", &items);
        let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s:?} not in\n{md}"));
        assert!(at("<summary>agent: ") < at("<summary>sub-agent: look &lt;here&gt;</summary>"));
        assert!(at("sub-agent: look") < at("### You\n\nwhere?"));
        assert!(at("### Assistant\n\nin a.rs") < at("<summary>time: "));
        // The second call keeps its own result: the child did not end the reply's calls.
        assert!(!md.contains("No result was recorded"), "{md}");
    }

    #[test]
    fn a_fence_is_longer_than_any_backtick_run_inside() {
        let mut out = String::new();
        push_code(&mut out, "text", "a ```` b\n```\n");
        assert!(out.starts_with("`````text\n"), "{out}");
        assert!(out.ends_with("\n`````\n\n"), "{out}");
        let mut out = String::new();
        push_code(&mut out, "text", "plain");
        assert_eq!(out, "```text\nplain\n```\n\n");
    }

    #[test]
    fn details_in_a_result_cannot_close_the_fold() {
        let items = [
            Replayed::Assistant {
                text: String::new(),
                calls: vec![call("read_file", r#"{"path":"x.html"}"#)],
            },
            Replayed::Tool {
                name: "read_file".into(),
                text: "</details>\n</DETAILS >\n<summary>x</summary>".into(),
            },
        ];
        let md = markdown("t", &items);
        assert_eq!(md.matches("</details>").count(), 1, "{md}");
        assert_eq!(md.to_ascii_lowercase().matches("</details").count(), 1);
        assert!(md.contains("<\\/details>\n<\\/DETAILS >"), "{md}");
    }

    #[test]
    fn an_open_fence_in_an_answer_is_closed_where_it_ends() {
        let mut out = String::new();
        push_prose(&mut out, "look:\n~~~~rust\nfn main() {}\n```\n");
        assert_eq!(out, "look:\n~~~~rust\nfn main() {}\n```\n~~~~\n\n");
        // A closed fence is left alone.
        let mut out = String::new();
        push_prose(&mut out, "```\nx\n```");
        assert_eq!(out, "```\nx\n```\n\n");
    }

    #[test]
    fn a_line_that_would_open_raw_html_is_escaped_outside_code() {
        let mut out = String::new();
        push_prose(&mut out, "<pre>\nrest\n```\n<pre>\n```\n  <!-- x");
        assert_eq!(out, "\\<pre>\nrest\n```\n<pre>\n```\n  \\<!-- x\n\n");
    }

    #[test]
    fn summary_and_title_text_cannot_make_markup() {
        let items = [
            Replayed::Assistant {
                text: String::new(),
                calls: vec![call("run_shell", r#"{"command":"echo '</summary><b>&'"}"#)],
            },
            Replayed::Tool {
                name: "run_shell".into(),
                text: "ok".into(),
            },
        ];
        let md = markdown("# not a <b>heading</b>", &items);
        assert!(
            md.starts_with("# \\# not a \\<b\\>heading\\</b\\>\n"),
            "{md}"
        );
        assert!(
            md.contains("<summary>run_shell: $ echo '&lt;/summary&gt;&lt;b&gt;&amp;'</summary>"),
            "{md}"
        );
    }

    #[test]
    fn a_compaction_summary_is_marked_and_long_results_are_cut() {
        let items = [
            Replayed::User {
                text: format!("{SUMMARY_MARKER}\n- did things"),
                attached: 0,
            },
            Replayed::Assistant {
                text: String::new(),
                calls: vec![call("read_file", r#"{"path":"big"}"#)],
            },
            Replayed::Tool {
                name: "read_file".into(),
                text: "x".repeat(MAX_BLOCK_BYTES + 10),
            },
        ];
        let md = markdown("t", &items);
        assert!(md.contains("## Summary of the earlier conversation\n\n*Written"));
        assert!(md.contains("\n- did things\n"));
        assert!(!md.contains("## You"));
        assert!(md.contains("*… 10 more bytes not shown.*"), "{md}");
    }

    #[test]
    fn a_call_without_a_result_still_shows() {
        let items = [Replayed::Assistant {
            text: "trying".into(),
            calls: vec![call("run_shell", r#"{"command":"make"}"#)],
        }];
        let md = markdown("t", &items);
        assert!(md.contains("<summary>run_shell: $ make</summary>"));
        assert!(md.contains("*No result was recorded.*"));
    }
}
