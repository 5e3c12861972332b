//! `auth.json`: login tokens per provider, so one login serves every profile
//! of that provider. Created 0600 and replaced atomically; tokens never leave
//! this file except in an `Authorization` header.

use super::error::{AuthError, FileAction};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; absent when the issuer gave no lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The ChatGPT account (from the ID token), sent as `chatgpt-account-id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

impl Tokens {
    /// The access and refresh tokens.
    pub fn secrets(&self) -> Vec<String> {
        std::iter::once(self.access_token.clone())
            .chain(self.refresh_token.clone())
            .collect()
    }
}

// Hand-written so a token can never reach a log or a trace.
impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("account_id", &self.account_id)
            .finish()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct AuthFile {
    #[serde(default)]
    providers: BTreeMap<String, Tokens>,
}

/// The file and what it holds.
pub struct AuthStore {
    path: PathBuf,
}

impl AuthStore {
    pub fn new(path: PathBuf) -> AuthStore {
        AuthStore { path }
    }

    /// `<config dir>/buddy/auth.json` (XDG_CONFIG_HOME, else ~/.config).
    pub fn default_path() -> Option<PathBuf> {
        let base = crate::process::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| crate::process::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("buddy").join("auth.json"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, action: FileAction) -> impl Fn(std::io::Error) -> AuthError + '_ {
        move |source| AuthError::Io {
            action,
            path: self.path.clone(),
            source,
        }
    }

    fn read(&self) -> Result<AuthFile, AuthError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| AuthError::Damaged {
                path: self.path.clone(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AuthFile::default()),
            Err(e) => Err(self.io(FileAction::Read)(e)),
        }
    }

    pub fn get(&self, provider: &str) -> Result<Option<Tokens>, AuthError> {
        Ok(self.read()?.providers.get(provider).cloned())
    }

    /// Every token of every provider, for redaction; nothing when the file
    /// is missing or unreadable (then there is nothing of it to show either).
    pub fn secrets(&self) -> Vec<String> {
        self.read()
            .map(|f| f.providers.values().flat_map(Tokens::secrets).collect())
            .unwrap_or_default()
    }

    pub fn put(&self, provider: &str, tokens: Tokens) -> Result<(), AuthError> {
        let mut file = self.read()?;
        file.providers.insert(provider.to_string(), tokens);
        self.write(&file)
    }

    /// Removes a provider's tokens; false when there were none.
    pub fn remove(&self, provider: &str) -> Result<bool, AuthError> {
        let mut file = self.read()?;
        let had = file.providers.remove(provider).is_some();
        if had {
            if file.providers.is_empty() {
                std::fs::remove_file(&self.path).map_err(self.io(FileAction::Remove))?;
            } else {
                self.write(&file)?;
            }
        }
        Ok(had)
    }

    fn write(&self, file: &AuthFile) -> Result<(), AuthError> {
        let bytes = serde_json::to_vec_pretty(file).map_err(|source| AuthError::Encode {
            path: self.path.clone(),
            source,
        })?;
        // 0600 from the first byte: never a moment where others could read it.
        crate::atomic_file::replace(&self.path, &bytes, crate::atomic_file::PRIVATE)
            .map_err(self.io(FileAction::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn tokens_round_trip_per_provider_in_a_private_file() {
        let dir = std::env::temp_dir().join(format!("buddy-auth-{}", std::process::id()));
        let store = AuthStore::new(dir.join("buddy/auth.json"));
        assert_eq!(store.get("openai").unwrap(), None);
        let t = Tokens {
            access_token: "at-1".into(),
            refresh_token: Some("rt-1".into()),
            expires_at: Some(42),
            account_id: None,
        };
        store.put("openai", t.clone()).unwrap();
        store
            .put(
                "other",
                Tokens {
                    access_token: "x".into(),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(store.get("openai").unwrap(), Some(t));
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(store.remove("openai").unwrap());
        assert!(!store.remove("openai").unwrap());
        assert!(store.get("other").unwrap().is_some());
        assert!(store.remove("other").unwrap());
        assert!(!store.path().exists());
        assert!(!format!(
            "{:?}",
            Tokens {
                access_token: "secret".into(),
                ..Default::default()
            }
        )
        .contains("secret"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
