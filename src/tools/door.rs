//! The one door every file change of the file tools goes through
//! (`write_file`, `edit_file`, `apply_patch`, and a rewind's write-back on
//! a remote target): `store` writes, `remove` deletes. Each keeps what was
//! there in the session's checkpoint store first, writes regular files only
//! (a device, a FIFO or a directory is refused, on the resolved target at
//! the moment of the write), follows a symlink to the file it names, keeps
//! an existing file's mode and replaces content atomically. `refuse_own`
//! keeps the tools away from buddy's own files (`protect`).
//!
//! Not here: reading a file for an edit (`content.rs`), the approval
//! question and the diff (each tool), the checkpoint store itself
//! (`checkpoint.rs` and the session).

use super::checkpoint::{Known, Prior, TargetFileError, TargetFiles};
use super::content::{editor_for, io_error, read_capped, read_remote_capped, Capped};
use super::{ToolContext, ToolError};
use crate::host::{run_script, shell_quote, Target};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The one door every file change of the file tools goes through
/// (`write_file`, `edit_file`, `apply_patch`): `bytes` become the content of
/// `path` on the target, atomically, keeping an existing file's mode and
/// creating missing parent directories. What was there is kept in the
/// session's checkpoint store first (`known`: what the caller just read
/// there, if it did); if it cannot be, nothing changes.
pub(crate) async fn store(
    ctx: &ToolContext,
    path: &Path,
    bytes: Vec<u8>,
    known: Known<'_>,
) -> Result<(), ToolError> {
    // Checked here for every tool (and again at the write itself, on the
    // resolved target): the file may have been swapped since it was read.
    refuse_not_regular(ctx, path).await?;
    let after = super::checkpoint::After::of(Some(&bytes));
    ctx.checkpoint_before_change(path, known, after).await?;
    if let Some(editor) = editor_for(ctx) {
        let text = String::from_utf8(bytes).map_err(|_| {
            ToolError::Failed(format!(
                "{}: the editor takes text only, and this is not UTF-8",
                path.display()
            ))
        })?;
        return editor
            .write(path, &text)
            .await
            .map_err(|e| ToolError::Failed(format!("cannot write {}: {e}", path.display())));
    }
    if !ctx.target.is_local() {
        return write_remote(ctx.target.as_ref(), &ctx.cwd, path, &bytes, Follow::Links)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()));
    }
    // Moved, not copied: a 10 MB edit costs no extra copy here.
    let target = path.to_path_buf();
    tokio::task::spawn_blocking(move || write_local(&target, &bytes))
        .await
        .map_err(|e| ToolError::Failed(format!("write task failed: {e}")))?
}

/// The one door every file deletion of the file tools goes through
/// (`apply_patch`'s delete and move): removes `path` on the target (a
/// symlink itself, not what it points to), after keeping its content in the
/// session's checkpoint store.
pub(crate) async fn remove(
    ctx: &ToolContext,
    path: &Path,
    known: Known<'_>,
) -> Result<(), ToolError> {
    if ctx.target.is_local() {
        // A symlink is removed itself; anything else but a regular file
        // (a device, a FIFO) is not the file tools' to delete.
        match tokio::fs::symlink_metadata(path).await {
            Ok(m) if !m.is_file() && !m.file_type().is_symlink() => {
                return Err(not_regular(path, m.file_type()))
            }
            _ => {}
        }
    }
    ctx.checkpoint_before_change(path, known, super::checkpoint::After::Missing)
        .await?;
    if ctx.target.is_local() {
        return tokio::fs::remove_file(path)
            .await
            .map_err(|e| io_error("delete", path, e));
    }
    remove_remote(ctx.target.as_ref(), &ctx.cwd, path, Follow::Links)
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))
}

/// Whether a remote write or removal may go through symlinks. The tools
/// follow them as the user's editor would; a rewind puts a file back where
/// it was written, so a symlink put in its path since is refused.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Follow {
    Links,
    NoNewLinks,
}

/// A shell test that `path` (as the checkpoint recorded it: its directory
/// resolved at the write) still leads where it did: the nearest existing
/// directory of its path resolves to itself, and the file is no symlink.
/// On failure it says where the path leads now and exits 25.
fn unmoved_check(path: &str) -> String {
    let dir = match path.rfind('/') {
        Some(0) => "/".to_string(),
        Some(i) => path[..i].to_string(),
        None => ".".to_string(),
    };
    let (p, d) = (shell_quote(path), shell_quote(&dir));
    let link = format!(
        "if [ -L {p} ]; then echo \"not touched: it is now a symlink to $(readlink -- {p}) (put in its place since buddy wrote it)\" >&2; exit 25; fi; "
    );
    // A path the target could not resolve at the write was recorded as
    // given; there is no resolved directory to compare with.
    if !path.starts_with('/') {
        return link;
    }
    format!(
        "d={d}; while [ ! -d \"$d\" ] && [ ! -L \"$d\" ] && [ \"$d\" != / ]; do d=$(dirname -- \"$d\"); done; \
         now=$(cd -P -- \"$d\" 2>/dev/null && pwd -P); \
         if [ \"$now\" != \"$d\" ]; then echo \"not touched: $d now leads to ${{now:-nowhere}} (a symlink put in its path since buddy wrote it)\" >&2; exit 25; fi; {link}"
    )
}

/// Where `path` on a remote target leads now: a symlink followed to its
/// file and the directory resolved (the part that does not exist yet kept
/// as written), so a checkpoint records the place the write goes to and a
/// rewind can tell when a symlink has moved it since. None if the target
/// could not say; the path is then recorded as given.
pub(crate) async fn resolve_remote(
    target: &dyn Target,
    cwd: &Path,
    path: &Path,
) -> Option<PathBuf> {
    let p = shell_quote(&path.to_string_lossy());
    let script = format!(
        "p={p}; if [ -L \"$p\" ]; then q=$(readlink -f -- \"$p\") && [ -n \"$q\" ] && p=$q; fi; \
         case $p in */*) d=${{p%/*}}; f=${{p##*/}}; [ -n \"$d\" ] || d=/ ;; *) d=.; f=$p ;; esac; \
         t=; while [ ! -d \"$d\" ] && [ \"$d\" != / ] && [ \"$d\" != . ]; do t=\"/${{d##*/}}$t\"; d=$(dirname -- \"$d\"); done; \
         r=$(cd -P -- \"$d\" && pwd -P) || exit 1; [ \"$r\" = / ] && r=; printf '%s%s/%s' \"$r\" \"$t\" \"$f\""
    );
    match run_script(target, &script, cwd, None).await {
        Ok((Some(0), out, _)) if out.starts_with(b"/") => {
            Some(PathBuf::from(String::from_utf8(out).ok()?))
        }
        _ => None,
    }
}

async fn remove_remote(
    target: &dyn Target,
    cwd: &Path,
    path: &Path,
    follow: Follow,
) -> Result<(), TargetFileError> {
    let text = path.to_string_lossy();
    let p = shell_quote(&text);
    let guard = match follow {
        Follow::Links => String::new(),
        Follow::NoNewLinks => unmoved_check(&text),
    };
    // Only a regular file or a symlink (itself) is removed.
    let script = format!(
        "{guard}if [ -e {p} ] && [ ! -L {p} ] && [ ! -f {p} ]; then \
         echo \"it is not a regular file ($(stat -c %F -- {p}))\" >&2; exit 25; fi; rm -f -- {p}"
    );
    let (code, _, err) = run_script(target, &script, cwd, None)
        .await
        .map_err(|e| unreachable_target(target, e))?;
    if code != Some(0) {
        return Err(TargetFileError::Delete {
            path: path.to_path_buf(),
            actor: target.actor(),
            stderr: String::from_utf8_lossy(&err).trim().to_string(),
        });
    }
    Ok(())
}

fn unreachable_target(target: &dyn Target, reason: impl std::fmt::Display) -> TargetFileError {
    TargetFileError::Unreachable {
        actor: target.actor(),
        reason: reason.to_string(),
    }
}

/// What a file on a remote target holds before a change, for its
/// checkpoint: what the tool read if it did, else read through the target;
/// bounded like a file on this host.
pub(crate) async fn prior(ctx: &ToolContext, path: &Path, known: Known<'_>) -> Prior {
    let max = super::checkpoint::MAX_KEPT_BYTES;
    match known {
        Known::Missing => Prior::Missing,
        Known::Content(b) if b.len() as u64 > max => {
            Prior::NotKept(super::checkpoint::too_large(b.len() as u64, max))
        }
        Known::Content(b) => Prior::Content(b.to_vec()),
        Known::Unread => match read_capped(ctx, path, max).await {
            Ok(Capped::Missing) => Prior::Missing,
            Ok(Capped::Bytes(b)) => Prior::Content(b),
            Ok(Capped::TooBig(size)) => Prior::NotKept(super::checkpoint::too_large(size, max)),
            Err(e) => Prior::NotKept(format!("it could not be read ({e})")),
        },
    }
}

/// A remote target's files as a rewind puts them back: the same atomic
/// write and removal the tools use.
pub struct RemoteFiles {
    target: Arc<dyn Target>,
    cwd: PathBuf,
}

impl RemoteFiles {
    /// The files of the tools' target; none on this host (the store
    /// restores those itself).
    pub fn of(ctx: &ToolContext) -> Option<RemoteFiles> {
        (!ctx.target.is_local()).then(|| RemoteFiles {
            target: ctx.target.clone(),
            cwd: ctx.cwd.clone(),
        })
    }
}

#[async_trait]
impl TargetFiles for RemoteFiles {
    fn actor(&self) -> String {
        self.target.actor()
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), TargetFileError> {
        write_remote(
            self.target.as_ref(),
            &self.cwd,
            path,
            bytes,
            Follow::NoNewLinks,
        )
        .await
    }

    async fn remove(&self, path: &Path) -> Result<(), TargetFileError> {
        remove_remote(self.target.as_ref(), &self.cwd, path, Follow::NoNewLinks).await
    }

    async fn read(&self, path: &Path, max: u64) -> Prior {
        match read_remote_capped(self.target.as_ref(), &self.cwd, path, max).await {
            Ok(Capped::Missing) => Prior::Missing,
            Ok(Capped::Bytes(b)) => Prior::Content(b),
            Ok(Capped::TooBig(size)) => Prior::NotKept(super::checkpoint::too_large(size, max)),
            Err(e) => Prior::NotKept(format!("it could not be read ({e})")),
        }
    }
}

/// Refuses, without asking anyone, a change to one of buddy's own files on
/// this host (a remote target's files are not buddy's).
pub(crate) fn refuse_own(
    protected: &super::protect::Protected,
    ctx: &ToolContext,
    path: &Path,
) -> Result<(), ToolError> {
    if !ctx.target.is_local() {
        return Ok(());
    }
    match protected.check(path) {
        // Not a question for the user: an approval given in a hurry must
        // not be able to turn buddy's own safety settings off.
        Some(what) => Err(ToolError::Failed(format!(
            "refused: {} is buddy's own {what}; tools never change buddy's config, login, trust or session files (the user can edit it themselves)",
            path.display()
        ))),
        None => Ok(()),
    }
}

/// The refusal of a write to something that is not a regular file.
pub(crate) fn not_regular(path: &Path, kind: std::fs::FileType) -> ToolError {
    ToolError::Failed(format!(
        "refused: {} is {}, not a regular file; the file tools write regular files only",
        path.display(),
        crate::localfile::kind_of(kind)
    ))
}

/// Refuses a path whose target (symlinks followed) exists and is not a
/// regular file: a device, a FIFO, a socket, a directory. Writing one
/// would replace the node with a file (for every program on the host,
/// as root) or block on a pipe. A missing file is fine: it is created.
pub(crate) async fn refuse_not_regular(ctx: &ToolContext, path: &Path) -> Result<(), ToolError> {
    if ctx.target.is_local() {
        return match tokio::fs::metadata(path).await {
            Ok(m) if !m.is_file() => Err(not_regular(path, m.file_type())),
            _ => Ok(()),
        };
    }
    let p = shell_quote(&path.to_string_lossy());
    let script =
        format!("if [ -e {p} ] && [ ! -f {p} ]; then stat -L -c %F -- {p}; exit 25; fi; exit 0");
    match run_script(ctx.target.as_ref(), &script, &ctx.cwd, None).await {
        Ok((Some(25), out, _)) => Err(ToolError::Failed(format!(
            "refused: {} on {} is not a regular file ({}); the file tools write regular files only",
            path.display(),
            ctx.target.actor(),
            String::from_utf8_lossy(&out).trim()
        ))),
        // The write says what else went wrong, and checks the type again.
        _ => Ok(()),
    }
}
/// Streams the content through the target's stdin into a temporary file next
/// to the destination, keeps the old file's mode, and renames it into place.
async fn write_remote(
    target: &dyn Target,
    cwd: &Path,
    path: &Path,
    bytes: &[u8],
    follow: Follow,
) -> Result<(), TargetFileError> {
    let text = path.to_string_lossy();
    let guard = match follow {
        Follow::Links => String::new(),
        Follow::NoNewLinks => unmoved_check(&text),
    };
    let dir = match text.rfind('/') {
        Some(0) => "/".to_string(),
        Some(i) => text[..i].to_string(),
        None => ".".to_string(),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = format!("{dir}/.buddy-write-{}-{nanos:x}", std::process::id());
    let (p, d, t) = (shell_quote(&text), shell_quote(&dir), shell_quote(&tmp));
    // The type is checked where the write happens: `mv` over a device
    // replaces it, and into a directory moves the file inside it.
    let script = format!(
        "{guard}trap 'rm -f -- {t}' EXIT; if [ -e {p} ] && [ ! -f {p} ]; then \
         echo \"it is not a regular file ($(stat -L -c %F -- {p}))\" >&2; exit 25; fi; \
         mkdir -p -- {d} && cat > {t} && \
         {{ [ ! -e {p} ] || chmod \"$(stat -c %a -- {p})\" {t} 2>/dev/null || true; }} && mv -f -- {t} {p}"
    );
    let (code, _, err) = run_script(target, &script, cwd, Some(bytes))
        .await
        .map_err(|e| unreachable_target(target, e))?;
    if code != Some(0) {
        return Err(TargetFileError::Write {
            path: path.to_path_buf(),
            actor: target.actor(),
            stderr: String::from_utf8_lossy(&err).trim().to_string(),
        });
    }
    Ok(())
}

/// Replaces the local file at `path` (the file a symlink names, not the
/// link) if it is a regular file or missing.
fn write_local(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    // Writing through a symlink replaces its target, not the link itself.
    let is_link = std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false);
    let resolved;
    let path = match is_link.then(|| std::fs::canonicalize(path)) {
        Some(Ok(target)) => {
            resolved = target;
            resolved.as_path()
        }
        _ => path,
    };
    // On the resolved target, at the moment of the write: the rename would
    // replace a device or a FIFO with a regular file.
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() {
            return Err(not_regular(path, m.file_type()));
        }
    }
    // A new file gets what any editor would make (0o666 less the umask).
    crate::atomic_file::replace(path, bytes, crate::atomic_file::Mode::Keep { new: 0o666 })
        .map_err(|e| io_error("write", path, e))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::tools::approval::AlwaysApprove;
    use std::os::unix::fs::FileTypeExt;

    /// Puts in `d` what the file tools must never write: `pipe`, a FIFO,
    /// and `null-link`, a symlink to /dev/null.
    pub(crate) fn fifo_and_device_link(d: &Path) {
        assert!(std::process::Command::new("mkfifo")
            .arg(d.join("pipe"))
            .status()
            .unwrap()
            .success());
        std::os::unix::fs::symlink("/dev/null", d.join("null-link")).unwrap();
    }

    #[tokio::test]
    async fn the_door_checks_the_resolved_target_at_the_write_and_the_delete() {
        let d = std::env::temp_dir().join(format!("buddy-door-dev-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        fifo_and_device_link(&d);
        let c = ToolContext::local(d.clone(), Arc::new(AlwaysApprove));
        // The write itself checks the resolved target, whatever was asked
        // before: a link swapped in after the approval is still refused.
        let e = write_local(&d.join("null-link"), b"x").unwrap_err();
        assert!(
            e.to_string().contains("/dev/null is a character device"),
            "{e}"
        );
        let e = write_local(&d.join("pipe"), b"x").unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        // Nor is a device or a FIFO deleted (a patch's delete goes here).
        let e = remove(&c, &d.join("pipe"), Known::Unread)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(d.join("pipe").exists());
        remove(&c, &d.join("null-link"), Known::Unread)
            .await
            .unwrap();
        assert!(std::fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
