//! OAuth for an HTTP MCP server through the built binary: `buddy mcp login`
//! against `support/oauth_server.py` (an MCP server that is its own
//! authorization server), with `$BROWSER` a script that follows the
//! authorization URL with curl so the redirect reaches buddy's loopback
//! listener; then `exec` calls the server's tool with the kept token,
//! refreshed because it expires within the margin; logout forgets it; no
//! token is ever printed or saved in a session.

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
    fn start(dir: &std::path::Path) -> OAuthServer {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/oauth_server.py");
        let log = dir.join("oauth-server.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        // Tokens live 5 s: inside buddy's refresh margin, so every connect refreshes.
        let mut child = Command::new("python3")
            .args([script, "0", "5"])
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
    let server = OAuthServer::start(&probe.work_dir());
    let browser = probe.work_dir().join("browser.sh");
    std::fs::write(&browser, "#!/bin/sh\ncurl -sS -L -o /dev/null \"$1\"\n").unwrap();
    std::fs::set_permissions(
        &browser,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let servers = format!("\n[mcp_servers.locked]\nurl = \"{}\"\n", server.url);
    let cmd = BuddyCmd::new()
        .config(format!("{}{servers}", fake_config(&p)))
        .env("BROWSER", &browser);

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
