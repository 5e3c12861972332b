//! The latest lines of a running command's output, for front ends to show
//! while it runs. Tools feed it the bytes they read (in any chunks, from any
//! stream); it keeps only the last few lines, each cut short, and hands the
//! tail to a sink at most once per `INTERVAL`, with known secrets redacted
//! and every line bounded. It does not read pipes or files and knows nothing
//! of events; the agent decides what the sink does. Carriage returns restart
//! a line, so a progress bar shows its latest state.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Receives the tail of a running tool's output (redacted, bounded).
pub type ProgressFn = Arc<dyn Fn(String) + Send + Sync>;

/// Lines a tail holds.
pub const TAIL_LINES: usize = 5;
/// Characters kept of each line in a tail (a longer one ends in `…`).
pub const LINE_CHARS: usize = 200;
/// Least time between two tails sent for one call.
pub const INTERVAL: Duration = Duration::from_millis(150);
/// Bytes of each line kept before redaction: more than is shown, so a
/// secret that starts within the shown part is still whole when matched.
const LINE_KEEP_BYTES: usize = 1024;

pub struct LiveTail {
    sink: Option<ProgressFn>,
    lines: VecDeque<Vec<u8>>,
    partial: Vec<u8>,
    /// A carriage return was the last byte: the next byte restarts the line
    /// unless it is the newline of a `\r\n`.
    cr: bool,
    /// Output arrived since the last tail was sent.
    dirty: bool,
    last_sent: Option<Instant>,
}

impl LiveTail {
    /// A tail that sends to `sink`; with none, feeding it costs nothing.
    pub fn new(sink: Option<ProgressFn>) -> LiveTail {
        LiveTail {
            sink,
            lines: VecDeque::new(),
            partial: Vec::new(),
            cr: false,
            dirty: false,
            last_sent: None,
        }
    }

    /// Whether anyone listens (callers skip reading for a tail otherwise).
    pub fn is_active(&self) -> bool {
        self.sink.is_some()
    }

    /// Output arrived that has not been sent yet.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Takes in more output. Only the last lines of a chunk are looked at,
    /// so a command printing megabytes costs a scan of its last few lines.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.sink.is_none() || bytes.is_empty() {
            return;
        }
        let mut start = 0;
        let mut newlines = 0;
        for (i, &b) in bytes.iter().enumerate().rev() {
            if b == b'\n' {
                newlines += 1;
                if newlines > TAIL_LINES + 1 {
                    start = i + 1;
                    break;
                }
            }
        }
        if start > 0 {
            // Everything kept so far scrolls out behind this chunk's lines.
            self.lines.clear();
            self.partial.clear();
            self.cr = false;
        }
        let mut rest = &bytes[start..];
        while !rest.is_empty() {
            // Plain text up to the next line end goes in at once.
            let plain = rest
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .unwrap_or(rest.len());
            if plain > 0 {
                if self.cr {
                    self.partial.clear();
                    self.cr = false;
                }
                let room = LINE_KEEP_BYTES.saturating_sub(self.partial.len());
                self.partial.extend_from_slice(&rest[..plain.min(room)]);
            }
            if let Some(&b) = rest.get(plain) {
                self.byte(b);
                rest = &rest[plain + 1..];
            } else {
                rest = &[];
            }
        }
        self.dirty = true;
    }

    /// Drops what is kept: the next bytes do not continue the last line
    /// (output was skipped in between).
    pub fn break_line(&mut self) {
        if !self.partial.is_empty() {
            self.partial.clear();
        }
        self.cr = false;
    }

    fn byte(&mut self, b: u8) {
        match b {
            b'\n' => {
                self.cr = false;
                self.lines.push_back(std::mem::take(&mut self.partial));
                if self.lines.len() > TAIL_LINES {
                    self.lines.pop_front();
                }
            }
            b'\r' => self.cr = true,
            _ => {
                if self.cr {
                    self.partial.clear();
                    self.cr = false;
                }
                if self.partial.len() < LINE_KEEP_BYTES {
                    self.partial.push(b);
                }
            }
        }
    }

    /// The last `TAIL_LINES` lines (the unfinished one included), secrets
    /// redacted, each cut to `LINE_CHARS` characters, joined by newlines.
    pub fn tail(&self) -> String {
        let secrets = crate::redact::known();
        let partial = (!self.partial.is_empty()).then_some(&self.partial);
        let all: Vec<&Vec<u8>> = self.lines.iter().chain(partial).collect();
        let shown = &all[all.len().saturating_sub(TAIL_LINES)..];
        let mut out = Vec::with_capacity(shown.len());
        for line in shown {
            let text = String::from_utf8_lossy(line);
            let text = secrets.text(&text);
            out.push(crate::text::clip(&text, LINE_CHARS).into_owned());
        }
        out.join("\n")
    }

    /// Sends the tail when output arrived and the last one went out at least
    /// `INTERVAL` ago. Callers also call it on a timer, so the last output
    /// before a quiet spell is shown too.
    pub fn send_due(&mut self) {
        if !self.dirty {
            return;
        }
        if self.last_sent.is_some_and(|t| t.elapsed() < INTERVAL) {
            return;
        }
        let Some(sink) = &self.sink else {
            return;
        };
        self.dirty = false;
        self.last_sent = Some(Instant::now());
        let tail = self.tail();
        if !tail.is_empty() {
            sink(tail);
        }
    }
}

/// A timer for `LiveTail::send_due`: ticks every `INTERVAL`, skipping ticks
/// missed while the caller was busy.
pub fn ticker() -> tokio::time::Interval {
    let mut t = tokio::time::interval(INTERVAL);
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn recording() -> (LiveTail, Arc<Mutex<Vec<String>>>) {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = Arc::clone(&got);
        let sink: ProgressFn = Arc::new(move |t| g.lock().unwrap().push(t));
        (LiveTail::new(Some(sink)), got)
    }

    #[test]
    fn keeps_the_last_lines_and_the_unfinished_one() {
        let (mut t, _) = recording();
        t.push(b"one\ntwo\nthr");
        t.push(b"ee\nfour\nfive\nsix\nsev");
        assert_eq!(t.tail(), "three\nfour\nfive\nsix\nsev");
        t.push(b"en\n");
        // The finished line stays; the oldest scrolls out only for a sixth.
        assert_eq!(t.tail(), "three\nfour\nfive\nsix\nseven");
        t.push(b"8");
        assert_eq!(t.tail(), "four\nfive\nsix\nseven\n8");
    }

    #[test]
    fn a_big_chunk_keeps_only_its_end() {
        let (mut t, _) = recording();
        t.push(b"old partial");
        let big: Vec<u8> = (0..100_000)
            .flat_map(|i| format!("line{i}\n").into_bytes())
            .collect();
        t.push(&big);
        assert_eq!(
            t.tail(),
            "line99995\nline99996\nline99997\nline99998\nline99999"
        );
    }

    #[test]
    fn carriage_returns_restart_the_line_and_crlf_ends_it() {
        let (mut t, _) = recording();
        t.push(b"a\r\nb\n 10%\r 50%\r");
        t.push(b"100%");
        assert_eq!(t.tail(), "a\nb\n100%");
    }

    #[test]
    fn lines_are_cut_and_secrets_redacted_before_cutting() {
        let secret = "sk-live-tail-secret-42424242";
        crate::redact::remember([secret]);
        let (mut t, _) = recording();
        let long = format!("{}{secret}{}\n", "x".repeat(190), "y".repeat(5000));
        t.push(long.as_bytes());
        t.push(format!("key={secret}\n").as_bytes());
        let tail = t.tail();
        assert!(!tail.contains("sk-live"), "{tail}");
        let lines: Vec<&str> = tail.lines().collect();
        assert_eq!(lines[1], "key=[REDACTED]");
        assert_eq!(lines[0].chars().count(), LINE_CHARS + 1);
        assert!(lines[0].ends_with('…'));
    }

    #[test]
    fn sends_at_most_once_per_interval() {
        let (mut t, got) = recording();
        t.push(b"first\n");
        t.send_due();
        for i in 0..1000 {
            t.push(format!("more{i}\n").as_bytes());
            t.send_due();
        }
        assert_eq!(got.lock().unwrap().as_slice(), ["first"]);
        assert!(t.is_dirty());
        std::thread::sleep(INTERVAL);
        t.send_due();
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 2);
        assert!(got[1].ends_with("more999"), "{}", got[1]);
    }

    #[test]
    fn without_a_sink_nothing_is_kept() {
        let mut t = LiveTail::new(None);
        t.push(b"ignored\n");
        assert!(!t.is_dirty() && t.tail().is_empty());
    }
}
