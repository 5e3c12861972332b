//! A real HAProxy (Debian's `haproxy` package) in front of `buddy serve`
//! for one test: the caller writes the whole configuration, listening on a
//! port from [`free_port`]; [`start`] checks it (`haproxy -c`), runs it in
//! the foreground (`haproxy -db`) and returns once that port accepts
//! connections. Killed on drop. Without the package a test is skipped with
//! a note, and fails under CI (`.ci/run` installs it).

use super::TempDir;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const HAPROXY: &str = "/usr/sbin/haproxy";

pub struct Haproxy {
    child: Child,
    /// The port of the configuration's first `bind` line, on 127.0.0.1.
    pub port: u16,
    _dir: TempDir,
}

impl Haproxy {
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub use super::free_port;

/// Whether HAProxy is installed; `false` after a note (a failure under CI).
pub fn available(test: &str) -> bool {
    if std::path::Path::new(HAPROXY).is_file() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: {HAPROXY} is missing (apt-get install haproxy; .ci/run installs it)"
    );
    eprintln!("skipping {test}: HAProxy is not installed (apt-get install haproxy)");
    false
}

/// The global and default sections a test's configuration can start with:
/// HTTP mode, short timeouts, no daemon, logs to stderr.
pub const DEFAULTS: &str = "global\n    log stderr format raw local0 info\n\ndefaults\n    mode http\n    log global\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\n";

/// HAProxy with `config`, once its first `bind` port accepts connections.
pub fn start(config: &str) -> Haproxy {
    let port = first_bind_port(config)
        .unwrap_or_else(|| panic!("the configuration has no `bind ADDR:PORT` line:\n{config}"));
    let dir = TempDir::new("haproxy");
    let path: PathBuf = dir.path().join("haproxy.cfg");
    std::fs::write(&path, config).expect("write haproxy.cfg");
    let check = Command::new(HAPROXY)
        .arg("-c")
        .arg("-f")
        .arg(&path)
        .output()
        .expect("run haproxy -c");
    assert!(
        check.status.success(),
        "haproxy -c refused the configuration:\n{}{}\n{config}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let child = Command::new(HAPROXY)
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start haproxy");
    let proxy = Haproxy {
        child,
        port,
        _dir: dir,
    };
    let addr = proxy.addr();
    super::wait::wait_until(
        format!("HAProxy listening on {addr}"),
        Duration::from_secs(10),
        || TcpStream::connect(addr).ok(),
    );
    proxy
}

/// The port of the first `bind HOST:PORT` line.
fn first_bind_port(config: &str) -> Option<u16> {
    config.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("bind ")?;
        let addr = rest.split_whitespace().next()?;
        addr.rsplit_once(':')?.1.parse().ok()
    })
}
