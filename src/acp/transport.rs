//! The ACP connection's stdio: newline-delimited JSON-RPC read from stdin
//! and written to stdout, on tokio's own stdio (the SDK's `stdio` adapter
//! would bring a second thread pool). A line is bounded: one longer than
//! `MAX_LINE` is dropped whole and handed on as text that is not JSON, so
//! the client gets a parse error for it and the connection goes on. stdout
//! carries these lines and nothing else.

use bytes::BytesMut;
use futures_util::{Sink, Stream};
use std::io;
use tokio::io::AsyncWriteExt;
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};

/// The longest message taken, in bytes: a prompt with a few screenshots
/// (base64) fits; past this the line is refused rather than held.
pub const MAX_LINE: usize = 32 * 1024 * 1024;

/// Lines from stdin, without their line ends.
pub fn incoming() -> impl Stream<Item = io::Result<String>> + Send + 'static {
    FramedRead::new(tokio::io::stdin(), Messages::new(MAX_LINE))
}

/// tokio-util's bounded line codec, with blank lines skipped and its two
/// refusals (a line past the cap, a line that is not UTF-8) handed on as text
/// that is not JSON. They must not stay errors: `FramedRead` ends its stream
/// at a decoder's error, and the connection has to go on.
struct Messages {
    lines: LinesCodec,
    max: usize,
}

impl Messages {
    fn new(max: usize) -> Self {
        Self {
            lines: LinesCodec::new_with_max_length(max),
            max,
        }
    }

    fn message(
        &self,
        line: Result<Option<String>, LinesCodecError>,
    ) -> Option<io::Result<Option<String>>> {
        match line {
            // A blank line is no message: nothing to answer.
            Ok(Some(line)) if line.trim().is_empty() => None,
            Ok(line) => Some(Ok(line)),
            // The codec drops the rest of the line itself, up to its end.
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                Some(Ok(Some(format!("message longer than {} bytes", self.max))))
            }
            // The codec's only error of its own making; the line is consumed.
            Err(LinesCodecError::Io(_)) => Some(Ok(Some("message is not UTF-8".into()))),
        }
    }
}

impl Decoder for Messages {
    type Item = String;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<String>> {
        loop {
            let line = self.lines.decode(buf);
            if let Some(message) = self.message(line) {
                return message;
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<String>> {
        loop {
            let line = self.lines.decode_eof(buf);
            if let Some(message) = self.message(line) {
                return message;
            }
        }
    }
}

/// Writes each message as one line on stdout, flushed at once so an editor
/// sees every update as it happens.
pub fn outgoing() -> impl Sink<String, Error = io::Error> + Send + 'static {
    futures_util::sink::unfold(tokio::io::stdout(), |mut out, line: String| async move {
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        out.flush().await?;
        Ok::<_, io::Error>(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_split_and_bounded() {
        use futures_util::StreamExt;
        let input: &[u8] = b"{\"a\":1}\r\n\n  \n0123456789abcdef\n\xff\n{}";
        let got: Vec<String> = FramedRead::new(input, Messages::new(8))
            .map(|m| m.unwrap())
            .collect()
            .await;
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], "{\"a\":1}");
        // The long line and the one that is not UTF-8 stand as non-JSON text,
        // and what follows them is still read.
        for refused in &got[1..3] {
            assert!(serde_json::from_str::<serde_json::Value>(refused).is_err());
        }
        assert_eq!(got[1], "message longer than 8 bytes");
        assert_eq!(got[3], "{}");
    }
}
