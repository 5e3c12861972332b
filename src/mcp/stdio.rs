//! A stdio MCP server's process: started with the environment commands get
//! (buddy's credentials removed, `host::scrub`) plus its own `env`, its
//! stderr kept as a short tail for error messages (never shown raw), and its
//! stdout read through `LineCap`, which ends the connection when one message
//! passes `MAX_MESSAGE_BYTES` instead of buffering it. The process is killed
//! when its `Child` is dropped.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The most one message from a server may hold. A result beyond it is cut to
/// the tool's cap anyway; this bounds what is buffered before that.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// How much of a server's stderr is kept for error messages.
const STDERR_TAIL: usize = 2000;

/// A server process and its pipes.
pub struct Process {
    pub child: Child,
    pub stdout: LineCap<ChildStdout>,
    pub stdin: ChildStdin,
    /// The last lines it wrote to stderr.
    pub stderr: Arc<Mutex<String>>,
}

pub fn spawn(spec: &crate::config::McpServer, cwd: &std::path::Path) -> io::Result<Process> {
    let program = spec.command.as_deref().unwrap_or_default();
    let mut cmd = Command::new(program);
    cmd.args(&spec.args);
    crate::host::scrub(&mut cmd);
    cmd.envs(&spec.env);
    cmd.current_dir(match &spec.cwd {
        Some(dir) => cwd.join(dir),
        None => cwd.to_path_buf(),
    });
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // Its own process group: a Ctrl-C at the terminal goes to buddy, which
    // decides, not straight to every server.
    cmd.process_group(0);
    let mut child = cmd.spawn()?;
    let (Some(stdout), Some(stdin), Some(mut err)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(io::Error::other("the server's pipes could not be opened"));
    };
    let stderr = Arc::new(Mutex::new(String::new()));
    let tail = Arc::clone(&stderr);
    // Ends at EOF, when the process exits.
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
            t.push_str(&String::from_utf8_lossy(&buf[..n]));
            if t.len() > STDERR_TAIL * 2 {
                let mut cut = t.len() - STDERR_TAIL;
                while !t.is_char_boundary(cut) {
                    cut += 1;
                }
                t.drain(..cut);
            }
        }
    });
    Ok(Process {
        child,
        stdout: LineCap::new(stdout, MAX_MESSAGE_BYTES, Some(Arc::clone(&stderr))),
        stdin,
        stderr,
    })
}

/// The last line of a server's stderr, made safe for one line of output.
pub fn last_line(stderr: &Mutex<String>) -> Option<String> {
    let t = stderr.lock().unwrap_or_else(|p| p.into_inner());
    t.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| crate::text::one_line(l.trim(), 300))
}

/// A reader that fails once a line (one JSON-RPC message) passes `max`
/// bytes, so an endless or huge message costs a fixed buffer.
pub struct LineCap<R> {
    inner: R,
    since_newline: usize,
    max: usize,
    /// Where the reason is noted when the cap is hit (the stderr tail, so
    /// the error a call reports says why the server was cut off).
    note: Option<Arc<Mutex<String>>>,
}

impl<R> LineCap<R> {
    pub fn new(inner: R, max: usize, note: Option<Arc<Mutex<String>>>) -> Self {
        LineCap {
            inner,
            since_newline: 0,
            max,
            note,
        }
    }
}

/// The error `LineCap` reads end with.
pub fn too_long(max: usize) -> String {
    format!("it sent a message over {} MiB", max / (1024 * 1024))
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                match memchr::memrchr(b'\n', new) {
                    Some(pos) => this.since_newline = new.len() - pos - 1,
                    None => this.since_newline += new.len(),
                }
                if this.since_newline > this.max {
                    if let Some(note) = &this.note {
                        let mut n = note.lock().unwrap_or_else(|p| p.into_inner());
                        n.push_str(&format!("\n[buddy: {}]\n", too_long(this.max)));
                    }
                    // A read that fails has read nothing (tokio's readers
                    // assert it): the bytes of this read are given back.
                    buf.set_filled(before);
                    return Poll::Ready(Err(io::Error::other(too_long(this.max))));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_past_the_cap_ends_the_read_and_shorter_ones_pass() {
        let data = b"short\nalso short\n".to_vec();
        let mut ok = LineCap::new(&data[..], 12, None);
        let mut out = Vec::new();
        ok.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data);
        let long = [b'x'; 100];
        let mut cut = LineCap::new(&long[..], 12, None);
        let err = cut.read_to_end(&mut Vec::new()).await.unwrap_err();
        assert!(err.to_string().contains("message over"));
    }
}
