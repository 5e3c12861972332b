//! The audit log of `buddy serve`: one JSON line per request that changes
//! something (a session created or resumed, a prompt, a steer or follow-up,
//! an approval with its command, an interrupt, a deletion), saying who, from
//! which address (`client`; `proxy` too when a trusted balancer named it),
//! which session, when and how it ended. Prompts' text is left out unless the
//! server is told to keep it (`[serve] audit_text`); outputs are never
//! written. The file is user-only (0600) and rotated by size: at the limit
//! `audit.log` becomes `audit.log.1` (the older one is dropped) and a new
//! file begins.
//!
//! Not here: deciding what is allowed (`http.rs`, `team.rs`).

use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

/// Where and how the log is written.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    pub path: PathBuf,
    /// Keep prompts' text in the lines.
    pub text: bool,
    /// The size at which the file is rotated.
    pub max_bytes: u64,
}

/// A team's month of prompts and approvals in a few files a person can read;
/// small enough that a full disk is not the log's doing.
pub const AUDIT_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Most bytes of a prompt (when `audit_text` is on) or of a command kept:
/// a line stays a line a person can read, whatever was pasted.
const TEXT_BYTES: usize = 4000;

pub struct Audit {
    opts: AuditOptions,
    file: Mutex<Option<std::fs::File>>,
}

/// One thing a request did, for the log.
pub struct Entry<'a> {
    pub action: &'a str,
    pub user: Option<&'a str>,
    /// Where the request came from (`forwarded.rs`).
    pub client: Option<super::forwarded::Client>,
    pub session: Option<&'a str>,
    /// The HTTP status the request was answered with.
    pub status: u16,
    /// Further fields (an approval's command and decision, a prompt's mode).
    pub detail: Value,
    /// The prompt's text, written only when `audit_text` is on.
    pub text: Option<&'a str>,
}

impl Audit {
    pub fn new(opts: AuditOptions) -> Audit {
        Audit {
            opts,
            file: Mutex::new(None),
        }
    }

    /// Whether prompts' text goes into the lines.
    pub fn keeps_text(&self) -> bool {
        self.opts.text
    }

    /// Writes one line. A log that cannot be written is reported on stderr
    /// and the request goes on: refusing every prompt because a disk is full
    /// would turn the log into an outage.
    pub fn record(&self, e: Entry<'_>) {
        let mut line = json!({
            "time": rfc3339_now(),
            "action": e.action,
            "user": e.user,
            "session": e.session,
            "status": e.status,
            "outcome": if e.status < 400 { "ok" } else { "refused" },
        });
        if let Some(c) = e.client {
            line["client"] = json!(c.addr.to_string());
            if let Some(proxy) = c.proxy {
                line["proxy"] = json!(proxy.to_string());
            }
        }
        if let (Value::Object(map), Value::Object(detail)) = (&mut line, e.detail) {
            // A command is the model's to write: bounded like a prompt.
            map.extend(detail.into_iter().map(|(k, v)| match v {
                Value::String(t) => (k, json!(crate::text::head(&t, TEXT_BYTES).0)),
                v => (k, v),
            }));
        }
        if self.opts.text {
            if let Some(t) = e.text {
                line["text"] = json!(crate::text::head(t, TEXT_BYTES).0);
            }
        }
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        if let Err(err) = self.write(&bytes) {
            eprintln!(
                "buddy serve: cannot write the audit log {}: {err}",
                self.opts.path.display()
            );
        }
    }

    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if file.is_none() {
            *file = Some(self.open()?);
        }
        let len = match file.as_ref() {
            Some(f) => f.metadata()?.len(),
            None => 0,
        };
        if len > 0 && len + bytes.len() as u64 > self.opts.max_bytes {
            let mut old = self.opts.path.clone().into_os_string();
            old.push(".1");
            std::fs::rename(&self.opts.path, old)?;
            *file = Some(self.open()?);
        }
        match file.as_mut() {
            Some(f) => f.write_all(bytes),
            None => Ok(()),
        }
    }

    fn open(&self) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = self
            .opts
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.opts.path)
    }
}

/// Now as `2026-11-29T07:30:00.123Z`.
fn rfc3339_now() -> String {
    let ms = crate::clock::now_unix_ms();
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = crate::clock::civil_from_days(days);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(text: Option<&'a str>) -> Entry<'a> {
        Entry {
            action: "prompt",
            user: Some("ann"),
            client: Some(crate::serve::forwarded::Client {
                addr: "203.0.113.9".parse().unwrap(),
                proxy: Some("10.0.0.2".parse().unwrap()),
            }),
            session: Some("s1"),
            status: 200,
            detail: json!({ "mode": "prompt" }),
            text,
        }
    }

    #[test]
    fn lines_leave_the_text_out_unless_told_and_rotate_by_size() {
        let dir = crate::serve::scratch_dir("audit");
        let path = dir.join("audit.log");
        let audit = Audit::new(AuditOptions {
            path: path.clone(),
            text: false,
            max_bytes: 400,
        });
        for _ in 0..5 {
            audit.record(entry(Some("the secret plan")));
        }
        let now = std::fs::read_to_string(&path).unwrap();
        let old = std::fs::read_to_string(dir.join("audit.log.1")).unwrap();
        assert!(now.len() <= 400 && !now.is_empty(), "{now}");
        assert!(!now.contains("secret") && !old.contains("secret"));
        let line: Value = serde_json::from_str(now.lines().next().unwrap()).unwrap();
        assert_eq!(line["user"], "ann");
        assert_eq!(line["mode"], "prompt");
        assert_eq!(line["outcome"], "ok");
        assert_eq!(line["client"], "203.0.113.9");
        assert_eq!(line["proxy"], "10.0.0.2");
        assert!(line["time"].as_str().unwrap().ends_with('Z'));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        let kept = Audit::new(AuditOptions {
            path: dir.join("with-text.log"),
            text: true,
            max_bytes: AUDIT_MAX_BYTES,
        });
        kept.record(entry(Some("the secret plan")));
        let text = std::fs::read_to_string(dir.join("with-text.log")).unwrap();
        assert!(text.contains("the secret plan"), "{text}");
    }
}
