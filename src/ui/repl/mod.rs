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
//!
//! This file holds the `Repl` struct, its construction and the main loop
//! (its `Renderer` side of the drive loop). Its `impl` goes on by job in
//! `terminal` (raw mode and writing to the screen), `input` (keys and lines
//! to ops), `slash_ops` (slash commands carried out), `pickers` (`/model`,
//! `/rewind`), `approval_prompt` (asking and answering approvals),
//! `status_area` and `render_events` (the agent's events on the screen).

pub mod approval;
mod approval_prompt;
pub mod bang;
mod banner;
pub mod buffer;
pub mod commands;
pub mod editor;
mod error;
pub mod history;
mod input;
mod mcp_report;
pub mod mentions;
pub mod menu;
pub mod notify;
mod pickers;
mod plan_view;
mod question_form;
mod render_events;
pub mod replay;
pub mod replies;
pub mod rewind;
mod slash_ops;
mod status_area;
mod subagents;
mod terminal;

use crate::agent::allowlist::{AllowRule, SharedAllowList};
use crate::agent::protocol::{ApprovalPolicy, Event as AgentEvent, Op, OpId};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::drive::{drive, Elicitation, End, Flow, Renderer};
use crate::mcp::McpError;
use crate::text::visible;
use crate::ui::markdown::MarkdownRenderer;
use crate::ui::style::Style;
use approval_prompt::PendingApproval;
use crossterm::event::Event;
use editor::Editor;
use pickers::Picker;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use terminal::{terminal_events, RawMode, Terminal};
use tokio::sync::mpsc;

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
    /// `/export [FILE]`: writes saved session `id` as Markdown to `file`, or
    /// to `buddy-<id>.md` in the working directory; the path written, or
    /// why not, in one line.
    fn export(&self, _id: &str, _file: Option<&str>) -> Result<PathBuf, String> {
        Err("export is not available here".into())
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
    /// The working directory, read once at start-up: where the editor
    /// completes paths and `!` commands run.
    pub cwd: PathBuf,
    /// When and how the user is notified (`[ui]`).
    pub notify: notify::NotifyOptions,
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
    /// A server's question being answered field by field.
    form: Option<question_form::PendingForm>,
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
    /// The sub-agents seen, for their progress lines and `/subagents`.
    subagents: Vec<subagents::ChildView>,
    /// The session's plan as the agent last reported it, shown above
    /// the status line.
    plan: Vec<crate::agent::protocol::PlanEntry>,
    /// Plan mode, as the agent last reported it.
    plan_mode: bool,
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
    /// Notifications: long runs ended, approvals waiting.
    notifier: notify::Notifier,
    out: Terminal,
}

impl<'h> Repl<'h> {
    pub fn new(ops: OpSender, services: &'h dyn ReplServices, opts: ReplOptions) -> Repl<'h> {
        let history = history::History::load(opts.history_file.clone());
        let notifier = notify::Notifier::new(opts.notify.clone());
        let prompt = opts.style.actor(&opts.prompt);
        let colour = opts.style.color;
        let mut editor = Editor::new(prompt, history, commands::NAMES, opts.cwd.clone());
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
        let cwd = opts.cwd.clone();
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
            form: None,
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
            subagents: Vec::new(),
            plan: Vec::new(),
            plan_mode: false,
            reasoning: String::new(),
            reasoning_open: false,
            spin: 0,
            height: 24,
            bang: None,
            pending_images: Vec::new(),
            cwd,
            notifier,
            out: Terminal::new(),
        }
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
}

impl Renderer for Repl<'_> {
    type Input = Input;

    fn on_event(&mut self, ev: AgentEvent, _ops: &OpSender) -> Flow {
        self.on_agent_event(ev);
        Flow::Continue
    }

    /// Asked as a form on the input line (`question_form`).
    fn on_elicitation(
        &mut self,
        _question: &crate::agent::protocol::ElicitationQuestion,
    ) -> Elicitation {
        Elicitation::Later
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
