//! A server's question on the input line (`ElicitationRequested`): the
//! message printed above, then one prompt per field of its form, each with
//! its title, type, default and choices. A line that does not fit the field
//! is refused with the reason and the field asked again; an empty line
//! takes the default. After the last field the answer goes to the agent
//! (`Op::Elicitation`). Esc declines (the call goes on without an answer),
//! Ctrl-C cancels (the server is told to stop what it asked for); neither
//! interrupts the run. A URL question prints the page and asks for Enter
//! once the user has been there. The question's rules are `tools::elicitation`'s.

use super::Repl;
use crate::agent::protocol::{
    ElicitationAction, ElicitationQuestion, ElicitedBy, Event as AgentEvent, EventKind, Op,
};
use crate::text::visible;
use crate::tools::elicitation::{Field, Kind, Mode};
use crossterm::event::Event;
use serde_json::Map;

pub(super) struct PendingForm {
    question: ElicitationQuestion,
    /// The field being asked (its index); past the last for a URL question.
    at: usize,
    content: Map<String, serde_json::Value>,
    /// The input that was being typed, given back afterwards.
    stashed: String,
}

impl PendingForm {
    pub(super) fn stashed(&self) -> &str {
        &self.stashed
    }
}

impl Repl<'_> {
    /// The question events: one to ask, or the end of one (answered here,
    /// timed out, or the run ended).
    pub(super) fn on_question_event(&mut self, ev: AgentEvent) {
        match ev.kind {
            EventKind::ElicitationRequested(q) => self.ask_question(q),
            EventKind::ElicitationDecided { id, by, reason, .. } => {
                if by == ElicitedBy::User {
                    return;
                }
                if self.form.as_ref().is_some_and(|f| f.question.id == id) {
                    if let Some(f) = self.form.take() {
                        self.restore_prompt(&f.stashed);
                    }
                }
                let why = match (by, reason) {
                    (_, Some(r)) => visible(&r).into_owned(),
                    (ElicitedBy::Interrupted, None) => "the task ended".into(),
                    _ => String::new(),
                };
                let st = self.opts.style;
                self.say(&st.warning(&format!("the server's question was withdrawn: {why}")));
            }
            _ => {}
        }
    }

    fn ask_question(&mut self, question: ElicitationQuestion) {
        let st = self.opts.style;
        self.flush_partial();
        self.set_state("awaiting your answer");
        let who = match &question.subagent {
            Some(child) => format!("[{}] MCP server `{}`", child, question.server),
            None => format!("MCP server `{}`", question.server),
        };
        self.say(&format!(
            "{} {}",
            st.warning(&format!("{who} asks:")),
            question.message
        ));
        if let Mode::Url { url } = &question.mode {
            self.say(&format!("  open: {}", st.accent(url)));
        }
        let stashed = self.editor.buffer.text();
        self.editor.buffer.clear();
        self.form = Some(PendingForm {
            question,
            at: 0,
            content: Map::new(),
            stashed,
        });
        self.next_field();
        let took = self
            .task
            .as_ref()
            .map_or(std::time::Duration::ZERO, |t| t.started.elapsed());
        self.notify(
            super::notify::Kind::ApprovalRequested,
            &format!("buddy: {who} asks a question"),
            took,
        );
    }

    /// Puts the prompt of the field due, or sends the answer when none is
    /// left.
    fn next_field(&mut self) {
        let st = self.opts.style;
        let Some(f) = self.form.as_ref() else {
            return;
        };
        let (prompt, field) = match &f.question.mode {
            Mode::Url { .. } => (
                Some(st.warning("Enter once done there (Esc declines): ")),
                None,
            ),
            Mode::Form { fields } => (
                fields.get(f.at).map(|field| field_prompt(field, st)),
                fields.get(f.at).cloned(),
            ),
        };
        match prompt {
            Some(p) => {
                if let Some(field) = field {
                    if let Kind::Choice { choices } | Kind::Choices { choices, .. } = &field.kind {
                        let lines: Vec<String> = choices
                            .iter()
                            .enumerate()
                            .map(|(i, c)| {
                                format!("  {}) {}", i + 1, c.title.as_deref().unwrap_or(&c.value))
                            })
                            .collect();
                        self.say(&st.dim(&lines.join("\n")));
                    }
                    if let Some(d) = &field.description {
                        self.say(&st.dim(&format!("  {d}")));
                    }
                }
                self.editor.set_prompt(p);
                self.update_status();
                self.redraw();
            }
            None => {
                if let Some(f) = self.form.take() {
                    let content = f.content;
                    self.end_form(
                        f.question,
                        &f.stashed,
                        ElicitationAction::Accept { content },
                    );
                }
            }
        }
    }

    /// A line typed while a question waits: the answer to the field due.
    pub(super) fn form_line(&mut self, mut f: PendingForm, line: &str) {
        let Some(field) = f.question.fields().get(f.at).cloned() else {
            // A URL question: Enter says the user went there.
            let content = Map::new();
            self.end_form(
                f.question,
                &f.stashed,
                ElicitationAction::Accept { content },
            );
            return;
        };
        match field.read(line) {
            Ok(value) => {
                if let Some(v) = value {
                    f.content.insert(field.name.clone(), v);
                }
                f.at += 1;
                self.form = Some(f);
                self.next_field();
            }
            Err(e) => {
                self.form = Some(f);
                let st = self.opts.style;
                self.say(&st.error(&format!("{}: {e}", field.label())));
                self.redraw();
            }
        }
    }

    /// Esc declines and Ctrl-C cancels a pending question; true when the
    /// key was used here.
    pub(super) fn form_key(&mut self, ev: &Event) -> bool {
        use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
        let Event::Key(key) = ev else {
            return false;
        };
        if key.kind == KeyEventKind::Release || self.form.is_none() {
            return false;
        }
        let action = match key.code {
            KeyCode::Esc if !self.editor.menu_open() => ElicitationAction::Decline,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                ElicitationAction::Cancel
            }
            _ => return false,
        };
        if let Some(f) = self.form.take() {
            self.end_form(f.question, &f.stashed, action);
        }
        true
    }

    fn end_form(&mut self, q: ElicitationQuestion, stashed: &str, answer: ElicitationAction) {
        let said = match &answer {
            ElicitationAction::Accept { .. } => "answered",
            ElicitationAction::Decline => "declined",
            ElicitationAction::Cancel => "cancelled",
        };
        self.send(Op::Elicitation {
            id: q.id,
            answer: Box::new(answer),
            reason: None,
        });
        self.restore_prompt(stashed);
        self.set_state("running");
        let st = self.opts.style;
        self.say(&st.dim(&format!("{said}: the question of `{}`", q.server)));
    }

    /// The status line's hint while a question waits.
    pub(super) fn form_hint(&self) -> Option<&'static str> {
        self.form
            .as_ref()
            .map(|_| " · Enter answers, Esc declines, Ctrl-C cancels the question")
    }
}

/// `Title (type, default X): `
fn field_prompt(field: &Field, st: crate::ui::style::Style) -> String {
    let mut about = vec![match &field.kind {
        Kind::Choice { .. } => "a number or a name".to_string(),
        Kind::Choices { .. } => "numbers or names, by commas".to_string(),
        _ => field.type_name(),
    }];
    if field.required {
        about.push("required".into());
    }
    if let Some(d) = &field.default {
        let shown = match d {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Bool(true) => "yes".into(),
            serde_json::Value::Bool(false) => "no".into(),
            other => other.to_string(),
        };
        about.push(format!("Enter for {}", crate::text::one_line(&shown, 40)));
    }
    format!(
        "{} {} ",
        st.accent(field.label()),
        st.dim(&format!("({}):", about.join(", ")))
    )
}
