//! `buddy mcp-server --listen` as a child process for the tests that call
//! it over HTTP (`mcp_server_http.rs`, the conformance suite's server
//! scenarios in `mcp_conformance.rs`).

use super::BuddyCmd;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Stdio};

/// A running `buddy mcp-server --listen`, killed when dropped.
pub struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`, as it printed.
    pub url: String,
    stderr: std::path::PathBuf,
}

impl HttpServer {
    /// Starts it on a free loopback port with `extra` arguments; waits for
    /// the URL it prints once it listens.
    pub fn start(cmd: &BuddyCmd, extra: &[&str]) -> HttpServer {
        let stderr = cmd.work_dir().join("..").join("http-server-stderr.txt");
        let log = std::fs::File::create(&stderr).expect("stderr file");
        let mut args: Vec<std::ffi::OsString> =
            vec!["mcp-server".into(), "--listen".into(), "127.0.0.1:0".into()];
        args.extend(extra.iter().map(Into::into));
        let mut child = cmd
            .command_with(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start buddy mcp-server --listen");
        let mut line = String::new();
        // The URL is the first line; a server that failed closes stdout.
        let stdout = child.stdout.take().expect("stdout");
        let _ = BufReader::new(stdout).read_line(&mut line);
        let url = line.trim().to_string();
        let server = HttpServer { child, url, stderr };
        assert!(
            server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/mcp"),
            "no URL printed ({:?}); {}",
            server.url,
            server.log()
        );
        server
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .parse()
            .expect("an address")
    }

    pub fn log(&self) -> String {
        format!(
            "server stderr:\n{}",
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        )
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
