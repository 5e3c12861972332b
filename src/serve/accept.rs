//! The accept loop of `buddy serve`: it caps connections, and serves each
//! admitted connection with hyper's HTTP/1 (header timeout, graceful
//! shutdown) and its own idle timer: a connection on which no byte moved
//! either way for `Limits::idle_timeout` is dropped, whatever hyper is
//! waiting for (a client that stopped reading a stream, or a body that
//! stopped coming).
//!
//! At the cap, a new connection takes the place of the one that has waited
//! longest for a request head (`admission.rs`), so a flood of connections
//! that send half a head and wait cannot lock other clients out; only when
//! every connection has a request in flight is the newcomer answered 503
//! with `Retry-After`. Routes, the guard and the other limits are `http.rs`'s.

use super::admission::{Admission, Admit, InFlight, Place, Requests};
use super::forwarded::Peer;
use super::Limits;
use axum::Router;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// Refusals being written at once; past this a connection over the cap is
/// closed without an answer, so a flood costs no more than this many tasks.
pub const REFUSING_AT_ONCE: usize = 64;
/// How long a refusal may take to write and to see the client's request
/// out (closing with it unread would reset the connection and could lose
/// the 503 before the client reads it).
const REFUSAL_TIME: Duration = Duration::from_secs(2);
/// How long a newcomer waits for evicted connections to close when too many
/// are closing at once (their tasks only have to run); past it, a 503.
const CLOSING_WAIT: Duration = Duration::from_millis(100);
/// After a stop, connections still open this long are dropped: a client
/// that never reads must not keep the server from exiting.
const DRAIN_TIME: Duration = Duration::from_secs(10);
/// An accept error that is not one connection's (out of descriptors) is
/// retried after this pause rather than in a tight loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);

/// Accepts until `stop` resolves, then waits (up to [`DRAIN_TIME`]) for the
/// connections to finish; each is told to close once `stopping` turns true.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: &Limits,
    open: Arc<std::sync::atomic::AtomicUsize>,
    stopping: watch::Receiver<bool>,
    stop: impl std::future::Future<Output = ()>,
) {
    let admission = Admission::new(limits.connections);
    let refusing = Arc::new(Semaphore::new(REFUSING_AT_ONCE));
    let service = TowerToHyperService::new(router);
    let header_timeout = limits.header_timeout;
    let idle_timeout = limits.idle_timeout;
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(accepted) => accepted,
                Err(e) if per_connection(&e) => continue,
                Err(_) => {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        match admit(&admission).await {
            Some(place) => {
                let service = Tracked {
                    inner: service.clone(),
                    requests: place.requests(),
                    peer: Peer(peer),
                };
                let stopping = stopping.clone();
                let open = Open::count(&open);
                tokio::spawn(async move {
                    connection(tcp, place, service, header_timeout, idle_timeout, stopping).await;
                    drop(open);
                });
            }
            None => {
                if let Ok(turn) = Arc::clone(&refusing).try_acquire_owned() {
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(REFUSAL_TIME, refuse(tcp)).await;
                        drop(turn);
                    });
                }
            }
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN_TIME, admission.drained()).await;
}

/// One open connection in the count `/metrics` reports, until dropped.
struct Open(Arc<std::sync::atomic::AtomicUsize>);

impl Open {
    fn count(n: &Arc<std::sync::atomic::AtomicUsize>) -> Open {
        n.fetch_add(1, Ordering::Relaxed);
        Open(Arc::clone(n))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A place for a new connection, or `None` when every place has a request
/// in flight (or evicted connections are slow to close).
async fn admit(admission: &Arc<Admission>) -> Option<Place> {
    let deadline = Instant::now() + CLOSING_WAIT;
    loop {
        let freed = admission.freed();
        tokio::pin!(freed);
        // Registered before trying, so a close in between is not missed.
        freed.as_mut().enable();
        match admission.admit() {
            Admit::In(place) => return Some(place),
            Admit::Full => return None,
            Admit::Later => {
                if tokio::time::timeout_at(deadline, freed).await.is_err() {
                    return None;
                }
            }
        }
    }
}

/// The next connection, sending each write at once. An SSE event is one
/// small write; with Nagle's algorithm on, one written while the last is not
/// yet acknowledged waits for the client's delayed ACK, up to 40 ms.
async fn accept(listener: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
    let (tcp, peer) = listener.accept().await?;
    // Failing only costs latency; the connection itself is fine.
    let _ = tcp.set_nodelay(true);
    Ok((tcp, peer))
}

/// Errors that end one connection, not the listener.
fn per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    )
}

async fn connection(
    tcp: TcpStream,
    place: Place,
    service: Tracked,
    header_timeout: Duration,
    idle_timeout: Duration,
    mut stopping: watch::Receiver<bool>,
) {
    let tcp = Watched::new(tcp);
    let moved = tcp.moved.clone();
    let mut builder = hyper::server::conn::http1::Builder::new();
    // hyper starts this clock whenever the connection waits for a request
    // head: a client dribbling its headers and a kept-alive connection left
    // idle are both closed when it runs out.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = builder.serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let mut deadline = moved.last() + idle_timeout;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = stopping.wait_for(|s| *s) => break,
            // Its place went to a newer connection: close at once (it was
            // waiting for a request head, so no answer is cut short).
            () = place.evicted() => return,
            () = tokio::time::sleep_until(deadline) => {
                let last = moved.last();
                if last + idle_timeout <= Instant::now() {
                    // Dropping the connection closes the socket.
                    return;
                }
                deadline = last + idle_timeout;
            }
        }
    }
    // Finishes the response in progress (SSE streams end on `stopping`).
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// The router, as one connection's hyper service: each request is marked in
/// flight from the moment its head has been read until its response body
/// has been handed to hyper in full (an event stream: until it ends), so the
/// connection is never evicted meanwhile.
#[derive(Clone)]
struct Tracked {
    inner: TowerToHyperService<Router>,
    requests: Requests,
    /// The connection's peer, put on each request for the guard.
    peer: Peer,
}

type Answer = hyper::Response<Counted>;

impl hyper::service::Service<hyper::Request<hyper::body::Incoming>> for Tracked {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn call(&self, mut req: hyper::Request<hyper::body::Incoming>) -> Self::Future {
        req.extensions_mut().insert(self.peer);
        let in_flight = self.requests.start();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let answer = answer.await?;
            Ok(answer.map(|body| Counted {
                body,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A response body that keeps its request in flight until hyper drops it
/// (after its last frame, or with the connection).
struct Counted {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl Body for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// When a connection last moved a byte, read or written: milliseconds since
/// its start, kept where the connection's task and its I/O both reach.
#[derive(Clone)]
struct Moved {
    start: Instant,
    ms: Arc<AtomicU64>,
}

impl Moved {
    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.ms.load(Ordering::Relaxed))
    }
}

/// A connection's socket that notes every byte it moves (an atomic store
/// per read or write, nothing more), for the idle timer.
struct Watched {
    tcp: TcpStream,
    moved: Moved,
}

impl Watched {
    fn new(tcp: TcpStream) -> Watched {
        Watched {
            tcp,
            moved: Moved {
                start: Instant::now(),
                ms: Arc::new(AtomicU64::new(0)),
            },
        }
    }

    fn noted<T>(&self, r: Poll<std::io::Result<T>>, moved: bool) -> Poll<std::io::Result<T>> {
        if moved {
            self.moved.touch();
        }
        r
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.tcp).poll_read(cx, buf);
        let moved = matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before;
        self.noted(r, moved)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.tcp).poll_write(cx, buf);
        let moved = matches!(r, Poll::Ready(Ok(n)) if n > 0);
        self.noted(r, moved)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        let moved = matches!(r, Poll::Ready(Ok(n)) if n > 0);
        self.noted(r, moved)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Answers a connection over the cap: 503, `Retry-After`, a JSON error like
/// every other, then closes after reading what the client sent.
async fn refuse(mut tcp: TcpStream) {
    let body = r#"{"error":"the server has as many connections as it takes; retry later"}"#;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        super::RETRY_AFTER_SECS,
        body.len()
    );
    if tcp.write_all(head.as_bytes()).await.is_err()
        || tcp.write_all(body.as_bytes()).await.is_err()
    {
        return;
    }
    let _ = tcp.shutdown().await;
    // Drained until the client closes (bounded by REFUSAL_TIME).
    let mut sink = [0u8; 4096];
    while matches!(tcp.read(&mut sink).await, Ok(n) if n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_do_not_wait_for_acks() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = accept(&listener).await.unwrap();
        assert!(accepted.nodelay().unwrap(), "Nagle's algorithm is still on");
        drop(client);
    }
}
