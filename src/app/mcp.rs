//! The MCP servers of this process: started once, on the first agent set-up
//! that needs them, and shared by every agent after it (a served session's,
//! a model switch's), so each configured server runs once. With no server
//! configured nothing of MCP is built or started.

use crate::config::Settings;
use crate::mcp::{McpError, McpTools};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// `None` inside when the MCP thread could not be made (said once).
static RUNNING: OnceLock<Option<Arc<McpTools>>> = OnceLock::new();

/// The servers, started in the background on the first call; `None` when
/// none is configured. `taken` is the built-in tools' names; `cwd` is where
/// the servers start (the first set-up's directory: they are shared).
pub fn tools(settings: &Settings, taken: &[&str], cwd: &Path) -> Option<Arc<McpTools>> {
    if settings.mcp_servers.is_empty() {
        return None;
    }
    let started = RUNNING.get_or_init(|| {
        // The values of a server's `env` are its secrets (tokens, keys):
        // known before anything the server says can be shown or saved.
        crate::redact::remember(
            settings
                .mcp_servers
                .values()
                .flat_map(|s| s.env.values().cloned()),
        );
        let cwd = cwd.to_path_buf();
        let max = settings
            .tools
            .max_output_chars
            .unwrap_or(crate::mcp::DEFAULT_MAX_OUTPUT_CHARS)
            .max(100);
        McpTools::start(
            &settings.mcp_servers,
            taken.iter().map(|s| s.to_string()).collect::<HashSet<_>>(),
            cwd,
            max,
        )
        .map_err(|e| eprintln!("buddy: MCP servers not started: {e}"))
        .ok()
    });
    started.clone()
}

/// The servers if they were started.
pub fn running() -> Option<Arc<McpTools>> {
    RUNNING.get().cloned().flatten()
}

/// Waits until no server is starting (each start is bounded by its startup
/// timeout), for front ends that offer the tools once (exec, `buddy
/// mcp-server`), and says on stderr, the first time, what the servers'
/// lists left out (a bad entry, a name listed twice, a list cut).
pub async fn ready(style: crate::ui::style::Style) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(servers) = running() else {
        return;
    };
    servers.wait_ready().await;
    if WARNED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    for line in servers.warnings() {
        eprintln!(
            "{} {}",
            style.warning("warning:"),
            crate::redact::text(&line)
        );
    }
}

/// At most this much of one resource or prompt goes into a turn, like an
/// @file mention's (`ui::repl::mentions::PER_FILE`).
const MENTION_CHARS: usize = 64 * 1024;
/// How long the REPL waits for a resource or prompt before giving up.
const MENTION_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits for an answer from the MCP thread. The REPL calls this from its
/// key handler: the wait is bounded, and the user asked for this content
/// before the prompt can go.
fn wait(rx: crate::mcp::Pending) -> Result<String, McpError> {
    match rx.recv_timeout(MENTION_WAIT) {
        Ok(answer) => answer.map(|t| crate::redact::text(&t).into_owned()),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            Err(McpError::Wait(MENTION_WAIT.as_secs()))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(McpError::Gone),
    }
}

/// `@SERVER:uri`: the resource's text, or `None` when SERVER is not a
/// configured server.
pub fn resource(mention: &str) -> Option<Result<String, McpError>> {
    let servers = running()?;
    let (server, uri) = mention.split_once(':')?;
    if !servers.has_server(server) || uri.is_empty() {
        return None;
    }
    let rx = servers.read_resource(server, uri, MENTION_CHARS)?;
    Some(wait(rx))
}

/// `/SERVER:PROMPT args`: the prompt's text, or `None` when no server
/// offers it.
pub fn prompt(name: &str, args: &str) -> Option<Result<String, McpError>> {
    let servers = running()?;
    let (server, prompt) = name.split_once(':')?;
    match servers.get_prompt(server, prompt, args, MENTION_CHARS)? {
        Ok(rx) => Some(wait(rx)),
        Err(e) => Some(Err(e)),
    }
}
