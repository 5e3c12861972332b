//! The client's terminals (`terminal/create`, `terminal/wait_for_exit`,
//! `terminal/kill`, `terminal/output`, `terminal/release`) as the tools'
//! `EditorTerminal`: `run_shell` runs this host's commands in one, after the
//! approval gate and inside the sandbox's wrapper as it would run them here
//! (`tools::terminal`). Offered only when the client said, in `initialize`,
//! that it has terminals. Every terminal made is released: when the run
//! ends, and, for a run dropped half-way (a cancelled call), by a task the
//! drop starts, which kills the command first. While it runs, the terminal
//! is shown in its tool call (a `terminal` content), so the editor shows
//! the command's output live; `Shown` makes sure that update never comes
//! before the call it belongs to.

use agent_client_protocol::v1::schema::{
    ClientCapabilities, CreateTerminalRequest, EnvVariable, KillTerminalRequest,
    ReleaseTerminalRequest, SessionNotification, SessionUpdate, Terminal, TerminalId,
    TerminalOutputRequest, ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
    WaitForTerminalExitRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error as RpcError};
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use crate::tools::terminal::{EditorTerminal, TerminalCommand, TerminalError, TerminalRun};

/// How long the client may take to answer a request that is not the
/// wait for the command itself.
const ANSWER_TIME: Duration = Duration::from_secs(30);

struct AcpTerminal {
    cx: ConnectionTo<Client>,
    session: String,
    shown: Arc<Shown>,
}

/// The client's terminals for `session`, when it offers them; `shown` is
/// the session's record of the calls the client was told of.
pub fn offered(
    caps: &ClientCapabilities,
    cx: &ConnectionTo<Client>,
    session: &str,
    shown: &Arc<Shown>,
) -> Option<Arc<dyn EditorTerminal>> {
    caps.terminal.then(|| {
        Arc::new(AcpTerminal {
            cx: cx.clone(),
            session: session.to_string(),
            shown: shown.clone(),
        }) as Arc<dyn EditorTerminal>
    })
}

/// Which of a session's tool calls the client has been told of, and the
/// terminals waiting for theirs: the session's renderer sends a call's
/// `tool_call`, a running command its terminal, in either order, and the
/// client must see the call first.
#[derive(Default)]
pub struct Shown {
    state: Mutex<ShownState>,
}

#[derive(Default)]
struct ShownState {
    told: HashSet<String>,
    waiting: HashMap<String, TerminalId>,
}

impl Shown {
    fn lock(&self) -> std::sync::MutexGuard<'_, ShownState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client was just told of `call_id`: its terminal, if one waits,
    /// goes now.
    pub fn told(&self, cx: &ConnectionTo<Client>, session: &str, call_id: &str) {
        let mut st = self.lock();
        st.told.insert(call_id.to_string());
        if let Some(id) = st.waiting.remove(call_id) {
            show(cx, session, call_id, id);
        }
    }

    /// `call_id` has its result: nothing more is shown in it.
    pub fn done(&self, call_id: &str) {
        let mut st = self.lock();
        st.told.remove(call_id);
        st.waiting.remove(call_id);
    }

    /// Shows terminal `id` in `call_id` once the client knows the call.
    fn terminal(&self, cx: &ConnectionTo<Client>, session: &str, call_id: &str, id: TerminalId) {
        // Under the lock, so `told` cannot slip in between the check and
        // the send.
        let mut st = self.lock();
        if st.told.contains(call_id) {
            show(cx, session, call_id, id);
        } else {
            st.waiting.insert(call_id.to_string(), id);
        }
    }
}

fn show(cx: &ConnectionTo<Client>, session: &str, call_id: &str, id: TerminalId) {
    let fields =
        ToolCallUpdateFields::new().content(vec![ToolCallContent::Terminal(Terminal::new(id))]);
    let update = SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields));
    let _ = cx.send_notification(SessionNotification::new(session.to_string(), update));
}

/// The client's answer within `ANSWER_TIME`, or why there is none.
async fn answered<T>(
    what: &str,
    answer: impl Future<Output = Result<T, RpcError>>,
) -> Result<T, TerminalError> {
    match tokio::time::timeout(ANSWER_TIME, answer).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(TerminalError::Editor(crate::text::one_line(
            &e.message, 300,
        ))),
        Err(_) => Err(TerminalError::Editor(format!(
            "no answer to {what} in time"
        ))),
    }
}

/// Kills and releases the terminal unless disarmed: a run dropped before
/// its end must not leave the command running in the editor.
struct Release {
    cx: ConnectionTo<Client>,
    session: String,
    id: Option<TerminalId>,
}

impl Drop for Release {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let (cx, session) = (self.cx.clone(), self.session.clone());
        // Bounded, and owned by nothing but its two requests.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let kill = KillTerminalRequest::new(session.clone(), id.clone());
                let _ = answered("terminal/kill", cx.send_request(kill).block_task()).await;
                let release = ReleaseTerminalRequest::new(session, id);
                let _ = answered("terminal/release", cx.send_request(release).block_task()).await;
            });
        }
    }
}

#[async_trait]
impl EditorTerminal for AcpTerminal {
    async fn run(&self, run: TerminalCommand<'_>) -> Result<TerminalRun, TerminalError> {
        let mut argv = run.argv.into_iter();
        let program = argv
            .next()
            .ok_or_else(|| TerminalError::Editor("no command to run".into()))?;
        let create = CreateTerminalRequest::new(self.session.clone(), program)
            .args(argv.collect())
            .env(
                run.env
                    .into_iter()
                    .map(|(k, v)| EnvVariable::new(k, v))
                    .collect(),
            )
            .cwd(run.cwd.to_path_buf())
            .output_byte_limit(run.output_bytes);
        let id = answered("terminal/create", self.cx.send_request(create).block_task())
            .await?
            .terminal_id;
        let mut guard = Release {
            cx: self.cx.clone(),
            session: self.session.clone(),
            id: Some(id.clone()),
        };
        if !run.call_id.is_empty() {
            self.shown
                .terminal(&self.cx, &self.session, run.call_id, id.clone());
        }
        let wait = WaitForTerminalExitRequest::new(self.session.clone(), id.clone());
        let exited =
            tokio::time::timeout(run.timeout, self.cx.send_request(wait).block_task()).await;
        let timed_out = exited.is_err();
        if timed_out {
            let kill = KillTerminalRequest::new(self.session.clone(), id.clone());
            answered("terminal/kill", self.cx.send_request(kill).block_task()).await?;
        }
        let output = TerminalOutputRequest::new(self.session.clone(), id.clone());
        let output = answered("terminal/output", self.cx.send_request(output).block_task()).await;
        guard.id = None;
        let release = ReleaseTerminalRequest::new(self.session.clone(), id);
        let released = answered(
            "terminal/release",
            self.cx.send_request(release).block_task(),
        )
        .await;
        let output = output?;
        released?;
        // The exit as the wait reported it, else as the output did.
        let status = match exited {
            Ok(Ok(done)) => Some(done.exit_status),
            Ok(Err(e)) => {
                return Err(TerminalError::Editor(crate::text::one_line(
                    &e.message, 300,
                )))
            }
            Err(_) => output.exit_status.clone(),
        };
        Ok(TerminalRun {
            output: output.output,
            truncated: output.truncated,
            exit_code: status.as_ref().and_then(|s| s.exit_code),
            signal: status.and_then(|s| s.signal),
            timed_out,
        })
    }
}
