//! Incremental Server-Sent Events decoder. Bytes go in as they arrive from the
//! socket (events split across reads, several events per read, LF or CRLF line
//! ends); complete events come out. Comment lines (`: keep-alive`) are dropped.
//!
//! Hand-written rather than a crate: it is a few dozen lines, works on plain byte
//! slices (so it is trivially fuzzable and needs no `futures` stream plumbing), and
//! the line-length cap below is ours to choose.

/// One dispatched event: its `event:` name (if any) and its joined `data:` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// A line longer than this is a broken or hostile stream, not a chunk.
const MAX_PENDING: usize = 16 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct SseDecoder {
    pending: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseOverflow;

impl std::fmt::Display for SseOverflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream line exceeds {MAX_PENDING} bytes")
    }
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes and appends every event they complete to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseOverflow> {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(pos) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + pos;
            let mut line = &self.pending[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = String::from_utf8_lossy(line).into_owned();
            start = end + 1;
            self.line(&line, out);
        }
        self.pending.drain(..start);
        if self.pending.len() > MAX_PENDING {
            return Err(SseOverflow);
        }
        Ok(())
    }

    /// Flushes an event left without its closing blank line when the stream ends.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            let line = String::from_utf8_lossy(&rest);
            let line = line.trim_end_matches('\r').to_string();
            self.line(&line, out);
        }
        self.dispatch(out);
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if let Some(data) = self.data.take() {
            out.push(SseEvent { event, data });
        }
    }
}

#[cfg(test)]
mod tests {
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
}
