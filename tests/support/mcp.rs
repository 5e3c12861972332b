//! The real MCP servers the MCP tests and bench talk to, installed by
//! `scripts/mcp-servers` (which `.ci/run` calls): server-everything from npm
//! and a Python server written with the `mcp` package from PyPI
//! (`tests/fixtures/mcp/server.py`), and the official conformance suite with
//! Node 22 from npm (`tests/mcp_conformance.rs`). Missing ones fail the test with a line
//! naming the script; nothing is fetched while tests run.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where the script installed them.
pub fn dir() -> PathBuf {
    match std::env::var_os("BUDDY_MCP_SERVERS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache")
            .join("buddy-mcp-servers"),
    }
}

fn installed(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run scripts/mcp-servers (CI's .ci/run does)",
        path.display()
    );
    path
}

/// server-everything's program (speaks stdio with no argument).
pub fn everything() -> PathBuf {
    installed(dir().join("node/node_modules/.bin/mcp-server-everything"))
}

/// The venv's python, which has the `mcp` package.
pub fn python() -> PathBuf {
    installed(dir().join("venv/bin/python"))
}

/// The Python test server's script.
pub fn test_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/server.py")
}

/// The official MCP conformance suite and the Node (22) that runs it, both
/// from npm: `(node, the suite's entry script)`.
pub fn conformance() -> (PathBuf, PathBuf) {
    let modules = dir().join("conformance/node_modules");
    (
        installed(modules.join(".bin/node")),
        installed(modules.join("@modelcontextprotocol/conformance/dist/index.js")),
    )
}

/// A TOML string literal.
pub fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

/// `[mcp_servers.NAME]` for the Python test server, plus `extra` lines.
pub fn python_server(name: &str, extra: &str) -> String {
    format!(
        "\n[mcp_servers.{name}]\ncommand = {}\nargs = [{}]\n{extra}\n",
        quoted(&python().display().to_string()),
        quoted(&test_server().display().to_string())
    )
}

/// `[mcp_servers.NAME]` for server-everything over stdio.
pub fn everything_stdio(name: &str) -> String {
    format!(
        "\n[mcp_servers.{name}]\ncommand = {}\nargs = [\"stdio\"]\n",
        quoted(&everything().display().to_string())
    )
}

/// server-everything serving Streamable HTTP on a loopback port; killed on drop.
pub struct EverythingHttp {
    child: Child,
    pub url: String,
}

impl EverythingHttp {
    pub fn start() -> EverythingHttp {
        let port = super::real_server::free_port();
        let child = Command::new(everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server-everything");
        super::wait::wait_for(
            format!("server-everything to listen on {port}"),
            Duration::from_secs(30),
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        EverythingHttp {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
