//! `buddy sessions`: this directory's saved sessions as a table on stdout.

use super::{workdir, AppError, Exit};
use crate::session::Store;
use crate::ui::style::Style;
use crate::ui::tables::session_table;

/// `buddy sessions`: one line per session on stdout; unreadable files are
/// named on stderr and do not hide the others.
pub(super) fn list_sessions(no_color: bool) -> Result<Exit, AppError> {
    let style = Style::detect(!no_color);
    let store = Store::for_workdir(&workdir());
    let (list, errors) = store.list().map_err(|e| AppError::Usage(e.to_string()))?;
    for e in &errors {
        eprintln!("{} {e}", style.warning("warning:"));
    }
    if list.is_empty() {
        eprintln!("no saved sessions in {}", store.dir().display());
        return Ok(Exit::Ok);
    }
    let out = session_table(&list);
    use std::io::Write;
    // A closed pipe (`buddy sessions | head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(Exit::Ok)
}
