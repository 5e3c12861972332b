//! `buddy sessions`: this directory's saved sessions as a table on stdout.

use super::{sessions, workdir, AppError, Exit};
use crate::ui::session_table::session_table;
use crate::ui::style::Style;

/// `buddy sessions`: one line per session on stdout; unreadable files are
/// named on stderr and do not hide the others.
pub(super) fn list_sessions(no_color: bool) -> Result<Exit, AppError> {
    let style = Style::detect(!no_color, &crate::ui::terminal::Terminal::detect());
    let listing = sessions::list(&workdir())?;
    for e in &listing.warnings {
        eprintln!("{} {e}", style.warning("warning:"));
    }
    if listing.sessions.is_empty() {
        eprintln!("no saved sessions in {}", listing.dir);
        return Ok(Exit::Ok);
    }
    let out = session_table(&listing.sessions, crate::clock::now_unix());
    use std::io::Write;
    // A closed pipe (`buddy sessions | head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(Exit::Ok)
}
