//! How a command ends: `Exit` when it did what it was asked, `AppError`
//! when it could not, and the exit codes both map to. `main` alone turns
//! them into the process's exit code; nothing here prints.

use crate::auth::AuthError;
use crate::host::HostError;
use crate::serve::ServeError;
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
    /// Bad arguments, config or environment: exit 2.
    #[error("{0}")]
    Usage(String),
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
    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Usage(_)
            | AppError::MissingKey { .. }
            | AppError::Auth(_)
            | AppError::Target(_) => EXIT_USAGE,
            AppError::Failed(_) | AppError::Login(_) => EXIT_FAILURE,
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
            _ => Vec::new(),
        }
    }
}

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;
