//! Tool calls and results as a person reads them: `run_shell` as the command
//! it runs, `write_file` as a path and size, `grep`/`glob` as the pattern and
//! where it looks, `edit_file` and `apply_patch` as the files and the lines
//! they change, a result as its first lines and
//! how many more there were, a failed command with its exit status. Pure
//! text in, lines out (unstyled, control characters made visible); the front
//! ends add colour.

use crate::text::{clip, one_line, visible};
use serde_json::Value;

/// Lines of a multi-line command shown before `… +N more lines`.
const COMMAND_LINES: usize = 6;
/// Longest line shown; the rest of it is cut with `…`.
const LINE_CHARS: usize = 160;

/// How a tool call reads: its first line, then any continuation lines.
pub fn call_lines(name: &str, arguments: &str) -> Vec<String> {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let s = |key: &str| args.get(key).and_then(Value::as_str);
    match (name, &args) {
        ("run_shell", _) if s("command").is_some() => {
            let command = s("command").unwrap_or_default();
            let mut lines = block(command, COMMAND_LINES);
            if let Some(first) = lines.first_mut() {
                *first = format!("$ {first}");
            }
            for l in lines.iter_mut().skip(1) {
                *l = format!("  {l}");
            }
            lines
        }
        ("write_file", _) if s("path").is_some() => {
            let content = s("content").unwrap_or_default();
            let n = content.lines().count();
            vec![format!(
                "write {} ({n} line{}, {})",
                shown(s("path").unwrap_or_default()),
                if n == 1 { "" } else { "s" },
                bytes(content.len())
            )]
        }
        ("edit_file", _) if s("path").is_some() => edit_lines(&args),
        ("apply_patch", _) if s("input").or(s("patch")).is_some() => {
            patch_lines(s("input").or(s("patch")).unwrap_or_default())
        }
        ("read_file", _) if s("path").is_some() => {
            let n = |key: &str| args.get(key).and_then(Value::as_u64);
            let window = match (n("offset"), n("limit")) {
                (None, None) => String::new(),
                (Some(from), None) => format!(" (from line {from})"),
                (from, Some(limit)) => {
                    let from = from.unwrap_or(1);
                    format!(
                        " (lines {from}-{})",
                        from.saturating_add(limit.saturating_sub(1))
                    )
                }
            };
            vec![format!(
                "read {}{window}",
                shown(s("path").unwrap_or_default())
            )]
        }
        ("grep" | "glob", _) if s("pattern").is_some() => {
            let within = s("glob").map(|g| format!(" ({})", one_line(g, 60)));
            vec![format!(
                "{name} {} in {}{}",
                one_line(s("pattern").unwrap_or_default(), 80),
                shown(s("path").unwrap_or(".")),
                within.unwrap_or_default()
            )]
        }
        ("fetch_url", _) if s("url").is_some() => {
            vec![format!("fetch {}", shown(s("url").unwrap_or_default()))]
        }
        ("web_search", _) if s("query").is_some() => {
            vec![format!(
                "search \"{}\"",
                shown(s("query").unwrap_or_default())
            )]
        }
        ("send-keys", _) => {
            let mut what = Vec::new();
            if let Some(t) = s("text") {
                what.push(format!("\"{}\"", shown(t)));
            }
            if let Some(keys) = args.get("keys").and_then(Value::as_array) {
                what.extend(keys.iter().filter_map(Value::as_str).map(shown));
            }
            if args.get("enter").and_then(Value::as_bool) == Some(true) {
                what.push("Enter".into());
            }
            vec![format!("keys{} {}", pane(s("pane")), what.join(" "))]
        }
        ("capture-pane", _) => vec![format!("read the pane{}", pane(s("pane")))],
        ("time", _) => vec!["time".into()],
        _ => {
            let compact = match &args {
                Value::Null => arguments.to_string(),
                v => v.to_string(),
            };
            vec![format!("{name} {}", shown(&compact))]
        }
    }
}

/// `edit_file` as the file and its change: removed lines, then added ones.
fn edit_lines(args: &Value) -> Vec<String> {
    let s = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let path = shown(&s(args, "path").unwrap_or_default());
    let edits: Vec<(String, String)> = match args.get("edits").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .map(|e| {
                (
                    s(e, "old_string").unwrap_or_default(),
                    s(e, "new_string").unwrap_or_default(),
                )
            })
            .collect(),
        None => vec![(
            s(args, "old_string").unwrap_or_default(),
            s(args, "new_string").unwrap_or_default(),
        )],
    };
    let n = edits.len();
    let mut first = format!("edit {path}");
    if n > 1 {
        first.push_str(&format!(" ({n} edits)"));
    }
    let changed = edits.iter().flat_map(|(old, new)| {
        let gone = old.lines().map(|l| format!("  - {}", shown(l)));
        let came = new.lines().map(|l| format!("  + {}", shown(l)));
        gone.chain(came).collect::<Vec<_>>()
    });
    let mut lines = vec![first];
    lines.extend(capped(changed.collect()));
    lines
}

/// `apply_patch` as what it does to which files, then its changed lines.
fn patch_lines(patch: &str) -> Vec<String> {
    let mut files = Vec::new();
    let mut changed = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        let op = [
            ("*** Add File: ", "add"),
            ("*** Update File: ", "update"),
            ("*** Delete File: ", "delete"),
            ("*** Move to: ", "move to"),
        ]
        .iter()
        .find_map(|(mark, what)| {
            line.strip_prefix(mark)
                .map(|p| format!("{what} {}", shown(p.trim())))
        });
        match op {
            Some(op) => files.push(op),
            None if line.starts_with("***") => {}
            None if line.starts_with('-') || line.starts_with('+') => {
                changed.push(format!("  {} {}", &line[..1], shown(&line[1..])));
            }
            None => {}
        }
    }
    let mut lines = vec![if files.is_empty() {
        "patch".to_string()
    } else {
        format!("patch: {}", clip(&files.join(", "), LINE_CHARS))
    }];
    lines.extend(capped(changed));
    lines
}

/// The first `COMMAND_LINES` lines, then how many more there were.
fn capped(mut lines: Vec<String>) -> Vec<String> {
    if lines.len() > COMMAND_LINES {
        let more = lines.len() - COMMAND_LINES;
        lines.truncate(COMMAND_LINES);
        lines.push(format!("  … +{more} more lines"));
    }
    lines
}

/// What a result shows: a few lines of it, how many were left out, and
/// whether it failed (an error, a command's non-zero exit, a timeout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultView {
    pub lines: Vec<String>,
    pub more: usize,
    /// `Some("exit 2")`, `Some("timed out")`, `Some("error")` when it failed.
    pub failure: Option<String>,
}

pub fn result_view(name: &str, text: &str, is_error: bool, max_lines: usize) -> ResultView {
    if name == "run_shell" && !is_error {
        if let Some(v) = shell_result(text, max_lines) {
            return v;
        }
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let more = lines.len().saturating_sub(max_lines);
    ResultView {
        lines: lines.iter().take(max_lines).map(|l| shown(l)).collect(),
        more,
        failure: is_error.then(|| "error".to_string()),
    }
}

/// `run_shell` results read `exit code: N` (or a timeout), then `stdout:` and
/// possibly `stderr:` sections; shown as the output lines and the status.
fn shell_result(text: &str, max_lines: usize) -> Option<ResultView> {
    let mut lines = text.lines();
    let header = lines.next()?;
    let failure = if let Some(code) = header.strip_prefix("exit code: ") {
        match code.split_whitespace().next() {
            Some("0") => None,
            Some("none") => Some(
                code.trim_start_matches("none ")
                    .trim_matches(['(', ')'])
                    .to_string(),
            ),
            Some(c) => Some(format!("exit {c}")),
            None => None,
        }
    } else if header.starts_with("timed out") {
        Some("timed out".to_string())
    } else {
        return None;
    };
    let output: Vec<&str> = lines
        .filter(|l| !matches!(*l, "stdout:" | "stderr:" | "(empty)"))
        .collect();
    let more = output.len().saturating_sub(max_lines);
    Some(ResultView {
        lines: output.iter().take(max_lines).map(|l| shown(l)).collect(),
        more,
        failure,
    })
}

/// Lines of a result shown under its call.
pub const RESULT_LINES: usize = 4;

/// A result as styled lines for a front end: `  ← ` before the first,
/// failures in the error colour ending in their status, and `+N more lines`.
pub fn result_lines(
    name: &str,
    text: &str,
    is_error: bool,
    st: super::style::Style,
) -> Vec<String> {
    let v = result_view(name, text, is_error, RESULT_LINES);
    let paint = |s: &str| {
        if v.failure.is_some() {
            st.error(s)
        } else {
            st.dim(s)
        }
    };
    let mut out: Vec<String> = v
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| paint(&format!("{} {l}", if i == 0 { "  ←" } else { "   " })))
        .collect();
    if v.more > 0 {
        out.push(st.dim(&format!(
            "    … +{} more line{}",
            v.more,
            if v.more == 1 { "" } else { "s" }
        )));
    }
    match &v.failure {
        Some(f) => out.push(st.error(&format!("  ✗ {name}: {f}"))),
        None if out.is_empty() => out.push(st.dim("  ← (no output)")),
        None => {}
    }
    out
}

/// The first `max` lines of a block, then `… +N more lines`.
fn block(text: &str, max: usize) -> Vec<String> {
    let all: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = all.iter().take(max).map(|l| shown(l)).collect();
    if all.len() > max {
        out.push(format!("… +{} more lines", all.len() - max));
    }
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

fn shown(s: &str) -> String {
    clip(&visible(s).replace('\t', "    "), LINE_CHARS).into_owned()
}

/// A running call's output tail (`tool_progress`) as lines to show under
/// its call while it runs: each made visible, tabs expanded, indented by
/// `indent` and cut to fit `width` columns without wrapping. Unstyled.
pub fn live_lines(tail: &str, indent: &str, width: usize) -> Vec<String> {
    use unicode_width::UnicodeWidthChar;
    let room = width.saturating_sub(indent.chars().count() + 1).max(1);
    tail.lines()
        .map(|line| {
            let text = visible(line).replace('\t', "    ");
            let mut out = String::from(indent);
            let mut used = 0;
            for c in text.chars() {
                let w = c.width().unwrap_or(0);
                if used + w > room {
                    out.push('…');
                    break;
                }
                used += w;
                out.push(c);
            }
            out
        })
        .collect()
}

fn pane(p: Option<&str>) -> String {
    p.map(|p| format!(" → pane {}", one_line(p, 40)))
        .unwrap_or_default()
}

fn bytes(n: usize) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> String {
        v.to_string()
    }

    #[test]
    fn live_lines_are_visible_and_fit_the_width() {
        let lines = live_lines("ok\n\u{1b}[2Jwide 漢字漢字\ta", "  ", 12);
        assert_eq!(lines, vec!["  ok", "  ␛[2Jwide …"]);
        assert_eq!(live_lines("", "  ", 80), Vec::<String>::new());
    }

    #[test]
    fn shell_calls_read_as_the_command() {
        assert_eq!(
            call_lines("run_shell", &args(json!({"command": "ls -la"}))),
            vec!["$ ls -la"]
        );
        let multi = call_lines(
            "run_shell",
            &args(json!({"command": "cat <<EOF > x\na\nb\nc\nd\ne\nf\nEOF"})),
        );
        assert_eq!(multi[0], "$ cat <<EOF > x");
        assert_eq!(multi[1], "  a");
        assert_eq!(multi.last().map(String::as_str), Some("  … +2 more lines"));
        let evil = call_lines("run_shell", &args(json!({"command": "a\u{1b}[2Jb"})));
        assert_eq!(evil, vec!["$ a␛[2Jb"]);
    }

    #[test]
    fn file_and_web_calls_read_as_what_they_touch() {
        assert_eq!(
            call_lines(
                "write_file",
                &args(json!({"path": "src/x.rs", "content": "a\nb\n"}))
            ),
            vec!["write src/x.rs (2 lines, 4 B)"]
        );
        assert_eq!(
            call_lines("read_file", &args(json!({"path": "Cargo.toml"}))),
            vec!["read Cargo.toml"]
        );
        assert_eq!(
            call_lines(
                "read_file",
                &args(json!({"path": "big.rs", "offset": 200, "limit": 50}))
            ),
            vec!["read big.rs (lines 200-249)"]
        );
        assert_eq!(
            call_lines(
                "grep",
                &args(json!({"pattern": "fn \\w+\u{1b}", "path": "src", "glob": "*.rs"}))
            ),
            vec!["grep fn \\w+␛ in src (*.rs)"]
        );
        assert_eq!(
            call_lines("glob", &args(json!({"pattern": "**/*.toml"}))),
            vec!["glob **/*.toml in ."]
        );
        assert_eq!(
            call_lines("web_search", &args(json!({"query": "rust sse"}))),
            vec!["search \"rust sse\""]
        );
        assert_eq!(
            call_lines("send-keys", &args(json!({"text": "q", "enter": true}))),
            vec!["keys \"q\" Enter"]
        );
        assert_eq!(
            call_lines("mystery", "{\"a\":1}"),
            vec!["mystery {\"a\":1}"]
        );
        assert_eq!(
            call_lines("run_shell", "not json"),
            vec!["run_shell not json"]
        );
    }

    #[test]
    fn edits_and_patches_read_as_their_changes() {
        assert_eq!(
            call_lines(
                "edit_file",
                &args(
                    json!({"path": "src/x.rs", "old_string": "a\nb", "new_string": "a\u{1b}[2J"})
                )
            ),
            vec!["edit src/x.rs", "  - a", "  - b", "  + a␛[2J"]
        );
        let many = call_lines(
            "edit_file",
            &args(json!({"path": "x", "edits": [
                {"old_string": "1\n2\n3", "new_string": "4\n5"},
                {"old_string": "6", "new_string": "7"}
            ]})),
        );
        assert_eq!(many[0], "edit x (2 edits)");
        assert_eq!(many.len(), 1 + COMMAND_LINES + 1);
        assert_eq!(many.last().map(String::as_str), Some("  … +1 more lines"));
        let patch = "*** Begin Patch\n*** Update File: a.rs\n@@ fn f\n ctx\n-old\n+new\n*** Add File: b.rs\n+hi\n*** End Patch";
        assert_eq!(
            call_lines("apply_patch", &args(json!({ "input": patch }))),
            vec![
                "patch: update a.rs, add b.rs",
                "  - old",
                "  + new",
                "  + hi"
            ]
        );
    }

    #[test]
    fn shell_results_show_output_lines_and_failures() {
        let ok = result_view(
            "run_shell",
            "exit code: 0\nstdout:\na\nb\nc\nd\ne",
            false,
            3,
        );
        assert_eq!(ok.lines, vec!["a", "b", "c"]);
        assert_eq!(ok.more, 2);
        assert_eq!(ok.failure, None);
        let bad = result_view(
            "run_shell",
            "exit code: 2\nstdout:\n(empty)\nstderr:\nno such file",
            false,
            3,
        );
        assert_eq!(bad.lines, vec!["no such file"]);
        assert_eq!(bad.failure.as_deref(), Some("exit 2"));
        let killed = result_view(
            "run_shell",
            "exit code: none (killed by signal 9)\nstdout:\n(empty)",
            false,
            3,
        );
        assert_eq!(killed.failure.as_deref(), Some("killed by signal 9"));
        let slow = result_view(
            "run_shell",
            "timed out after 2 s; the command was killed\nstdout:\nx",
            false,
            3,
        );
        assert_eq!(slow.failure.as_deref(), Some("timed out"));
    }

    #[test]
    fn other_results_show_their_first_lines_and_errors() {
        let v = result_view("read_file", "1\n2\n3\n4", false, 2);
        assert_eq!((v.lines.len(), v.more, v.failure), (2, 2, None));
        let e = result_view("write_file", "cannot write x: denied", true, 2);
        assert_eq!(e.failure.as_deref(), Some("error"));
        assert_eq!(e.lines, vec!["cannot write x: denied"]);
    }
}
