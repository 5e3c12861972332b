//! Newline-delimited JSON-RPC over a pair of pipes, as an rmcp transport:
//! a stdio server's pipes for the client (`mcp`), buddy's own stdin and
//! stdout for `buddy mcp-server`. Each line is bounded (`max_line` bytes)
//! and read into a bounded `Value` (`bound.rs`) before rmcp's typed
//! decoding; a line that cannot be read is answered with a JSON-RPC error
//! naming its `id` when it has one (a request), so the other side never
//! waits for an answer that cannot come. Does not own what any method
//! means, nor the process behind the pipes.

use super::bound::{self, Unread};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use serde_json::{json, Value};
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// How much of a line too long to read is kept, to find its `id`.
const HEAD_BYTES: usize = 64 * 1024;
/// Messages taken between two yields to the runtime: a flood of
/// notifications, each handled by a task rmcp spawns, cannot pile up
/// thousands of tasks before any of them runs.
const YIELD_EVERY: u32 = 64;

/// One side of a connection: reads `R`, writes `W`.
pub struct Lines<Role, R, W> {
    read: BufReader<R>,
    /// The line read so far (kept across a cancelled `receive`).
    line: Vec<u8>,
    /// Reading past the rest of a line that was too long.
    discarding: bool,
    /// The start of the line that was too long.
    head: Vec<u8>,
    max_line: usize,
    /// A result's `content` keeps at most this many parts.
    max_parts: usize,
    taken: u32,
    write: Arc<Mutex<W>>,
    role: PhantomData<fn() -> Role>,
}

impl<Role, R: AsyncRead, W> Lines<Role, R, W> {
    pub fn new(read: R, write: W, max_line: usize, max_parts: usize) -> Self {
        Lines {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            head: Vec::new(),
            max_line,
            max_parts,
            taken: 0,
            write: Arc::new(Mutex::new(write)),
            role: PhantomData,
        }
    }
}

/// What one read ended with.
enum Read {
    Line,
    /// A line over `max_line`, dropped; its start is in `head`.
    TooLong,
    End,
}

impl<Role, R: AsyncRead + Unpin, W> Lines<Role, R, W> {
    /// Reads one line into `self.line` without letting it pass `max_line`.
    /// Cancel-safe: what was read stays in `self` for the next call.
    async fn read_line(&mut self) -> io::Result<Read> {
        loop {
            let buf = self.read.fill_buf().await?;
            if buf.is_empty() {
                return Ok(Read::End);
            }
            let newline = memchr::memchr(b'\n', buf);
            let take = newline.map_or(buf.len(), |i| i + 1);
            let chunk = &buf[..newline.unwrap_or(buf.len())];
            if self.discarding {
                let room = HEAD_BYTES.saturating_sub(self.head.len());
                self.head.extend_from_slice(&chunk[..chunk.len().min(room)]);
            } else if self.line.len() + chunk.len() > self.max_line {
                self.discarding = true;
                let mut head = std::mem::take(&mut self.line);
                head.truncate(HEAD_BYTES);
                let room = HEAD_BYTES.saturating_sub(head.len());
                head.extend_from_slice(&chunk[..chunk.len().min(room)]);
                self.head = head;
            } else {
                self.line.extend_from_slice(chunk);
            }
            self.read.consume(take);
            if newline.is_some() {
                if self.discarding {
                    self.discarding = false;
                    return Ok(Read::TooLong);
                }
                return Ok(Read::Line);
            }
        }
    }
}

/// A JSON-RPC error object as one line.
fn error_line(id: Option<Value>, code: i64, message: &str) -> Vec<u8> {
    let mut out = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    })
    .to_string()
    .into_bytes();
    out.push(b'\n');
    out
}

/// JSON-RPC's "invalid request" and "internal error" codes.
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;

impl<Role, R, W> Lines<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A message that cannot be taken: a request is answered with an error
    /// (the peer waits for it otherwise); an answer to one of ours becomes
    /// that error, so our own request ends; a notification is dropped.
    /// (Takes the writer, not `self`: `receive`'s future must be `Send`.)
    async fn refuse(
        write: Arc<Mutex<W>>,
        head: bound::Head,
        why: &str,
    ) -> io::Result<Option<Value>> {
        match head.id {
            Some(id) if head.has_method => {
                let mut w = write.lock().await;
                w.write_all(&error_line(Some(id), INVALID_REQUEST, why))
                    .await?;
                w.flush().await?;
                Ok(None)
            }
            Some(id) => Ok(Some(json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": INTERNAL_ERROR, "message": why},
            }))),
            None => Ok(None),
        }
    }

    /// The next message as a bounded `Value`, or `None` at the end.
    async fn next_value(&mut self) -> io::Result<Option<Value>> {
        loop {
            match self.read_line().await? {
                Read::End => return Ok(None),
                Read::TooLong => {
                    let head = bound::head(&std::mem::take(&mut self.head));
                    let why = format!("message longer than {} bytes", self.max_line);
                    if let Some(v) = Self::refuse(Arc::clone(&self.write), head, &why).await? {
                        return Ok(Some(v));
                    }
                }
                Read::Line => {
                    let line = std::mem::take(&mut self.line);
                    let text = line.strip_suffix(b"\r").unwrap_or(&line);
                    if text.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match bound::read(text, self.max_parts) {
                        Ok(v) => return Ok(Some(v)),
                        // Not JSON: nothing to answer (an answer could
                        // start an echo of errors), as rmcp does.
                        Err(Unread::Syntax(_)) => {}
                        Err(Unread::TooMany) => {
                            let why =
                                format!("message holding more than {} values", bound::MAX_VALUES);
                            let head = bound::head(text);
                            let write = Arc::clone(&self.write);
                            if let Some(v) = Self::refuse(write, head, &why).await? {
                                return Ok(Some(v));
                            }
                        }
                    }
                }
            }
        }
    }
}

impl<Role, R, W> rmcp::transport::Transport<Role> for Lines<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<Role>,
    ) -> impl std::future::Future<Output = Result<(), io::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        let line = serde_json::to_vec(&item).map(|mut l| {
            l.push(b'\n');
            l
        });
        async move {
            let line = line.map_err(io::Error::other)?;
            let mut w = write.lock().await;
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            self.taken = self.taken.wrapping_add(1);
            if self.taken.is_multiple_of(YIELD_EVERY) {
                tokio::task::yield_now().await;
            }
            let value = match self.next_value().await {
                Ok(Some(v)) => v,
                Ok(None) | Err(_) => return None,
            };
            let head = bound::Head {
                id: value.get("id").cloned(),
                has_method: value.get("method").is_some(),
            };
            match serde_json::from_value::<RxJsonRpcMessage<Role>>(value) {
                Ok(m) => return Some(m),
                // JSON, but no message rmcp knows: a request gets an error.
                Err(e) => {
                    let why = format!(
                        "invalid message: {}",
                        crate::text::one_line(&e.to_string(), 200)
                    );
                    match Self::refuse(Arc::clone(&self.write), head, &why).await {
                        Ok(Some(v)) => {
                            if let Ok(m) = serde_json::from_value(v) {
                                return Some(m);
                            }
                        }
                        Ok(None) => {}
                        Err(_) => return None,
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.write.lock().await.shutdown().await
    }
}
