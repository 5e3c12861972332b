//! HAProxy from the system's packages in front of several `buddy serve`
//! instances, on loopback, stopped on drop. Missing, it skips the test with
//! a note, and fails it under CI (`.ci/run` installs `haproxy`).

use super::postgres::{free_port, missing};
use super::wait::wait_for;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// HAProxy in front of `servers`, round robin, on a free loopback port.
pub struct Balancer {
    child: Child,
    pub addr: SocketAddr,
    _dir: super::TempDir,
}

impl Balancer {
    /// `None` when HAProxy is not installed (outside CI).
    pub fn start(test: &str, servers: &[SocketAddr]) -> Option<Balancer> {
        let Some(haproxy) = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
        else {
            return missing(test, "HAProxy (apt-get install haproxy; .ci/run does)");
        };
        let dir = super::TempDir::new("haproxy");
        let port = free_port();
        // buddy serve checks the Host header: each server is named by its
        // own address and gets that name as Host. Streams stay open long.
        let mut cfg = format!(
            "global\n  maxconn 256\n\
             defaults\n  mode http\n  timeout connect 5s\n  timeout client 10m\n  timeout server 10m\n  timeout tunnel 10m\n\
             frontend front\n  bind 127.0.0.1:{port}\n  default_backend buddies\n\
             backend buddies\n  balance roundrobin\n  http-send-name-header Host\n  option redispatch\n  retries 3\n"
        );
        for s in servers {
            cfg.push_str(&format!(
                "  server {s} {s} check inter 500ms fall 1 rise 1\n"
            ));
        }
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        let check = Command::new(&haproxy)
            .arg("-c")
            .arg("-f")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "haproxy -c: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(&haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        wait_for("haproxy to listen", Duration::from_secs(10), || {
            std::net::TcpStream::connect(addr).is_ok()
        });
        Some(Balancer {
            child,
            addr,
            _dir: dir,
        })
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
