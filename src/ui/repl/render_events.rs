//! The agent's events on the screen. One router (`on_agent_event`) hands
//! each kind to the method for its group: the run, the conversation's text,
//! tools, notices, approvals (`approval_prompt`), the queues, replies to the
//! REPL's own requests, the session. The streamed answer and reasoning are
//! held here and flushed before whatever comes next, so every line prints
//! after the text it follows.

use super::approval::short_duration;
use super::{bang, notify, replay, rewind, Repl, Task, Want};
use crate::agent::protocol::{Event as AgentEvent, EventKind, OpId, RunOutcome, ToolCallResult};
use crate::text::visible;
use std::time::{Duration, Instant};

impl Repl<'_> {
    /// Prints what is held of the reasoning and the answer, so whatever is
    /// said next (a tool call, a token line, "cancelling…") comes after
    /// the text it follows.
    pub(super) fn flush_partial(&mut self) {
        self.end_reasoning();
        let rest = self.md.finish();
        if self.live_answer {
            self.live_answer = false;
            self.editor.set_live(None);
        }
        if !rest.is_empty() {
            self.say(rest.strip_suffix('\n').unwrap_or(&rest));
        }
        for warning in std::mem::take(&mut self.held_warnings) {
            self.say(&warning);
        }
    }

    /// Reasoning lines, labelled so they can be told from the answer without
    /// colour: the block's first line starts `thinking: `, the rest are
    /// indented under it.
    fn say_reasoning(&mut self, text: &str) {
        let mut shown = String::with_capacity(text.len() + 16);
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                shown.push('\n');
            }
            shown.push_str(if self.reasoning_open {
                "  "
            } else {
                "thinking: "
            });
            self.reasoning_open = true;
            shown.push_str(line);
        }
        let shown = self.opts.style.dim(&shown);
        self.say(&shown);
    }

    /// Ends a reasoning block: its unfinished line is printed.
    fn end_reasoning(&mut self) {
        let r = std::mem::take(&mut self.reasoning);
        let r = r.trim_end();
        if !r.is_empty() {
            self.say_reasoning(r);
        }
        self.reasoning_open = false;
    }

    /// The answer's text not rendered yet, shown live above the status line;
    /// only its last lines when it is taller than a third of the screen, so
    /// the input area always fits.
    pub(super) fn show_live_answer(&mut self) {
        if !self.live_answer {
            return;
        }
        let held = self.md.held();
        let keep = (self.height / 3).max(1);
        let lines: Vec<&str> = held.split('\n').collect();
        let from = lines.len().saturating_sub(keep);
        self.editor.set_live(Some(lines[from..].join("\n")));
    }

    fn on_run_finished(&mut self, outcome: RunOutcome) {
        self.flush_partial();
        let st = self.opts.style;
        let id = self.task.as_ref().map_or(0, |t| t.id);
        let took = self.task.as_ref().map(|t| t.started.elapsed());
        // The user who interrupted the run is at the terminal already.
        let note = match &outcome {
            RunOutcome::Answered { text, .. } => Some(format!(
                "buddy: task {id} done: {}",
                text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
            )),
            RunOutcome::Interrupted => None,
            RunOutcome::Failed { message } => Some(format!("buddy: task {id} failed: {message}")),
            RunOutcome::LimitReached { message } => {
                Some(format!("buddy: task {id} stopped: {message}"))
            }
        };
        match outcome {
            RunOutcome::Answered { text, .. } => {
                if !self.answer_streamed && !text.is_empty() {
                    let done = self.md.push(&text);
                    if !done.is_empty() {
                        self.say(done.strip_suffix('\n').unwrap_or(&done));
                    }
                    self.flush_partial();
                }
            }
            RunOutcome::Interrupted => self.say(&st.warning(&format!("task {id} cancelled"))),
            RunOutcome::Failed { message } => {
                self.say(&format!("{} {}", st.error("error:"), visible(&message)))
            }
            // The timeout set with /timeout, said as the REPL said it when
            // it kept the timer itself.
            RunOutcome::LimitReached { .. } if self.task.as_ref().is_some_and(|t| t.timeout) => {
                self.say(&st.warning(&format!("task {id} reached its timeout; cancelling")));
                self.say(&st.warning(&format!("task {id} cancelled")));
            }
            RunOutcome::LimitReached { message } => {
                self.say(&format!("{} {}", st.warning("limit:"), visible(&message)))
            }
        }
        if let Some(p) = self.approval.take() {
            self.restore_prompt(&p.stashed);
        }
        if let Some(f) = self.form.take() {
            self.restore_prompt(f.stashed());
        }
        self.task = None;
        self.tool_output.clear();
        self.update_status();
        self.redraw();
        if let (Some(note), Some(took)) = (note, took) {
            if self.notifier.run_is_long(took) {
                self.notify(notify::Kind::RunFinished, &note, took);
            }
        }
    }

    /// Tells the user away from the screen (`notify`): the `notify` program
    /// is started, or the terminal gets its sequence. `took`: how long the
    /// run has gone on.
    pub(super) fn notify(&mut self, kind: notify::Kind, message: &str, took: Duration) {
        let session = self.session_id.clone();
        if let Some(seq) = self
            .notifier
            .notify(kind, session.as_deref(), message, took)
        {
            use std::io::Write;
            let _ = self.out.write_all(seq.as_bytes());
            let _ = self.out.flush();
        }
    }

    /// Shows one event from the agent: each kind goes to the method for its
    /// group. The match names every kind, so a new one must be placed.
    pub(super) fn on_agent_event(&mut self, ev: AgentEvent) {
        use EventKind as K;
        match ev.kind {
            K::RunStarted { .. }
            | K::ModelRequest { .. }
            | K::TimeoutSet { .. }
            | K::RunFinished { .. } => self.on_run_event(ev),
            K::UserMessage { .. } | K::TextDelta { .. } | K::Reasoning { .. } => {
                self.on_text_event(ev)
            }
            K::ToolCall { .. }
            | K::ToolProgress { .. }
            | K::ToolResult { .. }
            | K::CommandRan(_) => self.on_tool_event(ev),
            K::Subagent(sub) => self.on_subagent_event(sub),
            K::Usage { .. }
            | K::Retrying { .. }
            | K::Warning { .. }
            | K::HookBlocked { .. }
            | K::Error { .. }
            | K::Compacted { .. } => self.on_notice(ev),
            K::ApprovalRequested { .. }
            | K::ApprovalDecided { .. }
            | K::ApprovalPolicyChanged { .. } => self.on_approval_event(ev),
            K::ElicitationRequested(_) | K::ElicitationDecided { .. } => self.on_question_event(ev),
            K::Queues { .. } | K::Unqueued { .. } => self.on_queue_event(ev),
            K::Status(_)
            | K::Sessions { .. }
            | K::Jobs { .. }
            | K::ModelSwitched { .. }
            | K::Turns { .. }
            | K::Rewound { .. } => self.on_reply(ev),
            K::SessionStarted { .. }
            | K::SessionResumed { .. }
            | K::SessionForked { .. }
            | K::SessionCleared
            | K::ShutdownComplete => self.on_session_event(ev),
            K::Plan { .. } | K::PlanMode { .. } | K::PlanReady { .. } => self.on_plan_event(ev),
        }
    }

    /// A run starts, asks the model, has a timeout set, or ends.
    fn on_run_event(&mut self, ev: AgentEvent) {
        match ev.kind {
            EventKind::RunStarted { .. } => {
                self.task = Some(Task {
                    id: ev.run,
                    started: Instant::now(),
                    state: "waiting for model".into(),
                    timeout: false,
                });
                self.update_status();
                self.redraw();
            }
            EventKind::ModelRequest { .. } => {
                self.answer_streamed = false;
                self.set_state("waiting for model")
            }
            EventKind::TimeoutSet { after_ms } => {
                let after = Duration::from_millis(after_ms);
                if let Some(t) = self.task.as_mut().filter(|t| t.id == ev.run) {
                    t.timeout = true;
                }
                self.say(&format!(
                    "task {} will be cancelled in {}",
                    ev.run,
                    short_duration(after)
                ));
            }
            EventKind::RunFinished(end) => self.on_run_finished(end.outcome),
            // The kinds `on_agent_event` does not route here, and those
            // above whose guard declined (nothing to show).
            _ => {}
        }
    }

    /// The conversation's text: the user's message echoed, the answer and
    /// the reasoning as they stream.
    fn on_text_event(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        match ev.kind {
            EventKind::UserMessage { text, images, .. } => {
                self.flush_partial();
                let mut echo = format!("{}{}", st.dim(&self.opts.prompt), visible(&text));
                for image in &images {
                    echo.push(' ');
                    echo.push_str(&st.dim(&visible(&image.label())));
                }
                self.say(&echo);
            }
            EventKind::TextDelta { text } => {
                self.answer_streamed = true;
                self.end_reasoning();
                self.set_state("writing the answer");
                // The renderer makes the text visible itself.
                let done = self.md.push(&text);
                // The text not rendered yet shows as it grows, above the prompt.
                self.live_answer = true;
                self.show_live_answer();
                if done.is_empty() {
                    self.redraw();
                } else {
                    self.say(done.strip_suffix('\n').unwrap_or(&done));
                }
            }
            EventKind::Reasoning { text, .. } => {
                self.set_state("thinking");
                self.reasoning.push_str(&visible(&text));
                if let Some(i) = self.reasoning.rfind('\n') {
                    let done: String = self.reasoning.drain(..=i).collect();
                    self.say_reasoning(&done[..done.len() - 1]);
                }
            }
            // The kinds `on_agent_event` does not route here, and those
            // above whose guard declined (nothing to show).
            _ => {}
        }
    }

    /// Tool calls starting, their output as it comes, their results; and a
    /// `!command`'s report.
    fn on_tool_event(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        match ev.kind {
            EventKind::ToolCall {
                name, arguments, ..
            } => {
                self.flush_partial();
                self.set_state(&format!("running {name}"));
                if self.opts.show_tool_calls {
                    let lines = crate::ui::toolview::call_lines(&name, &arguments);
                    let mut shown = Vec::with_capacity(lines.len());
                    for (i, line) in lines.iter().enumerate() {
                        shown.push(if i == 0 {
                            format!("{} {}", st.tool("▶"), st.tool(line))
                        } else {
                            format!("  {}", st.dim(line))
                        });
                    }
                    self.say(&shown.join("\n"));
                }
            }
            EventKind::ToolProgress { call_id, tail } => {
                match self.tool_output.iter_mut().find(|(id, _)| *id == call_id) {
                    Some((_, t)) => *t = tail,
                    None => self.tool_output.push((call_id, tail)),
                }
                self.update_status();
                self.redraw();
            }
            EventKind::ToolResult(ToolCallResult {
                call_id,
                name,
                text,
                is_error,
                ..
            }) => {
                self.tool_output.retain(|(id, _)| *id != call_id);
                self.update_status();
                if self.opts.show_tool_calls {
                    let lines = crate::ui::toolview::result_lines(&name, &text, is_error, st);
                    self.say(&lines.join("\n"));
                }
            }
            EventKind::CommandRan(ran) => self.on_bang_done(ev.op_id, *ran),
            // The kinds `on_agent_event` does not route here, and those
            // above whose guard declined (nothing to show).
            _ => {}
        }
    }

    /// One-line notices: usage, retries, warnings, hooks, errors, compaction.
    fn on_notice(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        match ev.kind {
            EventKind::Usage(usage) if self.opts.show_tokens => {
                self.flush_partial();
                self.say(&st.dim(&crate::ui::usage_line(&usage)));
            }
            EventKind::Retrying {
                attempt,
                max_retries,
                delay_ms,
                error,
            } => {
                self.say(&crate::ui::retry_line(
                    st,
                    attempt,
                    max_retries,
                    delay_ms,
                    &error,
                ));
            }
            EventKind::Warning { message } => {
                let line = format!("{} {}", st.warning("warning:"), visible(&message));
                if self.live_answer {
                    self.held_warnings.push(line);
                } else {
                    self.say(&line);
                }
            }
            EventKind::HookBlocked {
                hook_event,
                tool,
                reason,
                ..
            } => self.say(&format!(
                "{} {}",
                st.warning("hook:"),
                crate::ui::hook_line(&hook_event, tool.as_deref(), &reason)
            )),
            EventKind::Error { message, .. } => {
                // A refused request is answered: nothing more will come for it.
                self.awaited.take(ev.op_id);
                if ev.op_id.is_some() && ev.op_id == self.bang {
                    self.bang = None;
                }
                self.say_error(&visible(&message))
            }
            EventKind::Compacted {
                messages_before,
                messages_after,
                tokens_before,
                tokens_after,
                summarized,
            } => {
                let how = if summarized {
                    "older turns summarised"
                } else {
                    "old tool output shortened"
                };
                self.say(&st.dim(&format!(
                    "context compacted ({how}): {messages_before} messages, ~{tokens_before} tokens -> {messages_after}, ~{tokens_after}"
                )));
            }
            // The kinds `on_agent_event` does not route here, and those
            // above whose guard declined (nothing to show).
            _ => {}
        }
    }

    /// The agent's queues changed, or gave their messages back.
    fn on_queue_event(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        match ev.kind {
            EventKind::Queues {
                steering,
                follow_ups,
            } => {
                self.queued = (steering, follow_ups);
                self.update_status();
                self.redraw();
            }
            EventKind::Unqueued { texts } if !texts.is_empty() => {
                // Back into the input, in front of anything typed since.
                let mut text = texts.join("\n");
                let typed = self.editor.buffer.text();
                if !typed.is_empty() {
                    text.push('\n');
                    text.push_str(&typed);
                }
                self.editor.buffer.set(&text);
                self.say(&st.dim("queued messages are back in the input"));
            }
            // The kinds `on_agent_event` does not route here, and those
            // above whose guard declined (nothing to show).
            _ => {}
        }
    }

    /// Replies to the REPL's own requests: status, sessions, a model switch,
    /// the turns for `/rewind` and the rewind done.
    fn on_reply(&mut self, ev: AgentEvent) {
        match ev.kind {
            EventKind::Status(report) => {
                let text = match self.awaited.take(ev.op_id) {
                    Some(Want::Context) => Self::context_text(&report),
                    Some(Want::Status) => self.status_text(&report),
                    // Not a reply to this REPL's request.
                    _ => return,
                };
                // Model names and endpoints come from config and servers.
                self.say(&visible(&text));
            }
            EventKind::Sessions {
                sessions,
                dir,
                warnings,
            } => {
                let mut text = if sessions.is_empty() {
                    format!("no saved sessions in {}", visible(&dir))
                } else {
                    crate::ui::session_table::session_table(&sessions, crate::clock::now_unix())
                        .trim_end()
                        .to_string()
                };
                for w in warnings {
                    text.push_str(&format!("\nwarning: {}", visible(&w)));
                }
                self.say(&text);
            }
            EventKind::Jobs { jobs } => self.say(&jobs_table(&jobs)),
            EventKind::ModelSwitched {
                model,
                profile,
                base_url,
                note,
            } => {
                self.profile = profile.clone();
                self.model = model.clone();
                let login = matches!(self.awaited.take(ev.op_id), Some(Want::LoginSwitch));
                let mut text = if login {
                    format!("profile {profile} now uses the new login")
                } else {
                    format!("now using {model} (profile {profile}) at {base_url}")
                };
                if let Some(n) = note {
                    text.push('\n');
                    text.push_str(&visible(&n));
                }
                self.say(&text);
            }
            EventKind::Turns { turns, note } => {
                if !matches!(self.awaited.take(ev.op_id), Some(Want::Turns)) {
                    return;
                }
                match rewind::RewindPicker::new(turns, note) {
                    Some(picker) => {
                        let view = picker.render(crate::clock::now_unix(), &self.cwd);
                        self.editor.set_live(Some(view));
                        self.rewind = Some(picker);
                        self.redraw();
                    }
                    None => self.say("nothing to rewind: this conversation has no turns yet"),
                }
            }
            EventKind::Rewound {
                files,
                removed,
                prompt,
                commands,
                ..
            } => self.on_rewound(files, removed, prompt, commands),
            // The kinds `on_agent_event` does not route here, and those
            // above whose guard declined (nothing to show).
            _ => {}
        }
    }

    /// The session in use started, was resumed, forked or cleared.
    fn on_session_event(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        match ev.kind {
            EventKind::SessionStarted { id } => self.session_id = Some(id),
            EventKind::SessionResumed {
                ref id, ref replay, ..
            } => {
                self.session_id = Some(id.clone());
                self.subagents = super::subagents::from_replay(replay);
                let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
                let look = replay::Look {
                    style: st,
                    prompt: &self.opts.prompt,
                    show_tool_calls: self.opts.show_tool_calls,
                };
                if let Some(text) = replay::resumed(&ev.kind, &look, cols as usize, rows as usize) {
                    self.say(&text);
                }
            }
            EventKind::SessionForked { id, from, messages } => {
                self.session_id = Some(id.clone());
                self.say(&format!(
                    "forked: this conversation ({messages} messages) now goes on as session {id}; session {from} stays as it was (buddy resume {from})"
                ));
            }
            EventKind::SessionCleared => {
                self.session_id = None;
                self.say(
                    "new session: the conversation starts over and is saved from its first prompt",
                );
            }
            EventKind::ShutdownComplete => {}
            // The kinds `on_agent_event` does not route here, and those
            // above whose guard declined (nothing to show).
            _ => {}
        }
    }

    /// The agent's report of a `!command` (the exchange already joined the
    /// conversation, or will when the task ends).
    fn on_bang_done(&mut self, op: Option<OpId>, ran: crate::agent::protocol::CommandRun) {
        if op.is_some() && op == self.bang {
            self.bang = None;
        }
        if ran.stopped {
            return;
        }
        let st = self.opts.style;
        let shown = bang::screen_text(&ran);
        if !shown.is_empty() {
            self.say(&shown);
        }
        if let Some(e) = &ran.error {
            self.say_error(&format!("cannot run it: {}", visible(e)));
        } else if ran.failed() {
            self.say(&st.error(&ran.status()));
        }
        if ran.dropped > 0 {
            self.say(&st.dim(&format!("({} more bytes of output not kept)", ran.dropped)));
        }
    }
}

/// `/jobs`: one line per background job, id, state, run time and command
/// (the model wrote it: made visible and kept to one line).
fn jobs_table(jobs: &[crate::tools::jobs::JobInfo]) -> String {
    if jobs.is_empty() {
        return "no background jobs".into();
    }
    let rows: Vec<(String, String, String)> = jobs
        .iter()
        .map(|j| {
            (
                j.id.clone(),
                j.state(),
                short_duration(Duration::from_millis(j.runtime_ms)),
            )
        })
        .collect();
    let state_w = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let time_w = rows.iter().map(|r| r.2.len()).max().unwrap_or(0);
    rows.iter()
        .zip(jobs)
        .map(|((id, state, time), j)| {
            format!(
                "job {id}  {state:<state_w$}  {time:>time_w$}  {}",
                crate::text::one_line(&j.command, 120)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
