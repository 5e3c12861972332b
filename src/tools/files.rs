//! `read_file` and `write_file`. Reads take a window of lines (`window.rs`:
//! `offset`, `limit`, numbered or not), are bounded (a huge file costs a fixed
//! buffer, not its size) and refuse binary content. A write asks the
//! `Approver` like a shell command, showing the change as a diff, and then
//! goes through the one door every file change takes (`door.rs`: atomic,
//! checkpointed, regular files only, never buddy's own files).

use super::approval::{Approval, ApprovalRequest};
use super::checkpoint::Known;
use super::content::{editor_for, editor_text};
use super::door::{refuse_not_regular, refuse_own, store};
use super::{parse_args, window, Tool, ToolContext, ToolError, ToolOutput};
use crate::host::{run_script, shell_quote};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    /// Path of the file to read.
    path: String,
    /// First line to read, 1-based (default 1).
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    /// Most lines to read (default: as many as fit).
    #[schemars(range(min = 1))]
    limit: Option<u64>,
    /// Prefix each line with its number and a tab, as `cat -n` does (default false: the exact text).
    line_numbers: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// Path of the file to write.
    path: String,
    /// The complete new content of the file.
    content: String,
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
            crate::tools::schema::of::<ReadArgs>(),
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
            crate::tools::schema::of::<WriteArgs>(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::approval::AlwaysApprove;
    use serde_json::json;
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
        crate::tools::door::tests::fifo_and_device_link(&d);
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
