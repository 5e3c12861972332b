//! Request bytes per turn (docs/PERFORMANCE.md): the body of the first
//! model request of `buddy exec` as the fake provider receives it over a
//! real socket, with no MCP server, with the reference `everything` server,
//! and with it plus a server of 100 generated tools
//! (tests/fixtures/mcp/many_tools.py), each with the default deferral
//! (`[tools] tool_search_after_bytes`) and with it off (0).
//!
//! ```text
//! scripts/mcp-servers && cargo bench --bench tool_bytes
//! ```

#[allow(dead_code)]
#[path = "../tests/support/fake_provider.rs"]
mod fake_provider;

use fake_provider::{FakeProvider, Reply};
use std::path::PathBuf;
use std::process::Command;

fn servers_dir() -> PathBuf {
    std::env::var_os("BUDDY_MCP_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/buddy-mcp-servers")
        })
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

/// The first request's body and its `tools` array, in bytes.
fn first_request(servers: &str, after: Option<usize>) -> (usize, usize, usize) {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let home = std::env::temp_dir().join(format!(
        "buddy-bench-bytes-{}-{}",
        std::process::id(),
        p.addr().port()
    ));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(home.join(".config/buddy")).expect("home");
    let tools = match after {
        Some(n) => format!("[tools]\ntool_search_after_bytes = {n}\n"),
        None => String::new(),
    };
    let config = format!(
        "[agent]\nmodel = \"fake\"\n\n[models.fake]\napi_base_url = \"{}\"\nmodel = \"fake-model\"\napi_key = \"sk-fake\"\n{tools}{servers}",
        p.base_url()
    );
    let config_path = home.join(".config/buddy/buddy.toml");
    std::fs::write(&config_path, config).expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_buddy"))
        .args(["--config"])
        .arg(&config_path)
        .args(["exec", "hi"])
        .current_dir(&home)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("buddy runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reqs = p.chat_requests();
    let first = reqs.first().expect("a request");
    let tools = first.json()["tools"].clone();
    let count = tools.as_array().map_or(0, Vec::len);
    let _ = std::fs::remove_dir_all(&home);
    (first.body.len(), tools.to_string().len(), count)
}

fn main() {
    let d = servers_dir();
    let everything = d.join("node/node_modules/.bin/mcp-server-everything");
    let python = d.join("venv/bin/python");
    assert!(
        everything.exists() && python.exists(),
        "run scripts/mcp-servers first"
    );
    let many = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/many_tools.py");
    let everything_cfg = format!(
        "\n[mcp_servers.everything]\ncommand = {}\nargs = [\"stdio\"]\n",
        quoted(&everything.display().to_string())
    );
    let many_cfg = format!(
        "\n[mcp_servers.many]\ncommand = {}\nargs = [{}]\n",
        quoted(&python.display().to_string()),
        quoted(&many.display().to_string())
    );
    let cases = [
        ("no MCP server", String::new()),
        ("everything", everything_cfg.clone()),
        (
            "everything + 100 tools",
            format!("{everything_cfg}{many_cfg}"),
        ),
    ];
    println!("request bytes of one turn (first request of `buddy exec hi`):");
    for (name, servers) in &cases {
        for (label, after) in [("default", None), ("deferral off", Some(0))] {
            let (body, tools, count) = first_request(servers, after);
            println!(
                "{name:<24} {label:<13} request {body:>7} B   tools {tools:>7} B in {count:>3} definitions"
            );
        }
    }
}
