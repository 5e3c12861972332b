//! The people a team's `buddy serve` knows: a name per token, from
//! `[serve.users]` in the config and from the users file that
//! `buddy serve add-user NAME` writes. Only a hash of each token is kept;
//! a request's token is hashed and compared with every stored hash in
//! constant time.
//!
//! Not here: what a user may see (`http.rs` asks [`super::team::Team`]),
//! the single `--token` (`guard.rs`), which stays the server's admin.

use std::collections::BTreeMap;
use std::path::Path;

/// How a stored hash starts, so a later scheme can sit beside this one.
const SCHEME: &str = "sha256:";
/// Random bytes in a new token: 256 bits, printed as 64 hex digits.
const TOKEN_BYTES: usize = 32;
/// A users file larger than this is not a list of people.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Names and the hashes of their tokens.
#[derive(Debug, Clone, Default)]
pub struct Users {
    hashes: BTreeMap<String, [u8; 32]>,
}

/// A users file or entry that cannot be used, as a sentence.
#[derive(Debug)]
pub struct UsersError(pub String);

impl std::fmt::Display for UsersError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsersError {}

impl Users {
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Adds `name` with a stored hash (`sha256:` and 64 hex digits).
    pub fn insert(&mut self, name: &str, stored: &str) -> Result<(), UsersError> {
        check_name(name)?;
        let hash = parse_hash(stored).ok_or_else(|| {
            UsersError(format!(
                "serve user {name:?}: expected \"sha256:\" and 64 hex digits (what `buddy serve add-user` writes)"
            ))
        })?;
        self.hashes.insert(name.to_string(), hash);
        Ok(())
    }

    /// Adds the users of a file `add-user` wrote (`NAME sha256:HEX` lines);
    /// a missing file adds none.
    pub fn load_file(&mut self, path: &Path) -> Result<(), UsersError> {
        let bad = |e: std::io::Error| UsersError(format!("cannot read {}: {e}", path.display()));
        let text = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(bad(e)),
            Ok(m) if m.len() > MAX_FILE_BYTES => {
                return Err(UsersError(format!(
                    "{} is larger than {MAX_FILE_BYTES} bytes",
                    path.display()
                )))
            }
            Ok(_) => std::fs::read_to_string(path).map_err(bad)?,
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, hash) = line.split_once(char::is_whitespace).ok_or_else(|| {
                UsersError(format!(
                    "{} line {}: expected NAME sha256:HEX",
                    path.display(),
                    n + 1
                ))
            })?;
            self.insert(name, hash.trim())
                .map_err(|e| UsersError(format!("{} line {}: {e}", path.display(), n + 1)))?;
        }
        Ok(())
    }

    /// The user whose token this is. Every stored hash is compared, each in
    /// constant time, so neither the answer's time nor its path says which
    /// user (or how much of a hash) matched.
    pub fn who(&self, token: &str) -> Option<&str> {
        use subtle::ConstantTimeEq;
        let given = hash(token);
        let mut found = None;
        for (name, stored) in &self.hashes {
            if bool::from(stored.ct_eq(&given)) {
                found = Some(name.as_str());
            }
        }
        found
    }
}

/// A token's stored form. Plain SHA-256 without salt or stretching is
/// enough here because the tokens are 256 random bits, not passwords: no
/// dictionary or brute force reaches one from its hash.
pub fn hash(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// `sha256:` and the hash in hex, as stored.
pub fn stored_form(token: &str) -> String {
    format!("{SCHEME}{}", hex(&hash(token)))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn parse_hash(stored: &str) -> Option<[u8; 32]> {
    let digits = stored.strip_prefix(SCHEME)?.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks(2).enumerate() {
        let pair = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// A user's name: letters, digits, `.`, `_`, `-`, at most 64; it appears in
/// audit lines and metrics, so nothing that could break a line.
fn check_name(name: &str) -> Result<(), UsersError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(UsersError(format!(
            "{:?} is not a user name: letters, digits, '.', '_' and '-', at most 64",
            crate::text::head(name, 80).0
        )))
    }
}

/// A new random token (64 hex digits).
pub fn new_token() -> Result<String, UsersError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; TOKEN_BYTES];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| UsersError("the system's random source failed".into()))?;
    Ok(hex(&bytes))
}

/// Adds `name` with a new token to the users file at `path` (made 0600,
/// its directory if need be), replacing that name's line if it had one.
/// Returns the token, which is stored nowhere.
pub fn add_user(path: &Path, name: &str) -> Result<String, UsersError> {
    check_name(name)?;
    let io = |what: &str, e: std::io::Error| {
        UsersError(format!("cannot {what} {}: {e}", path.display()))
    };
    // Reading it first also refuses a file that is not a users file.
    Users::default().load_file(path)?;
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io("read", e)),
    };
    let token = new_token()?;
    let mut text: String = old
        .lines()
        .filter(|l| l.split_whitespace().next() != Some(name))
        .map(|l| format!("{l}\n"))
        .collect();
    text.push_str(&format!("{name} {}\n", stored_form(&token)));
    crate::atomic_file::replace(path, text.as_bytes(), crate::atomic_file::PRIVATE)
        .map_err(|e| io("write", e))?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_finds_its_user_and_no_other() {
        let mut users = Users::default();
        users.insert("ann", &stored_form("tok-a")).unwrap();
        users.insert("bob", &stored_form("tok-b")).unwrap();
        assert_eq!(users.who("tok-a"), Some("ann"));
        assert_eq!(users.who("tok-b"), Some("bob"));
        assert_eq!(users.who("tok-c"), None);
        assert_eq!(users.who(""), None);
    }

    #[test]
    fn stored_hashes_and_names_are_checked() {
        let mut users = Users::default();
        assert!(users.insert("ann", "sha256:abc").is_err());
        assert!(users.insert("ann", &hex(&[0; 32])).is_err(), "no scheme");
        assert!(users.insert("a b", &stored_form("t")).is_err());
        assert!(users.insert("", &stored_form("t")).is_err());
        assert!(users.is_empty());
    }

    #[test]
    fn add_user_keeps_a_hash_only_and_replaces_the_names_old_line() {
        let dir = crate::serve::scratch_dir("users");
        let path = dir.join("serve/users");
        let first = add_user(&path, "ann").unwrap();
        let second = add_user(&path, "ann").unwrap();
        add_user(&path, "bob").unwrap();
        assert_eq!(second.len(), 64);
        assert_ne!(first, second);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&second), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
        let mut users = Users::default();
        users.load_file(&path).unwrap();
        assert_eq!(users.who(&second), Some("ann"));
        assert_eq!(users.who(&first), None);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
