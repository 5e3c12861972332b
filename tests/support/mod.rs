//! Helpers shared by the end-to-end tests: the scripted fake provider, a temporary
//! directory, and [`BuddyCmd`], which runs the built `buddy` binary in an isolated
//! home and working directory.
//!
//! Each test binary uses a subset of this module, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod acp;
pub mod balancer;
pub mod calls;
pub mod container;
pub mod fake_issuer;
pub mod fake_provider;
pub mod haproxy;
pub mod http;
pub mod mcp;
pub mod mcp_http;
mod ports;
pub mod postgres;
pub mod prometheus;
pub mod real_server;
pub mod serve;
pub mod sshd;
pub mod tmux;
pub mod wait;

pub use ports::{free_port, free_ports};

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fake_provider::FakeProvider;

/// Longest a [`BuddyCmd::run`] may take before the child is killed and the test fails.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The `buddy` binary Cargo built for these tests.
pub fn buddy_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_buddy"))
}

/// A minimal config whose only profile, `fake`, points at `provider` with model
/// `fake-model` and key `sk-fake` (so the Authorization header can be checked).
pub fn fake_config(provider: &FakeProvider) -> String {
    format!(
        "[agent]\nmodel = \"fake\"\n\n\
         [models.fake]\napi_base_url = \"{}\"\nmodel = \"fake-model\"\napi_key = \"sk-fake\"\n",
        provider.base_url()
    )
}

/// A fresh directory under the system temp dir, removed (with its contents) on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/buddy-test-<label>-<pid>-<n>-<nanos>`.
    pub fn new(label: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), label)
    }

    /// Like [`TempDir::new`], under `parent` (for tests that need a directory
    /// outside the temp dirs, such as the sandbox's).
    pub fn new_in(parent: &Path, label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let name = format!("buddy-test-{label}-{}-{n}-{nanos}", std::process::id());
            let path = parent.join(name);
            match std::fs::create_dir_all(parent).and_then(|()| std::fs::create_dir(&path)) {
                Ok(()) => return TempDir { path },
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("cannot create temp dir {}: {e}", path.display()),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path().join(rel)`.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover temp dir must not fail a test.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What a finished run of `buddy` produced.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Panics, showing stdout and stderr, unless the exit code is `code`.
    pub fn assert_code(&self, code: i32) -> &Output {
        assert_eq!(
            self.status.code(),
            Some(code),
            "buddy exited with {} instead of code {code}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics, showing stdout and stderr, unless buddy exited with code 0.
    pub fn assert_success(&self) -> &Output {
        self.assert_code(0)
    }
}

/// Network settings of the developer's shell that must not reach buddy in tests
/// (matched without regard to case: `https_proxy` is as common as `HTTPS_PROXY`).
const ISOLATED_ENV: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Runs `buddy` isolated from the user's environment:
///
/// - `HOME`, `XDG_CONFIG_HOME`, `XDG_DATA_HOME`, `XDG_STATE_HOME` and
///   `XDG_CACHE_HOME` point into a fresh temp dir, so no real config leaks in and
///   nothing is written to the real home;
/// - the working directory is a fresh `work/` dir in it, holding `buddy.toml` when
///   [`BuddyCmd::config`] was given (trusted with `buddy trust`, as the user's
///   own file would be) or [`BuddyCmd::project_config`] (left untrusted);
/// - every `BUDDY_*`, `AGENT_*` and `*_API_KEY` variable is removed; `NO_COLOR=1`;
/// - the proxy variables (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`, in
///   either case) and `SSL_CERT_FILE`/`SSL_CERT_DIR` are removed: a developer's
///   proxy would otherwise carry the fake servers' loopback traffic, and their own
///   CA bundle would change what the TLS tests trust;
/// - stdin is the given bytes, or empty.
///
/// The temp dir lives as long as the `BuddyCmd`, so files can be checked after a run.
pub struct BuddyCmd {
    root: TempDir,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    config: Option<String>,
    /// Whether `config` is trusted (`buddy trust`) once written.
    trust_config: bool,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
}

impl Default for BuddyCmd {
    fn default() -> Self {
        BuddyCmd::new()
    }
}

impl Drop for BuddyCmd {
    fn drop(&mut self) {
        // A managed tmux session outlives buddy by design; the test's must not.
        let used = std::fs::read_dir(self.tmux_dir()).is_ok_and(|mut d| d.next().is_some());
        if used {
            let _ = self.tmux(&["kill-server"]);
        }
    }
}

impl BuddyCmd {
    pub fn new() -> BuddyCmd {
        BuddyCmd::in_root(TempDir::new("buddy"))
    }

    /// Like [`BuddyCmd::new`], with home and working directory under `parent`.
    pub fn new_in(parent: &Path) -> BuddyCmd {
        BuddyCmd::in_root(TempDir::new_in(parent, "buddy"))
    }

    fn in_root(root: TempDir) -> BuddyCmd {
        for dir in [
            "home",
            "xdg-config",
            "xdg-data",
            "xdg-state",
            "xdg-cache",
            "work",
            "tmux",
        ] {
            let path = root.join(dir);
            std::fs::create_dir(&path)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        }
        BuddyCmd {
            root,
            args: Vec::new(),
            envs: Vec::new(),
            config: None,
            trust_config: true,
            stdin: None,
            timeout: DEFAULT_RUN_TIMEOUT,
        }
    }

    /// Adds one command-line argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> BuddyCmd {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds command-line arguments.
    pub fn args<I, S>(mut self, args: I) -> BuddyCmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable for the child (after the isolation above, so it
    /// may override it).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> BuddyCmd {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Writes `toml` to `buddy.toml` in the working dir before the run.
    pub fn config(mut self, toml: impl Into<String>) -> BuddyCmd {
        self.config = Some(toml.into());
        self
    }

    /// Writes `toml` to `buddy.toml` in the working dir before the run, as a
    /// file that came with the project: not trusted, so buddy holds back the
    /// settings such a file may not use (see `buddy trust`).
    pub fn project_config(mut self, toml: impl Into<String>) -> BuddyCmd {
        self.config = Some(toml.into());
        self.trust_config = false;
        self
    }

    /// Uses [`fake_config`] for `provider`.
    pub fn config_for(self, provider: &FakeProvider) -> BuddyCmd {
        let toml = fake_config(provider);
        self.config(toml)
    }

    /// Feeds these bytes to stdin (then closes it).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> BuddyCmd {
        self.stdin = Some(bytes.into());
        self
    }

    /// Changes how long [`BuddyCmd::run`] waits before killing buddy.
    pub fn timeout(mut self, timeout: Duration) -> BuddyCmd {
        self.timeout = timeout;
        self
    }

    /// The working directory buddy runs in.
    pub fn work_dir(&self) -> PathBuf {
        self.root.join("work")
    }

    /// The fake `$HOME`.
    pub fn home_dir(&self) -> PathBuf {
        self.root.join("home")
    }

    /// `$TMUX_TMPDIR`: where buddy's tmux server (if it starts one) has its socket.
    pub fn tmux_dir(&self) -> PathBuf {
        self.root.join("tmux")
    }

    /// Runs `tmux ARGS` against buddy's private tmux server.
    pub fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(args)
            .env("TMUX_TMPDIR", self.tmux_dir())
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .output()
            .expect("run tmux")
    }

    /// The fake `$XDG_CONFIG_HOME`.
    pub fn config_home(&self) -> PathBuf {
        self.root.join("xdg-config")
    }

    /// The isolated command, not yet started (writes `buddy.toml` now). For tests
    /// that need to drive the child themselves; stdio is left to the caller.
    pub fn command(&self) -> Command {
        self.command_with(&self.args)
    }

    /// Like [`BuddyCmd::command`], with other arguments (same home, same dir).
    pub fn command_with(&self, args: &[OsString]) -> Command {
        if let Some(toml) = &self.config {
            let path = self.work_dir().join("buddy.toml");
            std::fs::write(&path, toml)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            if self.trust_config {
                // The test's config stands for the user's own: trusted the way
                // a user would, so its settings all apply.
                let out = self
                    .isolated(&["trust".into(), path.clone().into()])
                    .stdin(Stdio::null())
                    .output()
                    .expect("run buddy trust");
                // A broken config cannot be trusted; the test run reports it.
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success() || err.contains("config error"),
                    "buddy trust failed: {err}"
                );
            }
        }
        self.isolated(args)
    }

    /// The isolated command with `args`, writing nothing.
    fn isolated(&self, args: &[OsString]) -> Command {
        let mut cmd = Command::new(buddy_bin());
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if name.starts_with("BUDDY_")
                || name.starts_with("AGENT_")
                || name.ends_with("_API_KEY")
                || ISOLATED_ENV.contains(&name.to_ascii_uppercase().as_str())
            {
                cmd.env_remove(&key);
            }
        }
        cmd.env("HOME", self.home_dir())
            .env("XDG_CONFIG_HOME", self.config_home())
            .env("XDG_DATA_HOME", self.root.join("xdg-data"))
            .env("XDG_STATE_HOME", self.root.join("xdg-state"))
            .env("XDG_CACHE_HOME", self.root.join("xdg-cache"))
            .env("NO_COLOR", "1")
            // A tmux server of its own: never the developer's, never another test's.
            .env("TMUX_TMPDIR", self.tmux_dir())
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .current_dir(self.work_dir())
            .args(args);
        for (key, value) in &self.envs {
            cmd.env(key, value);
        }
        cmd
    }

    /// Runs `sh -c script` in buddy's working directory with buddy's
    /// isolated environment and the built `buddy` first on `PATH`, so a
    /// documented command line can be run exactly as written.
    pub fn shell(&self, script: &str) -> std::process::Output {
        let buddy = self.command_with(&[]);
        // coreutils' timeout bounds the whole line, buddy and all.
        let mut sh = Command::new("timeout");
        sh.arg(DEFAULT_RUN_TIMEOUT.as_secs().max(1).to_string())
            .arg("sh");
        for (key, value) in buddy.get_envs() {
            match value {
                Some(v) => sh.env(key, v),
                None => sh.env_remove(key),
            };
        }
        let bin_dir = buddy_bin()
            .parent()
            .expect("the binary has a directory")
            .to_path_buf();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![bin_dir];
        dirs.extend(std::env::split_paths(&path));
        sh.env("PATH", std::env::join_paths(dirs).expect("PATH"))
            .arg("-c")
            .arg(script)
            .current_dir(self.work_dir())
            .stdin(Stdio::null())
            .output()
            .expect("run sh")
    }

    /// Runs buddy to completion and captures its output. Panics if it cannot start
    /// or outlives the timeout (showing what it printed so far).
    pub fn run(&self) -> Output {
        self.run_with_args(&self.args)
    }

    /// Runs buddy again in the same home and working directory (so it sees the
    /// files earlier runs left) with other arguments and the same stdin.
    pub fn rerun<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        self.run_with_args(&args)
    }

    /// Runs buddy without a controlling terminal (a session of its own), as
    /// under cron or CI, whatever terminal the test runner has.
    pub fn run_detached(&self) -> Output {
        self.run_inner(&self.args, true)
    }

    /// [`BuddyCmd::rerun`] without a controlling terminal.
    pub fn rerun_detached<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        self.run_inner(&args, true)
    }

    fn run_with_args(&self, args: &[OsString]) -> Output {
        self.run_inner(args, false)
    }

    fn run_inner(&self, args: &[OsString], detached: bool) -> Output {
        let mut command = self.command_with(args);
        if detached {
            use std::os::unix::process::CommandExt;
            // SAFETY: setsid(2) is async-signal-safe and touches no memory.
            unsafe {
                command.pre_exec(|| {
                    if setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", buddy_bin().display()));
        // Separate threads so a full pipe never blocks the child.
        let writer = child.stdin.take().map(|mut pipe| {
            let bytes = self.stdin.clone().unwrap_or_default();
            std::thread::spawn(move || {
                // buddy may exit without reading all of stdin; that is its business.
                let _ = pipe.write_all(&bytes);
            })
        });
        let stdout = drain(child.stdout.take().expect("stdout is piped"));
        let stderr = drain(child.stderr.take().expect("stderr is piped"));

        // Looked at often: most runs end within milliseconds.
        let ended = wait::poll_every(Duration::from_millis(5), self.timeout, || {
            child.try_wait().transpose()
        });
        let status = match ended {
            Some(Ok(status)) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                let stdout = stdout.text();
                let stderr = stderr.text();
                panic!(
                        "buddy {:?} ran longer than {:?} and was killed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
                        args, self.timeout
                    );
            }
            Some(Err(e)) => panic!("cannot wait for buddy: {e}"),
        };
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        Output {
            status,
            stdout: stdout.text(),
            stderr: stderr.text(),
        }
    }
}

extern "C" {
    fn setsid() -> i32;
}

/// Collects a pipe's bytes on a thread of its own.
struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    finished: mpsc::Receiver<()>,
}

/// How long to wait for the pipes to close once buddy has exited. They stay open
/// when a command buddy started in the background still holds them.
const PIPE_GRACE: Duration = Duration::from_secs(5);

fn drain(mut pipe: impl Read + Send + 'static) -> Drain {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let (done, finished) = mpsc::channel();
    let sink = Arc::clone(&bytes);
    std::thread::spawn(move || {
        let mut buf = [0; 8192];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]),
            }
        }
        let _ = done.send(());
    });
    Drain { bytes, finished }
}

impl Drain {
    /// Everything read, once the pipe closed or [`PIPE_GRACE`] passed.
    fn text(self) -> String {
        let _ = self.finished.recv_timeout(PIPE_GRACE);
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
