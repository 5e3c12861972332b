//! The MCP servers of this process: started once, on the first agent set-up
//! that needs them, and shared by every agent after it (a served session's,
//! a model switch's), so each configured server runs once. With no server
//! configured nothing of MCP is built or started.

use crate::config::Settings;
use crate::mcp::McpTools;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

static RUNNING: OnceLock<Arc<McpTools>> = OnceLock::new();

/// The servers, started in the background on the first call; `None` when
/// none is configured. `taken` is the built-in tools' names.
pub fn tools(settings: &Settings, taken: &[&str]) -> Option<Arc<McpTools>> {
    if settings.mcp_servers.is_empty() {
        return None;
    }
    Some(Arc::clone(RUNNING.get_or_init(|| {
        // The values of a server's `env` are its secrets (tokens, keys):
        // known before anything the server says can be shown or saved.
        crate::redact::remember(
            settings
                .mcp_servers
                .values()
                .flat_map(|s| s.env.values().cloned()),
        );
        let cwd = super::workdir();
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
    })))
}

/// The servers if they were started.
pub fn running() -> Option<Arc<McpTools>> {
    RUNNING.get().cloned()
}

/// `/mcp`'s text: a line per server, its tools and its last error under it.
/// Everything a server named is made safe for the terminal and redacted.
pub fn report_text(report: &[crate::mcp::ServerReport]) -> String {
    use crate::text::one_line;
    let mut out = Vec::new();
    for r in report {
        out.push(format!(
            "{}  {}  {}",
            one_line(&r.name, 60),
            r.status.as_str(),
            one_line(&r.transport, 120)
        ));
        if !r.tools.is_empty() {
            out.push(format!("  tools: {}", one_line(&r.tools.join(", "), 1000)));
        }
        if let Some(e) = &r.last_error {
            out.push(format!(
                "  last error: {}",
                crate::redact::text(&one_line(e, 400))
            ));
        }
    }
    out.join("\n")
}
