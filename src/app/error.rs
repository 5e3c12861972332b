//! How a command ends: `Exit` when it did what it was asked, `AppError`
//! when it could not, and the exit codes both map to. `main` alone turns
//! them into the process's exit code; nothing here prints.

use crate::auth::AuthError;
use crate::config::ConfigError;
use crate::host::HostError;
use crate::serve::ServeError;
use crate::session::SessionError;
use crate::text::one_line;
use std::path::PathBuf;

/// How a command ended when it did what it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    /// The user interrupted it (Ctrl-C).
    Interrupted,
    /// A front end that chose its own code (the REPL after a signal).
    Code(i32),
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => EXIT_OK,
            Exit::Interrupted => EXIT_INTERRUPTED,
            Exit::Code(c) => c,
        }
    }
}

/// Why a command failed, as one line for the user. A wrapped error is
/// shown as it is (its text is this one's), so its cause is this one's cause.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad arguments or environment: exit 2.
    #[error("{0}")]
    Usage(String),
    /// The configuration cannot be used: exit 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The session store: a session that is not there, or newer than this
    /// buddy, is the user's to fix (exit 2); one that cannot be read or is
    /// in use elsewhere is a failure of the moment (exit 1).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Something the command named is not there: exit 2.
    #[error(transparent)]
    Unknown(#[from] Unknown),
    /// What the user handed in (stdin, a file a flag names, arguments)
    /// cannot be used, and nothing was sent: exit 2.
    #[error(transparent)]
    Input(#[from] InputError),
    /// An MCP server's login failed (its server, the user's approval), or
    /// the kept tokens could not be changed: exit 1.
    #[error("{0}")]
    Mcp(String),
    /// No key for the profile: exit 2, with what to do about it.
    #[error("{message}")]
    MissingKey {
        message: String,
        config_dir: Option<PathBuf>,
        /// What looking for a local server found (the ports tried).
        notes: Vec<String>,
    },
    /// The work itself failed (the model, a limit): exit 1.
    #[error("{0}")]
    Failed(String),
    /// No usable login or `auth.json`, or no way to tell the issuer: exit 2.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// `buddy login` itself failed (the issuer, the user's approval): exit 1.
    #[error(transparent)]
    Login(AuthError),
    /// The execution target (SSH, container, tmux) could not be opened: exit 2.
    #[error(transparent)]
    Target(#[from] HostError),
    /// `buddy serve` refused its settings (exit 2) or could not listen or
    /// went on serving (exit 1: the command was right, the machine said no).
    #[error(transparent)]
    Serve(#[from] ServeError),
}

impl AppError {
    /// A setting that cannot be used, outside any one file.
    pub fn config(message: impl Into<String>) -> AppError {
        AppError::Config(ConfigError::Invalid {
            path: None,
            message: message.into(),
        })
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Usage(_)
            | AppError::Config(_)
            | AppError::Unknown(_)
            | AppError::Input(_)
            | AppError::MissingKey { .. }
            | AppError::Auth(_)
            | AppError::Target(_) => EXIT_USAGE,
            AppError::Failed(_) | AppError::Login(_) | AppError::Mcp(_) => EXIT_FAILURE,
            AppError::Session(e) => match e {
                SessionError::NotFound { .. }
                | SessionError::Ambiguous { .. }
                | SessionError::NoSessions { .. }
                | SessionError::Newer { .. } => EXIT_USAGE,
                SessionError::Io { .. }
                | SessionError::Corrupt { .. }
                | SessionError::Locked { .. }
                | SessionError::Leased { .. }
                | SessionError::Database { .. } => EXIT_FAILURE,
            },
            AppError::Serve(ServeError::TokenRequired(_) | ServeError::PublicHostsNeedToken) => {
                EXIT_USAGE
            }
            AppError::Serve(ServeError::Bind(..) | ServeError::Serve(_)) => EXIT_FAILURE,
        }
    }

    /// Lines after the error that say how to fix it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            AppError::MissingKey {
                config_dir, notes, ..
            } => {
                let mut out = notes.clone();
                out.extend([
                    "To get going, either:".to_string(),
                    "  - export OPENAI_API_KEY=sk-...   (or BUDDY_API_KEY, used by any profile)"
                        .to_string(),
                    "  - start a local model server (Ollama, llama.cpp, LM Studio, vLLM) and run buddy again"
                        .to_string(),
                ]);
                if let Some(dir) = config_dir {
                    out.push(format!(
                        "Profiles live in {}",
                        dir.join("buddy.toml").display()
                    ));
                }
                out
            }
            AppError::Session(SessionError::NoSessions { .. }) => {
                vec!["`buddy` starts a new one".to_string()]
            }
            _ => Vec::new(),
        }
    }
}

/// A name the command was given that does not exist here.
#[derive(Debug, thiserror::Error)]
pub enum Unknown {
    #[error("no MCP server `{}`; `buddy mcp list` shows them", one_line(.0, 80))]
    McpServer(String),
    #[error("the MCP server `{}` is disabled (enabled = false)", one_line(.0, 80))]
    McpDisabled(String),
    #[error("`{}` is not an HTTP server; only those log in", one_line(.0, 80))]
    NotHttp(String),
    #[error("no MCP server `{}` in {}", one_line(.name, 80), .path.display())]
    McpServerIn { name: String, path: PathBuf },
    #[error("no such command: {}", one_line(.0, 80))]
    Command(String),
}

/// Input that cannot be used as it is; `what` names it as the user gave
/// it (`stdin`, `--image PATH`, `--output-schema PATH`).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {what}: {error}")]
    Unreadable { what: String, error: String },
    #[error("{what} is larger than {limit}; buddy exec reads at most that much (save it to a file and ask the model to read the part it needs)")]
    TooBig { what: String, limit: String },
    #[error("{what} is not UTF-8 text; buddy exec takes text (for a binary file, save it and ask the model to inspect it with a tool)")]
    NotText { what: String },
    /// Read, but not what the flag takes.
    #[error("{what}: {problem}")]
    Invalid { what: String, problem: String },
}

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;
