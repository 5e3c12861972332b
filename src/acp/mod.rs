//! `buddy acp`: the Agent Client Protocol (version 1) over stdio, so an
//! editor (Zed, and others that speak ACP) drives buddy's agent. A thin front
//! end over the agent service: each ACP session is one agent (`Backend`
//! builds it, `app::acp` implements that), a prompt is an `Op::Prompt`, a
//! cancel an `Op::Interrupt`, an answered permission an `Op::Approve`; the
//! agent's events come back as `session/update` notifications through
//! `translate::Translator`. The SDK (`agent-client-protocol`) owns JSON-RPC:
//! framing, ids, malformed messages (answered with JSON-RPC errors), unknown
//! methods. stdout carries protocol messages only (transport.rs); anything
//! for people goes to stderr.
//!
//! The handlers the SDK calls only pass each request to one loop (`Conn`),
//! which owns the sessions; nothing here holds the SDK's dispatch while it
//! waits, and questions to the client (permissions, its files) are asked
//! from tasks of their own.
//!
//! What this does not own: how an agent is built (settings, tools, targets:
//! `app::acp`), the session files (`session`), and the MCP client the
//! client's servers are started with (`mcp`).

mod files;
mod permission;
pub mod translate;
mod transport;

pub use files::ClientFiles;

use crate::agent::protocol::{Event, EventKind, Op, OpId};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::config::McpServer;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ClientCapabilities, ContentBlock, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    PromptResponse, SessionNotification,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error as RpcError, ErrorCode, Lines};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::mpsc;
use translate::{Step, Translator};

/// Events from every session's agent wait here for the loop; each agent's
/// own channel is bounded too, so a slow client slows the agents, never
/// grows memory.
const EVENT_QUEUE: usize = 256;

/// What `buddy acp` needs from the composition root.
pub trait Backend: Send + Sync {
    /// A new saved session for `cwd`; its id (the ACP session id).
    fn create(&self, cwd: &Path) -> Result<String, String>;
    /// An agent working in `cwd` with the client's MCP servers as well as
    /// the configured ones, and file tools that go through `files` when
    /// the client offered its files.
    fn spawn(
        &self,
        cwd: &Path,
        servers: BTreeMap<String, McpServer>,
        files: Option<Arc<dyn ClientFiles>>,
    ) -> Result<Spawned, String>;
}

/// A session's agent and what to stop with it.
pub struct Spawned {
    pub agent: AgentHandle,
    /// The client's MCP servers for this session, stopped when it ends.
    pub servers: Option<Arc<crate::mcp::McpTools>>,
}

/// A request or notification the SDK handed over, with its responder (the
/// larger requests boxed, so every message moves cheaply).
enum Incoming {
    Initialize(Box<InitializeRequest>, Responder<InitializeResponse>),
    New(Box<NewSessionRequest>, Responder<NewSessionResponse>),
    Load(Box<LoadSessionRequest>, Responder<LoadSessionResponse>),
    Prompt(PromptRequest, Responder<PromptResponse>),
    Cancel(CancelNotification),
}

/// Serves ACP on stdin and stdout until the client closes the connection;
/// every session is saved before it returns.
pub async fn run(backend: Arc<dyn Backend>) -> Result<(), String> {
    let (tx, rx) = mpsc::unbounded_channel::<Incoming>();
    let transport = Lines::new(transport::outgoing(), transport::incoming());
    // Each handler only forwards: the loop below answers.
    let (t1, t2, t3, t4, t5) = (tx.clone(), tx.clone(), tx.clone(), tx.clone(), tx);
    Agent
        .v1()
        .name("buddy")
        .on_receive_request(
            async move |r: InitializeRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t1, Incoming::Initialize(Box::new(r), resp))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: NewSessionRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t2, Incoming::New(Box::new(r), resp))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: LoadSessionRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t3, Incoming::Load(Box::new(r), resp))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: PromptRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t4, Incoming::Prompt(r, resp))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx: ConnectionTo<Client>| {
                forward(&t5, Incoming::Cancel(n))
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Client>| {
            Conn::new(cx, backend).run(rx).await;
            Ok(())
        })
        .await
        .map_err(|e| format!("the ACP connection failed: {e}"))
}

fn forward(tx: &mpsc::UnboundedSender<Incoming>, msg: Incoming) -> Result<(), RpcError> {
    tx.send(msg)
        .map_err(|_| RpcError::internal_error().data("buddy is shutting down".to_string()))
}

/// The prompt turn waiting for its run to end.
struct Pending {
    op: OpId,
    responder: Responder<PromptResponse>,
    /// The run that answers it has started (an `Error` before that refuses
    /// the prompt itself).
    started: bool,
}

/// One ACP session: its agent's op sender, the translation of its events,
/// and the prompt turn in progress.
struct Live {
    ops: OpSender,
    agent: tokio::task::JoinHandle<()>,
    relay: tokio::task::JoinHandle<()>,
    translator: Translator,
    prompt: Option<Pending>,
    servers: Option<Arc<crate::mcp::McpTools>>,
}

/// The loop that owns the sessions.
struct Conn {
    cx: ConnectionTo<Client>,
    backend: Arc<dyn Backend>,
    client: ClientCapabilities,
    sessions: HashMap<String, Live>,
    events_tx: mpsc::Sender<(String, Event)>,
    events: mpsc::Receiver<(String, Event)>,
}

impl Conn {
    fn new(cx: ConnectionTo<Client>, backend: Arc<dyn Backend>) -> Conn {
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        Conn {
            cx,
            backend,
            client: ClientCapabilities::default(),
            sessions: HashMap::new(),
            events_tx,
            events,
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Incoming>) {
        let cx = self.cx.clone();
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(msg) => self.incoming(msg).await,
                    None => break,
                },
                Some((sid, ev)) = self.events.recv() => self.event(&sid, ev),
                () = cx.incoming_closed() => break,
            }
        }
        self.close().await;
    }

    async fn incoming(&mut self, msg: Incoming) {
        match msg {
            Incoming::Initialize(req, resp) => {
                self.client = req.client_capabilities.clone();
                let _ = resp.respond(initialize_response());
            }
            Incoming::New(req, resp) => {
                let answer = self
                    .open(&req.cwd, &req.mcp_servers, None)
                    .await
                    .map(NewSessionResponse::new);
                let _ = resp.respond_with_result(answer);
            }
            Incoming::Load(req, resp) => {
                let id = req.session_id.0.to_string();
                let answer = self
                    .open(&req.cwd, &req.mcp_servers, Some(&id))
                    .await
                    .map(|_| LoadSessionResponse::new());
                let _ = resp.respond_with_result(answer);
            }
            Incoming::Prompt(req, resp) => self.prompt(req, resp).await,
            Incoming::Cancel(n) => {
                if let Some(live) = self.sessions.get(n.session_id.0.as_ref()) {
                    if live.prompt.is_some() {
                        let _ = live.ops.send(Op::Interrupt).await;
                    }
                }
            }
        }
    }

    /// Starts a session's agent: a new saved session, or `load` (replayed to
    /// the client as updates before the answer).
    async fn open(
        &mut self,
        cwd: &Path,
        servers: &[agent_client_protocol::v1::schema::McpServer],
        load: Option<&str>,
    ) -> Result<String, RpcError> {
        if !cwd.is_absolute() {
            return Err(invalid_params("cwd must be an absolute path"));
        }
        if let Some(id) = load {
            if self.sessions.contains_key(id) {
                return Err(invalid_params(&format!("session {id} is already open")));
            }
        }
        let servers = client_servers(servers)?;
        let id = match load {
            Some(id) => id.to_string(),
            None => self.backend.create(cwd).map_err(internal)?,
        };
        let files = files::offered(&self.client, &self.cx, &id);
        let Spawned { mut agent, servers } =
            self.backend.spawn(cwd, servers, files).map_err(internal)?;
        let _ = agent.ops.send(Op::Resume { query: id.clone() }).await;
        // The resume's answer, read here before the relay takes the events.
        let mut translator = Translator::new();
        let resumed = loop {
            let Some(ev) = agent.events.recv().await else {
                break Err(internal("the agent stopped unexpectedly".into()));
            };
            match &ev.kind {
                EventKind::SessionResumed { .. } => {
                    if load.is_some() {
                        for step in translator.on_event(&ev) {
                            if let Step::Update(u) = step {
                                self.notify(&id, u);
                            }
                        }
                    }
                    break Ok(());
                }
                EventKind::Error { message, code } => {
                    let msg = crate::text::one_line(message, 400);
                    break Err(match code {
                        Some(crate::agent::protocol::ErrorCode::SessionNotFound) => {
                            RpcError::new(ErrorCode::RESOURCE_NOT_FOUND, msg)
                        }
                        _ => internal(msg),
                    });
                }
                _ => {}
            }
        };
        if let Err(e) = resumed {
            if let Some(s) = &servers {
                s.stop();
            }
            agent.shutdown().await;
            return Err(e);
        }
        let AgentHandle {
            ops,
            mut events,
            task,
        } = agent;
        let tx = self.events_tx.clone();
        let sid = id.clone();
        let relay = tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                if tx.send((sid.clone(), ev)).await.is_err() {
                    break;
                }
            }
        });
        self.sessions.insert(
            id.clone(),
            Live {
                ops,
                agent: task,
                relay,
                translator,
                prompt: None,
                servers,
            },
        );
        Ok(id)
    }

    async fn prompt(&mut self, req: PromptRequest, resp: Responder<PromptResponse>) {
        let sid = req.session_id.0.to_string();
        let Some(live) = self.sessions.get_mut(&sid) else {
            let _ = resp.respond_with_error(RpcError::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                format!("no session {sid} is open"),
            ));
            return;
        };
        if live.prompt.is_some() {
            let _ = resp.respond_with_error(RpcError::new(
                ErrorCode::INVALID_REQUEST,
                "a prompt is already running in this session; cancel it first".to_string(),
            ));
            return;
        }
        let (text, images) = match prompt_content(&req.prompt) {
            Ok(p) => p,
            Err(e) => {
                let _ = resp.respond_with_error(invalid_params(&e));
                return;
            }
        };
        match live.ops.send(Op::Prompt { text, images }).await {
            Ok(op) => {
                live.prompt = Some(Pending {
                    op,
                    responder: resp,
                    started: false,
                })
            }
            Err(_) => {
                let _ = resp.respond_with_error(internal("the agent stopped".into()));
            }
        }
    }

    /// One agent event: its updates to the client, a question, or the end
    /// of the prompt turn.
    fn event(&mut self, sid: &str, ev: Event) {
        let Some(live) = self.sessions.get_mut(sid) else {
            return;
        };
        diagnose(&ev.kind);
        if let Some(p) = &mut live.prompt {
            if ev.op_id == Some(p.op) {
                match &ev.kind {
                    EventKind::RunStarted { .. } => p.started = true,
                    EventKind::Error { message, .. } if !p.started => {
                        let msg = message.clone();
                        if let Some(p) = live.prompt.take() {
                            let _ = p.responder.respond_with_error(internal(msg));
                        }
                        return;
                    }
                    _ => {}
                }
            }
        }
        let steps = live.translator.on_event(&ev);
        let mut updates = Vec::new();
        for step in steps {
            match step {
                Step::Update(u) => updates.push(u),
                Step::Ask {
                    call_id,
                    tool_call,
                    always,
                } => permission::ask(
                    self.cx.clone(),
                    live.ops.clone(),
                    sid.to_string(),
                    call_id,
                    tool_call,
                    always,
                ),
                Step::Done(result) => {
                    // Only the run this prompt started ends its turn.
                    let ours = live.prompt.as_ref().is_some_and(|p| ev.op_id == Some(p.op));
                    if ours {
                        for u in updates.drain(..) {
                            notify(&self.cx, sid, u);
                        }
                        if let Some(p) = live.prompt.take() {
                            let _ = p.responder.respond_with_result(
                                result.map(PromptResponse::new).map_err(internal),
                            );
                        }
                    }
                }
            }
        }
        for u in updates {
            notify(&self.cx, sid, u);
        }
    }

    fn notify(&self, sid: &str, update: agent_client_protocol::v1::schema::SessionUpdate) {
        notify(&self.cx, sid, update);
    }

    /// Every session saved and its agent stopped; prompts still waiting are
    /// answered as cancelled.
    async fn close(&mut self) {
        for (_, live) in self.sessions.drain() {
            if let Some(p) = live.prompt {
                let _ = p.responder.respond(PromptResponse::new(
                    agent_client_protocol::v1::schema::StopReason::Cancelled,
                ));
            }
            let _ = live.ops.send(Op::Shutdown).await;
            drop(live.ops);
            // The relay ends when the agent's events do; the loop no longer
            // reads them, so it is stopped rather than awaited.
            live.relay.abort();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(30), live.agent).await;
            if let Some(s) = live.servers {
                s.stop();
            }
        }
    }
}

fn notify(
    cx: &ConnectionTo<Client>,
    sid: &str,
    update: agent_client_protocol::v1::schema::SessionUpdate,
) {
    let _ = cx.send_notification(SessionNotification::new(sid.to_string(), update));
}

/// What buddy offers: protocol 1, saved sessions, images in prompts, MCP
/// servers over stdio and Streamable HTTP.
fn initialize_response() -> InitializeResponse {
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
                .mcp_capabilities(McpCapabilities::new().http(true)),
        )
        .agent_info(Implementation::new("buddy", env!("CARGO_PKG_VERSION")))
}

/// The prompt's text (resources the client embedded included, each in a
/// delimited block) and its images.
fn prompt_content(blocks: &[ContentBlock]) -> Result<(String, Vec<crate::wire::Image>), String> {
    use base64::Engine;
    let mut text = String::new();
    let mut images = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&t.text);
            }
            ContentBlock::Image(i) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(i.data.as_bytes())
                    .map_err(|e| format!("an image is not valid base64: {e}"))?;
                let n = images.len() + 1;
                let image = crate::wire::Image::from_bytes(&format!("image-{n}"), bytes)
                    .ok_or("an image is not PNG, JPEG, GIF or WebP")?;
                images.push(image);
            }
            ContentBlock::ResourceLink(l) => {
                text.push_str(&format!("\n[{}]({})", l.name, l.uri));
            }
            ContentBlock::Resource(r) => {
                let v = serde_json::to_value(&r.resource).unwrap_or_default();
                let uri = v["uri"].as_str().unwrap_or("resource");
                if let Some(body) = v["text"].as_str() {
                    text.push_str(&format!("\n<context uri=\"{uri}\">\n{body}\n</context>"));
                }
            }
            _ => return Err("audio and other content is not supported".into()),
        }
    }
    if text.trim().is_empty() && images.is_empty() {
        return Err("the prompt is empty".into());
    }
    Ok((text, images))
}

/// The client's MCP servers as configured servers. SSE (the old transport)
/// is not offered in `initialize`, so a client sending one is told so.
fn client_servers(
    list: &[agent_client_protocol::v1::schema::McpServer],
) -> Result<BTreeMap<String, McpServer>, RpcError> {
    use agent_client_protocol::v1::schema::McpServer as Acp;
    let mut out = BTreeMap::new();
    for s in list {
        let (name, server) = match s {
            Acp::Stdio(s) => {
                let mut server = McpServer::stdio(s.command.display().to_string(), s.args.clone());
                server.env = s
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect();
                (s.name.clone(), server)
            }
            Acp::Http(h) => {
                let mut server = McpServer::http(h.url.clone());
                server.headers = h
                    .headers
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect();
                (h.name.clone(), server)
            }
            _ => {
                return Err(invalid_params(
                    "only stdio and http MCP servers are supported",
                ))
            }
        };
        server
            .check(&name)
            .map_err(|e| invalid_params(&e.to_string()))?;
        out.insert(name, server);
    }
    Ok(out)
}

/// Warnings and errors for the person reading stderr (the editor's log).
fn diagnose(kind: &EventKind) {
    match kind {
        EventKind::Warning { message } => {
            eprintln!("buddy: warning: {}", crate::text::visible(message))
        }
        EventKind::Error { message, .. } => {
            eprintln!("buddy: error: {}", crate::text::visible(message))
        }
        EventKind::Retrying { error, .. } => {
            eprintln!("buddy: retrying: {}", crate::text::visible(error))
        }
        _ => {}
    }
}

fn invalid_params(message: &str) -> RpcError {
    RpcError::new(ErrorCode::INVALID_PARAMS, message.to_string())
}

fn internal(message: String) -> RpcError {
    RpcError::new(ErrorCode::INTERNAL_ERROR, message)
}
