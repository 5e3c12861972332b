//! MCP figures for docs/PERFORMANCE.md, against the real servers that
//! `scripts/mcp-servers` installs (server-everything, and the minimal Python
//! server of tests/fixtures/mcp/server.py):
//!
//! - a tool round trip through buddy's client (`McpTools`, as the agent
//!   calls it: approval, the call, the result made text) next to the same
//!   `tools/call` written and read by hand on the server's pipes, the
//!   server's own time plus nothing but the pipe: the difference is what
//!   buddy adds;
//! - the time `McpTools::start` takes with five servers configured: what
//!   setting up an agent (and so the REPL's first prompt) pays for them.
//!
//! ```text
//! scripts/mcp-servers && cargo bench --bench mcp
//! ```

use buddy::config::McpServer;
use buddy::mcp::McpTools;
use buddy::tools::approval::AlwaysApprove;
use buddy::tools::{ToolContext, ToolSource};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CALLS: usize = 300;

fn dir() -> PathBuf {
    std::env::var_os("BUDDY_MCP_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/buddy-mcp-servers")
        })
}

fn servers() -> Vec<(&'static str, String, Vec<String>, &'static str, Value)> {
    let d = dir();
    let everything = d.join("node/node_modules/.bin/mcp-server-everything");
    let python = d.join("venv/bin/python");
    assert!(
        everything.exists() && python.exists(),
        "run scripts/mcp-servers first"
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/server.py");
    vec![
        (
            "everything",
            everything.display().to_string(),
            vec!["stdio".into()],
            "echo",
            json!({"message": "ping"}),
        ),
        (
            "python",
            python.display().to_string(),
            vec![script.display().to_string()],
            "shout",
            json!({"text": "ping"}),
        ),
    ]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The same call by hand: one line out, read lines until the answer.
fn raw_round_trips(command: &str, args: &[String], tool: &str, arguments: &Value) -> Vec<Duration> {
    let mut child = Command::new(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |v: Value| {
        let mut line = v.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.flush().expect("flush");
    };
    let mut answer = |id: u64| loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "server closed"
        );
        let v: Value = serde_json::from_str(&line).expect("json");
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}}),
    );
    answer(0);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut out = Vec::new();
    for i in 1..=CALLS as u64 {
        let t = Instant::now();
        send(json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
        let v = answer(i);
        out.push(t.elapsed());
        assert!(v.get("result").is_some(), "{v}");
    }
    let _ = child.kill();
    let _ = child.wait();
    out
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let cwd = std::env::current_dir().expect("cwd");
    rt.block_on(async {
        for (name, command, args, tool, arguments) in servers() {
            let raw = median(raw_round_trips(&command, &args, tool, &arguments));
            let spec = McpServer::stdio(command.clone(), args.clone());
            let tools = McpTools::start(
                &BTreeMap::from([(name.to_string(), spec)]),
                Default::default(),
                cwd.clone(),
                30_000,
            )
            .expect("the MCP thread");
            tools.wait_ready().await;
            let ctx = ToolContext::local(cwd.clone(), Arc::new(AlwaysApprove));
            let full = format!("mcp__{name}__{tool}");
            let mut through = Vec::new();
            for _ in 0..CALLS {
                let t = Instant::now();
                let out = tools.execute(&full, arguments.clone(), &ctx).await;
                through.push(t.elapsed());
                assert!(out.is_ok(), "{out:?}");
            }
            tools.stop();
            let via = median(through);
            println!(
                "{name:<11} {tool:<6} by hand {:6.3} ms   through buddy {:6.3} ms   added {:+6.3} ms   (median of {CALLS})",
                ms(raw),
                ms(via),
                ms(via) - ms(raw)
            );
        }

        // Five servers configured: what starting them costs the caller.
        let (_, command, args, _, _) = servers().remove(1);
        let five: BTreeMap<String, McpServer> = (0..5)
            .map(|i| (format!("s{i}"), McpServer::stdio(command.clone(), args.clone())))
            .collect();
        let mut starts = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let tools = McpTools::start(&five, Default::default(), cwd.clone(), 30_000)
                .expect("the MCP thread");
            starts.push(t.elapsed());
            tools.wait_ready().await;
            tools.stop();
        }
        println!(
            "McpTools::start with five servers: median {:.3} ms (the REPL's prompt waits for this only)",
            ms(median(starts))
        );
    });
}
