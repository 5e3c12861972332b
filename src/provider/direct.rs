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
/// What is read, at most, of a body the reader no longer needs (the end of a
/// stream after its last event), so that its connection can be used again.
const DRAIN_BYTES: usize = 64 * 1024;
const DRAIN_FOR: Duration = Duration::from_secs(2);
/// An idle connection older than this is closed rather than used: servers
/// drop idle ones after a while, often without a word (reqwest keeps 90 s).
const IDLE_FOR: Duration = Duration::from_secs(90);

/// Whether `url` is one for a direct exchange: plain HTTP, and no proxy in the
/// environment (reqwest honours those; with one set, reqwest does the work).
pub fn applies(url: &str) -> bool {
    applies_with(url, crate::process::var_os)
}

fn applies_with(url: &str, env: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    let proxied = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|name| env(name).is_some_and(|v| !v.is_empty()));
    url.starts_with("http://") && !proxied
}

/// Idle keep-alive connections, for the clients of one runtime (a connection
/// belongs to the runtime that opened it).
#[derive(Clone, Default)]
pub struct Pool(Arc<Mutex<Vec<Kept>>>);

struct Idle {
    authority: String,
    sender: SendRequest<Full<Bytes>>,
    conn: Pin<Box<Conn>>,
}

/// A connection waiting in the pool, and since when.
struct Kept {
    idle: Idle,
    since: std::time::Instant,
}

impl Idle {
    /// Whether the server has closed this connection (as far as has arrived).
    fn closed(&mut self) -> bool {
        if self.sender.is_closed() {
            return true;
        }
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        self.conn.as_mut().poll(&mut cx).is_ready()
    }
}

impl Pool {
    fn take(&self, authority: &str) -> Option<Idle> {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.retain(|k| k.since.elapsed() < IDLE_FOR);
        let at = kept.iter().rposition(|k| k.idle.authority == authority)?;
        Some(kept.swap_remove(at).idle)
    }

    fn put(&self, idle: Idle) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= MAX_IDLE {
            kept.remove(0);
        }
        kept.push(Kept {
            idle,
            since: std::time::Instant::now(),
        });
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
/// it) with `body` (the one it carries) over a pooled connection to its host,
/// or a new one.
pub async fn send(
    pool: &Pool,
    request: reqwest::Request,
    body: Bytes,
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
    let mut req = to_hyper(&request, body.clone(), &authority)?;
    while let Some(mut idle) = pool.take(&authority) {
        // A server closes idle connections when it likes; most such closes
        // are seen here, and one that comes while the request is on its way
        // gives it back unsent: the next connection gets it.
        if idle.closed() {
            continue;
        }
        match exchange(idle, req).await {
            Outcome::Answered(r) => return Ok(r.into_response(pool.clone())),
            Outcome::Returned(back) => req = back,
            // A reused connection the server closed as the request arrived
            // ends it unanswered; that is the connection's age, not a server
            // that cannot be reached, so a fresh connection gets it without a
            // word (a fresh one failing is reported).
            Outcome::Failed(Failure::Exchange(_)) => {
                req = to_hyper(&request, body.clone(), &authority)?;
            }
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
    request: &reqwest::Request,
    body: Bytes,
    authority: &str,
) -> Result<hyper::Request<Full<Bytes>>, Failure> {
    let url = request.url();
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
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
async fn exchange(idle: Idle, req: hyper::Request<Full<Bytes>>) -> Outcome {
    let Idle {
        authority,
        mut sender,
        conn,
    } = idle;
    let mut conn = Some(conn);
    // The connection must be driven while the sender waits, or nothing moves.
    let drive = |conn: &mut Option<Pin<Box<Conn>>>, cx: &mut Context<'_>| match conn {
        Some(c) => c.as_mut().poll(cx).map(|_| ()),
        None => Poll::Pending,
    };
    let ready = tokio::select! {
        r = std::future::poll_fn(|cx| sender.poll_ready(cx)) => r.is_ok(),
        // Ended (the server closed it): it takes no request.
        () = std::future::poll_fn(|cx| drive(&mut conn, cx)) => false,
    };
    if !ready {
        return Outcome::Returned(req);
    }
    let sending = sender.try_send_request(req);
    tokio::pin!(sending);
    let mut conn_done = false;
    let result = tokio::select! {
        r = &mut sending => r,
        () = std::future::poll_fn(|cx| drive(&mut conn, cx)) => {
            conn_done = true;
            // A connection that ended may leave the request queued and never
            // answered; dropping it gives the request back (or says how the
            // exchange failed).
            match futures_util::FutureExt::now_or_never(sending.as_mut()) {
                Some(r) => r,
                None => {
                    conn = None;
                    sending.as_mut().await
                }
            }
        }
    };
    match (result, conn) {
        (Ok(response), Some(conn)) => Outcome::Answered(Answered {
            idle: Idle {
                authority,
                sender,
                conn,
            },
            conn_done,
            response,
        }),
        (Ok(_), None) => Outcome::Failed(Failure::Exchange(
            "the connection closed with the response".into(),
        )),
        (Err(mut e), _) => match e.take_message() {
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

    /// Reads what is left of the body on a task of its own, a little and not
    /// for long, and keeps the connection if the body ends as it should.
    /// Without this, a stream whose last event was read before its final
    /// chunk would close a good connection.
    pub fn finish_in_background(mut self) {
        if self.conn.is_none() {
            return;
        }
        // At once when the end is already here (the usual case).
        if let Some(Ahead::End) = self.ready() {
            return;
        }
        tokio::spawn(async move {
            let drain = async {
                let mut read = 0;
                while let Ahead::Chunk(c) = self.next().await {
                    read += c.len();
                    if read > DRAIN_BYTES {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_FOR, drain).await;
        });
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
        // Polling lets the connection finish the exchange (hyper marks it idle
        // on its next poll); one that ends there is not kept.
        if self.conn_done || idle.closed() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// What the test server does after answering a request on a connection.
    #[derive(Clone)]
    enum Then {
        KeepOpen,
        /// Close the connection, idle after its answer, when notified.
        CloseWhenTold(Arc<tokio::sync::Notify>),
        /// Hold the body's last (empty) chunk back until notified.
        EndWhenTold(Arc<tokio::sync::Notify>),
        /// Read the next request on the connection, then close it unanswered.
        DropNextRequest,
    }

    /// A loopback HTTP/1.1 server: each request is answered with `chunks` as
    /// a chunked body written in one go; counts the connections it accepted.
    struct Server {
        url: String,
        accepted: Arc<AtomicUsize>,
        /// Gets a message each time a connection is closed by the server.
        closed: tokio::sync::mpsc::UnboundedReceiver<()>,
    }

    async fn server(chunks: Vec<String>, then: Then) -> Server {
        let then = Arc::new(then);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/x", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let (closed_tx, closed) = tokio::sync::mpsc::unbounded_channel();
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                let chunks = chunks.clone();
                let closed_tx = closed_tx.clone();
                let then = then.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One whole request: its head, then its body.
                        let head_end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            let mut b = [0u8; 4096];
                            let n = sock.read(&mut b).await.unwrap_or(0);
                            if n == 0 {
                                return;
                            }
                            buf.extend_from_slice(&b[..n]);
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        while buf.len() < head_end + len {
                            let mut b = [0u8; 4096];
                            let n = sock.read(&mut b).await.unwrap();
                            buf.extend_from_slice(&b[..n]);
                        }
                        buf.drain(..head_end + len);
                        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                        for c in &chunks {
                            out.extend_from_slice(format!("{:x}\r\n{c}\r\n", c.len()).as_bytes());
                        }
                        if let Then::EndWhenTold(told) = &*then {
                            sock.write_all(&out).await.unwrap();
                            out.clear();
                            told.notified().await;
                        }
                        out.extend_from_slice(b"0\r\n\r\n");
                        sock.write_all(&out).await.unwrap();
                        if let Then::DropNextRequest = &*then {
                            // The next request is read, then the connection
                            // closed with no answer: a keep-alive race lost.
                            let mut b = [0u8; 4096];
                            let _ = sock.read(&mut b).await;
                            drop(sock);
                            let _ = closed_tx.send(());
                            return;
                        }
                        if let Then::CloseWhenTold(told) = &*then {
                            told.notified().await;
                            drop(sock);
                            let _ = closed_tx.send(());
                            return;
                        }
                    }
                });
            }
        });
        Server {
            url,
            accepted,
            closed,
        }
    }

    const BODY: &[u8] = br#"{"q":1}"#;

    fn request(url: &str) -> reqwest::Request {
        reqwest::Client::new().post(url).body(BODY).build().unwrap()
    }

    /// The whole body, as the stream reader takes it: one chunk waited for,
    /// then every chunk already here. Returns the text and the batch sizes.
    async fn read_all(body: &mut DirectBody) -> (String, Vec<usize>) {
        let mut text = String::new();
        let mut batches = Vec::new();
        loop {
            let mut batch = 0;
            let mut next = Some(body.next().await);
            while let Some(item) = next.take() {
                match item {
                    Ahead::Chunk(c) => {
                        text.push_str(std::str::from_utf8(&c).unwrap());
                        batch += 1;
                        next = body.ready();
                    }
                    Ahead::End => {
                        batches.push(batch);
                        return (text, batches);
                    }
                    other => panic!("{other:?}"),
                }
            }
            batches.push(batch);
        }
    }

    const CONNECT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn chunks_that_came_in_one_read_are_taken_without_waiting() {
        let chunks: Vec<String> = (0..50).map(|i| format!("data: {i}\n\n")).collect();
        let s = server(chunks.clone(), Then::KeepOpen).await;
        let pool = Pool::default();
        let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
            .await
            .unwrap();
        assert_eq!(r.status, StatusCode::OK);
        let (text, batches) = read_all(&mut r.body).await;
        assert_eq!(text, chunks.concat());
        // The server wrote the whole body at once: it is decoded in a few
        // batches, not one wake-up per chunk.
        assert!(batches.len() <= 3, "{batches:?}");
    }

    #[tokio::test]
    async fn a_connection_is_used_again_once_its_body_was_read_to_the_end() {
        let s = server(vec!["data: a\n\n".into()], Then::KeepOpen).await;
        let pool = Pool::default();
        for _ in 0..3 {
            let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
                .await
                .unwrap();
            assert_eq!(read_all(&mut r.body).await.0, "data: a\n\n");
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_body_left_unread_closes_its_connection() {
        let chunks: Vec<String> = (0..3).map(|i| format!("data: {i}\n\n")).collect();
        let s = server(chunks.clone(), Then::KeepOpen).await;
        let pool = Pool::default();
        let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
            .await
            .unwrap();
        assert!(matches!(r.body.next().await, Ahead::Chunk(_)));
        drop(r);
        let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
            .await
            .unwrap();
        assert_eq!(read_all(&mut r.body).await.0, chunks.concat());
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced() {
        let told = Arc::new(tokio::sync::Notify::new());
        let mut s = server(
            vec!["data: a\n\n".into()],
            Then::CloseWhenTold(told.clone()),
        )
        .await;
        let pool = Pool::default();
        let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
            .await
            .unwrap();
        assert_eq!(read_all(&mut r.body).await.0, "data: a\n\n");
        assert_eq!(pool.0.lock().unwrap().len(), 1, "kept for the next request");
        told.notify_one();
        s.closed.recv().await.unwrap();
        // Until the runtime has read the close (a yield lets it poll for I/O).
        let seen = async {
            while !pool.0.lock().unwrap()[0].idle.closed() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), seen)
            .await
            .unwrap();
        let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
            .await
            .unwrap();
        assert_eq!(read_all(&mut r.body).await.0, "data: a\n\n");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_body_let_go_before_its_end_is_finished_in_the_background_and_kept() {
        let told = Arc::new(tokio::sync::Notify::new());
        let s = server(
            vec!["data: [DONE]\n\n".into()],
            Then::EndWhenTold(told.clone()),
        )
        .await;
        let pool = Pool::default();
        let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
            .await
            .unwrap();
        assert!(matches!(r.body.next().await, Ahead::Chunk(_)));
        // The reader is done before the body's last chunk has come.
        r.body.finish_in_background();
        assert!(pool.0.lock().unwrap().is_empty());
        told.notify_one();
        let kept = async {
            while pool.0.lock().unwrap().is_empty() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), kept)
            .await
            .unwrap();
        let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
            .await
            .unwrap();
        told.notify_one();
        assert_eq!(read_all(&mut r.body).await.0, "data: [DONE]\n\n");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_reused_connection_closed_as_the_request_arrives_is_replaced_unseen() {
        let s = server(vec!["data: a\n\n".into()], Then::DropNextRequest).await;
        let pool = Pool::default();
        for _ in 0..2 {
            let mut r = send(&pool, request(&s.url), Bytes::from_static(BODY), CONNECT)
                .await
                .unwrap();
            assert_eq!(read_all(&mut r.body).await.0, "data: a\n\n");
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_failure() {
        // A port just freed: nothing listens there.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/x", listener.local_addr().unwrap());
        drop(listener);
        match send(
            &Pool::default(),
            request(&url),
            Bytes::from_static(BODY),
            CONNECT,
        )
        .await
        {
            Err(Failure::Connect(e)) => assert!(e.to_lowercase().contains("refused"), "{e}"),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("answered"),
        }
    }

    #[tokio::test]
    async fn a_server_that_closes_without_answering_fails_the_request() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/x", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut b = [0u8; 4096];
            let _ = sock.read(&mut b).await;
        });
        let pool = Pool::default();
        let sent = send(&pool, request(&url), Bytes::from_static(BODY), CONNECT);
        match tokio::time::timeout(Duration::from_secs(10), sent).await {
            Ok(Err(Failure::Exchange(e))) => assert!(e.contains("closed"), "{e}"),
            Ok(Err(other)) => panic!("{other:?}"),
            Ok(Ok(_)) => panic!("answered"),
            Err(_) => panic!("still waiting for an answer from a closed connection"),
        }
    }

    #[test]
    fn only_plain_http_without_a_proxy_is_done_directly() {
        let none = |_: &str| None;
        assert!(applies_with("http://127.0.0.1:8080/v1", none));
        assert!(!applies_with("https://api.example.com/v1", none));
        for var in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
            let set = |name: &str| (name == var).then(|| "http://proxy:3128".into());
            assert!(!applies_with("http://127.0.0.1:8080/v1", set), "{var}");
        }
        let empty = |name: &str| (name == "HTTP_PROXY").then(std::ffi::OsString::new);
        assert!(applies_with("http://127.0.0.1:8080/v1", empty));
    }
}
