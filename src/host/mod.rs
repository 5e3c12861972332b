//! Execution targets: where `run_shell` runs and where the file tools read and
//! write. Tools build their processes through `Target::command` and never know
//! whether that is this host, a server over SSH or a container. A target does
//! not capture output or enforce timeouts; the tools do.

pub mod container;
pub mod error;
pub mod remote_job;
pub mod sandbox;
pub mod ssh;
pub mod syscall_filter;
pub mod tmux;

use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

pub use container::ContainerTarget;
pub use error::HostError;
pub use ssh::SshTarget;
pub use tmux::TmuxTarget;

pub trait Target: Send + Sync {
    /// A process that runs `script` with `sh -c` on the target; `cwd` applies
    /// to the local host only (remote commands start in the remote home).
    fn command(&self, script: &str, cwd: &Path) -> Command;
    /// A process that runs one program with arguments on the target (no shell
    /// on this side; remote targets quote it for theirs).
    fn exec(&self, argv: &[&str]) -> Command {
        let line: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
        self.command(&line.join(" "), Path::new("/"))
    }
    /// Who runs commands, `user@host`, for approval prompts.
    fn actor(&self) -> String;
    /// One sentence for the system prompt.
    fn description(&self) -> String;
    fn is_local(&self) -> bool;
}

static HIDDEN_ENV: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Names environment variables that commands started on this host never get
/// (buddy's credentials): a command the model asked for must not be able to
/// print the user's API key into the conversation. Set once, at start.
pub fn hide_env(vars: Vec<String>) {
    let _ = HIDDEN_ENV.set(vars);
}

/// The variables `hide_env` named, for a process another program starts
/// for us (an editor's terminal), which must drop them itself.
pub fn hidden_env() -> &'static [String] {
    HIDDEN_ENV.get().map_or(&[], Vec::as_slice)
}

/// Removes the hidden variables from a process about to start here (a local
/// command, or the ssh or container client that carries a remote one).
pub(crate) fn scrub(c: &mut Command) {
    for var in HIDDEN_ENV.get().into_iter().flatten() {
        c.env_remove(var);
    }
}

/// This host, as the user running buddy.
pub struct LocalTarget;

impl Target for LocalTarget {
    fn command(&self, script: &str, cwd: &Path) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script).current_dir(cwd);
        scrub(&mut c);
        c
    }

    fn exec(&self, argv: &[&str]) -> Command {
        let mut c = Command::new(argv.first().copied().unwrap_or("true"));
        c.args(argv.iter().skip(1));
        scrub(&mut c);
        c
    }

    fn actor(&self) -> String {
        local_actor()
    }

    fn description(&self) -> String {
        format!("the local host ({})", self.actor())
    }

    fn is_local(&self) -> bool {
        true
    }
}

/// `s` quoted for a POSIX shell: one word, whatever it contains.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Runs `script` on `target` to completion with `input` on stdin, returning
/// (exit code, stdout, stderr). For short helper scripts (file transfer,
/// checks), not for user commands.
pub async fn run_script(
    target: &dyn Target,
    script: &str,
    cwd: &Path,
    input: Option<&[u8]>,
) -> std::io::Result<(Option<i32>, Vec<u8>, Vec<u8>)> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = target.command(script, cwd);
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let writer = match (child.stdin.take(), input) {
        (Some(mut pipe), Some(bytes)) => {
            let bytes = bytes.to_vec();
            Some(tokio::spawn(async move {
                let r = pipe.write_all(&bytes).await;
                drop(pipe);
                r
            }))
        }
        _ => None,
    };
    let out = child.wait_with_output().await?;
    if let Some(w) = writer {
        if let Ok(Err(e)) = w.await {
            // A broken pipe means the script ended early; its exit code says why.
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e);
            }
        }
    }
    Ok((out.status.code(), out.stdout, out.stderr))
}

/// The local `user@host` string shown in approval prompts. Worked out once
/// per process: every tool call asks for it, and neither changes meanwhile.
pub fn local_actor() -> String {
    static ACTOR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ACTOR.get_or_init(find_local_actor).clone()
}

fn find_local_actor() -> String {
    let user = crate::process::var("USER")
        .filter(|u| !u.is_empty())
        .or_else(|| crate::process::var("LOGNAME"))
        .filter(|u| !u.is_empty())
        .or_else(user_from_passwd)
        .unwrap_or_else(|| "user".to_string());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    format!("{user}@{host}")
}

/// The name of the current uid in /etc/passwd, for environments without $USER
/// (cron, tmux started by a service, containers).
fn user_from_passwd() -> Option<String> {
    let uid = rustix::process::getuid().as_raw();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (id == uid).then(|| name.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lookup_finds_the_current_user() {
        let name = user_from_passwd().expect("uid in /etc/passwd");
        assert!(!name.is_empty());
    }

    #[test]
    fn quoting_keeps_one_word() {
        assert_eq!(shell_quote("plain/path.txt"), "plain/path.txt");
        assert_eq!(shell_quote("it's here"), "'it'\\''s here'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$HOME;rm"), "'$HOME;rm'");
    }

    #[tokio::test]
    async fn scripts_get_stdin_and_report_exit_codes() {
        let (code, out, err) = run_script(
            &LocalTarget,
            "cat; echo oops >&2; exit 3",
            Path::new("/"),
            Some(b"\x00bin\xff"),
        )
        .await
        .unwrap();
        assert_eq!(code, Some(3));
        assert_eq!(out, b"\x00bin\xff");
        assert_eq!(err, b"oops\n");
    }
}
