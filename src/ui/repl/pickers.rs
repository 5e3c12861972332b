//! The arrow-key pickers as the REPL drives them: bare `/model`'s list of
//! profiles and the server's models (`Picker`, here), and `/rewind`'s turns
//! (its state and text are `rewind`'s). Keys move and choose; a choice
//! becomes an op (`SwitchModel`, `Rewind`); the agent's answer to a rewind
//! is worded here.

use super::commands::Slash;
use super::{rewind, ModelsError, Repl};
use crate::agent::protocol::Op;
use crossterm::event::Event;

/// The arrow-key list bare `/model` opens: the profiles, then the models the
/// current profile's server offers once they arrive.
pub(super) struct Picker {
    profiles: Vec<String>,
    /// The server's model ids; `None` while they are being fetched.
    models: Option<Vec<String>>,
    /// Why the server's models are not listed.
    note: Option<String>,
    /// The profile and model in use, to mark the current model.
    profile: String,
    model: String,
    selected: usize,
}

/// What Enter on a picker line asks for.
enum Pick {
    Profile(usize),
    Model(String),
}

impl Picker {
    fn len(&self) -> usize {
        self.profiles.len() + self.models.as_ref().map_or(0, Vec::len)
    }

    fn pick(&self) -> Pick {
        match self.selected.checked_sub(self.profiles.len()) {
            None => Pick::Profile(self.selected + 1),
            Some(i) => Pick::Model(
                self.models
                    .as_ref()
                    .map(|m| m[i].clone())
                    .unwrap_or_default(),
            ),
        }
    }

    fn render(&self) -> String {
        let mut out = String::from("pick a model profile (↑/↓, Enter to switch, Esc to cancel)");
        for (i, item) in self.profiles.iter().enumerate() {
            let mark = if i == self.selected { "›" } else { " " };
            out.push_str(&format!("\n  {mark} {}  {item}", i + 1));
        }
        match (&self.models, &self.note) {
            (_, Some(note)) => out.push_str(&format!("\n  ({note})")),
            (None, None) => out.push_str("\n  (asking the server for its models…)"),
            (Some(models), None) if models.is_empty() => {
                out.push_str("\n  (the server lists no models)")
            }
            (Some(models), None) => {
                out.push_str(&format!("\n  models of profile {}:", self.profile));
                for (i, id) in models.iter().enumerate() {
                    let n = self.profiles.len() + i;
                    let mark = if n == self.selected { "›" } else { " " };
                    let using = if *id == self.model { "  (in use)" } else { "" };
                    out.push_str(&format!("\n  {mark}    {id}{using}"));
                }
            }
        }
        out
    }
}

impl Repl<'_> {
    /// Bare `/model`: the picker opens on the profiles at once; the
    /// server's models join it when they arrive (`on_model_list`).
    pub(super) fn open_model_picker(&mut self) {
        let profiles = self.opts.profiles.clone();
        if profiles.is_empty() {
            self.say("no model profiles are configured");
        } else {
            let selected = profiles
                .iter()
                .position(|p| *p == self.profile)
                .unwrap_or(0);
            let picker = Picker {
                profiles,
                models: None,
                note: None,
                profile: self.profile.clone(),
                model: self.model.clone(),
                selected,
            };
            // The list comes in the background; the picker works meanwhile.
            let fetch = self.services.server_models(&self.profile);
            self.model_list = Some(tokio::spawn(fetch));
            self.editor.set_live(Some(picker.render()));
            self.picker = Some(picker);
            self.redraw();
        }
    }

    pub(super) fn on_picker_input(&mut self, ev: &Event) {
        use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
        let Event::Key(key) = ev else {
            return;
        };
        if key.kind == KeyEventKind::Release {
            return;
        }
        let Some(picker) = self.picker.as_mut() else {
            return;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let n = picker.len();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => picker.selected = (picker.selected + n - 1) % n,
            KeyCode::Char('p') if ctrl => picker.selected = (picker.selected + n - 1) % n,
            KeyCode::Down | KeyCode::Char('j') => picker.selected = (picker.selected + 1) % n,
            KeyCode::Char('n') if ctrl => picker.selected = (picker.selected + 1) % n,
            KeyCode::Enter => {
                let pick = picker.pick();
                self.close_picker();
                match pick {
                    Pick::Profile(n) => {
                        self.on_command(Slash::Model(Some(n.to_string())));
                    }
                    // A model id keeps the profile (the switcher's rule for
                    // anything that is not a profile).
                    Pick::Model(id) => {
                        self.send(Op::SwitchModel { choice: id });
                    }
                }
                return;
            }
            KeyCode::Esc | KeyCode::Char('q') => {
                self.close_picker();
                self.say("model unchanged");
                return;
            }
            KeyCode::Char('c') if ctrl => {
                self.close_picker();
                self.say("model unchanged");
                return;
            }
            _ => return,
        }
        let view = picker.render();
        self.editor.set_live(Some(view));
        self.redraw();
    }

    fn close_picker(&mut self) {
        self.picker = None;
        self.editor.set_live(None);
        if let Some(fetch) = self.model_list.take() {
            fetch.abort();
        }
    }

    /// The server's models arrived: show them in the picker, if still open.
    pub(super) fn on_model_list(
        &mut self,
        listed: Result<Result<Vec<String>, ModelsError>, tokio::task::JoinError>,
    ) {
        let Some(picker) = self.picker.as_mut() else {
            return;
        };
        match listed {
            Ok(Ok(models)) => picker.models = Some(models),
            Ok(Err(e)) => picker.note = Some(format!("cannot list the server's models: {e}")),
            Err(_) => picker.note = Some("cannot list the server's models".into()),
        }
        let view = picker.render();
        self.editor.set_live(Some(view));
        self.redraw();
    }

    pub(super) fn on_rewind_input(&mut self, ev: &Event) {
        use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
        let Event::Key(key) = ev else {
            return;
        };
        if key.kind == KeyEventKind::Release {
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let k = match key.code {
            KeyCode::Up | KeyCode::Char('k') => rewind::Key::Up,
            KeyCode::Char('p') if ctrl => rewind::Key::Up,
            KeyCode::Down | KeyCode::Char('j') => rewind::Key::Down,
            KeyCode::Char('n') if ctrl => rewind::Key::Down,
            KeyCode::Enter => rewind::Key::Enter,
            KeyCode::Esc | KeyCode::Char('q') => rewind::Key::Back,
            KeyCode::Char('c') if ctrl => rewind::Key::Cancel,
            KeyCode::Char(c) => rewind::Key::Char(c),
            _ => return,
        };
        let Some(picker) = self.rewind.as_mut() else {
            return;
        };
        match picker.key(k) {
            rewind::Outcome::Stay => {
                let view = picker.render(crate::clock::now_unix(), &self.cwd);
                self.editor.set_live(Some(view));
                self.redraw();
            }
            rewind::Outcome::Cancelled => {
                self.rewind = None;
                self.editor.set_live(None);
                self.say("nothing rewound");
            }
            rewind::Outcome::Rewind {
                turn,
                code,
                conversation,
            } => {
                self.rewind = None;
                self.editor.set_live(None);
                self.redraw();
                self.send(Op::Rewind {
                    turn,
                    code,
                    conversation,
                });
            }
        }
    }

    /// The agent's reply to a rewind, as the user reads it.
    pub(super) fn on_rewound(
        &mut self,
        files: Option<Vec<crate::tools::checkpoint::FileRestore>>,
        removed: usize,
        prompt: Option<String>,
        commands: Vec<String>,
    ) {
        use crate::tools::checkpoint::FileAction;
        let st = self.opts.style;
        let mut lines = Vec::new();
        if let Some(files) = &files {
            let changed: Vec<_> = files
                .iter()
                .filter(|f| f.action != FileAction::Unchanged)
                .collect();
            if changed.is_empty() {
                lines.push("code: no files needed restoring".to_string());
            } else {
                lines.push(format!("code: {} file(s) rewound", changed.len()));
                let took_back = changed
                    .iter()
                    .any(|f| matches!(f.action, FileAction::Restore { .. } | FileAction::Delete));
                for f in changed {
                    let line = format!("  {}", rewind::file_line(f, &self.cwd));
                    lines.push(match f.action {
                        FileAction::NotKept { .. } | FileAction::Failed { .. } => st.warning(&line),
                        _ => line,
                    });
                }
                if took_back {
                    lines.push(
                        "  (what they held before is kept: /rewind lists \"undo the last rewind\")"
                            .to_string(),
                    );
                }
            }
        }
        if prompt.is_some() {
            lines.push(format!(
                "conversation: back to before that turn ({removed} messages taken out; the session file records the rewind)"
            ));
        }
        if !commands.is_empty() {
            lines.push(st.warning(&format!(
                "{} shell command(s) ran since that turn; their effects were not rewound",
                commands.len()
            )));
        }
        self.say(&lines.join("\n"));
        // The prompt comes back for editing, unless something is typed.
        if let Some(p) = prompt.filter(|_| self.editor.buffer.text().is_empty()) {
            self.editor.buffer.set(&p);
            self.redraw();
        }
    }
}
