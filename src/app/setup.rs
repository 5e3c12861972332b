//! Settings into an agent setup: the settings resolved once at start-up
//! (`load_settings`, the one place the config file is read, the trust
//! question asked, discovery tried and the colour chosen), then everything
//! the agent is built from: the model client, the tools and what they
//! protect, the approval rules, the limits, the hooks, the system prompt.
//! Front ends and subcommands read the `Resolved` value; nothing here shows
//! a conversation or drives an agent.

use super::{approvals, execution::Execution, AppError};
use super::{custom, discovery, env, mcp, project, sessions, trust};
use crate::agent::control::ApprovalRules;
use crate::agent::prompt::{render, PromptContext};
use crate::agent::protocol::{ApprovalPolicy, QueueMode};
use crate::agent::{
    self, tokens, AgentOptions, AgentSetup, CompactionOptions, Limits, ModelInfo, ToolStrategy,
};
use crate::auth::store::AuthStore;
use crate::auth::{AuthError, LoginCredentials};
use crate::config::trust::TrustStore;
use crate::config::{self, ApiProtocol, CliOverrides, ConfigError, Settings};
use crate::provider::completions::Completions;
use crate::provider::http::{ClientSettings, HttpClient, Protocol, StreamLimits, Transports};
use crate::session;
use crate::tools::{self, ToolRegistry};
use crate::ui::exec::ExecOptions;
use crate::ui::style::Style;
use crate::ui::terminal::Terminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a command runs with, resolved once at start-up: the rest of the
/// command reads this instead of the config file, the environment or the
/// terminal again (as ripgrep resolves its arguments once).
pub(crate) struct Resolved {
    pub settings: Settings,
    /// The overrides that reproduce `settings` (a server discovery found
    /// included), for model switches later.
    pub overrides: CliOverrides,
    /// Colour on stderr: `display.color`, `--no-color`, `NO_COLOR` and the
    /// terminal, decided once.
    pub style: Style,
    /// The directory whose settings these are: where the project, its
    /// config and its sessions are found and the tools work.
    pub cwd: PathBuf,
    /// The config file as start-up parsed it, for settings of another
    /// profile later (`/model`, a model list, `/login`).
    pub parsed: Arc<Parsed>,
    /// Which streams are a terminal, and what kind: read once here.
    pub terminal: Terminal,
}

/// The config file as read and parsed once, with the directory and trust
/// list it was read for: another profile's settings are resolved from it
/// without reading or parsing the file again.
pub(crate) struct Parsed {
    pub file: config::ConfigFile,
    pub source: Option<PathBuf>,
    pub cwd: PathBuf,
    pub trust: Option<Arc<TrustStore>>,
}

impl Parsed {
    /// The settings `overrides` choose (a profile, a model) from this file.
    pub fn resolve(&self, overrides: &CliOverrides) -> Result<Settings, ConfigError> {
        config::resolve_here(
            self.file.clone(),
            self.source.clone(),
            &self.cwd,
            &env,
            overrides,
            self.trust.as_ref(),
        )
    }
}

/// Loads settings: the config file is read and parsed once, and that one
/// parse serves the trust question, the profile's resolution and, with no
/// key for the active profile and nothing chosen by the user, discovery of a
/// model server on this machine. Says so when a first run created the
/// global config. Credentials named in the settings are hidden from every
/// command buddy starts.
pub(crate) async fn load_settings(
    overrides: &CliOverrides,
    cwd: &Path,
) -> Result<Resolved, AppError> {
    // With an explicit --config the user chose the file: nothing else is written.
    let created = if overrides.config.is_none() {
        config::ensure_global_config(&env)
    } else {
        None
    };
    let cwd = cwd.to_path_buf();
    let usage = AppError::Config;
    // Read at its first question and kept for the rest of the command.
    let trust = TrustStore::of_user(&env);
    let loaded = config::load_file(&cwd, &env, overrides, trust.as_deref());
    // A file that does not load leaves colour to the flag and the terminal.
    let color = loaded.as_ref().map_or(true, |(f, _)| f.display.color);
    let terminal = Terminal::detect();
    let style = Style::detect(!overrides.no_color && color, &terminal);
    if let Some(path) = &created {
        eprintln!(
            "{}",
            style.dim(&format!("created a default config at {}", path.display()))
        );
    }
    let (mut file, mut source) = loaded.map_err(usage)?;
    if trust::ask_if_untrusted(&file, overrides, style, &terminal, trust.as_deref()) {
        // Trusted just now: what was held back applies, so read it as such.
        (file, source) =
            config::load_file(&cwd, &env, overrides, trust.as_deref()).map_err(usage)?;
    }
    // Kept for discovery, which resolves the same file again with the
    // server it found, and for the REPL's profile switches: a copy costs
    // far less than reading and parsing it again.
    let parsed = Arc::new(Parsed {
        file: file.clone(),
        source: source.clone(),
        cwd: cwd.clone(),
        trust: trust.clone(),
    });
    let (settings, overrides) =
        match config::resolve_here(file, source.clone(), &cwd, &env, overrides, trust.as_ref()) {
            Ok(s) => (s, overrides.clone()),
            Err(e @ ConfigError::MissingKey { .. }) => {
                let loaded = discovery::Loaded {
                    file: parsed.file.clone(),
                    source,
                    trust,
                };
                discovery::instead_of_missing_key(&cwd, &env, overrides, loaded, e, style).await?
            }
            Err(e) => return Err(usage(e)),
        };
    let (settings, overrides) = model_of_the_server(settings, overrides, style).await;
    crate::host::hide_env(settings.hidden_env.clone());
    // Keys named only in the config (a profile's api_key_env) leave buddy's
    // own /proc environ too; the usual names already did in main.
    let hidden = &settings.hidden_env;
    crate::procenv::scrub(|name| hidden.iter().any(|h| h == name));
    if let Some(line) = settings.untrusted.as_ref().and_then(trust::warning) {
        eprintln!("{} {line}", style.warning("warning:"));
    }
    for line in &settings.mcp_notes {
        eprintln!("{} {line}", style.warning("warning:"));
    }
    Ok(Resolved {
        settings,
        overrides,
        style,
        cwd,
        parsed,
        terminal,
    })
}

/// How long a server named by `--base-url` alone gets to list its models.
const MODEL_LIST_WAIT: Duration = Duration::from_secs(5);

/// With `--base-url` (or `BUDDY_BASE_URL`) naming another server and no
/// model chosen, the profile's model id means nothing there: the server's
/// first listed model is used instead (and the window it reports), as
/// discovery does. When it lists none, the profile's id goes and a line
/// says how to pick one.
async fn model_of_the_server(
    mut settings: Settings,
    mut overrides: CliOverrides,
    style: Style,
) -> (Settings, CliOverrides) {
    if !settings.api.model_unchosen {
        return (settings, overrides);
    }
    let loopback = url::Url::parse(&settings.api.base_url).is_ok_and(|u| {
        u.scheme() == "http"
            && match u.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                None => false,
            }
    });
    let listed = if loopback {
        // Plain HTTP on this machine: discovery's probe, which builds no TLS
        // client (and so reads no trust store) and asks through no proxy.
        // Any other host is asked as the request will be, proxy included.
        match discovery::probe_all(std::slice::from_ref(&settings.api.base_url))
            .await
            .pop()
        {
            Some(discovery::Probe::Models(models)) if !models.is_empty() => Ok(Ok(models)),
            // A plain server that lists nothing is left to answer the
            // request itself, quietly, as before.
            _ => return (settings, overrides),
        }
    } else {
        match client_for(&settings, None) {
            Ok(client) => tokio::time::timeout(MODEL_LIST_WAIT, client.list_models()).await,
            Err(_) => return (settings, overrides),
        }
    };
    let base = crate::text::one_line(&settings.api.base_url, 200);
    match listed {
        Ok(Ok(models)) if !models.is_empty() => {
            let first = &models[0];
            eprintln!(
                "{}",
                style.dim(&format!(
                    "model: {} (the first {base} lists; -m picks another)",
                    crate::text::one_line(&first.id, 200)
                ))
            );
            settings.api.model = first.id.clone();
            if settings.api.context_limit.is_none() {
                settings.api.context_limit = first.context;
            }
            settings.api.model_unchosen = false;
            overrides.model = Some(first.id.clone());
        }
        other => {
            let why = match other {
                Ok(Ok(_)) => "it lists none".to_string(),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {} s", MODEL_LIST_WAIT.as_secs()),
            };
            eprintln!(
                "{} cannot ask {base} for its models ({why}); sending the profile's model `{}` (-m picks one)",
                style.warning("note:"),
                crate::text::one_line(&settings.api.model, 200)
            );
        }
    }
    (settings, overrides)
}

/// The approval rules from config: the denylist and `shell_confirm`.
pub(crate) fn approval_rules(settings: &Settings) -> ApprovalRules {
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
pub(crate) fn has_tty() -> bool {
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

pub(crate) fn agent_options(settings: &Settings) -> AgentOptions {
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
            max_cost_usd: None,
        },
        strategy,
        context_limit: tokens::context_limit(settings.api.context_limit, &settings.api.model),
        compaction: CompactionOptions {
            auto: a.auto_compact,
            threshold: a.compact_at,
            ..CompactionOptions::default()
        },
        subagents: crate::agent::subagent::SubagentOptions {
            max_turns: a.subagent_max_turns,
            max_tokens: a.subagent_max_tokens,
            max_parallel: a.max_subagents,
            depth: a.subagent_depth,
        },
    }
}

pub(crate) fn model_info(settings: &Settings) -> ModelInfo {
    ModelInfo {
        model: settings.api.model.clone(),
        profile: settings.api.profile.clone(),
        base_url: settings.api.base_url.clone(),
        no_images: !settings.api.images,
        pricing: pricing(&settings.api),
    }
}

/// What the profile's tokens cost: its own `price`, else nothing on a
/// server on this machine, else (not for a login, billed by its plan) the
/// price table's figure, else unknown.
fn pricing(api: &config::ApiSettings) -> tokens::Pricing {
    if let Some(p) = api.price {
        return tokens::Pricing::Priced(tokens::Price {
            input: p.input,
            output: p.output,
            cached_input: p.cached_input,
        });
    }
    if on_this_machine(&api.base_url) {
        return tokens::Pricing::Local;
    }
    if api.login.is_some() {
        // A subscription login is billed by its plan, not per token.
        return tokens::Pricing::Unknown;
    }
    tokens::catalog_price(&api.model).map_or(tokens::Pricing::Unknown, tokens::Pricing::Priced)
}

/// Whether `base_url` names a loopback address (where ollama, llama.cpp and
/// the servers discovery finds listen).
fn on_this_machine(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let host = url.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Everything the agent needs, for the active profile and target.
pub(crate) fn agent_setup(
    settings: &Settings,
    execution: &Execution,
    approval: ApprovalRules,
    options: AgentOptions,
    models: Option<Box<dyn agent::service::ModelSwitcher>>,
    transports: Option<&Transports>,
    found: Option<&custom::Found>,
) -> Result<AgentSetup, AppError> {
    let cwd = execution.workdir.clone();
    let client = client_for(settings, transports)?;
    let mut registry = build_tools(settings, execution.tmux(), execution.sandbox.clone(), &cwd);
    // The caller's own search when it made one (exec looks for custom
    // commands first): the same directories, read once.
    let skills = match found {
        Some(f) => f.skills.clone(),
        None => custom_files(settings, &cwd).skills,
    };
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
    if let Some(servers) = mcp::tools(settings, &names, &cwd) {
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
        cwd: cwd.clone(),
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
            cwd.clone(),
            crate::redact::known().all().to_vec(),
        ))),
        models,
        hooks: hooks(&settings.hooks)?,
        output: None,
        telemetry: telemetry(settings),
    })
}

/// The process's trace exporter when `[telemetry] otlp_endpoint` is set.
/// The endpoint was checked when the config was read; a failure to start
/// leaves this agent untraced rather than refusing to run it.
fn telemetry(settings: &Settings) -> Option<crate::telemetry::Exporter> {
    let endpoint = settings.telemetry.otlp_endpoint.as_deref()?;
    crate::telemetry::exporter(endpoint).ok()
}

fn reg_skill(registry: &mut ToolRegistry, skills: Vec<tools::skill::Skill>, cap: usize) {
    registry.register(Arc::new(tools::skill::SkillTool::new(skills, cap)));
}

/// The custom commands and skills for this directory: the project's own
/// only when it is trusted (`config::trust::project_trusted`).
pub(crate) fn custom_files(settings: &Settings, cwd: &std::path::Path) -> custom::Found {
    let trusted = config::trust::project_trusted(
        cwd,
        settings.source.as_deref(),
        settings.untrusted.is_some(),
        settings.trust.as_deref(),
    );
    let config_dir = config::global_dir(&env);
    custom::find(cwd, config_dir.as_deref(), trusted)
}

/// The `[[hooks.EVENT]]` entries as the agent runs them; a matcher that is
/// not a regular expression is a usage error naming it.
pub(crate) fn hooks(section: &config::HooksSection) -> Result<agent::hooks::Hooks, AppError> {
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
                .map_err(|e| AppError::config(e.to_string()))?;
        }
    }
    Ok(hooks)
}

pub(crate) fn exec_options(settings: &Settings, style: Style, terminal: Terminal) -> ExecOptions {
    ExecOptions {
        terminal,
        style,
        show_tool_calls: settings.display.show_tool_calls,
        show_tokens: settings.display.show_tokens,
        plain_answer: false,
    }
}

/// The registry for the enabled tools, each capped by its own limit, else the
/// global one, else the tool's default.
pub(crate) fn build_tools(
    settings: &Settings,
    tmux: bool,
    sandbox: Option<Arc<crate::host::sandbox::Sandbox>>,
    cwd: &Path,
) -> ToolRegistry {
    let t = &settings.tools;
    let cap =
        |own: Option<usize>, default: usize| own.or(t.max_output_chars).unwrap_or(default).max(100);
    let mut reg = ToolRegistry::new();
    reg.defer_tools_after(t.tool_search_after_bytes);
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
        // Background jobs (`run_shell` with `background`) are followed with these.
        reg.register(Arc::new(tools::jobs::tools::ShellOutputTool::new(cap(
            t.shell_max_output_chars,
            tools::shell::DEFAULT_MAX_OUTPUT_CHARS,
        ))));
        reg.register(Arc::new(tools::jobs::tools::ShellWriteTool));
        reg.register(Arc::new(tools::jobs::tools::ShellKillTool));
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
            tools::files::WriteFileTool::new(max).protecting(own_files(settings, cwd)),
        ));
        let timeout = Duration::from_secs(t.shell_timeout_secs.max(1));
        if wants_patch(t.edit_format, &settings.api.model) {
            reg.register(Arc::new(
                tools::patch::ApplyPatchTool::new(max)
                    .with_timeout(timeout)
                    .protecting(own_files(settings, cwd)),
            ));
        } else {
            reg.register(Arc::new(
                tools::edit::EditFileTool::new(max)
                    .with_timeout(timeout)
                    .protecting(own_files(settings, cwd)),
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
    // A rewind writes files too, and refuses the same ones.
    reg.protect_own_files(own_files(settings, cwd));
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
/// the history), and this directory's sessions. Nothing is resolved here
/// (see `Protected`), so building the list costs no system call.
pub(crate) fn own_files(settings: &Settings, cwd: &Path) -> tools::protect::Protected {
    let mut p = user_own_files();
    for path in config::search_path(cwd, &env)
        .iter()
        .chain(settings.source.iter())
    {
        p = p.file("config file", path);
    }
    for dir in [session::DIR, session::LEGACY_DIR] {
        p = p.dir("session directory", &cwd.join(dir));
    }
    p
}

/// The part of [`own_files`] that is the user's, wherever buddy works: the
/// config directory, the login store, the trust list.
pub(crate) fn user_own_files() -> tools::protect::Protected {
    let mut p = tools::protect::Protected::new();
    if let Some(dir) = config::global_dir(&env) {
        p = p.dir("config directory", &dir);
    }
    if let Some(path) = crate::auth::store::AuthStore::default_path() {
        p = p.file("login store", &path);
    }
    if let Some(path) = config::trust::store_path(&env) {
        p = p.file("trust list", &path);
    }
    p
}

/// Makes every secret `settings` can reach known to the redaction (keys,
/// the values of the variables buddy hides from commands, login tokens).
pub(crate) fn remember_secrets(settings: &Settings) {
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
    // MCP servers' OAuth logins (`mcp-auth.json`).
    if let Some(path) = crate::mcp::oauth::store::Store::default_path() {
        crate::redact::remember(crate::mcp::oauth::store::Store::new(path).secrets());
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
        let style = Style::detect(color, &Terminal::detect());
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
pub(crate) fn client_for(
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
        Some(path) => crate::net::load_ca_file(path)
            .map_err(|e| AppError::config(format!("profile `{}`: {e}", api.profile)))?,
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
pub(crate) fn auth_store() -> Result<AuthStore, AuthError> {
    AuthStore::default_path()
        .map(AuthStore::new)
        .ok_or(AuthError::NoConfigDir)
}

/// Every tool buddy itself can offer, each once: the registry with every
/// switch on and tmux (so the pane's tools), once with `edit_file` and once
/// with `apply_patch`, and the `skill` tool. The checks of what a new tool
/// needs (CONTRIBUTING.md, "Where new things go") run over this list.
#[cfg(test)]
pub(crate) fn builtin_tool_names() -> Vec<&'static str> {
    let mut names = std::collections::BTreeSet::new();
    for format in ["edit", "patch"] {
        let text = format!(
            "[agent]\nmodel = \"p\"\n[models.p]\napi_base_url = \"http://127.0.0.1:8080/v1\"\n\
             model = \"m\"\n[tools]\nshell_enabled = true\nfiles_enabled = true\nfetch_enabled = true\n\
             search_enabled = true\ntime_enabled = true\nedit_format = \"{format}\"\n"
        );
        let file = config::parse(&text, None).expect("the test's config parses");
        let settings = config::resolve(file, None, &|_| None, &config::CliOverrides::default())
            .expect("the test's config resolves");
        let mut reg = build_tools(&settings, true, None, Path::new("/w"));
        reg_skill(&mut reg, Vec::new(), 1000);
        names.extend(reg.names());
    }
    names.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokens::Pricing;

    /// The words of `text`, where `_` and `-` belong to a word (tool names
    /// such as `run_shell` and `send-keys`).
    fn words(text: &str) -> std::collections::BTreeSet<&str> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .filter(|w| !w.is_empty())
            .collect()
    }

    #[test]
    fn the_builtin_tool_list_holds_every_kind_of_tool() {
        // The checks below are only as good as this list.
        let names = builtin_tool_names();
        for expected in [
            "run_shell",
            "capture-pane",
            "send-keys",
            "read_file",
            "write_file",
            "edit_file",
            "apply_patch",
            "grep",
            "glob",
            "fetch_url",
            "web_search",
            "time",
            "skill",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
    }

    #[test]
    fn every_builtin_tool_has_an_editor_kind() {
        for name in builtin_tool_names() {
            assert!(
                crate::acp::translate::builtin_kind(name).is_some(),
                "`{name}` has no ToolKind in acp::translate::builtin_kind"
            );
        }
    }

    #[test]
    fn every_builtin_tool_is_named_in_architecture_md() {
        let doc = include_str!("../../docs/ARCHITECTURE.md");
        let named = words(doc);
        for name in builtin_tool_names() {
            assert!(
                named.contains(name),
                "docs/ARCHITECTURE.md does not name the tool `{name}` (tools/ in the layer list)"
            );
        }
    }

    fn api(base_url: &str, model: &str) -> config::ApiSettings {
        let text = format!(
            "[agent]\nmodel = \"p\"\n[models.p]\napi_base_url = \"{base_url}\"\nmodel = \"{model}\"\n"
        );
        let file = config::parse(&text, None).unwrap();
        config::resolve(file, None, &|_| None, &config::CliOverrides::default())
            .unwrap()
            .api
    }

    #[test]
    fn price_comes_from_the_profile_then_loopback_then_the_table() {
        assert_eq!(
            pricing(&api("http://127.0.0.1:8080/v1", "gpt-4o")),
            Pricing::Local
        );
        assert_eq!(
            pricing(&api("http://localhost:11434/v1", "llama3.1")),
            Pricing::Local
        );
        assert_eq!(pricing(&api("http://[::1]:8080/v1", "x")), Pricing::Local);
        assert!(matches!(
            pricing(&api("https://api.openai.com/v1", "gpt-4o")),
            Pricing::Priced(p) if p.input == 2.50
        ));
        assert_eq!(
            pricing(&api("https://llm.example/v1", "mystery-1")),
            Pricing::Unknown
        );
        let mut own = api("http://127.0.0.1:8080/v1", "gpt-4o");
        own.price = Some(config::PriceConfig {
            input: 1.0,
            output: 2.0,
            cached_input: None,
        });
        assert!(matches!(pricing(&own), Pricing::Priced(p) if p.output == 2.0));
    }
}
