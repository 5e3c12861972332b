//! The seam between the file tools and a session's checkpoint store: before
//! a tool changes a file it names the file here, and the store keeps what is
//! there now, so a rewind can put it back. The store itself (its file, its
//! bounds, its crash safety) lives in `session::checkpoint`; this module only
//! says what the tools and the agent ask of it, and the plain data a rewind
//! reports. It does not decide which turn is which: the agent names the turn.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a rewind does, or did, to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum FileAction {
    /// Its earlier content is (or was) written back.
    Restore { bytes: u64 },
    /// It did not exist before: it is (or was) removed.
    Delete,
    /// It already is as it was.
    Unchanged,
    /// Its earlier content was not kept (too large, the store full, a
    /// remote target), so it cannot be put back.
    NotKept { reason: String },
    /// Putting it back failed.
    Failed { reason: String },
}

/// One file a rewind touches, by the path the tool wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRestore {
    pub path: String,
    #[serde(flatten)]
    pub action: FileAction,
}

/// Why a checkpoint could not be kept, planned or restored.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The store's own files (the line names what failed).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The blocking task that did the work panicked or was cancelled.
    #[error("the checkpoint task failed: {0}")]
    Task(String),
}

/// A session's checkpoint store, as the tools and the agent use it. Turn ids
/// are the agent's; they sort in the order the turns began, so "turn T or
/// later" is a comparison.
#[async_trait]
pub trait Checkpoints: Send + Sync {
    /// Keeps what is at each of `paths` now as its state before `turn`
    /// changed it, and returns once that is durable: the caller changes the
    /// files only after this succeeds. `remote` names the target when the
    /// files live on another machine (they are then recorded as not kept).
    async fn before_change(
        &self,
        turn: &str,
        paths: &[PathBuf],
        remote: Option<&str>,
    ) -> Result<(), CheckpointError>;

    /// For each of `turns`, what restoring the files to before it would do
    /// (at most one entry per file, in the order they were first changed).
    fn plan(&self, turns: &[String]) -> Result<Vec<Vec<FileRestore>>, CheckpointError>;

    /// Restores every file changed in `turn` or later to its state before
    /// `turn`; what happened to each.
    fn restore(&self, turn: &str) -> Result<Vec<FileRestore>, CheckpointError>;
}
