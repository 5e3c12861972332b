//! Known secrets (API keys, the values of the key variables buddy reads, login
//! tokens) replaced by `[REDACTED]` wherever text leaves buddy: tool results
//! before the model sees them, events (so every front end, JSON line and
//! served page), error lines and session files. One routine, two forms:
//!
//! - free text (`Secrets::text`) skips secrets shorter than
//!   `MIN_SECRET_CHARS`: a one-letter "key" would otherwise turn every output
//!   into confetti, and a key that short protects nothing anyway;
//! - JSON (`Secrets::json`) replaces every secret, whatever its length, but
//!   only inside string values and never in structural fields, so a short key
//!   can never make a session file unreadable.
//!
//! The process learns its secrets once the settings are loaded (`remember`),
//! like the hidden environment variables, so layers that only see text (the
//! event emitter, the error line in `main`) need no plumbing.

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Secrets shorter than this are left alone in free text (see the module note).
pub const MIN_SECRET_CHARS: usize = 8;

/// A set of secrets, longest first so a key that contains another is
/// replaced whole.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    list: Vec<String>,
}

impl Secrets {
    pub fn new<I, S>(secrets: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut s = Secrets::default();
        s.add(secrets);
        s
    }

    /// Adds secrets; blank ones and repeats are ignored. Surrounding
    /// whitespace is not part of a key (config and env values are trimmed).
    pub fn add<I, S>(&mut self, secrets: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for s in secrets {
            let s = s.as_ref().trim();
            if !s.is_empty() && !self.list.iter().any(|k| k == s) {
                self.list.push(s.to_string());
            }
        }
        self.list
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn all(&self) -> &[String] {
        &self.list
    }

    /// `text` with every secret of at least `MIN_SECRET_CHARS` replaced.
    /// Borrowed when nothing matched.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.list {
            if secret.chars().count() >= MIN_SECRET_CHARS && out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }

    /// The length of the longest end of `text` that is the start of a
    /// secret redacted in free text (0 when none is): what a stream must
    /// hold back until it knows whether a key follows.
    pub fn partial_at_end(&self, text: &str) -> usize {
        let mut longest = 0;
        for secret in &self.list {
            if secret.chars().count() < MIN_SECRET_CHARS {
                continue;
            }
            let most = text.len().min(secret.len() - 1);
            for n in (longest + 1..=most).rev() {
                if secret.is_char_boundary(n) && text.ends_with(&secret[..n]) {
                    longest = n;
                    break;
                }
            }
        }
        longest
    }

    /// Replaces `text` in place when it holds a secret.
    pub fn text_in_place(&self, text: &mut String) {
        if let Cow::Owned(t) = self.text(text) {
            *text = t;
        }
    }

    /// Replaces every secret, whatever its length, inside the string values
    /// of `value`, leaving the fields that give a record its shape alone.
    pub fn json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(text) => {
                for secret in &self.list {
                    if text.contains(secret.as_str()) {
                        *text = text.replace(secret.as_str(), REDACTED);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            serde_json::Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    // Structure, not text: roles, types and ids must stay what the
                    // reader expects (a key "e" must not turn "user" into "us…r").
                    if !matches!(
                        k.as_str(),
                        "role" | "type" | "id" | "tool_call_id" | "name" | "ids"
                    ) {
                        self.json(v);
                    }
                }
            }
            _ => {}
        }
    }
}

static KNOWN: RwLock<Option<Arc<Secrets>>> = RwLock::new(None);

/// Adds secrets to the ones this process redacts from everything it shows.
pub fn remember<I, S>(secrets: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    let mut next = known.as_deref().cloned().unwrap_or_default();
    next.add(secrets);
    *known = Some(Arc::new(next));
}

/// The secrets this process knows.
pub fn known() -> Arc<Secrets> {
    KNOWN
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_default()
}

/// `text` with the process's known secrets replaced (free-text rules).
pub fn text(text: &str) -> Cow<'_, str> {
    match KNOWN.read().unwrap_or_else(|p| p.into_inner()).as_deref() {
        Some(s) if !s.is_empty() => Cow::Owned(s.text(text).into_owned()),
        _ => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_secrets_are_replaced_in_free_text_longest_first() {
        let s = Secrets::new(["sk-abcdef123", "sk-abcdef123456", " ", ""]);
        assert_eq!(
            s.text("a sk-abcdef123456 b sk-abcdef123 c"),
            "a [REDACTED] b [REDACTED] c"
        );
        assert!(matches!(s.text("nothing here"), Cow::Borrowed(_)));
        // Trimmed on the way in, as config and environment values are.
        let s = Secrets::new(["  sk-padded-key\n"]);
        assert_eq!(s.text("x sk-padded-key y"), "x [REDACTED] y");
    }

    #[test]
    fn short_secrets_leave_free_text_alone_but_not_json_strings() {
        for key in ["e", "to", "abc", "1234", "\"", "{", "a\\b"] {
            let s = Secrets::new([key]);
            let out = r#"{"role":"user","content":"the key e to abc 1234"}"#;
            assert_eq!(s.text(out), out, "key {key:?}");
            let mut v: serde_json::Value = serde_json::from_str(out).unwrap();
            s.json(&mut v);
            assert_eq!(v["role"], "user", "key {key:?}");
            let text = serde_json::to_string(&v).unwrap();
            assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
        }
        let s = Secrets::new(["1234"]);
        let mut v = serde_json::json!({"content": "pin 1234", "n": 1234});
        s.json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"content": "pin [REDACTED]", "n": 1234})
        );
        // Exactly the minimum counts as a secret in free text.
        let s = Secrets::new(["12345678"]);
        assert_eq!(s.text("x12345678y"), "x[REDACTED]y");
    }
}
