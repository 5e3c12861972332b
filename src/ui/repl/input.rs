//! Typed input to ops. A terminal event goes to the open picker, the
//! pending approval, the REPL's own keys (Esc interrupts, Tab queues a
//! follow-up, Alt-Up takes queued messages back) or the editor. A submitted
//! line becomes a prompt (its `@` mentions read, MCP resources and prompts
//! fetched), a steer while a task runs, a `!command`, pasted images, an
//! approval's answer or a slash command (`slash_ops`).

use super::editor::Outcome;
use super::{commands, mentions, Repl};
use crate::agent::protocol::{Decision, Op, QueueKind};
use crate::text::visible;
use crossterm::event::Event;

impl Repl<'_> {
    /// Handles one terminal event; true to quit.
    pub(super) fn on_terminal(&mut self, ev: Event) -> bool {
        use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
        if let Event::Resize(w, h) = ev {
            // What is printed already stays as the terminal re-wrapped it;
            // lines rendered from now on, the live preview and the input
            // area take the new width.
            self.height = h as usize;
            self.editor.set_width(w as usize);
            self.md.set_width(w as usize);
            self.show_live_answer();
            self.redraw();
            return false;
        }
        if self.picker.is_some() {
            self.on_picker_input(&ev);
            return false;
        }
        if self.rewind.is_some() {
            self.on_rewind_input(&ev);
            return false;
        }
        if self.form_key(&ev) || self.approval_key(&ev) {
            return false;
        }
        if let Event::Key(key) = &ev {
            if key.kind != KeyEventKind::Release {
                let alt = key.modifiers.contains(KeyModifiers::ALT);
                match key.code {
                    // An open menu or search takes Esc and Tab first.
                    KeyCode::Esc if self.bang.is_some() && !self.editor.menu_open() => {
                        self.stop_bang();
                        return false;
                    }
                    KeyCode::Esc if self.task.is_some() && !self.editor.menu_open() => {
                        self.interrupt();
                        return false;
                    }
                    KeyCode::Tab
                        if self.task.is_some()
                            && self.approval.is_none()
                            && !self.editor.menu_open() =>
                    {
                        let text = self.editor.buffer.text();
                        if !text.trim().is_empty() && !text.starts_with('/') {
                            self.editor.buffer.clear();
                            self.editor.history.add(&text);
                            self.send(Op::FollowUp { text });
                            self.redraw();
                            return false;
                        }
                    }
                    KeyCode::Up if alt => {
                        if !self.queued.0.is_empty() || !self.queued.1.is_empty() {
                            self.send(Op::ClearQueue {
                                queue: QueueKind::All,
                            });
                        }
                        return false;
                    }
                    _ => {}
                }
            }
        }
        let outcome = self.editor.handle(&ev);
        if !matches!(outcome, Outcome::Interrupt) {
            self.quit_hinted = false;
        }
        match outcome {
            Outcome::Continue => self.redraw(),
            Outcome::Interrupt => {
                if self.bang.is_some() {
                    self.stop_bang();
                } else if self.task.is_some() {
                    self.interrupt();
                } else if !self.quit_hinted {
                    // Ctrl-C is how many programs quit: say what does here,
                    // once per run of presses.
                    self.quit_hinted = true;
                    let hint = self
                        .opts
                        .style
                        .dim("Ctrl-C clears the line; to quit, press Ctrl-D on an empty line or type /quit");
                    self.say(&hint);
                } else {
                    self.redraw();
                }
            }
            Outcome::Eof => {
                if self.task.is_some() {
                    self.say("a task is running: /kill it first, or Ctrl-C to cancel it");
                } else {
                    return true;
                }
            }
            Outcome::Submit(line) => return self.on_line(line),
            Outcome::ClearScreen => self.clear_screen(),
            Outcome::ShowSubagents => self.show_subagents(),
        }
        false
    }

    /// Esc, Ctrl-C: a pending approval is denied and the run interrupted.
    fn interrupt(&mut self) {
        if let Some(p) = self.approval.take() {
            self.answer(p, Decision::Deny { reason: None });
        }
        if let Some(t) = &self.task {
            let id = t.id;
            self.send(Op::Interrupt);
            // The answer so far is shown, marked as cut where it stops,
            // before the note that ends the task.
            let cut = self.live_answer;
            self.flush_partial();
            if cut {
                self.say(&self.opts.style.warning("[interrupted]"));
            }
            self.say(&self.opts.style.warning(&format!("cancelling task {id}…")));
        }
    }

    /// A submitted line; true to quit.
    fn on_line(&mut self, line: String) -> bool {
        if let Some(f) = self.form.take() {
            self.form_line(f, &line);
            return false;
        }
        if let Some(p) = self.approval.take() {
            self.answer_line(p, &line);
            return false;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            self.redraw();
            return false;
        }
        if let Some(command) = trimmed.strip_prefix('!') {
            self.start_bang(command.trim());
            return false;
        }
        if let Some(paths) = mentions::pasted(trimmed, &self.cwd) {
            self.attach_pasted(&paths);
            return false;
        }
        let mut custom = commands::expand_custom(trimmed, &self.opts.custom);
        // `/SERVER:PROMPT args`: an MCP server's prompt becomes the turn.
        if let Some((name, args)) = trimmed
            .strip_prefix('/')
            .map(|r| r.split_once(char::is_whitespace).unwrap_or((r, "")))
            .filter(|(n, _)| n.contains(':') && custom.is_none())
        {
            match self.services.mcp_prompt(name, args.trim()) {
                Some(Ok(text)) => custom = Some(text),
                Some(Err(e)) => {
                    self.say_error(&format!("/{}: {}", visible(name), visible(&e.to_string())));
                    self.editor.buffer.set(&line);
                    self.redraw();
                    return false;
                }
                None => {}
            }
        }
        let parsed = match custom {
            Some(_) => None,
            None => commands::parse(trimmed),
        };
        // A custom command is a prompt like any typed one, its text expanded.
        let line = custom.unwrap_or(line);
        match parsed {
            Some(Err(e)) => self.say_error(&e.to_string()),
            Some(Ok(cmd)) => return self.on_command(cmd),
            None if self.task.is_some() => {
                if !mentions::find(&line).is_empty() {
                    self.say(
                        &self.opts.style.dim(
                            "note: files are attached only to prompts sent while no task runs",
                        ),
                    );
                }
                // Enter while the agent works steers it; Tab would queue instead.
                self.send(Op::Steer { text: line });
                self.redraw();
            }
            None => self.send_prompt(line),
        }
        false
    }

    /// A prompt typed while no task runs: its `@SERVER:uri` mentions read
    /// from the MCP servers, its `@path` files attached (images too), then
    /// the prompt itself. A mention that cannot be read sends nothing and
    /// gives the line back to edit.
    fn send_prompt(&mut self, line: String) {
        // `@SERVER:uri` names an MCP server's resource, not a file.
        let mut resources = String::new();
        let mut taken = Vec::new();
        for m in mentions::find(&line) {
            match self.services.mcp_resource(&m) {
                Some(Ok(text)) => {
                    resources.push_str(&format!(
                        "<resource mention=\"{m}\">\n{text}\n</resource>\n"
                    ));
                    taken.push(m);
                }
                Some(Err(e)) => {
                    self.say_error(&format!(
                        "@{}: {}; nothing was sent",
                        visible(&m),
                        visible(&e.to_string())
                    ));
                    self.editor.buffer.set(&line);
                    self.redraw();
                    return;
                }
                None => {}
            }
        }
        if !resources.is_empty() {
            self.send(Op::AddContext {
                text: format!(
                    "MCP resources I mention in my next message (@SERVER:uri):\n\n{resources}"
                ),
                shown: Some(String::new()),
            });
        }
        let attached = mentions::attach_except(&line, &self.cwd, &taken);
        for note in &attached.notes {
            let note = self.opts.style.dim(&format!("note: {note}"));
            self.say(&note);
        }
        if !attached.refused.is_empty() {
            // Nothing goes: the line comes back to be edited.
            for line in &attached.refused {
                self.say_error(line);
            }
            self.editor.buffer.set(&line);
            self.redraw();
            return;
        }
        let mut images = std::mem::take(&mut self.pending_images);
        images.extend(attached.images);
        // The files go first, as their own message, so the prompt
        // the model gets (and the echo) is exactly what was typed.
        if let Some(text) = attached.context {
            // Nothing of it was shown: a replay shows the prompt only.
            self.send(Op::AddContext {
                text,
                shown: Some(String::new()),
            });
        }
        self.send(Op::Prompt { text: line, images });
    }

    /// A line of nothing but image paths: the images wait for the next
    /// prompt, which is usually the question about them.
    fn attach_pasted(&mut self, paths: &[std::path::PathBuf]) {
        for path in paths {
            match crate::localfile::read_image(path) {
                Ok(image) => {
                    let note =
                        format!("attached {}; it goes with your next message", image.label());
                    self.say(&self.opts.style.dim(&note));
                    self.pending_images.push(image);
                }
                Err(e) => self.say_error(&format!(
                    "{}: {e}; not attached",
                    visible(&path.display().to_string())
                )),
            }
        }
        self.redraw();
    }

    /// `!command`: the agent runs it now on the tools' target
    /// (`Op::RunCommand`). No approval and no denylist: the user typed it,
    /// as in their own shell; the denylist guards against the model. One at
    /// a time; it may run alongside a task, and then reaches the model with
    /// the next prompt after the task (the agent sees to that).
    fn start_bang(&mut self, command: &str) {
        let st = self.opts.style;
        if command.is_empty() {
            self.say("usage: !command (runs it now; the model sees it with the next prompt)");
            return;
        }
        if self.bang.is_some() {
            self.say("a ! command is already running (Ctrl-C stops it)");
            return;
        }
        let echo = format!(
            "{}{}",
            st.dim(&self.opts.prompt),
            visible(&format!("!{command}"))
        );
        self.say(&echo);
        self.bang = self.send(Op::RunCommand {
            command: command.to_string(),
        });
    }

    fn stop_bang(&mut self) {
        if self.bang.take().is_some() {
            // The agent kills the process; its reply is not shown again.
            self.send(Op::StopCommand);
            self.say(&self.opts.style.warning("! command stopped"));
        }
    }
}
