//! Commands run in the editor's terminal: when buddy runs inside an editor
//! that offers terminals (ACP's `terminal/*`), `run_shell` runs this host's
//! commands there, so the user sees them where they work. Only the seam and
//! the command line live here; `acp::terminal` implements it over the
//! connection. What is run is decided before this is reached, exactly as
//! for a command run here: the approval gate (denylist, policy, the user's
//! answer) and the sandbox, whose wrapper is part of the command line.

use crate::host::sandbox::Sandbox;
use async_trait::async_trait;
use std::path::Path;
use std::time::Duration;

#[async_trait]
pub trait EditorTerminal: Send + Sync {
    /// Runs `argv` in `cwd` in a terminal of the editor and waits for it,
    /// at most `timeout` (then it is killed). The terminal is released
    /// when this returns and when the future is dropped (a cancelled call).
    async fn run(&self, run: TerminalCommand<'_>) -> Result<TerminalRun, TerminalError>;
}

/// One command for the editor's terminal.
#[derive(Debug, Clone)]
pub struct TerminalCommand<'a> {
    /// The model's call it serves (the editor may show the terminal with it).
    pub call_id: &'a str,
    /// Program and arguments; the program is found on the editor's `PATH`.
    pub argv: Vec<String>,
    pub cwd: &'a Path,
    /// Variables to set for the command.
    pub env: Vec<(String, String)>,
    /// Output kept, in bytes (the editor keeps the end).
    pub output_bytes: u64,
    pub timeout: Duration,
}

/// How a command in the editor's terminal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalRun {
    /// stdout and stderr as the terminal shows them, together.
    pub output: String,
    /// The editor dropped the start of the output to keep to the limit.
    pub truncated: bool,
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
    pub timed_out: bool,
}

/// Why the editor's terminal could not run a command: one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TerminalError {
    /// The editor's own words.
    #[error("the editor could not run it in a terminal: {0}")]
    Editor(String),
}

/// The command line that runs `command` with `sh -c` as a local run would:
/// inside the sandbox's wrapper when one confines commands, and without
/// buddy's credentials in the environment (`env -u`, since the editor's
/// terminal starts from the editor's environment, not ours).
pub fn command_line(command: &str, sandbox: Option<&Sandbox>, hidden: &[String]) -> Vec<String> {
    let mut argv = Vec::new();
    if !hidden.is_empty() {
        argv.push("env".to_string());
        for var in hidden {
            argv.push("-u".to_string());
            argv.push(var.clone());
        }
    }
    match sandbox {
        Some(sb) => argv.extend(sb.argv(command)),
        None => argv.extend(["sh".to_string(), "-c".to_string(), command.to_string()]),
    }
    argv
}

/// The result text, worded as a local run's: the exit first, then what
/// the command printed.
pub fn result_text(run: &TerminalRun, timeout: Duration) -> String {
    let header = if run.timed_out {
        format!(
            "timed out after {} s; the command was killed",
            timeout.as_secs_f64()
        )
    } else {
        match (run.exit_code, &run.signal) {
            (Some(code), _) => format!("exit code: {code}"),
            (None, Some(sig)) => format!("exit code: none (killed by signal {sig})"),
            (None, None) => "exit code: none".to_string(),
        }
    };
    let mut text = header;
    if run.truncated {
        text.push_str("\n(the start of the output was dropped)");
    }
    if !run.output.is_empty() {
        text.push_str("\noutput:\n");
        text.push_str(run.output.trim_end_matches('\n'));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_drops_credentials_and_keeps_the_command_whole() {
        let argv = command_line("echo 'a b' && ls", None, &["BUDDY_API_KEY".into()]);
        assert_eq!(
            argv,
            ["env", "-u", "BUDDY_API_KEY", "sh", "-c", "echo 'a b' && ls"]
        );
        assert_eq!(command_line("ls", None, &[]), ["sh", "-c", "ls"]);
    }

    #[test]
    fn a_sandboxed_command_runs_inside_the_wrapper() {
        use crate::host::sandbox::{Mode, Policy};
        let policy = Policy::for_workdir(Mode::ReadOnly, Path::new("/w"), false);
        let sb = Sandbox::unenforceable(policy, "test");
        let argv = command_line("ls", Some(&sb), &[]);
        assert_eq!(argv[0], "/nonexistent/buddy");
        assert!(argv.iter().any(|a| a == "--no-network"), "{argv:?}");
        assert_eq!(argv[argv.len() - 3..], ["sh", "-c", "ls"]);
    }

    #[test]
    fn results_read_like_a_local_runs() {
        let run = TerminalRun {
            output: "hi\n".into(),
            truncated: false,
            exit_code: Some(3),
            signal: None,
            timed_out: false,
        };
        assert_eq!(
            result_text(&run, Duration::from_secs(1)),
            "exit code: 3\noutput:\nhi"
        );
        let killed = TerminalRun {
            timed_out: true,
            ..run
        };
        assert!(result_text(&killed, Duration::from_secs(2)).starts_with("timed out after 2 s"));
    }
}
