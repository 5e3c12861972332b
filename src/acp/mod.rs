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
//! which owns the sessions. Each session's agent runs on the one drive loop
//! (`crate::drive`) on a task of its own, with `Session` as its renderer:
//! prompts reach it as input, a permission is its `Approval::Ask`. Nothing
//! here holds the SDK's dispatch while it waits, and questions to the
//! client (permissions, its files) are asked from those tasks.
//!
//! What this does not own: how an agent is built (settings, tools, targets:
//! `app::acp`), the session files (`session`), and the MCP client the
//! client's servers are started with (`mcp`).

mod files;
pub mod modes;
mod permission;
mod question;
mod terminal;
pub mod translate;
mod transport;

pub use files::ClientFiles;

use crate::agent::protocol::{ApprovalQuestion, Event, EventKind, Op, OpId};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::config::McpServer;
use crate::drive::{drive, Approval, Flow, Renderer};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate,
    CancelNotification, ClientCapabilities, CloseSessionRequest, CloseSessionResponse,
    ContentBlock, CurrentModeUpdate, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    PromptResponse, ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities,
    SessionCloseCapabilities, SessionInfo, SessionListCapabilities, SessionNotification,
    SessionResumeCapabilities, SessionUpdate, SetSessionModeRequest, SetSessionModeResponse,
    UnstructuredCommandInput,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error as RpcError, ErrorCode, Lines};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use translate::{Step, Translator};

/// How long a session's agent gets to save and stop when the client goes.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// Sessions in one `session/list` page: a store may hold thousands, and
/// each is read (its summary) to be listed.
const LIST_PAGE: usize = 50;

/// Why `buddy acp` stopped early.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("the ACP connection failed: {0}")]
    Connection(#[source] RpcError),
}

/// Why a session could not be opened: one line, for the client's error
/// answer. The composition root says what went wrong in its own words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

/// Why a prompt's content was refused (an invalid-params answer).
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("an image is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("an image is not PNG, JPEG, GIF or WebP")]
    ImageFormat,
    #[error("audio and other content is not supported")]
    Unsupported,
    #[error("the prompt is empty")]
    Empty,
}

/// What `buddy acp` needs from the composition root.
pub trait Backend: Send + Sync {
    /// A new saved session for `cwd`; its id (the ACP session id).
    fn create(&self, cwd: &Path) -> Result<String, BackendError>;
    /// An agent working in `cwd` with the client's MCP servers as well as
    /// the configured ones, and tools that go through the client's files
    /// and terminals where it offered them.
    fn spawn(
        &self,
        cwd: &Path,
        servers: BTreeMap<String, McpServer>,
        client: ClientSide,
    ) -> Result<Spawned, BackendError>;
    /// The saved sessions of `cwd` (the directory `buddy acp` started in
    /// when `None`), most recently used first.
    fn list(&self, cwd: Option<&Path>) -> Result<Vec<Listed>, BackendError>;
    /// The custom commands and skills a prompt in `cwd` may start with
    /// (`/name arguments`).
    fn commands(&self, cwd: &Path) -> Vec<Command>;
}

/// What the client offered to serve for a session's tools.
#[derive(Default)]
pub struct ClientSide {
    /// Its buffers (`fs/read_text_file`, `fs/write_text_file`).
    pub files: Option<Arc<dyn ClientFiles>>,
    /// Its terminals (`terminal/*`), for `run_shell`.
    pub terminal: Option<Arc<dyn crate::tools::terminal::EditorTerminal>>,
}

/// One saved session as `session/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub cwd: PathBuf,
    pub title: String,
    /// Unix seconds of its last write.
    pub updated: u64,
}

/// A command the client may offer as `/name`: a custom command, or a
/// skill to use. `body` is the prompt it stands for, with `$ARGUMENTS`
/// and `$1`…`$9` filled in from what follows the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Without the slash.
    pub name: String,
    pub description: String,
    pub body: String,
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
    Resume(Box<ResumeSessionRequest>, Responder<ResumeSessionResponse>),
    List(Box<ListSessionsRequest>, Responder<ListSessionsResponse>),
    Close(CloseSessionRequest, Responder<CloseSessionResponse>),
    SetMode(SetSessionModeRequest, Responder<SetSessionModeResponse>),
    Prompt(PromptRequest, Responder<PromptResponse>),
    Cancel(CancelNotification),
}

/// Serves ACP on stdin and stdout until the client closes the connection;
/// every session is saved before it returns.
pub async fn run(backend: Arc<dyn Backend>) -> Result<(), AcpError> {
    let (tx, rx) = mpsc::unbounded_channel::<Incoming>();
    let transport = Lines::new(transport::outgoing(), transport::incoming());
    // Each handler only forwards: the loop below answers.
    let (t1, t2, t3, t4, t5) = (tx.clone(), tx.clone(), tx.clone(), tx.clone(), tx.clone());
    let (t6, t7, t8, t9) = (tx.clone(), tx.clone(), tx.clone(), tx);
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
        .on_receive_request(
            async move |r: ResumeSessionRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t6, Incoming::Resume(Box::new(r), resp))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: ListSessionsRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t7, Incoming::List(Box::new(r), resp))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: CloseSessionRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t8, Incoming::Close(r, resp))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: SetSessionModeRequest, resp, _cx: ConnectionTo<Client>| {
                forward(&t9, Incoming::SetMode(r, resp))
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
        .map_err(AcpError::Connection)
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

/// What the connection hands a session's task.
enum ToSession {
    /// Boxed: a responder is large, and most messages are small.
    Prompt(Box<(PromptRequest, Responder<PromptResponse>)>),
    /// The client has gone: answer what waits, save and stop.
    Close,
}

/// One open ACP session as the connection sees it: its task (the drive
/// loop over its agent) and what a cancel needs.
struct Open {
    inbox: mpsc::UnboundedSender<ToSession>,
    /// The agent's ops: a cancel goes straight to the agent, even while the
    /// session's task waits for the client's answer to a permission.
    ops: OpSender,
    /// A prompt turn is in progress.
    prompting: Arc<AtomicBool>,
    /// The session mode (`modes`), shared with the session's task.
    mode: modes::Current,
    task: tokio::task::JoinHandle<()>,
}

/// How a session is opened: a new one, or a saved one with its history
/// replayed to the client (`session/load`) or not (`session/resume`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpenAs {
    New,
    Load,
    Resume,
}

/// The loop that owns the sessions: it takes what the SDK hands over and
/// passes prompts to each session's task.
struct Conn {
    cx: ConnectionTo<Client>,
    backend: Arc<dyn Backend>,
    client: ClientCapabilities,
    sessions: HashMap<String, Open>,
}

impl Conn {
    fn new(cx: ConnectionTo<Client>, backend: Arc<dyn Backend>) -> Conn {
        Conn {
            cx,
            backend,
            client: ClientCapabilities::default(),
            sessions: HashMap::new(),
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
                match self
                    .open(&req.cwd, &req.mcp_servers, OpenAs::New, None)
                    .await
                {
                    Ok(id) => {
                        let answer =
                            NewSessionResponse::new(id.clone()).modes(modes::state(modes::DEFAULT));
                        let _ = resp.respond(answer);
                        self.announce_commands(&id, &req.cwd);
                    }
                    Err(e) => {
                        let _ = resp.respond_with_error(e);
                    }
                }
            }
            Incoming::Load(req, resp) => {
                let id = req.session_id.0.to_string();
                match self
                    .open(&req.cwd, &req.mcp_servers, OpenAs::Load, Some(&id))
                    .await
                {
                    Ok(_) => {
                        let answer = LoadSessionResponse::new().modes(modes::state(modes::DEFAULT));
                        let _ = resp.respond(answer);
                        self.announce_commands(&id, &req.cwd);
                    }
                    Err(e) => {
                        let _ = resp.respond_with_error(e);
                    }
                }
            }
            Incoming::Resume(req, resp) => {
                let id = req.session_id.0.to_string();
                // Already open here: nothing to start, the mode is as it is.
                if let Some(open) = self.sessions.get(&id) {
                    let _ = resp
                        .respond(ResumeSessionResponse::new().modes(modes::state(open.mode.get())));
                    return;
                }
                match self
                    .open(&req.cwd, &req.mcp_servers, OpenAs::Resume, Some(&id))
                    .await
                {
                    Ok(_) => {
                        let answer =
                            ResumeSessionResponse::new().modes(modes::state(modes::DEFAULT));
                        let _ = resp.respond(answer);
                        self.announce_commands(&id, &req.cwd);
                    }
                    Err(e) => {
                        let _ = resp.respond_with_error(e);
                    }
                }
            }
            Incoming::List(req, resp) => {
                let _ = resp.respond_with_result(self.list(&req));
            }
            Incoming::Close(req, resp) => {
                let sid = req.session_id.0.to_string();
                match self.sessions.remove(&sid) {
                    Some(open) => {
                        // Its prompt is answered as cancelled, the agent
                        // saved and stopped, before the close is answered.
                        stop(open).await;
                        let _ = resp.respond(CloseSessionResponse::new());
                    }
                    None => {
                        let _ = resp.respond_with_error(not_open(&sid));
                    }
                }
            }
            Incoming::SetMode(req, resp) => {
                let sid = req.session_id.0.to_string();
                let Some(open) = self.sessions.get_mut(&sid) else {
                    let _ = resp.respond_with_error(not_open(&sid));
                    return;
                };
                let Some(mode) = modes::find(&req.mode_id.0) else {
                    let _ = resp.respond_with_error(invalid_params(&format!(
                        "no mode `{}`; the modes are {}",
                        crate::text::one_line(&req.mode_id.0, 60),
                        modes::list()
                            .iter()
                            .map(|m| m.id)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                    return;
                };
                let policy = mode.policy;
                // Set before the ops go: the agent's `PlanMode` answer must
                // find the new mode, not read it as a plan accepted.
                open.mode.set(mode.id);
                let sent = match open.ops.send(Op::SetApprovalPolicy { policy }).await {
                    Ok(_) => open.ops.send(Op::SetPlanMode { on: mode.plan }).await.ok(),
                    Err(_) => None,
                };
                if sent.is_none() {
                    let _ = resp.respond_with_error(internal("the agent stopped".into()));
                    return;
                }
                let _ = resp.respond(SetSessionModeResponse::new());
                notify(
                    &self.cx,
                    &sid,
                    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id)),
                );
            }
            Incoming::Prompt(req, resp) => {
                let sid = req.session_id.0.to_string();
                let Some(open) = self.sessions.get(&sid) else {
                    let _ = resp.respond_with_error(not_open(&sid));
                    return;
                };
                if let Err(mpsc::error::SendError(ToSession::Prompt(p))) =
                    open.inbox.send(ToSession::Prompt(Box::new((req, resp))))
                {
                    let _ = p.1.respond_with_error(internal("the agent stopped".into()));
                }
            }
            Incoming::Cancel(n) => {
                if let Some(open) = self.sessions.get(n.session_id.0.as_ref()) {
                    if open.prompting.load(Ordering::Acquire) {
                        let _ = open.ops.send(Op::Interrupt).await;
                    }
                }
            }
        }
    }

    /// Starts a session's agent: a new saved session, or a saved one
    /// (`Load` replays it to the client as updates before the answer).
    async fn open(
        &mut self,
        cwd: &Path,
        servers: &[agent_client_protocol::v1::schema::McpServer],
        how: OpenAs,
        saved: Option<&str>,
    ) -> Result<String, RpcError> {
        if !cwd.is_absolute() {
            return Err(invalid_params("cwd must be an absolute path"));
        }
        if let Some(id) = saved {
            if self.sessions.contains_key(id) {
                return Err(invalid_params(&format!("session {id} is already open")));
            }
        }
        let servers = client_servers(servers)?;
        let id = match saved {
            Some(id) => id.to_string(),
            None => self
                .backend
                .create(cwd)
                .map_err(|e| internal(e.to_string()))?,
        };
        let shown = Arc::new(terminal::Shown::default());
        let client = ClientSide {
            files: files::offered(&self.client, &self.cx, &id),
            terminal: terminal::offered(&self.client, &self.cx, &id, &shown),
        };
        let commands = self.backend.commands(cwd);
        let Spawned { mut agent, servers } = self
            .backend
            .spawn(cwd, servers, client)
            .map_err(|e| internal(e.to_string()))?;
        let resume = agent.ops.send(Op::Resume { query: id.clone() }).await.ok();
        let (inbox, rx) = mpsc::unbounded_channel();
        let prompting = Arc::new(AtomicBool::new(false));
        let mode = modes::Current::new();
        let mut session = Session {
            mode: mode.clone(),
            cx: self.cx.clone(),
            sid: id.clone(),
            translator: Translator::new(),
            prompt: None,
            prompting: prompting.clone(),
            inbox: rx,
            asking: None,
            opening: Some(Opening {
                op: resume,
                replay: how == OpenAs::Load,
                answer: None,
            }),
            commands,
            shown,
            client: self.client.clone(),
        };
        // The resume's answer, on the drive loop like the rest: the session
        // opens only if it holds.
        drive(&mut agent, &mut session).await;
        let resumed = session
            .opening
            .take()
            .and_then(|o| o.answer)
            .unwrap_or_else(|| Err(internal("the agent stopped unexpectedly".into())));
        if let Err(e) = resumed {
            if let Some(s) = &servers {
                s.stop();
            }
            agent.shutdown().await;
            return Err(e);
        }
        let ops = agent.ops.clone();
        let task = tokio::spawn(session.run(agent, servers));
        self.sessions.insert(
            id.clone(),
            Open {
                inbox,
                ops,
                prompting,
                mode,
                task,
            },
        );
        Ok(id)
    }

    /// Tells the client the commands a prompt of session `sid` may start
    /// with, when there are any.
    fn announce_commands(&self, sid: &str, cwd: &Path) {
        let commands: Vec<AvailableCommand> = self
            .backend
            .commands(cwd)
            .into_iter()
            .map(|c| {
                AvailableCommand::new(c.name, c.description).input(
                    AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("arguments")),
                )
            })
            .collect();
        if !commands.is_empty() {
            notify(
                &self.cx,
                sid,
                SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
            );
        }
    }

    /// One page of the saved sessions of the asked directory.
    fn list(&self, req: &ListSessionsRequest) -> Result<ListSessionsResponse, RpcError> {
        if let Some(cwd) = &req.cwd {
            if !cwd.is_absolute() {
                return Err(invalid_params("cwd must be an absolute path"));
            }
        }
        // The cursor is the count of sessions already listed.
        let from = match &req.cursor {
            Some(c) => c
                .parse::<usize>()
                .map_err(|_| invalid_params("the cursor is not one buddy gave"))?,
            None => 0,
        };
        let all = self
            .backend
            .list(req.cwd.as_deref())
            .map_err(|e| internal(e.to_string()))?;
        let page: Vec<SessionInfo> = all
            .iter()
            .skip(from)
            .take(LIST_PAGE)
            .map(|l| {
                // A session with no prompt yet has no title to show.
                let title =
                    (!l.title.trim().is_empty()).then(|| crate::text::one_line(&l.title, 200));
                SessionInfo::new(l.id.clone(), l.cwd.clone())
                    .title(title)
                    .updated_at(crate::clock::rfc3339_utc(l.updated))
            })
            .collect();
        let next = from + page.len();
        let mut answer = ListSessionsResponse::new(page);
        if next < all.len() {
            answer = answer.next_cursor(next.to_string());
        }
        Ok(answer)
    }

    /// Every session saved and its agent stopped; prompts still waiting are
    /// answered as cancelled.
    async fn close(&mut self) {
        let open: Vec<Open> = self.sessions.drain().map(|(_, o)| o).collect();
        // All told first, so they stop side by side.
        for o in &open {
            let _ = o.inbox.send(ToSession::Close);
        }
        for o in open {
            stopped(o).await;
        }
    }
}

/// Tells a session's task to stop and waits for it: its prompt answered,
/// its agent saved and stopped.
async fn stop(open: Open) {
    let _ = open.inbox.send(ToSession::Close);
    stopped(open).await;
}

/// Waits for a session's task, told to stop, to end.
async fn stopped(open: Open) {
    // The task gives its agent `SHUTDOWN_WAIT`; a little more here for the
    // rest of its stop.
    let _ = tokio::time::timeout(SHUTDOWN_WAIT + Duration::from_secs(5), open.task).await;
}

fn not_open(sid: &str) -> RpcError {
    RpcError::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("no session {} is open", crate::text::one_line(sid, 80)),
    )
}

/// The resume a session opens with, while it is waited for.
struct Opening {
    /// The `Op::Resume` whose reply is waited for (`None`: the agent was
    /// gone before it could be sent).
    op: Option<OpId>,
    /// `session/load`: the saved conversation goes to the client.
    replay: bool,
    answer: Option<Result<(), RpcError>>,
}

/// One ACP session as a renderer of the drive loop: the agent's events go
/// to the client as `session/update`s (`Translator`), approvals are asked
/// through `session/request_permission`, and prompts come from the
/// connection as input.
struct Session {
    cx: ConnectionTo<Client>,
    sid: String,
    translator: Translator,
    prompt: Option<Pending>,
    prompting: Arc<AtomicBool>,
    inbox: mpsc::UnboundedReceiver<ToSession>,
    /// The question the translator made of the approval request just seen,
    /// for `on_approval` to put.
    asking: Option<(
        agent_client_protocol::v1::schema::ToolCallUpdate,
        Option<String>,
    )>,
    /// Waiting for the answer to the first `Op::Resume`.
    opening: Option<Opening>,
    /// The custom commands and skills a prompt may start with.
    commands: Vec<Command>,
    /// The tool calls the client was told of, for the terminals shown in
    /// them (`terminal::Shown`).
    shown: Arc<terminal::Shown>,
    /// The session mode, which an accepted plan changes.
    mode: modes::Current,
    /// What the client said it can do (forms for a server's questions).
    client: agent_client_protocol::v1::schema::ClientCapabilities,
}

impl Session {
    /// Drives the session until the client goes (or the agent stops), then
    /// saves and stops its agent and the client's MCP servers.
    async fn run(mut self, mut agent: AgentHandle, servers: Option<Arc<crate::mcp::McpTools>>) {
        drive(&mut agent, &mut self).await;
        if let Some(p) = self.prompt.take() {
            // The turn cannot end now: the client has gone, or the agent.
            let _ = p.responder.respond(PromptResponse::new(
                agent_client_protocol::v1::schema::StopReason::Cancelled,
            ));
        }
        self.prompting.store(false, Ordering::Release);
        let _ = tokio::time::timeout(SHUTDOWN_WAIT, agent.shutdown()).await;
        if let Some(s) = servers {
            s.stop();
        }
    }

    /// The answer to the opening resume, when `ev` is it.
    fn opened(&mut self, ev: &Event) -> Flow {
        let Some(opening) = &mut self.opening else {
            return Flow::Continue;
        };
        // Only the resume's own reply answers it.
        if opening.op.is_none() || ev.op_id != opening.op {
            return Flow::Continue;
        }
        match &ev.kind {
            EventKind::SessionResumed { .. } => {
                if opening.replay {
                    for step in self.translator.on_event(ev) {
                        if let Step::Update(u) = step {
                            notify(&self.cx, &self.sid, u);
                        }
                    }
                }
                opening.answer = Some(Ok(()));
                Flow::Stop
            }
            EventKind::Error { message, code } => {
                let msg = crate::text::one_line(message, 400);
                opening.answer = Some(Err(match code {
                    Some(crate::agent::protocol::ErrorCode::SessionNotFound) => {
                        RpcError::new(ErrorCode::RESOURCE_NOT_FOUND, msg)
                    }
                    _ => internal(msg),
                }));
                Flow::Stop
            }
            _ => Flow::Continue,
        }
    }

    async fn prompt(
        &mut self,
        req: PromptRequest,
        resp: Responder<PromptResponse>,
        ops: &OpSender,
    ) {
        if self.prompt.is_some() {
            let _ = resp.respond_with_error(RpcError::new(
                ErrorCode::INVALID_REQUEST,
                "a prompt is already running in this session; cancel it first".to_string(),
            ));
            return;
        }
        let (text, images) = match prompt_content(&req.prompt) {
            Ok((text, images)) => (expand_command(text, &self.commands), images),
            Err(e) => {
                let _ = resp.respond_with_error(invalid_params(&e.to_string()));
                return;
            }
        };
        match ops.send(Op::Prompt { text, images }).await {
            Ok(op) => {
                self.prompt = Some(Pending {
                    op,
                    responder: resp,
                    started: false,
                });
                self.prompting.store(true, Ordering::Release);
            }
            Err(_) => {
                let _ = resp.respond_with_error(internal("the agent stopped".into()));
            }
        }
    }

    /// The prompt turn is over (answered or refused).
    fn turn_over(&mut self) -> Option<Pending> {
        self.prompting.store(false, Ordering::Release);
        self.prompt.take()
    }
}

impl Renderer for Session {
    type Input = Option<ToSession>;

    /// One agent event: its updates to the client, a question, or the end
    /// of the prompt turn.
    fn on_event(&mut self, ev: Event, _ops: &OpSender) -> Flow {
        if self.opening.is_some() {
            return self.opened(&ev);
        }
        diagnose(&ev.kind);
        if let Some(p) = &mut self.prompt {
            if ev.op_id == Some(p.op) {
                match &ev.kind {
                    EventKind::RunStarted { .. } => p.started = true,
                    EventKind::Error { message, .. } if !p.started => {
                        let msg = message.clone();
                        if let Some(p) = self.turn_over() {
                            let _ = p.responder.respond_with_error(internal(msg));
                        }
                        return Flow::Continue;
                    }
                    _ => {}
                }
            }
        }
        let steps = self.translator.on_event(&ev);
        let mut updates = Vec::new();
        for step in steps {
            match step {
                Step::Update(u) => updates.push(u),
                Step::Ask {
                    tool_call, always, ..
                } => self.asking = Some((tool_call, always)),
                Step::Done(result) => {
                    // Only the run this prompt started ends its turn.
                    let ours = self.prompt.as_ref().is_some_and(|p| ev.op_id == Some(p.op));
                    if ours {
                        for u in updates.drain(..) {
                            notify(&self.cx, &self.sid, u);
                        }
                        if let Some(p) = self.turn_over() {
                            let _ = p.responder.respond_with_result(
                                result
                                    .map(PromptResponse::new)
                                    .map_err(|e| internal(e.to_string())),
                            );
                        }
                    }
                }
            }
        }
        for u in updates {
            notify(&self.cx, &self.sid, u);
        }
        match &ev.kind {
            EventKind::ToolCall { call_id, .. } => self.shown.told(&self.cx, &self.sid, call_id),
            EventKind::ToolResult(r) => self.shown.done(&r.call_id),
            // The user accepted the plan: the editor's mode indicator follows.
            EventKind::PlanMode { on: false } => {
                if let Some(id) = self.mode.plan_mode_ended() {
                    notify(
                        &self.cx,
                        &self.sid,
                        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(id)),
                    );
                }
            }
            _ => {}
        }
        Flow::Continue
    }

    /// Asked of the client; the events wait meanwhile (the agent waits for
    /// the answer anyway), and a cancel still reaches the agent directly.
    fn on_approval(&mut self, req: &ApprovalQuestion) -> Approval {
        match self.asking.take() {
            Some((tool_call, always)) => Approval::Ask(Box::pin(permission::ask(
                self.cx.clone(),
                self.sid.clone(),
                tool_call,
                always,
            ))),
            // The translator puts a question for every request; without one
            // nothing could be shown, so nothing is allowed.
            None => Approval::Ask(Box::pin(std::future::ready(
                crate::agent::protocol::Decision::Deny {
                    reason: Some(format!("no question was made for {}", req.call_id)),
                },
            ))),
        }
    }

    /// A server's question goes to the editor as a form when it draws
    /// them (`question`), and is declined otherwise.
    fn on_elicitation(
        &mut self,
        q: &crate::agent::protocol::ElicitationQuestion,
    ) -> crate::drive::Elicitation {
        match question::refusal(&self.client, q) {
            Some(why) => crate::drive::Elicitation::Refuse(why),
            None => crate::drive::Elicitation::Ask(Box::pin(question::ask(
                self.cx.clone(),
                self.sid.clone(),
                q.clone(),
            ))),
        }
    }

    async fn input(&mut self) -> Option<ToSession> {
        if self.opening.is_some() {
            return std::future::pending().await;
        }
        self.inbox.recv().await
    }

    async fn on_input(&mut self, input: Option<ToSession>, ops: &OpSender) -> Flow {
        match input {
            Some(ToSession::Prompt(p)) => {
                let (req, resp) = *p;
                self.prompt(req, resp, ops).await;
                Flow::Continue
            }
            // The connection has gone: nothing more will come.
            Some(ToSession::Close) | None => Flow::Stop,
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

/// A prompt that starts with `/name` of one of `commands` as the prompt
/// that command stands for; any other prompt as it is.
fn expand_command(text: String, commands: &[Command]) -> String {
    let Some(line) = text.strip_prefix('/') else {
        return text;
    };
    let (name, args) = match line.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (line.trim_end(), ""),
    };
    match commands.iter().find(|c| c.name == name) {
        Some(c) => crate::ui::repl::commands::expand(&c.body, args),
        None => text,
    }
}

/// What buddy offers: protocol 1, saved sessions (loaded, resumed,
/// listed, closed), images in prompts, MCP servers over stdio and
/// Streamable HTTP. All of it is in the stable protocol: no unstable
/// feature of the SDK is needed.
fn initialize_response() -> InitializeResponse {
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .session_capabilities(
                    SessionCapabilities::new()
                        .list(SessionListCapabilities::new())
                        .resume(SessionResumeCapabilities::new())
                        .close(SessionCloseCapabilities::new()),
                )
                .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
                .mcp_capabilities(McpCapabilities::new().http(true)),
        )
        .agent_info(Implementation::new("buddy", env!("CARGO_PKG_VERSION")))
}

/// The prompt's text (resources the client embedded included, each in a
/// delimited block) and its images.
fn prompt_content(
    blocks: &[ContentBlock],
) -> Result<(String, Vec<crate::wire::Image>), PromptError> {
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
                let bytes = base64::engine::general_purpose::STANDARD.decode(i.data.as_bytes())?;
                let n = images.len() + 1;
                let image = crate::wire::Image::from_bytes(&format!("image-{n}"), bytes)
                    .ok_or(PromptError::ImageFormat)?;
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
            _ => return Err(PromptError::Unsupported),
        }
    }
    if text.trim().is_empty() && images.is_empty() {
        return Err(PromptError::Empty);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_naming_a_command_becomes_its_prompt() {
        let commands = vec![Command {
            name: "review".into(),
            description: "review a file".into(),
            body: "Review $1 carefully.".into(),
        }];
        assert_eq!(
            expand_command("/review src/main.rs".into(), &commands),
            "Review src/main.rs carefully."
        );
        // Anything else is the prompt as typed.
        assert_eq!(expand_command("/other x".into(), &commands), "/other x");
        assert_eq!(expand_command("review".into(), &commands), "review");
    }

    #[test]
    fn initialize_offers_list_resume_and_close() {
        let v = serde_json::to_value(initialize_response()).unwrap();
        let caps = &v["agentCapabilities"]["sessionCapabilities"];
        for method in ["list", "resume", "close"] {
            assert!(caps[method].is_object(), "{method}: {v}");
        }
    }
}
