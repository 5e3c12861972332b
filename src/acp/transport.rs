//! The ACP connection's stdio: newline-delimited JSON-RPC read from stdin
//! and written to stdout, on tokio's own stdio (the SDK's `stdio` adapter
//! would bring a second thread pool). A line is bounded: one longer than
//! `MAX_LINE` is dropped whole and handed on as text that is not JSON, so
//! the client gets a parse error for it and the connection goes on. stdout
//! carries these lines and nothing else.

use futures_util::{Sink, Stream};
use std::io;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The longest message taken, in bytes: a prompt with a few screenshots
/// (base64) fits; past this the line is refused rather than held.
pub const MAX_LINE: usize = 32 * 1024 * 1024;

/// Lines from stdin, without their line ends.
pub fn incoming() -> impl Stream<Item = io::Result<String>> + Send + 'static {
    let reader = BufReader::new(tokio::io::stdin());
    futures_util::stream::unfold(reader, |mut reader| async move {
        loop {
            return match read_line(&mut reader, MAX_LINE).await {
                // A blank line is no message: nothing to answer.
                Ok(Some(line)) if line.trim().is_empty() => continue,
                Ok(Some(line)) => Some((Ok(line), reader)),
                Ok(None) => None,
                Err(e) => Some((Err(e), reader)),
            };
        }
    })
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

/// One line of at most `max` bytes (`None` at the end of input). A longer
/// line is read to its end and dropped; what stands for it is not JSON.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut over = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if line.is_empty() && !over {
                return Ok(None);
            }
            break;
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if !over {
            if line.len() + take > max {
                over = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        reader.consume(if done { take + 1 } else { take });
        if done {
            break;
        }
    }
    if over {
        return Ok(Some(format!("message longer than {max} bytes")));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_split_and_bounded() {
        let input: &[u8] = b"{\"a\":1}\r\n0123456789\n{}";
        let mut r = BufReader::new(input);
        assert_eq!(read_line(&mut r, 8).await.unwrap().unwrap(), "{\"a\":1}");
        let long = read_line(&mut r, 8).await.unwrap().unwrap();
        assert!(serde_json::from_str::<serde_json::Value>(&long).is_err());
        assert_eq!(read_line(&mut r, 8).await.unwrap().unwrap(), "{}");
        assert!(read_line(&mut r, 8).await.unwrap().is_none());
    }
}
