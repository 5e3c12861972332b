//! Wiring: turns parsed arguments and resolved settings into a running agent
//! service and the front end that talks to it. Every command returns an
//! `Exit` or an `AppError`; `main` alone turns those into exit codes. The only
//! module that knows all the others; none of them knows it.

use crate::agent::control::ApprovalRules;
use crate::agent::prompt::{render, PromptContext};
use crate::agent::protocol::{ApprovalPolicy, Event, EventKind, Op, QueueMode};
use crate::agent::{
    self, tokens, AgentHandle, AgentOptions, AgentSetup, CompactionOptions, Limits, ModelInfo,
    ToolStrategy,
};
use crate::auth::store::AuthStore;
use crate::auth::{AuthError, LoginCredentials};
use crate::cli::{Cli, Command, ExecArgs, ResumeArgs, TargetArgs};
use crate::config::ApiProtocol;
use crate::config::{self, CliOverrides, ConfigError, Settings};
use crate::host::HostError;
use crate::provider::completions::Completions;
use crate::provider::http::{ClientSettings, HttpClient, Protocol, StreamLimits, Transports};
use crate::session;
use crate::tools::{self, ToolRegistry};
use crate::ui::exec::{ExecFrontEnd, ExecOptions, ExecOutcome};
use crate::ui::json::JsonFrontEnd;
use crate::ui::style::Style;
use std::fmt;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod approvals;
mod custom;
mod discovery;
mod execution;
mod login;
mod mcp;
mod mcp_cmd;
mod pick;
mod project;
mod prompt;
mod repl;
mod serve;
mod sessions;
mod shell_help;
mod trust;

use execution::{Execution, SandboxChoice};

/// How a command ended when it did what it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    /// The user interrupted it (Ctrl-C).
    Interrupted,
    /// A front end that chose its own code (the REPL after a signal).
    Code(i32),
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => EXIT_OK,
            Exit::Interrupted => EXIT_INTERRUPTED,
            Exit::Code(c) => c,
        }
    }
}

/// Why a command failed, as one line for the user.
#[derive(Debug)]
pub enum AppError {
    /// Bad arguments, config or environment: exit 2.
    Usage(String),
    /// No key for the profile: exit 2, with what to do about it.
    MissingKey {
        message: String,
        config_dir: Option<PathBuf>,
        /// What looking for a local server found (the ports tried).
        notes: Vec<String>,
    },
    /// The work itself failed (the model, a limit): exit 1.
    Failed(String),
    /// No usable login or `auth.json`, or no way to tell the issuer: exit 2.
    Auth(AuthError),
    /// `buddy login` itself failed (the issuer, the user's approval): exit 1.
    Login(AuthError),
    /// The execution target (SSH, container, tmux) could not be opened: exit 2.
    Target(HostError),
}

impl AppError {
    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Usage(_)
            | AppError::MissingKey { .. }
            | AppError::Auth(_)
            | AppError::Target(_) => EXIT_USAGE,
            AppError::Failed(_) | AppError::Login(_) => EXIT_FAILURE,
        }
    }

    /// Lines after the error that say how to fix it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            AppError::MissingKey {
                config_dir, notes, ..
            } => {
                let mut out = notes.clone();
                out.extend([
                    "To get going, either:".to_string(),
                    "  - export OPENAI_API_KEY=sk-...   (or BUDDY_API_KEY, used by any profile)"
                        .to_string(),
                    "  - start a local model server (Ollama, llama.cpp, LM Studio, vLLM) and run buddy again"
                        .to_string(),
                ]);
                if let Some(dir) = config_dir {
                    out.push(format!(
                        "Profiles live in {}",
                        dir.join("buddy.toml").display()
                    ));
                }
                out
            }
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Usage(m) | AppError::Failed(m) => f.write_str(m),
            AppError::MissingKey { message, .. } => f.write_str(message),
            AppError::Auth(e) | AppError::Login(e) => write!(f, "{e}"),
            AppError::Target(e) => write!(f, "{e}"),
        }
    }
}

// The wrapped errors are shown as they are (their text is this one's), so
// their cause is this one's cause.
impl std::error::Error for AppError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AppError::Auth(e) | AppError::Login(e) => e.source(),
            AppError::Target(e) => e.source(),
            AppError::Usage(_) | AppError::Failed(_) | AppError::MissingKey { .. } => None,
        }
    }
}

impl From<AuthError> for AppError {
    fn from(e: AuthError) -> Self {
        AppError::Auth(e)
    }
}

impl From<HostError> for AppError {
    fn from(e: HostError) -> Self {
        AppError::Target(e)
    }
}

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;

/// Told to the model when a command needs approval and nobody can be asked.
const NO_TERMINAL_REASON: &str = "approval is required and there is no terminal to ask; the user can rerun `buddy exec` with --dangerously-auto-approve to allow commands";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub async fn run(cli: Cli) -> Result<Exit, AppError> {
    let overrides = CliOverrides {
        config: cli.global.config.clone(),
        model: cli.global.model.clone(),
        base_url: cli.global.base_url.clone(),
        no_color: cli.global.no_color,
        ..CliOverrides::default()
    };
    let outcome = match cli.command {
        Some(Command::Exec(args)) => exec(args, &overrides, cli.global.target).await,
        Some(Command::Resume(args)) => resume(args, &overrides, &cli.global.target).await,
        Some(Command::Sessions) => list_sessions(),
        Some(Command::Login(args)) => login(args.target.as_deref(), &overrides).await,
        Some(Command::Logout(args)) => logout(args.provider.as_deref()),
        Some(Command::Serve(args)) => serve::serve(args, &overrides, &cli.global.target).await,
        Some(Command::Models) => list_models(&overrides).await,
        Some(Command::Completions(args)) => shell_help::completions(args.shell),
        Some(Command::Man(args)) => shell_help::man_page(&args),
        Some(Command::Trust(args)) => trust::trust(args.path),
        Some(Command::Mcp(cmd)) => mcp_cmd::run(cmd, &overrides).await,
        None => interactive(&overrides, None, &cli.global.target).await,
    };
    // The servers' processes end with buddy, even one that ignores EOF.
    if let Some(servers) = mcp::running() {
        servers.stop();
    }
    outcome
}

async fn login(target: Option<&str>, overrides: &CliOverrides) -> Result<Exit, AppError> {
    let say = |line: &str| eprintln!("{line}");
    let cancelled = tokio::signal::ctrl_c();
    tokio::select! {
        r = login::sign_in(target, overrides, &say) => {
            eprintln!("{}", r?);
            Ok(Exit::Ok)
        }
        _ = cancelled => {
            eprintln!("login cancelled");
            Ok(Exit::Interrupted)
        }
    }
}

fn logout(provider: Option<&str>) -> Result<Exit, AppError> {
    let provider = provider.unwrap_or("openai");
    let store = auth_store()?;
    if store.remove(provider)? {
        eprintln!("logged out of {provider}");
    } else {
        eprintln!("not logged in to {provider}");
    }
    Ok(Exit::Ok)
}

/// Loads settings, saying so when a first run created the global config.
/// With no key for the active profile and nothing chosen by the user, a
/// model server on this machine is used instead; the overrides returned
/// reproduce the settings (for model switches). Credentials named in the
/// settings are hidden from every command buddy starts.
async fn load_settings(overrides: &CliOverrides) -> Result<(Settings, CliOverrides), AppError> {
    // With an explicit --config the user chose the file: nothing else is written.
    let created = if overrides.config.is_none() {
        config::ensure_global_config(&env)
    } else {
        None
    };
    if let Some(path) = &created {
        let style = Style::detect(!overrides.no_color);
        eprintln!(
            "{}",
            style.dim(&format!("created a default config at {}", path.display()))
        );
    }
    trust::ask_if_untrusted(overrides);
    let loaded = match config::load(&workdir(), &env, overrides) {
        Ok(s) => (s, overrides.clone()),
        Err(e @ ConfigError::MissingKey { .. }) => {
            let style = Style::detect(!overrides.no_color);
            discovery::instead_of_missing_key(&workdir(), &env, overrides, e, style).await?
        }
        Err(e) => return Err(AppError::Usage(e.to_string())),
    };
    crate::host::hide_env(loaded.0.hidden_env.clone());
    // Keys named only in the config (a profile's api_key_env) leave buddy's
    // own /proc environ too; the usual names already did in main.
    let hidden = &loaded.0.hidden_env;
    crate::procenv::scrub(|name| hidden.iter().any(|h| h == name));
    if let Some(line) = loaded.0.untrusted.as_ref().and_then(trust::warning) {
        let style = Style::detect(!overrides.no_color);
        eprintln!("{} {line}", style.warning("warning:"));
    }
    for line in &loaded.0.mcp_notes {
        let style = Style::detect(!overrides.no_color);
        eprintln!("{} {line}", style.warning("warning:"));
    }
    Ok(loaded)
}

/// The approval rules from config: the denylist and `shell_confirm`.
fn approval_rules(settings: &Settings) -> ApprovalRules {
    let t = &settings.tools;
    ApprovalRules {
        policy: ApprovalPolicy::Ask,
        confirm: t.shell_confirm,
        denylist: tools::denylist::Denylist::new(&t.shell_denylist),
        no_approver_reason: None,
        read_only: t.auto_approve_read_only.unwrap_or(true),
    }
}

/// Whether a person can be asked on the controlling terminal.
fn has_tty() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .is_ok()
}

fn queue_mode(m: config::QueueMode) -> QueueMode {
    match m {
        config::QueueMode::OneAtATime => QueueMode::OneAtATime,
        config::QueueMode::All => QueueMode::All,
    }
}

fn agent_options(settings: &Settings) -> AgentOptions {
    let a = &settings.agent;
    let strategy = match a.tool_execution {
        Some(config::ToolExecution::Parallel) => ToolStrategy::Parallel,
        Some(config::ToolExecution::Sequential) => ToolStrategy::Sequential,
        Some(config::ToolExecution::Batched) => ToolStrategy::Batched(a.tool_batch_size),
        None if a.parallel_tools => ToolStrategy::Parallel,
        None => ToolStrategy::Sequential,
    };
    AgentOptions {
        limits: Limits {
            max_turns: a.turn_limit(),
            max_total_tokens: a.max_total_tokens,
            max_duration: a.duration_limit(),
        },
        strategy,
        context_limit: tokens::context_limit(settings.api.context_limit, &settings.api.model),
        compaction: CompactionOptions {
            auto: a.auto_compact,
            threshold: a.compact_threshold,
            ..CompactionOptions::default()
        },
    }
}

fn model_info(settings: &Settings) -> ModelInfo {
    ModelInfo {
        model: settings.api.model.clone(),
        profile: settings.api.profile.clone(),
        base_url: settings.api.base_url.clone(),
        no_images: !settings.api.images,
    }
}

/// Everything the agent needs, for the active profile and target.
fn agent_setup(
    settings: &Settings,
    execution: &Execution,
    approval: ApprovalRules,
    options: AgentOptions,
    models: Option<Box<dyn agent::service::ModelSwitcher>>,
    transports: Option<&Transports>,
) -> Result<AgentSetup, AppError> {
    let cwd = std::env::current_dir()
        .map_err(|e| AppError::Usage(format!("cannot read the working directory: {e}")))?;
    let client = client_for(settings, transports)?;
    let mut registry = build_tools(settings, execution.tmux(), execution.sandbox.clone());
    let skills = custom_files(settings, &cwd).skills;
    let skill_list = custom::skills_prompt(&skills);
    if !skills.is_empty() {
        let cap = settings
            .tools
            .files_max_output_chars
            .or(settings.tools.max_output_chars)
            .unwrap_or(tools::files::DEFAULT_MAX_OUTPUT_CHARS)
            .max(100);
        reg_skill(&mut registry, skills, cap);
    }
    let target = execution.target.description();
    let cwd_text = cwd.display().to_string();
    let names = registry.names();
    if let Some(servers) = mcp::tools(settings, &names) {
        registry.add_source(servers);
    }
    let project = project::find(&cwd);
    if let Some(p) = &project {
        warn_skipped_instructions(&p.skipped, settings.display.color);
    }
    let project = project.filter(|p| !p.files.is_empty());
    // Known secrets never reach the model through the prompt either (a
    // system_prompt or AGENTS.md that quotes a key).
    let system = render(&PromptContext {
        target: &target,
        cwd: &cwd_text,
        tools: &names,
        remote: !execution.target.is_local(),
        tmux: execution.tmux(),
        instructions: settings.agent.system_prompt.as_deref(),
        project: project.as_ref().map(|p| p.text.as_str()),
        skills: skill_list.as_deref(),
    });
    let system = crate::redact::text(&system).into_owned();
    Ok(AgentSetup {
        client: Arc::new(client),
        tools: registry,
        cwd,
        target: execution.target.clone(),
        pane: execution.pane.clone(),
        options,
        system_prompt: Some(system),
        model: model_info(settings),
        approval,
        allowed: approvals::remembered(),
        steering_mode: queue_mode(settings.agent.steering_mode),
        follow_up_mode: queue_mode(settings.agent.follow_up_mode),
        sessions: Some(Box::new(sessions::Sessions::new(
            workdir(),
            crate::redact::known().all().to_vec(),
        ))),
        models,
        hooks: hooks(&settings.hooks)?,
    })
}

fn reg_skill(registry: &mut ToolRegistry, skills: Vec<tools::skill::Skill>, cap: usize) {
    registry.register(Arc::new(tools::skill::SkillTool::new(skills, cap)));
}

/// The custom commands and skills for this directory: the project's own
/// only when it is trusted (`config::trust::project_trusted`).
fn custom_files(settings: &Settings, cwd: &std::path::Path) -> custom::Found {
    let trusted = config::trust::project_trusted(
        cwd,
        settings.source.as_deref(),
        settings.untrusted.is_some(),
        &env,
    );
    let config_dir = config::global_dir(&env);
    custom::find(cwd, config_dir.as_deref(), trusted)
}

/// The `[[hooks.EVENT]]` entries as the agent runs them; a matcher that is
/// not a regular expression is a usage error naming it.
fn hooks(section: &config::HooksSection) -> Result<agent::hooks::Hooks, AppError> {
    use agent::hooks::HookEvent;
    let mut hooks = agent::hooks::Hooks::default();
    for event in HookEvent::ALL {
        let list = match event {
            HookEvent::PreToolUse => &section.pre_tool_use,
            HookEvent::PostToolUse => &section.post_tool_use,
            HookEvent::UserPromptSubmit => &section.user_prompt_submit,
            HookEvent::Stop => &section.stop,
            HookEvent::SessionStart => &section.session_start,
            HookEvent::Notification => &section.notification,
        };
        for entry in list {
            let timeout = entry.timeout_secs.map(|s| Duration::from_secs(s.max(1)));
            hooks
                .add(event, &entry.matcher, entry.command.clone(), timeout)
                .map_err(|e| AppError::Usage(format!("config error: {e}")))?;
        }
    }
    Ok(hooks)
}

fn exec_options(settings: &Settings, style: Style) -> ExecOptions {
    ExecOptions {
        style,
        show_tool_calls: settings.display.show_tool_calls,
        show_tokens: settings.display.show_tokens,
    }
}

async fn exec(
    args: ExecArgs,
    overrides: &CliOverrides,
    target_args: TargetArgs,
) -> Result<Exit, AppError> {
    // One conversation per process: the turn-end save runs on this thread.
    crate::background::run_inline();
    let prompt = prompt::read(&args.prompt)?;
    let images = prompt::images(&args.images)?;
    let (settings, _) = load_settings(overrides).await?;
    if !images.is_empty() && !settings.api.images {
        return Err(AppError::Usage(model_info(&settings).images_refused()));
    }
    let style = Style::detect(settings.display.color);
    let choice = SandboxChoice::new(&settings.tools, args.dangerously_auto_approve);
    let mut execution =
        execution::open(&target_args, &settings, false, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    if let Some(a) = &execution.attach {
        eprintln!("{}", style.dim(a));
    }
    let mut rules = approval_rules(&settings);
    if args.dangerously_auto_approve {
        rules.policy = ApprovalPolicy::All;
    } else if !has_tty() {
        rules.no_approver_reason = Some(NO_TERMINAL_REASON.into());
    }
    let mut options = agent_options(&settings);
    if let Some(n) = args.max_turns {
        options.limits.max_turns = n;
    }
    if let Some(n) = args.max_tokens {
        options.limits.max_total_tokens = Some(n);
    }
    if let Some(d) = args.timeout {
        options.limits.max_duration = Some(d);
    }
    let found = custom_files(&settings, &workdir());
    for note in &found.notes {
        eprintln!("{} {note}", style.dim("note:"));
    }
    // `buddy exec "/name args"` runs a custom command as the REPL would.
    let prompt =
        crate::ui::repl::commands::expand_custom(&prompt, &found.commands).unwrap_or(prompt);
    let mut agent = agent::spawn(agent_setup(
        &settings, &execution, rules, options, None, None,
    )?);
    // exec has one chance to offer the tools: the servers' start (each
    // bounded by its startup_timeout_secs) is awaited before the request.
    if let Some(servers) = mcp::running() {
        servers.wait_ready().await;
    }
    let mut json = args.json.then(|| JsonFrontEnd::new(style));
    if let Some(j) = json.as_mut() {
        j.hello();
    }
    if let Some(query) = &args.resume {
        let mut seen = |ev: &Event| {
            if let Some(j) = json.as_mut() {
                j.event(ev);
            }
        };
        let what = Continue {
            query: query.clone(),
            fork: false,
        };
        resume_first(&mut agent, &what, style, Notice::Notes, &mut seen).await?;
    }
    let _ = agent
        .ops
        .send(Op::Prompt {
            text: prompt,
            images,
        })
        .await;
    let outcome = match json {
        Some(j) => j.run(&mut agent).await,
        None => {
            ExecFrontEnd::new(exec_options(&settings, style))
                .run(&mut agent)
                .await
        }
    };
    finish(agent, &outcome).await;
    match outcome {
        ExecOutcome::Answered => Ok(Exit::Ok),
        ExecOutcome::Interrupted => Ok(Exit::Interrupted),
        ExecOutcome::Failed(m) | ExecOutcome::LimitReached(m) => Err(AppError::Failed(m)),
    }
}

/// Stops the agent, saving the session. After a second Ctrl-C the user has
/// stopped waiting, so the wait is short.
async fn finish(agent: AgentHandle, outcome: &ExecOutcome) {
    let wait = match outcome {
        ExecOutcome::Interrupted => Duration::from_secs(2),
        _ => Duration::from_secs(30),
    };
    let _ = tokio::time::timeout(wait, agent.shutdown()).await;
}

/// What `resume_first` prints of the resumed session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Notice {
    /// Nothing: the caller shows the event (the REPL replays it).
    Quiet,
    /// Warnings and the model note.
    Notes,
    /// Those and the last exchange.
    LastExchange,
}

/// Loads session `query` into the agent before anything else, telling the
/// user what `notice` says; returns the `SessionResumed` event.
async fn resume_first(
    agent: &mut AgentHandle,
    what: &Continue,
    style: Style,
    notice: Notice,
    seen: &mut dyn FnMut(&Event),
) -> Result<Event, AppError> {
    let query = what.query.clone();
    let op = if what.fork {
        Op::Fork { query: Some(query) }
    } else {
        Op::Resume { query }
    };
    let _ = agent.ops.send(op).await;
    while let Some(ev) = agent.events.recv().await {
        seen(&ev);
        match &ev.kind {
            EventKind::SessionForked { id, from, .. } => eprintln!(
                "{}",
                style.dim(&format!(
                    "forked session {from}: this conversation goes on as session {id}; {from} stays as it was"
                ))
            ),
            EventKind::SessionResumed { warnings, note, .. } => {
                if notice == Notice::LastExchange {
                    let text = crate::ui::resumed_text(&ev.kind, style).unwrap_or_default();
                    eprintln!("{text}");
                } else if notice == Notice::Notes {
                    for w in warnings {
                        eprintln!("{} {w}", style.warning("warning:"));
                    }
                    if let Some(n) = note {
                        eprintln!("{}", style.dim(n));
                    }
                }
                return Ok(ev);
            }
            EventKind::Error { message, .. } => return Err(AppError::Usage(message.clone())),
            _ => {}
        }
    }
    Err(AppError::Failed("the agent stopped unexpectedly".into()))
}

fn workdir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// `buddy models`: the models the active profile's server offers, one per
/// line on stdout, the one in use marked with `*`.
async fn list_models(overrides: &CliOverrides) -> Result<Exit, AppError> {
    let (settings, _) = load_settings(overrides).await?;
    let style = Style::detect(settings.display.color);
    let client = client_for(&settings, None)?;
    let models = client
        .list_models()
        .await
        .map_err(|e| AppError::Failed(format!("cannot list the models: {e}")))?;
    let current = &settings.api.model;
    eprintln!(
        "{}",
        style.dim(&format!(
            "models at {} (profile {}); * is in use",
            settings.api.base_url, settings.api.profile
        ))
    );
    let mut out = String::new();
    for m in &models {
        let mark = if &m.id == current { "*" } else { " " };
        out.push_str(&format!("{mark} {}\n", m.id));
    }
    use std::io::Write;
    // A closed pipe (`buddy models | head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    if models.is_empty() {
        eprintln!("the server lists no models");
    } else if !models.iter().any(|m| &m.id == current) {
        eprintln!(
            "{} the model in use, {current}, is not in the server's list",
            style.warning("note:")
        );
    }
    Ok(Exit::Ok)
}

/// `buddy sessions`: one line per session on stdout; unreadable files are
/// named on stderr and do not hide the others.
fn list_sessions() -> Result<Exit, AppError> {
    let style = Style::detect(true);
    let listing = sessions::list(&workdir()).map_err(|e| AppError::Usage(e.to_string()))?;
    for e in &listing.warnings {
        eprintln!("{} {e}", style.warning("warning:"));
    }
    if listing.sessions.is_empty() {
        eprintln!("no saved sessions in {}", listing.dir);
        return Ok(Exit::Ok);
    }
    let out = crate::ui::session_table::session_table(&listing.sessions, crate::clock::now_unix());
    use std::io::Write;
    // A closed pipe (`buddy sessions | head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(Exit::Ok)
}

/// `buddy resume`: the session's history, then the conversation on it.
/// Without an id on a terminal, a picker asks which session: Esc cancels
/// (exit 0, nothing was wrong), Ctrl-C interrupts (130).
async fn resume(
    args: ResumeArgs,
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let query = match (args.last, args.id) {
        (true, _) => "last".to_string(),
        (false, Some(id)) => id,
        (false, None) if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) => return Err(AppError::Usage(
            "name the session to continue: `buddy resume ID` or `buddy resume --last` (`buddy sessions` lists them)".into(),
        )),
        (false, None) => match pick::choose(Style::detect(picker_color(overrides))).await? {
            crate::ui::session_picker::Picked::Session(id) => id,
            crate::ui::session_picker::Picked::Cancelled => {
                eprintln!("no session resumed");
                return Ok(Exit::Ok);
            }
            crate::ui::session_picker::Picked::Interrupted => return Ok(Exit::Interrupted),
            crate::ui::session_picker::Picked::Signalled(code) => return Ok(Exit::Code(code)),
        },
    };
    interactive(
        overrides,
        Some(Continue {
            query,
            fork: args.fork,
        }),
        target_args,
    )
    .await
}

/// The saved session a conversation starts from: resumed, or forked first.
pub(crate) struct Continue {
    query: String,
    fork: bool,
}

/// Whether the picker may use colour: it is drawn before the settings are
/// loaded (the chosen session decides nothing about them, but loading them
/// may ask questions), so only the config file's `display.color` is read. A
/// file that cannot be read or parsed leaves the default; the error is
/// reported when the settings are loaded right after.
fn picker_color(overrides: &CliOverrides) -> bool {
    !overrides.no_color
        && config::load_file(&workdir(), &env, overrides).map_or(true, |(f, _)| f.display.color)
}

/// Bare `buddy` and `buddy resume`: the REPL on a terminal, the line session
/// when input or output is redirected or the terminal is dumb.
async fn interactive(
    overrides: &CliOverrides,
    resume: Option<Continue>,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    // A dumb terminal cannot take the editor's cursor movement and redraws:
    // it gets the plain line session, as a pipe does.
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
        || crate::ui::style::dumb_terminal()
    {
        return line_session(overrides, resume, target_args).await;
    }
    let (settings, overrides) = load_settings(overrides).await?;
    let overrides = &overrides;
    let style = Style::detect(settings.display.color);
    let choice = SandboxChoice::new(&settings.tools, false);
    let mut execution =
        execution::open(target_args, &settings, true, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    let switcher = repl::Switcher {
        settings: settings.clone(),
        overrides: overrides.clone(),
    };
    let setup = agent_setup(
        &settings,
        &execution,
        approval_rules(&settings),
        agent_options(&settings),
        Some(Box::new(switcher)),
        None,
    )?;
    let allowed = setup.allowed.clone();
    let mut agent = agent::spawn(setup);
    let mut banner = format!(
        "{} {} via {} — /help for commands, Ctrl-D to quit",
        style.actor("buddy"),
        settings.api.model,
        settings.api.base_url
    );
    if !execution.target.is_local() {
        banner.push_str(&format!(
            "\n{}",
            style.dim(&format!("tools run on {}", execution.target.actor()))
        ));
    }
    if let Some(a) = &execution.attach {
        banner.push_str(&format!("\n{}", style.dim(a)));
    }
    if let Some(found) = std::env::current_dir()
        .ok()
        .and_then(|d| project::find(&d))
        .filter(|p| !p.files.is_empty())
    {
        let cwd = std::env::current_dir().unwrap_or_default();
        let names: Vec<String> = found
            .files
            .iter()
            .map(|f| f.strip_prefix(&cwd).unwrap_or(f).display().to_string())
            .collect();
        banner.push_str(&format!(
            "\n{}",
            style.dim(&format!(
                "project instructions from {}",
                crate::text::visible(&names.join(", "))
            ))
        ));
    }
    let found = custom_files(&settings, &workdir());
    for note in &found.notes {
        banner.push_str(&format!("\n{}", style.dim(&format!("note: {note}"))));
    }
    let mut resumed = None;
    if let Some(query) = &resume {
        match resume_first(&mut agent, query, style, Notice::Quiet, &mut |_| {}).await {
            Ok(ev) => resumed = Some(ev),
            Err(e) => {
                agent.shutdown().await;
                return Err(e);
            }
        };
    }
    let mut host = repl::Host {
        tools: build_tools(&settings, execution.tmux(), execution.sandbox.clone())
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
        settings: settings.clone(),
        overrides: overrides.clone(),
        allowed,
    };
    let opts = crate::ui::repl::ReplOptions {
        style,
        prompt: match &execution.label {
            Some(label) => format!("({label})> "),
            None => "> ".into(),
        },
        show_tool_calls: settings.display.show_tool_calls,
        show_tokens: settings.display.show_tokens,
        history_file: config::global_dir(&env).map(|d| d.join("history")),
        banner,
        resumed,
        profile: settings.api.profile.clone(),
        model: settings.api.model.clone(),
        custom: found.commands,
        skills: found
            .skills
            .into_iter()
            .map(|s| (s.name, s.description))
            .collect(),
    };
    let code = crate::ui::repl::Repl::new(agent, &mut host, opts)
        .run()
        .await;
    Ok(Exit::Code(code))
}

/// A plain line-by-line conversation when input or output is redirected or
/// the terminal is dumb (`TERM=dumb`): one prompt per line, Ctrl-D to quit.
async fn line_session(
    overrides: &CliOverrides,
    resume: Option<Continue>,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    use tokio::io::AsyncBufReadExt;
    let (settings, _) = load_settings(overrides).await?;
    let style = Style::detect(settings.display.color);
    let choice = SandboxChoice::new(&settings.tools, false);
    let mut execution =
        execution::open(target_args, &settings, false, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    if let Some(a) = &execution.attach {
        eprintln!("{}", style.dim(a));
    }
    let mut rules = approval_rules(&settings);
    if !has_tty() {
        rules.no_approver_reason = Some(NO_TERMINAL_REASON.into());
    }
    let mut agent = agent::spawn(agent_setup(
        &settings,
        &execution,
        rules,
        agent_options(&settings),
        None,
        None,
    )?);
    if let Some(query) = &resume {
        if let Err(e) =
            resume_first(&mut agent, query, style, Notice::LastExchange, &mut |_| {}).await
        {
            agent.shutdown().await;
            return Err(e);
        }
    }
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "{} {} via {} — one prompt per line, Ctrl-D to quit",
            style.actor("buddy"),
            settings.api.model,
            settings.api.base_url
        );
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut last = Exit::Ok;
    let mut failed = None;
    loop {
        if interactive {
            eprint!("{}", style.actor("> "));
        }
        let line = match lines.next_line().await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                failed = Some(AppError::Failed(format!("cannot read input: {e}")));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        if matches!(line.trim(), "/quit" | "/exit" | "/q") {
            break;
        }
        let _ = agent
            .ops
            .send(Op::Prompt {
                text: line,
                images: Vec::new(),
            })
            .await;
        let outcome = ExecFrontEnd::new(exec_options(&settings, style))
            .run(&mut agent)
            .await;
        last = Exit::Ok;
        match outcome {
            ExecOutcome::Answered => {}
            ExecOutcome::Interrupted => {
                // The user stopped waiting; the run still ends before the next prompt.
                wait_for_run_end(&mut agent).await;
            }
            ExecOutcome::Failed(m) | ExecOutcome::LimitReached(m) => {
                eprintln!("{} {}", style.error("error:"), crate::text::visible(&m));
                last = Exit::Code(EXIT_FAILURE);
            }
        }
    }
    agent.shutdown().await;
    match failed {
        Some(e) => Err(e),
        None => Ok(last),
    }
}

/// Drops events until the current run has finished.
async fn wait_for_run_end(agent: &mut AgentHandle) {
    while let Some(ev) = agent.events.recv().await {
        if matches!(ev.kind, EventKind::RunFinished { .. }) {
            return;
        }
    }
}

/// The registry for the enabled tools, each capped by its own limit, else the
/// global one, else the tool's default.
pub fn build_tools(
    settings: &Settings,
    tmux: bool,
    sandbox: Option<Arc<crate::host::sandbox::Sandbox>>,
) -> ToolRegistry {
    let t = &settings.tools;
    let cap =
        |own: Option<usize>, default: usize| own.or(t.max_output_chars).unwrap_or(default).max(100);
    let mut reg = ToolRegistry::new();
    if t.shell_enabled {
        reg.register(Arc::new(tools::shell::ShellTool::new(
            tools::shell::ShellOptions {
                default_timeout: Duration::from_secs(t.shell_timeout_secs.max(1)),
                max_output_chars: cap(
                    t.shell_max_output_chars,
                    tools::shell::DEFAULT_MAX_OUTPUT_CHARS,
                ),
                tmux,
                sandbox,
            },
        )));
        if tmux {
            reg.register(Arc::new(tools::pane::CapturePaneTool::new(cap(
                t.shell_max_output_chars,
                tools::shell::DEFAULT_MAX_OUTPUT_CHARS,
            ))));
            reg.register(Arc::new(tools::pane::SendKeysTool));
        }
    }
    if t.files_enabled {
        let max = cap(
            t.files_max_output_chars,
            tools::files::DEFAULT_MAX_OUTPUT_CHARS,
        );
        reg.register(Arc::new(
            tools::files::ReadFileTool::new(max)
                .with_timeout(Duration::from_secs(t.shell_timeout_secs.max(1))),
        ));
        reg.register(Arc::new(
            tools::files::WriteFileTool::new(max).protecting(own_files(settings)),
        ));
        let timeout = Duration::from_secs(t.shell_timeout_secs.max(1));
        if wants_patch(t.edit_format, &settings.api.model) {
            reg.register(Arc::new(
                tools::patch::ApplyPatchTool::new(max)
                    .with_timeout(timeout)
                    .protecting(own_files(settings)),
            ));
        } else {
            reg.register(Arc::new(
                tools::edit::EditFileTool::new(max)
                    .with_timeout(timeout)
                    .protecting(own_files(settings)),
            ));
        }
        // Reading and searching without asking: the same switch and bound
        // as read_file.
        reg.register(Arc::new(
            tools::grep::GrepTool::new(max).with_timeout(timeout),
        ));
        reg.register(Arc::new(
            tools::glob::GlobTool::new(max).with_timeout(timeout),
        ));
    }
    let net_timeout = Duration::from_secs(settings.network.fetch_timeout_secs.max(1));
    if t.fetch_enabled {
        reg.register(Arc::new(tools::fetch::FetchTool::new(
            tools::fetch::FetchOptions {
                timeout: net_timeout,
                max_bytes: tools::fetch::DEFAULT_MAX_BYTES,
                max_output_chars: cap(
                    t.fetch_max_output_chars,
                    tools::fetch::DEFAULT_MAX_OUTPUT_CHARS,
                ),
            },
        )));
    }
    if t.search_enabled {
        let mut opts = tools::search::SearchOptions::default();
        if let Some(url) = &t.search_base_url {
            opts.base_url = url.clone();
        }
        opts.timeout = net_timeout;
        opts.max_output_chars = cap(t.search_max_output_chars, opts.max_output_chars);
        reg.register(Arc::new(tools::search::SearchTool::new(opts)));
    }
    if t.time_enabled {
        reg.register(Arc::new(tools::time::TimeTool));
    }
    reg
}

/// Whether the model gets `apply_patch` rather than `edit_file`: when the
/// config says so, or for the model families trained on the patch format
/// (OpenAI's GPT and o-series models, and anything named Codex), whatever
/// provider prefix the id carries (`openai/gpt-5`).
fn wants_patch(format: config::EditFormat, model: &str) -> bool {
    match format {
        config::EditFormat::Edit => false,
        config::EditFormat::Patch => true,
        config::EditFormat::Auto => {
            let id = model.to_ascii_lowercase();
            let name = id.rsplit('/').next().unwrap_or(&id);
            let o_series =
                name.len() >= 2 && name.starts_with('o') && name.as_bytes()[1].is_ascii_digit();
            name.starts_with("gpt-") || o_series || id.contains("codex")
        }
    }
}

/// buddy's own files, which the file tools never write: every config file
/// it loaded or would load, its config directory (auth.json, the trust list,
/// the history), and this directory's sessions.
fn own_files(settings: &Settings) -> tools::protect::Protected {
    // Resolving these paths is dozens of syscalls; `buddy serve` builds the
    // tools for every session it starts, with the same directory and config,
    // so the answer is kept for the process (as one REPL keeps its tools).
    type Key = (PathBuf, Option<PathBuf>);
    static KNOWN: std::sync::Mutex<Option<(Key, tools::protect::Protected)>> =
        std::sync::Mutex::new(None);
    let key: Key = (workdir(), settings.source.clone());
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, p)) = known.as_ref() {
        if *k == key {
            return p.clone();
        }
    }
    let p = resolve_own_files(settings);
    *known = Some((key, p.clone()));
    p
}

fn resolve_own_files(settings: &Settings) -> tools::protect::Protected {
    let cwd = workdir();
    let mut p = tools::protect::Protected::new();
    for path in config::search_path(&cwd, &env)
        .iter()
        .chain(settings.source.iter())
    {
        p = p.file("config file", path);
    }
    if let Some(dir) = config::global_dir(&env) {
        p = p.dir("config directory", &dir);
    }
    if let Some(path) = crate::auth::store::AuthStore::default_path() {
        p = p.file("login store", &path);
    }
    if let Some(path) = config::trust::store_path(&env) {
        p = p.file("trust list", &path);
    }
    for dir in [session::DIR, session::LEGACY_DIR] {
        p = p.dir("session directory", &cwd.join(dir));
    }
    p
}

/// Which provider `buddy login [provider|profile]` means, and its issuer: a
/// profile name picks its provider; anything else names a provider; nothing
/// means the active profile's provider, or `openai`.
fn login_issuer(
    target: Option<&str>,
    overrides: &CliOverrides,
) -> Result<crate::auth::Issuer, AuthError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (file, _) =
        config::load_file(&cwd, &env, overrides).map_err(|e| AuthError::Config(Box::new(e)))?;
    let provider = match target {
        Some(name) => match file.models.get(name) {
            Some(profile) => profile.provider.clone().unwrap_or_else(|| "openai".into()),
            None => name.to_string(),
        },
        None => {
            let active = overrides
                .model
                .clone()
                .or_else(|| file.agent.model.clone())
                .unwrap_or_default();
            file.models
                .get(&active)
                .filter(|p| p.auth == config::AuthMode::Login)
                .and_then(|p| p.provider.clone())
                .unwrap_or_else(|| "openai".into())
        }
    };
    Ok(config::issuer_for(&file.auth, &provider))
}

/// Makes every secret `settings` can reach known to the redaction (keys,
/// the values of the variables buddy hides from commands, login tokens).
fn remember_secrets(settings: &Settings) {
    crate::redact::remember(
        settings
            .api
            .api_key
            .iter()
            .cloned()
            .chain(settings.hidden_env.iter().filter_map(|n| env(n)))
            .chain(settings.profile_keys.iter().cloned()),
    );
    if let Ok(store) = auth_store() {
        crate::redact::remember(store.secrets());
    }
}

/// One warning line per instruction file left out, once per process
/// (`buddy serve` builds an agent per session).
fn warn_skipped_instructions(skipped: &[String], color: bool) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if skipped.is_empty() {
        return;
    }
    WARNED.call_once(|| {
        let style = Style::detect(color);
        for line in skipped {
            eprintln!(
                "{} {}",
                style.warning("warning:"),
                crate::text::visible(line)
            );
        }
    });
}

/// The model client for the active profile of `settings`. Its secrets are
/// known to the redaction before it can send (or a server echo) any of them.
fn client_for(
    settings: &Settings,
    transports: Option<&Transports>,
) -> Result<HttpClient, AppError> {
    remember_secrets(settings);
    let api = &settings.api;
    let protocol: Box<dyn Protocol> = match api.protocol {
        ApiProtocol::Completions => Box::new(Completions),
        ApiProtocol::Messages => Box::new(crate::provider::messages::Messages),
        ApiProtocol::Responses => Box::new(crate::provider::responses::Responses),
    };
    // An unusable ca_file is a config mistake (exit 2), found before any request.
    let extra_roots = match &api.ca_file {
        Some(path) => crate::net::load_ca_file(path).map_err(|e| {
            AppError::Usage(format!("config error in profile `{}`: {e}", api.profile))
        })?,
        None => Vec::new(),
    };
    let client = HttpClient::new_shared(
        ClientSettings {
            base_url: api.base_url.clone(),
            api_key: api.api_key.clone(),
            model: api.model.clone(),
            stream: api.stream,
            temperature: settings.agent.temperature,
            top_p: settings.agent.top_p,
            max_tokens: api.max_tokens,
            prompt_cache: api.prompt_cache,
            timeout: Duration::from_secs(settings.network.api_timeout_secs.max(1)),
            max_retries: settings.network.max_retries,
            extra_roots,
        },
        protocol,
        transports,
    )
    .map_err(|e| AppError::Usage(e.to_string()))?
    .with_limits(StreamLimits {
        max_answer_bytes: usize::try_from(settings.network.max_answer_bytes)
            .unwrap_or(usize::MAX)
            .max(1),
        idle_timeout: Duration::from_secs(settings.network.idle_timeout_secs.max(1)),
    });
    match &api.login {
        Some(issuer) => {
            let store = auth_store()?;
            Ok(client.with_login(LoginCredentials::open(issuer.clone(), store)?))
        }
        None => Ok(client),
    }
}

/// The auth.json of this user.
fn auth_store() -> Result<AuthStore, AuthError> {
    AuthStore::default_path()
        .map(AuthStore::new)
        .ok_or(AuthError::NoConfigDir)
}
