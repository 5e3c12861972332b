//! `buddy acp` figures for docs/PERFORMANCE.md (issue 33's budgets):
//!
//! - the first `agent_message_chunk` of a prompt turn on buddy's stdout,
//!   measured from the moment the fake provider wrote the first streamed
//!   token (`Reply::stamped_text`: each piece carries its write time), next
//!   to the first `text_delta` line of `exec --json` on the same reply: the
//!   difference is what the ACP front end adds;
//! - the resident memory of `buddy acp` idle: after `initialize`, after
//!   `session/new`, and after a few prompt turns.
//!
//! stdout is read here, raw, line by line, as an editor reads it (no client
//! library in between, so its own parsing is not counted).
//!
//! ```text
//! cargo bench --bench acp
//! cargo bench --bench acp -- --buddy PATH   # another build, e.g. a copy of the user build
//! ```
//!
//! The build cargo makes for the bench has the dev-dependencies' features
//! and so other symbol hashes than a user's, which the start-up list
//! (build/startup.ld) mostly misses: for the memory a user meets, give
//! `--buddy` a fresh copy of `cargo build --release --bin buddy`'s binary
//! (docs/PERFORMANCE.md says why a copy).

#[allow(dead_code)]
#[path = "../tests/support/fake_provider.rs"]
mod fake_provider;

use fake_provider::{parse_stamps, FakeProvider, Reply};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

const ROUNDS: usize = 40;

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// An isolated home and working directory with a `buddy.toml` for the fake.
struct Dir(PathBuf);

impl Dir {
    fn new(provider: &FakeProvider) -> Dir {
        let root = std::env::temp_dir().join(format!(
            "buddy-acp-bench-{}-{}",
            std::process::id(),
            unix_nanos()
        ));
        let config_home = root.join("xdg-config");
        std::fs::create_dir_all(root.join("work")).expect("work dir");
        std::fs::create_dir_all(config_home.join("buddy")).expect("config dir");
        std::fs::write(
            config_home.join("buddy/buddy.toml"),
            include_str!("../buddy.toml.example"),
        )
        .expect("global config");
        std::fs::write(
            root.join("work/buddy.toml"),
            format!(
                "[agent]\nmodel = \"fake\"\n\n[models.fake]\napi_base_url = \"{}\"\n\
                 model = \"fake-model\"\napi_key = \"sk-fake\"\n",
                provider.base_url()
            ),
        )
        .expect("buddy.toml");
        Dir(root)
    }

    fn work(&self) -> PathBuf {
        self.0.join("work")
    }

    fn command(&self, buddy: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(buddy);
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if name.starts_with("BUDDY_")
                || name.starts_with("AGENT_")
                || name.ends_with("_API_KEY")
            {
                cmd.env_remove(&key);
            }
        }
        cmd.args(args)
            .env("HOME", self.0.join("home"))
            .env("XDG_CONFIG_HOME", self.0.join("xdg-config"))
            .env("XDG_DATA_HOME", self.0.join("xdg-data"))
            .env("XDG_STATE_HOME", self.0.join("xdg-state"))
            .env("XDG_CACHE_HOME", self.0.join("xdg-cache"))
            .env("NO_COLOR", "1")
            .current_dir(self.work())
            .stderr(Stdio::null());
        cmd
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rss_kib(child: &Child) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("status");
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// The age in microseconds of the first stamp in `text` now.
fn age_us(text: &str) -> f64 {
    let stamps = parse_stamps(text).unwrap_or_else(|| panic!("not stamps: {text:?}"));
    (unix_nanos() as i128 - stamps[0].1 as i128) as f64 / 1000.0
}

fn read_json(out: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    let n = out.read_line(&mut line).expect("read stdout");
    assert!(n > 0, "stdout closed");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

fn send(stdin: &mut impl Write, v: Value) {
    let mut line = v.to_string();
    line.push('\n');
    stdin.write_all(line.as_bytes()).expect("write stdin");
    stdin.flush().expect("flush");
}

fn summary(label: &str, mut us: Vec<f64>) {
    us.sort_by(f64::total_cmp);
    let q = |p: f64| us[((us.len() - 1) as f64 * p).round() as usize];
    println!(
        "{label:<44} median {:>8.1} µs   p90 {:>8.1} µs   min {:>8.1} µs   ({} runs)",
        q(0.5),
        q(0.9),
        us[0],
        us.len()
    );
}

fn acp(buddy: &Path, dir: &Dir) -> Vec<f64> {
    let mut child = dir
        .command(buddy, &["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start buddy acp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    send(
        &mut stdin,
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}),
    );
    read_json(&mut out);
    let after_init = rss_kib(&child);
    let cwd = dir.work().display().to_string();
    send(
        &mut stdin,
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":cwd,"mcpServers":[]}}),
    );
    let session = read_json(&mut out)["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    let after_new = rss_kib(&child);
    let mut ages = Vec::new();
    for i in 0..ROUNDS {
        let id = 100 + i;
        send(
            &mut stdin,
            json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{
                "sessionId":session,"prompt":[{"type":"text","text":"go"}]}}),
        );
        let mut first = true;
        loop {
            let v = read_json(&mut out);
            if v["id"] == id {
                assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
                break;
            }
            let update = &v["params"]["update"];
            if first && update["sessionUpdate"] == "agent_message_chunk" {
                ages.push(age_us(update["content"]["text"].as_str().expect("text")));
                first = false;
            }
        }
    }
    let after_turns = rss_kib(&child);
    println!(
        "buddy acp RSS: {:.1} MiB after initialize, {:.1} MiB idle with a session, {:.1} MiB idle after {ROUNDS} turns",
        after_init as f64 / 1024.0,
        after_new as f64 / 1024.0,
        after_turns as f64 / 1024.0
    );
    drop(stdin);
    let _ = child.wait();
    ages
}

fn exec_json(buddy: &Path, dir: &Dir) -> Vec<f64> {
    let mut ages = Vec::new();
    for _ in 0..ROUNDS {
        let mut child = dir
            .command(buddy, &["exec", "--json", "go"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start buddy exec");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = true;
        let mut line = String::new();
        while out.read_line(&mut line).expect("read") > 0 {
            if first {
                let v: Value = serde_json::from_str(&line).expect("a JSON line");
                if v["type"] == "text_delta" {
                    ages.push(age_us(v["text"].as_str().expect("text")));
                    first = false;
                }
            }
            line.clear();
        }
        assert!(child.wait().expect("wait").success());
        assert!(!first, "exec --json streamed no text");
    }
    ages
}

fn main() {
    // cargo passes `--bench`; only `--buddy PATH` is ours.
    let mut buddy = PathBuf::from(env!("CARGO_BIN_EXE_buddy"));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--buddy" {
            buddy = PathBuf::from(args.next().expect("--buddy needs a path"));
        }
    }
    let provider = FakeProvider::start_repeating(vec![Reply::stamped_text(4)]);
    let dir = Dir::new(&provider);
    summary(
        "exec --json: first text_delta line",
        exec_json(&buddy, &dir),
    );
    summary("acp: first agent_message_chunk line", acp(&buddy, &dir));
}
