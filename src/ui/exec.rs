//! The one-shot front end of `buddy exec`: renders agent events to stderr, asks
//! for approvals on the terminal (or denies them when there is none), and puts
//! the final answer alone on stdout.

use super::style::{preview, Style};
use crate::agent::{cancel::CancelHandle, AgentError, AgentEvent};
use crate::tools::{Approval, ApprovalRequest};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    pub style: Style,
    pub show_tool_calls: bool,
    pub show_tokens: bool,
    pub auto_approve: bool,
}

/// How the turn ended, for `main` to turn into an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutcome {
    Answered,
    Failed(String),
    Interrupted,
}

pub struct ExecFrontEnd {
    opts: ExecOptions,
    /// Stream the answer to stdout as it arrives: only when a person is reading it.
    stream_stdout: bool,
    spinner: Option<Spinner>,
    streamed_any: bool,
    at_line_start: bool,
    reasoning_open: bool,
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
        }
    }

    /// Renders events until the turn finishes. Ctrl-C cancels the turn (a second
    /// one gives up waiting).
    pub async fn run(
        mut self,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        cancel: &CancelHandle,
    ) -> ExecOutcome {
        let spin = std::io::stderr().is_terminal();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut interrupted = false;
        loop {
            tokio::select! {
                ev = events.recv() => match ev {
                    Some(AgentEvent::Finished(result)) => {
                        self.clear_spinner();
                        return self.finish(result, interrupted);
                    }
                    Some(ev) => self.handle(ev).await,
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
                    cancel.cancel();
                }
                _ = tick.tick(), if spin && self.spinner.is_some() => self.draw_spinner(),
            }
        }
    }

    async fn handle(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        if !matches!(ev, AgentEvent::Reasoning { .. } | AgentEvent::TextDelta(_)) {
            self.close_reasoning();
        }
        match ev {
            AgentEvent::WaitingForModel { iteration } => {
                let label = if iteration == 1 {
                    "thinking".to_string()
                } else {
                    format!("thinking (step {iteration})")
                };
                self.spinner = Some(Spinner {
                    label,
                    started: Instant::now(),
                    frame: 0,
                });
            }
            AgentEvent::TextDelta(t) => {
                if self.stream_stdout {
                    self.clear_spinner();
                    self.close_reasoning();
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(t.as_bytes());
                    let _ = out.flush();
                    self.streamed_any = true;
                    self.at_line_start = t.ends_with('\n');
                }
            }
            AgentEvent::Reasoning { field, text } => {
                self.clear_spinner();
                let mut err = std::io::stderr().lock();
                if !self.reasoning_open {
                    let _ = write!(err, "{}", st.dim(&format!("[{field}] ")));
                    self.reasoning_open = true;
                }
                let _ = write!(err, "{}", st.dim(&text));
                let _ = err.flush();
            }
            AgentEvent::ToolCall {
                name, arguments, ..
            } => {
                self.end_stream_line();
                self.close_reasoning();
                if self.opts.show_tool_calls {
                    self.clear_spinner();
                    eprintln!(
                        "{} {}",
                        st.tool(&format!("▶ {name}")),
                        st.dim(&preview(&arguments, 80))
                    );
                }
                self.spinner = Some(Spinner {
                    label: format!("running {name}"),
                    started: Instant::now(),
                    frame: 0,
                });
            }
            AgentEvent::ToolResult {
                name,
                text,
                is_error,
                ..
            } => {
                if self.opts.show_tool_calls {
                    self.clear_spinner();
                    let line = preview(&text, 120);
                    if is_error {
                        eprintln!(
                            "  {} {}",
                            st.error("✗"),
                            st.error(&format!("{name}: {line}"))
                        );
                    } else {
                        eprintln!("  {} {}", st.dim("←"), st.dim(&line));
                    }
                }
            }
            AgentEvent::Usage {
                prompt_tokens,
                completion_tokens,
                cache_read_tokens,
                cache_write_tokens,
                session_total,
                estimated,
            } => {
                if self.opts.show_tokens {
                    self.clear_spinner();
                    let approx = if estimated { "~" } else { "" };
                    let cache =
                        crate::agent::tokens::cache_note(cache_read_tokens, cache_write_tokens);
                    eprintln!(
                        "{}",
                        st.dim(&format!(
                            "tokens: prompt {approx}{prompt_tokens}, completion {approx}{completion_tokens}, session {approx}{session_total}{cache}"
                        ))
                    );
                }
            }
            AgentEvent::Retrying {
                attempt,
                max_retries,
                delay,
                error,
            } => {
                self.clear_spinner();
                eprintln!(
                    "{} {error}; retrying in {:.1} s (attempt {attempt} of {max_retries})",
                    st.warning("warning:"),
                    delay.as_secs_f64()
                );
            }
            AgentEvent::Warning(w) => {
                self.clear_spinner();
                self.close_reasoning();
                eprintln!("{} {w}", st.warning("warning:"));
            }
            AgentEvent::ApprovalNeeded { request, reply } => {
                self.clear_spinner();
                self.close_reasoning();
                let answer = self.approve(request).await;
                let _ = reply.send(answer);
            }
            AgentEvent::Finished(_) => {}
        }
    }

    async fn approve(&mut self, request: ApprovalRequest) -> Approval {
        let st = self.opts.style;
        if self.opts.auto_approve {
            return Approval::Approved;
        }
        let prompt = format!(
            "{}{} {} {} ",
            st.actor(&request.actor),
            st.actor("$"),
            st.accent(&request.command),
            st.warning("-- approve? [y/N]")
        );
        let asked = tokio::task::spawn_blocking(move || ask_on_tty(&prompt)).await;
        match asked {
            Ok(Some(true)) => Approval::Approved,
            Ok(Some(false)) => Approval::Denied {
                reason: "the user declined to run it".into(),
            },
            _ => {
                eprintln!(
                    "{} {} needs approval but there is no terminal to ask; denied `{}`. Rerun with --dangerously-auto-approve to allow commands, or set tools.shell_confirm = false.",
                    st.warning("warning:"),
                    request.tool,
                    preview(&request.command, 60)
                );
                Approval::Denied {
                    reason: "approval is required and there is no terminal to ask; the user can rerun `buddy exec` with --dangerously-auto-approve to allow commands".into(),
                }
            }
        }
    }

    fn finish(&mut self, result: Result<String, AgentError>, interrupted: bool) -> ExecOutcome {
        self.close_reasoning();
        match result {
            Ok(answer) => {
                let mut out = std::io::stdout().lock();
                let written = if self.stream_stdout && self.streamed_any {
                    if self.at_line_start {
                        Ok(())
                    } else {
                        out.write_all(b"\n")
                    }
                } else {
                    let trimmed = answer.trim_end_matches(['\n', '\r']);
                    out.write_all(trimmed.as_bytes())
                        .and_then(|_| out.write_all(b"\n"))
                };
                // A reader that went away (`| head`) is not a failure of ours.
                let _ = written.and_then(|_| out.flush());
                ExecOutcome::Answered
            }
            Err(AgentError::Cancelled) => {
                self.end_stream_line();
                let _ = interrupted;
                eprintln!("{}", self.opts.style.warning("cancelled"));
                ExecOutcome::Interrupted
            }
            Err(e) => {
                self.end_stream_line();
                ExecOutcome::Failed(e.to_string())
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
            let line = format!(
                "{} {} {:.1}s",
                FRAMES[s.frame],
                s.label,
                s.started.elapsed().as_secs_f64()
            );
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
fn ask_on_tty(prompt: &str) -> Option<bool> {
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
