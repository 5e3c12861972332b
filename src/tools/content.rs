//! A file's content on the tools' target, read whole but bounded, for an
//! edit and for its checkpoint: on this host with one blocking read, on a
//! remote target through a script, or from the editor's buffers when they
//! are on offer (`ToolContext::editor`). `load` is an edit's read,
//! `unchanged` its check after the approval that nobody changed the file
//! meanwhile.
//!
//! Not here: writing or deleting (`door.rs`), `read_file`'s line windows
//! (`files.rs`, `window.rs`).

use super::editor::EditorFiles;
use super::{ToolContext, ToolError};
use crate::host::{run_script, shell_quote, Target};
use std::path::Path;

/// A failed I/O step as the tools report it: "cannot ACTION PATH: ERROR".
pub(crate) fn io_error(action: &str, path: &Path, e: std::io::Error) -> ToolError {
    ToolError::Failed(format!("cannot {action} {}: {e}", path.display()))
}

/// The editor's buffers, when the tools go through them: for this host's
/// files only (a remote target's files are not the editor's).
pub(crate) fn editor_for(ctx: &ToolContext) -> Option<&dyn EditorFiles> {
    ctx.editor.as_deref().filter(|_| ctx.target.is_local())
}

/// What the editor holds at `path`; `None` when there is no such file. The
/// protocol has no "not found" answer, so a failed read of a path missing
/// on disk too is taken as a missing file.
pub(crate) async fn editor_text(
    editor: &dyn EditorFiles,
    path: &Path,
) -> Result<Option<String>, ToolError> {
    match editor.read(path).await {
        Ok(t) => Ok(Some(t)),
        Err(e) => {
            let missing = tokio::fs::symlink_metadata(path)
                .await
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
            if missing {
                Ok(None)
            } else {
                Err(ToolError::Failed(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        }
    }
}

/// The whole content of a regular file on the target, for an edit: `None`
/// when there is no file, an error when it is larger than `cap` bytes, not
/// a regular file, or cannot be read.
pub(crate) async fn load(
    ctx: &ToolContext,
    path: &Path,
    cap: u64,
) -> Result<Option<Vec<u8>>, ToolError> {
    match read_capped(ctx, path, cap).await? {
        Capped::Missing => Ok(None),
        Capped::Bytes(b) => Ok(Some(b)),
        Capped::TooBig(size) => Err(ToolError::Failed(format!(
            "{} is {size} bytes, more than the {cap} an edit reads; use run_shell (sed, a script) for a file this size",
            path.display()
        ))),
    }
}

/// Whether the file at `path` on the target still holds exactly `before`
/// (`None`: still no file), as an edit checks after its approval; `before`
/// is handed back. On this host it is compared a block at a time, so a
/// 10 MB file costs no second 10 MB buffer.
pub(crate) async fn unchanged(
    ctx: &ToolContext,
    path: &Path,
    before: Option<Vec<u8>>,
    cap: u64,
) -> Result<(bool, Option<Vec<u8>>), ToolError> {
    if !ctx.target.is_local() || editor_for(ctx).is_some() {
        let same = load(ctx, path, cap).await? == before;
        return Ok((same, before));
    }
    let Some(before) = before else {
        let gone = tokio::fs::symlink_metadata(path)
            .await
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        return Ok((gone, None));
    };
    // The bytes go to the blocking task and come back: no copy.
    let p = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let same = same_content(&p, &before);
        same.map(|s| (s, Some(before)))
    })
    .await
    .map_err(|e| ToolError::Failed(format!("read task failed: {e}")))?
    .map_err(|e| io_error("read", path, e))
}

/// Whether the regular file at `path` holds exactly `want`.
fn same_content(path: &Path, want: &[u8]) -> std::io::Result<bool> {
    use std::io::Read;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() != want.len() as u64 {
        return Ok(false);
    }
    let mut buf = vec![0u8; 256 * 1024];
    let mut at = 0;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(at == want.len());
        }
        if at + n > want.len() || buf[..n] != want[at..at + n] {
            return Ok(false);
        }
        at += n;
    }
}

/// A file read whole but bounded.
pub(crate) enum Capped {
    Missing,
    Bytes(Vec<u8>),
    /// Larger than the cap: its size.
    TooBig(u64),
}

pub(crate) async fn read_capped(
    ctx: &ToolContext,
    path: &Path,
    cap: u64,
) -> Result<Capped, ToolError> {
    if let Some(editor) = editor_for(ctx) {
        return Ok(match editor_text(editor, path).await? {
            None => Capped::Missing,
            Some(t) if t.len() as u64 > cap => Capped::TooBig(t.len() as u64),
            Some(t) => Capped::Bytes(t.into_bytes()),
        });
    }
    if ctx.target.is_local() {
        // One blocking read straight into the buffer: tokio's file reads
        // go through its own buffer a couple of MB at a time.
        let p = path.to_path_buf();
        return tokio::task::spawn_blocking(move || read_local_capped(&p, cap))
            .await
            .map_err(|e| ToolError::Failed(format!("read task failed: {e}")))?;
    }
    read_remote_capped(ctx.target.as_ref(), &ctx.cwd, path, cap).await
}

/// A remote target's file read whole but bounded.
pub(crate) async fn read_remote_capped(
    target: &dyn Target,
    cwd: &Path,
    path: &Path,
    cap: u64,
) -> Result<Capped, ToolError> {
    let p = shell_quote(&path.to_string_lossy());
    let script = format!(
        "if [ ! -e {p} ]; then exit 23; fi; if [ -d {p} ]; then exit 21; fi; \
         if [ ! -f {p} ]; then exit 24; fi; wc -c < {p} && exec head -c {} -- {p}",
        cap + 1
    );
    let (code, out, err) = run_script(target, &script, cwd, None)
        .await
        .map_err(|e| ToolError::Failed(format!("cannot reach {}: {e}", target.actor())))?;
    match code {
        Some(0) => {}
        Some(23) => return Ok(Capped::Missing),
        Some(21) => {
            return Err(ToolError::Failed(format!(
                "{} is a directory",
                path.display()
            )))
        }
        Some(24) => {
            return Err(ToolError::Failed(format!(
                "{} is not a regular file",
                path.display()
            )))
        }
        _ => {
            return Err(ToolError::Failed(format!(
                "cannot read {} on {}: {}",
                path.display(),
                target.actor(),
                String::from_utf8_lossy(&err).trim()
            )))
        }
    }
    let nl = out.iter().position(|&b| b == b'\n').unwrap_or(out.len());
    let size: u64 = String::from_utf8_lossy(&out[..nl])
        .trim()
        .parse()
        .unwrap_or(0);
    let body = out.get(nl + 1..).unwrap_or_default().to_vec();
    if size > cap || body.len() as u64 > cap {
        return Ok(Capped::TooBig(size.max(body.len() as u64)));
    }
    Ok(Capped::Bytes(body))
}

fn read_local_capped(path: &Path, cap: u64) -> Result<Capped, ToolError> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Capped::Missing),
        Err(e) => return Err(io_error("read", path, e)),
    };
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is a directory",
            path.display()
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::Failed(format!(
            "{} is {}, not a regular file",
            path.display(),
            crate::localfile::kind_of(meta.file_type())
        )));
    }
    if meta.len() > cap {
        return Ok(Capped::TooBig(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(|e| io_error("open", path, e))?;
    let mut buf = Vec::with_capacity(meta.len() as usize + 1);
    file.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| io_error("read", path, e))?;
    if buf.len() as u64 > cap {
        return Ok(Capped::TooBig(buf.len() as u64));
    }
    Ok(Capped::Bytes(buf))
}
