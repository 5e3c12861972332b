//! What `buddy mcp-server` adds to a turn (docs/PERFORMANCE.md, "buddy
//! mcp-server"), against the scripted fake provider answering at once:
//!
//! - a `buddy` tool call through rmcp's client, wall time from request to
//!   result (a new session, settings, agent, turn, save);
//! - the turn alone, as `buddy exec --json` shows it on the same script: from
//!   its `run_started` line to its `run_finished` line;
//! - a call refused before any agent is built (a `cwd` that does not exist):
//!   the protocol's round trip and the queue, nothing else.
//!
//! The call's median minus the turn's median is the overhead beyond the turn.
//!
//! ```text
//! cargo bench --bench mcp_server [-- --rounds N]
//! ```

#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use fake_provider::{FakeProvider, Reply};
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn buddy() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_buddy"))
}

/// An isolated home and working directory with a trusted config for `p`.
fn setup(p: &FakeProvider) -> PathBuf {
    let root = std::env::temp_dir().join(format!("buddy-bench-mcp-server-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for d in ["home", "config", "work"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    let config = format!(
        "[agent]\nmodel = \"fake\"\n\n[models.fake]\napi_base_url = \"{}\"\nmodel = \"fake-model\"\napi_key = \"sk-fake\"\n",
        p.base_url()
    );
    std::fs::write(root.join("work/buddy.toml"), config).expect("config");
    let ok = command(&root)
        .args(["trust", "buddy.toml"])
        .stdin(Stdio::null())
        .status()
        .expect("buddy trust");
    assert!(ok.success());
    root
}

fn command(root: &Path) -> Command {
    let mut c = Command::new(buddy());
    c.env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("config"))
        .env("NO_COLOR", "1")
        .env_remove("BUDDY_MODEL")
        .current_dir(root.join("work"));
    c
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(label: &str, mut v: Vec<Duration>) -> f64 {
    v.sort();
    let median = ms(v[v.len() / 2]);
    println!(
        "{label}: min {:.3} ms, median {median:.3} ms ({} runs)",
        ms(v[0]),
        v.len()
    );
    median
}

/// `buddy exec --json hi`: the time from `run_started` to `run_finished`.
fn exec_turn(root: &Path) -> Duration {
    let mut child = command(root)
        .args(["exec", "--json", "hi"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("buddy exec");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut started = None;
    let mut turn = None;
    for line in out.lines() {
        let line = line.expect("line");
        if line.contains("\"type\":\"run_started\"") {
            started = Some(Instant::now());
        } else if line.contains("\"type\":\"run_finished\"") {
            turn = started.map(|s| s.elapsed());
        }
    }
    let _ = child.wait();
    turn.expect("a run_started and a run_finished line")
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn main() {
    let mut rounds = 30usize;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == "--rounds" {
            rounds = it.next().and_then(|n| n.parse().ok()).expect("--rounds N");
        }
    }
    let provider = FakeProvider::start_repeating(vec![Reply::text("ok")]);
    let root = setup(&provider);
    let turns: Vec<Duration> = (0..rounds).map(|_| exec_turn(&root)).collect();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (calls, refused) = runtime.block_on(async {
        let mut cmd = tokio::process::Command::from(command(&root));
        cmd.arg("mcp-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("buddy mcp-server");
        let io = (
            child.stdout.take().expect("stdout"),
            child.stdin.take().expect("stdin"),
        );
        let client = ().serve(io).await.expect("handshake");
        let mut calls = Vec::new();
        let mut refused = Vec::new();
        // One call first, outside the figures: the HTTP connection and the
        // config directory are made then.
        for i in 0..=rounds {
            let p =
                CallToolRequestParams::new("buddy").with_arguments(args(json!({"prompt": "hi"})));
            let t = Instant::now();
            let r = client.call_tool(p).await.expect("call");
            let d = t.elapsed();
            assert_eq!(r.is_error, Some(false), "{r:?}");
            if i > 0 {
                calls.push(d);
            }
            let p = CallToolRequestParams::new("buddy")
                .with_arguments(args(json!({"prompt": "hi", "cwd": "/no/such/dir"})));
            let t = Instant::now();
            let r = client.call_tool(p).await.expect("call");
            refused.push(t.elapsed());
            assert_eq!(r.is_error, Some(true));
        }
        let _ = client.cancel().await;
        (calls, refused)
    });
    let turn = summary("exec --json, run_started to run_finished (the turn)", turns);
    let call = summary("mcp-server `buddy` call, request to result", calls);
    summary(
        "mcp-server call refused before any agent (protocol + queue)",
        refused,
    );
    println!("overhead beyond the turn (medians): {:.3} ms", call - turn);
    let _ = std::fs::remove_dir_all(&root);
}
