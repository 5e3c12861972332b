//! `buddy serve` run by a test: the real binary on loopback (port 0), its
//! address read from the URL line it prints first, killed on drop.

use super::http::Client;
use super::BuddyCmd;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// `buddy serve EXTRA…` (with `--listen 127.0.0.1:0` unless `extra`
    /// names a `--listen`), once it listens.
    pub fn start(cmd: &BuddyCmd, extra: &[&str]) -> Server {
        Server::spawn(Server::command(cmd, extra))
    }

    /// As [`Server::start`], the server's descriptor limit (soft and hard)
    /// set to `nofile` before it starts, as `ulimit -n` would.
    pub fn start_with_nofile(cmd: &BuddyCmd, extra: &[&str], nofile: u64) -> Server {
        use std::os::unix::process::CommandExt;
        let mut command = Server::command(cmd, extra);
        // SAFETY: between fork and exec the child only makes one system
        // call (setrlimit), which allocates nothing and takes no lock.
        unsafe {
            command.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: nofile,
                    rlim_max: nofile,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Server::spawn(command)
    }

    fn command(cmd: &BuddyCmd, extra: &[&str]) -> std::process::Command {
        let mut args: Vec<std::ffi::OsString> = vec!["serve".into()];
        if !extra.contains(&"--listen") {
            args.extend(["--listen".into(), "127.0.0.1:0".into()]);
        }
        args.extend(extra.iter().map(Into::into));
        cmd.command_with(&args)
    }

    fn spawn(mut command: std::process::Command) -> Server {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start buddy serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the URL line");
        let addr = line
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap_or_else(|_| panic!("not a URL: {line:?}"));
        Server { child, addr }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn client(&self) -> Client {
        Client::new(self.addr)
    }

    /// `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// SIGTERM, then what it wrote on stderr.
    pub fn terminate_for_stderr(&mut self) -> String {
        self.terminate();
        let mut text = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut text);
        }
        text
    }

    /// SIGTERM, then the exit code.
    pub fn terminate(&mut self) -> i32 {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().expect("wait");
        status.code().unwrap_or(-1)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection to `addr` that has sent `bytes` and nothing more.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).expect("connect to buddy serve");
    tcp.write_all(bytes).expect("send");
    tcp
}

/// Everything the server sends on `tcp` until it closes the connection,
/// and how long that took; `None` if it is still open after `limit`.
pub fn until_closed(tcp: &mut TcpStream, limit: Duration) -> Option<(String, Duration)> {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.checked_sub(start.elapsed())?;
        tcp.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("read timeout");
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            // A reset is a close too.
            Err(_) => break,
        }
    }
    Some((String::from_utf8_lossy(&got).into_owned(), start.elapsed()))
}
