//! What a hook adds beyond its own process, for docs/PERFORMANCE.md: the
//! same command (`true`, and one that reads its JSON input with `cat`) run
//! bare with tokio's process API (spawn, write stdin, read stdout and
//! stderr, wait), then through `HookRunner::fire` as a PreToolUse hook
//! (matcher, input JSON, process group, bounded reads, answer parsing,
//! timeout). The difference of the medians is the hook's own cost; the
//! issue asks for at most 1 ms. Also the cost of `fire` with no hook
//! configured for the event (the loop skips even that when none is).
//!
//! ```text
//! cargo bench --bench hooks [-- --rounds N]
//! ```

use buddy::agent::emitter::Emitter;
use buddy::agent::hooks::{About, HookEvent, HookRunner, Hooks};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// The command run as a bare child: what any way of running it costs.
async fn bare(command: &str, input: &[u8]) {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let write = async {
        let _ = stdin.write_all(input).await;
        drop(stdin);
    };
    let _ = tokio::join!(
        write,
        stdout.read_to_end(&mut out),
        stderr.read_to_end(&mut err),
        child.wait()
    );
}

fn input() -> serde_json::Map<String, serde_json::Value> {
    let mut f = serde_json::Map::new();
    f.insert("tool_name".into(), "run_shell".into());
    f.insert(
        "tool_input".into(),
        serde_json::json!({"command": "cargo test --release", "timeout_secs": 600}),
    );
    f.insert("tool_use_id".into(), "call_1".into());
    f
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        // Nothing should be emitted (the hooks succeed); drain anyway.
        tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let cwd = std::env::current_dir().expect("cwd");
        let body = serde_json::Value::Object(input()).to_string().into_bytes();
        println!("hooks: {rounds} rounds each, medians");
        for command in ["true", "cat > /dev/null"] {
            let mut hooks = Hooks::default();
            hooks
                .add(
                    HookEvent::PreToolUse,
                    "run_shell|write_file",
                    command.into(),
                    None,
                )
                .expect("hook");
            let runner = HookRunner::new(hooks, cwd.clone(), Emitter::new(tx.clone()));
            let about = About {
                call_id: Some("call_1"),
                tool: Some("run_shell"),
            };
            let (mut direct, mut hooked) = (Vec::new(), Vec::new());
            // Interleaved, so both see the same machine load.
            for _ in 0..rounds {
                let t = Instant::now();
                bare(command, &body).await;
                direct.push(t.elapsed());
                let t = Instant::now();
                runner.fire(HookEvent::PreToolUse, about, input()).await;
                hooked.push(t.elapsed());
            }
            let (d, h) = (median(direct), median(hooked));
            println!(
                "  `{command}`: bare process {}, as a hook {}, hook overhead {}",
                ms(d),
                ms(h),
                ms(h.saturating_sub(d))
            );
        }
        let runner = HookRunner::new(Hooks::default(), cwd, Emitter::new(tx));
        let t = Instant::now();
        for _ in 0..10_000 {
            runner
                .fire(HookEvent::PreToolUse, About::default(), input())
                .await;
        }
        println!(
            "  no hook configured: fire costs {:.2} µs (the loop does not call it then)",
            t.elapsed().as_secs_f64() * 1e6 / 10_000.0
        );
    });
}
