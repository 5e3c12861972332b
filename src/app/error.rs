//! How a command ends: `Exit` when it did what it was asked, `AppError`
//! when it could not, and the exit codes both map to. `main` alone turns
//! them into the process's exit code; nothing here prints.

use crate::auth::AuthError;
use crate::host::HostError;
use std::fmt;
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

/// Why a command failed, as one line for the user.
#[derive(Debug)]
pub enum AppError {
    /// Bad arguments, config or environment: exit 2.
    Usage(String),
    /// No key for the profile: exit 2, with what to do about it.
    MissingKey {
        message: String,
        config_dir: Option<PathBuf>,
        /// What looking for a local server found (the ports tried).
        notes: Vec<String>,
    },
    /// The work itself failed (the model, a limit): exit 1.
    Failed(String),
    /// No usable login or `auth.json`, or no way to tell the issuer: exit 2.
    Auth(AuthError),
    /// `buddy login` itself failed (the issuer, the user's approval): exit 1.
    Login(AuthError),
    /// The execution target (SSH, container, tmux) could not be opened: exit 2.
    Target(HostError),
}

impl AppError {
    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Usage(_)
            | AppError::MissingKey { .. }
            | AppError::Auth(_)
            | AppError::Target(_) => EXIT_USAGE,
            AppError::Failed(_) | AppError::Login(_) => EXIT_FAILURE,
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

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Usage(m) | AppError::Failed(m) => f.write_str(m),
            AppError::MissingKey { message, .. } => f.write_str(message),
            AppError::Auth(e) | AppError::Login(e) => write!(f, "{e}"),
            AppError::Target(e) => write!(f, "{e}"),
        }
    }
}

// The wrapped errors are shown as they are (their text is this one's), so
// their cause is this one's cause.
impl std::error::Error for AppError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AppError::Auth(e) | AppError::Login(e) => e.source(),
            AppError::Target(e) => e.source(),
            AppError::Usage(_) | AppError::Failed(_) | AppError::MissingKey { .. } => None,
        }
    }
}

impl From<AuthError> for AppError {
    fn from(e: AuthError) -> Self {
        AppError::Auth(e)
    }
}

impl From<HostError> for AppError {
    fn from(e: HostError) -> Self {
        AppError::Target(e)
    }
}

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;
