//! Plain-HTTP model exchanges driven by the task that reads them.
//!
//! reqwest runs each connection on a task of its own and hands a response
//! body to the reader one HTTP chunk per wake-up (hyper's body channel holds
//! one). A model stream is one small chunk per piece of text, so when pieces
//! come fast (a local model server, `buddy serve` relaying a hundred streams)
//! those hand-offs were most of the cost of relaying a piece, and a stream that
//! fell behind caught up a couple of chunks per scheduler round. Here the
//! connection is hyper's, but polled by the reader itself: one wake-up decodes
//! every chunk a socket read brought.
//!
//! Used only where reqwest adds nothing the exchange needs: `http://` URLs
//! with no proxy named in the environment (no TLS, no proxy). Idle
//! connections are kept for the next request, as reqwest's pool does.

use super::body::Ahead;
use http_body_util::Full;
use hyper::body::{Body, Bytes, Incoming};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;

type Conn = Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// Idle connections kept at most, per pool: more than a server's worth of
/// concurrent sessions rarely matters, and each holds a socket.
const MAX_IDLE: usize = 64;

/// Whether `url` is one for a direct exchange: plain HTTP, and no proxy in the
/// environment (reqwest honours those; with one set, reqwest does the work).
pub fn applies(url: &str) -> bool {
    let proxied = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    url.starts_with("http://") && !proxied
}

/// Idle keep-alive connections, for the clients of one runtime (a connection
/// belongs to the runtime that opened it).
#[derive(Clone, Default)]
pub struct Pool(Arc<Mutex<Vec<Idle>>>);

struct Idle {
    authority: String,
    sender: SendRequest<Full<Bytes>>,
    conn: Pin<Box<Conn>>,
}

impl Pool {
    fn take(&self, authority: &str) -> Option<Idle> {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = idle.iter().rposition(|i| i.authority == authority)?;
        Some(idle.swap_remove(at))
    }

    fn put(&self, conn: Idle) {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= MAX_IDLE {
            idle.remove(0);
        }
        idle.push(conn);
    }
}

/// Why no response came.
#[derive(Debug)]
pub enum Failure {
    /// The connection could not be made.
    Connect(String),
    /// Connecting took longer than allowed.
    ConnectTimeout,
    /// The request could not be built or sent, or the response not read.
    Exchange(String),
}

/// A response head, and its body still to read.
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: DirectBody,
}

/// Sends `request` (built by reqwest, so every header the protocol set is in
/// it) over a pooled connection to its host, or a new one.
pub async fn send(
    pool: &Pool,
    request: reqwest::Request,
    connect_timeout: Duration,
) -> Result<Response, Failure> {
    let url = request.url().clone();
    let host = url
        .host_str()
        .ok_or_else(|| Failure::Exchange("the URL has no host".into()))?
        .to_string();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| Failure::Exchange("the URL has no port".into()))?;
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    let mut req = to_hyper(request, &authority)?;
    while let Some(idle) = pool.take(&authority) {
        // A connection the server closed while it was idle gives the request
        // back unsent: the next one gets it.
        match exchange(idle, req).await {
            Outcome::Answered(r) => return Ok(r.into_response(pool.clone())),
            Outcome::Returned(back) => req = back,
            Outcome::Failed(e) => return Err(e),
        }
    }
    let idle = connect(&host, port, authority, connect_timeout).await?;
    match exchange(idle, req).await {
        Outcome::Answered(r) => Ok(r.into_response(pool.clone())),
        Outcome::Returned(_) => Err(Failure::Exchange(
            "the connection closed before the request was sent".into(),
        )),
        Outcome::Failed(e) => Err(e),
    }
}

fn to_hyper(
    request: reqwest::Request,
    authority: &str,
) -> Result<hyper::Request<Full<Bytes>>, Failure> {
    let url = request.url();
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let body = request
        .body()
        .and_then(|b| b.as_bytes())
        .map(Bytes::copy_from_slice)
        .unwrap_or_default();
    let mut builder = hyper::Request::builder()
        .method(request.method().clone())
        .uri(target);
    let Some(headers) = builder.headers_mut() else {
        return Err(Failure::Exchange("cannot build the request".into()));
    };
    headers.extend(request.headers().clone());
    let host = HeaderValue::from_str(authority)
        .map_err(|_| Failure::Exchange(format!("not a host name: {authority}")))?;
    headers.insert(hyper::header::HOST, host);
    headers
        .entry(hyper::header::USER_AGENT)
        .or_insert(HeaderValue::from_static(concat!(
            "buddy/",
            env!("CARGO_PKG_VERSION")
        )));
    headers.insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    builder
        .body(Full::new(body))
        .map_err(|e| Failure::Exchange(format!("cannot build the request: {e}")))
}

async fn connect(
    host: &str,
    port: u16,
    authority: String,
    timeout: Duration,
) -> Result<Idle, Failure> {
    // An IPv6 literal is bracketed in URLs, not in socket addresses.
    let name = host.trim_start_matches('[').trim_end_matches(']');
    let stream = match tokio::time::timeout(timeout, TcpStream::connect((name, port))).await {
        Err(_) => return Err(Failure::ConnectTimeout),
        Ok(Err(e)) => return Err(Failure::Connect(e.to_string())),
        Ok(Ok(s)) => s,
    };
    // Requests are one write each; small ones should not wait for an ACK.
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Failure::Connect(describe(&e)))?;
    Ok(Idle {
        authority,
        sender,
        conn: Box::pin(conn),
    })
}

enum Outcome {
    Answered(Answered),
    /// The connection could not take the request; here it is back.
    Returned(hyper::Request<Full<Bytes>>),
    Failed(Failure),
}

struct Answered {
    idle: Idle,
    conn_done: bool,
    response: hyper::Response<Incoming>,
}

impl Answered {
    fn into_response(self, pool: Pool) -> Response {
        let (parts, body) = self.response.into_parts();
        Response {
            status: parts.status,
            headers: parts.headers,
            body: DirectBody {
                conn: Some(self.idle),
                conn_done: self.conn_done,
                body,
                pool,
            },
        }
    }
}

/// Sends `req` on `idle`, driving its connection until the response head is in.
async fn exchange(mut idle: Idle, req: hyper::Request<Full<Bytes>>) -> Outcome {
    let mut conn_done = false;
    // The connection must be driven while the sender waits, or nothing moves.
    let ready = loop {
        tokio::select! {
            r = std::future::poll_fn(|cx| idle.sender.poll_ready(cx)) => break r,
            _ = idle.conn.as_mut(), if !conn_done => conn_done = true,
        }
    };
    if ready.is_err() {
        return Outcome::Returned(req);
    }
    let sending = idle.sender.try_send_request(req);
    tokio::pin!(sending);
    let result = loop {
        tokio::select! {
            r = &mut sending => break r,
            _ = idle.conn.as_mut(), if !conn_done => conn_done = true,
        }
    };
    match result {
        Ok(response) => Outcome::Answered(Answered {
            idle,
            conn_done,
            response,
        }),
        Err(mut e) => match e.take_message() {
            Some(req) => Outcome::Returned(req),
            None => Outcome::Failed(Failure::Exchange(describe(&e.into_error()))),
        },
    }
}

/// A response body; its connection goes back to the pool when the body has
/// been read to its end, and is closed if it is dropped before.
pub struct DirectBody {
    conn: Option<Idle>,
    conn_done: bool,
    body: Incoming,
    pool: Pool,
}

impl DirectBody {
    /// The next chunk, or the end, waiting for it.
    pub async fn next(&mut self) -> Ahead<Bytes, String> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// The next chunk if the data is already here (or the end, or a failure);
    /// `None` when it has to wait.
    pub fn ready(&mut self) -> Option<Ahead<Bytes, String>> {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match self.poll_chunk(&mut cx) {
            Poll::Ready(item) => Some(item),
            Poll::Pending => None,
        }
    }

    /// Takes a chunk from the body; when there is none, drives the connection
    /// (which decodes the next from what was read, or reads the socket) and
    /// looks again. Both register this task's waker, so whichever can move
    /// next wakes it.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Ahead<Bytes, String>> {
        loop {
            if let Poll::Ready(item) = self.poll_body(cx) {
                match item {
                    Some(item) => return Poll::Ready(item),
                    None => continue,
                }
            }
            let mut closed = false;
            if let (Some(idle), false) = (self.conn.as_mut(), self.conn_done) {
                // Closed or failed: the body reports how it ended.
                closed = idle.conn.as_mut().poll(cx).is_ready();
                self.conn_done = closed;
            }
            // Driving the connection may have handed the body its next chunk.
            match self.poll_body(cx) {
                Poll::Ready(Some(item)) => return Poll::Ready(item),
                Poll::Ready(None) => continue,
                Poll::Pending if closed => continue,
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// One look at the body: a chunk, its end or failure; `Ready(None)` for a
    /// frame a model stream has no use for (trailers).
    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Option<Ahead<Bytes, String>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(frame.into_data().ok().map(Ahead::Chunk)),
            Poll::Ready(Some(Err(e))) => {
                self.conn = None;
                Poll::Ready(Some(Ahead::Failed(describe(&e))))
            }
            Poll::Ready(None) => {
                self.release();
                Poll::Ready(Some(Ahead::End))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The body is read to its end: a connection still open and ready for
    /// another request goes back to the pool.
    fn release(&mut self) {
        let Some(mut idle) = self.conn.take() else {
            return;
        };
        if self.conn_done || idle.sender.is_closed() {
            return;
        }
        // Lets the connection finish the exchange (hyper marks it idle on
        // its next poll); one that ends here is not kept.
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        if idle.conn.as_mut().poll(&mut cx).is_ready() {
            return;
        }
        self.pool.put(idle);
    }
}

/// hyper's errors name the useful part ("connection reset") a source or two
/// deep: the chain, joined into one line.
fn describe(e: &hyper::Error) -> String {
    let mut text = e.to_string();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        source = s.source();
    }
    text
}
