//! Incremental Server-Sent Events decoder. Bytes go in as they arrive from the
//! socket (events split across reads, several events per read, LF or CRLF line
//! ends); complete events come out. Comment lines (`: keep-alive`) are dropped.
//!
//! Hand-written rather than a crate: it is a few dozen lines, works on plain byte
//! slices (so it is trivially fuzzable and needs no `futures` stream plumbing), and
//! the caps below are ours to choose.
//!
//! Everything a server sends is bounded here: a line longer than
//! [`MAX_LINE`] or an event whose `data` grows past [`MAX_EVENT`] (endless
//! `data:` lines with no blank line between them) is an error, and scanning is
//! linear: each byte is looked at once however the line is split across reads.
//!
//! The stream's last event id (`id:`, at most [`MAX_ID`] bytes; a longer one
//! is ignored) and the reconnection delay it asked for (`retry:`) are kept as
//! the decoder's state, as the SSE standard keeps them, for a reader that
//! resumes a broken stream (the MCP client's `Last-Event-ID`).

/// One dispatched event: its `event:` name (if any) and its joined `data:` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// A line longer than this is a broken or hostile stream, not a chunk.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// An event whose joined `data` is larger than this is refused.
pub const MAX_EVENT: usize = 16 * 1024 * 1024;
/// An event id longer than this is not kept: an id is a short token, and it
/// is sent back to the server in a header.
pub const MAX_ID: usize = 1024;

#[derive(Debug)]
pub struct SseDecoder {
    /// The start of the line being read: the bytes after the last line end,
    /// never holding one itself, so each feed scans only its new bytes
    /// (rescanning from the start made one long line quadratic).
    pending: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
    /// The last `id:` seen, and the last `retry:` in milliseconds.
    last_id: Option<String>,
    retry_ms: Option<u64>,
    max_line: usize,
    max_event: usize,
    /// Set once a cap was exceeded: the stream is unusable from then on.
    failed: Option<SseOverflow>,
    /// Bytes looked at in search of line ends, for tests of linearity.
    bytes_scanned: u64,
}

/// A cap of the decoder was exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseOverflow {
    /// One line (without its line end) is longer than the limit.
    #[error("a stream line exceeds {limit} bytes")]
    Line { limit: usize },
    /// The `data` of one event is larger than the limit.
    #[error("a stream event exceeds {limit} bytes")]
    Event { limit: usize },
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::with_limits(MAX_LINE, MAX_EVENT)
    }
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with its own caps on line length and event size, in bytes.
    pub fn with_limits(max_line: usize, max_event: usize) -> Self {
        SseDecoder {
            pending: Vec::new(),
            event: None,
            data: None,
            last_id: None,
            retry_ms: None,
            max_line,
            max_event,
            failed: None,
            bytes_scanned: 0,
        }
    }

    /// How many bytes have been searched for line ends so far: equal to the
    /// bytes fed when scanning is linear.
    pub fn bytes_scanned(&self) -> u64 {
        self.bytes_scanned
    }

    /// Feeds bytes and appends every event they complete to `out`. Once a cap
    /// has been exceeded every later call returns the same error.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseOverflow> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let result = self.feed_inner(bytes, out);
        if let Err(e) = result {
            // Nothing more will be decoded: free what was held.
            self.failed = Some(e);
            self.pending = Vec::new();
            self.data = None;
            self.event = None;
        }
        result
    }

    fn feed_inner(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseOverflow> {
        // Lines wholly inside `bytes` are handled in place when nothing is
        // pending, so a large read is not copied first.
        let mut rest = bytes;
        if !self.pending.is_empty() {
            match memchr_newline(rest) {
                None => {
                    self.bytes_scanned += rest.len() as u64;
                    // One byte of slack for the `\r` of a CRLF line end.
                    if self.pending.len() + rest.len() > self.max_line + 1 {
                        return Err(SseOverflow::Line {
                            limit: self.max_line,
                        });
                    }
                    self.pending.extend_from_slice(rest);
                    return Ok(());
                }
                Some(pos) => {
                    self.bytes_scanned += pos as u64 + 1;
                    if self.pending.len() + pos > self.max_line + 1 {
                        return Err(SseOverflow::Line {
                            limit: self.max_line,
                        });
                    }
                    self.pending.extend_from_slice(&rest[..pos]);
                    rest = &rest[pos + 1..];
                    let line = std::mem::take(&mut self.pending);
                    self.line(strip_cr(&line), out)?;
                }
            }
        }
        while let Some(pos) = memchr_newline(rest) {
            self.bytes_scanned += pos as u64 + 1;
            let line = &rest[..pos];
            rest = &rest[pos + 1..];
            self.line(strip_cr(line), out)?;
        }
        self.bytes_scanned += rest.len() as u64;
        if rest.len() > self.max_line + 1 {
            return Err(SseOverflow::Line {
                limit: self.max_line,
            });
        }
        self.pending.extend_from_slice(rest);
        Ok(())
    }

    /// Flushes an event left without its closing blank line when the stream
    /// ends. An event that breaks a cap here is dropped; [`Self::failure`]
    /// then says why.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if self.failed.is_some() {
            return;
        }
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            if let Err(e) = self.line(strip_cr(&rest), out) {
                self.failed = Some(e);
                self.data = None;
                self.event = None;
                return;
            }
        }
        self.dispatch(out);
    }

    /// The last event id the stream gave, if any (the SSE "last event ID").
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection delay the stream last asked for, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// The cap that was exceeded, if one was.
    pub fn failure(&self) -> Option<SseOverflow> {
        self.failed
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseOverflow> {
        if line.len() > self.max_line {
            return Err(SseOverflow::Line {
                limit: self.max_line,
            });
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(at) => {
                let v = &line[at + 1..];
                (&line[..at], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                let value = text(value);
                let held = self.data.as_ref().map_or(0, |d| d.len() + 1);
                if held + value.len() > self.max_event {
                    return Err(SseOverflow::Event {
                        limit: self.max_event,
                    });
                }
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(&value);
                    }
                    None => self.data = Some(value.into_owned()),
                }
            }
            b"event" => self.event = Some(text(value).into_owned()),
            // The standard ignores an id holding NUL; a long one is ours to drop.
            b"id" if !value.contains(&0) && value.len() <= MAX_ID => {
                self.last_id = Some(text(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only; one too large to count is no delay we keep.
                if let Ok(ms) = text(value).parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if let Some(data) = self.data.take() {
            out.push(SseEvent { event, data });
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// `bytes` as text: borrowed when valid UTF-8 (nearly always, and checked far
/// faster than the lossy scan), with U+FFFD for broken sequences otherwise.
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_last_event_id_and_retry_are_kept_across_events_and_bounded() {
        let mut d = super::SseDecoder::new();
        let mut out = Vec::new();
        d.feed(b"id: e-1\nretry: 500\ndata: \n\n", &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(d.last_event_id(), Some("e-1"));
        assert_eq!(d.retry_ms(), Some(500));
        // An event without an id keeps the last one; bad values are ignored.
        d.feed(b"retry: 5x\ndata: {}\n\n", &mut out).unwrap();
        assert_eq!(d.last_event_id(), Some("e-1"));
        assert_eq!(d.retry_ms(), Some(500));
        let long = format!("id: {}\n\n", "x".repeat(super::MAX_ID + 1));
        d.feed(long.as_bytes(), &mut out).unwrap();
        d.feed(b"id: a\0b\n\n", &mut out).unwrap();
        assert_eq!(d.last_event_id(), Some("e-1"));
        d.feed(b"id: e-2\n\n", &mut out).unwrap();
        assert_eq!(d.last_event_id(), Some("e-2"));
        assert_eq!(out.len(), 2, "an id alone dispatches no event");
    }

    use super::*;

    fn decode_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in input.chunks(piece.max(1)) {
            d.feed(chunk, &mut out).unwrap();
        }
        d.finish(&mut out);
        out
    }

    #[test]
    fn same_events_whatever_the_read_boundaries() {
        let input = b": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: one\ndata: two\n\ndata: [DONE]\n\n";
        let want = vec![
            SseEvent {
                event: None,
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: Some("x".into()),
                data: "one\ntwo".into(),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
            },
        ];
        for piece in 1..input.len() {
            assert_eq!(decode_in_pieces(input, piece), want, "piece size {piece}");
        }
    }

    #[test]
    fn several_events_in_one_read() {
        let out = decode_in_pieces(b"data: a\n\ndata: b\n\ndata: c\n\n", 1000);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2].data, "c");
    }

    #[test]
    fn unterminated_last_event_is_flushed_on_finish() {
        let out = decode_in_pieces(b"data: tail", 3);
        assert_eq!(
            out,
            vec![SseEvent {
                event: None,
                data: "tail".into()
            }]
        );
    }

    #[test]
    fn comments_only_yield_nothing() {
        assert!(decode_in_pieces(b": ping\n\n: ping\n\n", 2).is_empty());
    }

    #[test]
    fn a_long_line_is_scanned_once_whatever_the_pieces() {
        // 16 MB in one line, arriving in 4 KiB reads: the old decoder rescanned
        // the whole pending line on every read (about 2 * 10^10 byte looks).
        let len = 16 * 1000 * 1000;
        let mut input = b"data: ".to_vec();
        input.resize(len, b'x');
        input.extend_from_slice(b"\n\n");
        let mut d = SseDecoder::with_limits(32 << 20, 32 << 20);
        let mut out = Vec::new();
        let started = std::time::Instant::now();
        for piece in input.chunks(4096) {
            d.feed(piece, &mut out).unwrap();
        }
        assert_eq!(d.bytes_scanned(), input.len() as u64);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), len - 6);
        // Generous: linear work is a few milliseconds even in debug builds.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_line_longer_than_the_cap_is_an_error_in_any_pieces() {
        let mut ok = b"data: ".to_vec();
        ok.resize(100, b'a');
        ok.extend_from_slice(b"\r\n\r\n");
        let mut long = b"data: ".to_vec();
        long.resize(101, b'a');
        long.extend_from_slice(b"\n\n");
        for piece in [1, 7, 64, 1000] {
            let mut d = SseDecoder::with_limits(100, 1000);
            let mut out = Vec::new();
            for chunk in ok.chunks(piece) {
                d.feed(chunk, &mut out).unwrap();
            }
            assert_eq!(out.len(), 1, "piece {piece}");
            let mut d = SseDecoder::with_limits(100, 1000);
            let err = long
                .chunks(piece)
                .map(|chunk| d.feed(chunk, &mut out))
                .find_map(Result::err);
            assert_eq!(err, Some(SseOverflow::Line { limit: 100 }), "piece {piece}");
            // The decoder stays failed and holds nothing.
            assert_eq!(
                d.feed(b"data: x\n\n", &mut out),
                Err(SseOverflow::Line { limit: 100 })
            );
            assert!(d.pending.is_empty());
        }
        // Without a line end at all, the cap still holds.
        let mut d = SseDecoder::with_limits(100, 1000);
        let endless = vec![b'z'; 50];
        let mut out = Vec::new();
        let err = (0..10)
            .map(|_| d.feed(&endless, &mut out))
            .find_map(Result::err);
        assert_eq!(err, Some(SseOverflow::Line { limit: 100 }));
        assert!(d.pending.len() <= 101);
    }

    #[test]
    fn data_lines_without_a_blank_line_hit_the_event_cap() {
        let mut d = SseDecoder::with_limits(100, 1000);
        let mut out = Vec::new();
        let err = (0..1000)
            .map(|_| d.feed(b"data: 0123456789\n", &mut out))
            .find_map(Result::err);
        assert_eq!(err, Some(SseOverflow::Event { limit: 1000 }));
        assert!(out.is_empty());
        assert!(d.data.is_none());
        assert_eq!(
            SseOverflow::Event { limit: 1000 }.to_string(),
            "a stream event exceeds 1000 bytes"
        );
    }

    #[test]
    fn an_oversized_event_left_at_the_end_is_dropped_and_reported() {
        let mut d = SseDecoder::with_limits(100, 20);
        let mut out = Vec::new();
        d.feed(b"data: 0123456789\ndata: 0123456789", &mut out)
            .unwrap();
        d.finish(&mut out);
        assert!(out.is_empty());
        assert_eq!(d.failure(), Some(SseOverflow::Event { limit: 20 }));
    }

    /// xorshift64*: a seeded generator, so a failure names its case.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_pieces_do_not_matter() {
        const TOKENS: &[&[u8]] = &[
            b"data:",
            b"data: ",
            b"event:",
            b"event: x",
            b":",
            b": ping",
            b"\n",
            b"\r\n",
            b"\r",
            b"\n\n",
            b"[DONE]",
            b"{\"a\":1}",
            b"\xff\xfe",
            b"\xe2\x82",
            b"\xac",
            b"id: 1",
            b"retry: 5",
            b"x",
            b" ",
            b"\0",
        ];
        for seed in 1..=300u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut input = Vec::new();
            for _ in 0..rng.below(200) {
                if rng.below(8) == 0 {
                    input.push(rng.next() as u8);
                } else {
                    input.extend_from_slice(TOKENS[rng.below(TOKENS.len())]);
                }
            }
            let (max_line, max_event) = (1 + rng.below(64), 1 + rng.below(256));
            let run = |piece: usize| {
                let mut d = SseDecoder::with_limits(max_line, max_event);
                let mut out = Vec::new();
                let mut err = None;
                for chunk in input.chunks(piece) {
                    if let Err(e) = d.feed(chunk, &mut out) {
                        err = Some(e);
                        break;
                    }
                }
                if err.is_none() {
                    d.finish(&mut out);
                    err = d.failure();
                }
                for ev in &out {
                    assert!(ev.data.len() <= max_event, "seed {seed}");
                }
                (out, err)
            };
            let whole = run(input.len().max(1));
            for piece in [1, 2, 3, 1 + rng.below(40)] {
                let split = run(piece);
                // The same input gives the same events, or fails the same
                // way (a split may fail a little earlier, never differently).
                match (&whole.1, &split.1) {
                    (None, None) => assert_eq!(whole.0, split.0, "seed {seed} piece {piece}"),
                    (Some(a), Some(b)) => assert_eq!(a, b, "seed {seed} piece {piece}"),
                    _ => panic!("seed {seed} piece {piece}: {:?} vs {:?}", whole.1, split.1),
                }
            }
        }
    }
}
