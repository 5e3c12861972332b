//! `buddy export`: a saved session of this directory written out, as
//! Markdown to read (`ui::transcript`) or as JSON data (the items a resume
//! replays, whole: `agent::replay::transcript_of`). Reads the file without
//! its lock, so a session in use elsewhere can be exported; the file holds
//! no secrets (they are redacted when it is written), so neither does this.

use super::{workdir, AppError, Exit};
use crate::cli::{ExportArgs, ExportFormat};
use crate::session::Store;
use std::io::Write;
use std::path::Path;

/// `buddy export`: the session named, or the most recently used one (said on
/// stderr when it was not asked for by `--last`), to stdout or `-o FILE`.
pub(super) fn export(args: ExportArgs) -> Result<Exit, AppError> {
    let store = Store::for_workdir(&workdir());
    let query = args.id.clone().unwrap_or_else(|| "last".to_string());
    let id = store.resolve(&query)?;
    if args.id.is_none() && !args.last {
        eprintln!("exporting the most recent session, {id}");
    }
    let bytes = render(&store, &id, args.format).map_err(|e| AppError::Failed(e.to_string()))?;
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
) -> Result<Vec<u8>, crate::session::SessionError> {
    let (history, subagents) = store.read_transcript(id)?;
    let items = crate::agent::replay::transcript_with(&history, &subagents);
    // The title a listing shows; a session whose file cannot be summarised
    // still exports, under its id.
    let title = store
        .title(id)
        .ok()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| format!("buddy session {id}"));
    Ok(match format {
        ExportFormat::Markdown => crate::ui::transcript::markdown(&title, &items).into_bytes(),
        ExportFormat::Json => {
            let doc = serde_json::json!({ "id": id, "title": title, "items": items });
            // Values built from strings always serialise; the fallback is never taken.
            let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
            out.push(b'\n');
            out
        }
    })
}

/// Replaces `path` with `bytes`, readable by the owner only.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AppError> {
    crate::atomic_file::replace(path, bytes, crate::atomic_file::PRIVATE)
        .map_err(|e| AppError::Failed(format!("cannot write {}: {e}", path.display())))
}
