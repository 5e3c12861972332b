//! `buddy export`: a saved session of this directory (or of a session
//! database, `--store`) written out, as
//! Markdown to read (`ui::transcript`) or as JSON data (the items a resume
//! replays, whole: `agent::replay::transcript_of`). Reads the file without
//! its lock, so a session in use elsewhere can be exported; the file holds
//! no secrets (they are redacted when it is written), so neither does this.

use super::{database, workdir, AppError, Exit};
use crate::cli::{ExportArgs, ExportFormat};
use crate::session::{SessionError, Store};
use crate::wire::Message;
use std::io::Write;
use std::path::Path;

/// `buddy export`: the session named, or the most recently used one (said on
/// stderr when it was not asked for by `--last`), to stdout or `-o FILE`.
pub(super) async fn export(args: ExportArgs) -> Result<Exit, AppError> {
    let store = Store::for_workdir(&workdir());
    let query = args.id.clone().unwrap_or_else(|| "last".to_string());
    let pg = match database::store_url(args.store.as_deref()) {
        Some(url) => Some(database::connect(&url, crate::session::postgres::LEASE).await?),
        None => None,
    };
    let id = match &pg {
        Some(pg) => pg.resolve(&query)?,
        None => store.resolve(&query)?,
    };
    if args.id.is_none() && !args.last {
        eprintln!("exporting the most recent session, {id}");
    }
    let read = match &pg {
        // Read without the lease: a session running on a server exports.
        Some(pg) => pg
            .read_transcript(&id)
            .map(|(h, s)| (h, s, pg.title(&id).ok())),
        None => store
            .read_transcript(&id)
            .map(|(h, s)| (h, s, store.title(&id).ok())),
    };
    let bytes = read
        .map(|(history, subagents, title)| {
            render_transcript(&id, title, &history, &subagents, args.format)
        })
        .map_err(|e| AppError::Failed(e.to_string()))?;
    match &args.output {
        Some(path) => {
            write_private(path, &bytes)?;
            eprintln!("wrote session {id} to {}", path.display());
        }
        // A closed pipe (`buddy export | head`) is not an error worth a message.
        None => {
            let _ = std::io::stdout().lock().write_all(&bytes);
        }
    }
    Ok(Exit::Ok)
}

/// Session `id` in `format`.
pub(crate) fn render(
    store: &Store,
    id: &str,
    format: ExportFormat,
) -> Result<Vec<u8>, SessionError> {
    let (history, subagents) = store.read_transcript(id)?;
    Ok(render_transcript(
        id,
        store.title(id).ok(),
        &history,
        &subagents,
        format,
    ))
}

/// A session's conversation (with its sub-agents') in `format`, under
/// `title` (the one a listing shows; a session whose title cannot be read
/// still exports, under its id).
fn render_transcript(
    id: &str,
    title: Option<String>,
    history: &[Message],
    subagents: &[(String, Vec<Message>)],
    format: ExportFormat,
) -> Vec<u8> {
    let items = crate::agent::replay::transcript_with(history, subagents);
    let title = title
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| format!("buddy session {id}"));
    match format {
        ExportFormat::Markdown => crate::ui::transcript::markdown(&title, &items).into_bytes(),
        ExportFormat::Json => {
            let doc = serde_json::json!({ "id": id, "title": title, "items": items });
            // Values built from strings always serialise; the fallback is never taken.
            let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
            out.push(b'\n');
            out
        }
    }
}

/// Replaces `path` with `bytes`, readable by the owner only.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AppError> {
    crate::atomic_file::replace(path, bytes, crate::atomic_file::PRIVATE)
        .map_err(|e| AppError::Failed(format!("cannot write {}: {e}", path.display())))
}
