//! Why an execution target could not be reached or used: SSH, containers and
//! the shared tmux pane. Each is one line for the user (or the model, for the
//! pane tools), naming the host and what to do.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `--ssh` is not `user@host[:port]`; holds the spec as given.
    #[error("--ssh {0:?}: expected user@host or user@host:port")]
    BadDestination(String),
    /// The private directory for the SSH control socket could not be made.
    #[error("cannot create a directory for the SSH control socket: {0}")]
    ControlDir(#[source] io::Error),
    /// The `ssh` program could not be started.
    #[error("cannot run ssh: {0} (is the OpenSSH client installed?)")]
    NoSsh(#[source] io::Error),
    /// The server's host key is unknown or has changed.
    #[error("SSH host key check failed for {host}: the key is unknown or has changed ({detail}); verify it with `ssh {host}` first")]
    HostKey { host: String, detail: String },
    /// The server refused the user or key.
    #[error("SSH authentication to {host} was refused ({detail}); check the user and key (--ssh-option IdentityFile=...)")]
    AuthRefused { host: String, detail: String },
    /// The server could not be reached (refused, no route, DNS, timeout).
    #[error("cannot reach {host} over SSH: {detail}")]
    Unreachable { host: String, detail: String },
    /// SSH failed for another reason; `detail` is ssh's last word.
    #[error("SSH to {host} failed: {detail}")]
    SshFailed { host: String, detail: String },
    /// Neither podman nor docker is installed and none was named.
    #[error("--container needs podman or docker, and neither is installed (or name one with --container-engine)")]
    NoEngine,
    /// The container engine could not be started.
    #[error("cannot run {engine}: {source}")]
    Engine { engine: String, source: io::Error },
    /// The container does not answer; `detail` is the engine's last word.
    #[error("container {name} is not running or does not exist ({engine} says: {detail})")]
    ContainerDown {
        name: String,
        engine: String,
        detail: String,
    },
    /// The target has no tmux; direct execution still works.
    #[error("tmux is not installed on {actor}")]
    TmuxNotInstalled { actor: String },
    /// The set-up script for tmux could not be run on the target.
    #[error("cannot start tmux on {actor}: {source}")]
    TmuxStart { actor: String, source: io::Error },
    /// buddy runs inside the pane it would type into.
    #[error("buddy is running inside its own managed tmux pane ({session}:{window}), where it would type commands into itself; start it from another terminal or pane, or use --tmux OTHER-SESSION or --no-tmux")]
    InsideManagedPane {
        session: String,
        window: &'static str,
    },
    /// tmux ran but the session, window or scratch directory did not come up.
    #[error("cannot set up tmux session {session} on {actor}: {detail}")]
    TmuxSetup {
        session: String,
        actor: String,
        detail: String,
    },
    /// A tmux session name tmux would misread.
    #[error("invalid tmux session name {0:?}: use letters, digits, `-` and `_`")]
    InvalidSessionName(String),
    /// A pane name that is not a tmux target.
    #[error(
        "invalid pane {0:?}: use a tmux target such as %3, session:window.pane or session:window"
    )]
    InvalidPane(String),
    /// A `send-keys` key name tmux does not know.
    #[error("unknown key {0:?}: use names such as Enter, Escape, Tab, Up, C-c, C-d, M-x, F1, or send text with `text`")]
    UnknownKey(String),
    /// Running a helper on the target failed; `context` says what it was for.
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        source: io::Error,
    },
    /// The helper that reads a command's output gave no output stream.
    #[error("cannot read the command's output")]
    NoOutput,
    /// The helper that reads a command's output sent no valid header.
    #[error("cannot read the command's output: bad header")]
    BadOutputHeader,
    /// The command could not be stored on the target for the pane to source.
    #[error("cannot write the command to the target: {detail}")]
    WriteCommand { detail: String },
    /// tmux refused an operation on a pane; `detail` is its last word.
    #[error("{} {pane}: {detail}", .op.failed())]
    Pane {
        op: PaneOp,
        pane: String,
        detail: String,
    },
    /// An earlier command still runs in the pane.
    #[error("not run: the previous command (`{command}`, started {age_secs} s ago) is still running in tmux pane {pane}. Wait for it (capture-pane shows its progress), or stop it with send-keys C-c, then try again.")]
    PreviousRunning {
        command: String,
        age_secs: u64,
        pane: String,
    },
    /// Another program (not a shell) holds the pane.
    #[error("not run: tmux pane {pane} is busy with `{program}` (not a shell prompt). Use capture-pane to see it and send-keys to drive or quit it (for example C-c or q), then try again.")]
    PaneBusy { pane: String, program: String },
}

/// What was being done to a pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaneOp {
    Type,
    Capture,
    SendKeys,
}

impl PaneOp {
    /// The start of the line saying this failed on a pane.
    fn failed(self) -> &'static str {
        match self {
            PaneOp::Type => "cannot type into tmux pane",
            PaneOp::Capture => "cannot capture pane",
            PaneOp::SendKeys => "cannot send keys to pane",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn messages_read_as_before() {
        assert_eq!(
            HostError::TmuxNotInstalled {
                actor: "me@box".into()
            }
            .to_string(),
            "tmux is not installed on me@box"
        );
        assert_eq!(
            HostError::Pane {
                op: PaneOp::Capture,
                pane: "%3".into(),
                detail: "can't find pane: %3".into(),
            }
            .to_string(),
            "cannot capture pane %3: can't find pane: %3"
        );
        assert_eq!(
            HostError::InvalidPane("a;b".into()).to_string(),
            "invalid pane \"a;b\": use a tmux target such as %3, session:window.pane or session:window"
        );
        let e = HostError::Io {
            context: "cannot run tmux",
            source: io::Error::other("gone"),
        };
        assert_eq!(e.to_string(), "cannot run tmux: gone");
        assert!(e.source().is_some());
        assert!(HostError::InsideManagedPane {
            session: "buddy-x".into(),
            window: "buddy-shared",
        }
        .to_string()
        .contains("(buddy-x:buddy-shared)"));
    }
}
