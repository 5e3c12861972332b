//! The one-shot front end of `buddy exec` (and of each line of the plain line
//! session): renders one run's events to stderr, asks on the terminal when the
//! agent requests approval, and puts the final answer alone on stdout. Whether
//! a command needs asking at all is the agent's decision, not this file's.
//! On a terminal the answer streams as rendered Markdown, a line at a time; a
//! pipe gets the model's text exactly, once the run has ended. What the model
//! says before it calls tools ("Let me look at the tests first.") is part of
//! that stream on a terminal; with stdout a pipe it goes to stderr with the
//! tool calls it introduces, so the pipe still carries the answer alone.

use super::markdown::MarkdownRenderer;
use super::style::{preview, Style, SPINNER};
use super::terminal::Terminal;
use crate::agent::protocol::{
    ApprovalQuestion, DecidedBy, Decision, ElicitationQuestion, Event, EventKind, OpId, RunEnd,
    RunOutcome,
};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::drive::{drive, Approval, Elicitation, End, Flow, Renderer};
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    pub style: Style,
    pub show_tool_calls: bool,
    pub show_tokens: bool,
    /// The answer is data for a program (`--output-schema`): written once,
    /// exactly, never streamed or rendered as Markdown.
    pub plain_answer: bool,
    /// Which streams are a terminal, read once at start-up.
    pub terminal: Terminal,
}

/// How the turn ended, for `main` to turn into an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutcome {
    /// The final answer's text (also on stdout), for `-o FILE`.
    Answered(String),
    Failed(String),
    Interrupted,
    /// An execution limit ended the run (exit 1, like a failure).
    LimitReached(String),
}

pub struct ExecFrontEnd {
    opts: ExecOptions,
    /// Stream the answer to stdout as it arrives: only when a person is reading it.
    stream_stdout: bool,
    /// The answer rendered for the terminal (only when streaming to one).
    md: Option<MarkdownRenderer>,
    /// Whether stderr takes the spinner's redraws (a terminal, not a dumb one).
    spin: bool,
    spinner: Option<Spinner>,
    /// Whether a spinner line is on the screen now.
    spinner_shown: bool,
    streamed_any: bool,
    at_line_start: bool,
    reasoning_open: bool,
    /// The latest output line of a running tool call, shown after the spinner.
    live_line: Option<String>,
    /// With stdout a pipe: the text of the model's current turn. Shown on
    /// stderr if tool calls follow it; if none do, it was the answer.
    turn_text: String,
    /// The spinner's redraws, while one is shown.
    tick: tokio::time::Interval,
    /// How the run ended, once it has.
    outcome: Option<ExecOutcome>,
    /// The prompt whose run this shows (its end ends the front end).
    prompt: Option<OpId>,
    /// `exec --plan`: the model's finished plan (`PlanReady`) is the answer.
    plan_ends: bool,
}

/// The most of a turn's text kept for stderr; narration is short, and an
/// answer that turns out to be the final one is not shown there at all.
const TURN_TEXT_MAX: usize = 16 * 1024;

struct Spinner {
    label: String,
    started: Instant,
    frame: usize,
}

/// The spinner's frame interval; a late tick is skipped, not caught up.
fn spinner_tick() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tick
}

/// The terminal's width now (read again for each line, so a resize applies to
/// what follows).
fn terminal_width() -> usize {
    crossterm::terminal::size().map_or(0, |(w, _)| w as usize)
}

impl ExecFrontEnd {
    pub fn new(opts: ExecOptions) -> Self {
        let stream_stdout = opts.terminal.stdout && !opts.plain_answer;
        ExecFrontEnd {
            opts,
            stream_stdout,
            md: stream_stdout.then(|| MarkdownRenderer::new(terminal_width(), opts.style.color)),
            spin: opts.terminal.stderr_redraws(),
            spinner: None,
            spinner_shown: false,
            streamed_any: false,
            at_line_start: true,
            reasoning_open: false,
            live_line: None,
            turn_text: String::new(),
            tick: spinner_tick(),
            outcome: None,
            prompt: None,
            plan_ends: false,
        }
    }

    /// With `on`, the model's finished plan ends the run as its answer.
    pub fn ending_at_plan(mut self, on: bool) -> Self {
        self.plan_ends = on;
        self
    }

    /// Renders events until the run finishes, through the drive loop.
    /// Ctrl-C interrupts the run (a second one gives up waiting).
    /// Shows the run prompt `op` started (any run's end ends it when the
    /// prompt's id is not known).
    pub fn awaiting(mut self, op: Option<OpId>) -> ExecFrontEnd {
        self.prompt = op;
        self
    }

    pub async fn run(mut self, agent: &mut AgentHandle) -> ExecOutcome {
        let end = drive(agent, &mut self).await;
        self.outcome(end)
    }

    /// How the run went, once the drive loop has ended with `end`.
    pub fn outcome(mut self, end: End) -> ExecOutcome {
        self.clear_spinner();
        match end {
            End::Stopped => self.outcome.take().unwrap_or(ExecOutcome::Interrupted),
            End::Abandoned => ExecOutcome::Interrupted,
            End::AgentGone => ExecOutcome::Failed("the agent stopped unexpectedly".into()),
        }
    }

    fn handle(&mut self, ev: EventKind) {
        let st = self.opts.style;
        if !matches!(
            ev,
            EventKind::Reasoning { .. } | EventKind::TextDelta { .. }
        ) {
            self.close_reasoning();
        }
        match ev {
            EventKind::ModelRequest { turn } => {
                self.live_line = None;
                self.turn_text.clear();
                let label = if turn == 1 {
                    "thinking".to_string()
                } else {
                    format!("thinking (step {turn})")
                };
                self.spinner = Some(Spinner {
                    label,
                    started: Instant::now(),
                    frame: 0,
                });
            }
            EventKind::TextDelta { text: t } if self.stream_stdout => {
                self.close_reasoning();
                match &mut self.spinner {
                    Some(s) => "writing the answer".clone_into(&mut s.label),
                    None => {
                        self.spinner = Some(Spinner {
                            label: "writing the answer".into(),
                            started: Instant::now(),
                            frame: 0,
                        })
                    }
                }
                self.streamed_any = true;
                // Only ever a terminal here: the renderer shows control
                // characters, never passes them on.
                let Some(md) = self.md.as_mut() else {
                    return;
                };
                md.set_width(terminal_width());
                let lines = md.push(&t);
                self.write_answer(&lines);
            }
            EventKind::TextDelta { text } => self.keep_turn_text(&text),
            EventKind::Reasoning { field, text } => {
                self.clear_spinner();
                let mut err = std::io::stderr().lock();
                if !self.reasoning_open {
                    let _ = write!(err, "{}", st.dim(&format!("[{field}] ")));
                    self.reasoning_open = true;
                }
                let _ = write!(err, "{}", st.dim(&crate::text::visible(&text)));
                let _ = err.flush();
            }
            EventKind::ToolCall {
                name, arguments, ..
            } => {
                self.end_stream_line();
                let said = std::mem::take(&mut self.turn_text);
                if self.opts.show_tool_calls {
                    self.clear_spinner();
                    let said = said.trim();
                    if !said.is_empty() {
                        eprintln!("{}", st.dim(&crate::text::visible(said)));
                    }
                    let lines = super::toolview::call_lines(&name, &arguments);
                    for (i, line) in lines.iter().enumerate() {
                        if i == 0 {
                            eprintln!("{} {}", st.tool("▶"), st.tool(line));
                        } else {
                            eprintln!("  {}", st.dim(line));
                        }
                    }
                }
                self.spinner = Some(Spinner {
                    label: format!("running {name}"),
                    started: Instant::now(),
                    frame: 0,
                });
            }
            EventKind::ToolProgress { tail, .. } => {
                self.live_line = tail
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string);
            }
            EventKind::ToolResult { .. } if !self.opts.show_tool_calls => self.live_line = None,
            EventKind::ToolResult(result) => {
                self.live_line = None;
                self.clear_spinner();
                for line in
                    super::toolview::result_lines(&result.name, &result.text, result.is_error, st)
                {
                    eprintln!("{line}");
                }
            }
            EventKind::Usage(usage) if self.opts.show_tokens => {
                self.clear_spinner();
                self.end_stream_line();
                eprintln!("{}", st.dim(&super::usage_line(&usage)));
            }
            EventKind::Retrying {
                attempt,
                max_retries,
                delay_ms,
                error,
            } => {
                // The turn starts over.
                self.turn_text.clear();
                self.clear_spinner();
                eprintln!(
                    "{}",
                    super::retry_line(st, attempt, max_retries, delay_ms, &error)
                );
            }
            EventKind::ElicitationRequested(question) => {
                self.clear_spinner();
                self.end_stream_line();
                eprintln!("{}", question_refused_line(st, &question));
            }
            EventKind::Warning { message } => {
                self.clear_spinner();
                eprintln!(
                    "{} {}",
                    st.warning("warning:"),
                    crate::text::visible(&message)
                );
            }
            EventKind::HookBlocked {
                hook_event,
                tool,
                reason,
                ..
            } => {
                self.clear_spinner();
                eprintln!(
                    "{} {}",
                    st.warning("hook:"),
                    crate::ui::hook_line(&hook_event, tool.as_deref(), &reason)
                );
            }
            EventKind::Error { message, .. } => {
                self.clear_spinner();
                eprintln!("{} {}", st.error("error:"), crate::text::visible(&message));
            }
            EventKind::Compacted {
                messages_before,
                messages_after,
                tokens_before,
                tokens_after,
                ..
            } => {
                self.clear_spinner();
                eprintln!(
                    "{}",
                    st.dim(&format!(
                        "context compacted: {messages_before} messages (~{tokens_before} tokens) -> {messages_after} (~{tokens_after})"
                    ))
                );
            }
            EventKind::Plan { entries } => {
                self.clear_spinner();
                eprintln!("{}", st.dim(&crate::ui::plan::summary_line(&entries)));
            }
            // Shown before the question that asks to start the work (the
            // line session in plan mode); `--plan` stops at it instead.
            EventKind::PlanReady { plan, .. } => {
                self.clear_spinner();
                self.end_stream_line();
                eprintln!(
                    "{}\n{}",
                    st.accent("the plan:"),
                    crate::text::visible(&plan)
                );
            }
            EventKind::PlanMode { on } => {
                self.clear_spinner();
                eprintln!(
                    "{}",
                    st.dim(if on {
                        "plan mode: only reading tools and read-only commands run"
                    } else {
                        "plan mode off"
                    })
                );
            }
            EventKind::ApprovalDecided {
                command,
                by: DecidedBy::PlanMode,
                ..
            } => {
                self.clear_spinner();
                eprintln!(
                    "{}",
                    st.dim(&format!(
                        "refused in plan mode: {}",
                        crate::text::visible(&command)
                    ))
                );
            }
            EventKind::ApprovalDecided {
                command,
                by: DecidedBy::ReadOnly,
                ..
            } => {
                self.clear_spinner();
                eprintln!(
                    "{}",
                    st.dim(&format!(
                        "auto-approved (read-only): {}",
                        crate::text::visible(&command)
                    ))
                );
            }
            EventKind::ApprovalDecided {
                command,
                by: DecidedBy::AllowList,
                always: Some(prefix),
                ..
            } => {
                self.clear_spinner();
                eprintln!(
                    "{}",
                    st.dim(&format!(
                        "auto-approved (always `{}`): {}",
                        crate::text::visible(&prefix),
                        crate::text::visible(&command)
                    ))
                );
            }
            EventKind::ApprovalDecided {
                tool,
                command,
                by: DecidedBy::NoApprover,
                ..
            } => {
                self.clear_spinner();
                eprintln!(
                    "{} {tool} needs approval but there is no terminal to ask; denied `{}`. Rerun with --dangerously-auto-approve to allow commands, or set tools.shell_confirm = false.",
                    st.warning("warning:"),
                    preview(&command, 60)
                );
            }
            _ => {}
        }
    }

    fn finish(&mut self, outcome: RunOutcome) -> ExecOutcome {
        self.close_reasoning();
        match outcome {
            RunOutcome::Answered { text: answer, .. } => {
                if let Some(md) = self.md.as_mut() {
                    // Rendered for the terminal; an answer that did not
                    // stream (no deltas) is rendered whole here.
                    let mut rest = if self.streamed_any {
                        String::new()
                    } else {
                        md.push(&answer)
                    };
                    rest.push_str(&md.finish());
                    self.write_answer(&rest);
                    return ExecOutcome::Answered(answer);
                }
                let mut out = std::io::stdout().lock();
                let written = {
                    let trimmed = answer.trim_end_matches(['\n', '\r']);
                    // A pipe gets the answer exactly; a terminal sees it made safe.
                    let shown = if self.opts.terminal.stdout {
                        crate::text::visible(trimmed)
                    } else {
                        std::borrow::Cow::Borrowed(trimmed)
                    };
                    out.write_all(shown.as_bytes())
                        .and_then(|_| out.write_all(b"\n"))
                };
                // A reader that went away (`| head`) is not a failure of ours.
                let _ = written.and_then(|_| out.flush());
                ExecOutcome::Answered(answer)
            }
            RunOutcome::Interrupted => {
                self.end_stream_line();
                eprintln!("{}", self.opts.style.warning("cancelled"));
                ExecOutcome::Interrupted
            }
            RunOutcome::Failed { message } => {
                self.end_stream_line();
                ExecOutcome::Failed(message)
            }
            RunOutcome::LimitReached { message } => {
                self.end_stream_line();
                ExecOutcome::LimitReached(message)
            }
        }
    }

    /// Ends the answer shown so far: what the renderer holds is printed,
    /// so whatever follows comes after the text it belongs to.
    /// Keeps a turn's text (stdout a pipe) for stderr, up to
    /// [`TURN_TEXT_MAX`] bytes, marking where it was cut.
    fn keep_turn_text(&mut self, text: &str) {
        let room = TURN_TEXT_MAX.saturating_sub(self.turn_text.len());
        if room == 0 {
            return;
        }
        if text.len() <= room {
            self.turn_text.push_str(text);
        } else {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.turn_text.push_str(&text[..cut]);
            // Past the limit now: nothing more is kept this turn.
            self.turn_text.push_str(" …");
        }
    }

    fn end_stream_line(&mut self) {
        if let Some(md) = self.md.as_mut() {
            let rest = md.finish();
            self.write_answer(&rest);
        }
        if self.stream_stdout && self.streamed_any && !self.at_line_start {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"\n");
            let _ = out.flush();
            self.at_line_start = true;
        }
    }

    /// Rendered lines of the answer to stdout, under the spinner's line.
    fn write_answer(&mut self, lines: &str) {
        if lines.is_empty() {
            return;
        }
        self.hide_spinner();
        let mut out = std::io::stdout().lock();
        // A reader that went away is not a failure of ours.
        let _ = out.write_all(lines.as_bytes()).and_then(|_| out.flush());
        self.at_line_start = lines.ends_with('\n');
    }

    /// Takes the spinner's line off the screen; the next tick draws it again.
    fn hide_spinner(&mut self) {
        if self.spinner_shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.spinner_shown = false;
        }
    }

    fn close_reasoning(&mut self) {
        if self.reasoning_open {
            eprintln!();
            self.reasoning_open = false;
        }
    }

    fn draw_spinner(&mut self) {
        if self.reasoning_open {
            return;
        }
        if let Some(s) = &mut self.spinner {
            s.frame = (s.frame + 1) % SPINNER.len();
            let mut line = format!(
                "{} {} {:.1}s",
                SPINNER[s.frame],
                s.label,
                s.started.elapsed().as_secs_f64()
            );
            // The running command's latest line, cut so the whole stays on
            // one row (a wrapped spinner line could not be cleared).
            if let Some(out) = &self.live_line {
                let width = crossterm::terminal::size().map_or(80, |(w, _)| w as usize);
                let room = width.saturating_sub(line.chars().count() + 3);
                if room >= 8 {
                    let fitted = super::toolview::live_lines(out, "", room + 1);
                    if let Some(f) = fitted.first() {
                        line.push_str(" · ");
                        line.push_str(f);
                    }
                }
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{}", self.opts.style.dim(&line));
            let _ = err.flush();
            self.spinner_shown = true;
        }
    }

    fn clear_spinner(&mut self) {
        if self.spinner.take().is_some() && self.spin {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
        self.spinner_shown = false;
    }
}

impl Renderer for ExecFrontEnd {
    /// A tick of the spinner.
    type Input = ();
    const CTRL_C: bool = true;

    fn on_event(&mut self, ev: Event, _ops: &OpSender) -> Flow {
        // Another run's end (not this prompt's) ends nothing here.
        if matches!(ev.kind, EventKind::RunFinished(_)) && !ev.ends_run_of(self.prompt) {
            return Flow::Continue;
        }
        if let EventKind::RunFinished(RunEnd { outcome }) = ev.kind {
            self.clear_spinner();
            self.outcome = Some(self.finish(outcome));
            return Flow::Stop;
        }
        if let EventKind::PlanReady { plan, .. } = &ev.kind {
            if self.plan_ends {
                self.clear_spinner();
                // Text the model streamed before the call is not the plan:
                // what the renderer still holds of it goes out first.
                if let Some(md) = self.md.as_mut() {
                    let held = md.finish();
                    self.write_answer(&held);
                }
                self.streamed_any = false;
                let text = plan.clone();
                self.outcome = Some(self.finish(RunOutcome::Answered {
                    text,
                    refused: false,
                }));
                return Flow::Stop;
            }
        }
        self.handle(ev.kind);
        Flow::Continue
    }

    fn on_elicitation(&mut self, _question: &ElicitationQuestion) -> Elicitation {
        Elicitation::Refuse(QUESTION_REFUSED.into())
    }

    fn on_approval(&mut self, req: &ApprovalQuestion) -> Approval {
        self.clear_spinner();
        Approval::Ask(Box::pin(ask(self.opts.style, req.clone())))
    }

    async fn input(&mut self) {
        if self.spin && self.spinner.is_some() {
            self.tick.tick().await;
        } else {
            std::future::pending::<()>().await;
        }
    }

    async fn on_input(&mut self, _tick: (), _ops: &OpSender) -> Flow {
        self.draw_spinner();
        Flow::Continue
    }

    fn on_ctrl_c(&mut self, again: bool) {
        self.clear_spinner();
        // The answer so far goes out before the note that ends it.
        self.end_stream_line();
        if !again {
            eprintln!(
                "{}",
                self.opts
                    .style
                    .warning("interrupted: cancelling (Ctrl-C again to quit now)")
            );
        }
    }
}

/// Why exec declines a server's question (told to the model with the
/// decline): it runs unattended, so nobody fills in a form.
pub(crate) const QUESTION_REFUSED: &str =
    "buddy exec does not ask a server's questions (the REPL does)";

/// The one stderr line exec and `exec --json` give a server's question.
pub(crate) fn question_refused_line(st: Style, question: &ElicitationQuestion) -> String {
    format!(
        "{} the MCP server `{}` asked \"{}\"; declined: {QUESTION_REFUSED}",
        st.warning("question:"),
        crate::text::one_line(&question.server, 60),
        crate::text::one_line(&question.message, 200)
    )
}

/// Asks on the controlling terminal, showing the change (`detail`) first;
/// a failure to ask denies. Shared by `exec` and `exec --json`.
pub(crate) async fn ask(st: Style, question: ApprovalQuestion) -> Decision {
    let ApprovalQuestion {
        actor,
        command,
        detail,
        always,
        subagent,
        ..
    } = question;
    let actor = match subagent {
        Some(name) => format!("[{name}] {actor}"),
        None => actor,
    };
    let (shown, note) = super::approval_command(&command);
    let mut prompt = String::new();
    for line in detail
        .map(|d| super::detail_lines(&d, st))
        .unwrap_or_default()
    {
        prompt.push_str(&line);
        prompt.push('\n');
    }
    if let Some(note) = note {
        prompt.push_str(&st.warning(&format!("note: {note}")));
        prompt.push('\n');
    }
    prompt.push_str(&format!(
        "{}{} {} {} ",
        st.actor(&crate::text::visible(&actor)),
        st.actor("$"),
        st.accent(&shown),
        st.warning(&super::approval_choices(always.as_deref(), false))
    ));
    let asked = tokio::task::spawn_blocking(move || ask_on_tty(&prompt, always.is_some())).await;
    match asked {
        Ok(Some(decision)) => decision,
        _ => Decision::Deny {
            reason: Some("approval is required and the terminal could not be asked".into()),
        },
    }
}

/// Asks on the controlling terminal with one key, as the REPL does: `y`,
/// `n`, `a` (when "always" is offered), `e` and then a reason line for the
/// model; Esc, Ctrl-C or Ctrl-D deny; other keys are ignored. `None` when
/// there is no terminal. The terminal is in raw mode only while the key is
/// awaited, and left as it was on every path.
fn ask_on_tty(prompt: &str, always_offered: bool) -> Option<Decision> {
    use std::io::BufRead;
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let mut writer = tty.try_clone().ok()?;
    writer.write_all(prompt.as_bytes()).ok()?;
    writer.flush().ok()?;
    let choice = read_choice(always_offered)?;
    let word = match choice {
        Some(super::Choice::Yes) => "yes",
        Some(super::Choice::Always) => "always",
        Some(super::Choice::Explain) => "explain",
        _ => "no",
    };
    writer.write_all(format!("{word}\n").as_bytes()).ok()?;
    writer.flush().ok()?;
    Some(match choice {
        Some(super::Choice::Yes) => Decision::Approve,
        Some(super::Choice::Always) => Decision::ApproveAlways,
        Some(super::Choice::Explain) => {
            writer.write_all(b"reason for the model: ").ok()?;
            writer.flush().ok()?;
            let mut line = String::new();
            std::io::BufReader::new(tty).read_line(&mut line).ok()?;
            let reason = line.trim().to_string();
            Decision::Deny {
                reason: Some(reason).filter(|r| !r.is_empty()),
            }
        }
        _ => Decision::Deny { reason: None },
    })
}

/// Waits for one answering key in raw mode. `Some(None)` is a denial key
/// (Esc, Ctrl-C, Ctrl-D); `None` means the terminal could not be read.
fn read_choice(always_offered: bool) -> Option<Option<super::Choice>> {
    use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    struct Raw;
    impl Drop for Raw {
        fn drop(&mut self) {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
    crossterm::terminal::enable_raw_mode().ok()?;
    let _raw = Raw;
    loop {
        let Event::Key(key) = event::read().ok()? else {
            continue;
        };
        if key.kind == KeyEventKind::Release {
            continue;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => return Some(None),
            KeyCode::Char('c' | 'd') if ctrl => return Some(None),
            KeyCode::Char(c) if !ctrl => match super::Choice::parse(&c.to_string()) {
                Some(super::Choice::Always) if !always_offered => {}
                Some(super::Choice::Remember) | None => {}
                Some(choice) => return Some(Some(choice)),
            },
            _ => {}
        }
    }
}
