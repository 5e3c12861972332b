//! Getting the user back to the REPL when it wants them: a run that took
//! longer than `[ui] notify_after` has ended, or an approval waits. The ways:
//! an OSC 9 desktop notification (`ESC ] 9 ; text BEL`) on the terminals known
//! to show one (iTerm2, WezTerm, Ghostty, kitty), wrapped for tmux's
//! passthrough when buddy runs inside tmux in one of those; a bell on any
//! other terminal; or, with `[ui] notify = ["program", …]`, that program run
//! with a JSON summary appended as its last argument (as Codex's `notify`
//! is). This module picks the way from the environment buddy started in,
//! builds the sequences and the JSON, and runs the program (not through a
//! shell, its output discarded, killed past `COMMAND_TIME_LIMIT`). When to
//! notify is the REPL's choice; exec, serve and ACP never do.

use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A notification's text is cut to this many characters: a desktop banner
/// shows a line or two, and a terminal's OSC buffer is not unbounded.
pub const MAX_MESSAGE_CHARS: usize = 200;

/// A `notify` program still running after this is killed: it has no reason
/// to take long, and one that hangs must not pile up.
pub const COMMAND_TIME_LIMIT: Duration = Duration::from_secs(10);

/// At most this many `notify` programs run at once; a notification past it
/// is dropped (the user is being told already).
pub const MAX_RUNNING_COMMANDS: usize = 4;

/// What the REPL tells the user about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A run ended after `notify_after` or longer.
    RunFinished,
    /// A tool call waits for the user's approval.
    ApprovalRequested,
}

impl Kind {
    /// The `type` of the JSON a `notify` program gets.
    pub fn name(self) -> &'static str {
        match self {
            Kind::RunFinished => "run-finished",
            Kind::ApprovalRequested => "approval-requested",
        }
    }
}

/// How the terminal is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminal {
    /// OSC 9, straight to the terminal.
    Osc9,
    /// OSC 9 inside tmux's passthrough, for the terminal outside tmux.
    Osc9ThroughTmux,
    /// A bell: every terminal has one.
    Bell,
}

impl Terminal {
    /// The way for the terminal buddy was started in, from its environment
    /// (`env`). Inside tmux (which sets `TERM_PROGRAM=tmux`, or `TMUX`), the
    /// terminal outside is known by the variables it sets for its shells,
    /// which tmux passes on: `LC_TERMINAL`/`ITERM_SESSION_ID` (iTerm2),
    /// `WEZTERM_PANE`, `GHOSTTY_RESOURCES_DIR`, `KITTY_WINDOW_ID`.
    pub fn detect(env: &dyn Fn(&str) -> Option<String>) -> Terminal {
        let is = |name: &str, value: &str| env(name).as_deref() == Some(value);
        let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
        let in_tmux = is("TERM_PROGRAM", "tmux") || set("TMUX");
        if in_tmux {
            let outer = is("LC_TERMINAL", "iTerm2")
                || set("ITERM_SESSION_ID")
                || set("WEZTERM_PANE")
                || set("GHOSTTY_RESOURCES_DIR")
                || set("KITTY_WINDOW_ID");
            return if outer {
                Terminal::Osc9ThroughTmux
            } else {
                Terminal::Bell
            };
        }
        let known = ["iTerm.app", "WezTerm", "ghostty"]
            .iter()
            .any(|p| is("TERM_PROGRAM", p))
            || is("TERM", "xterm-kitty");
        if known {
            Terminal::Osc9
        } else {
            Terminal::Bell
        }
    }

    /// What to write to the terminal to show `message`.
    pub fn sequence(self, message: &str) -> String {
        let osc = format!("\x1b]9;{}\x07", safe_text(message));
        match self {
            Terminal::Osc9 => osc,
            // tmux hands on what is between `ESC P tmux;` and `ESC \`, with
            // every ESC inside doubled.
            Terminal::Osc9ThroughTmux => {
                format!("\x1bPtmux;{}\x1b\\", osc.replace('\x1b', "\x1b\x1b"))
            }
            Terminal::Bell => "\x07".into(),
        }
    }
}

/// `text` fit for a terminal escape sequence or a banner: control characters
/// (which could end the sequence early or start another) become spaces, runs
/// of spaces one, and it is cut to `MAX_MESSAGE_CHARS` characters.
pub fn safe_text(text: &str) -> String {
    let mut out = String::new();
    let mut count = 0;
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        if count == MAX_MESSAGE_CHARS {
            break;
        }
        out.push(c);
        count += 1;
    }
    out.trim_end().to_string()
}

/// The JSON a `notify` program gets as its last argument.
pub fn payload(kind: Kind, session: Option<&str>, message: &str, duration: Duration) -> String {
    json!({
        "type": kind.name(),
        "session": session,
        "message": safe_text(message),
        "duration_ms": u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
    })
    .to_string()
}

/// The REPL's notification settings, resolved once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyOptions {
    /// A run that took at least this long notifies when it ends.
    pub after: Duration,
    /// `[ui] notify`: the program and its arguments, instead of the terminal.
    pub command: Option<Vec<String>>,
    /// How the terminal is told when there is no command.
    pub terminal: Terminal,
}

impl Default for NotifyOptions {
    fn default() -> Self {
        NotifyOptions {
            after: Duration::from_secs(10),
            command: None,
            terminal: Terminal::Bell,
        }
    }
}

/// Sends the REPL's notifications; owns the `notify` programs it started,
/// which are killed when it is dropped (with the REPL).
pub struct Notifier {
    opts: NotifyOptions,
    running: Vec<JoinHandle<()>>,
}

impl Notifier {
    pub fn new(opts: NotifyOptions) -> Notifier {
        Notifier {
            opts,
            running: Vec::new(),
        }
    }

    /// Whether a run that took `took` ends with a notification.
    pub fn run_is_long(&self, took: Duration) -> bool {
        took >= self.opts.after
    }

    /// Notifies: starts the `notify` program, or gives back what to write
    /// to the terminal. Needs a tokio runtime for the program.
    pub fn notify(
        &mut self,
        kind: Kind,
        session: Option<&str>,
        message: &str,
        duration: Duration,
    ) -> Option<String> {
        let Some(command) = &self.opts.command else {
            return Some(self.opts.terminal.sequence(message));
        };
        self.running.retain(|h| !h.is_finished());
        if self.running.len() >= MAX_RUNNING_COMMANDS {
            return None;
        }
        // Never empty: the config requires a program.
        let (program, args) = command.split_first()?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .arg(payload(kind, session, message, duration))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        crate::host::scrub(&mut cmd);
        // A program that cannot start is not worth a line in the middle of
        // the conversation: the notification is a courtesy.
        let Ok(mut child) = cmd.spawn() else {
            return None;
        };
        self.running.push(tokio::spawn(async move {
            // Past the limit, dropping the child kills it (kill_on_drop).
            let _ = tokio::time::timeout(COMMAND_TIME_LIMIT, child.wait()).await;
        }));
        None
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        for h in &self.running {
            h.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    #[test]
    fn known_terminals_get_osc9_and_others_a_bell() {
        for pairs in [
            &[("TERM_PROGRAM", "iTerm.app")][..],
            &[("TERM_PROGRAM", "WezTerm")],
            &[("TERM_PROGRAM", "ghostty")],
            &[("TERM", "xterm-kitty")],
        ] {
            assert_eq!(Terminal::detect(&env(pairs)), Terminal::Osc9, "{pairs:?}");
        }
        for pairs in [
            &[][..],
            &[("TERM_PROGRAM", "Apple_Terminal")],
            &[("TERM_PROGRAM", "vscode"), ("TERM", "xterm-256color")],
            &[("TERM", "xterm-kitty-not")],
            // Markers of a terminal outside tmux mean nothing without tmux.
            &[("KITTY_WINDOW_ID", "1"), ("TERM", "xterm-256color")],
        ] {
            assert_eq!(Terminal::detect(&env(pairs)), Terminal::Bell, "{pairs:?}");
        }
    }

    #[test]
    fn inside_tmux_only_a_known_outer_terminal_gets_passthrough() {
        let tmux = [
            ("TERM_PROGRAM", "tmux"),
            ("TMUX", "/tmp/tmux-1/default,1,0"),
        ];
        for marker in [
            ("LC_TERMINAL", "iTerm2"),
            ("ITERM_SESSION_ID", "w0t0p0"),
            ("WEZTERM_PANE", "3"),
            ("GHOSTTY_RESOURCES_DIR", "/usr/share/ghostty"),
            ("KITTY_WINDOW_ID", "1"),
        ] {
            let mut pairs = tmux.to_vec();
            pairs.push(marker);
            assert_eq!(
                Terminal::detect(&env(&pairs)),
                Terminal::Osc9ThroughTmux,
                "{marker:?}"
            );
        }
        assert_eq!(Terminal::detect(&env(&tmux)), Terminal::Bell);
        // TMUX alone says tmux too; an empty marker is no marker.
        assert_eq!(
            Terminal::detect(&env(&[("TMUX", "x"), ("WEZTERM_PANE", "1")])),
            Terminal::Osc9ThroughTmux
        );
        assert_eq!(
            Terminal::detect(&env(&[("TMUX", "x"), ("WEZTERM_PANE", "")])),
            Terminal::Bell
        );
    }

    #[test]
    fn sequences_are_osc9_tmux_wrapped_or_a_bell() {
        assert_eq!(
            Terminal::Osc9.sequence("buddy: done"),
            "\x1b]9;buddy: done\x07"
        );
        assert_eq!(
            Terminal::Osc9ThroughTmux.sequence("buddy: done"),
            "\x1bPtmux;\x1b\x1b]9;buddy: done\x07\x1b\\"
        );
        assert_eq!(Terminal::Bell.sequence("buddy: done"), "\x07");
    }

    #[test]
    fn message_text_cannot_break_out_of_the_sequence() {
        let hostile = "done\x07\x1b]0;title\x1b\\\u{9b}2J\nnext\tline";
        let seq = Terminal::Osc9.sequence(hostile);
        let inner = &seq["\x1b]9;".len()..seq.len() - 1];
        assert!(!inner.chars().any(char::is_control), "{inner:?}");
        assert_eq!(inner, "done ]0;title \\ 2J next line");
        let wrapped = Terminal::Osc9ThroughTmux.sequence(hostile);
        // Only the two ESCs of the OSC itself (doubled) and the closing one.
        assert_eq!(wrapped.matches('\x1b').count(), 4, "{wrapped:?}");
        let long = "é".repeat(MAX_MESSAGE_CHARS * 2);
        assert_eq!(safe_text(&long).chars().count(), MAX_MESSAGE_CHARS);
        assert_eq!(safe_text("  a \n\n b  "), "a b");
    }

    #[test]
    fn the_payload_is_codex_shaped_json() {
        let p = payload(
            Kind::RunFinished,
            Some("20261201-abc"),
            "task 1 done\x07",
            Duration::from_millis(12_345),
        );
        let v: serde_json::Value = serde_json::from_str(&p).unwrap();
        assert_eq!(
            v,
            json!({"type": "run-finished", "session": "20261201-abc",
                   "message": "task 1 done", "duration_ms": 12345})
        );
        let v: serde_json::Value = serde_json::from_str(&payload(
            Kind::ApprovalRequested,
            None,
            "approve?",
            Duration::ZERO,
        ))
        .unwrap();
        assert_eq!(v["type"], "approval-requested");
        assert!(v["session"].is_null());
    }

    #[test]
    fn without_a_command_the_terminal_is_told_and_long_runs_are_judged() {
        let mut n = Notifier::new(NotifyOptions {
            after: Duration::from_secs(10),
            command: None,
            terminal: Terminal::Osc9,
        });
        assert!(!n.run_is_long(Duration::from_millis(9_999)));
        assert!(n.run_is_long(Duration::from_secs(10)));
        assert_eq!(
            n.notify(Kind::RunFinished, None, "hi", Duration::ZERO)
                .as_deref(),
            Some("\x1b]9;hi\x07")
        );
    }
}
