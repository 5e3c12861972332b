//! Wiring: turns parsed arguments and resolved settings into a running agent and
//! a front end, and maps every outcome to an exit code. The only module that
//! knows all the others; none of them knows it.

use crate::agent::prompt::{render, PromptContext};
use crate::agent::{tokens, Agent, AgentOptions, Cancel};
use crate::auth::store::AuthStore;
use crate::auth::LoginCredentials;
use crate::cli::{Cli, Command, ExecArgs, ResumeArgs, TargetArgs};
use crate::config::ApiProtocol;
use crate::config::{self, CliOverrides, ConfigError, Settings};
use crate::provider::completions::Completions;
use crate::provider::http::{ClientSettings, HttpClient, Protocol};
use crate::session::{self, SessionInfo, Store};
use crate::tools::{self, ToolRegistry};
use crate::ui::exec::{ExecFrontEnd, ExecOptions, ExecOutcome};
use crate::ui::style::Style;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod repl;
mod target;

use target::Execution;

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub async fn run(cli: Cli) -> i32 {
    let overrides = CliOverrides {
        config: cli.global.config.clone(),
        model: cli.global.model.clone(),
        base_url: cli.global.base_url.clone(),
        no_color: cli.global.no_color,
    };
    match cli.command {
        Some(Command::Exec(args)) => exec(args, &overrides, cli.global.target).await,
        Some(Command::Resume(args)) => resume(args, &overrides, &cli.global.target).await,
        Some(Command::Sessions) => list_sessions(&overrides),
        Some(Command::Login(args)) => login(args.target.as_deref(), &overrides).await,
        Some(Command::Logout(args)) => logout(args.provider.as_deref(), &overrides),
        None => interactive(&overrides, None, &cli.global.target).await,
    }
}

/// Which provider `buddy login [provider|profile]` means, and its issuer: a
/// profile name picks its provider; anything else names a provider; nothing
/// means the active profile's provider, or `openai`.
fn login_issuer(
    target: Option<&str>,
    overrides: &CliOverrides,
) -> Result<crate::auth::Issuer, String> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (file, _) = config::load_file(&cwd, &env, overrides).map_err(|e| e.to_string())?;
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

async fn login(target: Option<&str>, overrides: &CliOverrides) -> i32 {
    let style = Style::detect(!overrides.no_color);
    let issuer = match login_issuer(target, overrides) {
        Ok(i) => i,
        Err(e) => return usage_error(style, &e),
    };
    let store = match auth_store() {
        Ok(s) => s,
        Err(e) => return usage_error(style, &e),
    };
    let say = |line: &str| eprintln!("{line}");
    let cancelled = tokio::signal::ctrl_c();
    tokio::select! {
        r = crate::auth::login(&issuer, &store, &say) => match r {
            Ok(()) => {
                eprintln!("logged in to {}; tokens saved in {}", issuer.provider, store.path().display());
                EXIT_OK
            }
            Err(e) => {
                eprintln!("{} {e}", style.error("error:"));
                EXIT_FAILURE
            }
        },
        _ = cancelled => {
            eprintln!("login cancelled");
            EXIT_INTERRUPTED
        }
    }
}

fn logout(provider: Option<&str>, overrides: &CliOverrides) -> i32 {
    let style = Style::detect(!overrides.no_color);
    let provider = provider.unwrap_or("openai");
    let store = match auth_store() {
        Ok(s) => s,
        Err(e) => return usage_error(style, &e),
    };
    match store.remove(provider) {
        Ok(true) => {
            eprintln!("logged out of {provider}");
            EXIT_OK
        }
        Ok(false) => {
            eprintln!("not logged in to {provider}");
            EXIT_OK
        }
        Err(e) => usage_error(style, &e),
    }
}

/// Reads the prompt from the arguments or, for `-` or none with piped input, stdin.
fn read_prompt(args: &ExecArgs) -> Result<String, String> {
    let from_stdin =
        args.prompt == ["-"] || (args.prompt.is_empty() && !std::io::stdin().is_terminal());
    let prompt = if from_stdin {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
        s
    } else {
        args.prompt.join(" ")
    };
    if prompt.trim().is_empty() {
        return Err(
            "no prompt given: use `buddy exec \"PROMPT\"` or pipe the prompt on stdin".into(),
        );
    }
    Ok(prompt)
}

fn usage_error(style: Style, message: &str) -> i32 {
    eprintln!("{} {message}", style.error("error:"));
    EXIT_USAGE
}

/// Loads settings, explaining first-run and config problems in a few lines.
fn load_settings(overrides: &CliOverrides, style: Style) -> Result<Settings, i32> {
    let created = config::ensure_global_config(&env);
    if let Some(path) = &created {
        eprintln!(
            "{}",
            style.dim(&format!("created a default config at {}", path.display()))
        );
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match config::load(&cwd, &env, overrides) {
        Ok(s) => Ok(s),
        Err(e @ ConfigError::MissingKey { .. }) => {
            eprintln!("{} {e}", style.error("error:"));
            eprintln!("To get going, either:");
            eprintln!("  - export OPENAI_API_KEY=sk-...   (or BUDDY_API_KEY, used by any profile)");
            eprintln!("  - use a local Ollama server:     buddy -m ollama exec \"hello\"");
            if let Some(dir) = config::global_dir(&env) {
                eprintln!("Profiles live in {}", dir.join("buddy.toml").display());
            }
            Err(EXIT_USAGE)
        }
        Err(e) => Err(usage_error(style, &e.to_string())),
    }
}

struct Wired {
    agent: Agent,
    events: tokio::sync::mpsc::UnboundedReceiver<crate::agent::AgentEvent>,
    front: ExecOptions,
}

/// The model client for the active profile of `settings`.
fn client_for(settings: &Settings) -> Result<HttpClient, String> {
    let api = &settings.api;
    let protocol: Box<dyn Protocol> = match api.protocol {
        ApiProtocol::Completions => Box::new(Completions),
        ApiProtocol::Messages => Box::new(crate::provider::messages::Messages),
        ApiProtocol::Responses => Box::new(crate::provider::responses::Responses),
    };
    let client = HttpClient::new(
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
        },
        protocol,
    )
    .map_err(|e| e.to_string())?;
    match &api.login {
        Some(issuer) => {
            let store = auth_store()?;
            Ok(client.with_login(LoginCredentials::open(issuer.clone(), store)?))
        }
        None => Ok(client),
    }
}

/// The auth.json of this user.
fn auth_store() -> Result<AuthStore, String> {
    AuthStore::default_path()
        .map(AuthStore::new)
        .ok_or_else(|| "cannot find the config directory: set HOME or XDG_CONFIG_HOME".to_string())
}

fn wire(
    settings: &Settings,
    auto_approve: bool,
    style: Style,
    execution: &Execution,
) -> Result<Wired, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    let api = &settings.api;
    let client = client_for(settings)?;
    let registry = build_tools(settings, execution.tmux());
    let target = execution.target.description();
    let cwd_text = cwd.display().to_string();
    let names = registry.names();
    let system = render(&PromptContext {
        target: &target,
        cwd: &cwd_text,
        tools: &names,
        remote: !execution.target.is_local(),
        tmux: execution.tmux(),
        instructions: settings.agent.system_prompt.as_deref(),
    });
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let options = AgentOptions {
        max_iterations: settings.agent.max_iterations,
        parallel_tools: settings.agent.parallel_tools,
        context_limit: tokens::context_limit(api.context_limit, &api.model),
    };
    let mut agent = Agent::new(Arc::new(client), registry, options, Some(system), cwd, tx);
    agent.set_target(execution.target.clone());
    Ok(Wired {
        agent,
        events: rx,
        front: ExecOptions {
            style,
            show_tool_calls: settings.display.show_tool_calls,
            show_tokens: settings.display.show_tokens,
            auto_approve,
        },
    })
}

/// The registry for the enabled tools, each capped by its own limit, else the
/// global one, else the tool's default.
pub fn build_tools(settings: &Settings, tmux: bool) -> ToolRegistry {
    let t = &settings.tools;
    let cap =
        |own: Option<usize>, default: usize| own.or(t.max_output_chars).unwrap_or(default).max(100);
    let mut reg = ToolRegistry::new();
    if t.shell_enabled {
        reg.register(Arc::new(tools::shell::ShellTool::new(
            tools::shell::ShellOptions {
                confirm: t.shell_confirm,
                denylist: t
                    .shell_denylist
                    .clone()
                    .unwrap_or_else(tools::shell::default_denylist),
                default_timeout: Duration::from_secs(t.shell_timeout_secs.max(1)),
                max_output_chars: cap(
                    t.shell_max_output_chars,
                    tools::shell::DEFAULT_MAX_OUTPUT_CHARS,
                ),
                tmux,
            },
        )));
        if tmux {
            reg.register(Arc::new(tools::pane::CapturePaneTool::new(cap(
                t.shell_max_output_chars,
                tools::shell::DEFAULT_MAX_OUTPUT_CHARS,
            ))));
            reg.register(Arc::new(tools::pane::SendKeysTool::new(
                t.shell_confirm,
                t.shell_denylist
                    .clone()
                    .unwrap_or_else(tools::shell::default_denylist),
            )));
        }
    }
    if t.files_enabled {
        let max = cap(
            t.files_max_output_chars,
            tools::files::DEFAULT_MAX_OUTPUT_CHARS,
        );
        reg.register(Arc::new(tools::files::ReadFileTool::new(max)));
        reg.register(Arc::new(tools::files::WriteFileTool::new(max)));
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

async fn exec(args: ExecArgs, overrides: &CliOverrides, target_args: TargetArgs) -> i32 {
    let early_style = Style::detect(!overrides.no_color);
    let prompt = match read_prompt(&args) {
        Ok(p) => p,
        Err(m) => return usage_error(early_style, &m),
    };
    let settings = match load_settings(overrides, early_style) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let style = Style::detect(settings.display.color);
    let execution = match target::open(&target_args, &settings, false).await {
        Ok(e) => e,
        Err(m) => return usage_error(style, &m),
    };
    if let Some(a) = &execution.attach {
        eprintln!("{}", style.dim(a));
    }
    let Wired {
        mut agent,
        mut events,
        front,
    } = match wire(&settings, args.dangerously_auto_approve, style, &execution) {
        Ok(w) => w,
        Err(m) => return usage_error(style, &m),
    };
    match &args.resume {
        Some(query) => {
            if let Err(code) = continue_session(&mut agent, &settings, query, style, false) {
                return code;
            }
        }
        None => start_session(&mut agent, &settings, style),
    }
    let (handle, cancel) = Cancel::new();
    let frontend = ExecFrontEnd::new(front);
    let outcome = drive(
        agent.run_turn(&prompt, cancel),
        frontend.run(&mut events, &handle),
    )
    .await;
    outcome_code(outcome, style)
}

/// Runs the agent's turn and its front end together; the front end decides when
/// the turn is over (it returns on `Finished`, or at once on a second Ctrl-C).
async fn drive<T>(
    turn: impl std::future::Future<Output = T>,
    front: impl std::future::Future<Output = ExecOutcome>,
) -> ExecOutcome {
    tokio::pin!(turn);
    tokio::pin!(front);
    let mut turn_done = false;
    loop {
        tokio::select! {
            _ = &mut turn, if !turn_done => turn_done = true,
            outcome = &mut front => return outcome,
        }
    }
}

fn outcome_code(outcome: ExecOutcome, style: Style) -> i32 {
    match outcome {
        ExecOutcome::Answered => EXIT_OK,
        ExecOutcome::Interrupted => EXIT_INTERRUPTED,
        ExecOutcome::Failed(m) => {
            eprintln!("{} {m}", style.error("error:"));
            EXIT_FAILURE
        }
    }
}

fn workdir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

fn session_info(settings: &Settings) -> SessionInfo {
    SessionInfo {
        model: settings.api.model.clone(),
        profile: settings.api.profile.clone(),
        cwd: workdir().display().to_string(),
        secrets: settings.api.api_key.iter().cloned().collect(),
    }
}

fn warn(style: Style, message: &str) {
    eprintln!("{} {message}", style.warning("warning:"));
}

/// Starts saving the conversation to a new session. A directory buddy cannot
/// write to costs the user the session, not the answer.
fn start_session(agent: &mut Agent, settings: &Settings, style: Style) {
    match attach_new_session(agent, settings) {
        Ok((_, warnings)) => {
            for w in warnings {
                warn(style, &w);
            }
        }
        Err(e) => warn(style, &e),
    }
}

/// Creates a session and makes the agent save to it; returns its id and any
/// warnings, or why the conversation will not be saved.
pub(crate) fn attach_new_session(
    agent: &mut Agent,
    settings: &Settings,
) -> Result<(String, Vec<String>), String> {
    match Store::for_workdir(&workdir()).create(session_info(settings)) {
        Ok((session, warnings)) => {
            let id = session.id().to_string();
            agent.set_history_sink(Box::new(session));
            Ok((id, warnings))
        }
        Err(e) => Err(format!("this conversation will not be saved: {e}")),
    }
}

/// A session loaded into the agent: what to tell the user about it.
pub(crate) struct Resumed {
    pub id: String,
    /// Warnings (repairs, permissions) and notes (a different model), one per line.
    pub warnings: Vec<String>,
    pub note: Option<String>,
    /// The header line and the last exchange, ready to print.
    pub summary: String,
}

/// Loads session `query` into `agent`, which keeps appending to it.
pub(crate) fn resume_into(
    agent: &mut Agent,
    settings: &Settings,
    query: &str,
    style: Style,
) -> Result<Resumed, session::SessionError> {
    let store = Store::for_workdir(&workdir());
    let opened = store
        .resolve(query)
        .and_then(|id| store.open(&id, session_info(settings)))?;
    let note = opened
        .last_turn
        .as_ref()
        .filter(|turn| turn.model != settings.api.model)
        .map(|turn| {
            format!(
                "note: this session last used {} ({}); continuing with {} ({})",
                turn.model, turn.profile, settings.api.model, settings.api.profile
            )
        });
    let mut summary = format!(
        "{} session {} ({} messages)",
        style.accent("resumed"),
        opened.session.id(),
        opened.history.len()
    );
    summary.push_str(&last_exchange(&opened.history, style));
    let id = opened.session.id().to_string();
    agent.reset();
    agent.restore(opened.history, opened.tokens, opened.saved);
    agent.set_history_sink(Box::new(opened.session));
    Ok(Resumed {
        id,
        warnings: opened.warnings,
        note,
        summary,
    })
}

/// Loads session `query` into `agent` for the command line, printing what the
/// user should know. Returns the exit code to stop with when it cannot.
fn continue_session(
    agent: &mut Agent,
    settings: &Settings,
    query: &str,
    style: Style,
    show_last: bool,
) -> Result<(), i32> {
    let resumed = resume_into(agent, settings, query, style)
        .map_err(|e| usage_error(style, &e.to_string()))?;
    for w in &resumed.warnings {
        warn(style, w);
    }
    if let Some(n) = &resumed.note {
        eprintln!("{}", style.dim(n));
    }
    if show_last {
        eprintln!("{}", resumed.summary);
    }
    Ok(())
}

/// The last prompt and the answer to it (each line prefixed with a newline),
/// so the user sees where they left off.
fn last_exchange(history: &[crate::wire::Message], style: Style) -> String {
    use crate::wire::Role;
    let Some(u) = history.iter().rposition(|m| m.role == Role::User) else {
        return String::new();
    };
    let mut out = format!("\n{} {}", style.dim("you:"), history[u].text().trim_end());
    if let Some(a) = history[u..]
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.text().trim().is_empty())
    {
        out.push_str(&format!(
            "\n{} {}",
            style.dim("buddy:"),
            a.text().trim_end()
        ));
    }
    out
}

/// `buddy sessions`: one line per session on stdout; unreadable files are
/// named on stderr and do not hide the others.
fn list_sessions(overrides: &CliOverrides) -> i32 {
    let style = Style::detect(!overrides.no_color);
    let store = Store::for_workdir(&workdir());
    let (list, errors) = match store.list() {
        Ok(l) => l,
        Err(e) => return usage_error(style, &e.to_string()),
    };
    for e in &errors {
        warn(style, &e.to_string());
    }
    if list.is_empty() {
        eprintln!("no saved sessions in {}", store.dir().display());
        return EXIT_OK;
    }
    let out = session_table(&list);
    use std::io::Write;
    // A closed pipe (`buddy sessions | head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    EXIT_OK
}

/// Sessions as a table: id, age, message count, model, first prompt.
fn session_table(list: &[session::Summary]) -> String {
    let now = crate::clock::now_unix();
    let model_width = list
        .iter()
        .map(|s| s.model.len())
        .max()
        .unwrap_or(5)
        .clamp(5, 30);
    let mut out = format!(
        "{:<20}  {:>9}  {:>5}  {:<model_width$}  FIRST PROMPT\n",
        "ID", "USED", "MSGS", "MODEL"
    );
    for s in list {
        out.push_str(&format!(
            "{:<20}  {:>9}  {:>5}  {:<model_width$}  {}\n",
            s.id,
            crate::clock::age(s.used, now),
            s.messages,
            s.model,
            s.title
        ));
    }
    out
}

/// `buddy resume`: the session's history, then the line conversation on it.
async fn resume(args: ResumeArgs, overrides: &CliOverrides, target_args: &TargetArgs) -> i32 {
    let query = match (args.last, args.id) {
        (true, _) => "last".to_string(),
        (false, Some(id)) => id,
        (false, None) => {
            return usage_error(
                Style::detect(!overrides.no_color),
                "name the session to continue: `buddy resume ID` or `buddy resume --last` (`buddy sessions` lists them)",
            )
        }
    };
    interactive(overrides, Some(query), target_args).await
}

/// Bare `buddy` and `buddy resume`: the REPL on a terminal, the line session
/// when input or output is redirected.
async fn interactive(
    overrides: &CliOverrides,
    resume: Option<String>,
    target_args: &TargetArgs,
) -> i32 {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return line_session(overrides, resume, target_args).await;
    }
    let early_style = Style::detect(!overrides.no_color);
    let settings = match load_settings(overrides, early_style) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let style = Style::detect(settings.display.color);
    let execution = match target::open(target_args, &settings, true).await {
        Ok(e) => e,
        Err(m) => return usage_error(style, &m),
    };
    let Wired {
        mut agent,
        events,
        front,
    } = match wire(&settings, false, style, &execution) {
        Ok(w) => w,
        Err(m) => return usage_error(style, &m),
    };
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
    let mut session = None;
    if let Some(query) = &resume {
        match resume_into(&mut agent, &settings, query, style) {
            Ok(r) => {
                for w in &r.warnings {
                    banner.push_str(&format!("\n{} {w}", style.warning("warning:")));
                }
                if let Some(n) = &r.note {
                    banner.push_str(&format!("\n{}", style.dim(n)));
                }
                banner.push_str(&format!("\n{}", r.summary));
                session = Some(r.id);
            }
            Err(e) => return usage_error(style, &e.to_string()),
        }
    }
    let mut host = repl::Host {
        tools: build_tools(&settings, execution.tmux())
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
        settings,
        overrides: overrides.clone(),
        style,
        session,
        unsaved: false,
    };
    let opts = crate::ui::repl::ReplOptions {
        style,
        prompt: match execution.target.prompt_label() {
            Some(label) => format!("({label})> "),
            None => "> ".into(),
        },
        show_tool_calls: front.show_tool_calls,
        show_tokens: front.show_tokens,
        history_file: config::global_dir(&env).map(|d| d.join("history")),
        banner,
    };
    crate::ui::repl::Repl::new(agent, events, &mut host, opts)
        .run()
        .await
}

/// A plain line-by-line conversation for bare `buddy`, until the full-screen
/// REPL takes its place: one prompt per line, Ctrl-D to quit.
async fn line_session(
    overrides: &CliOverrides,
    resume: Option<String>,
    target_args: &TargetArgs,
) -> i32 {
    use tokio::io::AsyncBufReadExt;
    let early_style = Style::detect(!overrides.no_color);
    let settings = match load_settings(overrides, early_style) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let style = Style::detect(settings.display.color);
    let execution = match target::open(target_args, &settings, false).await {
        Ok(e) => e,
        Err(m) => return usage_error(style, &m),
    };
    if let Some(a) = &execution.attach {
        eprintln!("{}", style.dim(a));
    }
    let Wired {
        mut agent,
        mut events,
        front,
    } = match wire(&settings, false, style, &execution) {
        Ok(w) => w,
        Err(m) => return usage_error(style, &m),
    };
    let mut saving = false;
    if let Some(query) = &resume {
        if let Err(code) = continue_session(&mut agent, &settings, query, style, true) {
            return code;
        }
        saving = true;
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
    let mut last = EXIT_OK;
    loop {
        if interactive {
            eprint!("{}", style.actor("> "));
        }
        let line = match lines.next_line().await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                eprintln!("{} cannot read input: {e}", style.error("error:"));
                return EXIT_FAILURE;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        if matches!(line.trim(), "/quit" | "/exit" | "/q") {
            break;
        }
        if !saving {
            // A session starts with its first prompt, so idle starts leave no files.
            start_session(&mut agent, &settings, style);
            saving = true;
        }
        let (handle, cancel) = Cancel::new();
        let frontend = ExecFrontEnd::new(front);
        let outcome = drive(
            agent.run_turn(&line, cancel),
            frontend.run(&mut events, &handle),
        )
        .await;
        last = match outcome {
            ExecOutcome::Interrupted => EXIT_OK,
            other => outcome_code(other, style),
        };
        // Events of an abandoned turn must not leak into the next one.
        while events.try_recv().is_ok() {}
    }
    last
}
