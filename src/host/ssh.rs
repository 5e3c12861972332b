//! A server reached with the system `ssh` client, so `~/.ssh/config`, agents
//! and keys work as they do for `ssh`. Commands share one connection through a
//! control master on a socket in a private directory buddy creates, and stops
//! and removes when the target is dropped.

use super::{shell_quote, HostError, Target};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

pub struct SshTarget {
    user: Option<String>,
    host: String,
    port: Option<u16>,
    options: Vec<String>,
    control_dir: PathBuf,
    /// The login name on the far side, learnt when connecting.
    remote_user: String,
}

/// Splits `user@host[:port]` (an IPv6 host goes in brackets: `[::1]:2222`).
pub fn parse_destination(spec: &str) -> Result<(Option<String>, String, Option<u16>), HostError> {
    let bad = || HostError::BadDestination(spec.to_string());
    let (user, rest) = match spec.rsplit_once('@') {
        Some((u, r)) if !u.is_empty() => (Some(u.to_string()), r),
        Some(_) => return Err(bad()),
        None => (None, spec),
    };
    let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
        let (h, after) = inner.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad())?),
            None if after.is_empty() => None,
            None => return Err(bad()),
        };
        (h.to_string(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.parse().map_err(|_| bad())?)),
            None => (rest.to_string(), None),
        }
    };
    if host.is_empty() || host.starts_with('-') {
        return Err(bad());
    }
    Ok((user, host, port))
}

/// Why an SSH connection failed, from ssh's own stderr.
pub fn explain_failure(host: &str, stderr: &str) -> HostError {
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("ssh exited without saying why")
        .trim();
    let (host, detail) = (host.to_string(), last.to_string());
    let has = |s: &str| stderr.contains(s);
    if has("Host key verification failed")
        || has("REMOTE HOST IDENTIFICATION HAS CHANGED")
        || has("No ED25519 host key is known")
        || has("host key is known")
    {
        HostError::HostKey { host, detail }
    } else if has("Permission denied") || has("Too many authentication failures") {
        HostError::AuthRefused { host, detail }
    } else if has("Connection refused")
        || has("timed out")
        || has("No route to host")
        || has("Could not resolve hostname")
        || has("Network is unreachable")
        || has("Connection closed")
    {
        HostError::Unreachable { host, detail }
    } else {
        HostError::SshFailed { host, detail }
    }
}

impl SshTarget {
    /// Parses the destination, opens the shared connection once and learns the
    /// remote user; any failure is one line for the user.
    pub async fn connect(spec: &str, options: Vec<String>) -> Result<SshTarget, HostError> {
        let (user, host, port) = parse_destination(spec)?;
        let control_dir = private_dir().map_err(HostError::ControlDir)?;
        let mut target = SshTarget {
            user,
            host,
            port,
            options,
            control_dir,
            remote_user: String::new(),
        };
        let out = target
            .command("id -un", Path::new("."))
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(HostError::NoSsh)?;
        if !out.status.success() {
            return Err(explain_failure(
                &target.destination(),
                &String::from_utf8_lossy(&out.stderr),
            ));
        }
        target.remote_user = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(target)
    }

    /// `user@host` as given, or `host`.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }

    fn ssh(&self) -> Command {
        let mut c = Command::new("ssh");
        // ssh keeps the first value it sees for an option, so the user's go
        // first: `--ssh-option ControlMaster=no` really turns sharing off.
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        c.arg("-o")
            .arg("BatchMode=yes")
            .arg("-o")
            .arg("ControlMaster=auto")
            .arg("-o")
            .arg(format!("ControlPath={}/cm", self.control_dir.display()))
            .arg("-o")
            .arg("ControlPersist=60");
        if let Some(p) = self.port {
            c.arg("-p").arg(p.to_string());
        }
        c.arg(self.destination());
        c
    }
}

/// A fresh 0700 directory for the control socket. Socket paths have a limit
/// of about 100 bytes, so a long `XDG_RUNTIME_DIR` gives way to `/tmp`.
fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = crate::process::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir() && p.as_os_str().len() <= 60)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = base.join(format!("buddy-ssh-{}-{nanos:x}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

impl Target for SshTarget {
    fn command(&self, script: &str, _cwd: &Path) -> Command {
        let mut c = self.ssh();
        super::scrub(&mut c);
        // ssh hands the remote login shell one string; quote the script into it.
        c.arg("--").arg(format!("sh -c {}", shell_quote(script)));
        c
    }

    fn actor(&self) -> String {
        let user = if self.remote_user.is_empty() {
            self.user.clone().unwrap_or_default()
        } else {
            self.remote_user.clone()
        };
        format!("{user}@{}", self.host)
    }

    fn description(&self) -> String {
        format!(
            "the remote host {} over SSH (as {}); commands and files are on that machine, not the user's",
            self.host,
            self.actor()
        )
    }

    fn is_local(&self) -> bool {
        false
    }
}

impl SshTarget {
    /// How the REPL prompt names this target.
    pub fn prompt_label(&self) -> String {
        format!("ssh {}", self.actor())
    }

    /// What a person types in their own terminal to run `command`
    /// interactively there (for attach instructions).
    pub fn interactive_command(&self, command: &str) -> String {
        let mut line = String::from("ssh -t");
        if let Some(p) = self.port {
            line.push_str(&format!(" -p {p}"));
        }
        for o in &self.options {
            line.push_str(&format!(" -o {}", shell_quote(o)));
        }
        format!("{line} {} {command}", shell_quote(&self.destination()))
    }
}

impl Drop for SshTarget {
    fn drop(&mut self) {
        // Stoppers of cancelled commands ride the shared connection: first them.
        super::remote_job::wait_for_stops(std::time::Duration::from_secs(3));
        // Stop the control master (if one is up) and remove its directory.
        let mut c = std::process::Command::new("ssh");
        c.arg("-o")
            .arg(format!("ControlPath={}/cm", self.control_dir.display()))
            .arg("-O")
            .arg("exit");
        if let Some(p) = self.port {
            c.arg("-p").arg(p.to_string());
        }
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        let _ = c
            .arg(self.destination())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.control_dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        assert_eq!(
            parse_destination("me@host:2222").unwrap(),
            (Some("me".into()), "host".into(), Some(2222))
        );
        assert_eq!(
            parse_destination("host").unwrap(),
            (None, "host".into(), None)
        );
        assert_eq!(
            parse_destination("me@[::1]:22").unwrap(),
            (Some("me".into()), "::1".into(), Some(22))
        );
        assert!(parse_destination("me@host:port").is_err());
        assert!(parse_destination("@host").is_err());
        assert!(parse_destination("-oProxyCommand=x").is_err());
    }

    #[test]
    fn failures_are_named() {
        let refused = "ssh: connect to host 127.0.0.1 port 1: Connection refused\r\n";
        let e = explain_failure("h", refused);
        assert!(matches!(e, HostError::Unreachable { .. }));
        assert_eq!(
            e.to_string(),
            "cannot reach h over SSH: ssh: connect to host 127.0.0.1 port 1: Connection refused"
        );
        let auth = "me@h: Permission denied (publickey).\n";
        assert!(explain_failure("h", auth)
            .to_string()
            .starts_with("SSH authentication to h was refused"));
        let key = "Host key verification failed.\n";
        assert!(explain_failure("h", key)
            .to_string()
            .starts_with("SSH host key check failed"));
        assert_eq!(
            explain_failure("h", "").to_string(),
            "SSH to h failed: ssh exited without saying why"
        );
        assert_eq!(
            parse_destination("@host").unwrap_err().to_string(),
            "--ssh \"@host\": expected user@host or user@host:port"
        );
    }
}
