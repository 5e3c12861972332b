//! Saved sessions as a table a person reads: id, age, message count, model
//! and first prompt, one line each. Used by `buddy sessions` and the REPL's
//! `/session`; where the list comes from is not its business.

use crate::agent::protocol::SessionSummary;
use crate::text::visible;

/// The table, with a heading line, each line ending in a newline. Titles
/// and models come from session files: their control characters are shown.
pub fn session_table(list: &[SessionSummary], now: u64) -> String {
    let model_width = list
        .iter()
        .map(|s| s.model.chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 30);
    let mut out = format!(
        "{:<20}  {:>9}  {:>5}  {:<model_width$}  FIRST PROMPT\n",
        "ID", "USED", "MSGS", "MODEL"
    );
    for s in list {
        out.push_str(&format!(
            "{:<20}  {:>9}  {:>5}  {:<model_width$}  {}\n",
            visible(&s.id),
            crate::clock::age(s.used, now),
            s.messages,
            visible(&s.model),
            visible(&s.title)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_session_under_a_heading_with_outside_text_made_visible() {
        let list = [SessionSummary {
            id: "20261126-190000-ab12".into(),
            used: 1_000,
            messages: 4,
            model: "fake-model".into(),
            title: "say \u{1b}[31mhi".into(),
            origin: None,
        }];
        let table = session_table(&list, 1_060);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("ID"));
        assert!(lines[1].starts_with("20261126-190000-ab12"));
        assert!(lines[1].contains("fake-model"));
        assert!(!lines[1].contains('\u{1b}'), "{table}");
    }
}
