//! What can go wrong with a login: `auth.json`, the issuer over HTTP, the
//! issuer's own answers, and tokens that are missing or expired. Each is one
//! line for the user, naming the file or URL and what to do.

use std::error::Error;
use std::fmt;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No config directory to keep `auth.json` in.
    #[error("cannot find the config directory: set HOME or XDG_CONFIG_HOME")]
    NoConfigDir,
    /// The configuration that says which issuer to use could not be read.
    #[error("{0}")]
    Config(#[source] Box<dyn Error + Send + Sync>),
    /// Reading, writing or removing `auth.json` failed.
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        action: FileAction,
        path: PathBuf,
        source: std::io::Error,
    },
    /// `auth.json` is not valid JSON of the expected shape.
    #[error("{} is damaged ({source}); remove it and log in again", .path.display())]
    Damaged {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The tokens could not be encoded for `auth.json`.
    #[error("cannot encode {}: {source}", .path.display())]
    Encode {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The HTTP client could not be built.
    #[error("cannot build HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The issuer could not be reached.
    #[error("cannot reach {url}: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    /// The issuer's answer broke off.
    #[error("cannot read the answer of {url}: {source}")]
    UnreadableAnswer { url: String, source: reqwest::Error },
    /// The issuer answered, but not with what was asked for.
    #[error("{url} sent no usable {expected} ({source})")]
    BadAnswer {
        url: String,
        expected: Expected,
        source: serde_json::Error,
    },
    /// The token endpoint failed with an HTTP status and no OAuth error.
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    /// The issuer would not start a device login.
    #[error("{url} refused to start a login (HTTP {status})")]
    Refused { url: String, status: u16 },
    /// Polling for the user's approval failed with an HTTP status.
    #[error("the login failed: {url} answered HTTP {status}")]
    PollFailed { url: String, status: u16 },
    /// The issuer's OAuth error answer to a login.
    #[error("{}", denied(.error, .detail))]
    Denied { error: String, detail: String },
    /// Nobody entered the device code in time.
    #[error("the login code expired before it was used; run the login again")]
    CodeExpired,
    /// No tokens stored; with the provider, the command that logs in.
    #[error("{}", not_logged_in(.provider.as_deref()))]
    NotLoggedIn { provider: Option<String> },
    /// The tokens can no longer be refreshed.
    #[error("the {provider} login has expired: run `buddy login {provider}`")]
    Expired { provider: String },
}

fn denied(error: &str, detail: &str) -> String {
    format!("the login failed: {error} {detail}")
        .trim()
        .to_string()
}

fn not_logged_in(provider: Option<&str>) -> String {
    match provider {
        None => "not logged in".into(),
        Some(p) => format!("not logged in to {p}: run `buddy login {p}`"),
    }
}

/// What was being done to `auth.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAction {
    Read,
    Write,
    Remove,
}

/// What an answer of the issuer should have held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    Tokens,
    DeviceCode,
    Grant,
}

impl fmt::Display for FileAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileAction::Read => "read",
            FileAction::Write => "write",
            FileAction::Remove => "remove",
        })
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::Tokens => "tokens",
            Expected::DeviceCode => "device code",
            Expected::Grant => "grant",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_to_do() {
        let e = AuthError::NotLoggedIn {
            provider: Some("openai".into()),
        };
        assert_eq!(
            e.to_string(),
            "not logged in to openai: run `buddy login openai`"
        );
        let e = AuthError::Expired {
            provider: "openai".into(),
        };
        assert_eq!(
            e.to_string(),
            "the openai login has expired: run `buddy login openai`"
        );
        let e = AuthError::Denied {
            error: "access_denied".into(),
            detail: String::new(),
        };
        assert_eq!(e.to_string(), "the login failed: access_denied");
        let e = AuthError::Io {
            action: FileAction::Write,
            path: "/x/auth.json".into(),
            source: std::io::Error::other("disk full"),
        };
        assert_eq!(e.to_string(), "cannot write /x/auth.json: disk full");
        assert!(e.source().is_some());
    }
}
