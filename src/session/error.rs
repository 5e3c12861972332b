//! Errors of the session store, each a one-line sentence that names the file.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("session file {} is damaged at line {line} ({reason}); it was left untouched", .path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("session file {} uses format {version}, newer than this buddy understands; upgrade buddy to open it", .path.display())]
    Newer { path: PathBuf, version: u32 },
    #[error("session {id} is in use by another buddy process (locked: {})", .path.display())]
    Locked { id: String, path: PathBuf },
    #[error("no session matches \"{query}\" in {} (see `buddy sessions`)", .dir.display())]
    NotFound { query: String, dir: PathBuf },
    #[error("session id \"{query}\" is ambiguous: it matches {}; give more characters", some_of(.matches))]
    Ambiguous { query: String, matches: Vec<String> },
    #[error("there are no saved sessions in {}", .dir.display())]
    NoSessions { dir: PathBuf },
    /// Another `buddy serve` sharing the database runs a turn in it.
    #[error("session {id} is running on another instance ({holder}); it is free when that run ends, or {secs} s after that instance stops renewing its lease")]
    Leased {
        id: String,
        holder: String,
        secs: u64,
    },
    /// The session database failed or could not be reached.
    #[error("the session database could not {action}: {reason}")]
    Database {
        action: &'static str,
        reason: String,
    },
}

/// The first few of `matches`, and how many more there are.
fn some_of(matches: &[String]) -> String {
    let shown: Vec<&str> = matches.iter().take(5).map(String::as_str).collect();
    let more = matches.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

impl SessionError {
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        SessionError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Whether `e` says the machine is out of something for the moment (file
/// descriptors, memory) rather than that anything is wrong with the session:
/// the one kind of failure worth retrying later.
pub fn out_of_resources(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        Errno::from_io_error(e),
        Some(Errno::MFILE | Errno::NFILE | Errno::NOMEM)
    )
}
