//! A real OpenAI-compatible server for end-to-end tests: llama.cpp's
//! `llama-server` with the SmolLM2-135M model, built by `scripts/real-server`
//! into `$BUDDY_REAL_SERVER_DIR` (default `~/.cache/buddy-real-server`), and
//! started with the arguments of `scripts/real-server.d/server-args` (our
//! chat template among them), as `scripts/real-server --start` does.
//!
//! It owns: starting the server on a free loopback port, knowing when it is
//! ready (its own log line, then `/health`), and stopping it on drop. It does
//! not own: building it. When it is not built, [`RealServer::start`] fails the
//! test under CI (`CI` set) and otherwise returns `None` after a note, so a
//! developer without the build still gets the rest of the suite.

use super::http::Client;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The model's name in the server's `/v1/models` (its `--alias` in
/// `scripts/real-server.d/server-args`).
pub const MODEL: &str = "smollm2";

/// Loading a 135M model takes about a second; a busy CI machine gets more.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub struct RealServer {
    child: Child,
    port: u16,
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

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// `N` different ports nothing listens on right now (all held while chosen,
/// so they differ).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    std::array::from_fn(|i| held[i].local_addr().expect("local address").port())
}

/// The directory holding the built server and model, or `None` after a
/// note when they are not built (a failure under CI; see the module comment).
pub fn built(test: &str) -> Option<PathBuf> {
    let dir = server_dir();
    if dir.join("bin").join("llama-server").is_file() && dir.join("model.gguf").is_file() {
        return Some(dir);
    }
    let why = format!(
        "the real server is not built in {} (run scripts/real-server)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!("{test}: skipped: {why}");
    None
}

impl RealServer {
    /// Starts the server, or explains why not (see the module comment).
    pub fn start(test: &str) -> Option<RealServer> {
        let dir = built(test)?;
        let bin = dir.join("bin").join("llama-server");
        let model = dir.join("model.gguf");
        let port = free_port();
        let mut child = Command::new(&bin)
            .args(["-m"])
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(server_args())
            // `-n`: this tiny model can ramble to the end of its context; a
            // cap keeps every answer quick on a busy machine.
            .args(["-t", "2", "-n", "64"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        // The server says when it listens with its model loaded; reading its
        // log on a thread turns that line into an event to wait for.
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut log = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let ready = line.contains("listening on http");
                log.push(line);
                if ready {
                    let _ = tx.send(Ok(()));
                    // Keep draining so the server never blocks on a full pipe.
                    log.clear();
                }
            }
            let _ = tx.send(Err(log.join("\n")));
        });
        let server = RealServer { child, port };
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(Ok(())) => {}
            Ok(Err(log)) => panic!("llama-server exited before it was ready:\n{log}"),
            Err(_) => panic!("llama-server was not ready within {READY_TIMEOUT:?}"),
        }
        let health = Client::new(server.addr()).get("/health");
        assert_eq!(health.status, 200, "llama-server /health: {}", health.body);
        Some(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
