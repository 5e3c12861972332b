//! `!command` at the REPL prompt: the user's own command, run at once with
//! `sh -c` on the execution target the tools use (this host, the SSH server
//! or the container; not the shared tmux pane, so its output can be
//! captured). Output is bounded in size and time; the exchange is then
//! handed to the conversation so the model sees it with the next prompt.

use crate::host::Target;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Output kept per command (stdout and stderr together); the rest is counted.
pub const MAX_OUTPUT: usize = 64 * 1024;
/// Lines of it shown on the screen (the last ones; the model gets all kept).
pub const SHOWN_LINES: usize = 40;
/// A command still running after this is killed.
pub const TIME_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub command: String,
    /// The exit code; `None` when it was killed by a signal or the time limit.
    pub code: Option<i32>,
    pub output: String,
    /// Bytes of output beyond `MAX_OUTPUT`, not kept.
    pub dropped: usize,
    pub timed_out: bool,
    /// Why it could not start.
    pub error: Option<String>,
}

impl Ran {
    /// The message the model gets.
    pub fn context(&self, actor: &str) -> String {
        let status = self.status();
        let mut text = format!(
            "I ran this command myself on {actor} ({status}):\n$ {}\n",
            self.command
        );
        if let Some(e) = &self.error {
            text.push_str(&format!("It could not start: {e}\n"));
            return text;
        }
        text.push_str("Output:\n```\n");
        text.push_str(&self.output);
        if !self.output.ends_with('\n') && !self.output.is_empty() {
            text.push('\n');
        }
        text.push_str("```\n");
        if self.dropped > 0 {
            text.push_str(&format!(
                "({} more bytes of output were cut)\n",
                self.dropped
            ));
        }
        text
    }

    /// The exchange as the user saw it, for a replay of the session: what
    /// they typed and how it ended.
    pub fn as_typed(&self) -> String {
        match &self.error {
            Some(_) => format!("!{}\n(could not start)", self.command),
            None => format!("!{}\n({})", self.command, self.status()),
        }
    }

    pub fn status(&self) -> String {
        match (self.code, self.timed_out) {
            (_, true) => format!("killed after {} s", TIME_LIMIT.as_secs()),
            (Some(c), _) => format!("exit status {c}"),
            (None, _) => "killed by a signal".into(),
        }
    }

    pub fn failed(&self) -> bool {
        self.code != Some(0) || self.error.is_some()
    }

    /// What the screen shows: the last `SHOWN_LINES` lines, sanitised.
    pub fn screen_text(&self) -> String {
        let lines: Vec<&str> = self.output.lines().collect();
        let skip = lines.len().saturating_sub(SHOWN_LINES);
        let mut out = String::new();
        if skip > 0 {
            out.push_str(&format!("… {skip} earlier lines not shown\n"));
        }
        out.push_str(&lines[skip..].join("\n"));
        crate::text::visible(&out).into_owned()
    }
}

/// Runs `command` on `target` in `cwd` (local targets) to its end, the time
/// limit or until the returned future is dropped (the process is killed).
pub async fn run(target: Arc<dyn Target>, cwd: PathBuf, command: String) -> Ran {
    let mut ran = Ran {
        command: command.clone(),
        code: None,
        output: String::new(),
        dropped: 0,
        timed_out: false,
        error: None,
    };
    // stderr joins stdout through the shell, so the two stay in order.
    let mut cmd = target.command(&format!("exec 2>&1; {command}"), &cwd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            ran.error = Some(e.to_string());
            return ran;
        }
    };
    let Some(mut stdout) = child.stdout.take() else {
        ran.error = Some("no output pipe".into());
        return ran;
    };
    let mut kept = Vec::new();
    let read = async {
        let mut buf = [0u8; 8192];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_OUTPUT.saturating_sub(kept.len()).min(n);
                    kept.extend_from_slice(&buf[..room]);
                    ran.dropped += n - room;
                }
            }
        }
        child.wait().await
    };
    let result = tokio::time::timeout(TIME_LIMIT, read).await;
    match result {
        Ok(Ok(status)) => ran.code = status.code(),
        Ok(Err(e)) => ran.error = Some(e.to_string()),
        Err(_) => ran.timed_out = true,
    }
    ran.output = String::from_utf8_lossy(&kept).into_owned();
    ran
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_and_status_are_kept_and_bounded() {
        let cwd = std::env::temp_dir();
        let ran = run(
            Arc::new(crate::host::LocalTarget),
            cwd.clone(),
            "echo hi; echo err >&2; exit 3".into(),
        )
        .await;
        assert_eq!(ran.code, Some(3));
        assert_eq!(ran.output, "hi\nerr\n");
        assert!(ran.failed());
        let ctx = ran.context("me@here");
        assert!(ctx.contains("$ echo hi; echo err >&2; exit 3"), "{ctx}");
        assert!(ctx.contains("exit status 3"), "{ctx}");
        let big = format!("head -c {} /dev/zero | tr '\\0' x", MAX_OUTPUT + 100);
        let ran = run(Arc::new(crate::host::LocalTarget), cwd, big).await;
        assert_eq!(ran.output.len(), MAX_OUTPUT);
        assert_eq!(ran.dropped, 100);
        assert!(!ran.failed());
    }

    #[test]
    fn the_screen_shows_the_last_lines_with_control_characters_visible() {
        let ran = Ran {
            command: "x".into(),
            code: Some(0),
            output: (0..50).map(|i| format!("line {i}\n")).collect::<String>() + "\u{1b}[2J",
            dropped: 0,
            timed_out: false,
            error: None,
        };
        let s = ran.screen_text();
        assert!(
            s.starts_with("… 11 earlier lines not shown\nline 11\n"),
            "{s}"
        );
        assert!(!s.contains('\u{1b}'), "{s}");
    }
}
