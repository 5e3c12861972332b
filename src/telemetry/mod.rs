//! OpenTelemetry traces sent over OTLP/HTTP: the spans' shape (`Span`), the
//! process's one exporter (`start`, `exporter`, `flush`) and the background
//! task that posts them in batches. Off unless `[telemetry] otlp_endpoint`
//! is set.
//!
//! It does not know what a run or a tool is: `agent::spans` turns the
//! agent's events into spans and hands them here. Nothing here waits on the
//! agent's side: `Exporter::record` puts a span in a bounded queue or, when
//! the queue is full (the endpoint is slow or down), drops it and counts it.
//! A failing endpoint costs one warning for the whole process
//! (`Exporter::take_warning`), not one per batch.
//!
//! The body is OTLP's JSON encoding (`otlp`), posted with our reqwest: the
//! opentelemetry crates would add an SDK and a second HTTP stack for what
//! is one JSON document per batch. Of ours it uses only `net` (trust roots).

mod otlp;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// Spans waiting to be sent; beyond this they are dropped and counted. A
/// few thousand spans are a few hundred kilobytes: room for a slow minute of
/// a busy server, never an unbounded queue.
pub const QUEUE_CAPACITY: usize = 4096;
/// Spans per request: well under a collector's default body limit (4 MB)
/// at a few hundred bytes a span.
pub const BATCH_SPANS: usize = 512;
/// How long a span may wait for its batch to fill.
pub const BATCH_DELAY: Duration = Duration::from_secs(2);
/// One export request's bound; a slower endpoint counts as failing.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// What exiting waits for the last batch at most.
pub const EXIT_FLUSH: Duration = Duration::from_secs(2);
/// The name spans are reported under (`service.name`).
pub const SERVICE_NAME: &str = "buddy";

/// One finished span. Ids are OTLP's: 16 bytes of trace, 8 of span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    pub attributes: Vec<(&'static str, Value)>,
    /// The operation failed (OTLP status `ERROR`); `false` leaves it unset.
    pub error: bool,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

/// The time now in nanoseconds since the Unix epoch (0 before it).
pub fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `N` random bytes for an id, never all zero (OTLP's "no id").
pub fn random_id<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let rng = ring::rand::SystemRandom::new();
    let mut id = [0u8; N];
    // The system's generator does not fail on Linux once booted; if it
    // ever did, a clock-derived id still tells spans apart.
    if rng.fill(&mut id).is_err() || id.iter().all(|b| *b == 0) {
        let t = now_nanos().to_le_bytes();
        for (i, b) in id.iter_mut().enumerate() {
            *b = t[i % t.len()] ^ (i as u8 + 1);
        }
    }
    id
}

/// The sending end of the exporter, cloned into every agent.
#[derive(Clone)]
pub struct Exporter {
    tx: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
}

enum Msg {
    Span(Box<Span>),
    /// Send what is queued now, then answer.
    Flush(oneshot::Sender<()>),
}

#[derive(Default)]
struct Shared {
    dropped: AtomicU64,
    /// What went wrong first, until someone reports it.
    failure: Mutex<Option<String>>,
    /// The one warning was handed out.
    warned: AtomicBool,
}

impl Shared {
    fn fail(&self, why: String) {
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() && !self.warned.load(Ordering::Relaxed) {
            *f = Some(why);
        }
    }
}

impl Exporter {
    /// Queues `span` for export, or drops and counts it when the queue is
    /// full. Never waits.
    pub fn record(&self, span: Span) {
        if self.tx.try_send(Msg::Span(Box::new(span))).is_err() {
            let n = self.shared.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n == 1 {
                self.shared.fail(
                    "the OTLP endpoint does not keep up; spans are being dropped".to_string(),
                );
            }
        }
    }

    /// Spans dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// The one warning about exporting, the first time something went wrong;
    /// `None` before that and ever after.
    pub fn take_warning(&self) -> Option<String> {
        let mut f = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let why = f.take()?;
        self.shared.warned.store(true, Ordering::Relaxed);
        let dropped = self.dropped();
        let tail = if dropped > 0 {
            format!(" ({dropped} spans dropped so far)")
        } else {
            String::new()
        };
        Some(format!(
            "traces: {why}{tail}; later failures are not reported"
        ))
    }

    /// Sends what is queued, waiting at most `bound`.
    pub async fn flush(&self, bound: Duration) {
        let (tx, rx) = oneshot::channel();
        let asked = async {
            if self.tx.send(Msg::Flush(tx)).await.is_ok() {
                let _ = rx.await;
            }
        };
        let _ = tokio::time::timeout(bound, asked).await;
    }
}

/// Starts an exporter posting to `endpoint` (a base URL such as
/// `http://127.0.0.1:4318`; spans go to its `/v1/traces`) on the current
/// runtime. Its task ends when every `Exporter` is gone.
pub fn start(endpoint: &str) -> Result<Exporter, String> {
    let url = traces_url(endpoint)?;
    // buddy's trust roots for an https collector; plain HTTP reads none.
    let builder = if url.scheme() == "https" {
        crate::net::client_builder(&[])
    } else {
        reqwest::Client::builder().tls_built_in_root_certs(false)
    };
    let client = builder
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the OTLP client: {e}"))?;
    let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
    let shared = Arc::new(Shared::default());
    tokio::spawn(export_loop(rx, client, url, shared.clone()));
    Ok(Exporter { tx, shared })
}

/// `endpoint`'s `/v1/traces` (OTLP/HTTP's path for traces).
fn traces_url(endpoint: &str) -> Result<reqwest::Url, String> {
    let base = endpoint.trim().trim_end_matches('/');
    let url = reqwest::Url::parse(&format!("{base}/v1/traces"))
        .map_err(|e| format!("telemetry.otlp_endpoint `{endpoint}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "telemetry.otlp_endpoint `{endpoint}` must be an http:// or https:// URL"
        ));
    }
    Ok(url)
}

async fn export_loop(
    mut rx: mpsc::Receiver<Msg>,
    client: reqwest::Client,
    url: reqwest::Url,
    shared: Arc<Shared>,
) {
    let mut batch: Vec<Span> = Vec::new();
    loop {
        let msg = if batch.is_empty() {
            rx.recv().await
        } else {
            match tokio::time::timeout(BATCH_DELAY, rx.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    post(&client, &url, &shared, std::mem::take(&mut batch)).await;
                    continue;
                }
            }
        };
        match msg {
            Some(Msg::Span(span)) => {
                batch.push(*span);
                if batch.len() >= BATCH_SPANS {
                    post(&client, &url, &shared, std::mem::take(&mut batch)).await;
                }
            }
            Some(Msg::Flush(done)) => {
                // Spans queued before the flush was asked are sent with it.
                while let Ok(Msg::Span(span)) = rx.try_recv() {
                    batch.push(*span);
                }
                while !batch.is_empty() {
                    let rest = batch.split_off(batch.len().min(BATCH_SPANS));
                    post(&client, &url, &shared, std::mem::replace(&mut batch, rest)).await;
                }
                let _ = done.send(());
            }
            None => {
                if !batch.is_empty() {
                    post(&client, &url, &shared, batch).await;
                }
                return;
            }
        }
    }
}

async fn post(client: &reqwest::Client, url: &reqwest::Url, shared: &Shared, spans: Vec<Span>) {
    let body = otlp::encode(&spans, SERVICE_NAME);
    let sent = client
        .post(url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => shared.fail(format!("the OTLP endpoint {url} answered {}", r.status())),
        Err(e) => shared.fail(format!("cannot send spans to {url}: {e}")),
    }
}

static EXPORTER: OnceLock<Mutex<Option<Exporter>>> = OnceLock::new();

/// The process's exporter for `endpoint`, started on first use (on the
/// current runtime); an error says why `endpoint` cannot be used.
pub fn exporter(endpoint: &str) -> Result<Exporter, String> {
    let slot = EXPORTER.get_or_init(|| Mutex::new(None));
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = slot.as_ref() {
        return Ok(e.clone());
    }
    let e = start(endpoint)?;
    *slot = Some(e.clone());
    Ok(e)
}

/// Sends what the process's exporter holds, waiting at most `bound`, and
/// gives the warning nobody reported yet (printed on the way out).
pub async fn flush(bound: Duration) -> Option<String> {
    let e = EXPORTER
        .get()?
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()?;
    e.flush(bound).await;
    e.take_warning()
}

/// An exporter whose spans stay in memory, for tests of what makes them.
#[cfg(test)]
pub(crate) fn captured(capacity: usize) -> (Exporter, Captured) {
    let (tx, rx) = mpsc::channel(capacity);
    let shared = Arc::new(Shared::default());
    (Exporter { tx, shared }, Captured(rx))
}

#[cfg(test)]
pub(crate) struct Captured(mpsc::Receiver<Msg>);

#[cfg(test)]
impl Captured {
    /// The spans recorded so far, in order.
    pub(crate) fn spans(&mut self) -> Vec<Span> {
        let mut out = Vec::new();
        while let Ok(m) = self.0.try_recv() {
            if let Msg::Span(s) = m {
                out.push(*s);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_to_the_endpoint() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318/").map(|u| u.to_string()),
            Ok("http://127.0.0.1:4318/v1/traces".to_string())
        );
        assert!(traces_url("ftp://x").is_err());
        assert!(traces_url("not a url").is_err());
    }

    #[test]
    fn ids_are_random_and_never_zero() {
        let a: [u8; 16] = random_id();
        let b: [u8; 16] = random_id();
        assert_ne!(a, b);
        assert!(a.iter().any(|x| *x != 0));
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_and_warns_once() {
        // Nothing listens on a closed receiver's other end: fill the queue
        // of an exporter whose task is not running.
        let (tx, _rx) = mpsc::channel(1);
        let e = Exporter {
            tx,
            shared: Arc::new(Shared::default()),
        };
        let span = Span {
            trace_id: [1; 16],
            span_id: [1; 8],
            parent: None,
            name: "run".into(),
            start_unix_nanos: 1,
            end_unix_nanos: 2,
            attributes: Vec::new(),
            error: false,
        };
        for _ in 0..3 {
            e.record(span.clone());
        }
        assert_eq!(e.dropped(), 2);
        let w = e.take_warning();
        assert!(w.is_some_and(|w| w.contains("dropped")));
        e.record(span);
        assert_eq!(e.take_warning(), None);
    }
}
