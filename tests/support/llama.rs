//! llama.cpp's `llama-server` with a tiny model (SmolLM2-135M-Instruct), for
//! tests that want a server we did not write. `scripts/real-server` builds it
//! into `~/.cache/buddy-real-server` (or `$BUDDY_REAL_SERVER_DIR`); `.ci/run`
//! runs that script, so under CI a missing server is a failure.
//!
//! The server runs with the arguments `scripts/real-server --start` uses
//! ([`server_args`]: our chat template, which gives the model the request's
//! tools, a 4096-token context, one slot) plus two threads, on loopback and a
//! free port, and is killed when the [`RealServer`] is dropped. Servers in one
//! test binary take turns, so two of them never compete for the cores (and
//! timings stay comparable).

use super::real_server::server_args;
use super::TempDir;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The context size the server is started with (`--ctx-size` in
/// `scripts/real-server.d/server-args`).
pub fn context() -> u64 {
    let args = server_args();
    args.iter()
        .position(|a| a == "--ctx-size")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .expect("server-args sets --ctx-size to a number")
}

/// How long the server may take to load the model and answer `/health`.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Where `build.sh` put the server and the model.
pub fn install_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BUDDY_REAL_SERVER_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/buddy-real-server")
}

fn server_bin() -> PathBuf {
    install_dir().join("bin/llama-server")
}

fn model() -> PathBuf {
    install_dir().join("model.gguf")
}

/// Whether the server and the model are there. When they are not, under CI
/// (`$CI` set) this fails the test; elsewhere it prints a note and returns
/// false, and the test returns early.
pub fn installed(test: &str) -> bool {
    let missing: Vec<String> = [server_bin(), model()]
        .into_iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "the real-server test `{test}` needs {} (build them with scripts/real-server; .ci/run does)",
        missing.join(" and "),
    );
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("note: skipping: {why}");
    false
}

pub struct RealServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: TempDir,
    _turn: MutexGuard<'static, ()>,
}

static TURN: Mutex<()> = Mutex::new(());

impl RealServer {
    /// Starts the server on a free loopback port and returns once `/health`
    /// answers 200 (the model is loaded).
    pub fn start() -> RealServer {
        // A test that failed while holding the turn poisons it; the next may go.
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let dir = TempDir::new("real-server");
        let log = dir.join("server.log");
        // The port is free when chosen; if something takes it before the
        // server binds, the server exits and another port is tried.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port();
            let mut cmd = Command::new(server_bin());
            cmd.arg("-m")
                .arg(model())
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(server_args())
                .args(["-t", "2"]);
            let out = std::fs::File::create(&log).expect("create the server log");
            let err = out.try_clone().expect("clone the log handle");
            let mut child = cmd
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", server_bin().display()));
            let outcome = wait_healthy(&mut child, port);
            if outcome == Health::Ready {
                return RealServer {
                    child,
                    port,
                    log,
                    _dir: dir,
                    _turn: turn,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lost_port = outcome == Health::Exited && text.contains("bind");
            assert!(
                lost_port && attempt < 3,
                "llama-server did not become healthy on port {port} ({outcome:?})\n--- its log ---\n{text}"
            );
        }
    }

    /// `http://127.0.0.1:PORT/v1`, for a profile's `api_base_url`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Everything the server logged so far (shown when a test fails).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Health {
    Ready,
    Exited,
    TimedOut,
}

/// Polls `/health` until it answers 200 (the model is loaded).
fn wait_healthy(child: &mut Child, port: u16) -> Health {
    let started = Instant::now();
    while started.elapsed() < START_TIMEOUT {
        if let Ok(Some(_)) = child.try_wait() {
            return Health::Exited;
        }
        if health(port) == Some(200) {
            return Health::Ready;
        }
        // Only paces the polling; readiness is what /health says.
        std::thread::sleep(Duration::from_millis(50));
    }
    Health::TimedOut
}

impl Drop for RealServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The status of `GET /health`, or `None` when nothing answers yet.
fn health(port: u16) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    // "HTTP/1.1 200"
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
