//! `buddy resume` without an id: the sessions of this working directory (the
//! store lives there, and resuming continues the work there), read as the
//! listing reads them (each file's tail, never whole), handed to the picker
//! in `ui::session_picker`. On a terminal that cannot draw (`TERM=dumb`) a
//! numbered list instead; without a terminal the caller never gets here.

use super::{workdir, AppError};
use crate::session::{Entry, Store};
use crate::ui::session_picker::{self, Picked, Row};
use crate::ui::style::Style;

/// Asks the user which session to resume: an id, or how they declined.
pub(crate) async fn choose(style: Style) -> Result<Picked, AppError> {
    let store = Store::for_workdir(&workdir());
    let entries = store.entries()?;
    if entries.is_empty() {
        return Err(crate::session::SessionError::NoSessions {
            dir: store.dir().to_path_buf(),
        }
        .into());
    }
    // Every row is in this directory: its path would only crowd the reason out.
    let dir = format!("{}/", store.dir().display());
    let rows: Vec<Row> = entries.into_iter().map(|e| row(e, &dir)).collect();
    let heading = format!(
        "resume a session of {} ({} saved, newest first)",
        crate::text::one_line(&workdir().display().to_string(), 200),
        rows.len()
    );
    let now = crate::clock::now_unix();
    let dumb = crate::process::var("TERM").is_some_and(|t| t == "dumb");
    // Both block on the terminal: off the async runtime's threads.
    let mut picking = tokio::task::spawn_blocking(move || {
        if dumb {
            let stdin = std::io::stdin();
            session_picker::pick_by_number(
                &rows,
                now,
                &heading,
                &mut stdin.lock(),
                &mut std::io::stderr().lock(),
            )
        } else {
            session_picker::pick(rows, now, &heading, style)
        }
    });
    // A `kill` or a closed terminal must still leave the terminal usable; the
    // blocked read is abandoned (main does not wait for blocking tasks).
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hangup = signal(SignalKind::hangup()).ok();
    let signalled = |code| {
        session_picker::restore();
        Ok(Picked::Signalled(code))
    };
    tokio::select! {
        Some(()) = async { term.as_mut()?.recv().await } => signalled(128 + 15),
        Some(()) = async { hangup.as_mut()?.recv().await } => signalled(128 + 1),
        picked = &mut picking => picked
            .map_err(|e| AppError::Failed(format!("the session picker failed: {e}")))?
            .map_err(|e| AppError::Failed(format!("the session picker failed: {e}"))),
    }
}

fn row(e: Entry, dir: &str) -> Row {
    match e.summary {
        Ok(s) => Row {
            id: e.id,
            used: e.used,
            messages: s.messages,
            bytes: s.bytes,
            title: s.title,
            error: None,
        },
        Err(err) => Row {
            id: e.id,
            used: e.used,
            messages: 0,
            bytes: 0,
            title: String::new(),
            error: Some(err.to_string().replace(dir, "")),
        },
    }
}
