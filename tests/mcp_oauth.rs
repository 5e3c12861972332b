//! OAuth for an HTTP MCP server through the built binary: `buddy mcp login`
//! against `support/oauth_server.py` (an MCP server that is its own
//! authorization server), with `$BROWSER` a script that follows the
//! authorization URL with curl so the redirect reaches buddy's loopback
//! listener; then `exec` calls the server's tool with the kept token,
//! refreshed because it expires within the margin; logout forgets it; no
//! token is ever printed or saved in a session. A token the server stops
//! taking mid-session is refreshed and the call sent again, with no new
//! login; `buddy mcp call` logs in itself when a browser can answer, and
//! fails at once when nobody can.

use crate::support;

use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use support::fake_provider::{tool_result, FakeProvider, Reply, ToolCallSpec};
use support::{fake_config, BuddyCmd};

/// The Python server, killed when dropped.
struct OAuthServer {
    child: Child,
    url: String,
    log: std::path::PathBuf,
}

impl OAuthServer {
    /// `args` after the port: the tokens' lifetime, and `die-after-list`.
    fn start(dir: &std::path::Path, args: &[&str]) -> OAuthServer {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/oauth_server.py");
        let log = dir.join("oauth-server.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let mut child = Command::new("python3")
            .args([script, "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("port");
        let port: u16 = line.trim().parse().expect("a port");
        OAuthServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The stand-in for a person's browser: it follows the authorization URL's
/// redirects to buddy's loopback listener.
fn browser() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mcp/browser.mjs"
    ))
}

/// `PATH` with Node 22 first, for browser.mjs.
fn path_with_node() -> std::ffi::OsString {
    let (node, _) = support::mcp::conformance();
    let bin = node.parent().expect("node is in a directory").to_path_buf();
    std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("a PATH")
}

fn files_under(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
}

#[test]
fn login_then_exec_calls_the_tool_with_a_refreshed_token_and_logout_forgets_it() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec {
            id: "c1".into(),
            name: "mcp__locked__whoami".into(),
            arguments: json!({}).to_string(),
        }]),
        Reply::text("done"),
    ]);
    let probe = BuddyCmd::new();
    // Tokens live 5 s: inside buddy's refresh margin, so every connect refreshes.
    let server = OAuthServer::start(&probe.work_dir(), &["5"]);
    let browser = browser();
    let servers = format!("\n[mcp_servers.locked]\nurl = \"{}\"\n", server.url);
    let cmd = BuddyCmd::new()
        .config(format!("{}{servers}", fake_config(&p)))
        .env("BROWSER", &browser)
        .env("PATH", path_with_node());

    let before = cmd.rerun(["mcp", "get", "locked"]);
    assert!(
        before.stdout.contains("status: needs login"),
        "{}",
        before.stdout
    );

    let login = cmd.rerun(["mcp", "login", "locked"]);
    login.assert_success();
    assert!(
        login.stderr.contains("logged in to locked"),
        "{}",
        login.stderr
    );
    let kept = cmd.config_home().join("buddy/mcp-auth.json");
    let mode = std::fs::metadata(&kept).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );

    let out = cmd.rerun(["exec", "--dangerously-auto-approve", "who am i"]);
    out.assert_success();
    let reqs = p.chat_requests();
    let result = tool_result(&reqs[1], "c1");
    assert!(result.contains("you are authorized"), "{result}");
    let log = server.log();
    assert!(log.contains("via authorization_code"), "{log}");
    assert!(log.contains("via refresh_token"), "{log}");

    // No token the server issued is in any output or any file but mcp-auth.json.
    let issued: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("issued "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(!issued.is_empty());
    let mut files = Vec::new();
    files_under(cmd.work_dir().parent().unwrap(), &mut files);
    for token in &issued {
        for o in [&before, &login, &out] {
            assert!(!o.stdout.contains(token) && !o.stderr.contains(token));
        }
        for (path, text) in &files {
            if path != &kept {
                assert!(!text.contains(token), "{} holds a token", path.display());
            }
        }
    }

    let logout = cmd.rerun(["mcp", "logout", "locked"]);
    logout.assert_success();
    assert!(!kept.exists());
    let after = cmd.rerun(["mcp", "get", "locked"]);
    assert!(
        after.stdout.contains("status: needs login"),
        "{}",
        after.stdout
    );
}

#[test]
fn an_access_token_refused_mid_session_is_refreshed_and_the_call_sent_again() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec {
            id: "c1".into(),
            name: "mcp__locked__whoami".into(),
            arguments: json!({}).to_string(),
        }]),
        Reply::text("done"),
    ]);
    let probe = BuddyCmd::new();
    // Tokens live an hour (nothing is refreshed early), but the server stops
    // taking each once it has listed the tools: the call after the listing
    // meets a 401 in the middle of the session.
    let server = OAuthServer::start(&probe.work_dir(), &["3600", "die-after-list"]);
    let servers = format!("\n[mcp_servers.locked]\nurl = \"{}\"\n", server.url);
    let cmd = BuddyCmd::new()
        .config(format!("{}{servers}", fake_config(&p)))
        .env("BROWSER", browser())
        .env("PATH", path_with_node());
    cmd.rerun(["mcp", "login", "locked"]).assert_success();

    let out = cmd.rerun(["exec", "--dangerously-auto-approve", "who am i"]);
    out.assert_success();
    let result = tool_result(&p.chat_requests()[1], "c1");
    assert!(result.contains("you are authorized"), "{result}");
    let log = server.log();
    let lines: Vec<&str> = log.lines().collect();
    let logins = lines
        .iter()
        .filter(|l| l.ends_with("via authorization_code"));
    assert_eq!(logins.count(), 1, "a second login happened:\n{log}");
    let expired = lines.iter().position(|l| l.starts_with("expired "));
    let refreshed = lines.iter().position(|l| l.ends_with("via refresh_token"));
    assert!(
        matches!((expired, refreshed), (Some(e), Some(r)) if e < r),
        "no refresh after the token died:\n{log}"
    );
}

#[test]
fn mcp_call_logs_in_itself_when_a_browser_can_answer_and_fails_at_once_when_none_can() {
    let probe = BuddyCmd::new();
    let server = OAuthServer::start(&probe.work_dir(), &["3600"]);
    let servers = format!("[mcp_servers.locked]\nurl = \"{}\"\n", server.url);
    let nobody = BuddyCmd::new()
        .config(servers.clone())
        .env("BROWSER", "")
        .timeout(std::time::Duration::from_secs(20));
    // No terminal and no browser: the refusal, not a wait for a redirect.
    let out = nobody.rerun(["mcp", "call", "locked", "whoami"]);
    out.assert_code(1);
    assert!(
        out.stderr.contains("buddy mcp login locked"),
        "{}",
        out.stderr
    );
    assert!(!server.log().contains("via authorization_code"));

    let cmd = BuddyCmd::new()
        .config(servers)
        .env("BROWSER", browser())
        .env("PATH", path_with_node());
    let out = cmd.rerun(["mcp", "call", "locked", "whoami"]);
    out.assert_success();
    assert!(out.stdout.contains("you are authorized"), "{}", out.stdout);
    assert!(
        out.stderr.contains("locked asks for a login"),
        "{}",
        out.stderr
    );
    assert!(server.log().contains("via authorization_code"));
}
