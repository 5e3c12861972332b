//! The MCP client: the configured servers (`config::mcp`), started
//! concurrently in the background, and their tools offered to the model as
//! one `ToolSource` named `mcp__SERVER__TOOL` (`names.rs`). Owns each
//! server's connection, state and last error, the calls (through the
//! agent's approval gate first), timeouts, and restarting a server that
//! stopped, on the next call. Does not own bounding or redaction (the tool
//! registry does both for every result) nor showing anything (`/mcp` and
//! `buddy mcp` in the front ends read `McpTools::report`).
//!
//! Nothing here runs unless a server is configured: `app` builds `McpTools`
//! only then. Stdio servers run on this host whatever the target is; HTTP
//! servers are reached through the SDK's Streamable HTTP client (`http.rs`).

mod bound;
pub mod content;
mod elicit;
mod era;
mod error;
pub mod http;
pub mod lines;
mod listing;
pub mod names;
pub mod oauth;
mod stdio;

use crate::config::McpServer;
use crate::tools::{Approval, ApprovalRequest, ToolContext, ToolError, ToolOutput, ToolSource};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
pub use elicit::HandAsker;
pub use error::{ArgumentsError, McpError};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{ClientServiceExt, NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Tools taken from one server at most; a server offering more is cut.
const MAX_TOOLS_PER_SERVER: usize = 256;
/// A tool's description as the model gets it, at most.
const MAX_DESCRIPTION_CHARS: usize = 2000;
/// A result's default cap, in characters, like `run_shell`'s.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 30_000;

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Starting,
    Ready,
    /// It could not start (the reason is its last error).
    Failed,
    /// It was ready and then stopped; the next call starts it again.
    Stopped,
    /// `enabled = false`.
    Disabled,
    /// An HTTP server that refused buddy until `buddy mcp login NAME`.
    NeedsLogin,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Starting => "starting",
            Status::Ready => "ready",
            Status::Failed => "failed",
            Status::Stopped => "stopped",
            Status::Disabled => "disabled",
            Status::NeedsLogin => "needs login",
        }
    }
}

/// One server as `/mcp` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerReport {
    pub name: String,
    pub transport: String,
    pub status: Status,
    /// The names the model sees.
    pub tools: Vec<String>,
    /// Its resources' URIs (`@SERVER:uri`) and prompts (`/SERVER:NAME`).
    pub resources: Vec<String>,
    pub prompts: Vec<String>,
    pub last_error: Option<String>,
    /// The MCP revision its connection speaks (`2026-07-28`, or the one an
    /// older server agreed to in `initialize`); none before it connects.
    pub protocol: Option<String>,
    /// What its last listings left out, and why (entries dropped, a list
    /// cut), one line each.
    pub warnings: Vec<String>,
}

struct RemoteTool {
    name: String,
    description: String,
    schema: Value,
    read_only: bool,
}

type Client = RunningService<RoleClient, Handler>;

struct ServerState {
    status: Status,
    tools: Vec<RemoteTool>,
    /// Its resources' URIs and its prompts, as last listed.
    resources: Vec<String>,
    prompts: Vec<PromptInfo>,
    client: Option<Arc<Client>>,
    /// The stdio process, killed when dropped.
    child: Option<tokio::process::Child>,
    stderr: Option<Arc<Mutex<String>>>,
    last_error: Option<String>,
    /// The revision the current connection speaks (`era`).
    protocol: Option<String>,
    /// What the last listing of each kind left out (`Kind` order).
    notes: [Vec<String>; 3],
    /// An HTTP server's OAuth token and its last refusal (`oauth::bearer`).
    bearer: Option<Arc<oauth::bearer::Bearer>>,
    /// Until when each listing is fresh, when the server gave it a `ttlMs`
    /// (`Kind` order): past it, the next model request lists it again.
    fresh_until: [Option<Instant>; 3],
}

/// The three lists a server has, as indexes into `notes` and `refresh`.
#[derive(Clone, Copy)]
enum Kind {
    Tools = 0,
    Resources = 1,
    Prompts = 2,
}

/// Coalesces a list's "changed" notifications: one listing runs at a time
/// and at most one more waits to start; a notification that finds one
/// waiting adds nothing, since that one will see its change too. A server
/// sending 100,000 of them costs a few listings, not 100,000.
#[derive(Default)]
struct Refresh {
    waiting: AtomicBool,
    running: tokio::sync::Mutex<()>,
}

impl Refresh {
    /// The right to list now, or `None` when a listing still to start
    /// covers this notification.
    async fn turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if self.waiting.swap(true, Ordering::SeqCst) {
            return None;
        }
        let guard = self.running.lock().await;
        self.waiting.store(false, Ordering::SeqCst);
        Some(guard)
    }
}

struct Server {
    name: String,
    spec: McpServer,
    state: Mutex<ServerState>,
    /// One start at a time: a call that finds the server stopped and a
    /// background start never race to spawn two processes.
    starting: tokio::sync::Mutex<()>,
    /// One per `Kind`.
    refresh: [Refresh; 3],
    /// Its calls in flight, which its questions for the user go to.
    askers: elicit::Askers,
}

impl Server {
    fn lock(&self) -> std::sync::MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A tool as offered: which server, its own name there.
#[derive(Clone)]
struct Offered {
    server: usize,
    remote: String,
    read_only: bool,
}

#[derive(Default)]
struct Offer {
    definitions: Vec<ToolDefinition>,
    by_name: HashMap<String, Offered>,
}

struct Inner {
    servers: Vec<Server>,
    offer: Mutex<Offer>,
    /// Names the built-in tools have, which no MCP tool may take.
    taken: HashSet<String>,
    cwd: PathBuf,
    max_output_chars: usize,
    /// Counts changes of any server's state, for `wait_ready`.
    changed: watch::Sender<u64>,
    /// The MCP thread's runtime, where every server is started and served.
    rt: tokio::runtime::Handle,
    /// Ends the MCP thread (`stop`).
    shutdown: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

/// Starts server `i` on the MCP thread; the handle answers with its client.
fn start_on_thread(
    inner: &Arc<Inner>,
    i: usize,
) -> tokio::task::JoinHandle<Result<Arc<Client>, McpError>> {
    let owned = Arc::clone(inner);
    inner.rt.spawn(async move { start(&owned, i).await })
}

/// Every configured server, as one source of tools.
pub struct McpTools {
    inner: Arc<Inner>,
}

impl McpTools {
    /// Starts every enabled server in the background and returns at once.
    /// The servers' processes, connections and notifications all live on a
    /// thread of their own with its own runtime ("mcp"), so spawning five
    /// processes and their handshakes never hold up the runtime that reads
    /// the user's input and talks to the model. `None` with the reason when
    /// that thread cannot be made.
    pub fn start(
        servers: &BTreeMap<String, McpServer>,
        taken: HashSet<String>,
        cwd: PathBuf,
        max_output_chars: usize,
    ) -> Result<Arc<McpTools>, McpError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| McpError::Thread(e.to_string()))?;
        let handle = rt.handle().clone();
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("mcp".into())
            // Runs until `stop` (or the process ends); dropping the runtime
            // then ends every server task it holds.
            .spawn(move || {
                let _ = rt.block_on(stopped);
            })
            .map_err(|e| McpError::Thread(e.to_string()))?;
        let (changed, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            servers: servers
                .iter()
                .map(|(name, spec)| Server {
                    name: name.clone(),
                    spec: spec.clone(),
                    state: Mutex::new(ServerState {
                        status: if spec.enabled {
                            Status::Starting
                        } else {
                            Status::Disabled
                        },
                        tools: Vec::new(),
                        resources: Vec::new(),
                        prompts: Vec::new(),
                        client: None,
                        child: None,
                        stderr: None,
                        last_error: None,
                        protocol: None,
                        notes: Default::default(),
                        bearer: None,
                        fresh_until: Default::default(),
                    }),
                    starting: tokio::sync::Mutex::new(()),
                    refresh: Default::default(),
                    askers: Default::default(),
                })
                .collect(),
            offer: Mutex::new(Offer::default()),
            taken,
            cwd,
            max_output_chars,
            changed,
            rt: handle,
            shutdown: Mutex::new(Some(shutdown)),
        });
        for (i, s) in inner.servers.iter().enumerate() {
            if s.spec.enabled {
                // Bounded by the server's startup timeout; holds the server
                // only through `inner`, which outlives it.
                drop(start_on_thread(&inner, i));
            }
        }
        Ok(Arc::new(McpTools { inner }))
    }

    /// Waits until no server is starting (each start is bounded by its own
    /// timeout): exec needs the tool list before its first request.
    pub async fn wait_ready(&self) {
        let mut rx = self.inner.changed.subscribe();
        let inner = Arc::clone(&self.inner);
        let _ = rx
            .wait_for(|_| {
                inner
                    .servers
                    .iter()
                    .all(|s| s.lock().status != Status::Starting)
            })
            .await;
    }

    /// Kills every stdio server's process and drops the connections; for
    /// the end of the process.
    pub fn stop(&self) {
        for s in &self.inner.servers {
            let mut st = s.lock();
            st.client = None;
            if let Some(child) = st.child.as_mut() {
                let _ = child.start_kill();
            }
        }
        let shutdown = self
            .inner
            .shutdown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(tx) = shutdown {
            let _ = tx.send(());
        }
    }

    pub fn report(&self) -> Vec<ServerReport> {
        let offer = self.inner.offer.lock().unwrap_or_else(|p| p.into_inner());
        self.inner
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let st = s.lock();
                let mut tools: Vec<String> = offer
                    .by_name
                    .iter()
                    .filter(|(_, o)| o.server == i)
                    .map(|(n, _)| n.clone())
                    .collect();
                tools.sort();
                ServerReport {
                    name: s.name.clone(),
                    transport: match (&s.spec.command, &s.spec.url) {
                        (_, Some(url)) => format!("http {url}"),
                        (Some(c), None) => format!("stdio {c}"),
                        (None, None) => String::new(),
                    },
                    status: st.status.clone(),
                    tools,
                    resources: st.resources.clone(),
                    prompts: st.prompts.iter().map(|p| p.name.clone()).collect(),
                    last_error: st.last_error.clone(),
                    protocol: st.protocol.clone(),
                    warnings: st.notes.concat(),
                }
            })
            .collect()
    }

    /// Every server's warnings as lines naming the server, for exec and
    /// `buddy mcp-server` to show once the servers are ready.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.inner.servers {
            for note in s.lock().notes.concat() {
                out.push(format!(
                    "MCP server `{}`: {}",
                    crate::text::one_line(&s.name, 60),
                    note
                ));
            }
        }
        out
    }
}

/// The text a resource read or a prompt will answer with, on its way from
/// the MCP thread.
pub type Pending = std::sync::mpsc::Receiver<Result<String, McpError>>;

/// A prompt a server offers (`/SERVER:NAME` in the REPL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptInfo {
    pub name: String,
    pub description: String,
    /// Its arguments in the server's order, and whether each is required.
    pub arguments: Vec<(String, bool)>,
}

impl McpTools {
    /// The server named `name`, if configured.
    fn server(&self, name: &str) -> Option<usize> {
        self.inner.servers.iter().position(|s| s.name == name)
    }

    /// Whether `name` is a configured server (for telling `@NAME:uri` from
    /// a file path).
    pub fn has_server(&self, name: &str) -> bool {
        self.server(name).is_some()
    }

    /// Every server's prompts as `SERVER:NAME` with their descriptions.
    pub fn prompts(&self) -> Vec<(String, PromptInfo)> {
        let mut out = Vec::new();
        for s in &self.inner.servers {
            for p in &s.lock().prompts {
                out.push((format!("{}:{}", s.name, p.name), p.clone()));
            }
        }
        out
    }

    /// Runs `work` against server `i`'s connection on the MCP thread,
    /// starting the server first if it is not running, within its tool
    /// timeout; the answer comes back on `reply`.
    fn on_thread<T, F, Fut>(
        &self,
        i: usize,
        work: F,
    ) -> std::sync::mpsc::Receiver<Result<T, McpError>>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, McpError>> + Send,
    {
        // A std channel: the REPL waits for it from its key handler, with
        // a deadline (`recv_timeout`); one slot, so the send never blocks.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let inner = Arc::clone(&self.inner);
        self.inner.rt.spawn(async move {
            let server = &inner.servers[i];
            let secs = server.spec.tool_timeout_secs;
            let client = match live_client(server) {
                Some(c) => Ok(c),
                None => start(&inner, i).await,
            };
            let answer = match client {
                Ok(c) => tokio::time::timeout(Duration::from_secs(secs), work(c))
                    .await
                    .unwrap_or(Err(McpError::AnswerTimeout(secs))),
                Err(e) => Err(e),
            };
            let _ = tx.send(answer);
        });
        rx
    }

    /// The text of resource `uri` of server `name`, cut to `max` characters
    /// (the cut said at its end). `None` when no such server.
    pub fn read_resource(&self, name: &str, uri: &str, max: usize) -> Option<Pending> {
        let i = self.server(name)?;
        let uri = uri.to_string();
        Some(self.on_thread(i, move |c| async move {
            let read = c
                .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
                .await
                .map_err(|e| McpError::Server(tidy(&e.to_string())))?;
            let value = serde_json::to_value(&read).map_err(|e| McpError::Server(e.to_string()))?;
            Ok(content::resource_text(&value, max))
        }))
    }

    /// How HTTP server `name` last refused buddy (a 401, or a 403 asking for
    /// more scope), for a login to answer; None when it has not.
    pub fn refusal(&self, name: &str) -> Option<oauth::Refusal> {
        let i = self.server(name)?;
        let bearer = self.inner.servers[i].lock().bearer.clone();
        bearer.and_then(|b| b.last_refusal())
    }

    /// Calls `tool` (its own name on the server) of server `name` with
    /// `arguments`, for `buddy mcp call`: a person trying a server by hand,
    /// so no approval is asked (they typed the call). The answer is the
    /// result as the model would read it, cut to `tools.max_output_chars`,
    /// and whether the server marked it an error. `None` when no such server.
    pub fn call(
        &self,
        name: &str,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        asker: Arc<dyn crate::tools::Approver>,
    ) -> Option<std::sync::mpsc::Receiver<Result<(String, bool), McpError>>> {
        let i = self.server(name)?;
        let tool = tool.to_string();
        let max = self.inner.max_output_chars;
        let inner = Arc::clone(&self.inner);
        Some(self.on_thread(i, move |c| async move {
            // Only a tool its listing kept: one the SDK refused (a malformed
            // `x-mcp-header`) or `enabled_tools` left out is not called.
            if !inner.servers[i].lock().tools.iter().any(|t| t.name == tool) {
                return Err(McpError::Server(format!(
                    "it offers no tool `{}` (`buddy mcp get` lists those it offers)",
                    crate::text::one_line(&tool, 80)
                )));
            }
            let params = CallToolRequestParams::new(tool).with_arguments(arguments);
            let asking = inner.servers[i].askers.enter(asker, "call");
            let result = c.call_tool(params).await.map_err(|e| {
                let text = e.to_string();
                // Refused (a 403 for more scope, a token no refresh could
                // save): a login is the answer, which the caller may start.
                if refused(&text) {
                    McpError::NeedsLogin(inner.servers[i].name.clone())
                } else {
                    McpError::Server(tidy(&text))
                }
            })?;
            let value =
                serde_json::to_value(&result).map_err(|e| McpError::Server(e.to_string()))?;
            let (text, is_error) = content::result_text(&value);
            let text = elicit::with_notes(cut(&text, max), &asking.notes());
            Ok((text, is_error))
        }))
    }

    /// The messages of prompt `prompt` of server `name`, filled in with
    /// `args` (`key=value` words, or words in the order of the prompt's
    /// arguments), as one text. `None` when there is no such prompt.
    pub fn get_prompt(
        &self,
        name: &str,
        prompt: &str,
        args: &str,
        max: usize,
    ) -> Option<Result<Pending, McpError>> {
        let i = self.server(name)?;
        let info = self.inner.servers[i]
            .lock()
            .prompts
            .iter()
            .find(|p| p.name == prompt)
            .cloned()?;
        let arguments = match prompt_arguments(&info, args) {
            Ok(a) => a,
            Err(e) => return Some(Err(McpError::Arguments(e))),
        };
        Some(Ok(self.on_thread(i, move |c| async move {
            let mut params = rmcp::model::GetPromptRequestParams::new(info.name.clone());
            if !arguments.is_empty() {
                params.arguments = Some(arguments);
            }
            let got = c
                .get_prompt(params)
                .await
                .map_err(|e| McpError::Server(tidy(&e.to_string())))?;
            let value = serde_json::to_value(&got).map_err(|e| McpError::Server(e.to_string()))?;
            Ok(content::prompt_text(&value, max))
        })))
    }
}

/// `key=value` words by name; other words fill the prompt's arguments in
/// order. A required argument left out, or a name it does not have, is an
/// error naming what it takes.
fn prompt_arguments(
    info: &PromptInfo,
    args: &str,
) -> Result<serde_json::Map<String, Value>, ArgumentsError> {
    let takes = || {
        let names: Vec<String> = info
            .arguments
            .iter()
            .map(|(n, req)| if *req { n.clone() } else { format!("[{n}]") })
            .collect();
        format!("{} takes: {}", info.name, names.join(" "))
    };
    let mut out = serde_json::Map::new();
    let mut positional = info.arguments.iter().map(|(n, _)| n);
    for word in args.split_whitespace() {
        let (key, value) = match word.split_once('=') {
            Some((k, v)) if info.arguments.iter().any(|(n, _)| n == k) => (k.to_string(), v),
            Some((k, _)) if !k.is_empty() && !k.contains(':') => {
                return Err(ArgumentsError::Unknown {
                    name: crate::text::one_line(k, 40),
                    takes: takes(),
                })
            }
            _ => match positional.find(|n| !out.contains_key(n.as_str())) {
                Some(n) => (n.clone(), word),
                None => return Err(ArgumentsError::TooMany { takes: takes() }),
            },
        };
        out.insert(key, Value::String(value.to_string()));
    }
    if let Some((missing, _)) = info
        .arguments
        .iter()
        .find(|(n, req)| *req && !out.contains_key(n))
    {
        return Err(ArgumentsError::Missing {
            name: missing.clone(),
            takes: takes(),
        });
    }
    Ok(out)
}

/// Handles what a server sends on its own: a changed list is listed
/// again, changes coalesced (`Refresh`), each listing within the server's
/// startup timeout.
#[derive(Clone)]
struct Handler {
    inner: Weak<Inner>,
    server: usize,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        if let Some(inner) = self.inner.upgrade() {
            relist(&inner, self.server, &context.peer, Kind::Tools).await;
        }
    }

    async fn on_resource_list_changed(&self, context: NotificationContext<RoleClient>) {
        if let Some(inner) = self.inner.upgrade() {
            relist(&inner, self.server, &context.peer, Kind::Resources).await;
        }
    }

    async fn on_prompt_list_changed(&self, context: NotificationContext<RoleClient>) {
        if let Some(inner) = self.inner.upgrade() {
            relist(&inner, self.server, &context.peer, Kind::Prompts).await;
        }
    }

    /// A question for the user, from either revision (`elicit`), within
    /// the server's `question_timeout_secs`.
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let Some(inner) = self.inner.upgrade() else {
            return Ok(rmcp::model::ElicitResult::new(
                rmcp::model::ElicitationAction::Decline,
            ));
        };
        let server = &inner.servers[self.server];
        let wait = Duration::from_secs(server.spec.question_timeout_secs);
        Ok(elicit::answer(&server.askers, &server.name, wait, request, context.ct).await)
    }

    fn get_info(&self) -> ClientConfig {
        // Forms only: a URL question would send the user to a page buddy
        // cannot vouch for, and none of the front ends opens one yet.
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(rmcp::model::FormElicitationCapability::new()),
        );
        // The version here is only what `initialize` offers (the probe
        // names its own): the newest revision that has the handshake.
        let mut config = ClientConfig::new(
            capabilities,
            Implementation::new("buddy", env!("CARGO_PKG_VERSION")),
        );
        config.protocol_version = era::LEGACY;
        config
    }
}

/// Lists server `i`'s list of `kind` again (it changed, or its `ttlMs`
/// passed), coalesced (`Refresh`), within the server's startup timeout.
async fn relist(inner: &Arc<Inner>, i: usize, peer: &rmcp::Peer<RoleClient>, kind: Kind) {
    let server = &inner.servers[i];
    let Some(_turn) = server.refresh[kind as usize].turn().await else {
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(server.spec.startup_timeout_secs);
    match kind {
        Kind::Tools => match list_tools(peer, server, deadline).await {
            Ok(listed) => set_tools(inner, i, listed),
            // The last listing stands; it is not asked for again until the
            // server says it changed.
            Err(_) => server.lock().fresh_until[Kind::Tools as usize] = None,
        },
        Kind::Resources => set_resources(server, list_resources(peer, deadline).await),
        Kind::Prompts => set_prompts(server, list_prompts(peer, deadline).await),
    }
}

fn set_resources(server: &Server, (listed, notes, ttl): Listed<String>) {
    let mut st = server.lock();
    st.resources = listed;
    st.notes[Kind::Resources as usize] = notes;
    st.fresh_until[Kind::Resources as usize] = fresh_until(ttl);
}

fn set_prompts(server: &Server, (listed, notes, ttl): Listed<PromptInfo>) {
    let mut st = server.lock();
    st.prompts = listed;
    st.notes[Kind::Prompts as usize] = notes;
    st.fresh_until[Kind::Prompts as usize] = fresh_until(ttl);
}

/// Keeps a listing's tools (the first of two with one name: a request
/// naming a tool twice is refused by some model APIs, which would fail
/// every turn) and its notes, and offers them.
fn set_tools(inner: &Inner, i: usize, listed: listing::Listing<rmcp::model::Tool>) {
    let server = &inner.servers[i];
    let mut notes = listed.notes;
    let mut seen = HashSet::new();
    let kept: Vec<RemoteTool> = listed
        .items
        .into_iter()
        .filter(|t| {
            let first = seen.insert(t.name.to_string());
            if !first {
                notes.push(format!(
                    "it lists the tool `{}` twice; the second was dropped",
                    crate::text::one_line(&t.name, 60)
                ));
            }
            first
        })
        .map(|t| {
            let description = t.description.as_deref().unwrap_or_default();
            RemoteTool {
                name: t.name.to_string(),
                description: cut(description, MAX_DESCRIPTION_CHARS),
                schema: Value::Object((*t.input_schema).clone()),
                read_only: t
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    .unwrap_or(false),
            }
        })
        .collect();
    {
        let mut st = server.lock();
        st.tools = kept;
        st.notes[Kind::Tools as usize] = notes;
        st.fresh_until[Kind::Tools as usize] = fresh_until(listed.ttl);
    }
    rebuild_offer(inner);
}

/// The server's tools: those its `tools` setting offers, at most
/// `MAX_TOOLS_PER_SERVER`, listed by `deadline`.
async fn list_tools(
    peer: &rmcp::Peer<RoleClient>,
    server: &Server,
    deadline: Instant,
) -> Result<listing::Listing<rmcp::model::Tool>, McpError> {
    listing::list(
        peer,
        |t: &rmcp::model::Tool| server.spec.offers(&t.name),
        MAX_TOOLS_PER_SERVER,
        deadline,
    )
    .await
    .map_err(|e| McpError::ListTools(crate::text::one_line(&tidy(&e), 300)))
}

fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Names every offered tool again, all servers at once, so a new or changed
/// list can never give two tools one name.
fn rebuild_offer(inner: &Inner) {
    let mut pairs = Vec::new();
    let mut what = Vec::new();
    for (i, s) in inner.servers.iter().enumerate() {
        let st = s.lock();
        if matches!(st.status, Status::Ready | Status::Stopped) {
            for t in &st.tools {
                pairs.push((s.name.clone(), t.name.clone()));
                what.push((
                    i,
                    t.name.clone(),
                    t.description.clone(),
                    t.schema.clone(),
                    t.read_only,
                ));
            }
        }
    }
    let names = names::assign(&pairs, &inner.taken);
    let mut offer = Offer::default();
    for (name, (server, remote, description, schema, read_only)) in names.into_iter().zip(what) {
        let description = format!(
            "{description}{}(MCP server `{}`)",
            if description.is_empty() { "" } else { " " },
            inner.servers[server].name
        );
        offer
            .definitions
            .push(ToolDefinition::function(&name, &description, schema));
        offer.by_name.insert(
            name,
            Offered {
                server,
                remote,
                read_only,
            },
        );
    }
    *inner.offer.lock().unwrap_or_else(|p| p.into_inner()) = offer;
    inner.changed.send_modify(|g| *g += 1);
}

fn set_status(inner: &Inner, i: usize, status: Status, error: Option<String>) {
    {
        let mut st = inner.servers[i].lock();
        st.status = status;
        if error.is_some() {
            st.last_error = error;
        }
    }
    rebuild_offer(inner);
}

/// Connects server `i` (a fresh process for stdio), lists its tools and
/// marks it ready; or failed, with the reason, within its startup timeout.
async fn start(inner: &Arc<Inner>, i: usize) -> Result<Arc<Client>, McpError> {
    let server = &inner.servers[i];
    let _one = server.starting.lock().await;
    // Someone else started it while this waited.
    if let Some(c) = live_client(server) {
        return Ok(c);
    }
    let was_stopped = server.lock().status == Status::Stopped;
    if !was_stopped {
        server.lock().status = Status::Starting;
    }
    let secs = server.spec.startup_timeout_secs;
    // Every step of the start (the handshake, each listing) ends by then.
    let deadline = Instant::now() + Duration::from_secs(secs);
    let outcome = match connect(inner, i, deadline).await {
        Ok((client, child, stderr, tools)) => {
            let client = Arc::new(client);
            {
                let mut st = server.lock();
                st.protocol = era::of(client.peer_info().as_deref());
                st.client = Some(Arc::clone(&client));
                st.child = child;
                st.stderr = stderr;
                st.status = Status::Ready;
            }
            set_tools(inner, i, tools);
            return Ok(client);
        }
        Err(e) => e,
    };
    let status = if matches!(outcome, McpError::NeedsLogin(_)) {
        Status::NeedsLogin
    } else if was_stopped {
        Status::Stopped
    } else {
        Status::Failed
    };
    set_status(inner, i, status, Some(outcome.to_string()));
    Err(outcome)
}

type Connected = (
    Client,
    Option<tokio::process::Child>,
    Option<Arc<Mutex<String>>>,
    listing::Listing<rmcp::model::Tool>,
);

/// Whether the words of a failed start are an HTTP server's refusal (the
/// SDK's errors for a 401 or an insufficient-scope 403, from `http`).
fn refused(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    [
        "auth required",
        "authorization required",
        "insufficient scope",
    ]
    .iter()
    .any(|s| text.contains(s))
}

/// Connects to an HTTP server with the login `oauth` keeps for it, if any
/// (its token refreshed on a 401 by `http`); a refusal left is
/// `NeedsLogin`, the refusal kept with the bearer for a login to answer.
async fn serve_http(
    server: &Server,
    url: &str,
    handler: Handler,
    deadline: Instant,
    lifecycle: rmcp::service::ClientLifecycleMode,
) -> Result<Client, (McpError, bool)> {
    let secs = server.spec.startup_timeout_secs;
    let bearer = match server.spec.bearer_token_env {
        None => Some(Arc::new(
            oauth::bearer::Bearer::load(&server.name, url, &server.spec)
                .await
                .map_err(|e| (McpError::Setup(format!("login: {e}")), false))?,
        )),
        Some(_) => None,
    };
    server.lock().bearer = bearer.clone();
    let transport = http::transport(url, &server.spec, bearer).map_err(|e| (e, false))?;
    let served =
        tokio::time::timeout_at(deadline, handler.serve_with_lifecycle(transport, lifecycle)).await;
    match served {
        Err(_) => Err((McpError::StartTimeout(secs), false)),
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) if refused(&e.to_string()) => {
            Err((McpError::NeedsLogin(server.name.clone()), false))
        }
        Ok(Err(e)) => Err((
            McpError::Server(tidy(&e.to_string())),
            era::answered_discover_oddly(&e),
        )),
    }
}

async fn connect(inner: &Arc<Inner>, i: usize, deadline: Instant) -> Result<Connected, McpError> {
    let server = &inner.servers[i];
    let (client, child, stderr) = match serve(inner, i, deadline, era::lifecycle()).await {
        // It answered the probe with something other than an error or a
        // discovery result (some older servers answer any method they do not
        // know with `{}`): older all the same, but the SDK has given up on
        // that connection, so a fresh one shakes hands the older way.
        Err((_, true)) => serve(inner, i, deadline, era::handshake())
            .await
            .map_err(|(e, _)| e)?,
        other => other.map_err(|(e, _)| e)?,
    };
    let tools = match list_tools(client.peer(), server, deadline).await {
        Ok(t) => t,
        // The first page did not come in time.
        Err(_) if Instant::now() >= deadline => {
            return Err(McpError::StartTimeout(server.spec.startup_timeout_secs))
        }
        // Refused after connecting (a token the server stopped taking and
        // no refresh could save, or scope it wants more of).
        Err(e) if refused(&e.to_string()) => return Err(McpError::NeedsLogin(server.name.clone())),
        Err(e) => return Err(e),
    };
    let info = client.peer_info();
    let caps = info.as_ref().map(|i| &i.capabilities);
    if caps.is_some_and(|c| c.resources.is_some()) {
        let listed = list_resources(client.peer(), deadline).await;
        set_resources(server, listed);
    }
    if caps.is_some_and(|c| c.prompts.is_some()) {
        let listed = list_prompts(client.peer(), deadline).await;
        set_prompts(server, listed);
    }
    Ok((client, child, stderr, tools))
}

/// A connection, the stdio process behind it and its stderr tail.
type Served = (
    Client,
    Option<tokio::process::Child>,
    Option<Arc<Mutex<String>>>,
);

/// Connects server `i` (a fresh process for stdio) and starts its protocol
/// the way `lifecycle` says. An error comes with whether the server answered
/// `server/discover` with a result that is not one (see `connect`).
async fn serve(
    inner: &Arc<Inner>,
    i: usize,
    deadline: Instant,
    lifecycle: rmcp::service::ClientLifecycleMode,
) -> Result<Served, (McpError, bool)> {
    let server = &inner.servers[i];
    let secs = server.spec.startup_timeout_secs;
    let handler = Handler {
        inner: Arc::downgrade(inner),
        server: i,
    };
    let odd_answer = |e: &rmcp::service::ClientInitializeError| era::answered_discover_oddly(e);
    if let Some(url) = &server.spec.url {
        let client = serve_http(server, url, handler, deadline, lifecycle).await?;
        return Ok((client, None, None));
    }
    let p = stdio::spawn(&server.spec, &inner.cwd).map_err(|e| {
        (
            McpError::Spawn {
                command: crate::text::one_line(server.spec.command.as_deref().unwrap_or(""), 100),
                reason: e.to_string(),
            },
            false,
        )
    })?;
    let stderr = Arc::clone(&p.stderr);
    // `LineCap` ends the connection past MAX_MESSAGE_BYTES; `Lines`
    // bounds what one message becomes.
    let transport = lines::Lines::<RoleClient, _, _>::new(
        p.stdout,
        p.stdin,
        stdio::MAX_MESSAGE_BYTES + 1,
        inner.max_output_chars,
    );
    let mut child = p.child;
    let served =
        tokio::time::timeout_at(deadline, handler.serve_with_lifecycle(transport, lifecycle)).await;
    let client = match served {
        Err(_) => return Err((McpError::StartTimeout(secs), false)),
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            // Give its last words a moment to arrive: why it failed.
            let _ = tokio::time::timeout(Duration::from_millis(200), child.wait()).await;
            return Err((
                McpError::Server(with_stderr(&e.to_string(), &stderr)),
                odd_answer(&e),
            ));
        }
    };
    Ok((client, Some(child), Some(stderr)))
}

/// Resources and prompts taken from one server at most.
const MAX_LISTED: usize = 1000;

/// The server's resources' URIs and notes on the listing (none when it
/// cannot list them: mentions then say the resource is unknown, which is
/// the truth as far as we know).
async fn list_resources(peer: &rmcp::Peer<RoleClient>, deadline: Instant) -> Listed<String> {
    match listing::list(peer, |_: &rmcp::model::Resource| true, MAX_LISTED, deadline).await {
        Ok(l) => (l.items.into_iter().map(|r| r.uri).collect(), l.notes, l.ttl),
        Err(e) => (
            Vec::new(),
            vec![format!("cannot list its resources: {}", tidy(&e))],
            None,
        ),
    }
}

/// A list's items, the notes on it and its freshness (`listing::Listing`).
type Listed<T> = (Vec<T>, Vec<String>, Option<Duration>);

/// Until when a list given `ttl` now is fresh.
fn fresh_until(ttl: Option<Duration>) -> Option<Instant> {
    ttl.map(|t| Instant::now() + t)
}

async fn list_prompts(peer: &rmcp::Peer<RoleClient>, deadline: Instant) -> Listed<PromptInfo> {
    let listed =
        match listing::list(peer, |_: &rmcp::model::Prompt| true, MAX_LISTED, deadline).await {
            Ok(l) => l,
            Err(e) => {
                return (
                    Vec::new(),
                    vec![format!("cannot list its prompts: {}", tidy(&e))],
                    None,
                )
            }
        };
    let prompts = listed
        .items
        .into_iter()
        .map(|p| PromptInfo {
            name: p.name.to_string(),
            description: cut(p.description.as_deref().unwrap_or_default(), 200),
            arguments: p
                .arguments
                .unwrap_or_default()
                .into_iter()
                .map(|a| (a.name, a.required.unwrap_or(false)))
                .collect(),
        })
        .collect();
    (prompts, listed.notes, listed.ttl)
}

/// The SDK's transport errors name their Rust types
/// (`Transport [rmcp::…<…>] error: …`): only the part after that is news to
/// a user. One line, bounded.
fn tidy(e: &str) -> String {
    let e = match e.rfind("] error: ") {
        Some(i) => &e[i + "] error: ".len()..],
        None => e,
    };
    crate::text::one_line(e, 300)
}

fn with_stderr(e: &str, stderr: &Mutex<String>) -> String {
    let e = tidy(e);
    match stdio::last_line(stderr) {
        Some(line) => format!("{e} (its stderr: {line})"),
        None => e,
    }
}

/// The server's connection, if it still has one: a stdio process that
/// exited, or a closed connection, has none.
fn live_client(server: &Server) -> Option<Arc<Client>> {
    let mut st = server.lock();
    let exited = st
        .child
        .as_mut()
        .is_some_and(|c| !matches!(c.try_wait(), Ok(None)));
    match &st.client {
        Some(c) if !exited && !c.is_closed() && !c.is_transport_closed() => Some(Arc::clone(c)),
        _ => None,
    }
}

/// Marks a server that stopped under a call, so the next call starts it.
fn stopped(inner: &Inner, i: usize, why: String) {
    {
        let mut st = inner.servers[i].lock();
        st.client = None;
        st.child = None;
    }
    set_status(inner, i, Status::Stopped, Some(why));
}

#[async_trait]
impl ToolSource for McpTools {
    fn definitions(&self) -> Vec<ToolDefinition> {
        self.inner
            .offer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .definitions
            .clone()
    }

    /// Lists again, on the MCP thread, each list of a ready server whose
    /// `ttlMs` has passed, and waits for it: the model is offered the
    /// tools as they are now. Nothing when every list is fresh (or has no
    /// `ttlMs`: those are listed again when the server says they changed).
    async fn refresh(&self) {
        let now = Instant::now();
        let mut due = Vec::new();
        for (i, s) in self.inner.servers.iter().enumerate() {
            let st = s.lock();
            if st.status != Status::Ready {
                continue;
            }
            for kind in [Kind::Tools, Kind::Resources, Kind::Prompts] {
                if st.fresh_until[kind as usize].is_some_and(|t| t <= now) {
                    due.push((i, kind));
                }
            }
        }
        if due.is_empty() {
            return;
        }
        let inner = Arc::clone(&self.inner);
        let listed = self.inner.rt.spawn(async move {
            for (i, kind) in due {
                if let Some(client) = live_client(&inner.servers[i]) {
                    relist(&inner, i, client.peer(), kind).await;
                }
            }
        });
        let _ = listed.await;
    }

    /// Waits for the servers still starting whose tools' names `name` could
    /// be one of, until each has listed its tools or failed: each start is
    /// bounded by its `startup_timeout_secs`.
    async fn settle(&self, name: &str) {
        if !name.starts_with(names::PREFIX) {
            return;
        }
        let mine: Vec<usize> = (self.inner.servers.iter().enumerate())
            .filter(|(_, s)| name.starts_with(&names::server_prefix(&s.name)))
            .map(|(i, _)| i)
            .collect();
        if mine.is_empty() {
            return;
        }
        let mut rx = self.inner.changed.subscribe();
        let inner = Arc::clone(&self.inner);
        let _ = rx
            .wait_for(|_| {
                mine.iter()
                    .all(|&i| inner.servers[i].lock().status != Status::Starting)
            })
            .await;
    }

    fn max_output_chars(&self, name: &str) -> Option<usize> {
        self.inner
            .offer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_name
            .contains_key(name)
            .then_some(self.inner.max_output_chars)
    }

    async fn execute(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let inner = &self.inner;
        let offered = inner
            .offer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_name
            .get(name)
            .cloned()
            .ok_or_else(|| ToolError::Failed(format!("`{name}` is no longer offered")))?;
        let server = &inner.servers[offered.server];
        let args_text = args.to_string();
        let request = ApprovalRequest {
            call_id: ctx.call_id.clone(),
            tool: name.to_string(),
            actor: crate::host::local_actor(),
            command: format!("{name} {}", crate::text::one_line(&args_text, 2000)),
            detail: None,
            read_only: offered.read_only && server.spec.trust_read_only,
        };
        match ctx.approver.approve(request).await {
            Approval::Approved => {}
            Approval::Denied { reason } => {
                return Ok(ToolOutput::text(format!("not run: {reason}")))
            }
            Approval::Refused { reason } => return Err(ToolError::Failed(reason)),
        }
        let client = match live_client(server) {
            Some(c) => c,
            None => match start_on_thread(inner, offered.server).await {
                Ok(started) => started,
                Err(e) => Err(McpError::Server(format!("its start was cut short ({e})"))),
            }
            .map_err(|e| {
                ToolError::Failed(format!(
                    "the MCP server `{}` is not running and could not be started: {e}",
                    server.name
                ))
            })?,
        };
        let arguments = match args {
            Value::Object(map) => map,
            _ => Default::default(),
        };
        let params = CallToolRequestParams::new(offered.remote.clone()).with_arguments(arguments);
        let secs = server.spec.tool_timeout_secs;
        // The server's questions during the call go to this call's approver.
        let asking = server.askers.enter(Arc::clone(&ctx.approver), &ctx.call_id);
        let answer = asking
            .within(Duration::from_secs(secs), client.call_tool(params))
            .await;
        let notes = asking.notes();
        drop(asking);
        let result = match answer {
            None => {
                return Err(ToolError::Failed(format!(
                    "the MCP server `{}` did not answer `{}` within {secs} s (tool_timeout_secs)",
                    server.name, offered.remote
                )))
            }
            Some(Err(e)) => {
                let gone = live_client(server).is_none()
                    || matches!(e, rmcp::service::ServiceError::TransportClosed);
                if gone {
                    let why = match server.lock().stderr.clone() {
                        Some(stderr) => with_stderr(&format!("stopped ({e})"), &stderr),
                        None => format!("stopped ({e})"),
                    };
                    stopped(inner, offered.server, why.clone());
                    return Err(ToolError::Failed(format!(
                        "the MCP server `{}` {why}; it will be started again on the next call",
                        server.name
                    )));
                }
                let text = e.to_string();
                if refused(&text) {
                    // Nobody here can log in; the person can, later.
                    return Err(ToolError::Failed(format!(
                        "the MCP server `{}` refused the call ({}); {}",
                        server.name,
                        tidy(&text),
                        McpError::NeedsLogin(server.name.clone())
                    )));
                }
                return Err(ToolError::Failed(format!(
                    "the MCP server `{}` answered with an error: {}",
                    server.name,
                    tidy(&text)
                )));
            }
            Some(Ok(r)) => r,
        };
        let value = serde_json::to_value(&result)
            .map_err(|e| ToolError::Failed(format!("cannot read the result: {e}")))?;
        let (text, is_error) = content::result_text(&value);
        let text = elicit::with_notes(text, &notes);
        if is_error {
            return Err(ToolError::Failed(text));
        }
        Ok(ToolOutput::text(text))
    }
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn every_listed_kind_has_its_bounds_in_mcp_md() {
        // An exhaustive match: a new kind of list does not compile until it
        // is named here, and then docs/MCP.md's "Listing" must give its bounds.
        let name = |k: Kind| match k {
            Kind::Tools => "tools",
            Kind::Resources => "resources",
            Kind::Prompts => "prompts",
        };
        let doc = include_str!("../../docs/MCP.md");
        let listing = doc
            .split("\n## Listing\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .unwrap_or_default()
            .to_lowercase();
        assert!(
            !listing.is_empty(),
            "docs/MCP.md has no \"## Listing\" section"
        );
        for kind in [Kind::Tools, Kind::Resources, Kind::Prompts] {
            let n = name(kind);
            assert!(
                listing.contains(n),
                "docs/MCP.md's Listing section does not give the bounds of {n}"
            );
        }
    }

    #[test]
    fn prompt_arguments_by_name_or_in_order_and_required_ones_checked() {
        let info = super::PromptInfo {
            name: "p".into(),
            description: String::new(),
            arguments: vec![("city".into(), true), ("state".into(), false)],
        };
        let got = super::prompt_arguments(&info, "Paris state=IDF").unwrap();
        assert_eq!(got["city"], "Paris");
        assert_eq!(got["state"], "IDF");
        let got = super::prompt_arguments(&info, "state=IDF Lyon").unwrap();
        assert_eq!(got["city"], "Lyon");
        let e = super::prompt_arguments(&info, "state=IDF").unwrap_err();
        assert_eq!(e.to_string(), "`city` is required; p takes: city [state]");
        assert!(super::prompt_arguments(&info, "a b c").is_err());
        assert!(super::prompt_arguments(&info, "town=x").is_err());
    }

    #[test]
    fn transport_errors_lose_their_rust_type_names() {
        assert_eq!(
            super::tidy("Send message error Transport [a::B<c::D>] error: Client error: refused"),
            "Client error: refused"
        );
        assert_eq!(super::tidy("plain\nline"), "plain line");
    }
}
