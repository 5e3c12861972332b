//! The `/rewind` picker: the conversation's turns, newest first, then what
//! to take back to before the chosen one (the code, the conversation or
//! both), showing which files change and which shell commands ran since
//! (their effects stay). Pure state and text: the REPL feeds it keys and
//! sends the `Op::Rewind` it returns.

use crate::agent::protocol::TurnSummary;
use crate::text::visible;
use crate::tools::checkpoint::{is_undo, FileAction, FileRestore};
use crate::ui::session_picker::long_age;
use std::path::Path;

/// What can be restored, in the order offered: (key, label, code, conversation).
const CHOICES: [(char, &str, bool, bool); 3] = [
    ('b', "restore code and conversation", true, true),
    ('v', "restore conversation only", false, true),
    ('c', "restore code only", true, false),
];
/// An undo point (the files just before the last rewind) takes back files
/// only: the conversation it would go back to is the one in use.
const UNDO_CHOICES: [(char, &str, bool, bool); 1] = [(
    'c',
    "restore the code as it was just before the last rewind",
    true,
    false,
)];
/// Files and commands listed before "… and N more".
const LISTED: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Enter,
    /// Esc: back from the choice, out from the list.
    Back,
    /// Ctrl-C: out at once.
    Cancel,
    Char(char),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Stay,
    Cancelled,
    Rewind {
        turn: String,
        code: bool,
        conversation: bool,
    },
}

#[derive(Debug)]
pub struct RewindPicker {
    /// Newest first.
    turns: Vec<TurnSummary>,
    note: Option<String>,
    selected: usize,
    /// The choice list is open, with this choice selected.
    choice: Option<usize>,
}

impl RewindPicker {
    /// None when there is no turn to rewind to.
    pub fn new(mut turns: Vec<TurnSummary>, note: Option<String>) -> Option<RewindPicker> {
        if turns.is_empty() {
            return None;
        }
        turns.reverse();
        Some(RewindPicker {
            turns,
            note,
            selected: 0,
            choice: None,
        })
    }

    /// What the selected entry offers.
    fn choices(&self) -> &'static [(char, &'static str, bool, bool)] {
        if is_undo(&self.turns[self.selected].turn) {
            &UNDO_CHOICES
        } else {
            &CHOICES
        }
    }

    pub fn key(&mut self, key: Key) -> Outcome {
        let n = self.turns.len();
        let choices = self.choices();
        match (self.choice, key) {
            (_, Key::Cancel) | (None, Key::Back) => return Outcome::Cancelled,
            (Some(_), Key::Back) => self.choice = None,
            (None, Key::Up) => self.selected = (self.selected + n - 1) % n,
            (None, Key::Down) => self.selected = (self.selected + 1) % n,
            (None, Key::Enter) => self.choice = Some(0),
            (Some(c), Key::Up) => self.choice = Some((c + choices.len() - 1) % choices.len()),
            (Some(c), Key::Down) => self.choice = Some((c + 1) % choices.len()),
            (Some(c), Key::Enter) => return self.chosen(c),
            (Some(_), Key::Char(k)) => {
                if let Some(c) = choices.iter().position(|(key, ..)| *key == k) {
                    return self.chosen(c);
                }
            }
            (None, Key::Char(_)) => {}
        }
        Outcome::Stay
    }

    fn chosen(&self, c: usize) -> Outcome {
        let (_, _, code, conversation) = self.choices()[c];
        Outcome::Rewind {
            turn: self.turns[self.selected].turn.clone(),
            code,
            conversation,
        }
    }

    /// The picker as lines for the live area; `now` in Unix seconds, paths
    /// under `cwd` shown relative to it.
    pub fn render(&self, now: u64, cwd: &Path) -> String {
        match self.choice {
            None => self.render_turns(now),
            Some(c) => self.render_choice(c, now, cwd),
        }
    }

    fn render_turns(&self, now: u64) -> String {
        let mut out =
            String::from("rewind to before which turn? (↑/↓, Enter to choose, Esc to cancel)");
        for (i, t) in self.turns.iter().enumerate() {
            let mark = if i == self.selected { "›" } else { " " };
            let changes = self.changes(t);
            out.push_str(&format!(
                "\n  {mark} {:<12} {}  ({changes})",
                long_age(t.at, now),
                visible(&clip(&t.text, 60))
            ));
        }
        if let Some(note) = &self.note {
            out.push_str(&format!("\n  ({})", visible(note)));
        }
        out
    }

    /// `2 files, 1 command` for a turn's line.
    fn changes(&self, t: &TurnSummary) -> String {
        let files = t
            .files
            .iter()
            .filter(|f| f.action != FileAction::Unchanged)
            .count();
        let commands = t.commands.len();
        let changed = t.files.iter().filter(|f| f.changed_since).count();
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        let text = match (files, commands) {
            (0, 0) => "no file changes".into(),
            (f, 0) => plural(f, "file"),
            (0, c) => format!("no file changes, {}", plural(c, "command")),
            (f, c) => format!("{}, {}", plural(f, "file"), plural(c, "command")),
        };
        match changed {
            0 => text,
            n => format!("{text}; {n} changed since"),
        }
    }

    fn render_choice(&self, choice: usize, now: u64, cwd: &Path) -> String {
        let t = &self.turns[self.selected];
        let mut out = format!(
            "rewind to before \"{}\" ({})",
            visible(&clip(&t.text, 60)),
            long_age(t.at, now)
        );
        let changing: Vec<&FileRestore> = t
            .files
            .iter()
            .filter(|f| f.action != FileAction::Unchanged)
            .collect();
        if changing.is_empty() {
            out.push_str("\n  restoring the code changes no files");
        } else {
            out.push_str("\n  restoring the code changes these files:");
            for f in changing.iter().take(LISTED) {
                out.push_str(&format!("\n    {}", file_line(f, cwd)));
            }
            if changing.len() > LISTED {
                out.push_str(&format!("\n    … and {} more", changing.len() - LISTED));
            }
        }
        if let Some(note) = &self.note {
            out.push_str(&format!("\n  ({})", visible(note)));
        }
        if !t.commands.is_empty() {
            out.push_str(
                "\n  shell commands ran since; their effects cannot be rewound and stay as they are:",
            );
            for c in t.commands.iter().take(LISTED) {
                out.push_str(&format!("\n    $ {}", visible(c)));
            }
        }
        if changing.iter().any(|f| f.changed_since) {
            out.push_str(
                "\n  (changed since: not what buddy last wrote there; what it holds now is kept, and /rewind can undo this)",
            );
        }
        for (i, (key, label, ..)) in self.choices().iter().enumerate() {
            let mark = if i == choice { "›" } else { " " };
            out.push_str(&format!("\n  {mark} {key}  {label}"));
        }
        out.push_str("\n  (↑/↓ or the letter, Enter to rewind, Esc to go back)");
        out
    }
}

/// One file of a rewind, as a person reads it.
pub fn file_line(f: &FileRestore, cwd: &Path) -> String {
    let path = Path::new(&f.path);
    let shown = path.strip_prefix(cwd).unwrap_or(path).display().to_string();
    let shown = visible(&shown);
    let line = match &f.action {
        FileAction::Restore { bytes } => format!("restore {shown} ({bytes} bytes)"),
        FileAction::Delete => format!("delete  {shown} (it did not exist before)"),
        FileAction::Unchanged => format!("same    {shown}"),
        FileAction::NotKept { reason } => {
            format!("cannot restore {shown}: {}", visible(reason))
        }
        FileAction::Failed { reason } => format!("FAILED  {shown}: {}", visible(reason)),
    };
    if f.changed_since {
        format!("{line} — changed since buddy wrote it")
    } else {
        line
    }
}

fn clip(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(chars - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, text: &str, files: Vec<FileRestore>) -> TurnSummary {
        TurnSummary {
            turn: id.into(),
            text: text.into(),
            at: 1_000,
            files,
            commands: vec!["cargo build".into()],
        }
    }

    #[test]
    fn picks_a_turn_then_what_to_restore() {
        let files = vec![FileRestore::new(
            "/p/a.txt".into(),
            FileAction::Restore { bytes: 3 },
        )];
        let mut p = RewindPicker::new(
            vec![turn("t1", "first", vec![]), turn("t2", "second", files)],
            None,
        )
        .unwrap();
        let view = p.render(1_200, Path::new("/p"));
        // Newest first, with what it changed.
        let second = view.find("second").unwrap();
        assert!(second < view.find("first").unwrap(), "{view}");
        assert!(view.contains("1 file, 1 command"), "{view}");
        assert_eq!(p.key(Key::Enter), Outcome::Stay);
        let view = p.render(1_200, Path::new("/p"));
        assert!(view.contains("restore a.txt (3 bytes)"), "{view}");
        assert!(view.contains("cannot be rewound"), "{view}");
        assert!(view.contains("$ cargo build"), "{view}");
        assert_eq!(
            p.key(Key::Char('v')),
            Outcome::Rewind {
                turn: "t2".into(),
                code: false,
                conversation: true
            }
        );
        // Esc goes back, then out.
        assert_eq!(p.key(Key::Back), Outcome::Stay);
        assert_eq!(p.key(Key::Down), Outcome::Stay);
        assert_eq!(p.key(Key::Enter), Outcome::Stay);
        assert_eq!(
            p.key(Key::Enter),
            Outcome::Rewind {
                turn: "t1".into(),
                code: true,
                conversation: true
            }
        );
        assert_eq!(p.key(Key::Back), Outcome::Stay);
        assert_eq!(p.key(Key::Back), Outcome::Cancelled);
        assert!(RewindPicker::new(Vec::new(), None).is_none());
    }
}
