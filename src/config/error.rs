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

/// A `discovery.local_servers` entry that is not a loopback HTTP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("discovery.local_servers: `{}` {why}", q(.entry))]
pub struct LocalServerError {
    pub entry: String,
    pub why: LocalServerProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LocalServerProblem {
    #[error("must be an http:// URL (local servers speak plain HTTP)")]
    NotHttp,
    #[error("needs a port, e.g. 127.0.0.1:8080")]
    NoPort,
    #[error("has a port that is not a number from 1 to 65535")]
    BadPort,
    #[error("has port 0")]
    PortZero,
    #[error("needs brackets around an IPv6 address, e.g. [::1]:8080")]
    UnbracketedIpv6,
    #[error("is not on loopback; discovery only looks on this machine")]
    NotLoopback,
    #[error("must name a loopback address (127.0.0.1, [::1] or localhost)")]
    NotAnAddress,
}

/// An MCP server entry (`[mcp_servers.NAME]` or a `.mcp.json` server) that
/// cannot be used as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpEntryError {
    #[error("mcp_servers.{}: a server needs a plain name", q(.0))]
    BadName(String),
    #[error("mcp_servers.{}.url: expected an http:// or https:// URL", q(.0))]
    BadUrl(String),
    #[error("mcp_servers.{}: set `command` or `url`, not both", q(.0))]
    Both(String),
    #[error("mcp_servers.{}: set `command` (a program) or `url` (an HTTP endpoint)", q(.0))]
    Neither(String),
    #[error("mcp_servers.{}: `bearer_token_env`, `headers`, `client_id`, `client_secret_env` and `client_metadata_url` are for `url` servers", q(.0))]
    HttpOnlyKeys(String),
    #[error("mcp_servers.{}: `args`, `env` and `cwd` are for `command` servers", q(.0))]
    StdioOnlyKeys(String),
    #[error("mcp_servers.{}: timeouts are whole seconds, at least 1", q(.0))]
    ZeroTimeout(String),
    /// `.mcp.json` that is not the JSON its format says (serde's line).
    #[error("{}", q(.0))]
    Json(String),
    #[error("server `{}`: expected `command` (stdio) or `url` (http), found type {}", one_line(.name, 60), q(.kind))]
    UnknownType { name: String, kind: String },
}
