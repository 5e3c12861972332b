//! `apply_patch`: the patch format OpenAI's GPT and Codex models are trained
//! on (`parse`), applied with `edit_file`'s engine: the same levels of
//! tolerance, a chunk placed only where it fits once (after its `@@` line,
//! when it names one, the first fit is the one meant), the file's BOM, line
//! endings, indentation style and final newline kept. All or nothing across
//! every file of the patch: every file is read and every chunk placed
//! before anything is asked, one approval shows every file's diff, and a
//! failed write puts back what was already written. Writes and deletions go
//! through `door::store` and `door::remove`, like every file tool's.

pub mod parse;

use super::approval::{Approval, ApprovalRequest};
use super::checkpoint::{After, Known};
use super::content::load;
use super::door::{refuse_own, remove, store};
use super::edit::doc::Doc;
use super::edit::engine::{self, Hit};
use super::edit::lines::{self, Level};
use super::edit::MAX_EDIT_BYTES;
use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use parse::{Chunk, Op};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Most files one patch may touch.
const MAX_FILES: usize = 100;
/// Longest approval detail (every file's diff together), in characters.
const MAX_DETAIL_CHARS: usize = 2 * super::diff::MAX_DIFF_CHARS;

pub struct ApplyPatchTool {
    max_output_chars: usize,
    timeout: Duration,
    protected: Arc<super::protect::Protected>,
}

impl ApplyPatchTool {
    pub fn new(max_output_chars: usize) -> Self {
        ApplyPatchTool {
            max_output_chars,
            timeout: super::shell::DEFAULT_TIMEOUT,
            protected: Default::default(),
        }
    }

    /// Reading and writing each file end after this long.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Refuses patches that touch these files (on this host).
    pub fn protecting(mut self, protected: super::protect::Protected) -> Self {
        self.protected = Arc::new(protected);
        self
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// The whole patch, from *** Begin Patch to *** End Patch.
    // `patch` is taken too (some models' name for it), but not offered.
    #[serde(alias = "patch")]
    input: String,
}

#[async_trait]
impl Tool for ApplyPatchTool {
    fn name(&self) -> &'static str {
        "apply_patch"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "apply_patch",
            "Edit files with a patch. Format:\n*** Begin Patch\n*** Add File: path\n+line of the new file\n*** Delete File: path\n*** Update File: path\n*** Move to: new/path (optional)\n@@ a line just above the change, to locate it (optional)\n context line\n-removed line\n+added line\n*** End Patch\nGive about 3 lines of context around each change, and an @@ line when the context alone could match more than one place. The whole patch is applied or nothing is: a chunk that does not fit the file exactly once changes nothing, and the error shows where to look. Line endings and indentation style are kept.",
            crate::tools::schema::of::<Args>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let ops = parse::parse(&args.input)
            .map_err(|e| ToolError::Failed(format!("the patch does not parse: {e}")))?;
        if ops.len() > MAX_FILES {
            return Err(ToolError::Failed(format!(
                "the patch touches {} files, more than {MAX_FILES}; split it",
                ops.len()
            )));
        }
        for op in &ops {
            refuse_own(&self.protected, ctx, &ctx.resolve(op.path()))?;
            if let Op::Update {
                move_to: Some(dest),
                ..
            } = op
            {
                refuse_own(&self.protected, ctx, &ctx.resolve(dest))?;
            }
        }
        let mut files = Files::default();
        for op in &ops {
            self.plan(ctx, &mut files, op).await?;
        }
        let request = ApprovalRequest {
            call_id: ctx.call_id.clone(),
            tool: "apply_patch".into(),
            actor: ctx.target.actor(),
            command: format!("apply_patch: {}", files.summary()),
            detail: Some(files.diff()).filter(|d| !d.is_empty()),
            read_only: false,
        };
        match ctx.approver.approve(request).await {
            Approval::Approved => {}
            Approval::Denied { reason } => {
                return Ok(ToolOutput::text(format!("no file changed: {reason}")))
            }
            Approval::Refused { reason } => {
                return Err(ToolError::Failed(format!("patch refused: {reason}")))
            }
        }
        for f in &files.list {
            if self.read(ctx, &f.path).await? != f.before {
                return Err(ToolError::Failed(format!(
                    "{} changed while the patch waited for approval; no file was changed. Read it again and redo the patch",
                    f.path.display()
                )));
            }
        }
        self.write(ctx, &files).await?;
        Ok(ToolOutput::text(format!(
            "applied the patch: {}",
            files.summary()
        )))
    }
}

/// One file the patch touches: what it was, what it becomes.
struct File {
    path: PathBuf,
    /// The bytes read before (`None`: there was no file).
    before: Option<Vec<u8>>,
    doc: Doc<'static>,
    /// The text now (`None`: deleted).
    text: Option<String>,
    /// What the patch did to it, in order, as phrases naming the file.
    actions: Vec<String>,
    /// Moved away: its diff is the destination's.
    moved: bool,
}

#[derive(Default)]
struct Files {
    list: Vec<File>,
}

impl Files {
    fn find(&mut self, path: &Path) -> Option<&mut File> {
        self.list.iter_mut().find(|f| f.path == path)
    }

    fn summary(&self) -> String {
        let parts: Vec<String> = self
            .list
            .iter()
            .flat_map(|f| f.actions.iter().cloned())
            .collect();
        parts.join("; ")
    }

    fn diff(&self) -> String {
        let mut out = String::new();
        for f in &self.list {
            let shown = f.path.display().to_string();
            let d = match &f.text {
                Some(new) => super::diff::unified_excerpt(&shown, &f.doc.text, new),
                None if f.before.is_some() && !f.moved => format!("--- {shown}\n(deleted)\n"),
                None => String::new(),
            };
            out.push_str(&d);
        }
        if out.chars().count() > MAX_DETAIL_CHARS {
            let cut: String = out.chars().take(MAX_DETAIL_CHARS).collect();
            let cut = &cut[..cut.rfind('\n').map_or(0, |i| i + 1)];
            return format!("{cut}[diff cut: the patch changes more than fits here]\n");
        }
        out
    }
}

impl ApplyPatchTool {
    async fn read(&self, ctx: &ToolContext, path: &Path) -> Result<Option<Vec<u8>>, ToolError> {
        tokio::time::timeout(self.timeout, load(ctx, path, MAX_EDIT_BYTES))
            .await
            .map_err(|_| self.slow(path))?
    }

    fn slow(&self, path: &Path) -> ToolError {
        ToolError::Failed(format!(
            "reading or writing {} took longer than {} s; gave up",
            path.display(),
            self.timeout.as_secs()
        ))
    }

    /// The file at `path` as the patch has left it so far, read on first use.
    async fn file<'a>(
        &self,
        ctx: &ToolContext,
        files: &'a mut Files,
        path: &Path,
    ) -> Result<&'a mut File, ToolError> {
        if files.find(path).is_none() {
            let before = self.read(ctx, path).await?;
            let (doc, text) = match &before {
                None => (Doc::new_file(), None),
                Some(bytes) => {
                    let doc = Doc::decode(bytes)
                        .ok_or_else(|| {
                            ToolError::Failed(format!(
                                "{} is not UTF-8 text; apply_patch changes text files only",
                                path.display()
                            ))
                        })?
                        .into_owned();
                    let text = doc.text.to_string();
                    (doc, Some(text))
                }
            };
            files.list.push(File {
                path: path.to_path_buf(),
                before,
                doc,
                text,
                actions: Vec::new(),
                moved: false,
            });
        }
        files
            .find(path)
            .ok_or_else(|| ToolError::Failed("internal error: a file read went missing".into()))
    }

    async fn plan(&self, ctx: &ToolContext, files: &mut Files, op: &Op) -> Result<(), ToolError> {
        let path = ctx.resolve(op.path());
        let shown = path.display().to_string();
        let f = self.file(ctx, files, &path).await?;
        match op {
            Op::Add { content, .. } => {
                if f.text.is_some() {
                    return Err(ToolError::Failed(format!(
                        "cannot add {shown}: it already exists; use *** Update File to change it"
                    )));
                }
                f.text = Some(content.clone());
                f.actions.push(format!("add {shown}"));
            }
            Op::Delete { .. } => {
                if f.text.take().is_none() {
                    return Err(ToolError::Failed(format!(
                        "cannot delete {shown}: there is no such file"
                    )));
                }
                f.actions.push(format!("delete {shown}"));
            }
            Op::Update {
                move_to, chunks, ..
            } => {
                let Some(text) = &f.text else {
                    return Err(ToolError::Failed(format!(
                        "cannot update {shown}: there is no such file (use *** Add File to create it)"
                    )));
                };
                let (new, levels) = update(text, chunks)
                    .map_err(|e| ToolError::Failed(format!("cannot update {shown}: {e}")))?;
                let note = match levels {
                    Level::Exact => String::new(),
                    l => format!(" ({})", l.describe()),
                };
                match move_to {
                    None => {
                        f.text = Some(new);
                        f.actions.push(format!("update {shown}{note}"));
                    }
                    Some(dest) => {
                        let dest_path = ctx.resolve(dest);
                        f.text = None;
                        f.moved = true;
                        f.actions
                            .push(format!("move {shown} to {}{note}", dest_path.display()));
                        // The moved file keeps its BOM, line endings and
                        // final newline, and its diff is against the source.
                        let doc = f.doc.clone();
                        let d = self.file(ctx, files, &dest_path).await?;
                        if d.text.is_some() {
                            return Err(ToolError::Failed(format!(
                                "cannot move {shown} to {}: it already exists",
                                dest_path.display()
                            )));
                        }
                        d.doc = doc;
                        d.text = Some(new);
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes every changed file, then deletes; on a failure, puts back
    /// what was done and reports the first error.
    async fn write(&self, ctx: &ToolContext, files: &Files) -> Result<(), ToolError> {
        // Each change as the bytes to store (None: a delete), unchanged
        // files left out.
        let changes: Vec<(&File, Option<Vec<u8>>)> = files
            .list
            .iter()
            .filter(|f| f.text.is_some())
            .chain(files.list.iter().filter(|f| f.text.is_none()))
            .filter_map(|f| match &f.text {
                Some(text) => {
                    let bytes = f.doc.encode(text);
                    (f.before.as_deref() != Some(&bytes[..])).then_some((f, Some(bytes)))
                }
                None => f.before.is_some().then_some((f, None)),
            })
            .collect();
        // Every file of the patch checkpointed at once: one sync for the
        // lot instead of one per file (store and remove find them kept).
        // Each as read before the approval and checked since.
        let kept: Vec<(PathBuf, Known, After)> = changes
            .iter()
            .map(|(f, bytes)| {
                let after = After::of(bytes.as_deref());
                (f.path.clone(), Known::from(f.before.as_deref()), after)
            })
            .collect();
        tokio::time::timeout(self.timeout, ctx.checkpoint_before_changes(&kept))
            .await
            .map_err(|_| self.slow(Path::new("the checkpoint store")))??;
        let mut done: Vec<&File> = Vec::new();
        for (f, bytes) in changes {
            let known = Known::from(f.before.as_deref());
            let step = match bytes {
                Some(bytes) => {
                    tokio::time::timeout(self.timeout, store(ctx, &f.path, bytes, known)).await
                }
                None => tokio::time::timeout(self.timeout, remove(ctx, &f.path, known)).await,
            };
            if let Err(e) = step.map_err(|_| self.slow(&f.path)).and_then(|r| r) {
                let mut undo_failed = Vec::new();
                for d in done.iter().rev() {
                    // Kept for this turn already: nothing is read again.
                    let undo = match &d.before {
                        Some(bytes) => store(ctx, &d.path, bytes.clone(), Known::Unread).await,
                        None => remove(ctx, &d.path, Known::Unread).await,
                    };
                    if undo.is_err() {
                        undo_failed.push(d.path.display().to_string());
                    }
                }
                let tail = if undo_failed.is_empty() {
                    "; the files already changed were put back".to_string()
                } else {
                    format!("; could not put back {}", undo_failed.join(", "))
                };
                return Err(ToolError::Failed(format!("{e}{tail}")));
            }
            done.push(f);
        }
        Ok(())
    }
}

/// Which chunk of an update failed: named only when there are several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Which {
    n: usize,
    of: usize,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.of > 1 {
            write!(f, "chunk {} of {}: ", self.n, self.of)
        } else {
            Ok(())
        }
    }
}

/// Why an update's chunk did not apply (and so nothing was changed);
/// `cursor` is the line the search started after (0: the top).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ChunkError {
    #[error("{which}the @@ line {anchor:?} was not found{}; nothing was changed", after(*.cursor))]
    NoAnchor {
        which: Which,
        anchor: String,
        cursor: usize,
    },
    /// The old lines fit more than once; `lines` are the first places.
    #[error("{which}its context and removed lines fit {count} places{} ({level}), at lines {}; nothing was changed. Add an @@ line naming a line just above the change, or more context", after(*.cursor), line_list(.lines))]
    Ambiguous {
        which: Which,
        count: usize,
        cursor: usize,
        level: &'static str,
        lines: Vec<usize>,
    },
    #[error("{which}its context and removed lines were not found{} (not even ignoring whitespace and Unicode punctuation); nothing was changed. The closest region of the file is:\n{closest}", after(*.cursor))]
    NotFound {
        which: Which,
        cursor: usize,
        closest: String,
    },
    #[error("{which}none of its context and removed lines are in the file{}; nothing was changed. Read the file again", after(*.cursor))]
    Absent { which: Which, cursor: usize },
}

fn line_list(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().map(usize::to_string).collect();
    shown.join(", ")
}

/// `text` with every chunk applied, and the loosest level any chunk needed.
fn update(text: &str, chunks: &[Chunk]) -> Result<(String, Level), ChunkError> {
    let index = lines::index(text);
    let mut cursor = 0;
    let mut hits: Vec<Hit> = Vec::new();
    let mut loosest = Level::Exact;
    for (n, chunk) in chunks.iter().enumerate() {
        let which = Which {
            n: n + 1,
            of: chunks.len(),
        };
        if let Some(anchor) = &chunk.anchor {
            let at = Level::ALL
                .iter()
                .find_map(|&level| {
                    let want = level.normalise(anchor);
                    (cursor..index.len()).find(|&k| level.normalise(index[k].text(text)) == want)
                })
                .ok_or_else(|| ChunkError::NoAnchor {
                    which,
                    anchor: crate::text::clip(anchor, 80).into_owned(),
                    cursor,
                })?;
            cursor = at + 1;
        }
        let old: Vec<&str> = chunk.old.iter().map(String::as_str).collect();
        let new_text: String = chunk.new.iter().map(|l| format!("{l}\n")).collect();
        if old.is_empty() {
            // Only additions: after the @@ line, or at the end of the file.
            let at = if chunk.anchor.is_some() {
                cursor
            } else {
                index.len()
            };
            let start = index.get(at).map_or(text.len(), |l| l.start);
            let eol = index.first().map_or("\n", |l| match l.ending(text) {
                "" => "\n",
                e => e,
            });
            // A last line without its newline gets one before the addition.
            let lead = if at == index.len() && !text.is_empty() && !text.ends_with('\n') {
                eol
            } else {
                ""
            };
            let insert = chunk
                .new
                .iter()
                .map(|l| format!("{l}{eol}"))
                .collect::<String>();
            hits.push(Hit {
                start,
                end: start,
                insert: format!("{lead}{insert}"),
            });
            continue;
        }
        let mut placed = None;
        for level in Level::ALL {
            let mut found = engine::windows(text, &index, &old, level, cursor..index.len());
            if chunk.at_eof {
                found.retain(|&s| s + old.len() == index.len());
            }
            match found.len() {
                0 => continue,
                // After an @@ line the first fit is the one meant.
                _ if chunk.anchor.is_some() || found.len() == 1 => {
                    placed = Some((level, found[0]));
                    break;
                }
                _ => {
                    return Err(ChunkError::Ambiguous {
                        which,
                        count: found.len(),
                        cursor,
                        level: level.describe(),
                        lines: found.iter().take(20).map(|s| s + 1).collect(),
                    });
                }
            }
        }
        let Some((level, s)) = placed else {
            let closest = engine::closest(text, &index, &old);
            return Err(match closest {
                Some(closest) => ChunkError::NotFound {
                    which,
                    cursor,
                    closest,
                },
                None => ChunkError::Absent { which, cursor },
            });
        };
        loosest = loosest.max(level);
        hits.push(engine::window_hit(
            text,
            &index[s..s + old.len()],
            &old,
            true,
            &new_text,
            level,
        ));
        cursor = s + old.len();
    }
    hits.sort_by_key(|h| h.start);
    Ok((engine::splice(text, &hits).0, loosest))
}

fn after(cursor: usize) -> String {
    if cursor == 0 {
        String::new()
    } else {
        format!(" after line {cursor}")
    }
}

#[cfg(test)]
mod tests;
