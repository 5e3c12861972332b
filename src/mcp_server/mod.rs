//! `buddy mcp-server`: buddy as a tool for other agents, over MCP on
//! stdin/stdout (rmcp's server side). Two tools: `buddy` runs one turn in a
//! new session and returns the answer and the session's id; `buddy-reply`
//! continues a session. Each call gets an agent of its own, built by the
//! composition root (`AgentFactory`), and is driven here by ops and events
//! like any front end, as a renderer of the one drive loop
//! (`crate::drive`); `render.rs` turns its events into progress
//! notifications and the tool result.
//!
//! Calls run one at a time, in the order they arrive: a call may name its
//! own working directory, and the settings, the tools' target and the
//! session store are all resolved from the process's one current
//! directory. Nobody can be asked to approve anything: the caller's
//! `approval` argument decides, read-only commands only by default.
//!
//! Owns the MCP side (tools, arguments, progress, cancellation); it does not
//! know settings or how an agent is built, and prints nothing to stdout but
//! protocol messages (rmcp writes them; diagnostics go to stderr).

pub mod http;
pub mod render;

use crate::agent::protocol::{ApprovalQuestion, Decision, Event, EventKind, Op, OpId};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::drive::{drive, Approval as Answer, Flow, Renderer};
use render::{error_result, CallRenderer, Update};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

pub use render::MAX_ANSWER_CHARS;

/// The tool that starts a conversation.
pub const TOOL_BUDDY: &str = "buddy";
/// The tool that continues one.
pub const TOOL_REPLY: &str = "buddy-reply";

/// How long a client may keep the tool list (ms): it is fixed for the
/// server's life, so an hour costs nothing and saves a request per call.
const TOOLS_TTL_MS: u64 = 60 * 60 * 1000;
/// Calls waiting for their turn; a caller past this waits to hand its call in.
const QUEUE: usize = 16;
/// Sessions whose directory and model are remembered for `buddy-reply`.
const KNOWN_SESSIONS: usize = 1024;
/// Longest a prompt may be (bytes): a whole turn's input, not a file dump.
const MAX_PROMPT_BYTES: usize = 1024 * 1024;
/// How long a finished call's agent gets to save and stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);
/// Longest a request line may be (bytes): a prompt at its cap, escaped,
/// fits. A longer one is answered with an error, not held or ignored.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Told to the model when a command needs approval under `read-only`.
pub const READ_ONLY_REASON: &str = "this buddy was called as a tool with approval \"read-only\": only commands that read run; the caller can call again with approval \"full\" to allow commands and file changes";

/// What the caller's `approval` argument allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Read-only shell commands and reading tools only; anything that needs
    /// approval is denied and the model told why.
    ReadOnly,
    /// Everything approved, as `--dangerously-auto-approve` (the denylist
    /// and the sandbox still apply).
    Full,
}

impl Approval {
    fn parse(text: &str) -> Option<Approval> {
        match text {
            "read-only" => Some(Approval::ReadOnly),
            "full" | "auto" => Some(Approval::Full),
            _ => None,
        }
    }
}

/// One call, resolved: where it works, with which model and approval, and
/// the session it continues (none for `buddy`).
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// An existing directory, absolute.
    pub cwd: PathBuf,
    /// A profile name or a model id (`-m`); none for the default.
    pub model: Option<String>,
    pub approval: Approval,
}

/// Why `buddy mcp-server` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the MCP client did not start a session: {0}")]
    Handshake(#[source] rmcp::service::ServerInitializeError),
}

/// Why a call could not run: one line, for the caller's error result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("cwd `{0}` is not a directory")]
    NotADirectory(String),
    /// The agent could not be built: the composition root's words.
    #[error("{0}")]
    Setup(String),
}

/// Builds the agent a call runs on: settings for `spec.cwd` and
/// `spec.model`, tools, approval rules from `spec.approval`. The error is
/// one line for the caller. The composition root implements it.
pub trait AgentFactory {
    #[allow(clippy::type_complexity)]
    fn start<'a>(
        &'a mut self,
        spec: &'a CallSpec,
    ) -> Pin<Box<dyn Future<Output = Result<AgentHandle, CallError>> + 'a>>;
}

/// A call as the handler hands it to the worker.
struct Job {
    prompt: String,
    /// `buddy-reply`'s session.
    session: Option<String>,
    cwd: Option<String>,
    model: Option<String>,
    approval: Approval,
    progress: Option<(Peer<RoleServer>, ProgressToken)>,
    /// Fires (or is dropped) when the caller cancels the call.
    cancel: oneshot::Receiver<()>,
    reply: oneshot::Sender<CallToolResult>,
}

/// The rmcp handler: checks arguments and queues calls for the worker.
struct Handler {
    jobs: mpsc::Sender<Job>,
    /// Over HTTP, this handler in the count of those alive (sessions are
    /// capped by it); none on stdio.
    _alive: Option<http::Alive>,
}

/// Serves MCP on stdin/stdout until the client goes away, running calls on
/// agents from `factory`. `home` is the directory calls work in when they
/// name none.
pub async fn serve<F: AgentFactory>(factory: F, home: PathBuf) -> Result<(), ServeError> {
    let (jobs, queue) = mpsc::channel(QUEUE);
    let transport = crate::mcp::lines::Lines::<RoleServer, _, _>::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        MAX_REQUEST_BYTES,
        usize::MAX,
    );
    let running = Handler { jobs, _alive: None }
        .serve(transport)
        .await
        .map_err(ServeError::Handshake)?;
    let mut worker = Worker {
        factory,
        home,
        known: Known::default(),
    };
    worker.work(queue, running.waiting()).await;
    Ok(())
}

fn string_arg(args: &JsonObject, name: &str) -> Result<Option<String>, McpError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(McpError::invalid_params(
            format!("`{name}` must be a string"),
            None,
        )),
    }
}

fn required(args: &JsonObject, name: &str) -> Result<String, McpError> {
    match string_arg(args, name)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(McpError::invalid_params(
            format!("`{name}` is required and must not be empty"),
            None,
        )),
    }
}

/// A call's arguments, checked.
struct Args {
    prompt: String,
    session: Option<String>,
    cwd: Option<String>,
    model: Option<String>,
    approval: Approval,
}

impl Handler {
    fn args(request: &CallToolRequestParams) -> Result<Args, McpError> {
        let empty = JsonObject::new();
        let args = request.arguments.as_ref().unwrap_or(&empty);
        let known: &[&str] = match request.name.as_ref() {
            TOOL_BUDDY => &["prompt", "cwd", "model", "approval"],
            TOOL_REPLY => &["session_id", "prompt", "cwd", "model", "approval"],
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "no tool `{}`: this server has `{TOOL_BUDDY}` and `{TOOL_REPLY}`",
                        crate::text::one_line(other, 60)
                    ),
                    None,
                ))
            }
        };
        if let Some(k) = args.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(McpError::invalid_params(
                format!("unknown argument `{}`", crate::text::one_line(k, 60)),
                None,
            ));
        }
        let prompt = required(args, "prompt")?;
        if prompt.len() > MAX_PROMPT_BYTES {
            return Err(McpError::invalid_params(
                format!("`prompt` is longer than {MAX_PROMPT_BYTES} bytes"),
                None,
            ));
        }
        let session = match request.name.as_ref() {
            TOOL_REPLY => Some(required(args, "session_id")?),
            _ => None,
        };
        let approval = match string_arg(args, "approval")? {
            None => Approval::ReadOnly,
            Some(a) => Approval::parse(&a).ok_or_else(|| {
                McpError::invalid_params(
                    format!(
                        "`approval` is `{}`; it may be \"read-only\" (the default), \"full\" or \"auto\"",
                        crate::text::one_line(&a, 40)
                    ),
                    None,
                )
            })?,
        };
        Ok(Args {
            prompt,
            session,
            cwd: string_arg(args, "cwd")?,
            model: string_arg(args, "model")?,
            approval,
        })
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("buddy", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "`buddy` hands a task to another coding agent working in a directory of this machine and returns its answer and a session id; `buddy-reply` continues that session. By default it may only run commands that read; pass approval \"full\" to let it change files and run commands.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // The list never changes while the server runs, and is the same for
        // every caller: 2026-07-28 clients may keep it an hour, and share it.
        Ok(ListToolsResult::with_all_items(tools())
            .with_ttl_ms(TOOLS_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Args {
            prompt,
            session,
            cwd,
            model,
            approval,
        } = Handler::args(&request)?;
        let progress = context
            .meta
            .get_progress_token()
            .map(|t| (context.peer.clone(), t));
        let (cancel_tx, cancel) = oneshot::channel();
        let (reply, answer) = oneshot::channel();
        let job = Job {
            prompt,
            session,
            cwd,
            model,
            approval,
            progress,
            cancel,
            reply,
        };
        if self.jobs.send(job).await.is_err() {
            return Err(McpError::internal_error("the server is stopping", None));
        }
        tokio::select! {
            result = answer => match result {
                Ok(result) => Ok(result.into()),
                Err(_) => Err(McpError::internal_error("the call ended without a result", None)),
            },
            _ = context.ct.cancelled() => {
                // rmcp drops the response of a cancelled request; the
                // worker interrupts the run.
                let _ = cancel_tx.send(());
                Err(McpError::internal_error("cancelled", None))
            }
        }
    }
}

/// The two tools with their input and output schemas.
pub fn tools() -> Vec<Tool> {
    let approval = json!({
        "type": "string",
        "enum": ["read-only", "full", "auto"],
        "default": "read-only",
        "description": "What buddy may do without asking (nobody can be asked): \"read-only\" runs only commands that read and denies everything else, telling the model why; \"full\" (or \"auto\") approves every command and file change, as `buddy exec --dangerously-auto-approve` does: the denylist and the sandbox still apply."
    });
    let cwd = json!({
        "type": "string",
        "description": "The directory buddy works in (absolute, or relative to where the server started); its project settings and sessions are that directory's."
    });
    let model = json!({
        "type": "string",
        "description": "A model profile name from buddy's config, or a model id for the default profile."
    });
    let output = json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "session_id": {"type": "string"},
            "denied": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["answer", "session_id"]
    });
    let object = |v: Value| -> Arc<JsonObject> {
        match v {
            Value::Object(m) => Arc::new(m),
            _ => Arc::new(JsonObject::new()),
        }
    };
    let buddy = json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The task or question, as you would type it to a coding agent."},
            "cwd": cwd,
            "model": model,
            "approval": approval,
        },
        "required": ["prompt"],
        "additionalProperties": false
    });
    let reply = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "string", "description": "The session_id a `buddy` call returned."},
            "prompt": {"type": "string", "description": "The next message in that conversation."},
            "cwd": {"type": "string", "description": "The session's directory, when this server did not start it (by default the one it ran in)."},
            "model": {"type": "string", "description": "Another model profile or model id (by default the session's)."},
            "approval": approval,
        },
        "required": ["session_id", "prompt"],
        "additionalProperties": false
    });
    vec![
        Tool::new(
            TOOL_BUDDY,
            "Run buddy, a coding agent, on a task in a directory of this machine: it reads files, runs commands and answers. Returns the answer and a session_id for buddy-reply.",
            object(buddy),
        )
        .with_raw_output_schema(object(output.clone())),
        Tool::new(
            TOOL_REPLY,
            "Continue a buddy session (from a `buddy` call's session_id) with another message; returns the answer.",
            object(reply),
        )
        .with_raw_output_schema(object(output)),
    ]
}

/// What a session ran with, for `buddy-reply`; bounded, oldest forgotten.
#[derive(Default)]
struct Known {
    sessions: HashMap<String, (PathBuf, Option<String>)>,
    order: VecDeque<String>,
}

impl Known {
    fn remember(&mut self, id: &str, cwd: &Path, model: Option<String>) {
        if self
            .sessions
            .insert(id.to_string(), (cwd.to_path_buf(), model))
            .is_none()
        {
            self.order.push_back(id.to_string());
        }
        while self.order.len() > KNOWN_SESSIONS {
            if let Some(old) = self.order.pop_front() {
                self.sessions.remove(&old);
            }
        }
    }
}

/// Runs the queued calls one at a time.
struct Worker<F> {
    factory: F,
    home: PathBuf,
    known: Known,
}

impl<F: AgentFactory> Worker<F> {
    /// Takes calls until the client has gone (`closed` resolves) or the
    /// handler is gone. A call in progress when the client goes is
    /// interrupted by rmcp's cancellation and still saved.
    async fn work<T>(&mut self, mut queue: mpsc::Receiver<Job>, closed: impl Future<Output = T>) {
        tokio::pin!(closed);
        loop {
            tokio::select! {
                biased;
                _ = &mut closed => return,
                job = queue.recv() => match job {
                    Some(job) => self.run(job).await,
                    None => return,
                },
            }
        }
    }

    async fn run(&mut self, mut job: Job) {
        // Cancelled while it waited: nothing to do.
        if !matches!(
            job.cancel.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ) {
            return;
        }
        let (result, agent) = self.call(&mut job).await;
        // The caller has its answer before the agent stops; the next call
        // waits for the stop (and so for the session's save).
        let _ = job.reply.send(result);
        if let Some(agent) = agent {
            let _ = tokio::time::timeout(SHUTDOWN_WAIT, agent.shutdown()).await;
        }
    }

    fn spec(&self, job: &Job) -> Result<CallSpec, CallError> {
        let known = job
            .session
            .as_ref()
            .and_then(|s| self.known.sessions.get(s));
        let cwd = match (&job.cwd, known) {
            (Some(c), _) => self.home.join(c),
            (None, Some((c, _))) => c.clone(),
            (None, None) => self.home.clone(),
        };
        let cwd = std::fs::canonicalize(&cwd)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| {
                CallError::NotADirectory(crate::text::one_line(&cwd.display().to_string(), 200))
            })?;
        let model = job
            .model
            .clone()
            .or_else(|| known.and_then(|(_, m)| m.clone()));
        Ok(CallSpec {
            cwd,
            model,
            approval: job.approval,
        })
    }

    /// The call's result, and its agent, still to be stopped.
    async fn call(&mut self, job: &mut Job) -> (CallToolResult, Option<AgentHandle>) {
        let spec = match self.spec(job) {
            Ok(s) => s,
            Err(e) => return (error_result(&e.to_string()), None),
        };
        let mut agent = match self.factory.start(&spec).await {
            Ok(a) => a,
            Err(e) => {
                return (
                    error_result(&crate::text::one_line(&e.to_string(), 400)),
                    None,
                )
            }
        };
        let (progress, sending) = match job.progress.take() {
            Some((peer, token)) => {
                let (tx, task) = progress_task(peer, token);
                (Some(tx), Some(task))
            }
            None => (None, None),
        };
        let mut call = CallFrontEnd {
            view: CallRenderer::new(),
            progress,
            cancel: &mut job.cancel,
            interrupted: false,
            resuming: None,
            resumed: false,
        };
        if let Some(id) = &job.session {
            // The session must open before the prompt goes; the reason it
            // did not is in the view.
            call.resuming = agent.ops.send(Op::Resume { query: id.clone() }).await.ok();
            drive(&mut agent, &mut call).await;
            call.resuming = None;
        }
        if call.resumed || job.session.is_none() {
            let prompt = std::mem::take(&mut job.prompt);
            let _ = agent
                .ops
                .send(Op::Prompt {
                    text: prompt,
                    images: Vec::new(),
                })
                .await;
            drive(&mut agent, &mut call).await;
        }
        let CallFrontEnd { view, progress, .. } = call;
        // Every progress notification goes before the result.
        drop(progress);
        if let Some(task) = sending {
            let _ = task.await;
        }
        if let Some(id) = view.session() {
            self.known.remember(id, &spec.cwd, spec.model.clone());
        }
        (view.result(), Some(agent))
    }
}

/// One call as a renderer of the drive loop: its events go to
/// `CallRenderer`, progress to the caller, and the caller's cancel becomes
/// an interrupt. While `resuming`, it only waits for the reply to that
/// `Op::Resume`: the session opened, or why not.
struct CallFrontEnd<'j> {
    view: CallRenderer,
    /// Progress messages, sent in order by a task of their own: `on_event`
    /// cannot wait for the client.
    progress: Option<mpsc::UnboundedSender<String>>,
    /// Fires (or is dropped) when the caller cancels the call.
    cancel: &'j mut oneshot::Receiver<()>,
    interrupted: bool,
    resuming: Option<OpId>,
    resumed: bool,
}

impl Renderer for CallFrontEnd<'_> {
    type Input = ();

    fn on_event(&mut self, ev: Event, _ops: &OpSender) -> Flow {
        warn(&ev.kind);
        let update = self.view.on_event(&ev);
        if let Some(resume) = self.resuming {
            // Only the resume's own reply answers it: it opened, or the
            // view took its error.
            if ev.op_id != Some(resume) {
                return Flow::Continue;
            }
            if matches!(ev.kind, EventKind::SessionResumed { .. }) {
                self.resumed = true;
                return Flow::Stop;
            }
            return match update {
                Update::Finished => Flow::Stop,
                _ => Flow::Continue,
            };
        }
        match update {
            Update::Finished => Flow::Stop,
            Update::Progress(message) => {
                if let Some(tx) = &self.progress {
                    let _ = tx.send(message);
                }
                Flow::Continue
            }
            Update::None => Flow::Continue,
        }
    }

    /// Declined: the caller is a program, and its client is not asked in
    /// turn.
    fn on_elicitation(
        &mut self,
        _question: &crate::agent::protocol::ElicitationQuestion,
    ) -> crate::drive::Elicitation {
        crate::drive::Elicitation::Refuse(
            "buddy mcp-server does not pass a server's questions on to its client".into(),
        )
    }

    /// Not expected (the rules decide every request), but nobody here could
    /// say yes.
    fn on_approval(&mut self, _req: &ApprovalQuestion) -> Answer {
        Answer::Ask(Box::pin(std::future::ready(Decision::Deny {
            reason: Some(READ_ONLY_REASON.into()),
        })))
    }

    async fn input(&mut self) {
        // A cancel is taken once, and only once the run's prompt has gone
        // (a resume has nothing to interrupt).
        if self.resuming.is_some() || self.interrupted {
            std::future::pending::<()>().await;
        }
        let _ = (&mut *self.cancel).await;
    }

    async fn on_input(&mut self, _input: (), ops: &OpSender) -> Flow {
        self.interrupted = true;
        let _ = ops.send(Op::Interrupt).await;
        Flow::Continue
    }
}

/// A task that sends a call's progress notifications in order, numbered
/// from 1; it ends when the sender is dropped, after the last one.
fn progress_task(
    peer: Peer<RoleServer>,
    token: ProgressToken,
) -> (mpsc::UnboundedSender<String>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let task = tokio::spawn(async move {
        let mut step = 0u32;
        while let Some(message) = rx.recv().await {
            step += 1;
            let note = ProgressNotificationParam::new(token.clone(), f64::from(step))
                .with_message(message);
            let _ = peer.notify_progress(note).await;
        }
    });
    (tx, task)
}

/// What the person running the server should see in its log (stderr).
fn warn(kind: &EventKind) {
    match kind {
        EventKind::Warning { message } => {
            eprintln!("buddy: warning: {}", crate::text::one_line(message, 400))
        }
        EventKind::Retrying { error, attempt, .. } => eprintln!(
            "buddy: warning: {}; retrying (attempt {attempt})",
            crate::text::one_line(error, 400)
        ),
        _ => {}
    }
}
