//! A real OpenAI-compatible server for end-to-end tests: llama.cpp's
//! `llama-server` with the SmolLM2-135M model, built by `scripts/real-server`
//! into `$BUDDY_REAL_SERVER_DIR` (default `~/.cache/buddy-real-server`), and
//! started with the arguments of `scripts/real-server.d/server-args` (our
//! chat template, which gives the model the request's tools, a 4096-token
//! context, one slot), as `scripts/real-server --start` does, plus two
//! threads.
//!
//! It owns: starting the server on a free loopback port, knowing when it is
//! ready (`/health` answers 200: the model is loaded), keeping its log, and
//! stopping it on drop. Servers take turns, so two never compete for the
//! cores. It does not own building it: when it is not built,
//! [`RealServer::start`] fails the test under CI (`CI` set) and otherwise
//! returns `None` after a note, so a developer without the build still gets
//! the rest of the suite.

use super::TempDir;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The model's name in the server's `/v1/models` (its `--alias` in
/// `scripts/real-server.d/server-args`).
pub const MODEL: &str = "smollm2";

/// Loading a 135M model takes about a second; a busy CI machine gets more.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// One server at a time, across the whole suite.
static TURN: Mutex<()> = Mutex::new(());

pub struct RealServer {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: TempDir,
    _turn: MutexGuard<'static, ()>,
}

fn server_dir() -> PathBuf {
    match std::env::var_os("BUDDY_REAL_SERVER_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache")
            .join("buddy-real-server"),
    }
}

/// The arguments every start of the server gets, shared with
/// `scripts/real-server --start`: one a line in
/// `scripts/real-server.d/server-args`, `#` lines and blank ones skipped,
/// `{here}` standing for that folder.
pub fn server_args() -> Vec<String> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/real-server.d");
    let file = here.join("server-args");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.strip_prefix("{here}") {
            Some(rest) => format!("{}{rest}", here.display()),
            None => l.to_string(),
        })
        .collect()
}

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

pub use super::{free_port, free_ports};

/// The directory holding the built server and model, or `None` after a
/// note when they are not built (a failure under CI; see the module comment).
pub fn built(test: &str) -> Option<PathBuf> {
    let dir = server_dir();
    if dir.join("bin").join("llama-server").is_file() && dir.join("model.gguf").is_file() {
        return Some(dir);
    }
    let why = format!(
        "the real server is not built in {} (run scripts/real-server; .ci/run does)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!("{test}: skipped: {why}");
    None
}

#[derive(Debug, PartialEq, Eq)]
enum Health {
    Ready,
    Exited,
    TimedOut,
}

impl RealServer {
    /// Starts the server, or explains why not (see the module comment).
    pub fn start(test: &str) -> Option<RealServer> {
        RealServer::start_with(test, &[])
    }

    /// [`RealServer::start`] with more arguments for the server (`-n 64`
    /// caps an answer: this tiny model can ramble to the end of its context).
    pub fn start_with(test: &str, extra: &[&str]) -> Option<RealServer> {
        let dir = built(test)?;
        // A test that failed while holding the turn poisons it; the next may go.
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let logs = TempDir::new("real-server");
        let log = logs.join("server.log");
        // The port is free when chosen; if something takes it before the
        // server binds, the server exits and another port is tried.
        for attempt in 1.. {
            let port = free_port();
            let out = std::fs::File::create(&log).expect("create the server log");
            let err = out.try_clone().expect("clone the log handle");
            let bin = dir.join("bin").join("llama-server");
            let mut child = Command::new(&bin)
                .arg("-m")
                .arg(dir.join("model.gguf"))
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(server_args())
                .args(["-t", "2"])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            let outcome = super::wait::poll_until(READY_TIMEOUT, || {
                if let Ok(Some(_)) = child.try_wait() {
                    return Some(Health::Exited);
                }
                (health(port) == Some(200)).then_some(Health::Ready)
            })
            .unwrap_or(Health::TimedOut);
            if outcome == Health::Ready {
                return Some(RealServer {
                    child,
                    port,
                    log,
                    _dir: logs,
                    _turn: turn,
                });
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
        unreachable!("the loop returns or fails")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
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

impl Drop for RealServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
