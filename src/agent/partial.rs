//! Streamed answer text, journaled before it is shown. A reply's message is
//! saved only when it is whole, so without this a kill mid-stream loses text
//! the user already read. Each piece of text goes to the history sink as a
//! `partial` record and only then to the front end; to keep the journal's
//! write rate bounded, text arriving within `INTERVAL` of the last write is
//! held back and released by the next write (the agent ticks every
//! `INTERVAL`, so nothing waits longer than that to be shown).

use super::emitter::Emitter;
use super::protocol::EventKind;
use super::HistorySink;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one journal write per interval while an answer streams (plus one
/// per `MAX_HELD` bytes): also the longest a piece of text waits to be shown,
/// short enough to read as smooth streaming.
pub const INTERVAL: Duration = Duration::from_millis(100);
/// Text held back past this is written at once, whatever the interval.
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
    last_write: Option<Instant>,
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
                last_write: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A text delta from the model stream.
    pub fn text(&self, text: String) {
        let mut st = self.lock();
        st.held.push_str(&text);
        let due = st.sink.is_none()
            || st.failed
            || st.held.len() >= MAX_HELD
            || st.last_write.is_none_or(|t| t.elapsed() >= INTERVAL);
        if due {
            self.release(&mut st);
        }
    }

    /// Releases text held back for longer than the interval.
    pub fn tick(&self) {
        let mut st = self.lock();
        if !st.held.is_empty() && st.last_write.is_none_or(|t| t.elapsed() >= INTERVAL) {
            self.release(&mut st);
        }
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
                st.last_write = Some(Instant::now());
            }
        }
        st.shown.push_str(&text);
        self.emitter.delta(EventKind::TextDelta { text });
    }
}
