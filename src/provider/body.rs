//! A streamed response body from reqwest, read ahead of its parser (a plain
//! HTTP server's is read by `direct.rs` instead, without a task). hyper hands a body
//! over one chunk at a time (its channel holds one), so a parser that awaits
//! each chunk is woken, and polled through every layer above it (the agent's
//! selects, the journal, a read timeout), once per chunk. Here a small task of
//! its own takes the chunks as hyper hands them over and queues them; the
//! parser takes every chunk queued so far at once, so under load it wakes once
//! per batch, and when nothing else is queued a chunk is passed on at once.
//!
//! Owns the reading task, which ends when the [`ReadAhead`] is dropped. Not
//! the decoding, timeouts or limits: `http.rs` applies those to what comes out.

use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

/// Chunks read ahead of the parser at most. Enough that a backlog is taken in
/// one batch; few enough to bound the memory held. When the queue is full the
/// task stops reading, so the server's flow control still applies.
const AHEAD: usize = 32;

/// What the body gave next.
#[derive(Debug)]
pub enum Ahead<C, E> {
    Chunk(C),
    /// The body ended where it should.
    End,
    Failed(E),
    /// The reading task stopped without an end (it panicked): not an end.
    Lost,
}

/// The parser's end of a body read ahead.
pub struct ReadAhead<C, E> {
    rx: mpsc::Receiver<Ahead<C, E>>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts reading `body` (chunks, then its end) on a task of its own.
pub fn read_ahead<S, C, E>(body: S) -> ReadAhead<C, E>
where
    S: Stream<Item = Result<C, E>> + Send + 'static,
    C: Send + 'static,
    E: Send + 'static,
{
    let (tx, rx) = mpsc::channel(AHEAD);
    let task = tokio::spawn(async move {
        let mut body = std::pin::pin!(body);
        loop {
            let item = match body.next().await {
                Some(Ok(chunk)) => Ahead::Chunk(chunk),
                Some(Err(e)) => Ahead::Failed(e),
                None => Ahead::End,
            };
            let last = !matches!(item, Ahead::Chunk(_));
            // A closed queue: the parser is gone, and so is the need to read.
            if tx.send(item).await.is_err() || last {
                return;
            }
        }
    });
    ReadAhead { rx, task }
}

impl<C, E> ReadAhead<C, E> {
    /// The next chunk (or the end), waiting for it. Cancel-safe: a timeout
    /// around it loses nothing.
    pub async fn next(&mut self) -> Ahead<C, E> {
        self.rx.recv().await.unwrap_or(Ahead::Lost)
    }

    /// The next chunk if one is queued already; `None` when it has to wait.
    pub fn ready(&mut self) -> Option<Ahead<C, E>> {
        match self.rx.try_recv() {
            Ok(item) => Some(item),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Ahead::Lost),
        }
    }
}

impl<C, E> Drop for ReadAhead<C, E> {
    fn drop(&mut self) {
        // A stalled body would otherwise keep the task (and the connection)
        // until the server sends again.
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A body fed from a channel: the test decides when each chunk exists.
    fn fed() -> (
        mpsc::Sender<Result<String, &'static str>>,
        ReadAhead<String, &'static str>,
    ) {
        let (tx, rx) = mpsc::channel::<Result<String, &'static str>>(1);
        let body = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        (tx, read_ahead(body))
    }

    /// Takes one batch the way the parser does: wait for one, then all queued.
    async fn batch(body: &mut ReadAhead<String, &'static str>) -> Vec<Ahead<String, &'static str>> {
        let mut out = vec![body.next().await];
        while let Some(item) = body.ready() {
            out.push(item);
        }
        out
    }

    fn chunks(batch: &[Ahead<String, &'static str>]) -> String {
        batch
            .iter()
            .map(|a| match a {
                Ahead::Chunk(c) => c.clone(),
                other => format!("<{other:?}>"),
            })
            .collect()
    }

    /// A burst, then a pause, then a lone chunk, then the end: every chunk
    /// comes out once and in order whatever the batch boundaries, the burst
    /// in few batches, and the lone chunk as soon as it is sent.
    #[tokio::test(start_paused = true)]
    async fn chunks_come_out_once_in_order_across_batches() {
        let (tx, mut body) = fed();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let sent = std::sync::Arc::new(std::sync::Mutex::new(None));
        let sent_at = sent.clone();
        let feeder = tokio::spawn(async move {
            for i in 0..200 {
                tx.send(Ok(format!("{i};"))).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            *sent_at.lock().unwrap() = Some(tokio::time::Instant::now());
            tx.send(Ok("late".into())).await.unwrap();
            // Kept open until the test has seen "late" alone.
            let _ = done_rx.await;
        });
        // Let the burst be queued (as much as fits) before reading.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut seen = String::new();
        let mut batches = 0;
        let burst: String = (0..200).map(|i| format!("{i};")).collect();
        while seen.len() < burst.len() {
            seen.push_str(&chunks(&batch(&mut body).await));
            batches += 1;
        }
        assert_eq!(seen, burst);
        assert!(batches < 200, "{batches} batches for a queued burst");
        assert_eq!(chunks(&batch(&mut body).await), "late");
        let sent = sent.lock().unwrap().expect("sent");
        assert!(sent.elapsed() < Duration::from_millis(100));
        let _ = done_tx.send(());
        feeder.await.unwrap();
        let last = body.next().await;
        assert!(matches!(last, Ahead::End), "{last:?}");
    }

    #[tokio::test]
    async fn a_failure_is_passed_on_after_the_chunks_before_it() {
        let (tx, mut body) = fed();
        tx.send(Ok("a".into())).await.unwrap();
        tx.send(Err("reset")).await.unwrap();
        assert!(matches!(body.next().await, Ahead::Chunk(c) if c == "a"));
        assert!(matches!(body.next().await, Ahead::Failed("reset")));
        // The task is done: nothing more, and that is not an end.
        assert!(matches!(body.next().await, Ahead::Lost));
    }
}
