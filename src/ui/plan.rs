//! The session's plan as the terminal front ends draw it: a compact list
//! for the REPL's status area (the item in progress highlighted, a window
//! around it when the list is long) and one line for exec's stderr. Text
//! from the model is made visible and clipped here; colour is the caller's
//! `Style`, which is plain off a terminal and under NO_COLOR.

use super::style::{preview, Style};
use crate::agent::protocol::{PlanEntry, PlanStatus};

/// Most items the status area shows; the rest are counted.
pub const SHOWN: usize = 6;

/// The mark drawn before an item of each status.
fn mark(status: PlanStatus) -> &'static str {
    match status {
        PlanStatus::Completed => "✓",
        PlanStatus::InProgress => "▶",
        PlanStatus::Pending => "○",
    }
}

/// The list for the status area: a heading with the count done, then at
/// most `SHOWN` items, each clipped to `width`. Empty for an empty plan.
pub fn lines(entries: &[PlanEntry], style: Style, width: usize) -> Vec<String> {
    if entries.is_empty() {
        return Vec::new();
    }
    let done = entries
        .iter()
        .filter(|e| e.status == PlanStatus::Completed)
        .count();
    let mut out = vec![style.dim(&format!("plan {done}/{} done", entries.len()))];
    // A window that keeps the current item in view: from the one before
    // it, so what was just finished shows too.
    let current = entries
        .iter()
        .position(|e| e.status == PlanStatus::InProgress)
        .or_else(|| entries.iter().position(|e| e.status == PlanStatus::Pending))
        .unwrap_or(entries.len().saturating_sub(1));
    let start = current
        .saturating_sub(1)
        .min(entries.len().saturating_sub(SHOWN));
    let end = (start + SHOWN).min(entries.len());
    let room = width.saturating_sub(6).max(10);
    if start > 0 {
        out.push(style.dim(&format!("  … {start} before")));
    }
    for e in &entries[start..end] {
        let text = format!("  {} {}", mark(e.status), preview(&e.content, room));
        out.push(match e.status {
            PlanStatus::InProgress => style.accent(&text),
            _ => style.dim(&text),
        });
    }
    if end < entries.len() {
        out.push(style.dim(&format!("  … {} more", entries.len() - end)));
    }
    out
}

/// One line for exec's stderr: the count done and the item in progress.
pub fn summary_line(entries: &[PlanEntry]) -> String {
    if entries.is_empty() {
        return "plan: cleared".into();
    }
    let done = entries
        .iter()
        .filter(|e| e.status == PlanStatus::Completed)
        .count();
    let now = entries
        .iter()
        .find(|e| e.status == PlanStatus::InProgress)
        .map(|e| format!(" · now: {}", preview(&e.content, 80)))
        .unwrap_or_default();
    format!("plan: {done}/{} done{now}", entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(content: &str, status: PlanStatus) -> PlanEntry {
        PlanEntry {
            content: content.into(),
            status,
        }
    }

    #[test]
    fn a_long_plan_keeps_the_item_in_progress_in_view() {
        let mut entries: Vec<PlanEntry> = (0..12)
            .map(|i| entry(&format!("step {i}"), PlanStatus::Completed))
            .collect();
        entries[9].status = PlanStatus::InProgress;
        entries[10].status = PlanStatus::Pending;
        entries[11].status = PlanStatus::Pending;
        let shown = lines(&entries, Style::plain(), 80);
        assert_eq!(shown[0], "plan 9/12 done");
        assert!(shown.contains(&"  ▶ step 9".to_string()), "{shown:?}");
        assert!(shown.contains(&"  … 6 before".to_string()), "{shown:?}");
        assert!(!shown.iter().any(|l| l.contains("step 0")), "{shown:?}");
        assert!(shown.len() <= SHOWN + 3);
    }

    #[test]
    fn items_are_one_visible_line_and_colour_only_marks_the_current_one() {
        let entries = vec![
            entry("read\nthe \u{1b}[31mcode", PlanStatus::InProgress),
            entry("write", PlanStatus::Pending),
        ];
        let plain = lines(&entries, Style::plain(), 80);
        assert!(!plain.concat().contains('\u{1b}'), "{plain:?}");
        assert!(!plain[1].contains('\n'));
        let coloured = lines(&entries, Style { color: true }, 80);
        assert!(coloured[1].starts_with("\u{1b}["), "{coloured:?}");
        let line = summary_line(&entries);
        assert!(
            line.starts_with("plan: 0/2 done · now: read the "),
            "{line}"
        );
        assert!(!line.contains('\u{1b}'), "{line}");
    }
}
