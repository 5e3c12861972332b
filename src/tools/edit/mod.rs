//! `edit_file`: replaces text in a file in place, so the model sends the
//! change, not the whole file. The matching (exact, then normalised levels,
//! unique or nothing) is `engine`'s, shared with `apply_patch`; the file's
//! BOM, line endings and final newline are `doc`'s. Like `write_file`, an
//! edit reads the file on any target, refuses buddy's own files, asks the
//! `Approver` with the diff, and writes through `door::store` (atomic,
//! mode kept). An edit that cannot be placed changes nothing.

pub mod doc;
pub mod engine;
pub mod lines;

use super::approval::{Approval, ApprovalRequest};
use super::checkpoint::Known;
use super::content::{load, unchanged};
use super::door::{refuse_own, store};
use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use doc::Doc;
use engine::{Change, Edit};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Largest file an edit reads whole (the text, the edited copy and the
/// bytes written are all in memory at once).
pub const MAX_EDIT_BYTES: u64 = 32 << 20;
/// Most edits one call may carry.
const MAX_EDITS: usize = 100;

pub struct EditFileTool {
    max_output_chars: usize,
    timeout: Duration,
    protected: Arc<super::protect::Protected>,
}

impl EditFileTool {
    pub fn new(max_output_chars: usize) -> Self {
        EditFileTool {
            max_output_chars,
            timeout: super::shell::DEFAULT_TIMEOUT,
            protected: Default::default(),
        }
    }

    /// Reading the file and writing it back each end after this long.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Refuses edits of these files (on this host).
    pub fn protecting(mut self, protected: super::protect::Protected) -> Self {
        self.protected = Arc::new(protected);
        self
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Path of the file to edit.
    path: String,
    /// The exact text to replace.
    old_string: Option<String>,
    /// The text to put in its place.
    new_string: Option<String>,
    /// Replace every match instead of requiring one (default false).
    #[serde(default)]
    replace_all: bool,
    /// Several replacements in one file, applied in order to the evolving text, all or nothing.
    edits: Option<Vec<EditArg>>,
}

// No doc comments on the fields: the model reads `Args`' for them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArg {
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

impl Args {
    fn edits(self) -> Result<(String, Vec<Edit>), ToolError> {
        let bad = |m: &str| Err(ToolError::InvalidArguments(m.to_string()));
        let edits = match (self.old_string, self.new_string, self.edits) {
            (Some(old), Some(new), None) => vec![Edit {
                old,
                new,
                replace_all: self.replace_all,
            }],
            (None, None, Some(list)) if list.is_empty() => return bad("edits is empty"),
            (None, None, Some(list)) if list.len() > MAX_EDITS => {
                return bad("more than 100 edits in one call; split them")
            }
            (None, None, Some(list)) => list
                .into_iter()
                .map(|e| Edit {
                    old: e.old_string,
                    new: e.new_string,
                    replace_all: e.replace_all,
                })
                .collect(),
            (_, _, Some(_)) => {
                return bad("give either old_string and new_string, or edits, not both")
            }
            _ => return bad("old_string and new_string are both required (or an edits list)"),
        };
        Ok((self.path, edits))
    }
}

#[async_trait]
impl Tool for EditFileTool {
    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "edit_file",
            "Edit a text file in place by replacing old_string with new_string. old_string must match the file's text once: copy it exactly, with enough surrounding lines to be unique (small whitespace or quote differences are tolerated, but an ambiguous or missing match changes nothing and the error says where to look). replace_all changes every match. To make several changes to one file, pass `edits` instead: they are applied in order, each to the text the previous ones produced, all or nothing, and must not overlap. Line endings, indentation style and the final newline are kept. An empty old_string creates a file that does not exist yet.",
            crate::tools::schema::of::<Args>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (path, edits) = parse_args::<Args>(args)?.edits()?;
        let path = ctx.resolve(&path);
        refuse_own(&self.protected, ctx, &path)?;
        let before = self.read(ctx, &path).await?;
        let planned = plan(&path, before.as_deref(), &edits)?;
        let shown = path.display().to_string();
        let diff = super::diff::unified_excerpt(&shown, &planned.doc.text, &planned.text);
        let request = ApprovalRequest {
            call_id: ctx.call_id.clone(),
            tool: "edit_file".into(),
            actor: ctx.target.actor(),
            command: format!("edit_file {shown} ({})", planned.summary()),
            detail: Some(diff).filter(|d| !d.is_empty()),
            read_only: false,
        };
        match ctx.approver.approve(request).await {
            Approval::Approved => {}
            Approval::Denied { reason } => {
                return Ok(ToolOutput::text(format!("file not changed: {reason}")))
            }
            Approval::Refused { reason } => {
                return Err(ToolError::Failed(format!("file edit refused: {reason}")))
            }
        }
        let report = planned.report(&shown);
        // Encoded before the check below: the plan borrows `before`.
        let bytes = planned.doc.encode_owned(planned.text);
        // The user may have taken a while; an edit of text that changed
        // meanwhile could land in the wrong place.
        let (same, before) =
            tokio::time::timeout(self.timeout, unchanged(ctx, &path, before, MAX_EDIT_BYTES))
                .await
                .map_err(|_| self.slow(&path))??;
        if !same {
            return Err(ToolError::Failed(format!(
                "{shown} changed while the edit waited for approval; nothing was written. Read it again and redo the edit"
            )));
        }
        // What was just compared is what the checkpoint keeps.
        let known = Known::from(before.as_deref());
        tokio::time::timeout(self.timeout, store(ctx, &path, bytes, known))
            .await
            .map_err(|_| self.slow(&path))??;
        Ok(ToolOutput::text(report))
    }
}

impl EditFileTool {
    async fn read(&self, ctx: &ToolContext, path: &Path) -> Result<Option<Vec<u8>>, ToolError> {
        tokio::time::timeout(self.timeout, load(ctx, path, MAX_EDIT_BYTES))
            .await
            .map_err(|_| self.slow(path))?
    }

    fn slow(&self, path: &Path) -> ToolError {
        ToolError::Failed(format!(
            "editing {} took longer than {} s; gave up",
            path.display(),
            self.timeout.as_secs()
        ))
    }
}

/// An edit worked out, not yet written.
pub struct Planned<'a> {
    pub doc: Doc<'a>,
    pub text: String,
    pub changes: Vec<Change>,
    pub created: bool,
}

impl Planned<'_> {
    /// What the approval question says about the change.
    fn summary(&self) -> String {
        let (added, removed) = line_counts(&self.doc.text, &self.text);
        if self.created {
            return format!("new file, {added} lines");
        }
        let n = self.changes.len();
        format!(
            "{n} edit{}, +{added} -{removed} lines",
            if n == 1 { "" } else { "s" }
        )
    }

    /// The model's answer: where each change went and how it matched.
    fn report(&self, shown: &str) -> String {
        if self.created {
            return format!("created {shown}");
        }
        let parts: Vec<String> = self
            .changes
            .iter()
            .map(|c| {
                let what = if c.count == 1 {
                    format!("line {}", c.line)
                } else {
                    format!("{} places from line {}", c.count, c.line)
                };
                format!("{what} ({})", c.level.describe())
            })
            .collect();
        format!("edited {shown}: {}", parts.join("; "))
    }
}

/// Lines added and removed between two texts, counted roughly (by the
/// lines that differ between the common start and end).
fn line_counts(old: &str, new: &str) -> (usize, usize) {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let start = super::diff::common_prefix(a, b);
    let start = memchr::memrchr(b'\n', &a[..start]).map_or(0, |i| i + 1);
    let room = a.len().min(b.len()) - start;
    let end = super::diff::common_suffix(&a[a.len() - room..], &b[b.len() - room..]);
    let count = |s: &[u8]| {
        let mid = &s[start..s.len() - end];
        memchr::memchr_iter(b'\n', mid).count()
            + usize::from(!mid.is_empty() && !mid.ends_with(b"\n"))
    };
    (count(b), count(a))
}

/// Works out an edit of `path`, whose bytes are `before` (`None`: no file).
pub fn plan<'a>(
    path: &Path,
    before: Option<&'a [u8]>,
    edits: &[Edit],
) -> Result<Planned<'a>, ToolError> {
    let Some(bytes) = before else {
        return match edits {
            [e] if e.old.is_empty() => Ok(Planned {
                // A new file is exactly what the model wrote.
                doc: Doc {
                    final_newline: e.new.ends_with('\n'),
                    ..Doc::new_file()
                },
                text: e.new.clone(),
                changes: Vec::new(),
                created: true,
            }),
            _ => Err(ToolError::Failed(format!(
                "{} does not exist; to create it, call edit_file with an empty old_string (or use write_file)",
                path.display()
            ))),
        };
    };
    if let [e] = edits {
        if e.old.is_empty() {
            return Err(ToolError::Failed(format!(
                "{} already exists; an empty old_string only creates new files. Give the text to replace",
                path.display()
            )));
        }
    }
    let doc = Doc::decode(bytes).ok_or_else(|| {
        ToolError::Failed(format!(
            "{} is not UTF-8 text (NUL bytes or invalid UTF-8); edit_file edits text files only",
            path.display()
        ))
    })?;
    let (text, changes) = engine::apply(&doc.text, edits)
        .map_err(|e| ToolError::Failed(format!("cannot edit {}: {e}", path.display())))?;
    Ok(Planned {
        doc,
        text,
        changes,
        created: false,
    })
}

#[cfg(test)]
mod tests;
