//! Front ends: renderers of the agent's event stream. `exec` is the one-shot
//! front end, `repl` the interactive one; `style` decides colour and formats
//! previews; `markdown` renders streamed answers for a terminal.

pub mod exec;
pub mod json;
pub mod markdown;
pub mod repl;
pub mod session_picker;
pub mod style;
pub mod toolview;

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
    let shown = crate::text::visible(command).into_owned();
    let note = command.chars().any(crate::text::is_unsafe).then_some(
        "the command contains control characters (shown as ␛, ␍…); they are part of what would run",
    );
    (shown, note)
}
