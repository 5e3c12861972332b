//! The sending end of the event stream. The channel is bounded so a front end
//! that falls behind slows the agent down instead of growing a queue without
//! limit. Text and reasoning deltas come from inside the model stream, where
//! nothing can wait; when the channel is full they are merged into one pending
//! delta, sent as soon as there is room and always before any later event, so
//! order is kept and nothing is lost. A tool's output tail goes the same way;
//! a newer tail of the same call replaces one still waiting, as it would on
//! screen.
//!
//! Known secrets are redacted here, for every event. A streamed text or
//! reasoning delta may end in the first characters of a key whose rest comes
//! in the next one; such a tail is held back (`State::carry`) until the next
//! delta shows whether it was a key, or until any other event ends the
//! stream, so no key reaches a front end in pieces.
//!
//! Every event is stamped here with the run it belongs to and the op it
//! answers (`set_run`, `set_op`); a reply to an op served mid-run names its
//! own op (`reply`), not the run's.

use super::protocol::{Event, EventKind, OpId};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Events the channel holds before senders wait.
pub const EVENT_CAPACITY: usize = 1024;

#[derive(Clone)]
pub struct Emitter {
    tx: mpsc::Sender<Event>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    seq: u64,
    run: u64,
    /// The op the events answer: the run's, or the idle op being served.
    op: Option<OpId>,
    /// Deltas that found the channel full, oldest first, neighbours of the
    /// same kind merged (so this stays a handful of entries).
    pending: Vec<EventKind>,
    /// The end of the current text or reasoning stream that could be the
    /// start of a secret (see the module note).
    carry: Option<EventKind>,
    /// Turns events into trace spans when telemetry is on (`spans`).
    spans: Option<super::spans::Spans>,
}

impl State {
    /// Lets the held-back tail go: the stream it belonged to has ended.
    fn release_carry(&mut self) {
        if let Some(c) = self.carry.take() {
            push_merged(&mut self.pending, c);
        }
    }

    /// `kind` redacted, less the tail that could start a secret (kept in
    /// `carry`); `None` when all of it is held back.
    fn redact_stream(&mut self, mut kind: EventKind) -> Option<EventKind> {
        if streamed_text(&mut kind).is_none() {
            self.release_carry();
            return Some(kind);
        }
        if let Some(mut carry) = self.carry.take() {
            match merge_into(&mut carry, kind) {
                None => kind = carry,
                Some(other) => {
                    push_merged(&mut self.pending, carry);
                    kind = other;
                }
            }
        }
        let secrets = crate::redact::known();
        let text = streamed_text(&mut kind)?;
        secrets.text_in_place(text);
        let hold = secrets.partial_at_end(text);
        if hold == 0 {
            return Some(kind);
        }
        let tail = text.split_off(text.len() - hold);
        let whole = text.is_empty();
        let mut carry = kind.clone();
        if let Some(t) = streamed_text(&mut carry) {
            *t = tail;
        }
        self.carry = Some(carry);
        (!whole).then_some(kind)
    }
}

/// The text of a streamed answer or reasoning delta.
fn streamed_text(kind: &mut EventKind) -> Option<&mut String> {
    match kind {
        EventKind::TextDelta { text } | EventKind::Reasoning { text, .. } => Some(text),
        _ => None,
    }
}

impl Emitter {
    pub fn new(tx: mpsc::Sender<Event>) -> Emitter {
        Emitter {
            tx,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave this state half-changed; keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the events that follow as belonging to run `run` (0: none),
    /// started by op `op`.
    pub fn set_run(&self, run: u64, op: Option<OpId>) {
        let mut st = self.lock();
        st.run = run;
        st.op = op;
    }

    /// Marks the events that follow as answering op `op` (outside a run).
    pub fn set_op(&self, op: Option<OpId>) {
        self.lock().op = op;
    }

    /// Traces the events that follow (`agent::spans`).
    pub fn trace(&self, spans: super::spans::Spans) {
        self.lock().spans = Some(spans);
    }

    /// Shows `kind` to the tracer, at the moment it is emitted (before any
    /// wait for room); gives the tracer's one warning when it has one.
    fn observe(&self, kind: &EventKind) -> Option<EventKind> {
        let mut st = self.lock();
        let run = st.run;
        let message = st.spans.as_mut()?.observe(run, kind)?;
        Some(EventKind::Warning { message })
    }

    pub fn run(&self) -> u64 {
        self.lock().run
    }

    /// Sends `kind`, waiting for room. A receiver that is gone is ignored: a
    /// front end that stopped listening must not stop the agent.
    pub async fn emit(&self, kind: EventKind) {
        let warning = self.observe(&kind);
        self.lock().release_carry();
        self.flush().await;
        self.send(kind, None).await;
        if let Some(w) = warning {
            self.send(w, None).await;
        }
    }

    /// Sends `kind` as the answer to op `op`, whatever the run in progress
    /// (an op served while a run goes on).
    pub async fn reply(&self, op: OpId, kind: EventKind) {
        // Replies are not part of a run's spans, but may carry the session
        // (a resume or a fork answers an op).
        let _ = self.observe(&kind);
        self.lock().release_carry();
        self.flush().await;
        self.send(kind, Some(op)).await;
    }

    async fn send(&self, kind: EventKind, op: Option<OpId>) {
        let Ok(permit) = self.tx.reserve().await else {
            return;
        };
        let event = self.stamp(kind, op);
        permit.send(event);
    }

    fn stamp(&self, mut kind: EventKind, op: Option<OpId>) -> Event {
        // Every event leaves through here or `delta`: the one place where
        // known secrets are kept from every front end.
        kind.redact(&crate::redact::known());
        let mut st = self.lock();
        st.seq += 1;
        Event {
            run: st.run,
            seq: st.seq,
            op_id: op.or(st.op),
            kind,
        }
    }

    /// Sends the deltas still pending, waiting for room.
    pub async fn flush(&self) {
        self.lock().release_carry();
        loop {
            let next = {
                let mut st = self.lock();
                if st.pending.is_empty() {
                    return;
                }
                st.pending.remove(0)
            };
            self.send(next, None).await;
        }
    }

    /// Sends a text or reasoning delta, or a tool's output tail, without
    /// waiting (see the module note).
    pub fn delta(&self, kind: EventKind) {
        let mut st = self.lock();
        if let Some(kind) = st.redact_stream(kind) {
            push_merged(&mut st.pending, kind);
        }
        drop(st);
        // Send what fits, oldest first; the rest waits for the next delta or event.
        loop {
            let permit = match self.tx.try_reserve() {
                Ok(p) => p,
                Err(mpsc::error::TrySendError::Closed(())) => {
                    self.lock().pending.clear();
                    return;
                }
                Err(mpsc::error::TrySendError::Full(())) => return,
            };
            let mut st = self.lock();
            if st.pending.is_empty() {
                return;
            }
            let mut kind = st.pending.remove(0);
            kind.redact(&crate::redact::known());
            st.seq += 1;
            let event = Event {
                run: st.run,
                seq: st.seq,
                op_id: st.op,
                kind,
            };
            drop(st);
            permit.send(event);
        }
    }
}

fn push_merged(pending: &mut Vec<EventKind>, kind: EventKind) {
    if let Some(last) = pending.last_mut() {
        if let Some(kind) = merge_into(last, kind) {
            pending.push(kind);
        }
        return;
    }
    pending.push(kind);
}

/// Appends `next` to `last` when both are deltas of the same stream; gives
/// `next` back otherwise.
fn merge_into(last: &mut EventKind, next: EventKind) -> Option<EventKind> {
    match (last, next) {
        (EventKind::TextDelta { text: x }, EventKind::TextDelta { text: y }) => {
            x.push_str(&y);
            None
        }
        (
            EventKind::Reasoning { field: f1, text: x },
            EventKind::Reasoning { field: f2, text: y },
        ) if *f1 == f2 => {
            x.push_str(&y);
            None
        }
        (
            EventKind::ToolProgress {
                call_id: c1,
                tail: x,
            },
            EventKind::ToolProgress {
                call_id: c2,
                tail: y,
            },
        ) if *c1 == c2 => {
            *x = y;
            None
        }
        (_, next) => Some(next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> EventKind {
        EventKind::TextDelta { text: t.into() }
    }

    #[tokio::test]
    async fn a_waiting_tool_tail_is_replaced_by_a_newer_one_of_the_same_call() {
        let (tx, mut rx) = mpsc::channel(1);
        let em = Emitter::new(tx);
        let tail = |id: &str, t: &str| EventKind::ToolProgress {
            call_id: id.into(),
            tail: t.into(),
        };
        for (id, t) in [
            ("c1", "1"),
            ("c1", "2"),
            ("c1", "3"),
            ("c2", "x"),
            ("c2", "y"),
        ] {
            em.delta(tail(id, t));
        }
        // One fitted; the rest waited, each call's newest tail replacing its last.
        let receiver = async {
            let mut got = Vec::new();
            while got.len() < 3 {
                got.push(rx.recv().await.unwrap().kind);
            }
            got
        };
        let ((), got) = tokio::join!(em.flush(), receiver);
        assert_eq!(got, [tail("c1", "1"), tail("c1", "3"), tail("c2", "y")]);
    }

    #[tokio::test]
    async fn a_key_split_across_deltas_never_leaves_in_pieces() {
        const KEY: &str = "sk-split-key-0123456789";
        crate::redact::remember([KEY]);
        let (tx, mut rx) = mpsc::channel(64);
        let em = Emitter::new(tx);
        let reasoning = |t: &str| EventKind::Reasoning {
            field: "reasoning_content".into(),
            text: t.into(),
        };
        em.delta(reasoning("the key is sk-spl"));
        em.delta(reasoning("it-key-01"));
        em.delta(reasoning("23456789 ok"));
        em.delta(text("answer s"));
        em.delta(text("k-split-key-0123456789."));
        em.emit(EventKind::Warning {
            message: "end".into(),
        })
        .await;
        drop(em);
        let mut reasoning_seen = String::new();
        let mut text_seen = String::new();
        while let Some(e) = rx.recv().await {
            match e.kind {
                EventKind::Reasoning { text, .. } => reasoning_seen.push_str(&text),
                EventKind::TextDelta { text } => text_seen.push_str(&text),
                _ => {}
            }
        }
        assert_eq!(reasoning_seen, "the key is [REDACTED] ok");
        assert_eq!(text_seen, "answer [REDACTED].");
    }

    #[tokio::test]
    async fn deltas_merge_while_the_channel_is_full_and_keep_their_order() {
        let (tx, mut rx) = mpsc::channel(2);
        let em = Emitter::new(tx);
        for t in ["a", "b", "c", "d", "e"] {
            em.delta(text(t));
        }
        em.delta(EventKind::Reasoning {
            field: "r".into(),
            text: "x".into(),
        });
        em.delta(text("f"));
        let sender = em.emit(EventKind::Warning {
            message: "after".into(),
        });
        let receiver = async {
            let mut got = Vec::new();
            while got.len() < 6 {
                got.push(rx.recv().await.unwrap());
            }
            got
        };
        let ((), got) = tokio::join!(sender, receiver);
        let texts: Vec<String> = got
            .iter()
            .map(|e| match &e.kind {
                EventKind::TextDelta { text } => text.clone(),
                EventKind::Reasoning { text, .. } => format!("R:{text}"),
                EventKind::Warning { message } => format!("W:{message}"),
                other => format!("{other:?}"),
            })
            .collect();
        // Two fit at once; the rest waited, merged by kind, in order.
        assert_eq!(texts, ["a", "b", "cde", "R:x", "f", "W:after"]);
        let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    }
}
