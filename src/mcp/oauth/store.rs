//! `mcp-auth.json`, next to buddy's own `auth.json`: one login per MCP
//! server name, with what refreshing it needs (the token endpoint and the
//! client). Created 0600 and replaced atomically (`crate::atomic_file`);
//! its tokens leave it only in an `Authorization` header. A login is used
//! only for the URL it was made for, so a renamed entry never sends a token
//! to another server.

use super::OAuthError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Login {
    /// The MCP server's URL the tokens are for.
    pub url: String,
    pub issuer: String,
    pub token_endpoint: String,
    pub client_id: String,
    /// From dynamic registration; a configured secret stays in its variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the client authenticates at the token endpoint
    /// (`client_secret_basic`, `client_secret_post` or `none`); absent in
    /// logins kept before it was recorded, which sent a secret in the form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_method: Option<String>,
    /// The resource the tokens were asked for (RFC 8707), as the server's
    /// metadata spells it; absent means `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; absent when the server gave no lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Login {
    pub fn secrets(&self) -> Vec<String> {
        [
            Some(&self.access_token),
            self.refresh_token.as_ref(),
            self.client_secret.as_ref(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
    }
}

// Hand-written so a token can never reach a log or a trace.
impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("url", &self.url)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    servers: BTreeMap<String, Login>,
}

/// The most a logins file may hold (a few hundred servers' tokens).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

pub struct Store {
    path: PathBuf,
}

impl Store {
    pub fn new(path: PathBuf) -> Store {
        Store { path }
    }

    /// `<config dir>/buddy/mcp-auth.json`, beside `auth.json`.
    pub fn default_path() -> Option<PathBuf> {
        crate::auth::store::AuthStore::default_path().map(|p| p.with_file_name("mcp-auth.json"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, what: &str, e: std::io::Error) -> OAuthError {
        OAuthError::Store(format!("cannot {what} {}: {e}", self.path.display()))
    }

    fn read(&self) -> Result<File, OAuthError> {
        // A regular file of bounded size: a login list is small, and a
        // FIFO or a huge file put in its place must not hang or fill memory.
        match crate::localfile::read_regular(&self.path, MAX_FILE_BYTES) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| OAuthError::Store(format!("{} is damaged: {e}", self.path.display()))),
            Err(e) if e.is_not_found() => Ok(File::default()),
            Err(e) => Err(OAuthError::Store(format!(
                "cannot read {}: {e}",
                self.path.display()
            ))),
        }
    }

    fn write(&self, file: &File) -> Result<(), OAuthError> {
        if file.servers.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.io("remove", e)),
                _ => Ok(()),
            };
        }
        let bytes = serde_json::to_vec_pretty(file)
            .map_err(|e| OAuthError::Store(format!("cannot encode the logins: {e}")))?;
        // 0600 from the first byte.
        crate::atomic_file::replace(&self.path, &bytes, crate::atomic_file::PRIVATE)
            .map_err(|e| self.io("write", e))
    }

    /// The login for server `name`, if it was made for `url`.
    pub fn get(&self, name: &str, url: &str) -> Result<Option<Login>, OAuthError> {
        Ok(self.read()?.servers.remove(name).filter(|l| l.url == url))
    }

    pub fn put(&self, name: &str, login: Login) -> Result<(), OAuthError> {
        let mut file = self.read()?;
        file.servers.insert(name.to_string(), login);
        self.write(&file)
    }

    /// Forgets server `name`'s login; false when there was none.
    pub fn remove(&self, name: &str) -> Result<bool, OAuthError> {
        let mut file = self.read()?;
        let had = file.servers.remove(name).is_some();
        if had {
            self.write(&file)?;
        }
        Ok(had)
    }

    /// Every token kept, for redaction; nothing when unreadable.
    pub fn secrets(&self) -> Vec<String> {
        self.read()
            .map(|f| f.servers.values().flat_map(Login::secrets).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn logins_are_kept_per_name_for_their_url_in_a_private_file() {
        let dir = std::env::temp_dir().join(format!("buddy-mcp-auth-{}", std::process::id()));
        let store = Store::new(dir.join("buddy/mcp-auth.json"));
        let login = Login {
            url: "https://h/mcp".into(),
            access_token: "at-secret".into(),
            refresh_token: Some("rt-secret".into()),
            ..Login::default()
        };
        store.put("docs", login.clone()).unwrap();
        assert_eq!(store.get("docs", "https://h/mcp").unwrap(), Some(login));
        assert_eq!(store.get("docs", "https://other/mcp").unwrap(), None);
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(store.secrets(), ["at-secret", "rt-secret"]);
        assert!(!format!("{:?}", store.get("docs", "https://h/mcp").unwrap()).contains("secret"));
        assert!(store.remove("docs").unwrap());
        assert!(!store.remove("docs").unwrap());
        assert!(!store.path().exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
