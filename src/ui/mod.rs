//! Front ends: renderers of the agent's event stream. `exec` is the one-shot
//! front end, `repl` the interactive one; `style` decides colour and formats
//! previews; `markdown` renders streamed answers for a terminal.

pub mod exec;
pub mod json;
pub mod markdown;
pub mod repl;
pub mod style;

use crate::agent::protocol::EventKind;
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
    } = ev
    else {
        return None;
    };
    let mut out: Vec<String> = warnings
        .iter()
        .map(|w| format!("{} {w}", style.warning("warning:")))
        .collect();
    if let Some(n) = note {
        out.push(style.dim(n));
    }
    let mut summary = format!(
        "{} session {id} ({messages} messages)",
        style.accent("resumed")
    );
    if let Some(p) = last_prompt {
        summary.push_str(&format!("\n{} {p}", style.dim("you:")));
        if let Some(a) = last_answer {
            summary.push_str(&format!("\n{} {a}", style.dim("buddy:")));
        }
    }
    out.push(summary);
    Some(out.join("\n"))
}
