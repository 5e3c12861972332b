//! The approval rules the user chose to remember ("remember" at an approval
//! prompt): command prefixes such as `cargo test` that later runs approve
//! without asking. They live in `approvals.toml` in buddy's own config
//! directory (0600, written atomically), never in a project file: a
//! repository cannot widen what runs unasked, and the rules hold whichever
//! `buddy.toml` is in use. The file is buddy's to rewrite; what a rule may
//! match is `agent::allowlist`'s business, not this module's.
//!
//! ```toml
//! always_allow = ["cargo test", "git log"]
//! ```

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The rules' file: `<config dir>/approvals.toml`.
pub fn path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    super::global_dir(env).map(|d| d.join("approvals.toml"))
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    always_allow: Vec<String>,
}

const HEADER: &str =
    "# Commands buddy runs without asking: prefixes you answered \"remember\" to.\n\
# `/approve` in the REPL lists them; `/approve remove N` drops one.\n\
# A rule never covers options that write files or run other programs.\n";

/// Why the rules' file could not be read or saved; each names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalsError {
    #[error("cannot read {}: {detail}", .path.display())]
    Read { path: PathBuf, detail: String },
    #[error("{} is not UTF-8 text", .path.display())]
    NotUtf8 { path: PathBuf },
    /// Not the file's TOML shape; `message` is the parser's, one line.
    #[error("{}: {message}", .path.display())]
    Malformed { path: PathBuf, message: String },
    #[error("cannot save {}: {detail}", .path.display())]
    Save { path: PathBuf, detail: String },
}

/// The remembered rules in one file.
#[derive(Debug, Clone)]
pub struct Remembered {
    path: PathBuf,
}

impl Remembered {
    pub fn new(path: PathBuf) -> Remembered {
        Remembered { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rules as written; none when the file does not exist. An
    /// unreadable or malformed file is one line naming it.
    pub fn load(&self) -> Result<Vec<String>, ApprovalsError> {
        let path = || self.path.clone();
        let bytes = match crate::localfile::read_regular(&self.path, super::MAX_CONFIG_BYTES) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => {
                return Err(ApprovalsError::Read {
                    path: path(),
                    detail: e.to_string(),
                })
            }
        };
        let text =
            String::from_utf8(bytes).map_err(|_| ApprovalsError::NotUtf8 { path: path() })?;
        let file: RulesFile = toml::from_str(&text).map_err(|e| ApprovalsError::Malformed {
            path: path(),
            message: crate::text::one_line(e.message(), 200),
        })?;
        Ok(file.always_allow)
    }

    /// Adds `rule` (kept once) and saves.
    pub fn add(&self, rule: &str) -> Result<(), ApprovalsError> {
        let mut rules = self.load()?;
        if !rules.iter().any(|r| r == rule) {
            rules.push(rule.to_string());
        }
        self.save(&rules)
    }

    /// Drops `rule` and saves; whether it was there.
    pub fn remove(&self, rule: &str) -> Result<bool, ApprovalsError> {
        let mut rules = self.load()?;
        let before = rules.len();
        rules.retain(|r| r != rule);
        if rules.len() == before {
            return Ok(false);
        }
        self.save(&rules).map(|()| true)
    }

    /// Writes the whole file through a private temporary file and a rename,
    /// so a crash leaves the old rules or the new ones, never half.
    fn save(&self, rules: &[String]) -> Result<(), ApprovalsError> {
        let fail = |detail: String| ApprovalsError::Save {
            path: self.path.clone(),
            detail,
        };
        let body = toml::to_string(&RulesFile {
            always_allow: rules.to_vec(),
        })
        .map_err(|e| fail(e.to_string()))?;
        let mut bytes = HEADER.as_bytes().to_vec();
        bytes.extend_from_slice(body.as_bytes());
        crate::atomic_file::replace(&self.path, &bytes, crate::atomic_file::PRIVATE)
            .map_err(|e| fail(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_added_once_removed_and_kept_private() {
        let dir = std::env::temp_dir().join(format!("buddy-approvals-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Remembered::new(dir.join("approvals.toml"));
        assert_eq!(store.load(), Ok(Vec::new()));
        store.add("cargo test").expect("saved");
        store.add("git log").expect("saved");
        store.add("cargo test").expect("saved");
        assert_eq!(
            store.load(),
            Ok(vec!["cargo test".to_string(), "git log".to_string()])
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .expect("file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(store.remove("cargo test"), Ok(true));
        assert_eq!(store.remove("cargo test"), Ok(false));
        assert_eq!(store.load(), Ok(vec!["git log".to_string()]));
        std::fs::write(store.path(), "always_allow = 3").expect("write");
        let err = store.load().expect_err("malformed");
        assert!(err.to_string().contains("approvals.toml"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
