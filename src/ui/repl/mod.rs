//! The interactive REPL: a raw-mode line editor in front of the agent service.
//! Prompts become runs of the agent (shown as tasks); the agent's events are
//! rendered above the input line, so the prompt stays usable while a run goes
//! on. Typing while the agent works is normal: Enter steers the run, Tab
//! queues a follow-up, Alt-Up takes queued messages back, Esc or Ctrl-C
//! interrupts. Slash commands become ops (status, approvals, models,
//! sessions, the session list, a task's timeout), and their replies are
//! matched to them by op id (`replies`). The REPL is a renderer on the
//! drive loop (`crate::drive`): its keys, timers and signals are its input
//! there. What it needs beyond the agent (the login, saved approval rules,
//! MCP servers) it asks of `ReplServices` as typed values it words itself
//! (their errors as typed as the layers below made them), so it reads no
//! config, files or credentials.

pub mod approval;
pub mod bang;
mod banner;
pub mod buffer;
pub mod commands;
pub mod editor;
mod error;
pub mod history;
mod mcp_report;
pub mod mentions;
pub mod menu;
pub mod replay;
pub mod replies;
pub mod rewind;

use crate::agent::allowlist::{AllowRule, SharedAllowList};
use crate::agent::protocol::{
    ApprovalPolicy, DecidedBy, Decision, Event as AgentEvent, EventKind, Op, OpId, QueueKind,
    RunOutcome, StatusReport,
};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::drive::{drive, End, Flow, Renderer};
use crate::mcp::McpError;
use crate::text::visible;
use crate::ui::markdown::MarkdownRenderer;
use crate::ui::style::{preview, Style, SPINNER};
use crate::ui::Choice;
use approval::{describe, policy_from_arg, rules_listing, short_duration};
use commands::ApproveArg;
use commands::Slash;
use crossterm::event::Event;
use editor::{Editor, Outcome};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Room for one frame of the input area: the largest live area (a picker,
/// a long input) fits, so a frame is one write.
const FRAME_BUFFER: usize = 64 * 1024;

pub use banner::Banner;
pub use error::{LoginError, ModelsError, RuleError};

/// What the REPL needs of the application around it that is not the
/// agent's: the login, the servers' model lists, the user's saved approval
/// rules and the MCP servers. Every answer is a typed value (or an error
/// line); how it is worded on the screen is the REPL's.
pub trait ReplServices {
    /// Whether `profile` authenticates with a `buddy login`.
    fn uses_login(&self, profile: &str) -> bool;
    /// `/login [provider|profile]`: the login, as `buddy login` runs it;
    /// the issuer's instructions go to `say` as they come.
    fn login(&self, target: Option<&str>, say: LoginLines) -> LoginRunning;
    /// The model ids `profile`'s server offers, for the `/model` picker; an
    /// error is one line.
    fn server_models(&self, profile: &str) -> ModelList;
    /// "Remember": saves the rule `prefix` (already allowed for this run) in
    /// the user's own rules file; the file.
    fn remember(&self, _prefix: &str) -> Result<PathBuf, RuleError> {
        Err(RuleError::NotHere)
    }
    /// `/approve remove N`: drops rule `n` as `/approve` numbers them; the
    /// rule dropped.
    fn forget(&self, _n: usize) -> Result<AllowRule, RuleError> {
        Err(RuleError::NoRules)
    }
    /// `/mcp`: each MCP server's state, tools and last error; `None` when
    /// none is configured.
    fn mcp(&self) -> Option<Vec<crate::mcp::ServerReport>> {
        None
    }
    /// `@SERVER:uri`: the resource's text (bounded), an error line, or
    /// `None` when `mention` does not name a configured MCP server.
    fn mcp_resource(&self, _mention: &str) -> Option<Result<String, McpError>> {
        None
    }
    /// `/SERVER:PROMPT args`: the prompt's messages as the user's turn, an
    /// error line, or `None` when no server offers that prompt.
    fn mcp_prompt(&self, _name: &str, _args: &str) -> Option<Result<String, McpError>> {
        None
    }
}

/// A login that succeeded: the provider and where its tokens are kept.
#[derive(Debug, Clone)]
pub struct LoggedIn {
    pub provider: String,
    pub file: PathBuf,
}

impl LoggedIn {
    /// The line that ends a login, in the REPL and for `buddy login`.
    pub fn line(&self) -> String {
        format!(
            "logged in to {}; tokens saved in {}",
            visible(&self.provider),
            self.file.display()
        )
    }
}

/// The server's model list, on its way.
pub type ModelList =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<String>, ModelsError>> + Send>>;

/// Where a login's lines for the user go.
pub type LoginLines = Box<dyn Fn(&str) + Send + Sync>;

/// A login on its way: who it logged in to, or an error line.
pub type LoginRunning =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<LoggedIn, LoginError>> + Send>>;

/// A `/login` in progress reports a line for the user, or its end.
pub enum LoginEvent {
    Line(String),
    Done(Result<Result<LoggedIn, LoginError>, tokio::task::JoinError>),
}

/// A `/login` in progress: the issuer's instructions as they come, then the end.
struct LoginRun {
    lines: mpsc::UnboundedReceiver<String>,
    handle: tokio::task::JoinHandle<Result<LoggedIn, LoginError>>,
}

pub struct ReplOptions {
    pub style: Style,
    /// The enabled tools, for `/status`.
    pub tools: Vec<String>,
    /// Profile names, in config order (for `/model` and its index form).
    pub profiles: Vec<String>,
    /// The agent's allow list ("always" rules), for `/approve`.
    pub allowed: SharedAllowList,
    pub prompt: String,
    pub show_tool_calls: bool,
    pub show_tokens: bool,
    pub history_file: Option<PathBuf>,
    /// Printed once above the first prompt (e.g. the resumed exchange).
    pub banner: String,
    /// The `SessionResumed` event of a session resumed before the REPL
    /// started, shown (replayed) under the banner.
    pub resumed: Option<AgentEvent>,
    /// The model profile in use at start.
    pub profile: String,
    /// The model id in use at start.
    pub model: String,
    /// Custom slash commands (`app::custom`).
    pub custom: Vec<commands::Custom>,
    /// The skills found, as (name, description), for `/skills`.
    pub skills: Vec<(String, String)>,
}

/// The agent's run in progress, as the user sees it.
struct Task {
    id: u64,
    started: Instant,
    state: String,
    /// A `/timeout` was set for it (the agent keeps the time).
    timeout: bool,
}

/// What the reply to an op the REPL sent is for (`replies::Awaited`).
enum Want {
    /// `Status` for `/status`.
    Status,
    /// `Status` for `/context`.
    Context,
    /// `Turns` for `/rewind`'s picker.
    Turns,
    /// `ModelSwitched` after a login: the profile picks up the new tokens.
    LoginSwitch,
}

/// The arrow-key list bare `/model` opens: the profiles, then the models the
/// current profile's server offers once they arrive.
struct Picker {
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

struct PendingApproval {
    call_id: String,
    tool: String,
    command: String,
    /// The prefix "always" would allow, when offered.
    always: Option<String>,
    /// The question with its keys, shown again when a reason is abandoned.
    prompt: String,
    /// `e` was pressed: the input line is the reason for the model.
    explaining: bool,
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

/// What the REPL waits for besides the agent (`Renderer::input`).
pub enum Input {
    /// A key, a paste, a resize; `None` when the terminal can no longer be read.
    Terminal(Option<std::io::Result<Event>>),
    /// SIGTERM or SIGHUP: leave with this exit code.
    Signal(i32),
    Login(LoginEvent),
    ModelList(Result<Result<Vec<String>, ModelsError>, tokio::task::JoinError>),
    Tick,
}

/// The REPL's own sources of input, opened when it starts.
struct Sources {
    terminal: mpsc::UnboundedReceiver<std::io::Result<Event>>,
    tick: tokio::time::Interval,
    term: Option<tokio::signal::unix::Signal>,
    hangup: Option<tokio::signal::unix::Signal>,
}

pub struct Repl<'h> {
    opts: ReplOptions,
    services: &'h dyn ReplServices,
    editor: Editor,
    /// Where the REPL's ops go; the drive loop holds the events.
    ops: OpSender,
    sources: Option<Sources>,
    /// The exit code once the REPL decided to leave.
    code: i32,
    task: Option<Task>,
    /// A mirror of the agent's approval policy, for `/approve`.
    policy: ApprovalPolicy,
    /// The prefixes answered "always" in this REPL, in order, for
    /// `/approve` (the agent keeps the list that counts).
    always: Vec<String>,
    approval: Option<PendingApproval>,
    /// After a one-key answer: the rest of its word (`es` after `y`) and an
    /// Enter, dropped if they follow, so typing `yes` Enter still works.
    swallow: Option<String>,
    picker: Option<Picker>,
    /// The `/rewind` picker, once the agent listed the turns.
    rewind: Option<rewind::RewindPicker>,
    /// The saved session in use, to say how to resume it on the way out.
    session_id: Option<String>,
    /// The `/model` picker's server model list, while it is fetched.
    model_list: Option<tokio::task::JoinHandle<Result<Vec<String>, ModelsError>>>,
    login: Option<LoginRun>,
    /// The profile in use, for the picker and after a login.
    profile: String,
    /// The model id in use, marked in the picker.
    model: String,
    /// Ops whose replies are read as answers to a command, by op id.
    awaited: replies::Awaited<Want>,
    /// Messages waiting in the agent's queues (steering, follow-ups).
    queued: (Vec<String>, Vec<String>),
    /// The answer as it streams: complete lines are rendered Markdown,
    /// printed above; the text not rendered yet shows as the live preview.
    md: MarkdownRenderer,
    /// Whether the live area holds the answer's preview (it may hold a picker).
    live_answer: bool,
    /// Warnings that came while an answer was streaming, shown after its
    /// last line rather than in the middle of it (the output-limit warning
    /// arrives before the renderer has let go of the answer's last line).
    held_warnings: Vec<String>,
    /// The how-to-quit hint was just shown for a Ctrl-C at an idle prompt.
    quit_hinted: bool,
    /// Whether the model request in progress streamed any answer text; an
    /// answer that came whole (a profile with `stream = false`) is shown
    /// when the run ends.
    answer_streamed: bool,
    /// The latest output lines of running tool calls, by call id, shown
    /// above the status line until their results arrive.
    tool_output: Vec<(String, String)>,
    /// Reasoning text not yet ending in a newline.
    reasoning: String,
    /// Whether a reasoning block's first line (with its label) is printed.
    reasoning_open: bool,
    /// The status line's spinner frame.
    spin: usize,
    /// Terminal rows, to bound the live preview.
    height: usize,
    /// The op of the `!command` the agent runs for us, until it ends.
    bang: Option<OpId>,
    /// Images pasted as paths, sent with the next prompt.
    pending_images: Vec<crate::wire::Image>,
    /// Where `@path` mentions are read from.
    cwd: PathBuf,
    out: Terminal,
}

/// The terminal, buffered: stderr is unbuffered, and each piece of a frame
/// (a row, a character of the input) would otherwise be a write of its own,
/// O(length) system calls a keystroke and half-drawn frames on screen. Every
/// editor call flushes once at its end.
struct Terminal<W: Write = std::io::Stderr>(Option<std::io::BufWriter<W>>);

impl Terminal {
    fn new() -> Terminal {
        Terminal::on(std::io::stderr())
    }
}

impl<W: Write> Terminal<W> {
    fn on(w: W) -> Terminal<W> {
        Terminal(Some(std::io::BufWriter::with_capacity(FRAME_BUFFER, w)))
    }
}

impl<W: Write> Write for Terminal<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.0 {
            Some(w) => w.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.as_mut().map_or(Ok(()), |w| w.flush())
    }
}

impl<W: Write> Drop for Terminal<W> {
    /// A panic mid-frame leaves half a frame here, which begins by erasing
    /// the screen below the cursor: written during the unwind, it would wipe
    /// the panic message the hook has just printed. It is dropped unwritten.
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(w) = self.0.take() {
                drop(w.into_parts());
            }
        }
    }
}

impl<'h> Repl<'h> {
    pub fn new(ops: OpSender, services: &'h dyn ReplServices, opts: ReplOptions) -> Repl<'h> {
        let history = history::History::load(opts.history_file.clone());
        let prompt = opts.style.actor(&opts.prompt);
        let colour = opts.style.color;
        let mut editor = Editor::new(prompt, history, commands::NAMES);
        // The editor's tables are static; the custom commands live as long
        // as the REPL, found once and bounded in number and length
        // (app::custom), so leaking them once costs a few KiB at most.
        editor.add_commands(
            opts.custom
                .iter()
                .map(|c| {
                    let name: &'static str = Box::leak(c.name.clone().into_boxed_str());
                    let desc: &'static str = Box::leak(c.description.clone().into_boxed_str());
                    (name, desc)
                })
                .collect(),
        );
        Repl {
            editor,
            profile: opts.profile.clone(),
            model: opts.model.clone(),
            opts,
            services,
            ops,
            sources: None,
            code: 0,
            task: None,
            policy: ApprovalPolicy::Ask,
            always: Vec::new(),
            approval: None,
            swallow: None,
            picker: None,
            rewind: None,
            session_id: None,
            model_list: None,
            login: None,
            awaited: replies::Awaited::default(),
            queued: (Vec::new(), Vec::new()),
            md: MarkdownRenderer::new(80, colour),
            live_answer: false,
            held_warnings: Vec::new(),
            quit_hinted: false,
            answer_streamed: false,
            tool_output: Vec::new(),
            reasoning: String::new(),
            reasoning_open: false,
            spin: 0,
            height: 24,
            bang: None,
            pending_images: Vec::new(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            out: Terminal::new(),
        }
    }

    fn dim(&self) -> impl Fn(&str) -> String {
        let style = self.opts.style;
        move |s: &str| style.dim(s)
    }

    /// Follows the terminal's width before drawing: a resize can land while
    /// agent events are handled, before its own event arrives, and the
    /// editor must know the terminal re-wrapped the input area.
    fn sync_size(&mut self) {
        if let Ok((w, h)) = crossterm::terminal::size() {
            self.height = h as usize;
            if w as usize != self.editor.width() {
                self.editor.set_width(w as usize);
                self.md.set_width(w as usize);
            }
        }
    }

    fn say(&mut self, text: &str) {
        self.sync_size();
        let dim = self.dim();
        let _ = self.editor.print_above(&mut self.out, text, dim);
    }

    fn say_error(&mut self, text: &str) {
        let e = self.opts.style.error(text);
        self.say(&e);
    }

    /// Ctrl-L and `/clear`: an empty screen with the input area on top.
    fn clear_screen(&mut self) {
        self.sync_size();
        let dim = self.dim();
        let _ = self.editor.clear_screen(&mut self.out, dim);
    }

    fn redraw(&mut self) {
        self.sync_size();
        let dim = self.dim();
        let _ = self.editor.redraw(&mut self.out, dim);
    }

    /// Hands `op` to the agent; its id, for the replies. The agent reads
    /// ops at once, so a full queue means something is badly stuck; say so
    /// rather than wait.
    fn send(&mut self, op: Op) -> Option<OpId> {
        match self.ops.try_send(op) {
            Ok(id) => Some(id),
            Err(e) => {
                let why = match e {
                    mpsc::error::TrySendError::Full(_) => "the agent is not keeping up; try again",
                    mpsc::error::TrySendError::Closed(_) => "the agent has stopped",
                };
                self.say_error(why);
                None
            }
        }
    }

    /// Sends `op` and reads its reply as `want`.
    fn ask(&mut self, op: Op, want: Want) {
        if let Some(id) = self.send(op) {
            self.awaited.expect(id, want);
        }
    }

    /// Runs on the drive loop until the user quits, then shuts `agent`
    /// down (saving the session); returns the exit code.
    pub async fn run(mut self, mut agent: AgentHandle) -> i32 {
        let _raw = match RawMode::enable() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: cannot switch the terminal to raw mode: {e}");
                return 1;
            }
        };
        self.sync_size();
        if !self.opts.banner.is_empty() {
            let banner = self.opts.banner.clone();
            self.say(&banner);
        } else {
            self.redraw();
        }
        if let Some(ev) = self.opts.resumed.take() {
            self.on_agent_event(ev);
        }
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // A closed terminal or a `kill` must still leave the terminal usable.
        use tokio::signal::unix::{signal, SignalKind};
        self.sources = Some(Sources {
            terminal: terminal_events(),
            tick,
            term: signal(SignalKind::terminate()).ok(),
            hangup: signal(SignalKind::hangup()).ok(),
        });
        if drive(&mut agent, &mut self).await == End::AgentGone {
            self.say_error("the agent stopped unexpectedly");
            self.code = 1;
        }
        if let Some(fetch) = self.model_list.take() {
            fetch.abort();
        }
        if let Some(l) = self.login.take() {
            l.handle.abort();
        }
        let _ = self.editor.finish(&mut self.out);
        // The run in progress is interrupted and everything saved before we go.
        agent.shutdown().await;
        if let Some(id) = &self.session_id {
            let _ = write!(
                self.out,
                "{}\r\n",
                self.opts
                    .style
                    .dim(&format!("resume this session with: buddy resume {id}"))
            );
        }
        let _ = self.out.flush();
        self.code
    }

    /// Handles one terminal event; true to quit.
    fn on_terminal(&mut self, ev: Event) -> bool {
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
        if self.approval_key(&ev) {
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
        }
        false
    }

    /// A key for a pending approval (or the tail of a word it answered):
    /// `y`, `n`, `a`, `e` answer at once on an empty line; Esc while typing a
    /// reason goes back to the question. True when the key was used here.
    fn approval_key(&mut self, ev: &Event) -> bool {
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

    /// Carries out an answer to the pending approval.
    fn choose(&mut self, choice: Choice) {
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

    fn on_rewind_input(&mut self, ev: &Event) {
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
    fn on_rewound(
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

    fn close_picker(&mut self) {
        self.picker = None;
        self.editor.set_live(None);
        if let Some(fetch) = self.model_list.take() {
            fetch.abort();
        }
    }

    /// The server's models arrived: show them in the picker, if still open.
    fn on_model_list(
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

    fn answer(&mut self, p: PendingApproval, decision: Decision) {
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

    fn restore_prompt(&mut self, stashed: &str) {
        let prompt = self.opts.style.actor(&self.opts.prompt);
        self.editor.set_prompt(prompt);
        self.editor.buffer.set(stashed);
    }

    fn on_line(&mut self, line: String) -> bool {
        if let Some(p) = self.approval.take() {
            if p.explaining {
                let reason = line.trim().to_string();
                self.answer(
                    p,
                    Decision::Deny {
                        reason: Some(reason),
                    },
                );
                return false;
            }
            self.approval = Some(p);
            match Choice::parse(&line) {
                Some(choice) => self.choose(choice),
                None => self.say(
                    "answer y (yes), n (no), a (always), r (remember always) or e (explain why not)",
                ),
            }
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
            None => {
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
                            return false;
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
                    return false;
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
        }
        false
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

    /// Starts the device flow in the background; the code and link appear
    /// above the prompt, which stays usable.
    fn start_login(&mut self, target: Option<&str>) {
        if self.login.is_some() {
            self.say("a login is already in progress");
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let say: LoginLines = Box::new(move |line: &str| {
            let _ = tx.send(line.to_string());
        });
        let handle = tokio::spawn(self.services.login(target, say));
        self.login = Some(LoginRun { lines: rx, handle });
    }

    fn on_login_done(
        &mut self,
        done: Result<Result<LoggedIn, LoginError>, tokio::task::JoinError>,
    ) {
        // Lines sent just before the end are still queued.
        if let Some(mut run) = self.login.take() {
            while let Ok(line) = run.lines.try_recv() {
                self.say(&line);
            }
        }
        match done {
            Ok(Ok(done)) => {
                self.say(&done.line());
                // The active profile picks up the new tokens.
                if self.services.uses_login(&self.profile) && self.task.is_none() {
                    let choice = self.profile.clone();
                    self.ask(Op::SwitchModel { choice }, Want::LoginSwitch);
                }
            }
            Ok(Err(e)) => self.say_error(&visible(&e.to_string())),
            Err(_) => self.say("login stopped"),
        }
    }

    fn on_command(&mut self, cmd: Slash) -> bool {
        if self.task.is_some() && !cmd.allowed_while_busy() {
            self.say("a task is running; /model, /session new|resume, /compact and /quit wait until it ends (or /kill it)");
            return false;
        }
        match cmd {
            Slash::Quit => return true,
            Slash::Help => self.say(commands::HELP),
            Slash::Mcp => {
                let text = match self.services.mcp() {
                    Some(report) => mcp_report::text(&report),
                    None => "no MCP servers configured ([mcp_servers] in buddy.toml, or `buddy mcp add`)".into(),
                };
                self.say(&text);
            }
            Slash::Skills => {
                let text = if self.opts.skills.is_empty() {
                    "no skills: put folders with a SKILL.md in .buddy/skills/ (trusted projects) or ~/.config/buddy/skills/".to_string()
                } else {
                    self.opts
                        .skills
                        .iter()
                        .map(|(n, d)| format!("{}  {}", n, visible(d)))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                self.say(&text);
            }
            Slash::Init => {
                self.send(Op::Prompt {
                    text: commands::INIT_PROMPT.into(),
                    images: Vec::new(),
                });
            }
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
                    self.send(Op::Interrupt);
                    self.flush_partial();
                    self.say(&format!("cancelling task {id}…"));
                }
                _ => self.say(&format!("no running task {id} (see /ps)")),
            },
            Slash::Timeout { after, task } => match &self.task {
                Some(t) if task.is_none_or(|id| id == t.id) => {
                    // The agent keeps the time; its reply says it is set.
                    let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
                    self.send(Op::SetTimeout { after_ms });
                }
                _ => self.say(&match task {
                    Some(id) => format!("no running task {id} (see /ps)"),
                    None => "no task is running".into(),
                }),
            },
            Slash::Approve(arg) => match arg {
                Some(ApproveArg::Remove(n)) => match self.services.forget(n) {
                    Ok(rule) => {
                        let left = self.opts.allowed.rules();
                        self.always.retain(|a| left.iter().any(|r| r.shown == *a));
                        self.say(&format!(
                            "dropped always `{}`{}",
                            visible(&rule.shown),
                            if rule.remembered {
                                " (also from the saved rules)"
                            } else {
                                ""
                            }
                        ));
                    }
                    Err(e) => self.say_error(&visible(&e.to_string())),
                },
                Some(arg) => {
                    if let Some(policy) = policy_from_arg(&arg, crate::clock::now_unix_ms()) {
                        self.send(Op::SetApprovalPolicy { policy });
                    }
                }
                None => {
                    let text = format!(
                        "approval: {}{}",
                        describe(&self.policy),
                        rules_listing(&self.opts.allowed.rules(), &self.always)
                    );
                    self.say(&text);
                }
            },
            Slash::Status => self.ask(Op::Status, Want::Status),
            Slash::Context => self.ask(Op::Status, Want::Context),
            Slash::Compact => {
                self.send(Op::Compact);
            }
            Slash::SessionList => {
                self.send(Op::ListSessions);
            }
            Slash::SessionNew => {
                self.send(Op::NewSession);
            }
            Slash::Clear => {
                self.clear_screen();
                self.send(Op::NewSession);
            }
            Slash::SessionResume(query) => {
                self.send(Op::Resume { query });
            }
            Slash::Rewind => self.ask(Op::Turns, Want::Turns),
            Slash::Fork => {
                self.send(Op::Fork { query: None });
            }
            Slash::Login(target) => self.start_login(target.as_deref()),
            Slash::Model(choice) => match choice {
                None => {
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
                // A number, a profile or a model id: the agent's switcher
                // tells them apart, in one place.
                Some(choice) => {
                    self.send(Op::SwitchModel { choice });
                }
            },
        }
        false
    }

    fn on_tick(&mut self) {
        if self.task.is_some() {
            self.spin = (self.spin + 1) % SPINNER.len();
            self.update_status();
            self.redraw();
        }
    }

    /// The status area: the task's state, then what waits in the queues.
    fn update_status(&mut self) {
        let st = self.opts.style;
        let mut lines = Vec::new();
        if let Some(t) = &self.task {
            lines.push(st.dim(&format!(
                "[task {}] {} · {} {}",
                t.id,
                t.state,
                SPINNER[self.spin],
                short_duration(t.started.elapsed())
            )));
        }
        for text in &self.queued.0 {
            lines.push(st.dim(&format!("  ↳ steering: {}", preview(text, 60))));
        }
        for text in &self.queued.1 {
            lines.push(st.dim(&format!("  ↳ queued: {}", preview(text, 60))));
        }
        let hint = if !self.queued.0.is_empty() || !self.queued.1.is_empty() {
            lines.push(st.dim("    (Alt-Up takes them back)"));
            None
        } else if self.approval.as_ref().is_some_and(|p| p.explaining) {
            Some(" · Enter sends the reason, Esc goes back")
        } else if let Some(p) = &self.approval {
            // Name only the keys the question offers.
            Some(if p.always.is_some() {
                " · y, n, a, r or e answers, Esc interrupts"
            } else {
                " · y, n or e answers, Esc interrupts"
            })
        } else {
            Some(" · Enter steers, Tab queues a follow-up, Esc interrupts")
        };
        if let (Some(first), Some(hint), true) = (lines.first_mut(), hint, self.task.is_some()) {
            first.push_str(&st.dim(hint));
        }
        let lines = [self.tool_output_lines(), lines].concat();
        self.editor
            .set_status((!lines.is_empty()).then(|| lines.join("\n")));
    }

    /// The running calls' latest output, dim, each line fitted to the width.
    fn tool_output_lines(&self) -> Vec<String> {
        let width = self.editor.width();
        self.tool_output
            .iter()
            .flat_map(|(_, tail)| crate::ui::toolview::live_lines(tail, "  │ ", width))
            .map(|l| self.opts.style.dim(&l))
            .collect()
    }

    fn set_state(&mut self, state: &str) {
        if let Some(t) = &mut self.task {
            if t.state != state {
                t.state = state.to_string();
            }
        }
        self.update_status();
    }

    /// Prints what is held of the reasoning and the answer, so whatever is
    /// said next (a tool call, a token line, "cancelling…") comes after
    /// the text it follows.
    fn flush_partial(&mut self) {
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
    fn show_live_answer(&mut self) {
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
        self.task = None;
        self.tool_output.clear();
        self.update_status();
        self.redraw();
    }

    fn status_text(&self, r: &StatusReport) -> String {
        let tools = &self.opts.tools;
        let cache = crate::agent::tokens::cache_note(r.cache_read_tokens, r.cache_write_tokens);
        let cost = if r.local {
            "local: free".to_string()
        } else {
            match r.cost_usd {
                Some(usd) => format!("{} this session", crate::agent::tokens::format_usd(usd)),
                None => "unknown (no price known for this model; set price in its profile)".into(),
            }
        };
        format!(
            "model      {} (profile {})\nendpoint   {}\ntools      {}\nsession    {}\ntokens     {} prompt + {} completion = {} this session; last request {} + {}{}\ncost       {}",
            r.model,
            r.profile,
            r.base_url,
            if tools.is_empty() { "none".to_string() } else { tools.join(", ") },
            r.session.as_deref().unwrap_or("(not saved yet)"),
            r.total_prompt_tokens,
            r.total_completion_tokens,
            r.total_prompt_tokens + r.total_completion_tokens,
            r.last_prompt_tokens,
            r.last_completion_tokens,
            cache,
            cost
        )
    }

    fn context_text(r: &StatusReport) -> String {
        let cache = crate::agent::tokens::cache_note(r.cache_read_tokens, r.cache_write_tokens);
        let fill = if r.context_limit == 0 {
            0.0
        } else {
            r.context_estimate as f64 / r.context_limit as f64
        };
        format!(
            "context    ~{} of {} tokens ({:.0}%) in {} messages\ntotals     {} prompt + {} completion tokens this session{}",
            r.context_estimate,
            r.context_limit,
            fill * 100.0,
            r.messages,
            r.total_prompt_tokens,
            r.total_completion_tokens,
            cache
        )
    }

    fn on_agent_event(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
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
            EventKind::UserMessage { text, images, .. } => {
                self.flush_partial();
                let mut echo = format!("{}{}", st.dim(&self.opts.prompt), visible(&text));
                for image in &images {
                    echo.push(' ');
                    echo.push_str(&st.dim(&visible(&image.label())));
                }
                self.say(&echo);
            }
            EventKind::ModelRequest { .. } => {
                self.answer_streamed = false;
                self.set_state("waiting for model")
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
            EventKind::ToolResult {
                call_id,
                name,
                text,
                is_error,
                ..
            } => {
                self.tool_output.retain(|(id, _)| *id != call_id);
                self.update_status();
                if self.opts.show_tool_calls {
                    let lines = crate::ui::toolview::result_lines(&name, &text, is_error, st);
                    self.say(&lines.join("\n"));
                }
            }
            EventKind::Usage {
                prompt_tokens,
                completion_tokens,
                cache_read_tokens,
                cache_write_tokens,
                session_total,
                estimated,
                cost_usd,
                session_cost_usd,
                local,
            } => {
                if self.opts.show_tokens {
                    self.flush_partial();
                    let approx = if estimated { "~" } else { "" };
                    let cache =
                        crate::agent::tokens::cache_note(cache_read_tokens, cache_write_tokens);
                    let cost = crate::agent::tokens::cost_note(cost_usd, session_cost_usd, local);
                    self.say(&st.dim(&format!(
                        "tokens: {approx}{prompt_tokens} prompt + {approx}{completion_tokens} completion (session {session_total}{cache}){cost}"
                    )));
                }
            }
            EventKind::Retrying {
                attempt,
                max_retries,
                delay_ms,
                error,
            } => {
                self.say(&format!(
                    "{} {}; retrying in {:.1} s (attempt {attempt} of {max_retries})",
                    st.warning("warning:"),
                    visible(&error),
                    delay_ms as f64 / 1000.0
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
            EventKind::ApprovalRequested {
                call_id,
                tool,
                actor,
                command,
                detail,
                always,
            } => {
                self.flush_partial();
                self.set_state("awaiting approval");
                // A new question: no key is a leftover of the last answer.
                self.swallow = None;
                if let Some(detail) = &detail {
                    self.say(&crate::ui::detail_lines(detail, st).join("\n"));
                }
                let actor = visible(&actor).into_owned();
                let (shown, note) = crate::ui::approval_command(&command);
                if let Some(note) = note {
                    self.say(&st.warning(&format!("note: {note}")));
                }
                // The input line holds one line: a longer command is shown
                // whole above it, and the prompt points there.
                let choices = crate::ui::approval_choices(always.as_deref(), true);
                let width = crossterm::terminal::size().map_or(80, |(w, _)| w as usize);
                let fits =
                    actor.chars().count() + shown.chars().count() + choices.chars().count() + 4
                        < width;
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
            }
            EventKind::ApprovalDecided {
                call_id,
                command,
                approved,
                by,
                always,
                ..
            } => match by {
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
                DecidedBy::Denylist => self
                    .say(&st.warning(&format!("refused by the denylist: {}", visible(&command)))),
                DecidedBy::Interrupted => {
                    if self.approval.as_ref().is_some_and(|p| p.call_id == call_id) {
                        if let Some(p) = self.approval.take() {
                            self.restore_prompt(&p.stashed);
                            self.redraw();
                        }
                    }
                }
                DecidedBy::User | DecidedBy::NoApprover => {}
            },
            EventKind::Queues {
                steering,
                follow_ups,
            } => {
                self.queued = (steering, follow_ups);
                self.update_status();
                self.redraw();
            }
            EventKind::Unqueued { texts } => {
                if !texts.is_empty() {
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
            EventKind::RunFinished { outcome } => self.on_run_finished(outcome),
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
            EventKind::CommandRan(ran) => self.on_bang_done(ev.op_id, *ran),
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
            EventKind::ApprovalPolicyChanged { policy } => {
                self.policy = policy;
                let text = format!("approval: {}", describe(&policy));
                self.say(&text);
            }
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
            EventKind::SessionStarted { id } => self.session_id = Some(id),
            EventKind::SessionResumed { ref id, .. } => {
                self.session_id = Some(id.clone());
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
        }
    }
}

impl Renderer for Repl<'_> {
    type Input = Input;

    fn on_event(&mut self, ev: AgentEvent, _ops: &OpSender) -> Flow {
        self.on_agent_event(ev);
        Flow::Continue
    }

    async fn input(&mut self) -> Input {
        let Some(src) = self.sources.as_mut() else {
            return std::future::pending().await;
        };
        let login = &mut self.login;
        let model_list = &mut self.model_list;
        tokio::select! {
            Some(()) = async { src.term.as_mut()?.recv().await } => Input::Signal(128 + 15),
            Some(()) = async { src.hangup.as_mut()?.recv().await } => Input::Signal(128 + 1),
            ev = src.terminal.recv() => Input::Terminal(ev),
            ev = async {
                let Some(run) = login.as_mut() else {
                    return std::future::pending().await;
                };
                tokio::select! {
                    Some(line) = run.lines.recv() => LoginEvent::Line(line),
                    done = &mut run.handle => LoginEvent::Done(done),
                }
            }, if login.is_some() => Input::Login(ev),
            listed = async {
                match model_list.as_mut() {
                    Some(fetch) => fetch.await,
                    None => std::future::pending().await,
                }
            }, if model_list.is_some() => Input::ModelList(listed),
            _ = src.tick.tick() => Input::Tick,
        }
    }

    async fn on_input(&mut self, input: Input, _ops: &OpSender) -> Flow {
        match input {
            Input::Signal(code) => {
                self.code = code;
                return Flow::Stop;
            }
            Input::Terminal(Some(Ok(ev))) => {
                if self.on_terminal(ev) {
                    return Flow::Stop;
                }
            }
            Input::Terminal(_) => return Flow::Stop,
            Input::Login(LoginEvent::Line(line)) => self.say(&line),
            Input::Login(LoginEvent::Done(done)) => self.on_login_done(done),
            Input::ModelList(listed) => {
                self.model_list = None;
                self.on_model_list(listed);
            }
            Input::Tick => self.on_tick(),
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::Terminal;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A terminal stand-in that records what reaches it.
    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_reaches_the_terminal_at_its_flush_and_not_before() {
        let screen = Screen::default();
        let mut t = Terminal::on(screen.clone());
        t.write_all(b"\x1b[J row one\r\n").unwrap();
        t.write_all(b"row two").unwrap();
        assert!(screen.0.lock().unwrap().is_empty());
        t.flush().unwrap();
        assert_eq!(
            screen.0.lock().unwrap().as_slice(),
            b"\x1b[J row one\r\nrow two"
        );
        // What is left at an ordinary drop still goes out.
        t.write_all(b" and more").unwrap();
        drop(t);
        assert!(screen.0.lock().unwrap().ends_with(b" and more"));
    }

    #[test]
    fn half_a_frame_is_dropped_unwritten_when_drawing_panics() {
        let screen = Screen::default();
        let mut t = Terminal::on(screen.clone());
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            t.write_all(b"\x1b[J half a fr").unwrap();
            panic!("a bug while drawing");
        }));
        assert!(unwound.is_err());
        assert!(
            screen.0.lock().unwrap().is_empty(),
            "the erase would wipe the panic message"
        );
    }
}
