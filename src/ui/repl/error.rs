//! Why a service the REPL asked of the application (`ReplServices`) did not
//! answer. One enum per job; each shows as the one line the REPL prints. The
//! errors of the layers below keep their own types and words.

use crate::auth::AuthError;
use crate::config::approvals::ApprovalsError;
use crate::config::ConfigError;
use crate::provider::ApiError;

/// Why "remember" or `/approve remove N` did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Services that keep no rules file.
    #[error("rules cannot be remembered here")]
    NotHere,
    /// Services that keep no rules at all.
    #[error("no rules to drop")]
    NoRules,
    /// The prefix is not a command prefix a rule can match.
    #[error("`{0}` cannot be remembered")]
    NotAPrefix(String),
    #[error("there is no config directory to remember it in")]
    NowhereToRemember,
    /// A remembered rule to drop, and no config directory to drop it from.
    #[error("there is no config directory")]
    NoConfigDir,
    /// `/approve remove N` past the end of the list (or 0).
    #[error("no rule {0} (see /approve)")]
    NoSuchRule(usize),
    /// The user's rules file could not be read or written.
    #[error(transparent)]
    File(#[from] ApprovalsError),
}

/// Why `/login` did not log in.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// No issuer for the target, or no place to keep the tokens.
    #[error(transparent)]
    Setup(AuthError),
    /// The device flow itself failed (the issuer, the user's approval).
    #[error("login failed: {0}")]
    Failed(AuthError),
}

/// Why the `/model` picker shows no models of the server.
#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    /// The profile does not resolve.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The profile's client cannot be built (its CA file, its login): the
    /// application's line.
    #[error("{0}")]
    Client(String),
    /// The server did not list them.
    #[error(transparent)]
    Api(#[from] ApiError),
}
