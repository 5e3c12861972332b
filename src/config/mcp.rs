//! MCP servers in the configuration: the `[mcp_servers.NAME]` section of
//! buddy.toml (Codex's shape) and a project's `.mcp.json` (Claude Code's
//! shape, `{"mcpServers": {NAME: {command, args, env} | {type: "http", url,
//! headers}}}`), both turned into one `McpServer` value (the entry's shape,
//! in `file.rs` with the rest of the file's). Only reading and checking live
//! here; starting servers is `crate::mcp`'s job.
//!
//! A `.mcp.json` comes with the repository, so, like a project's buddy.toml,
//! it adds servers (programs that would run as the user) only once the user
//! has trusted it as it is now (`buddy trust .mcp.json`).

use super::file::McpServer;
use super::McpEntryError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The project file Claude Code reads.
pub const MCP_JSON: &str = ".mcp.json";

/// Claude Code's `.mcp.json`.
#[derive(Debug, Deserialize)]
struct McpJson {
    #[serde(rename = "mcpServers", default)]
    servers: BTreeMap<String, McpJsonServer>,
}

#[derive(Debug, Deserialize)]
struct McpJsonServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The servers of a `.mcp.json` text; the error is one line.
pub fn parse_mcp_json(text: &str) -> Result<BTreeMap<String, McpServer>, McpEntryError> {
    let file: McpJson =
        serde_json::from_str(text).map_err(|e| McpEntryError::Json(e.to_string()))?;
    let mut out = BTreeMap::new();
    for (name, s) in file.servers {
        let server = match (s.kind.as_deref(), s.command, s.url) {
            (None | Some("stdio"), Some(command), None) => McpServer {
                env: s.env,
                ..McpServer::stdio(command, s.args)
            },
            (None | Some("http") | Some("streamable-http") | Some("sse"), None, Some(url)) => {
                McpServer {
                    headers: s.headers,
                    ..McpServer::http(url)
                }
            }
            (kind, _, _) => {
                return Err(McpEntryError::UnknownType {
                    kind: kind.unwrap_or("none").to_string(),
                    name,
                })
            }
        };
        server.check(&name)?;
        out.insert(name, server);
    }
    Ok(out)
}

/// What `.mcp.json` in `cwd` adds: its servers when the trust list holds it
/// as it is now; otherwise none, and the path with the names held back.
pub struct ProjectServers {
    pub servers: BTreeMap<String, McpServer>,
    pub untrusted: Option<(PathBuf, Vec<String>)>,
    /// A file that could not be read or parsed: one line for a warning.
    pub error: Option<String>,
}

pub fn project_servers(
    cwd: &Path,
    trust_store: Option<&super::trust::TrustStore>,
) -> ProjectServers {
    let path = cwd.join(MCP_JSON);
    let mut out = ProjectServers {
        servers: BTreeMap::new(),
        untrusted: None,
        error: None,
    };
    let bytes = match crate::localfile::read_regular(&path, super::MAX_CONFIG_BYTES) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return out,
        Err(e) => {
            out.error = Some(format!("cannot read {}: {e}", path.display()));
            return out;
        }
    };
    let servers = match std::str::from_utf8(&bytes)
        .map_err(|e| McpEntryError::Json(e.to_string()))
        .and_then(parse_mcp_json)
    {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(format!(
                "{}: {}",
                path.display(),
                crate::text::one_line(&e.to_string(), 200)
            ));
            return out;
        }
    };
    let trusted = trust_store.is_some_and(|s| s.is_trusted(&path, &bytes));
    if trusted {
        out.servers = servers;
    } else if !servers.is_empty() {
        out.untrusted = Some((path, servers.into_keys().collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_TOOL_TIMEOUT_SECS;

    #[test]
    fn claude_code_shapes_read_as_stdio_and_http_servers() {
        let servers = parse_mcp_json(
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-A": "b"}}
            }}"#,
        )
        .unwrap();
        assert_eq!(servers["fs"].command.as_deref(), Some("npx"));
        assert_eq!(servers["fs"].args, ["-y", "srv"]);
        assert_eq!(servers["fs"].env["K"], "v");
        assert_eq!(
            servers["web"].url.as_deref(),
            Some("http://127.0.0.1:1/mcp")
        );
        assert_eq!(servers["web"].headers["X-A"], "b");
        assert_eq!(servers["web"].tool_timeout_secs, DEFAULT_TOOL_TIMEOUT_SECS);
    }

    #[test]
    fn an_entry_with_neither_or_both_ends_is_an_error() {
        assert!(parse_mcp_json(r#"{"mcpServers": {"x": {}}}"#).is_err());
        let both = McpServer {
            url: Some("http://a/".into()),
            ..McpServer::stdio("a".into(), vec![])
        };
        assert!(both
            .check("x")
            .unwrap_err()
            .to_string()
            .contains("not both"));
        assert!(McpServer::http("ftp://x".into()).check("x").is_err());
    }

    #[test]
    fn enabled_and_disabled_tools_filter_the_offer() {
        let mut s = McpServer::stdio("a".into(), vec![]);
        assert!(s.offers("echo"));
        s.enabled_tools = Some(vec!["echo".into(), "add".into()]);
        s.disabled_tools = vec!["add".into()];
        assert!(s.offers("echo"));
        assert!(!s.offers("add"));
        assert!(!s.offers("other"));
    }
}
