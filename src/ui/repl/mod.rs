//! The interactive REPL: a raw-mode line editor whose prompts run as background
//! tasks. The agent's events are rendered above the input line, so the prompt
//! stays usable while a task runs; a status line shows the task's state and
//! elapsed time. Slash commands inspect and steer tasks, approvals, models and
//! sessions. What the REPL needs from the rest of buddy (status text, sessions,
//! model switching) it asks of a `ReplHost`, so it knows no config or files.

pub mod approval;
pub mod buffer;
pub mod commands;
pub mod editor;
pub mod history;

use crate::agent::cancel::CancelHandle;
use crate::agent::{Agent, AgentError, AgentEvent, Cancel};
use crate::auth::store::AuthStore;
use crate::auth::Issuer;
use crate::tools::{Approval, ApprovalRequest};
use crate::ui::style::{preview, Style};
use approval::{short_duration, Policy};
use commands::Slash;
use crossterm::event::Event;
use editor::{Editor, Outcome};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// What the REPL asks of the application around it.
pub trait ReplHost {
    /// `/status` text.
    fn status(&self, agent: &Agent) -> String;
    /// `/context` text.
    fn context(&self, agent: &Agent) -> String;
    /// `/session` text.
    fn sessions(&self) -> String;
    /// Called before each prompt; starts saving if nothing is saved yet.
    /// Returns a warning to show, if any.
    fn ensure_session(&mut self, agent: &mut Agent) -> Option<String>;
    /// `/session resume`: replaces the agent's history. Returns what to show.
    fn resume_session(&mut self, agent: &mut Agent, query: &str) -> Result<String, String>;
    /// `/session new`.
    fn new_session(&mut self, agent: &mut Agent) -> String;
    /// Profile names, in config order (for `/model` and its index form).
    fn profiles(&self) -> Vec<String>;
    /// The profile in use, if it is one of `profiles`.
    fn current_profile(&self) -> Option<String>;
    /// `/model NAME|INDEX`.
    fn switch_model(&mut self, agent: &mut Agent, choice: &str) -> Result<String, String>;
    /// `/login [provider|profile]`: where to log in and where to keep the tokens.
    fn login_target(&self, target: Option<&str>) -> Result<(Issuer, AuthStore), String>;
    /// After a login: picks up the new tokens if the active profile uses them.
    fn after_login(&mut self, agent: &mut Agent) -> Option<String>;
}

enum LoginEvent {
    Line(String),
    Done(Result<Result<String, String>, tokio::task::JoinError>),
}

/// A `/login` in progress: the issuer's instructions as they come, then the end.
struct LoginRun {
    lines: mpsc::UnboundedReceiver<String>,
    handle: tokio::task::JoinHandle<Result<String, String>>,
}

pub struct ReplOptions {
    pub style: Style,
    pub prompt: String,
    pub show_tool_calls: bool,
    pub show_tokens: bool,
    pub history_file: Option<PathBuf>,
    /// Printed once above the first prompt (e.g. the resumed exchange).
    pub banner: String,
}

struct Task {
    id: u64,
    started: Instant,
    state: String,
    cancel: CancelHandle,
    deadline: Option<Instant>,
    handle: JoinHandle<Agent>,
}

/// The arrow-key list bare `/model` opens.
struct Picker {
    items: Vec<String>,
    selected: usize,
}

impl Picker {
    fn render(&self) -> String {
        let mut out = String::from("pick a model profile (↑/↓, Enter to switch, Esc to cancel)");
        for (i, item) in self.items.iter().enumerate() {
            let mark = if i == self.selected { "›" } else { " " };
            out.push_str(&format!("\n  {mark} {}  {item}", i + 1));
        }
        out
    }
}

struct PendingApproval {
    request: ApprovalRequest,
    reply: oneshot::Sender<Approval>,
    /// The input that was being typed, given back afterwards.
    stashed: String,
}

/// Restores the terminal however the REPL ends, panics included.
struct RawMode;

impl RawMode {
    fn enable() -> std::io::Result<RawMode> {
        crossterm::terminal::enable_raw_mode()?;
        let _ = crossterm::execute!(std::io::stderr(), crossterm::event::EnableBracketedPaste);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        Ok(RawMode)
    }
}

fn restore_terminal() {
    let _ = crossterm::execute!(std::io::stderr(), crossterm::event::DisableBracketedPaste);
    let _ = crossterm::terminal::disable_raw_mode();
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Terminal events, read on a thread of their own (crossterm's read blocks).
fn terminal_events() -> mpsc::UnboundedReceiver<std::io::Result<Event>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || loop {
        let ev = crossterm::event::read();
        let failed = ev.is_err();
        if tx.send(ev).is_err() || failed {
            return;
        }
    });
    rx
}

pub struct Repl<'h> {
    opts: ReplOptions,
    host: &'h mut dyn ReplHost,
    editor: Editor,
    agent: Option<Agent>,
    events: mpsc::UnboundedReceiver<AgentEvent>,
    task: Option<Task>,
    next_id: u64,
    policy: Policy,
    approval: Option<PendingApproval>,
    picker: Option<Picker>,
    login: Option<LoginRun>,
    /// Streamed text not yet ending in a newline.
    partial: String,
    reasoning: String,
    out: std::io::Stderr,
}

impl<'h> Repl<'h> {
    pub fn new(
        agent: Agent,
        events: mpsc::UnboundedReceiver<AgentEvent>,
        host: &'h mut dyn ReplHost,
        opts: ReplOptions,
    ) -> Repl<'h> {
        let history = history::History::load(opts.history_file.clone());
        let prompt = opts.style.actor(&opts.prompt);
        Repl {
            editor: Editor::new(prompt, history, commands::NAMES),
            opts,
            host,
            agent: Some(agent),
            events,
            task: None,
            next_id: 1,
            policy: Policy::Ask,
            approval: None,
            picker: None,
            login: None,
            partial: String::new(),
            reasoning: String::new(),
            out: std::io::stderr(),
        }
    }

    fn dim(&self) -> impl Fn(&str) -> String {
        let style = self.opts.style;
        move |s: &str| style.dim(s)
    }

    fn say(&mut self, text: &str) {
        let dim = self.dim();
        let _ = self.editor.print_above(&mut self.out, text, dim);
    }

    fn redraw(&mut self) {
        let dim = self.dim();
        let _ = self.editor.redraw(&mut self.out, dim);
    }

    /// Runs until the user quits; returns the exit code.
    pub async fn run(mut self) -> i32 {
        let _raw = match RawMode::enable() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: cannot switch the terminal to raw mode: {e}");
                return 1;
            }
        };
        let mut input = terminal_events();
        if let Ok((w, _)) = crossterm::terminal::size() {
            self.editor.set_width(w as usize);
        }
        if !self.opts.banner.is_empty() {
            let banner = self.opts.banner.clone();
            self.say(&banner);
        } else {
            self.redraw();
        }
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // A closed terminal or a `kill` must still leave the terminal usable.
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).ok();
        let mut hangup = signal(SignalKind::hangup()).ok();
        let mut code = 0;
        loop {
            tokio::select! {
                Some(()) = async { term.as_mut()?.recv().await } => {
                    code = 128 + 15;
                    break;
                }
                Some(()) = async { hangup.as_mut()?.recv().await } => {
                    code = 128 + 1;
                    break;
                }
                ev = input.recv() => match ev {
                    Some(Ok(ev)) => {
                        if self.on_input(ev).await {
                            break;
                        }
                    }
                    _ => break,
                },
                Some(ev) = self.events.recv() => self.on_agent_event(ev),
                agent = async { (&mut self.task.as_mut().expect("guarded").handle).await }, if self.task.is_some() => {
                    self.on_task_done(agent);
                }
                ev = async {
                    let run = self.login.as_mut().expect("guarded");
                    tokio::select! {
                        Some(line) = run.lines.recv() => LoginEvent::Line(line),
                        done = &mut run.handle => LoginEvent::Done(done),
                    }
                }, if self.login.is_some() => match ev {
                    LoginEvent::Line(line) => self.say(&line),
                    LoginEvent::Done(done) => self.on_login_done(done),
                },
                _ = tick.tick() => self.on_tick(),
            }
        }
        if let Some(l) = self.login.take() {
            l.handle.abort();
        }
        if let Some(t) = self.task.take() {
            t.cancel.cancel();
            let _ = t.handle.await;
        }
        let _ = self.editor.finish(&mut self.out);
        code
    }

    /// Handles one terminal event; true to quit.
    async fn on_input(&mut self, ev: Event) -> bool {
        if let Event::Resize(w, _) = ev {
            self.editor.set_width(w as usize);
            self.redraw();
            return false;
        }
        if self.picker.is_some() {
            self.on_picker_input(&ev);
            return false;
        }
        match self.editor.handle(&ev) {
            Outcome::Continue => self.redraw(),
            Outcome::Interrupt => {
                if let Some(p) = self.approval.take() {
                    self.answer(p, false);
                }
                match &self.task {
                    Some(t) => {
                        t.cancel.cancel();
                        let id = t.id;
                        self.say(&self.opts.style.warning(&format!("cancelling task {id}…")));
                    }
                    None => self.redraw(),
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
        }
        false
    }

    fn on_picker_input(&mut self, ev: &Event) {
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
        let n = picker.items.len();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => picker.selected = (picker.selected + n - 1) % n,
            KeyCode::Char('p') if ctrl => picker.selected = (picker.selected + n - 1) % n,
            KeyCode::Down | KeyCode::Char('j') => picker.selected = (picker.selected + 1) % n,
            KeyCode::Char('n') if ctrl => picker.selected = (picker.selected + 1) % n,
            KeyCode::Enter => {
                let choice = (picker.selected + 1).to_string();
                self.picker = None;
                self.editor.set_live(None);
                self.on_command(Slash::Model(Some(choice)));
                return;
            }
            KeyCode::Esc | KeyCode::Char('q') => {
                self.picker = None;
                self.editor.set_live(None);
                self.say("model unchanged");
                return;
            }
            KeyCode::Char('c') if ctrl => {
                self.picker = None;
                self.editor.set_live(None);
                self.say("model unchanged");
                return;
            }
            _ => return,
        }
        let view = picker.render();
        self.editor.set_live(Some(view));
        self.redraw();
    }

    fn answer(&mut self, p: PendingApproval, yes: bool) {
        let answer = if yes {
            Approval::Approved
        } else {
            Approval::Denied {
                reason: "the user denied it".into(),
            }
        };
        let _ = p.reply.send(answer);
        let prompt = self.opts.style.actor(&self.opts.prompt);
        self.editor.set_prompt(prompt);
        self.editor.buffer.set(&p.stashed);
        let verdict = if yes { "approved" } else { "denied" };
        self.say(
            &self
                .opts
                .style
                .dim(&format!("{verdict}: {}", p.request.command)),
        );
    }

    fn on_line(&mut self, line: String) -> bool {
        if let Some(p) = self.approval.take() {
            match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => self.answer(p, true),
                "n" | "no" => self.answer(p, false),
                _ => {
                    self.approval = Some(p);
                    self.say("answer y (yes) or n (no)");
                }
            }
            return false;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            self.redraw();
            return false;
        }
        match commands::parse(trimmed) {
            Some(Err(e)) => self.say(&self.opts.style.error(&e)),
            Some(Ok(cmd)) => return self.on_command(cmd),
            None => {
                if self.task.is_some() {
                    self.say("a task is running; only /ps, /kill, /timeout, /approve, /status and /context work until it ends");
                } else {
                    self.start_task(line);
                }
            }
        }
        false
    }

    /// Starts the device flow in the background; the code and link appear
    /// above the prompt, which stays usable.
    fn start_login(&mut self, target: Option<&str>) {
        if self.login.is_some() {
            self.say("a login is already in progress");
            return;
        }
        let (issuer, store) = match self.host.login_target(target) {
            Ok(t) => t,
            Err(e) => {
                let e = self.opts.style.error(&e);
                self.say(&e);
                return;
            }
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = tokio::spawn(async move {
            let say = move |line: &str| {
                let _ = tx.send(line.to_string());
            };
            crate::auth::login(&issuer, &store, &say).await?;
            Ok(format!(
                "logged in to {}; tokens saved in {}",
                issuer.provider,
                store.path().display()
            ))
        });
        self.login = Some(LoginRun { lines: rx, handle });
    }

    fn on_login_done(&mut self, done: Result<Result<String, String>, tokio::task::JoinError>) {
        // Lines sent just before the end are still queued.
        if let Some(mut run) = self.login.take() {
            while let Ok(line) = run.lines.try_recv() {
                self.say(&line);
            }
        }
        match done {
            Ok(Ok(text)) => {
                self.say(&text);
                if let Some(mut agent) = self.agent.take() {
                    let note = self.host.after_login(&mut agent);
                    self.agent = Some(agent);
                    if let Some(note) = note {
                        self.say(&note);
                    }
                }
            }
            Ok(Err(e)) => {
                let e = self.opts.style.error(&format!("login failed: {e}"));
                self.say(&e);
            }
            Err(_) => self.say("login stopped"),
        }
    }

    fn on_command(&mut self, cmd: Slash) -> bool {
        let busy = self.task.is_some();
        if busy && !cmd.allowed_while_busy() {
            self.say("a task is running; only /ps, /kill, /timeout, /approve, /status and /context work until it ends");
            return false;
        }
        let now = Instant::now();
        match cmd {
            Slash::Quit => return true,
            Slash::Help => self.say(commands::HELP),
            Slash::Ps => {
                let text = match &self.task {
                    Some(t) => format!(
                        "task {}  {}  {}",
                        t.id,
                        t.state,
                        short_duration(t.started.elapsed())
                    ),
                    None => "no tasks running".into(),
                };
                self.say(&text);
            }
            Slash::Kill(id) => match &self.task {
                Some(t) if t.id == id => {
                    t.cancel.cancel();
                    self.say(&format!("cancelling task {id}…"));
                }
                _ => self.say(&format!("no running task {id} (see /ps)")),
            },
            Slash::Timeout { after, task } => match &mut self.task {
                Some(t) if task.is_none_or(|id| id == t.id) => {
                    t.deadline = Some(now + after);
                    let id = t.id;
                    self.say(&format!(
                        "task {id} will be cancelled in {}",
                        short_duration(after)
                    ));
                }
                _ => self.say(&match task {
                    Some(id) => format!("no running task {id} (see /ps)"),
                    None => "no task is running".into(),
                }),
            },
            Slash::Approve(arg) => {
                if let Some(arg) = arg {
                    self.policy = Policy::from_arg(&arg, now);
                }
                let text = format!("approval: {}", self.policy.describe(now));
                self.say(&text);
            }
            Slash::Status | Slash::Context => {
                let text = match self.agent.as_ref() {
                    Some(a) if matches!(cmd, Slash::Status) => self.host.status(a),
                    Some(a) => self.host.context(a),
                    None => "the agent is busy with a task; try again when it ends".into(),
                };
                self.say(&text);
            }
            Slash::SessionList => {
                let text = self.host.sessions();
                self.say(&text);
            }
            Slash::SessionNew => {
                if let Some(mut agent) = self.agent.take() {
                    let text = self.host.new_session(&mut agent);
                    self.agent = Some(agent);
                    self.say(&text);
                }
            }
            Slash::SessionResume(query) => {
                if let Some(mut agent) = self.agent.take() {
                    let result = self.host.resume_session(&mut agent, &query);
                    self.agent = Some(agent);
                    match result {
                        Ok(text) => self.say(&text),
                        Err(e) => self.say(&self.opts.style.error(&e)),
                    }
                }
            }
            Slash::Login(target) => self.start_login(target.as_deref()),
            Slash::Model(choice) => match choice {
                None => {
                    let items = self.host.profiles();
                    if items.is_empty() {
                        self.say("no model profiles are configured");
                    } else {
                        let selected = self
                            .host
                            .current_profile()
                            .and_then(|c| items.iter().position(|p| *p == c))
                            .unwrap_or(0);
                        let picker = Picker { items, selected };
                        self.editor.set_live(Some(picker.render()));
                        self.picker = Some(picker);
                        self.redraw();
                    }
                }
                Some(choice) => {
                    if let Some(mut agent) = self.agent.take() {
                        let result = self.host.switch_model(&mut agent, &choice);
                        self.agent = Some(agent);
                        match result {
                            Ok(text) => self.say(&text),
                            Err(e) => self.say(&self.opts.style.error(&e)),
                        }
                    }
                }
            },
        }
        false
    }

    fn start_task(&mut self, prompt: String) {
        let Some(mut agent) = self.agent.take() else {
            return;
        };
        if let Some(w) = self.host.ensure_session(&mut agent) {
            self.say(&format!("{} {w}", self.opts.style.warning("warning:")));
        }
        let id = self.next_id;
        self.next_id += 1;
        let (handle, cancel) = Cancel::new();
        let echo = format!("{}{}", self.opts.style.dim(&self.opts.prompt), prompt);
        let join = tokio::spawn(async move {
            let _ = agent.run_turn(&prompt, cancel).await;
            agent
        });
        self.task = Some(Task {
            id,
            started: Instant::now(),
            state: "waiting for model".into(),
            cancel: handle,
            deadline: None,
            handle: join,
        });
        self.update_status();
        self.say(&echo);
    }

    fn on_task_done(&mut self, joined: Result<Agent, tokio::task::JoinError>) {
        // Everything the task sent is queued by now; show it while the task is
        // still known, so its end is reported under its own id.
        while let Ok(ev) = self.events.try_recv() {
            self.on_agent_event(ev);
        }
        let task = self.task.take();
        match joined {
            Ok(agent) => self.agent = Some(agent),
            Err(e) => {
                // The agent is lost with a panicked task; nothing can continue it.
                self.say(&self.opts.style.error(&format!("task failed: {e}")));
            }
        }
        if let Some(p) = self.approval.take() {
            self.answer(p, false);
        }
        let _ = task;
        self.editor.set_status(None);
        self.redraw();
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        if let Some(t) = &mut self.task {
            if t.deadline.is_some_and(|d| now >= d) {
                t.deadline = None;
                t.cancel.cancel();
                let id = t.id;
                self.say(
                    &self
                        .opts
                        .style
                        .warning(&format!("task {id} reached its timeout; cancelling")),
                );
            }
        }
        if self.task.is_some() {
            self.update_status();
            self.redraw();
        }
    }

    fn update_status(&mut self) {
        let status = self.task.as_ref().map(|t| {
            self.opts.style.dim(&format!(
                "[task {}] {} · {}",
                t.id,
                t.state,
                short_duration(t.started.elapsed())
            ))
        });
        self.editor.set_status(status);
    }

    fn set_state(&mut self, state: String) {
        if let Some(t) = &mut self.task {
            t.state = state;
        }
        self.update_status();
    }

    fn flush_partial(&mut self) {
        if !self.reasoning.is_empty() {
            let r = std::mem::take(&mut self.reasoning);
            self.say(&self.opts.style.dim(r.trim_end()));
        }
        if !self.partial.is_empty() {
            let p = std::mem::take(&mut self.partial);
            self.editor.set_live(None);
            self.say(&p);
        }
    }

    fn on_agent_event(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        match ev {
            AgentEvent::WaitingForModel { .. } => self.set_state("waiting for model".into()),
            AgentEvent::TextDelta(t) => {
                self.partial.push_str(&t);
                if let Some(i) = self.partial.rfind('\n') {
                    let done: String = self.partial.drain(..=i).collect();
                    self.editor.set_live(Some(self.partial.clone()));
                    self.say(done.trim_end_matches('\n'));
                } else {
                    // The unfinished line shows as it grows, above the prompt.
                    self.editor.set_live(Some(self.partial.clone()));
                    self.redraw();
                }
            }
            AgentEvent::Reasoning { text, .. } => {
                self.reasoning.push_str(&text);
                if let Some(i) = self.reasoning.rfind('\n') {
                    let done: String = self.reasoning.drain(..=i).collect();
                    self.say(&st.dim(done.trim_end_matches('\n')));
                }
            }
            AgentEvent::ToolCall {
                name, arguments, ..
            } => {
                self.flush_partial();
                self.set_state(format!("running {name}"));
                if self.opts.show_tool_calls {
                    self.say(&format!(
                        "{} {}",
                        st.tool(&format!("▶ {name}")),
                        preview(&arguments, 100)
                    ));
                }
            }
            AgentEvent::ToolResult { text, is_error, .. } => {
                if self.opts.show_tool_calls {
                    let line = format!("  ← {}", preview(&text, 100));
                    self.say(&if is_error {
                        st.error(&line)
                    } else {
                        st.dim(&line)
                    });
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
                    let approx = if estimated { "~" } else { "" };
                    let cache =
                        crate::agent::tokens::cache_note(cache_read_tokens, cache_write_tokens);
                    self.say(&st.dim(&format!(
                        "tokens: {approx}{prompt_tokens} prompt + {approx}{completion_tokens} completion (session {session_total}{cache})"
                    )));
                }
            }
            AgentEvent::Retrying {
                attempt,
                max_retries,
                delay,
                error,
            } => {
                self.say(&format!(
                    "{} {error}; retrying in {:.1} s (attempt {attempt} of {max_retries})",
                    st.warning("warning:"),
                    delay.as_secs_f64()
                ));
            }
            AgentEvent::Warning(w) => self.say(&format!("{} {w}", st.warning("warning:"))),
            AgentEvent::ApprovalNeeded { request, reply } => {
                match self.policy.decide(Instant::now()) {
                    Some(true) => {
                        let _ = reply.send(Approval::Approved);
                        self.say(&st.dim(&format!("auto-approved: {}", request.command)));
                    }
                    Some(false) => {
                        let _ = reply.send(Approval::Denied {
                            reason: "the user denies all shell commands for now (/approve none)"
                                .into(),
                        });
                        self.say(&st.dim(&format!("denied by /approve none: {}", request.command)));
                    }
                    None => {
                        self.flush_partial();
                        self.set_state("awaiting approval".into());
                        let prompt = format!(
                            "{}{} {} {} ",
                            st.actor(&request.actor),
                            st.actor("$"),
                            st.accent(&request.command),
                            st.warning("-- approve?")
                        );
                        let stashed = self.editor.buffer.text();
                        self.editor.buffer.clear();
                        self.editor.set_prompt(prompt);
                        self.approval = Some(PendingApproval {
                            request,
                            reply,
                            stashed,
                        });
                        self.redraw();
                    }
                }
            }
            AgentEvent::Finished(result) => {
                self.flush_partial();
                let id = self.task.as_ref().map_or(0, |t| t.id);
                match result {
                    Ok(_) => {}
                    Err(AgentError::Cancelled) => {
                        self.say(&st.warning(&format!("task {id} cancelled")))
                    }
                    Err(e) => self.say(&format!("{} {e}", st.error("error:"))),
                }
            }
        }
    }
}
