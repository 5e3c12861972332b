//! The one-shot front end of `buddy exec` (and of each line of the plain line
//! session): renders one run's events to stderr, asks on the terminal when the
//! agent requests approval, and puts the final answer alone on stdout. Whether
//! a command needs asking at all is the agent's decision, not this file's.

use super::style::{preview, Style};
use crate::agent::protocol::{DecidedBy, Decision, EventKind, Op, RunOutcome};
use crate::agent::AgentHandle;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    pub style: Style,
    pub show_tool_calls: bool,
    pub show_tokens: bool,
}

/// How the turn ended, for `main` to turn into an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutcome {
    Answered,
    Failed(String),
    Interrupted,
    /// An execution limit ended the run (exit 1, like a failure).
    LimitReached(String),
}

pub struct ExecFrontEnd {
    opts: ExecOptions,
    /// Stream the answer to stdout as it arrives: only when a person is reading it.
    stream_stdout: bool,
    spinner: Option<Spinner>,
    streamed_any: bool,
    at_line_start: bool,
    reasoning_open: bool,
    /// The latest output line of a running tool call, shown after the spinner.
    live_line: Option<String>,
}

struct Spinner {
    label: String,
    started: Instant,
    frame: usize,
}

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

impl ExecFrontEnd {
    pub fn new(opts: ExecOptions) -> Self {
        ExecFrontEnd {
            opts,
            stream_stdout: std::io::stdout().is_terminal(),
            spinner: None,
            streamed_any: false,
            at_line_start: true,
            reasoning_open: false,
            live_line: None,
        }
    }

    /// Renders events until the run finishes. Ctrl-C interrupts the run (a
    /// second one gives up waiting).
    pub async fn run(mut self, agent: &mut AgentHandle) -> ExecOutcome {
        let spin = std::io::stderr().is_terminal();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut interrupted = false;
        loop {
            tokio::select! {
                ev = agent.events.recv() => match ev {
                    Some(ev) => {
                        if let EventKind::RunFinished { outcome } = ev.kind {
                            self.clear_spinner();
                            return self.finish(outcome);
                        }
                        self.handle(ev.kind, agent).await;
                    }
                    None => {
                        self.clear_spinner();
                        return ExecOutcome::Failed("the agent stopped unexpectedly".into());
                    }
                },
                _ = tokio::signal::ctrl_c() => {
                    self.clear_spinner();
                    if interrupted {
                        return ExecOutcome::Interrupted;
                    }
                    interrupted = true;
                    eprintln!("{}", self.opts.style.warning("interrupted: cancelling (Ctrl-C again to quit now)"));
                    let _ = agent.ops.send(Op::Interrupt).await;
                }
                _ = tick.tick(), if spin && self.spinner.is_some() => self.draw_spinner(),
            }
        }
    }

    async fn handle(&mut self, ev: EventKind, agent: &AgentHandle) {
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
                self.clear_spinner();
                self.close_reasoning();
                let mut out = std::io::stdout().lock();
                // Only ever a terminal here: its text is shown, not obeyed.
                let _ = out.write_all(crate::text::visible(&t).as_bytes());
                let _ = out.flush();
                self.streamed_any = true;
                self.at_line_start = t.ends_with('\n');
            }
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
                if self.opts.show_tool_calls {
                    self.clear_spinner();
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
            EventKind::ToolResult {
                name,
                text,
                is_error,
                ..
            } => {
                self.live_line = None;
                self.clear_spinner();
                for line in super::toolview::result_lines(&name, &text, is_error, st) {
                    eprintln!("{line}");
                }
            }
            EventKind::Usage {
                prompt_tokens,
                completion_tokens,
                cache_read_tokens,
                cache_write_tokens,
                session_total,
                estimated,
            } if self.opts.show_tokens => {
                self.clear_spinner();
                let approx = if estimated { "~" } else { "" };
                let cache = crate::agent::tokens::cache_note(cache_read_tokens, cache_write_tokens);
                eprintln!(
                    "{}",
                    st.dim(&format!(
                        "tokens: prompt {approx}{prompt_tokens}, completion {approx}{completion_tokens}, session {approx}{session_total}{cache}"
                    ))
                );
            }
            EventKind::Retrying {
                attempt,
                max_retries,
                delay_ms,
                error,
            } => {
                self.clear_spinner();
                eprintln!(
                    "{} {}; retrying in {:.1} s (attempt {attempt} of {max_retries})",
                    st.warning("warning:"),
                    crate::text::visible(&error),
                    delay_ms as f64 / 1000.0
                );
            }
            EventKind::Warning { message } => {
                self.clear_spinner();
                eprintln!(
                    "{} {}",
                    st.warning("warning:"),
                    crate::text::visible(&message)
                );
            }
            EventKind::Error { message } => {
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
            EventKind::ApprovalRequested {
                call_id,
                actor,
                command,
                ..
            } => {
                self.clear_spinner();
                let decision = self.ask(&actor, &command).await;
                let _ = agent.ops.send(Op::Approve { call_id, decision }).await;
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

    /// Asks on the controlling terminal; a failure to ask denies.
    async fn ask(&mut self, actor: &str, command: &str) -> Decision {
        let st = self.opts.style;
        let (shown, note) = super::approval_command(command);
        let mut prompt = String::new();
        if let Some(note) = note {
            prompt.push_str(&st.warning(&format!("note: {note}")));
            prompt.push('\n');
        }
        prompt.push_str(&format!(
            "{}{} {} {} ",
            st.actor(&crate::text::visible(actor)),
            st.actor("$"),
            st.accent(&shown),
            st.warning("-- approve? [y/N]")
        ));
        let asked = tokio::task::spawn_blocking(move || ask_on_tty(&prompt)).await;
        match asked {
            Ok(Some(true)) => Decision::Approve,
            Ok(Some(false)) => Decision::Deny { reason: None },
            _ => Decision::Deny {
                reason: Some("approval is required and the terminal could not be asked".into()),
            },
        }
    }

    fn finish(&mut self, outcome: RunOutcome) -> ExecOutcome {
        self.close_reasoning();
        match outcome {
            RunOutcome::Answered { text: answer } => {
                let mut out = std::io::stdout().lock();
                let written = if self.stream_stdout && self.streamed_any {
                    if self.at_line_start {
                        Ok(())
                    } else {
                        out.write_all(b"\n")
                    }
                } else {
                    let trimmed = answer.trim_end_matches(['\n', '\r']);
                    // A pipe gets the answer exactly; a terminal sees it made safe.
                    let shown = if std::io::stdout().is_terminal() {
                        crate::text::visible(trimmed)
                    } else {
                        std::borrow::Cow::Borrowed(trimmed)
                    };
                    out.write_all(shown.as_bytes())
                        .and_then(|_| out.write_all(b"\n"))
                };
                // A reader that went away (`| head`) is not a failure of ours.
                let _ = written.and_then(|_| out.flush());
                ExecOutcome::Answered
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

    fn end_stream_line(&mut self) {
        if self.stream_stdout && self.streamed_any && !self.at_line_start {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"\n");
            let _ = out.flush();
            self.at_line_start = true;
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
            s.frame = (s.frame + 1) % FRAMES.len();
            let mut line = format!(
                "{} {} {:.1}s",
                FRAMES[s.frame],
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
        }
    }

    fn clear_spinner(&mut self) {
        if self.spinner.take().is_some() && std::io::stderr().is_terminal() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// Asks a yes/no question on the controlling terminal. `None` when there is none.
pub(crate) fn ask_on_tty(prompt: &str) -> Option<bool> {
    use std::io::BufRead;
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let mut writer = tty.try_clone().ok()?;
    writer.write_all(prompt.as_bytes()).ok()?;
    writer.flush().ok()?;
    let mut line = String::new();
    std::io::BufReader::new(tty).read_line(&mut line).ok()?;
    let answer = line.trim().to_ascii_lowercase();
    Some(answer == "y" || answer == "yes")
}
