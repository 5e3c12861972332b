//! The seam between the file tools and a session's checkpoint store: before
//! a tool changes a file it names the file here, and the store keeps what is
//! there now, so a rewind can put it back. On this host the store reads the
//! file itself; on an SSH or container target it cannot, so the tool hands
//! over the bytes it read through the target (`Prior`), and a rewind writes
//! them back through the target (`TargetFiles`). The store itself (its file,
//! its bounds, its crash safety) lives in `session::checkpoint`; this module
//! only says what the tools and the agent ask of it, and the plain data a
//! rewind reports. It does not decide which turn is which: the agent names
//! the turn.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The largest file whose earlier content is kept, on any target. Source
/// files are far smaller; a bigger one (a data file, a build output) is
/// recorded as not kept, and a rewind says so rather than restore it.
pub const MAX_KEPT_BYTES: u64 = 8 * 1024 * 1024;

/// Turn ids of undo points start with this: the state of the files just
/// before a rewind changed them, kept so the rewind can itself be taken
/// back. It sorts before every turn id (digits), so "turn T or later"
/// never takes in an undo point, even for a reader that does not know them.
pub const UNDO_PREFIX: &str = "!undo-";

/// Whether `turn` names an undo point rather than a turn.
pub fn is_undo(turn: &str) -> bool {
    turn.starts_with(UNDO_PREFIX)
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = String::with_capacity(64);
    for b in digest.as_ref() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// What a change leaves at a path (recorded with its checkpoint, so a
/// rewind can tell a file someone changed since from one as buddy left it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum After {
    /// The change removes the file.
    Missing,
    Content {
        sha256: String,
        len: u64,
    },
}

impl After {
    /// `None`: the file is removed.
    pub fn of(bytes: Option<&[u8]>) -> After {
        match bytes {
            None => After::Missing,
            Some(b) => After::Content {
                sha256: sha256_hex(b),
                len: b.len() as u64,
            },
        }
    }
}

/// Why a file of `len` bytes was not kept, over a limit of `max`.
pub fn too_large(len: u64, max: u64) -> String {
    format!(
        "it was {len} bytes, over the {} kept per file",
        crate::localfile::size(max)
    )
}

/// What a file on a remote target held just before a tool changed it, as
/// the tool read it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prior {
    Missing,
    Content(Vec<u8>),
    /// Not kept, and why (too large, not a regular file, unreadable).
    NotKept(String),
}

/// What a tool read at a path just before changing it, if it read it: on a
/// remote target the checkpoint keeps these bytes instead of a round trip
/// to read them again.
#[derive(Debug, Clone, Copy)]
pub enum Known<'a> {
    /// Not read (the checkpoint reads it through the target when it must).
    Unread,
    Missing,
    Content(&'a [u8]),
}

impl<'a> From<Option<&'a [u8]>> for Known<'a> {
    fn from(read: Option<&'a [u8]>) -> Known<'a> {
        read.map_or(Known::Missing, Known::Content)
    }
}

/// Files on a remote target about to change: the target's name (as its
/// records carry it) and what each of the paths holds now, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    pub actor: String,
    pub now: Vec<Prior>,
}

/// A remote target's files as a rewind changes them: written back (atomic,
/// mode kept) or removed, through the target.
#[async_trait]
pub trait TargetFiles: Send + Sync {
    /// The target's name, as `Remote::actor` gave it when the files were kept.
    fn actor(&self) -> String;
    async fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), TargetFileError>;
    async fn remove(&self, path: &Path) -> Result<(), TargetFileError>;
    /// What `path` holds now, at most `max` bytes of it (kept before a
    /// rewind changes it).
    async fn read(&self, path: &Path, max: u64) -> Prior;
}

/// Why a file on a remote target was not written or removed there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetFileError {
    /// The target did not run the command (the connection, the container).
    #[error("cannot reach {actor}: {reason}")]
    Unreachable { actor: String, reason: String },
    /// The command ran and failed; `stderr` is what it said.
    #[error("cannot write {} on {actor}: {stderr}", .path.display())]
    Write {
        path: PathBuf,
        actor: String,
        stderr: String,
    },
    #[error("cannot delete {} on {actor}: {stderr}", .path.display())]
    Delete {
        path: PathBuf,
        actor: String,
        stderr: String,
    },
}

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
    /// Its earlier content was not kept (too large, the store full, on
    /// another target than the session's now), so it cannot be put back.
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
    /// Its content now is not what buddy last wrote there: someone changed
    /// it since (a rewind keeps what is there first, as an undo point).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed_since: bool,
}

impl FileRestore {
    pub fn new(path: String, action: FileAction) -> FileRestore {
        FileRestore {
            path,
            action,
            changed_since: false,
        }
    }
}

/// The latest undo point: the files as they were just before the last
/// rewind changed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoPoint {
    /// Its id (starts with `UNDO_PREFIX`), for `restore`.
    pub id: String,
    /// When the rewind ran (Unix seconds).
    pub at: u64,
    /// What restoring it would do.
    pub files: Vec<FileRestore>,
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
    /// files only after this succeeds. `after` says what each change will
    /// leave there. `remote` is set when the files live on another machine:
    /// it names the target and carries their content.
    async fn before_change(
        &self,
        turn: &str,
        paths: &[PathBuf],
        after: &[After],
        remote: Option<Remote>,
    ) -> Result<(), CheckpointError>;

    /// For each of `turns`, what restoring the files to before it would do
    /// (at most one entry per file, in the order they were first changed).
    /// `here` names the remote target the session works on now (None: this
    /// host); files kept on another target cannot be put back from here.
    fn plan(
        &self,
        turns: &[String],
        here: Option<&str>,
    ) -> Result<Vec<Vec<FileRestore>>, CheckpointError>;

    /// Restores every file changed in `turn` or later to its state before
    /// `turn` (or, for an undo point, to the state it kept); what happened
    /// to each. What each file holds first is kept as a new undo point, and
    /// a file whose present content cannot be kept is left alone. A file on
    /// this host is changed only where a file tool could change it: not
    /// one of buddy's own (`own`), only a regular file or none, and only in
    /// the directory it was written in (no symlink put in its path since).
    /// Files kept on the remote target the session works on now go back
    /// through `remote`.
    async fn restore(
        &self,
        turn: &str,
        remote: Option<&dyn TargetFiles>,
        own: std::sync::Arc<crate::tools::protect::Protected>,
    ) -> Result<Vec<FileRestore>, CheckpointError>;

    /// The latest undo point, if a rewind left one.
    fn undo_point(&self, here: Option<&str>) -> Result<Option<UndoPoint>, CheckpointError>;
}
