//! Streamed answer text, journaled before it is shown. A reply's message is
//! saved only when it is whole, so without this a kill mid-stream loses text
//! the user already read. Each piece of text goes to the history sink as a
//! `partial` record and only then to the front end. Text is released in
//! batches: what arrives while more is already on its way is held, and all of
//! it goes out (one journal write, one delta) as soon as the model stream has
//! to wait for the network ([`release_when_waiting`]). A slow stream thus costs
//! one write per network read and shows each piece at once; a fast one (or a
//! loaded server) gets larger batches, one per network read, so its cost per
//! piece falls as the load rises instead of building a queue.

use super::emitter::Emitter;
use super::protocol::EventKind;
use super::HistorySink;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

/// Text held back past this is released at once, even while more is ready:
/// bounds both the memory held and how long a long burst waits.
const MAX_HELD: usize = 16 * 1024;

pub struct StreamJournal {
    emitter: Emitter,
    state: Mutex<State>,
}

struct State {
    /// None when the conversation is not saved: text is shown as it comes.
    sink: Option<Box<dyn HistorySink>>,
    /// A write failed: stop holding text back for a journal that is not there.
    failed: bool,
    held: String,
    shown: String,
    /// Bytes of text received so far: tells a wait that brought more text
    /// from one that brought none.
    received: usize,
}

impl StreamJournal {
    pub fn new(sink: Option<Box<dyn HistorySink>>, emitter: Emitter) -> Self {
        StreamJournal {
            emitter,
            state: Mutex::new(State {
                sink,
                failed: false,
                held: String::new(),
                shown: String::new(),
                received: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A text delta from the model stream: held until the stream waits.
    pub fn text(&self, text: String) {
        let mut st = self.lock();
        st.received += text.len();
        st.held.push_str(&text);
        if st.held.len() >= MAX_HELD {
            self.release(&mut st);
        }
    }

    /// Journals and shows what is held now: the stream waits, or another
    /// kind of event must follow the text before it.
    pub fn release_held(&self) {
        let mut st = self.lock();
        self.release(&mut st);
    }

    /// Bytes received so far, and whether any are held.
    fn progress(&self) -> (usize, bool) {
        let st = self.lock();
        (st.received, !st.held.is_empty())
    }

    /// Releases what is held (the stream ended) and gives back the sink and
    /// all the text shown.
    pub fn finish(self) -> (Option<Box<dyn HistorySink>>, String) {
        let mut st = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        if !st.held.is_empty() {
            let text = std::mem::take(&mut st.held);
            if let (Some(sink), false) = (st.sink.as_mut(), st.failed) {
                let _ = sink.partial(&text);
            }
            st.shown.push_str(&text);
            self.emitter.delta(EventKind::TextDelta { text });
        }
        (st.sink, st.shown)
    }

    fn release(&self, st: &mut State) {
        if st.held.is_empty() {
            return;
        }
        let text = std::mem::take(&mut st.held);
        if !st.failed {
            if let Some(sink) = st.sink.as_mut() {
                // A failed write is reported by the next full save.
                st.failed = sink.partial(&text).is_err();
            }
        }
        st.shown.push_str(&text);
        self.emitter.delta(EventKind::TextDelta { text });
    }
}

/// Polls `reply` (the model stream) and releases the journal's held text
/// whenever the stream has to wait.
///
/// When the stream reads its own socket, its first `Pending` is that wait.
/// When its bytes come through another task (`look_again`: reqwest's
/// connection task hands the body over one piece at a time), a first
/// `Pending` often means only that the next piece has not been handed over
/// yet, so the wait is decided after one yield: text that came meanwhile
/// joins the batch, and a yield that brought nothing releases it. That costs
/// a scheduling round per batch, which under load is most of an event's
/// latency; it is paid only where it buys larger batches.
pub async fn release_when_waiting<F: Future>(
    reply: Pin<&mut F>,
    journal: &StreamJournal,
    look_again: bool,
) -> F::Output {
    let mut reply = reply;
    // Bytes received when this last yielded with text held.
    let mut yielded_at: Option<usize> = None;
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        if let Poll::Ready(out) = reply.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        let (received, held) = journal.progress();
        if !held {
            yielded_at = None;
        } else if look_again && yielded_at != Some(received) {
            yielded_at = Some(received);
            cx.waker().wake_by_ref();
        } else {
            yielded_at = None;
            journal.release_held();
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::Event;
    use crate::agent::{HostedError, TokenTracker};
    use crate::wire::Message;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::sync::mpsc;

    /// Records the journal's `partial` writes.
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl HistorySink for Recorder {
        fn save(&mut self, _: &[Message], _: &TokenTracker, _: bool) -> Result<(), HostedError> {
            Ok(())
        }
        fn partial(&mut self, text: &str) -> Result<(), HostedError> {
            self.0.lock().unwrap().push(text.to_string());
            Ok(())
        }
    }

    fn texts(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match &e.kind {
                EventKind::TextDelta { text } => text.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// Pieces handed over one at a time by another task (as the HTTP
    /// connection hands over a body), in bursts: what is ready together is
    /// journaled and shown as one batch; a piece after a pause on its own.
    #[tokio::test(start_paused = true)]
    async fn ready_text_goes_out_in_one_batch_and_a_late_piece_alone() {
        let (tx, mut rx) = mpsc::channel::<String>(1);
        let (etx, mut erx) = mpsc::channel(1024);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let journal =
            StreamJournal::new(Some(Box::new(Recorder(writes.clone()))), Emitter::new(etx));
        let feeder = tokio::spawn(async move {
            for i in 0..100 {
                tx.send(format!("{i};")).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send("late".into()).await.unwrap();
        });
        {
            let reply = async {
                while let Some(piece) = rx.recv().await {
                    journal.text(piece);
                }
            };
            tokio::pin!(reply);
            release_when_waiting(reply, &journal, true).await;
        }
        feeder.await.unwrap();
        let (_, shown) = journal.finish();
        let burst: String = (0..100).map(|i| format!("{i};")).collect();
        let mut events = Vec::new();
        while let Ok(e) = erx.try_recv() {
            events.push(e);
        }
        assert_eq!(texts(&events), [burst.clone(), "late".into()]);
        assert_eq!(*writes.lock().unwrap(), [burst.clone(), "late".into()]);
        assert_eq!(shown, format!("{burst}late"));
    }

    /// A piece at a time with waits between: each is shown at once, whole
    /// and in order, and journaled first.
    #[tokio::test(start_paused = true)]
    async fn a_slow_stream_shows_every_piece_when_it_comes() {
        let (tx, mut rx) = mpsc::channel::<String>(1);
        let (etx, mut erx) = mpsc::channel(1024);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let journal =
            StreamJournal::new(Some(Box::new(Recorder(writes.clone()))), Emitter::new(etx));
        let seen = writes.clone();
        let feeder = tokio::spawn(async move {
            for i in 0..5 {
                tx.send(format!("{i};")).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                // Journaled before this next piece is sent.
                assert_eq!(seen.lock().unwrap().len(), i + 1);
            }
        });
        {
            let reply = async {
                while let Some(piece) = rx.recv().await {
                    journal.text(piece);
                }
            };
            tokio::pin!(reply);
            release_when_waiting(reply, &journal, true).await;
        }
        feeder.await.unwrap();
        let mut events = Vec::new();
        while let Ok(e) = erx.try_recv() {
            events.push(e);
        }
        assert_eq!(texts(&events), ["0;", "1;", "2;", "3;", "4;"]);
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
    }

    /// A stream that reads its own socket: its first wait releases what is
    /// held, without a look-again round, so the text is journaled before the
    /// stream is polled again.
    #[tokio::test]
    async fn a_stream_reading_in_place_releases_at_its_first_wait() {
        for look_again in [false, true] {
            let (etx, _erx) = mpsc::channel(1024);
            let writes = Arc::new(Mutex::new(Vec::new()));
            let journal =
                StreamJournal::new(Some(Box::new(Recorder(writes.clone()))), Emitter::new(etx));
            let journaled_by_then = {
                let reply = async {
                    journal.text("a".into());
                    journal.text("b".into());
                    // One wait that brings nothing, as a socket read would.
                    tokio::task::yield_now().await;
                    let n = writes.lock().unwrap().len();
                    journal.text("c".into());
                    n
                };
                tokio::pin!(reply);
                release_when_waiting(reply, &journal, look_again).await
            };
            let (_, shown) = journal.finish();
            assert_eq!(shown, "abc");
            let expected = if look_again { 0 } else { 1 };
            assert_eq!(journaled_by_then, expected, "look_again = {look_again}");
            assert_eq!(
                writes.lock().unwrap()[0],
                if look_again { "abc" } else { "ab" }
            );
        }
    }
}
