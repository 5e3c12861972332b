//! Errors of the session store, each a one-line sentence that names the file.

use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum SessionError {
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    Newer {
        path: PathBuf,
        version: u32,
    },
    Locked {
        id: String,
        path: PathBuf,
    },
    NotFound {
        query: String,
        dir: PathBuf,
    },
    Ambiguous {
        query: String,
        matches: Vec<String>,
    },
    NoSessions {
        dir: PathBuf,
    },
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

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Io {
                action,
                path,
                source,
            } => write!(f, "cannot {action} {}: {source}", path.display()),
            SessionError::Corrupt { path, line, reason } => write!(
                f,
                "session file {} is damaged at line {line} ({reason}); it was left untouched",
                path.display()
            ),
            SessionError::Newer { path, version } => write!(
                f,
                "session file {} uses format {version}, newer than this buddy understands; upgrade buddy to open it",
                path.display()
            ),
            SessionError::Locked { id, path } => write!(
                f,
                "session {id} is in use by another buddy process (locked: {})",
                path.display()
            ),
            SessionError::NotFound { query, dir } => write!(
                f,
                "no session matches \"{query}\" in {} (see `buddy sessions`)",
                dir.display()
            ),
            SessionError::Ambiguous { query, matches } => {
                let shown: Vec<&str> = matches.iter().take(5).map(String::as_str).collect();
                let more = matches.len().saturating_sub(shown.len());
                write!(
                    f,
                    "session id \"{query}\" is ambiguous: it matches {}{}; give more characters",
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            }
            SessionError::NoSessions { dir } => {
                write!(f, "there are no saved sessions in {}", dir.display())
            }
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

impl std::error::Error for SessionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SessionError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
