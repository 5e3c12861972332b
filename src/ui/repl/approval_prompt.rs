//! A pending approval on the input line: the question that replaces the
//! prompt when the agent asks (`ApprovalRequested`), answered by one key
//! (`y`, `n`, `a`, `r`, `e`) or a typed word, a reason typed after `e`, and
//! the decisions made without the user (policy, allow list, denylist,
//! interrupted) shown as they come. The policy and `/approve` are
//! `approval`'s.

use super::approval::describe;
use super::Repl;
use crate::agent::protocol::{
    ApprovalQuestion, DecidedBy, Decision, Event as AgentEvent, EventKind, Op,
};
use crate::text::visible;
use crate::ui::Choice;
use crossterm::event::Event;

pub(super) struct PendingApproval {
    pub(super) call_id: String,
    pub(super) tool: String,
    pub(super) command: String,
    /// The prefix "always" would allow, when offered.
    pub(super) always: Option<String>,
    /// The question with its keys, shown again when a reason is abandoned.
    pub(super) prompt: String,
    /// `e` was pressed: the input line is the reason for the model.
    pub(super) explaining: bool,
    /// The input that was being typed, given back afterwards.
    pub(super) stashed: String,
}

impl Repl<'_> {
    /// A key for a pending approval (or the tail of a word it answered):
    /// `y`, `n`, `a`, `e` answer at once on an empty line; Esc while typing a
    /// reason goes back to the question. True when the key was used here.
    pub(super) fn approval_key(&mut self, ev: &Event) -> bool {
        use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
        let Event::Key(key) = ev else {
            return false;
        };
        if key.kind == KeyEventKind::Release {
            return false;
        }
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        if let Some(rest) = self.swallow.take() {
            match key.code {
                KeyCode::Enter => return true,
                KeyCode::Char(c) if plain && rest.starts_with(c.to_ascii_lowercase()) => {
                    self.swallow = Some(rest[c.len_utf8()..].to_string());
                    return true;
                }
                _ => {}
            }
        }
        let Some(p) = self.approval.as_mut() else {
            return false;
        };
        if p.explaining {
            if key.code == KeyCode::Esc {
                p.explaining = false;
                let prompt = p.prompt.clone();
                self.editor.buffer.clear();
                self.editor.set_prompt(prompt);
                self.update_status();
                self.redraw();
                return true;
            }
            return false;
        }
        let KeyCode::Char(c) = key.code else {
            return false;
        };
        if !plain || !self.editor.buffer.text().is_empty() {
            return false;
        }
        let Some(choice) = Choice::parse(&c.to_string()) else {
            return false;
        };
        self.choose(choice);
        self.swallow = match choice {
            Choice::Yes => Some("es".into()),
            Choice::No => Some("o".into()),
            Choice::Always => Some("lways".into()),
            Choice::Remember => Some("emember".into()),
            // What follows `e` is the reason itself.
            Choice::Explain => None,
        };
        true
    }

    /// A line submitted while a question waits: the reason after `e`, or a
    /// typed answer (`yes`, `no`, …).
    pub(super) fn answer_line(&mut self, p: PendingApproval, line: &str) {
        if p.explaining {
            let reason = line.trim().to_string();
            self.answer(
                p,
                Decision::Deny {
                    reason: Some(reason),
                },
            );
            return;
        }
        self.approval = Some(p);
        match Choice::parse(line) {
            Some(choice) => self.choose(choice),
            None => self.say(
                "answer y (yes), n (no), a (always), r (remember always) or e (explain why not)",
            ),
        }
    }

    /// Carries out an answer to the pending approval.
    pub(super) fn choose(&mut self, choice: Choice) {
        let Some(mut p) = self.approval.take() else {
            return;
        };
        match choice {
            Choice::Yes => self.answer(p, Decision::Approve),
            Choice::No => self.answer(p, Decision::Deny { reason: None }),
            Choice::Always if p.always.is_some() => self.answer(p, Decision::ApproveAlways),
            Choice::Remember if p.always.is_some() => {
                let prefix = p.always.clone().unwrap_or_default();
                self.answer(p, Decision::ApproveAlways);
                match self.services.remember(&prefix) {
                    Ok(file) => self.say(&self.opts.style.dim(&format!(
                        "remembered always `{}` in {}",
                        visible(&prefix),
                        file.display()
                    ))),
                    Err(e) => self.say_error(&visible(&e.to_string())),
                }
            }
            Choice::Always | Choice::Remember => {
                self.approval = Some(p);
                self.say("\"always\" is offered only for a simple shell command; answer y, n or e");
            }
            Choice::Explain => {
                p.explaining = true;
                self.editor.buffer.clear();
                self.editor
                    .set_prompt(self.opts.style.warning("reason for the model: "));
                self.approval = Some(p);
                self.update_status();
                self.redraw();
            }
        }
    }

    pub(super) fn answer(&mut self, p: PendingApproval, decision: Decision) {
        let command = visible(&p.command);
        let verdict = match (&decision, &p.always) {
            (Decision::Approve, _) => format!("approved: {command}"),
            (Decision::ApproveAlways, Some(prefix)) => format!(
                "approved, and always `{}` from now on: {command}",
                visible(prefix)
            ),
            (Decision::ApproveAlways, None) => format!("approved: {command}"),
            (Decision::Deny { reason: Some(r) }, _) if !r.trim().is_empty() => {
                format!("denied: {command} — reason: {}", visible(r))
            }
            (Decision::Deny { .. }, _) => format!("denied: {command}"),
        };
        if let (Decision::ApproveAlways, Some(prefix)) = (&decision, &p.always) {
            if !self.always.contains(prefix) {
                self.always.push(prefix.clone());
            }
        }
        self.send(Op::Approve {
            call_id: p.call_id.clone(),
            decision,
        });
        self.restore_prompt(&p.stashed);
        self.set_state(&format!("running {}", p.tool));
        self.say(&self.opts.style.dim(&verdict));
    }

    pub(super) fn restore_prompt(&mut self, stashed: &str) {
        let prompt = self.opts.style.actor(&self.opts.prompt);
        self.editor.set_prompt(prompt);
        self.editor.buffer.set(stashed);
    }

    /// The approval events: a question to ask, a decision made elsewhere, a
    /// new policy.
    pub(super) fn on_approval_event(&mut self, ev: AgentEvent) {
        match ev.kind {
            EventKind::ApprovalRequested(question) => self.ask_approval(question),
            EventKind::ApprovalDecided {
                call_id,
                command,
                approved,
                by,
                always,
                ..
            } => self.on_approval_decided(call_id, command, approved, by, always),
            EventKind::ApprovalPolicyChanged { policy } => {
                self.policy = policy;
                let text = format!("approval: {}", describe(&policy));
                self.say(&text);
            }
            // `on_agent_event` routes only the kinds above here.
            _ => {}
        }
    }

    /// The agent asks to run `command`: the question replaces the prompt
    /// (what was typed is stashed and given back once it is answered).
    fn ask_approval(&mut self, question: ApprovalQuestion) {
        let ApprovalQuestion {
            call_id,
            tool,
            actor,
            command,
            detail,
            always,
            subagent,
        } = question;
        let st = self.opts.style;
        self.flush_partial();
        self.set_state("awaiting approval");
        // A new question: no key is a leftover of the last answer.
        self.swallow = None;
        if let Some(detail) = &detail {
            self.say(&crate::ui::detail_lines(detail, st).join("\n"));
        }
        // A child's question says which child asks.
        let actor = match &subagent {
            Some(name) => format!("[{}] {}", visible(name), visible(&actor)),
            None => visible(&actor).into_owned(),
        };
        let (shown, note) = crate::ui::approval_command(&command);
        if let Some(note) = note {
            self.say(&st.warning(&format!("note: {note}")));
        }
        // The input line holds one line: a longer command is shown
        // whole above it, and the prompt points there.
        let choices = crate::ui::approval_choices(always.as_deref(), true);
        let width = crossterm::terminal::size().map_or(80, |(w, _)| w as usize);
        let fits =
            actor.chars().count() + shown.chars().count() + choices.chars().count() + 4 < width;
        let inline = if shown.contains('\n') || shown.chars().count() > 160 || !fits {
            self.say(&format!(
                "{}{} {}",
                st.actor(&actor),
                st.actor("$"),
                st.accent(&shown)
            ));
            st.dim("(the command above)")
        } else {
            st.accent(&shown)
        };
        let prompt = format!(
            "{}{} {} {} ",
            st.actor(&actor),
            st.actor("$"),
            inline,
            st.warning(&choices)
        );
        let stashed = self.editor.buffer.text();
        self.editor.buffer.clear();
        self.editor.set_prompt(prompt.clone());
        self.approval = Some(PendingApproval {
            call_id,
            tool,
            command,
            always,
            prompt,
            explaining: false,
            stashed,
        });
        self.redraw();
        let message = format!("buddy: approve? {actor}$ {shown}");
        let took = self
            .task
            .as_ref()
            .map_or(std::time::Duration::ZERO, |t| t.started.elapsed());
        self.notify(super::notify::Kind::ApprovalRequested, &message, took);
    }

    /// A decision the user did not type here: the policy's, the allow list's,
    /// the denylist's, or an interrupted question's.
    fn on_approval_decided(
        &mut self,
        call_id: String,
        command: String,
        approved: bool,
        by: DecidedBy,
        always: Option<String>,
    ) {
        let st = self.opts.style;
        match by {
            DecidedBy::ReadOnly => {
                self.say(&st.dim(&format!("auto-approved (read-only): {}", visible(&command))))
            }
            DecidedBy::AllowList => self.say(&st.dim(&format!(
                "auto-approved (always `{}`): {}",
                visible(always.as_deref().unwrap_or("")),
                visible(&command)
            ))),
            DecidedBy::Policy if approved => {
                self.say(&st.dim(&format!("auto-approved: {}", visible(&command))))
            }
            DecidedBy::Policy => {
                self.say(&st.dim(&format!("denied by /approve none: {}", visible(&command))))
            }
            DecidedBy::Denylist => {
                self.say(&st.warning(&format!("refused by the denylist: {}", visible(&command))))
            }
            DecidedBy::PlanMode => {
                self.say(&st.dim(&format!("refused in plan mode: {}", visible(&command))))
            }
            DecidedBy::Interrupted => {
                if self.approval.as_ref().is_some_and(|p| p.call_id == call_id) {
                    if let Some(p) = self.approval.take() {
                        self.restore_prompt(&p.stashed);
                        self.redraw();
                    }
                }
            }
            DecidedBy::User | DecidedBy::NoApprover => {}
        }
    }
}
