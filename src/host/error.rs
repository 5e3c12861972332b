//! Why an execution target could not be reached or used: SSH, containers and
//! the shared tmux pane. Each is one line for the user (or the model, for the
//! pane tools), naming the host and what to do.

use std::error::Error;
use std::fmt;
use std::io;

#[derive(Debug)]
pub enum HostError {
    /// `--ssh` is not `user@host[:port]`; holds the spec as given.
    BadDestination(String),
    /// The private directory for the SSH control socket could not be made.
    ControlDir(io::Error),
    /// The `ssh` program could not be started.
    NoSsh(io::Error),
    /// The server's host key is unknown or has changed.
    HostKey { host: String, detail: String },
    /// The server refused the user or key.
    AuthRefused { host: String, detail: String },
    /// The server could not be reached (refused, no route, DNS, timeout).
    Unreachable { host: String, detail: String },
    /// SSH failed for another reason; `detail` is ssh's last word.
    SshFailed { host: String, detail: String },
    /// Neither podman nor docker is installed and none was named.
    NoEngine,
    /// The container engine could not be started.
    Engine { engine: String, source: io::Error },
    /// The container does not answer; `detail` is the engine's last word.
    ContainerDown {
        name: String,
        engine: String,
        detail: String,
    },
    /// The target has no tmux; direct execution still works.
    TmuxNotInstalled { actor: String },
    /// The set-up script for tmux could not be run on the target.
    TmuxStart { actor: String, source: io::Error },
    /// buddy runs inside the pane it would type into.
    InsideManagedPane {
        session: String,
        window: &'static str,
    },
    /// tmux ran but the session, window or scratch directory did not come up.
    TmuxSetup {
        session: String,
        actor: String,
        detail: String,
    },
    /// A tmux session name tmux would misread.
    InvalidSessionName(String),
    /// A pane name that is not a tmux target.
    InvalidPane(String),
    /// A `send-keys` key name tmux does not know.
    UnknownKey(String),
    /// Running a helper on the target failed; `context` says what it was for.
    Io {
        context: &'static str,
        source: io::Error,
    },
    /// The helper that reads a command's output gave no output stream.
    NoOutput,
    /// The helper that reads a command's output sent no valid header.
    BadOutputHeader,
    /// The command could not be stored on the target for the pane to source.
    WriteCommand { detail: String },
    /// tmux refused an operation on a pane; `detail` is its last word.
    Pane {
        op: PaneOp,
        pane: String,
        detail: String,
    },
    /// An earlier command still runs in the pane.
    PreviousRunning {
        command: String,
        age_secs: u64,
        pane: String,
    },
    /// Another program (not a shell) holds the pane.
    PaneBusy { pane: String, program: String },
}

/// What was being done to a pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaneOp {
    Type,
    Capture,
    SendKeys,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::BadDestination(spec) => {
                write!(f, "--ssh {spec:?}: expected user@host or user@host:port")
            }
            HostError::ControlDir(e) => write!(
                f,
                "cannot create a directory for the SSH control socket: {e}"
            ),
            HostError::NoSsh(e) => {
                write!(f, "cannot run ssh: {e} (is the OpenSSH client installed?)")
            }
            HostError::HostKey { host, detail } => write!(
                f,
                "SSH host key check failed for {host}: the key is unknown or has changed ({detail}); verify it with `ssh {host}` first"
            ),
            HostError::AuthRefused { host, detail } => write!(
                f,
                "SSH authentication to {host} was refused ({detail}); check the user and key (--ssh-option IdentityFile=...)"
            ),
            HostError::Unreachable { host, detail } => {
                write!(f, "cannot reach {host} over SSH: {detail}")
            }
            HostError::SshFailed { host, detail } => write!(f, "SSH to {host} failed: {detail}"),
            HostError::NoEngine => f.write_str(
                "--container needs podman or docker, and neither is installed (or name one with --container-engine)",
            ),
            HostError::Engine { engine, source } => write!(f, "cannot run {engine}: {source}"),
            HostError::ContainerDown {
                name,
                engine,
                detail,
            } => write!(
                f,
                "container {name} is not running or does not exist ({engine} says: {detail})"
            ),
            HostError::TmuxNotInstalled { actor } => write!(f, "tmux is not installed on {actor}"),
            HostError::TmuxStart { actor, source } => {
                write!(f, "cannot start tmux on {actor}: {source}")
            }
            HostError::InsideManagedPane { session, window } => write!(
                f,
                "buddy is running inside its own managed tmux pane ({session}:{window}), where it would type commands into itself; start it from another terminal or pane, or use --tmux OTHER-SESSION or --no-tmux"
            ),
            HostError::TmuxSetup {
                session,
                actor,
                detail,
            } => write!(f, "cannot set up tmux session {session} on {actor}: {detail}"),
            HostError::InvalidSessionName(name) => write!(
                f,
                "invalid tmux session name {name:?}: use letters, digits, `-` and `_`"
            ),
            HostError::InvalidPane(name) => write!(
                f,
                "invalid pane {name:?}: use a tmux target such as %3, session:window.pane or session:window"
            ),
            HostError::UnknownKey(key) => write!(
                f,
                "unknown key {key:?}: use names such as Enter, Escape, Tab, Up, C-c, C-d, M-x, F1, or send text with `text`"
            ),
            HostError::Io { context, source } => write!(f, "{context}: {source}"),
            HostError::NoOutput => f.write_str("cannot read the command's output"),
            HostError::BadOutputHeader => {
                f.write_str("cannot read the command's output: bad header")
            }
            HostError::WriteCommand { detail } => {
                write!(f, "cannot write the command to the target: {detail}")
            }
            HostError::Pane { op, pane, detail } => match op {
                PaneOp::Type => write!(f, "cannot type into tmux pane {pane}: {detail}"),
                PaneOp::Capture => write!(f, "cannot capture pane {pane}: {detail}"),
                PaneOp::SendKeys => write!(f, "cannot send keys to pane {pane}: {detail}"),
            },
            HostError::PreviousRunning {
                command,
                age_secs,
                pane,
            } => write!(
                f,
                "not run: the previous command (`{command}`, started {age_secs} s ago) is still running in tmux pane {pane}. Wait for it (capture-pane shows its progress), or stop it with send-keys C-c, then try again."
            ),
            HostError::PaneBusy { pane, program } => write!(
                f,
                "not run: tmux pane {pane} is busy with `{program}` (not a shell prompt). Use capture-pane to see it and send-keys to drive or quit it (for example C-c or q), then try again."
            ),
        }
    }
}

impl Error for HostError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            HostError::ControlDir(source)
            | HostError::NoSsh(source)
            | HostError::Engine { source, .. }
            | HostError::TmuxStart { source, .. }
            | HostError::Io { source, .. } => Some(source),
            HostError::BadDestination(_)
            | HostError::HostKey { .. }
            | HostError::AuthRefused { .. }
            | HostError::Unreachable { .. }
            | HostError::SshFailed { .. }
            | HostError::NoEngine
            | HostError::ContainerDown { .. }
            | HostError::TmuxNotInstalled { .. }
            | HostError::InsideManagedPane { .. }
            | HostError::TmuxSetup { .. }
            | HostError::InvalidSessionName(_)
            | HostError::InvalidPane(_)
            | HostError::UnknownKey(_)
            | HostError::NoOutput
            | HostError::BadOutputHeader
            | HostError::WriteCommand { .. }
            | HostError::Pane { .. }
            | HostError::PreviousRunning { .. }
            | HostError::PaneBusy { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
