//! Configuration errors, each one line that says what to fix and where.

use crate::text::one_line;
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

/// " in FILE" for an error in a file, nothing for the built-in config.
fn in_file(path: &Option<PathBuf>) -> String {
    path.as_deref()
        .map(|path| format!(" in {}", p(path)))
        .unwrap_or_default()
}

fn file_name(path: &Option<PathBuf>) -> String {
    path.as_deref()
        .map(p)
        .unwrap_or_else(|| "built-in config".into())
}

fn profile_list(known: &[String]) -> String {
    if known.is_empty() {
        "(none)".to_string()
    } else {
        q(&known.join(", "))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config error: cannot read {}: {}", p(.path), q(.error))]
    Io { path: PathBuf, error: String },
    #[error("config error in {} line {line}, column {column}: {}", file_name(.path), q(.message))]
    Parse {
        path: Option<PathBuf>,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("config error{}: {}", in_file(.path), q(.message))]
    Invalid {
        path: Option<PathBuf>,
        message: String,
    },
    #[error("unknown model profile `{}`; known profiles: {}", q(.name), profile_list(.known))]
    UnknownProfile { name: String, known: Vec<String> },
    #[error("no API key for model profile `{}`: {}", q(.profile), q(.hint))]
    MissingKey { profile: String, hint: String },
    /// `-m NAME` that is not a profile, close to one, where taking it as a
    /// model id failed.
    #[error("`{}` is not a model profile; did you mean `{}`? (`buddy models` lists the active profile's models; profiles are under [models] in buddy.toml)", q(.name), q(.suggestion))]
    NearMiss { name: String, suggestion: String },
}
