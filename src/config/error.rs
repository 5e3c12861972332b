//! Configuration errors, each one line that says what to fix and where.

use crate::text::one_line;
use std::fmt;
use std::path::{Path, PathBuf};

/// Characters of a path, a message or a name an error quotes: a config file
/// can hold anything (a 10 MB key name), and its error stays one short line.
const QUOTE_CHARS: usize = 200;

fn q(s: &str) -> String {
    one_line(s, QUOTE_CHARS)
}

fn p(path: &Path) -> String {
    q(&path.display().to_string())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    Io {
        path: PathBuf,
        error: String,
    },
    Parse {
        path: Option<PathBuf>,
        line: usize,
        column: usize,
        message: String,
    },
    Invalid {
        path: Option<PathBuf>,
        message: String,
    },
    UnknownProfile {
        name: String,
        known: Vec<String>,
    },
    MissingKey {
        profile: String,
        hint: String,
    },
    /// `-m NAME` that is not a profile, close to one, where taking it as a
    /// model id failed.
    NearMiss {
        name: String,
        suggestion: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Io { path, error } => {
                write!(f, "config error: cannot read {}: {}", p(path), q(error))
            }
            ConfigError::Parse {
                path,
                line,
                column,
                message,
            } => {
                let name = path
                    .as_ref()
                    .map(|path| p(path))
                    .unwrap_or_else(|| "built-in config".into());
                write!(
                    f,
                    "config error in {name} line {line}, column {column}: {}",
                    q(message)
                )
            }
            ConfigError::Invalid {
                path: Some(path),
                message,
            } => {
                write!(f, "config error in {}: {}", p(path), q(message))
            }
            ConfigError::Invalid {
                path: None,
                message,
            } => write!(f, "config error: {}", q(message)),
            ConfigError::UnknownProfile { name, known } => write!(
                f,
                "unknown model profile `{}`; known profiles: {}",
                q(name),
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    q(&known.join(", "))
                }
            ),
            ConfigError::MissingKey { profile, hint } => {
                write!(
                    f,
                    "no API key for model profile `{}`: {}",
                    q(profile),
                    q(hint)
                )
            }
            ConfigError::NearMiss { name, suggestion } => write!(
                f,
                "`{}` is not a model profile; did you mean `{}`? (`buddy models` lists the active profile's models; profiles are under [models] in buddy.toml)",
                q(name),
                q(suggestion)
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
