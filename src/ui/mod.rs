//! Front ends: renderers of the agent's event stream, each driven by the one
//! loop in `crate::drive`. `exec` is the one-shot front end (`json` its
//! `--json` form), `line` the plain line session, `repl` the interactive
//! one, `resuming` what a resume before the conversation shows; `style`
//! decides colour and formats previews; `terminal` holds the terminal's
//! facts, read once at start-up; `markdown` renders streamed answers
//! for a terminal; `session_table` lays out the listings commands print;
//! `transcript` writes a saved conversation as Markdown (`buddy export`).

pub mod exec;
pub mod json;
pub mod line;
pub mod markdown;
pub mod plan;
pub mod repl;
pub mod resuming;
pub mod session_picker;
pub mod session_table;
pub mod style;
pub mod terminal;
pub mod toolview;
pub mod transcript;

use crate::agent::protocol::{EventKind, UsageReport};
use crate::agent::tokens;
use style::Style;

/// What a front end shows when a session was resumed: warnings, a note on a
/// different model, the header line and the last exchange. `None` for other
/// events.
pub fn resumed_text(ev: &EventKind, style: Style) -> Option<String> {
    let EventKind::SessionResumed {
        id,
        messages,
        warnings,
        note,
        last_prompt,
        last_answer,
        ..
    } = ev
    else {
        return None;
    };
    let mut out: Vec<String> = warnings
        .iter()
        .map(|w| format!("{} {}", style.warning("warning:"), crate::text::visible(w)))
        .collect();
    if let Some(n) = note {
        out.push(style.dim(&crate::text::visible(n)));
    }
    let mut summary = format!(
        "{} session {id} ({messages} messages)",
        style.accent("resumed")
    );
    if let Some(p) = last_prompt {
        summary.push_str(&format!(
            "\n{} {}",
            style.dim("you:"),
            crate::text::visible(p)
        ));
        if let Some(a) = last_answer {
            summary.push_str(&format!(
                "\n{} {}",
                style.dim("buddy:"),
                crate::text::visible(a)
            ));
        }
    }
    out.push(summary);
    Some(out.join("\n"))
}

/// A command as an approval prompt shows it: exactly what will run, with
/// control characters made visible, plus a warning when there were any, so
/// `ls` drawn over a hidden `touch evil` cannot be approved by mistake.
pub fn approval_command(command: &str) -> (String, Option<&'static str>) {
    let mut shown = crate::text::visible(command).into_owned();
    // A long command shows its start, where the screen cannot scroll it
    // away: a first line followed by 200 blank ones would otherwise leave
    // only blanks on the visible rows.
    let lines = shown.split('\n').count();
    if lines > APPROVAL_LINES {
        let rest: Vec<&str> = shown.split('\n').skip(APPROVAL_LINES).collect();
        let blank = rest.iter().filter(|l| l.trim().is_empty()).count();
        let mut head: String = shown
            .split('\n')
            .take(APPROVAL_LINES)
            .collect::<Vec<_>>()
            .join("\n");
        head.push_str(&format!(
            "\n… {} more lines of this command not shown ({blank} of them blank); all of it would run",
            rest.len()
        ));
        shown = head;
    }
    let note = command.chars().any(crate::text::is_unsafe).then_some(
        "the command contains control characters (shown as ␛, ␍…); they are part of what would run",
    );
    (shown, note)
}

/// How many lines of a command an approval shows before saying how many more.
pub const APPROVAL_LINES: usize = 12;

/// How many lines of an approval's diff are shown before "… N more lines".
pub const DETAIL_LINES: usize = 40;

/// An approval's `detail` (a unified diff) as terminal lines: at most
/// `DETAIL_LINES`, added lines green and removed ones red on a colour
/// terminal, every line made safe to print.
pub fn detail_lines(detail: &str, style: Style) -> Vec<String> {
    let lines: Vec<&str> = detail.lines().collect();
    let mut out: Vec<String> = lines
        .iter()
        .take(DETAIL_LINES)
        .map(|line| {
            let safe = crate::text::visible(line);
            if line.starts_with("+++") || line.starts_with("---") || line.starts_with("@@") {
                style.dim(&safe)
            } else if line.starts_with('+') {
                style.added(&safe)
            } else if line.starts_with('-') {
                style.removed(&safe)
            } else {
                safe.into_owned()
            }
        })
        .collect();
    if lines.len() > DETAIL_LINES {
        out.push(style.dim(&format!("… {} more lines", lines.len() - DETAIL_LINES)));
    }
    out
}

/// The keys an approval prompt offers, naming exactly what "always" allows
/// (kept short: the REPL's prompt is one terminal line).
/// `remember`: the front end can save an "always" rule in the user's config
/// (the REPL), so `[r]emember` is offered beside `[a]lways`. The rule is
/// shown with what it leaves out, so the user knows what "always" covers.
pub fn approval_choices(always: Option<&str>, remember: bool) -> String {
    match always {
        Some(prefix) => format!(
            "-- approve? [y]es [n]o [a]lways `{}`{}{} [e]xplain",
            crate::text::visible(prefix),
            crate::agent::allowlist::scope_note(prefix)
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            if remember { " [r]emember" } else { "" }
        ),
        None => "-- approve? [y]es [n]o [e]xplain".to_string(),
    }
}

/// One answer to an approval prompt, typed as a key or a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Yes,
    No,
    Always,
    /// "Always", and saved in the user's config for later runs.
    Remember,
    Explain,
}

impl Choice {
    /// `y`, `yes`, `a`, `always`…; `None` for anything else.
    pub fn parse(answer: &str) -> Option<Choice> {
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Some(Choice::Yes),
            "n" | "no" => Some(Choice::No),
            "a" | "always" => Some(Choice::Always),
            "r" | "remember" => Some(Choice::Remember),
            "e" | "explain" => Some(Choice::Explain),
            _ => None,
        }
    }
}

/// A hook's block as one line for a person (`PreToolUse blocked run_shell:
/// no rm here`): bounded, control characters made visible.
pub fn hook_line(hook_event: &str, tool: Option<&str>, reason: &str) -> String {
    let what = match tool {
        Some(t) => format!("{hook_event} blocked {t}"),
        None => format!("{hook_event} blocked"),
    };
    format!(
        "{}: {}",
        crate::text::one_line(&what, 80),
        crate::text::one_line(reason, 300)
    )
}

/// The line every terminal front end shows when a model request is retried:
/// `warning: ERROR; retrying in 1.0 s (attempt 2 of 3)`, the server's text
/// made visible.
pub fn retry_line(
    style: Style,
    attempt: u32,
    max_retries: u32,
    delay_ms: u64,
    error: &str,
) -> String {
    format!(
        "{} {}; retrying in {:.1} s (attempt {attempt} of {max_retries})",
        style.warning("warning:"),
        crate::text::visible(error),
        delay_ms as f64 / 1000.0
    )
}

/// The token (and cost) line a terminal front end shows after a model
/// reply, the same in exec and the REPL: `tokens: prompt 120, completion
/// 40, session 160, cost $0.0012 (session $0.0340)`. Estimated counts are
/// marked `~`.
pub fn usage_line(usage: &UsageReport) -> String {
    let approx = if usage.estimated { "~" } else { "" };
    let cache = tokens::cache_note(usage.cache_read_tokens, usage.cache_write_tokens);
    let cost = tokens::cost_note(usage.cost_usd, usage.session_cost_usd, usage.local);
    format!(
        "tokens: prompt {approx}{}, completion {approx}{}, session {approx}{}{cache}{cost}",
        usage.prompt_tokens, usage.completion_tokens, usage.session_total
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usage_line_names_counts_cache_and_cost_and_marks_estimates() {
        let mut usage = UsageReport {
            prompt_tokens: 120,
            completion_tokens: 40,
            session_total: 160,
            ..UsageReport::default()
        };
        assert_eq!(
            usage_line(&usage),
            "tokens: prompt 120, completion 40, session 160, cost unknown"
        );
        usage.estimated = true;
        usage.cache_read_tokens = 100;
        usage.local = true;
        assert_eq!(
            usage_line(&usage),
            "tokens: prompt ~120, completion ~40, session ~160, cache: 100 read, 0 written, cost: free (local)"
        );
        let priced = UsageReport {
            estimated: false,
            local: false,
            cost_usd: Some(0.0012),
            session_cost_usd: Some(0.034),
            ..usage
        };
        assert!(
            usage_line(&priced).ends_with(", cost $0.0012 (session $0.0340)"),
            "{}",
            usage_line(&priced)
        );
    }

    #[test]
    fn a_long_command_shows_its_first_lines_and_counts_the_rest() {
        let command = format!("rm -rf ~/work{}", "\n".repeat(200));
        let (shown, _) = approval_command(&command);
        let lines: Vec<&str> = shown.split('\n').collect();
        assert_eq!(lines.len(), APPROVAL_LINES + 1);
        assert_eq!(lines[0], "rm -rf ~/work");
        assert_eq!(
            lines[APPROVAL_LINES],
            "… 189 more lines of this command not shown (189 of them blank); all of it would run"
        );
        // A short one is untouched.
        assert_eq!(approval_command("ls\npwd").0, "ls\npwd");
    }

    #[test]
    fn line_separators_in_a_command_are_shown() {
        let (shown, note) = approval_command("echo a\u{2028}rm -rf x");
        assert_eq!(shown, "echo a<U+2028>rm -rf x");
        assert!(note.is_some());
    }

    #[test]
    fn a_long_diff_is_cut_and_coloured_only_with_colour() {
        let diff: String = (0..50).map(|i| format!("+line {i}\n")).collect();
        let plain = detail_lines(&format!("-old\n{diff}"), Style::plain());
        assert_eq!(plain.len(), DETAIL_LINES + 1);
        assert_eq!(plain[0], "-old");
        assert_eq!(plain[1], "+line 0");
        assert_eq!(plain[DETAIL_LINES], "… 11 more lines");
        let colour = detail_lines("-old\n+new\n+\x1b[2Jx", Style { color: true });
        assert!(colour[0].contains("\x1b[") && colour[0].contains("-old"));
        assert_ne!(colour[0], colour[1].replace("+new", "-old"));
        assert!(
            colour[2].contains('␛'),
            "escape codes from the diff are shown, not obeyed"
        );
    }
}
