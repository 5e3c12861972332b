//! Configuration errors, each one line that says what to fix and where.

use std::fmt;
use std::path::PathBuf;

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
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Io { path, error } => {
                write!(f, "config error: cannot read {}: {error}", path.display())
            }
            ConfigError::Parse {
                path,
                line,
                column,
                message,
            } => {
                let name = path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "built-in config".into());
                write!(
                    f,
                    "config error in {name} line {line}, column {column}: {message}"
                )
            }
            ConfigError::Invalid {
                path: Some(p),
                message,
            } => {
                write!(f, "config error in {}: {message}", p.display())
            }
            ConfigError::Invalid {
                path: None,
                message,
            } => write!(f, "config error: {message}"),
            ConfigError::UnknownProfile { name, known } => write!(
                f,
                "unknown model profile `{name}`; known profiles: {}",
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    known.join(", ")
                }
            ),
            ConfigError::MissingKey { profile, hint } => {
                write!(f, "no API key for model profile `{profile}`: {hint}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}
