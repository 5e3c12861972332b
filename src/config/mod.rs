//! Configuration: finding the file, parsing it, and resolving the active model
//! profile with environment and command-line overrides into the settings the rest
//! of buddy runs with. Nothing here does network I/O.

pub mod approvals;
mod error;
mod file;
pub mod mcp;
pub mod trust;

pub use error::{ConfigError, LocalServerError, LocalServerProblem, McpEntryError};
pub use file::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The documented template; also the global config written on first run.
pub const TEMPLATE: &str = include_str!("../../buddy.toml.example");

/// Overrides from the command line.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    pub config: Option<PathBuf>,
    /// A profile name or a raw model id.
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub no_color: bool,
    /// Picks the profile outright, so `model` can be a raw model id for it
    /// (the REPL's `/model` keeps the profile in use this way).
    pub profile: Option<String>,
    /// A local server found by discovery: it becomes a keyless profile and
    /// the default active one.
    pub local: Option<LocalServer>,
}

/// A model server discovery found on loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalServer {
    pub base_url: String,
    pub model: String,
    /// The context window the server reported for the model, if it did.
    pub context_limit: Option<u64>,
}

/// The active profile, fully resolved.
#[derive(Clone)]
pub struct ApiSettings {
    pub profile: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub protocol: ApiProtocol,
    pub stream: bool,
    pub context_limit: Option<u64>,
    /// Output cap per response; the Messages protocol sends its own default
    /// when unset, since Anthropic requires one.
    pub max_tokens: Option<u64>,
    /// Prompt-cache breakpoints (Anthropic Messages; on by default there).
    pub prompt_cache: bool,
    /// Set for `auth = "login"`: the issuer whose stored tokens are used.
    pub login: Option<crate::auth::Issuer>,
    /// The profile's `ca_file`, resolved; read when the client is built.
    pub ca_file: Option<PathBuf>,
    /// The model takes images (`images`, default true).
    pub images: bool,
    /// The profile's own `price`, checked (finite, not negative).
    pub price: Option<PriceConfig>,
    /// The base URL came from the flag or the environment, names another
    /// server than the profile's, and no model was chosen: the profile's
    /// model id means nothing there, so start-up asks the server for its
    /// models and takes the first.
    pub model_unchosen: bool,
}

impl std::fmt::Debug for ApiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiSettings")
            .field("profile", &self.profile)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("protocol", &self.protocol)
            .field("stream", &self.stream)
            .field("context_limit", &self.context_limit)
            .field("max_tokens", &self.max_tokens)
            .field("prompt_cache", &self.prompt_cache)
            .field("login", &self.login)
            .field("ca_file", &self.ca_file)
            .field("images", &self.images)
            .field("price", &self.price)
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The file the settings came from; `None` for built-in defaults.
    pub source: Option<PathBuf>,
    /// Environment variables that hold credentials buddy may use (every
    /// profile's `api_key_env`, the standard ones) plus `tools.hide_env`:
    /// commands run for the model never see them.
    pub hidden_env: Vec<String>,
    pub api: ApiSettings,
    pub agent: AgentSection,
    pub tools: ToolsSection,
    pub network: NetworkSection,
    pub display: DisplaySection,
    /// `[ui]`: the REPL's notifications.
    pub ui: UiSection,
    pub execution: ExecutionSection,
    /// Hook commands; empty when the file is an untrusted project file.
    pub hooks: HooksSection,
    /// `buddy serve`'s limits as the file sets them.
    pub serve: ServeSection,
    /// `[telemetry]`: where trace spans go.
    pub telemetry: TelemetrySection,
    /// Every profile name, for messages and pickers.
    pub profiles: Vec<String>,
    /// Keys written in the file (every profile's `api_key`): redacted from
    /// whatever buddy shows, whichever profile is in use.
    pub profile_keys: Vec<String>,
    /// Set when the file is an untrusted project file: what was ignored.
    pub untrusted: Option<trust::Untrusted>,
    /// MCP servers by name: the file's `[mcp_servers]`, then a trusted
    /// project `.mcp.json`'s (the file's own win a clash).
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// Lines for warnings about `.mcp.json`: held back untrusted, unreadable.
    pub mcp_notes: Vec<String>,
    /// The trust list these settings were resolved with, read once and
    /// asked again later in the command (a project's own prompt files).
    pub trust: Option<Arc<trust::TrustStore>>,
}

/// Where buddy's own global files live: `$XDG_CONFIG_HOME/buddy`, else
/// `~/.config/buddy`.
pub fn global_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(x) = env("XDG_CONFIG_HOME").filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(x).join("buddy"));
    }
    home(env).map(|h| h.join(".config").join("buddy"))
}

fn home(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(dirs::home_dir)
}

/// Candidate files in precedence order (first existing wins).
pub fn search_path(cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out = vec![cwd.join("buddy.toml"), cwd.join("agent.toml")];
    if let Some(g) = global_dir(env) {
        out.push(g.join("buddy.toml"));
    }
    if let Some(h) = home(env) {
        out.push(h.join(".config").join("agent").join("agent.toml"));
    }
    out
}

/// Writes the template as the global config if none exists. Returns the path
/// when it created one. Never overwrites.
pub fn ensure_global_config(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let dir = global_dir(env)?;
    let path = dir.join("buddy.toml");
    if path.exists() {
        return None;
    }
    std::fs::create_dir_all(&dir).ok()?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&path).ok()?;
    use std::io::Write;
    f.write_all(TEMPLATE.as_bytes()).ok()?;
    Some(path)
}

/// Finds, parses and resolves the configuration.
pub fn load(
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    cli: &CliOverrides,
) -> Result<Settings, ConfigError> {
    let trust = trust::TrustStore::of_user(env);
    let (file, source) = load_file(cwd, env, cli, trust.as_deref())?;
    resolve_here(file, source, cwd, env, cli, trust.as_ref())
}

/// Resolves a file `load_file` found for directory `cwd`: the profile and
/// overrides (`resolve`), then a trusted project `.mcp.json`'s servers. For
/// a caller that already holds the parsed file (start-up reads it once) and
/// the trust list (`trust`, kept in the settings for later questions).
pub fn resolve_here(
    file: ConfigFile,
    source: Option<PathBuf>,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    cli: &CliOverrides,
    trust: Option<&Arc<trust::TrustStore>>,
) -> Result<Settings, ConfigError> {
    let mut settings = resolve(file, source, env, cli)?;
    settings.trust = trust.cloned();
    let project = mcp::project_servers(cwd, trust.map(|t| &**t));
    for (name, server) in project.servers {
        settings.mcp_servers.entry(name).or_insert(server);
    }
    settings.mcp_notes.extend(project.error);
    if let Some((path, names)) = project.untrusted {
        settings.mcp_notes.push(format!(
            "ignoring the MCP servers {} of the untrusted {}; run `buddy trust {}` if you mean them",
            crate::text::one_line(&names.join(", "), 300),
            crate::text::one_line(&path.display().to_string(), 200),
            mcp::MCP_JSON
        ));
    }
    Ok(settings)
}

/// Finds and parses the configuration file (or the built-in template) without
/// resolving a profile; for commands that need no model, such as `login`.
/// A project file the trust list (`trust`) does not hold is held back.
pub fn load_file(
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    cli: &CliOverrides,
    trust: Option<&trust::TrustStore>,
) -> Result<(ConfigFile, Option<PathBuf>), ConfigError> {
    let (source, text) = match &cli.config {
        Some(p) => (Some(p.clone()), read_config(p)?),
        None => {
            let mut found = None;
            for p in search_path(cwd, env) {
                match read_config_bytes(&p) {
                    Ok(bytes) => {
                        found = Some((decode_config(&p, bytes)?, p));
                        break;
                    }
                    Err(e) if e.is_not_found() => continue,
                    Err(e) => return Err(io_error(&p, &e)),
                }
            }
            match found {
                Some((text, p)) => (Some(p), text),
                None => (None, TEMPLATE.to_string()),
            }
        }
    };
    let mut file = parse(&text, source.as_deref())?;
    if let Some(path) = &source {
        // Started inside buddy's own config directory, the global file is
        // still the user's own.
        let global = global_dir(env).map(|d| d.join("buddy.toml"));
        if trust::is_project_file(path, cwd, cli.config.is_some())
            && global.as_deref() != Some(path.as_path())
        {
            let trusted = trust.is_some_and(|s| s.is_trusted(path, text.as_bytes()));
            if !trusted {
                let env_key = env_first(env, &KEY_ENV).is_some();
                let untrusted = trust::hold_back(&mut file, path, env_key);
                file.untrusted = Some(untrusted);
            }
        }
    }
    Ok((file, source))
}

/// The most a config file may hold: far more than any real one, small enough
/// that a wrong path (a log, /dev/zero) is refused at once.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The variables the API key for whatever URL is in use is taken from, first
/// set wins.
pub const KEY_ENV: [&str; 2] = ["BUDDY_API_KEY", "AGENT_API_KEY"];

/// The variable `buddy serve` takes its token from when `--token` is not given.
pub const SERVE_TOKEN_ENV: &str = "BUDDY_SERVE_TOKEN";

/// The variable `buddy mcp-server --listen` takes its token from when
/// `--token` is not given.
pub const MCP_SERVER_TOKEN_ENV: &str = "BUDDY_MCP_SERVER_TOKEN";

/// The variable the session database's URL is taken from when `--store` is
/// not given (`buddy serve`, `sessions`, `export`, `resume`): it may hold a
/// password, which a flag would show in the process list.
pub const STORE_ENV: &str = "BUDDY_STORE";

/// Every variable buddy takes a credential from by a fixed name: hidden from
/// every command, hook and MCP server buddy starts, whatever the config adds
/// to them ([`credential_env`] adds the names the config gives).
pub const SECRET_ENV: [&str; 7] = [
    KEY_ENV[0],
    KEY_ENV[1],
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    SERVE_TOKEN_ENV,
    MCP_SERVER_TOKEN_ENV,
    STORE_ENV,
];

/// The one list of variables no child of buddy's may see: [`SECRET_ENV`],
/// every profile's `api_key_env`, every MCP server's `bearer_token_env` and
/// `client_secret_env`, and
/// `tools.hide_env`. Sorted, without repeats.
pub fn credential_env(file: &ConfigFile) -> Vec<String> {
    let mut names: Vec<String> = SECRET_ENV
        .iter()
        .map(|s| s.to_string())
        .chain(file.models.values().filter_map(|p| p.api_key_env.clone()))
        .chain(file.tools.hide_env.iter().cloned())
        .chain(
            file.mcp_servers
                .values()
                .flat_map(|s| [s.bearer_token_env.clone(), s.client_secret_env.clone()])
                .flatten(),
        )
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The most an `api_key_file` may hold.
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The shares of the context window `[agent] compact_at` may name.
pub const COMPACT_AT_RANGE: std::ops::RangeInclusive<f64> = 0.1..=0.95;

fn read_config_bytes(path: &Path) -> Result<Vec<u8>, crate::localfile::ReadError> {
    crate::localfile::read_regular(path, MAX_CONFIG_BYTES)
}

fn io_error(path: &Path, e: &crate::localfile::ReadError) -> ConfigError {
    ConfigError::Io {
        path: path.to_path_buf(),
        error: e.to_string(),
    }
}

/// Reads config file `path`: a regular file of at most `MAX_CONFIG_BYTES`, in UTF-8.
fn read_config(path: &Path) -> Result<String, ConfigError> {
    let bytes = read_config_bytes(path).map_err(|e| io_error(path, &e))?;
    decode_config(path, bytes)
}

/// UTF-8 text of `bytes`, or an error at the line and column of the first
/// invalid byte (TOML is UTF-8; a Latin-1 or binary file is not guessed at).
fn decode_config(path: &Path, bytes: Vec<u8>) -> Result<String, ConfigError> {
    match String::from_utf8(bytes) {
        Ok(t) => Ok(t),
        Err(e) => {
            let bytes = e.as_bytes();
            let at = e.utf8_error().valid_up_to();
            let valid = String::from_utf8_lossy(&bytes[..at]);
            let (line, column) = line_col(&valid, valid.len());
            Err(ConfigError::Parse {
                path: Some(path.to_path_buf()),
                line,
                column,
                message: format!(
                    "invalid UTF-8 (byte 0x{:02x}); save the file as UTF-8",
                    bytes[at]
                ),
            })
        }
    }
}

/// The project-local config file buddy would load here (not `--config`),
/// with its text; `None` when the global one or none applies.
pub fn project_file(cwd: &Path) -> Option<(PathBuf, String)> {
    [cwd.join("buddy.toml"), cwd.join("agent.toml")]
        .into_iter()
        .find_map(|p| read_config(&p).ok().map(|t| (p, t)))
}

/// Parses TOML text; errors name the file, line and column.
pub fn parse(text: &str, path: Option<&Path>) -> Result<ConfigFile, ConfigError> {
    toml::from_str::<ConfigFile>(text).map_err(|e| {
        let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
        ConfigError::Parse {
            path: path.map(Path::to_path_buf),
            line,
            column,
            message: e.message().split_whitespace().collect::<Vec<_>>().join(" "),
        }
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

fn env_first(env: &dyn Fn(&str) -> Option<String>, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| env(n).filter(|v| !v.trim().is_empty()))
}

/// Applies profile selection, key resolution and overrides: file, then
/// environment, then command line.
pub fn resolve(
    mut file: ConfigFile,
    source: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
    cli: &CliOverrides,
) -> Result<Settings, ConfigError> {
    if file.models.is_empty() {
        // A file without profiles still works: borrow the built-in ones.
        if let Ok(t) = toml::from_str::<ConfigFile>(TEMPLATE) {
            file.models = t.models;
            if file.agent.model.is_none() {
                file.agent.model = t.agent.model;
            }
        }
    }
    let file_src = source.clone();
    // Checked on every load, so a bad entry is reported before it is needed.
    file.discovery.servers().map_err(|e| ConfigError::Invalid {
        path: file_src.clone(),
        message: e.to_string(),
    })?;
    file.telemetry
        .check()
        .map_err(|message| ConfigError::Invalid {
            path: file_src.clone(),
            message,
        })?;
    if let Some(local) = &cli.local {
        let name = local_profile_name(&file);
        file.models.insert(
            name.clone(),
            ModelProfile {
                api_base_url: Some(local.base_url.clone()),
                api: ApiProtocol::Completions,
                auth: AuthMode::ApiKey,
                provider: None,
                api_key: None,
                api_key_env: None,
                api_key_file: None,
                model: Some(local.model.clone()),
                context_limit: local.context_limit,
                stream: true,
                max_tokens: None,
                price: None,
                prompt_cache: None,
                ca_file: None,
                images: true,
            },
        );
        file.agent.model = Some(name);
    }
    let profiles: Vec<String> = file.models.keys().cloned().collect();

    // A `-m`/BUDDY_MODEL value picks a profile if it names one, else it is a model id.
    let wanted = cli
        .model
        .clone()
        .or_else(|| env_first(env, &["BUDDY_MODEL", "AGENT_MODEL"]));
    // A profile or model named by -m, BUDDY_MODEL or --profile is a choice.
    let picked = cli.profile.is_some() || wanted.is_some();
    let (profile_name, model_override) = match (cli.profile.clone(), wanted) {
        (Some(p), w) => (p, w),
        (None, Some(w)) if file.models.contains_key(&w) => (w, None),
        (None, Some(w)) => (active_profile_name(&file, &profiles, &file_src)?, Some(w)),
        (None, None) => (active_profile_name(&file, &profiles, &file_src)?, None),
    };
    let profile =
        file.models
            .get(&profile_name)
            .cloned()
            .ok_or_else(|| ConfigError::UnknownProfile {
                name: profile_name.clone(),
                known: profiles.clone(),
            })?;

    let key_sources = [
        profile.api_key.is_some(),
        profile.api_key_env.is_some(),
        profile.api_key_file.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if key_sources > 1 {
        return Err(ConfigError::Invalid {
            path: file_src,
            message: format!(
                "profile `{profile_name}` sets more than one of api_key, api_key_env and api_key_file; keep one"
            ),
        });
    }

    // A URL from the flag or the environment that is not the profile's own
    // server gets none of the profile's credentials: only BUDDY_API_KEY,
    // which the user gives for whatever URL is in use, or nothing at all
    // (a local server needs no key; a 401 then says one is missing).
    let override_url = match &cli.base_url {
        Some(u) => Some(("--base-url", u.clone())),
        None => ["BUDDY_BASE_URL", "AGENT_BASE_URL"]
            .into_iter()
            .find_map(|n| env(n).filter(|v| !v.trim().is_empty()).map(|v| (n, v))),
    };
    // Refused before anything is decided from it: a URL two parsers read
    // differently must not get as far as choosing a key.
    if let Some((from, url)) = &override_url {
        if let Some(problem) = base_url_problem(url) {
            return Err(ConfigError::Invalid {
                path: None,
                message: format!("{from} `{}` {problem}", crate::text::one_line(url, 200)),
            });
        }
    }
    let override_url = override_url.map(|(_, u)| u);
    let elsewhere = override_url
        .as_deref()
        .is_some_and(|u| !same_server(u, profile.api_base_url.as_deref()));
    let login = (profile.auth == AuthMode::Login && !elsewhere).then(|| {
        let provider = profile.provider.clone().unwrap_or_else(|| "openai".into());
        issuer_for(&file.auth, &provider)
    });
    // An untrusted project file's profile that sends elsewhere gets no key
    // from the environment (see `trust`).
    let env_key_allowed = !file
        .untrusted
        .as_ref()
        .is_some_and(|u| u.no_env_key.contains(&profile_name));
    let env_key = env_first(env, &KEY_ENV).filter(|_| env_key_allowed);
    let api_key = match (&login, env_key) {
        // A login-backed profile uses its tokens, never a stray key.
        (Some(_), _) => None,
        (None, Some(k)) => Some(k.trim().to_string()),
        (None, None) if elsewhere => None,
        (None, None) => resolve_profile_key(&profile_name, &profile, env)
            .map_err(|e| near_miss(e, cli.model.as_deref(), &profiles))?,
    };

    let base_url = override_url
        .or(profile.api_base_url.clone())
        .ok_or_else(|| ConfigError::Invalid {
            path: file_src.clone(),
            message: format!("profile `{profile_name}` has no api_base_url"),
        })?;
    if let Some(problem) = base_url_problem(&base_url) {
        return Err(ConfigError::Invalid {
            path: file_src.clone(),
            message: format!(
                "models.{profile_name}.api_base_url `{}` {problem}",
                crate::text::one_line(&base_url, 200)
            ),
        });
    }
    // A relative ca_file belongs with the config that names it, not with
    // whatever directory buddy happens to start in.
    let ca_file = profile.ca_file.as_deref().map(|f| {
        let path = expand_home(f, env);
        match file_src.as_deref().and_then(Path::parent) {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        }
    });
    let model_unchosen = elsewhere && !picked;
    let model = model_override
        .or(profile.model.clone())
        .unwrap_or_else(|| profile_name.clone());

    let price = profile.price;
    if let Some(p) = price {
        let fine = |v: f64| v.is_finite() && v >= 0.0;
        if !(fine(p.input) && fine(p.output) && p.cached_input.is_none_or(fine)) {
            return Err(ConfigError::Invalid {
                path: file_src,
                message: format!(
                    "models.{profile_name}.price: prices are US dollars per million tokens, not negative"
                ),
            });
        }
    }
    if file.agent.max_iterations == 0 || file.agent.max_turns == Some(0) {
        return Err(ConfigError::Invalid {
            path: file_src,
            message: "agent.max_turns (or max_iterations) must be at least 1".into(),
        });
    }
    // Below 0.1 it would summarise nearly every turn; above 0.95 the next
    // reply may not fit before the compaction comes.
    if !COMPACT_AT_RANGE.contains(&file.agent.compact_at) {
        return Err(ConfigError::Invalid {
            path: file_src,
            message: format!(
                "agent.compact_at is {}: it must be a share of the context window from {} to {}, such as 0.8",
                file.agent.compact_at,
                COMPACT_AT_RANGE.start(),
                COMPACT_AT_RANGE.end()
            ),
        });
    }
    if let Some(notify) = &file.ui.notify {
        if notify.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(ConfigError::Invalid {
                path: file_src,
                message:
                    "ui.notify must name a program first, such as [\"notify-send\", \"buddy\"]"
                        .into(),
            });
        }
    }
    if file.agent.tool_batch_size == 0 {
        return Err(ConfigError::Invalid {
            path: file_src,
            message: "agent.tool_batch_size must be at least 1".into(),
        });
    }
    if let Some(file::DurationValue::Text(t)) = &file.agent.max_duration {
        if let Err(e) = crate::clock::parse_duration(t) {
            return Err(ConfigError::Invalid {
                path: file_src,
                message: format!("agent.max_duration: {e}"),
            });
        }
    }
    if cli.no_color {
        file.display.color = false;
    }
    for (name, server) in &file.mcp_servers {
        server.check(name).map_err(|e| ConfigError::Invalid {
            path: file_src.clone(),
            message: e.to_string(),
        })?;
    }

    let hidden_env = credential_env(&file);
    let profile_keys = file
        .models
        .values()
        .filter_map(|p| p.api_key.clone())
        .collect();
    Ok(Settings {
        source,
        hidden_env,
        api: ApiSettings {
            profile: profile_name,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            model,
            protocol: profile.api,
            // The login-backed OpenAI backend only streams.
            stream: profile.stream || login.is_some(),
            context_limit: profile.context_limit,
            model_unchosen,
            max_tokens: profile.max_tokens,
            prompt_cache: profile
                .prompt_cache
                .unwrap_or(profile.api == ApiProtocol::Messages),
            login,
            ca_file,
            images: profile.images,
            price,
        },
        agent: file.agent,
        tools: file.tools,
        network: file.network,
        display: file.display,
        ui: file.ui,
        execution: file.execution,
        serve: file.serve,
        telemetry: file.telemetry,
        hooks: file.hooks,
        profiles,
        profile_keys,
        untrusted: file.untrusted,
        mcp_servers: file.mcp_servers,
        mcp_notes: Vec::new(),
        trust: None,
    })
}

/// Whether two base URLs name the same server: scheme, host and port (the
/// scheme's default port when none is written), as the HTTP client that sends
/// the request parses them. An unknown `profile_url`, or one that does not
/// parse, is never the same server.
pub fn same_server(url: &str, profile_url: Option<&str>) -> bool {
    match (origin(url), profile_url.and_then(origin)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `(scheme, host, port)` of an http(s) URL, by the parser reqwest uses: a
/// hand split disagrees with it on `\`, tabs, newlines and `@`, and the
/// disagreement is where a key would go to a host it is not for.
fn origin(text: &str) -> Option<(String, String, u16)> {
    let url = url::Url::parse(text).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    let port = url.port_or_known_default()?;
    Some((url.scheme().to_string(), host, port))
}

/// Why a base URL is refused, if it is: it must be an http(s) URL without
/// user information, backslashes or control characters, any of which can make
/// one reader see a different host than another.
pub fn base_url_problem(text: &str) -> Option<&'static str> {
    if text.chars().any(char::is_control) {
        return Some("holds a control character");
    }
    if text.contains('\\') {
        return Some("holds a backslash");
    }
    let Ok(url) = url::Url::parse(text) else {
        return Some("is not a URL");
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Some("must start with http:// or https://");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Some("holds a user name or password (`user@`); give the key as a key");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Some("names no host");
    }
    None
}

/// A missing key for a `-m` value that is not a profile but nearly spells
/// one is most likely a typo: say so, instead of blaming the key of the
/// profile the value fell through to.
fn near_miss(e: ConfigError, wanted: Option<&str>, profiles: &[String]) -> ConfigError {
    let (ConfigError::MissingKey { .. }, Some(wanted)) = (&e, wanted) else {
        return e;
    };
    // A profile named exactly is no typo: its own key is what is missing.
    if profiles.iter().any(|p| p == wanted) {
        return e;
    }
    match closest_profile(wanted, profiles) {
        Some(close) => ConfigError::NearMiss {
            name: wanted.to_string(),
            suggestion: close,
        },
        None => e,
    }
}

/// The profile name within two edits of `wanted` (the closest one), if any;
/// very short names need to be closer still.
pub fn closest_profile(wanted: &str, profiles: &[String]) -> Option<String> {
    let wanted_lc = wanted.to_lowercase();
    profiles
        .iter()
        .map(|p| (strsim::levenshtein(&wanted_lc, &p.to_lowercase()), p))
        .filter(|(d, p)| *d <= 2 && *d < p.chars().count().div_ceil(2).max(1) + 1)
        .min_by_key(|(d, _)| *d)
        .map(|(_, p)| p.clone())
}

/// The name discovery's profile gets: `local`, unless the file already has one.
pub fn local_profile_name(file: &ConfigFile) -> String {
    std::iter::once("local".to_string())
        .chain((2..).map(|n| format!("local-{n}")))
        .find(|n| !file.models.contains_key(n))
        .unwrap_or_else(|| "local".into())
}

/// Whether a missing key may be answered by looking for a local server: only
/// when the user picked nothing (no `-m`/`BUDDY_MODEL`, no base URL by flag
/// or environment) and the active profile is the template's default, which
/// the first run writes on the user's behalf.
pub fn may_discover(
    file: &ConfigFile,
    env: &dyn Fn(&str) -> Option<String>,
    cli: &CliOverrides,
) -> bool {
    let chosen = cli.model.is_some()
        || cli.base_url.is_some()
        || cli.profile.is_some()
        || env_first(
            env,
            &[
                "BUDDY_MODEL",
                "AGENT_MODEL",
                "BUDDY_BASE_URL",
                "AGENT_BASE_URL",
            ],
        )
        .is_some();
    let default = toml::from_str::<ConfigFile>(TEMPLATE)
        .ok()
        .and_then(|t| t.agent.model);
    let active_is_default = match &file.agent.model {
        None => true,
        Some(name) => Some(name) == default.as_ref(),
    };
    !chosen && active_is_default
}

fn active_profile_name(
    file: &ConfigFile,
    profiles: &[String],
    source: &Option<PathBuf>,
) -> Result<String, ConfigError> {
    match &file.agent.model {
        Some(name) if file.models.contains_key(name) => Ok(name.clone()),
        Some(name) => Err(ConfigError::UnknownProfile {
            name: name.clone(),
            known: profiles.to_vec(),
        }),
        None if profiles.len() == 1 => Ok(profiles[0].clone()),
        None => Err(ConfigError::Invalid {
            path: source.clone(),
            message: format!(
                "set agent.model to one of the profiles: {}",
                profiles.join(", ")
            ),
        }),
    }
}

/// The issuer for `provider`: `[auth.<provider>]`, else OpenAI's for `openai`.
pub fn issuer_for(
    auth: &std::collections::BTreeMap<String, file::AuthProvider>,
    provider: &str,
) -> crate::auth::Issuer {
    let section = auth.get(provider).cloned().unwrap_or_default();
    crate::auth::Issuer {
        provider: provider.to_string(),
        base_url: section
            .issuer
            .unwrap_or_else(|| crate::auth::OPENAI_ISSUER.to_string()),
        client_id: section
            .client_id
            .unwrap_or_else(|| crate::auth::OPENAI_CLIENT_ID.to_string()),
    }
}

fn resolve_profile_key(
    name: &str,
    profile: &ModelProfile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    if let Some(var) = &profile.api_key_env {
        return match env(var).filter(|v| !v.trim().is_empty()) {
            Some(v) => Ok(Some(v.trim().to_string())),
            None => Err(ConfigError::MissingKey {
                profile: name.to_string(),
                hint: format!("set the environment variable {var} (or BUDDY_API_KEY)"),
            }),
        };
    }
    if let Some(path) = &profile.api_key_file {
        let expanded = expand_home(path, env);
        let read = crate::localfile::read_regular(&expanded, MAX_KEY_FILE_BYTES).and_then(|b| {
            String::from_utf8(b).map_err(|_| {
                crate::localfile::ReadError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "it is not UTF-8 text",
                ))
            })
        });
        return match read {
            Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_string())),
            Ok(_) => Err(ConfigError::MissingKey {
                profile: name.to_string(),
                hint: format!("the key file {} is empty", expanded.display()),
            }),
            Err(e) => Err(ConfigError::MissingKey {
                profile: name.to_string(),
                hint: format!("cannot read the key file {} ({e})", expanded.display()),
            }),
        };
    }
    Ok(profile.api_key.clone().filter(|k| !k.trim().is_empty()))
}

fn expand_home(path: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => home(env)
            .map(|h| h.join(rest))
            .unwrap_or_else(|| PathBuf::from(path)),
        None => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests;
