//! The shape of `buddy.toml`, with every default in one place. Unknown keys are
//! rejected so a typo is reported instead of silently ignored.

use super::McpEntryError;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub agent: AgentSection,
    #[serde(default)]
    pub models: BTreeMap<String, ModelProfile>,
    #[serde(default)]
    pub tools: ToolsSection,
    #[serde(default)]
    pub network: NetworkSection,
    #[serde(default)]
    pub display: DisplaySection,
    /// `[ui]`: the REPL's notifications.
    #[serde(default)]
    pub ui: UiSection,
    #[serde(default)]
    pub execution: ExecutionSection,
    #[serde(default)]
    pub auth: BTreeMap<String, AuthProvider>,
    #[serde(default)]
    pub discovery: DiscoverySection,
    /// `[mcp_servers.NAME]`: MCP servers whose tools are offered (`config::mcp`).
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// `[[hooks.EVENT]]`: commands run at points of the agent's work
    /// (docs/HOOKS.md). An untrusted project file's are held back.
    #[serde(default)]
    pub hooks: HooksSection,
    /// `[serve]`: the limits of `buddy serve` (docs/SERVE.md).
    #[serde(default)]
    pub serve: ServeSection,
    /// `[telemetry]`: where trace spans go (docs/OBSERVABILITY.md).
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// Not in the file: what was held back from it because it is an
    /// untrusted project file (see `trust`).
    #[serde(skip)]
    pub untrusted: Option<Untrusted>,
}

/// What was held back from an untrusted project file (`trust::hold_back`
/// decides); kept with the file it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Untrusted {
    /// The file, as found.
    pub path: std::path::PathBuf,
    /// The settings ignored, as the user would write them (`tools.shell_confirm`).
    pub held_back: Vec<String>,
    /// Profiles that may not take a key from the environment (`BUDDY_API_KEY`).
    pub no_env_key: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiProtocol {
    /// OpenAI Chat Completions (`/chat/completions`), spoken by most servers.
    #[default]
    Completions,
    /// OpenAI Responses (`/responses`).
    Responses,
    /// Anthropic Messages (`/messages`).
    Messages,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum AuthMode {
    #[default]
    #[serde(rename = "api-key")]
    ApiKey,
    /// Tokens from `buddy login`, kept in auth.json.
    #[serde(rename = "login")]
    Login,
}

/// `[auth.<provider>]`: where that provider's logins happen.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthProvider {
    pub issuer: Option<String>,
    pub client_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelProfile {
    pub api_base_url: Option<String>,
    #[serde(default)]
    pub api: ApiProtocol,
    #[serde(default)]
    pub auth: AuthMode,
    /// Whose login `auth = "login"` uses (default `openai`).
    pub provider: Option<String>,
    pub api_key: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<String>,
    pub model: Option<String>,
    pub context_limit: Option<u64>,
    /// Streaming is the default; turn off for servers that lack it.
    #[serde(default = "yes")]
    pub stream: bool,
    pub max_tokens: Option<u64>,
    pub prompt_cache: Option<bool>,
    /// PEM file of CA certificates trusted for this profile's server, on top
    /// of the system's; relative paths start at the config file's directory.
    pub ca_file: Option<String>,
    /// Whether the model takes images (default true); false refuses an
    /// attachment before anything is sent.
    #[serde(default = "yes")]
    pub images: bool,
    /// What the model costs, in US dollars per million tokens; replaces
    /// buddy's price table for this profile.
    pub price: Option<PriceConfig>,
}

/// `price = { input = …, output = …, cached_input = … }`: US dollars per
/// million tokens; `cached_input` (prompt tokens read from the provider's
/// cache) defaults to `input`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// Name of the active profile under `[models]`.
    pub model: Option<String>,
    pub system_prompt: Option<String>,
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Legacy switch; `tool_execution` says more.
    #[serde(default = "yes")]
    pub parallel_tools: bool,
    /// "parallel" (default), "sequential" or "batched" (`tool_batch_size` at a time).
    pub tool_execution: Option<ToolExecution>,
    #[serde(default = "default_batch_size")]
    pub tool_batch_size: usize,
    /// Model requests per run; `max_iterations` is the older name.
    pub max_turns: Option<u32>,
    /// Tokens (prompt + completion, summed over requests) per run.
    pub max_total_tokens: Option<u64>,
    /// Wall time per run: seconds, or text such as "90s", "10m", "1h".
    pub max_duration: Option<DurationValue>,
    #[serde(default)]
    pub steering_mode: QueueMode,
    #[serde(default)]
    pub follow_up_mode: QueueMode,
    /// Compact the context on its own when it passes `compact_at`.
    #[serde(default = "yes")]
    pub auto_compact: bool,
    /// Share of the context window that triggers compaction, 0.1 to 0.95
    /// (checked when the file is loaded); `compact_threshold` is its older name.
    #[serde(default = "default_compact_at", alias = "compact_threshold")]
    pub compact_at: f64,
    /// Model requests per sub-agent run (the `agent` tool's child).
    #[serde(default = "default_subagent_max_turns")]
    pub subagent_max_turns: u32,
    /// Tokens (prompt + completion, summed over requests) per sub-agent run.
    #[serde(default = "default_subagent_max_tokens")]
    pub subagent_max_tokens: u64,
    /// Sub-agents of one reply that run at the same time.
    #[serde(default = "default_max_subagents")]
    pub max_subagents: usize,
    /// Generations of sub-agents below the agent: 0 offers no `agent`
    /// tool, 1 (the default) children that cannot start their own.
    #[serde(default = "default_subagent_depth")]
    pub subagent_depth: u32,
}

// A child is for a focused errand: a few dozen requests and a bounded
// spend keep a runaway one cheap; four at once keep a reply's children
// from flooding the server.
fn default_subagent_max_turns() -> u32 {
    20
}

fn default_subagent_max_tokens() -> u64 {
    400_000
}

fn default_max_subagents() -> usize {
    4
}

fn default_subagent_depth() -> u32 {
    1
}

impl Default for AgentSection {
    fn default() -> Self {
        AgentSection {
            model: None,
            system_prompt: None,
            max_iterations: default_max_iterations(),
            temperature: None,
            top_p: None,
            parallel_tools: true,
            tool_execution: None,
            tool_batch_size: default_batch_size(),
            max_turns: None,
            max_total_tokens: None,
            max_duration: None,
            steering_mode: QueueMode::default(),
            follow_up_mode: QueueMode::default(),
            auto_compact: true,
            compact_at: default_compact_at(),
            subagent_max_turns: default_subagent_max_turns(),
            subagent_max_tokens: default_subagent_max_tokens(),
            max_subagents: default_max_subagents(),
            subagent_depth: default_subagent_depth(),
        }
    }
}

/// How a queue of user messages hands them over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueMode {
    #[default]
    OneAtATime,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolExecution {
    Parallel,
    Sequential,
    Batched,
}

impl AgentSection {
    /// Model requests per run: `max_turns`, else the older `max_iterations`.
    pub fn turn_limit(&self) -> u32 {
        self.max_turns.unwrap_or(self.max_iterations)
    }

    /// `max_duration` as a duration (validated when the file was loaded).
    pub fn duration_limit(&self) -> Option<std::time::Duration> {
        match &self.max_duration {
            None => None,
            Some(DurationValue::Secs(s)) => Some(std::time::Duration::from_secs((*s).max(1))),
            Some(DurationValue::Text(t)) => crate::clock::parse_duration(t).ok(),
        }
    }
}

/// A duration in config: whole seconds, or text such as "90s" or "1h30m".
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum DurationValue {
    Secs(u64),
    Text(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    /// More environment variables commands never see, beside buddy's own
    /// credentials (which are always hidden).
    #[serde(default)]
    pub hide_env: Vec<String>,
    #[serde(default = "yes")]
    pub shell_enabled: bool,
    #[serde(default = "yes")]
    pub shell_confirm: bool,
    /// A shell command line that only reads (`ls`, `git status`) runs
    /// without asking; unset means on. An `Option` so that an untrusted
    /// project file's `true` can be told from the default (`trust.rs`).
    pub auto_approve_read_only: Option<bool>,
    /// Patterns refused on top of the built-in rules (which always apply).
    #[serde(default)]
    pub shell_denylist: Vec<String>,
    #[serde(default = "default_shell_timeout")]
    pub shell_timeout_secs: u64,
    #[serde(default = "yes")]
    pub files_enabled: bool,
    /// Which in-place edit tool the model gets beside read_file and write_file.
    #[serde(default)]
    pub edit_format: EditFormat,
    #[serde(default = "yes")]
    pub fetch_enabled: bool,
    #[serde(default = "yes")]
    pub search_enabled: bool,
    pub search_base_url: Option<String>,
    #[serde(default = "yes")]
    pub time_enabled: bool,
    /// Cap on every tool result, in characters, unless a tool has its own.
    pub max_output_chars: Option<usize>,
    pub shell_max_output_chars: Option<usize>,
    pub files_max_output_chars: Option<usize>,
    pub fetch_max_output_chars: Option<usize>,
    pub search_max_output_chars: Option<usize>,
    /// Landlock confinement of local commands; `None` when not configured
    /// (then on with `--dangerously-auto-approve`, else off).
    pub sandbox: Option<SandboxMode>,
    /// Whether sandboxed commands may open TCP connections and listen.
    #[serde(default = "yes")]
    pub sandbox_network: bool,
    /// Past this many bytes of MCP servers' tool definitions, they are
    /// sent as one line each and `tool_search` loads them; 0: always whole.
    #[serde(default = "default_tool_search_after")]
    pub tool_search_after_bytes: usize,
}

/// The default of `tool_search_after_bytes`: about 4,000 tokens, a few
/// ordinary servers' worth of definitions.
pub const DEFAULT_TOOL_SEARCH_AFTER_BYTES: usize = 16 * 1024;

fn default_tool_search_after() -> usize {
    DEFAULT_TOOL_SEARCH_AFTER_BYTES
}

/// `[tools] edit_format`: `edit_file` (exact text replacement) or
/// `apply_patch` (the patch format OpenAI's GPT and Codex models are trained
/// on); `auto` picks by the model id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EditFormat {
    #[default]
    Auto,
    Edit,
    Patch,
}

/// `[tools] sandbox`: what local commands may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    Off,
    /// Read anywhere, write in the working directory and temp directories.
    WorkspaceWrite,
    /// Read anywhere, write nothing.
    ReadOnly,
}

impl Default for ToolsSection {
    fn default() -> Self {
        toml::from_str("").unwrap_or(ToolsSection {
            hide_env: Vec::new(),
            shell_enabled: true,
            shell_confirm: true,
            auto_approve_read_only: None,
            shell_denylist: Vec::new(),
            shell_timeout_secs: default_shell_timeout(),
            files_enabled: true,
            edit_format: EditFormat::Auto,
            fetch_enabled: true,
            search_enabled: true,
            search_base_url: None,
            time_enabled: true,
            max_output_chars: None,
            shell_max_output_chars: None,
            files_max_output_chars: None,
            fetch_max_output_chars: None,
            search_max_output_chars: None,
            sandbox: None,
            sandbox_network: true,
            tool_search_after_bytes: DEFAULT_TOOL_SEARCH_AFTER_BYTES,
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    #[serde(default = "default_api_timeout")]
    pub api_timeout_secs: u64,
    #[serde(default = "default_fetch_timeout")]
    pub fetch_timeout_secs: u64,
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Longest a model stream may go without new answer bytes.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_secs: u64,
    /// Largest answer one model reply may carry.
    #[serde(default = "default_max_answer_bytes")]
    pub max_answer_bytes: u64,
}

impl Default for NetworkSection {
    fn default() -> Self {
        NetworkSection {
            api_timeout_secs: default_api_timeout(),
            fetch_timeout_secs: default_fetch_timeout(),
            max_retries: default_max_retries(),
            idle_timeout_secs: default_idle_timeout(),
            max_answer_bytes: default_max_answer_bytes(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisplaySection {
    #[serde(default = "yes")]
    pub color: bool,
    #[serde(default)]
    pub show_tokens: bool,
    #[serde(default = "yes")]
    pub show_tool_calls: bool,
}

impl Default for DisplaySection {
    fn default() -> Self {
        DisplaySection {
            color: true,
            show_tokens: false,
            show_tool_calls: true,
        }
    }
}

/// `[ui]`: how the REPL calls the user back when it wants them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiSection {
    /// A run that took at least this many seconds notifies when it ends.
    #[serde(default = "default_notify_after")]
    pub notify_after: u64,
    /// A program and its arguments run, with a JSON summary appended, instead
    /// of the terminal's notification or bell. An untrusted project file's is
    /// held back (`trust`).
    pub notify: Option<Vec<String>>,
}

impl Default for UiSection {
    fn default() -> Self {
        UiSection {
            notify_after: default_notify_after(),
            notify: None,
        }
    }
}

fn default_notify_after() -> u64 {
    10
}

/// Where and how shell work runs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSection {
    /// Interactive sessions run shell commands in a shared tmux pane when tmux
    /// is installed on the target.
    #[serde(default = "yes")]
    pub tmux: bool,
    /// The managed tmux session's name; by default `buddy-<directory name>-<path hash>`.
    pub tmux_session: Option<String>,
}

impl Default for ExecutionSection {
    fn default() -> Self {
        ExecutionSection {
            tmux: true,
            tmux_session: None,
        }
    }
}

/// `[serve]`: how much of `buddy serve` its clients may hold. Every key is
/// optional: unset, the server's own default holds (`serve::Limits`), and a
/// flag of `buddy serve` overrides the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeSection {
    pub max_connections: Option<u32>,
    /// Sessions with a live agent (running, or kept idle for the next prompt).
    pub max_sessions: Option<u32>,
    pub max_running: Option<u32>,
    /// Event streams open on one session.
    pub max_streams: Option<u32>,
    /// Event streams open on the whole server.
    pub max_streams_total: Option<u32>,
    pub header_timeout_secs: Option<u64>,
    /// A connection on which nothing moved for this long is closed.
    pub idle_timeout_secs: Option<u64>,
    /// A session's agent left idle this long is closed.
    pub agent_idle_secs: Option<u64>,
    pub max_body_bytes: Option<u64>,
    /// `[serve.users]`: `NAME = "sha256:HEX"`, the hash of each user's
    /// token (what `buddy serve add-user` prints and stores). With users,
    /// every request needs a token and each sees only their own sessions.
    #[serde(default)]
    pub users: std::collections::BTreeMap<String, String>,
    /// The file `buddy serve add-user` writes; default
    /// `.buddyx/serve/users` in the served directory.
    pub users_file: Option<std::path::PathBuf>,
    /// Most sessions one user may have running at once (429 past it).
    pub user_max_running: Option<u32>,
    /// Most US dollars one user's runs may cost per UTC day, by the cost
    /// table (429 until midnight UTC past it).
    pub user_daily_usd: Option<f64>,
    /// The audit log; default `.buddyx/serve/audit.log` in the served
    /// directory, written when the server has users or this is set.
    pub audit_log: Option<std::path::PathBuf>,
    /// Also write prompts' text into the audit log (default false).
    pub audit_text: Option<bool>,
    /// The audit log is rotated at this size (default 16).
    pub audit_max_mib: Option<u64>,
    /// Names a load balancer reaches the server by (`buddy.example.com`,
    /// maybe with a port), answered in Host and Origin as its own; any of
    /// them makes a token required.
    #[serde(default)]
    pub public_hosts: Vec<String>,
    /// Addresses or CIDR ranges of load balancers whose `X-Forwarded-For`
    /// names the client; from any other peer the header is ignored.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// `postgres://…`: sessions in PostgreSQL, shared by every instance
    /// given the same URL (default: the session files).
    pub store: Option<String>,
    /// With a database store: how long a session stays taken by an
    /// instance that stopped renewing its lease (default 15).
    pub lease_secs: Option<u64>,
}

/// `[telemetry]`: OpenTelemetry traces, off unless an endpoint is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySection {
    /// An OTLP/HTTP receiver's base URL (`http://127.0.0.1:4318`); spans
    /// are posted to its `/v1/traces`.
    pub otlp_endpoint: Option<String>,
}

impl TelemetrySection {
    /// The endpoint is an http(s) URL, or unset.
    pub fn check(&self) -> Result<(), String> {
        let Some(e) = &self.otlp_endpoint else {
            return Ok(());
        };
        match url::Url::parse(e.trim()) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
            _ => Err(format!(
                "telemetry.otlp_endpoint `{e}` is not an http:// or https:// URL"
            )),
        }
    }
}

/// `[discovery]`: local model servers tried when the active profile has no key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverySection {
    /// Base URLs (or `host:port`) on loopback; `None` means the built-in list,
    /// an empty list turns discovery off.
    pub local_servers: Option<Vec<String>>,
    /// The model to ask a found server for when it lists it; else its first.
    pub model: Option<String>,
}

/// `[hooks]`: one list of hooks per event, named as Claude Code names them
/// so a user's existing hook scripts read the same events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSection {
    #[serde(rename = "PreToolUse", default)]
    pub pre_tool_use: Vec<HookEntry>,
    #[serde(rename = "PostToolUse", default)]
    pub post_tool_use: Vec<HookEntry>,
    #[serde(rename = "UserPromptSubmit", default)]
    pub user_prompt_submit: Vec<HookEntry>,
    #[serde(rename = "Stop", default)]
    pub stop: Vec<HookEntry>,
    #[serde(rename = "SessionStart", default)]
    pub session_start: Vec<HookEntry>,
    #[serde(rename = "Notification", default)]
    pub notification: Vec<HookEntry>,
}

impl HooksSection {
    pub fn is_empty(&self) -> bool {
        *self == HooksSection::default()
    }
}

/// One `[[hooks.EVENT]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    /// A regular expression the whole tool name must match (tool events
    /// only); empty or `*` matches every tool.
    #[serde(default)]
    pub matcher: String,
    /// Run with `sh -c`, the event's JSON on its stdin.
    pub command: String,
    /// Killed (with its process group) after this long; default 60.
    pub timeout_secs: Option<u64>,
}

/// The usual ports of Ollama, llama.cpp's `llama-server`, LM Studio and vLLM.
pub const DEFAULT_LOCAL_SERVERS: [&str; 4] = [
    "http://127.0.0.1:11434/v1",
    "http://127.0.0.1:8080/v1",
    "http://127.0.0.1:1234/v1",
    "http://127.0.0.1:8000/v1",
];

impl DiscoverySection {
    /// The servers to probe as normalised base URLs, each checked to be on
    /// loopback so discovery can never reach another machine.
    pub fn servers(&self) -> Result<Vec<String>, super::LocalServerError> {
        match &self.local_servers {
            None => Ok(DEFAULT_LOCAL_SERVERS
                .iter()
                .map(|s| s.to_string())
                .collect()),
            Some(list) => list.iter().map(|s| loopback_base_url(s)).collect(),
        }
    }
}

/// `http://HOST:PORT[/path]` or `HOST:PORT` with HOST a loopback address
/// (`localhost` becomes 127.0.0.1: a name could resolve anywhere). A bare
/// `HOST:PORT` gets `/v1`, where every local server keeps its OpenAI API.
pub fn loopback_base_url(entry: &str) -> Result<String, super::LocalServerError> {
    use super::LocalServerProblem as P;
    let bad = |why| super::LocalServerError {
        entry: entry.to_string(),
        why,
    };
    let rest = match entry.split_once("://") {
        Some(("http", rest)) => rest,
        Some(_) => return Err(bad(P::NotHttp)),
        None => entry,
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let path = if path.is_empty() { "/v1" } else { path };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() => (h, p),
        _ => return Err(bad(P::NoPort)),
    };
    let port: u16 = port.parse().map_err(|_| bad(P::BadPort))?;
    if port == 0 {
        return Err(bad(P::PortZero));
    }
    let host = match host {
        "localhost" => "127.0.0.1".to_string(),
        h => {
            let literal = h.trim_start_matches('[').trim_end_matches(']');
            match literal.parse::<std::net::IpAddr>() {
                Ok(ip) if ip.is_ipv6() && !h.starts_with('[') => {
                    return Err(bad(P::UnbracketedIpv6))
                }
                Ok(ip) if ip.is_loopback() => h.to_string(),
                Ok(_) => return Err(bad(P::NotLoopback)),
                Err(_) => return Err(bad(P::NotAnAddress)),
            }
        }
    };
    Ok(format!("http://{host}:{port}{path}"))
}

fn yes() -> bool {
    true
}
fn default_max_iterations() -> u32 {
    20
}
fn default_batch_size() -> usize {
    4
}
fn default_compact_at() -> f64 {
    0.8
}
fn default_shell_timeout() -> u64 {
    120
}
fn default_api_timeout() -> u64 {
    120
}
fn default_fetch_timeout() -> u64 {
    20
}
fn default_max_retries() -> u32 {
    3
}
fn default_idle_timeout() -> u64 {
    600
}
fn default_max_answer_bytes() -> u64 {
    8 * 1024 * 1024
}

/// How long a server may take to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 30;
/// How long one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 300;
/// How long a server's question waits for the user's answer by default,
/// after which the server is told it was cancelled.
pub const DEFAULT_QUESTION_TIMEOUT_SECS: u64 = 300;
/// `[mcp_servers.NAME]`: either a program spoken to over its stdin and
/// stdout (`command`, `args`, `env`, `cwd`) or a Streamable HTTP endpoint
/// (`url`, `bearer_token_env`, `headers`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Set for the server's process on top of buddy's environment (less the
    /// credentials commands never see). The values are treated as secrets.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    /// The variable holding the token sent as `Authorization: Bearer …`.
    pub bearer_token_env: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// An OAuth client registered for buddy with the server's authorization
    /// server (used by `buddy mcp login`; without it buddy registers itself
    /// when the server allows).
    pub client_id: Option<String>,
    /// The variable holding that client's secret, if it has one.
    pub client_secret_env: Option<String>,
    /// An https URL serving buddy's OAuth client metadata (a Client ID
    /// Metadata Document), used as the client_id where the authorization
    /// server takes those.
    pub client_metadata_url: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "default_startup_timeout")]
    pub startup_timeout_secs: u64,
    #[serde(default = "default_tool_timeout")]
    pub tool_timeout_secs: u64,
    /// How long a question the server asks the user (elicitation) waits
    /// for an answer before it is cancelled. The call's own timeout does
    /// not run while a question waits.
    #[serde(default = "default_question_timeout")]
    pub question_timeout_secs: u64,
    /// Only these of the server's tools are offered (all when absent).
    pub enabled_tools: Option<Vec<String>>,
    /// These are never offered.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// A tool annotated `readOnlyHint: true` runs without asking (the
    /// denylist and `/approve none` still apply). Off by default: the hint is
    /// the server's word, not a guarantee.
    #[serde(default)]
    pub trust_read_only: bool,
}

fn default_startup_timeout() -> u64 {
    DEFAULT_STARTUP_TIMEOUT_SECS
}

fn default_tool_timeout() -> u64 {
    DEFAULT_TOOL_TIMEOUT_SECS
}

fn default_question_timeout() -> u64 {
    DEFAULT_QUESTION_TIMEOUT_SECS
}

impl McpServer {
    /// A stdio server running `command`.
    pub fn stdio(command: String, args: Vec<String>) -> McpServer {
        McpServer {
            command: Some(command),
            args,
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            bearer_token_env: None,
            headers: BTreeMap::new(),
            client_id: None,
            client_secret_env: None,
            client_metadata_url: None,
            enabled: true,
            startup_timeout_secs: DEFAULT_STARTUP_TIMEOUT_SECS,
            tool_timeout_secs: DEFAULT_TOOL_TIMEOUT_SECS,
            question_timeout_secs: DEFAULT_QUESTION_TIMEOUT_SECS,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            trust_read_only: false,
        }
    }

    /// A Streamable HTTP server at `url`.
    pub fn http(url: String) -> McpServer {
        McpServer {
            command: None,
            url: Some(url),
            ..McpServer::stdio(String::new(), Vec::new())
        }
    }

    /// Whether the server's tool `name` is offered.
    pub fn offers(&self, name: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == name))
            && !self.disabled_tools.iter().any(|t| t == name)
    }

    /// One line saying what is wrong with the entry, if anything.
    pub fn check(&self, name: &str) -> Result<(), McpEntryError> {
        let at = || name.to_string();
        if name.is_empty() || name.chars().any(|c| c.is_control()) {
            return Err(McpEntryError::BadName(at()));
        }
        match (&self.command, &self.url) {
            (Some(c), None) if !c.trim().is_empty() => {}
            (None, Some(u)) if u.starts_with("http://") || u.starts_with("https://") => {}
            (None, Some(_)) => return Err(McpEntryError::BadUrl(at())),
            (Some(_), Some(_)) => return Err(McpEntryError::Both(at())),
            _ => return Err(McpEntryError::Neither(at())),
        }
        let http_only = self.bearer_token_env.is_some()
            || !self.headers.is_empty()
            || self.client_id.is_some()
            || self.client_secret_env.is_some()
            || self.client_metadata_url.is_some();
        if self.url.is_none() && http_only {
            return Err(McpEntryError::HttpOnlyKeys(at()));
        }
        if self.command.is_none()
            && (!self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some())
        {
            return Err(McpEntryError::StdioOnlyKeys(at()));
        }
        if self.startup_timeout_secs == 0
            || self.tool_timeout_secs == 0
            || self.question_timeout_secs == 0
        {
            return Err(McpEntryError::ZeroTimeout(at()));
        }
        Ok(())
    }
}
