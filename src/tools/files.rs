//! `read_file` and `write_file`. Reads take a window of lines (`window.rs`:
//! `offset`, `limit`, numbered or not), are bounded (a huge file costs a fixed
//! buffer, not its size) and refuse binary content; writes are atomic (a temp
//! file in the same directory, synced, then renamed over the target). A write
//! asks the `Approver` like a shell command, showing the change as a diff,
//! and never touches buddy's own files (`protect`).

use super::approval::{Approval, ApprovalRequest};
use super::checkpoint::{Known, Prior, TargetFileError, TargetFiles};
use super::editor::EditorFiles;
use super::{parse_args, window, Tool, ToolContext, ToolError, ToolOutput};
use crate::host::{run_script, shell_quote, Target};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 16_000;

pub struct ReadFileTool {
    max_output_chars: usize,
    /// A read that takes longer (a hung network mount, a remote target that
    /// stopped answering) ends with an error, as a shell command would.
    timeout: Duration,
}

pub struct WriteFileTool {
    max_output_chars: usize,
    /// buddy's own files: never written, whatever the approval says.
    protected: std::sync::Arc<super::protect::Protected>,
}

impl ReadFileTool {
    pub fn new(max_output_chars: usize) -> Self {
        ReadFileTool {
            max_output_chars,
            timeout: super::shell::DEFAULT_TIMEOUT,
        }
    }

    /// The shell tool's timeout, so every tool call ends in the same time.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl WriteFileTool {
    pub fn new(max_output_chars: usize) -> Self {
        WriteFileTool {
            max_output_chars,
            protected: Default::default(),
        }
    }

    /// Refuses writes to these files (on this host; a remote target's files
    /// are not buddy's).
    pub fn protecting(mut self, protected: super::protect::Protected) -> Self {
        self.protected = std::sync::Arc::new(protected);
        self
    }
}

/// Largest old file read to show what a write changes; a bigger one is
/// described, not diffed.
const MAX_DIFF_SOURCE_BYTES: u64 = 1 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
    line_numbers: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

fn io_error(action: &str, path: &Path, e: std::io::Error) -> ToolError {
    ToolError::Failed(format!("cannot {action} {}: {e}", path.display()))
}

#[async_trait]
impl Tool for ReadFileTool {
    fn name(&self) -> &'static str {
        "read_file"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "read_file",
            "Read a UTF-8 text file, whole or a window of lines. Relative paths are resolved against the working directory. A file too long for one answer ends with a note naming the lines shown and the offset of the next window.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path of the file to read."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read, 1-based (default 1)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to read (default: as many as fit)."},
                    "line_numbers": {"type": "boolean", "description": "Prefix each line with its number and a tab, as `cat -n` does (default false: the exact text)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ReadArgs = parse_args(args)?;
        if args.offset == Some(0) || args.limit == Some(0) {
            return Err(ToolError::InvalidArguments(
                "offset and limit count lines from 1".into(),
            ));
        }
        let req = window::Request {
            offset: args.offset.unwrap_or(1),
            limit: args.limit,
            numbered: args.line_numbers.unwrap_or(false),
            explicit: args.offset.is_some() || args.limit.is_some() || args.line_numbers.is_some(),
        };
        let path = ctx.resolve(&args.path);
        // Enough bytes for the character limit plus one, whatever the encoding width.
        let cap = self.max_output_chars.saturating_mul(4) + 4;
        let gave_up = || {
            ToolError::Failed(format!(
                "reading {} took longer than {} s; gave up",
                path.display(),
                self.timeout.as_secs()
            ))
        };
        let read = async {
            if let Some(editor) = editor_for(ctx) {
                let text = editor_text(editor, &path).await?.ok_or_else(|| {
                    ToolError::Failed(format!("{} does not exist", path.display()))
                })?;
                Ok(window::from_text(&text, &req, cap))
            } else if ctx.target.is_local() {
                let (p, deadline) = (path.clone(), Instant::now() + self.timeout);
                tokio::task::spawn_blocking(move || window::read_local(&p, &req, cap, deadline))
                    .await
                    .map_err(|e| ToolError::Failed(format!("read task failed: {e}")))?
            } else {
                window::read_remote(ctx, &path, &req, cap).await
            }
        };
        let w = tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| gave_up())??;
        window::present(&path, w, &req, self.max_output_chars)
    }
}

#[async_trait]
impl Tool for WriteFileTool {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "write_file",
            "Write text to a file, replacing it atomically if it exists and creating parent directories. Relative paths are resolved against the working directory.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path of the file to write."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WriteArgs = parse_args(args)?;
        let path = ctx.resolve(&args.path);
        refuse_own(&self.protected, ctx, &path)?;
        // Refused before asking: an approval line for /dev/null would read
        // "0 bytes, content unchanged" for a write that replaces a device.
        refuse_not_regular(ctx, &path).await?;
        let request = write_request(ctx, &path, &args.content).await;
        match ctx.approver.approve(request).await {
            Approval::Approved => {}
            Approval::Denied { reason } => {
                return Ok(ToolOutput::text(format!("file not written: {reason}")))
            }
            Approval::Refused { reason } => {
                return Err(ToolError::Failed(format!("file write refused: {reason}")))
            }
        }
        let bytes = args.content.into_bytes();
        let len = bytes.len();
        store(ctx, &path, bytes, Known::Unread).await?;
        Ok(ToolOutput::text(if ctx.target.is_local() {
            format!("wrote {len} bytes to {}", path.display())
        } else {
            format!(
                "wrote {len} bytes to {} on {}",
                path.display(),
                ctx.target.actor()
            )
        }))
    }
}

/// The editor's buffers, when the tools go through them: for this host's
/// files only (a remote target's files are not the editor's).
pub(crate) fn editor_for(ctx: &ToolContext) -> Option<&dyn EditorFiles> {
    ctx.editor.as_deref().filter(|_| ctx.target.is_local())
}

/// What the editor holds at `path`; `None` when there is no such file. The
/// protocol has no "not found" answer, so a failed read of a path missing
/// on disk too is taken as a missing file.
async fn editor_text(editor: &dyn EditorFiles, path: &Path) -> Result<Option<String>, ToolError> {
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
        return write_remote(ctx.target.as_ref(), &ctx.cwd, path, &bytes)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()));
    }
    // Moved, not copied: a 10 MB edit costs no extra copy here.
    let target = path.to_path_buf();
    tokio::task::spawn_blocking(move || write_atomic(&target, &bytes))
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
    remove_remote(ctx.target.as_ref(), &ctx.cwd, path)
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))
}

async fn remove_remote(
    target: &dyn Target,
    cwd: &Path,
    path: &Path,
) -> Result<(), TargetFileError> {
    let p = shell_quote(&path.to_string_lossy());
    // Only a regular file or a symlink (itself) is removed.
    let script = format!(
        "if [ -e {p} ] && [ ! -L {p} ] && [ ! -f {p} ]; then \
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
        write_remote(self.target.as_ref(), &self.cwd, path, bytes).await
    }

    async fn remove(&self, path: &Path) -> Result<(), TargetFileError> {
        remove_remote(self.target.as_ref(), &self.cwd, path).await
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
fn not_regular(path: &Path, kind: std::fs::FileType) -> ToolError {
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
enum Capped {
    Missing,
    Bytes(Vec<u8>),
    /// Larger than the cap: its size.
    TooBig(u64),
}

async fn read_capped(ctx: &ToolContext, path: &Path, cap: u64) -> Result<Capped, ToolError> {
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
async fn read_remote_capped(
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

/// The approval question for writing `content` to `path`: the path and what
/// happens to it in `command`, the change as a unified diff in `detail`.
async fn write_request(ctx: &ToolContext, path: &Path, content: &str) -> ApprovalRequest {
    let shown = path.display().to_string();
    let old = old_content(ctx, path).await;
    let (what, detail) = match old {
        Old::Missing => (
            "new file".to_string(),
            Some(super::diff::unified(&shown, "", content)),
        ),
        Old::Text(old) => {
            let diff = super::diff::unified(&shown, &old, content);
            let what = if diff.is_empty() {
                "content unchanged".to_string()
            } else {
                format!("replaces {} bytes", old.len())
            };
            (what, Some(diff).filter(|d| !d.is_empty()))
        }
        Old::Opaque(why) => (format!("replaces {why}"), None),
    };
    ApprovalRequest {
        call_id: ctx.call_id.clone(),
        tool: "write_file".into(),
        actor: ctx.target.actor(),
        command: format!("write_file {shown} ({} bytes, {what})", content.len()),
        detail,
        read_only: false,
    }
}

/// What is at a path before a write, as far as a diff needs to know.
enum Old {
    Missing,
    Text(String),
    /// Not shown line by line: binary, too large or unreadable, and why.
    Opaque(String),
}

async fn old_content(ctx: &ToolContext, path: &Path) -> Old {
    let cap = MAX_DIFF_SOURCE_BYTES;
    let (bytes, size) = if let Some(editor) = editor_for(ctx) {
        match editor_text(editor, path).await {
            Ok(None) => return Old::Missing,
            Ok(Some(t)) => {
                let size = t.len() as u64;
                (t.into_bytes(), size)
            }
            Err(_) => return Old::Opaque("a file the editor cannot read".into()),
        }
    } else if ctx.target.is_local() {
        let meta = match tokio::fs::metadata(path).await {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Old::Missing,
            Err(e) => return Old::Opaque(format!("a file buddy cannot inspect ({e})")),
        };
        if meta.len() > cap {
            return Old::Opaque(format!("a {}-byte file", meta.len()));
        }
        match tokio::fs::read(path).await {
            Ok(b) => (b, meta.len()),
            Err(e) => return Old::Opaque(format!("a file buddy cannot read ({e})")),
        }
    } else {
        let p = shell_quote(&path.to_string_lossy());
        let script = format!(
            "if [ ! -e {p} ]; then exit 23; fi; wc -c < {p}; exec head -c {} -- {p}",
            cap + 1
        );
        match run_script(ctx.target.as_ref(), &script, &ctx.cwd, None).await {
            Ok((Some(23), _, _)) => return Old::Missing,
            Ok((Some(0), out, _)) => {
                let nl = out.iter().position(|&b| b == b'\n').unwrap_or(out.len());
                let size = String::from_utf8_lossy(&out[..nl])
                    .trim()
                    .parse()
                    .unwrap_or(0);
                (out.get(nl + 1..).unwrap_or_default().to_vec(), size)
            }
            _ => return Old::Opaque("a file buddy cannot read".into()),
        }
    };
    if size > cap || bytes.len() as u64 > cap {
        return Old::Opaque(format!("a {size}-byte file"));
    }
    match String::from_utf8(bytes) {
        Ok(t) if !t.contains('\0') => Old::Text(t),
        _ => Old::Opaque(format!("a {size}-byte binary file")),
    }
}

/// Distinguishes temp files of concurrent writes from this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Streams the content through the target's stdin into a temporary file next
/// to the destination, keeps the old file's mode, and renames it into place.
async fn write_remote(
    target: &dyn Target,
    cwd: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<(), TargetFileError> {
    let text = path.to_string_lossy();
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
        "trap 'rm -f -- {t}' EXIT; if [ -e {p} ] && [ ! -f {p} ]; then \
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

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    use std::io::Write;
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
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io_error("create directory", dir, e))?;
    let name = path.file_name().ok_or_else(|| {
        ToolError::InvalidArguments(format!("{} has no file name", path.display()))
    })?;
    let tmp = dir.join(format!(
        ".{}.buddy-tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let existing = std::fs::metadata(path).ok().map(|m| m.permissions());
    let result = (|| {
        // `create_new` refuses to follow anything already sitting at the temp path.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io_error("create", &tmp, e))?;
        f.write_all(bytes).map_err(|e| io_error("write", &tmp, e))?;
        if let Some(perms) = existing {
            f.set_permissions(perms)
                .map_err(|e| io_error("set permissions on", &tmp, e))?;
        }
        f.sync_all().map_err(|e| io_error("sync", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io_error("replace", path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    // Makes the rename itself durable; a failure here loses nothing already written.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::approval::AlwaysApprove;
    use std::sync::Arc;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::local(dir.to_path_buf(), Arc::new(AlwaysApprove))
    }

    fn tempdir(label: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("buddy-files-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test]
    async fn write_then_read_relative_path() {
        let d = tempdir("rw");
        let w = WriteFileTool::new(1000)
            .execute(
                json!({"path": "sub/dir/a.txt", "content": "héllo\n"}),
                &ctx(&d),
            )
            .await
            .unwrap();
        assert!(w.text.starts_with("wrote 7 bytes to "), "{}", w.text);
        let r = ReadFileTool::new(1000)
            .execute(json!({"path": "sub/dir/a.txt"}), &ctx(&d))
            .await
            .unwrap();
        assert_eq!(r, ToolOutput::text("héllo\n"));
        let leftovers: Vec<_> = std::fs::read_dir(d.join("sub/dir")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Records what it was asked and answers with `answer`.
    struct Recording {
        asked: std::sync::Mutex<Vec<ApprovalRequest>>,
        answer: Approval,
    }

    #[async_trait]
    impl crate::tools::Approver for Recording {
        async fn approve(&self, request: ApprovalRequest) -> Approval {
            self.asked.lock().unwrap().push(request);
            self.answer.clone()
        }
    }

    fn recording(answer: Approval) -> Arc<Recording> {
        Arc::new(Recording {
            asked: Default::default(),
            answer,
        })
    }

    #[tokio::test]
    async fn a_write_asks_with_the_diff_and_a_denial_changes_nothing() {
        let d = tempdir("ask");
        std::fs::write(d.join("a.txt"), "one\ntwo\n").unwrap();
        let approver = recording(Approval::Denied {
            reason: "nobody to ask".into(),
        });
        let c = ToolContext::local(d.clone(), approver.clone());
        let out = WriteFileTool::new(1000)
            .execute(json!({"path": "a.txt", "content": "one\n2\n"}), &c)
            .await
            .unwrap();
        assert_eq!(out.text, "file not written: nobody to ask");
        assert_eq!(
            std::fs::read_to_string(d.join("a.txt")).unwrap(),
            "one\ntwo\n"
        );
        let asked = approver.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].tool, "write_file");
        let shown = d.join("a.txt").display().to_string();
        assert_eq!(
            asked[0].command,
            format!("write_file {shown} (6 bytes, replaces 8 bytes)")
        );
        let diff = asked[0].detail.clone().unwrap();
        assert!(diff.contains(" one\n-two\n+2\n"), "{diff}");

        // A new file: said so, the diff is all additions, and approval writes it.
        let approver = recording(Approval::Approved);
        let c = ToolContext::local(d.clone(), approver.clone());
        WriteFileTool::new(1000)
            .execute(json!({"path": "new.txt", "content": "hi\n"}), &c)
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(d.join("new.txt")).unwrap(), "hi\n");
        let asked = approver.asked.lock().unwrap().clone();
        assert!(
            asked[0].command.ends_with("(3 bytes, new file)"),
            "{}",
            asked[0].command
        );
        assert!(asked[0].detail.as_deref().unwrap().ends_with("+hi\n"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn buddys_own_files_are_refused_without_asking() {
        let d = tempdir("own");
        std::fs::write(d.join("buddy.toml"), "[tools]\n").unwrap();
        let approver = recording(Approval::Approved);
        let c = ToolContext::local(d.clone(), approver.clone());
        let tool = WriteFileTool::new(1000).protecting(
            crate::tools::protect::Protected::new().file("config file", &d.join("buddy.toml")),
        );
        for path in ["buddy.toml", "./sub/../buddy.toml"] {
            let e = tool
                .execute(json!({"path": path, "content": "x"}), &c)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("buddy's own config file"), "{e}");
        }
        assert!(approver.asked.lock().unwrap().is_empty());
        assert_eq!(
            std::fs::read_to_string(d.join("buddy.toml")).unwrap(),
            "[tools]\n"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn overwrite_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempdir("perm");
        let p = d.join("script.sh");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
        WriteFileTool::new(100)
            .execute(
                json!({"path": p.to_str().unwrap(), "content": "new"}),
                &ctx(&d),
            )
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o751
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn big_file_is_read_bounded_and_reported() {
        let d = tempdir("big");
        std::fs::write(d.join("big.txt"), "x".repeat(1_000_000)).unwrap();
        let r = ReadFileTool::new(500)
            .execute(json!({"path": "big.txt"}), &ctx(&d))
            .await
            .unwrap();
        assert!(r.text.chars().count() <= 500, "{}", r.text.len());
        assert!(r.text.starts_with(&"x".repeat(300)));
        assert!(
            r.text
                .ends_with("[read_file: line 1 of 1 is longer than shown; only its start is here (run_shell with `sed -n '1p' FILE | cut -c …` shows the rest)]"),
            "{}",
            r.text
        );
        assert_eq!(
            r.truncated,
            Some(crate::tools::Truncation {
                kept: r.text.chars().count(),
                total: 1_000_000
            })
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn fifos_and_devices_are_refused_without_blocking() {
        let d = tempdir("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(d.join("pipe"))
            .status()
            .unwrap()
            .success());
        let t = ReadFileTool::new(100);
        // Without the type check the open blocks for a writer that never comes.
        let read = |p: &'static str| {
            let (t, c) = (&t, ctx(&d));
            async move {
                tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    t.execute(json!({"path": p}), &c),
                )
                .await
                .expect("read_file returned")
            }
        };
        let err = read("pipe").await.unwrap_err().to_string();
        assert!(
            err.contains("is a FIFO (named pipe), not a regular file"),
            "{err}"
        );
        let err = read("/dev/zero").await.unwrap_err().to_string();
        assert!(err.contains("is a character device"), "{err}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn writes_to_devices_fifos_and_directories_are_refused_without_asking() {
        use std::os::unix::fs::FileTypeExt;
        let d = tempdir("dev");
        assert!(std::process::Command::new("mkfifo")
            .arg(d.join("pipe"))
            .status()
            .unwrap()
            .success());
        std::os::unix::fs::symlink("/dev/null", d.join("null-link")).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        let approver = recording(Approval::Approved);
        let c = ToolContext::local(d.clone(), approver.clone());
        let cases = [
            ("/dev/null", "a character device"),
            ("null-link", "a character device"),
            ("pipe", "a FIFO (named pipe)"),
            ("sub", "a directory"),
        ];
        for (path, kind) in cases {
            let e = WriteFileTool::new(100)
                .execute(json!({"path": path, "content": ""}), &c)
                .await
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("refused: ") && e.contains(&format!("is {kind}, not a regular file")),
                "{path}: {e}"
            );
        }
        // Nobody was asked a question whose answer could not matter.
        assert!(approver.asked.lock().unwrap().is_empty());
        let null = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(null.file_type().is_char_device());
        assert!(std::fs::symlink_metadata(d.join("pipe"))
            .unwrap()
            .file_type()
            .is_fifo());
        assert!(std::fs::symlink_metadata(d.join("null-link"))
            .unwrap()
            .file_type()
            .is_symlink());
        // The write itself checks the resolved target, whatever was asked
        // before: a link swapped in after the approval is still refused.
        let e = write_atomic(&d.join("null-link"), b"x").unwrap_err();
        assert!(
            e.to_string().contains("/dev/null is a character device"),
            "{e}"
        );
        let e = write_atomic(&d.join("pipe"), b"x").unwrap_err();
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

    #[tokio::test]
    async fn binary_and_missing_files_are_clear_errors() {
        let d = tempdir("bin");
        std::fs::write(d.join("b.bin"), [0u8, 1, 2, 3]).unwrap();
        let t = ReadFileTool::new(100);
        let e = t
            .execute(json!({"path": "b.bin"}), &ctx(&d))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("binary"), "{e}");
        std::fs::write(d.join("latin1.txt"), b"caf\xe9 au lait").unwrap();
        let e = t
            .execute(json!({"path": "latin1.txt"}), &ctx(&d))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("binary"), "{e}");
        let e = t
            .execute(json!({"path": "nope.txt"}), &ctx(&d))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("nope.txt"), "{e}");
        let e = t.execute(json!({"file": "x"}), &ctx(&d)).await.unwrap_err();
        assert!(matches!(e, ToolError::InvalidArguments(_)));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn writes_through_symlinks_and_in_parallel() {
        let d = tempdir("link");
        std::fs::write(d.join("real.txt"), "old").unwrap();
        std::os::unix::fs::symlink(d.join("real.txt"), d.join("link.txt")).unwrap();
        WriteFileTool::new(100)
            .execute(json!({"path": "link.txt", "content": "new"}), &ctx(&d))
            .await
            .unwrap();
        assert!(std::fs::symlink_metadata(d.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(d.join("real.txt")).unwrap(), "new");

        let t = Arc::new(WriteFileTool::new(100));
        let c = ctx(&d);
        let writes = (0..8).map(|i| {
            let (t, c) = (t.clone(), c.clone());
            tokio::spawn(async move {
                t.execute(json!({"path": "same.txt", "content": format!("v{i}")}), &c)
                    .await
            })
        });
        for w in writes.collect::<Vec<_>>() {
            w.await.unwrap().unwrap();
        }
        let content = std::fs::read_to_string(d.join("same.txt")).unwrap();
        assert!(content.starts_with('v') && content.len() == 2, "{content}");
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("buddy-tmp")), "{names:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
