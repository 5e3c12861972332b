//! `buddy sessions`: this directory's saved sessions, or a session
//! database's (`--store`), as a table on stdout.

use super::{database, sessions, workdir, AppError, Exit};
use crate::cli::SessionsArgs;
use crate::ui::session_table::session_table;
use crate::ui::style::Style;

/// `buddy sessions`: one line per session on stdout; unreadable files are
/// named on stderr and do not hide the others.
pub(super) async fn list_sessions(args: SessionsArgs, no_color: bool) -> Result<Exit, AppError> {
    let style = Style::detect(!no_color, &crate::ui::terminal::Terminal::detect());
    let listing = match database::store_url(args.store.as_deref()) {
        None => sessions::list(&workdir())?,
        Some(url) => {
            let pg = database::connect(&url, crate::session::postgres::LEASE).await?;
            sessions::list_database(&pg)?
        }
    };
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
