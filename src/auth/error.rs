//! What can go wrong with a login: `auth.json`, the issuer over HTTP, the
//! issuer's own answers, and tokens that are missing or expired. Each is one
//! line for the user, naming the file or URL and what to do.

use std::error::Error;
use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum AuthError {
    /// No config directory to keep `auth.json` in.
    NoConfigDir,
    /// The configuration that says which issuer to use could not be read.
    Config(Box<dyn Error + Send + Sync>),
    /// Reading, writing or removing `auth.json` failed.
    Io {
        action: FileAction,
        path: PathBuf,
        source: std::io::Error,
    },
    /// `auth.json` is not valid JSON of the expected shape.
    Damaged {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The tokens could not be encoded for `auth.json`.
    Encode {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The HTTP client could not be built.
    Client(reqwest::Error),
    /// The issuer could not be reached.
    Unreachable { url: String, source: reqwest::Error },
    /// The issuer's answer broke off.
    UnreadableAnswer { url: String, source: reqwest::Error },
    /// The issuer answered, but not with what was asked for.
    BadAnswer {
        url: String,
        expected: Expected,
        source: serde_json::Error,
    },
    /// The token endpoint failed with an HTTP status and no OAuth error.
    Status { url: String, status: u16 },
    /// The issuer would not start a device login.
    Refused { url: String, status: u16 },
    /// Polling for the user's approval failed with an HTTP status.
    PollFailed { url: String, status: u16 },
    /// The issuer's OAuth error answer to a login.
    Denied { error: String, detail: String },
    /// Nobody entered the device code in time.
    CodeExpired,
    /// No tokens stored; with the provider, the command that logs in.
    NotLoggedIn { provider: Option<String> },
    /// The tokens can no longer be refreshed.
    Expired { provider: String },
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

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::NoConfigDir => {
                f.write_str("cannot find the config directory: set HOME or XDG_CONFIG_HOME")
            }
            AuthError::Config(e) => write!(f, "{e}"),
            AuthError::Io {
                action,
                path,
                source,
            } => write!(f, "cannot {action} {}: {source}", path.display()),
            AuthError::Damaged { path, source } => write!(
                f,
                "{} is damaged ({source}); remove it and log in again",
                path.display()
            ),
            AuthError::Encode { path, source } => {
                write!(f, "cannot encode {}: {source}", path.display())
            }
            AuthError::Client(e) => write!(f, "cannot build HTTP client: {e}"),
            AuthError::Unreachable { url, source } => write!(f, "cannot reach {url}: {source}"),
            AuthError::UnreadableAnswer { url, source } => {
                write!(f, "cannot read the answer of {url}: {source}")
            }
            AuthError::BadAnswer {
                url,
                expected,
                source,
            } => write!(f, "{url} sent no usable {expected} ({source})"),
            AuthError::Status { url, status } => write!(f, "{url} answered HTTP {status}"),
            AuthError::Refused { url, status } => {
                write!(f, "{url} refused to start a login (HTTP {status})")
            }
            AuthError::PollFailed { url, status } => {
                write!(f, "the login failed: {url} answered HTTP {status}")
            }
            AuthError::Denied { error, detail } => {
                let line = format!("the login failed: {error} {detail}");
                f.write_str(line.trim())
            }
            AuthError::CodeExpired => {
                f.write_str("the login code expired before it was used; run the login again")
            }
            AuthError::NotLoggedIn { provider: None } => f.write_str("not logged in"),
            AuthError::NotLoggedIn { provider: Some(p) } => {
                write!(f, "not logged in to {p}: run `buddy login {p}`")
            }
            AuthError::Expired { provider: p } => {
                write!(f, "the {p} login has expired: run `buddy login {p}`")
            }
        }
    }
}

impl Error for AuthError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            AuthError::Config(e) => Some(e.as_ref()),
            AuthError::Io { source, .. } => Some(source),
            AuthError::Damaged { source, .. }
            | AuthError::Encode { source, .. }
            | AuthError::BadAnswer { source, .. } => Some(source),
            AuthError::Client(source)
            | AuthError::Unreachable { source, .. }
            | AuthError::UnreadableAnswer { source, .. } => Some(source),
            AuthError::NoConfigDir
            | AuthError::Status { .. }
            | AuthError::Refused { .. }
            | AuthError::PollFailed { .. }
            | AuthError::Denied { .. }
            | AuthError::CodeExpired
            | AuthError::NotLoggedIn { .. }
            | AuthError::Expired { .. } => None,
        }
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
