//! Files as an editor holds them: when buddy runs inside an editor that
//! offers its buffers (ACP's `fs/read_text_file` and `fs/write_text_file`),
//! the file tools read and write through this seam instead of the disk, so
//! the agent sees the user's unsaved changes and its edits land in the open
//! buffers. Only the seam lives here; `acp::files` implements it over the
//! connection. Paths are absolute (the protocol's rule).

use async_trait::async_trait;
use std::path::Path;

#[async_trait]
pub trait EditorFiles: Send + Sync {
    /// The whole text of `path` as the editor has it (a buffer, or the
    /// file on disk when none is open).
    async fn read(&self, path: &Path) -> Result<String, EditorError>;
    /// Replaces the text of `path` (creating the file when it is missing).
    async fn write(&self, path: &Path, content: &str) -> Result<(), EditorError>;
}

/// Why the editor did not read or write a file: one line, for the tool's
/// error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorError {
    /// The editor's own words.
    #[error("the editor could not read it: {0}")]
    Read(String),
    #[error("the editor could not write it: {0}")]
    Write(String),
    #[error("the editor did not answer the read in time")]
    ReadTimeout,
    #[error("the editor did not answer the write in time")]
    WriteTimeout,
}
