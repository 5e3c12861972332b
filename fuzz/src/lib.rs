//! Code the fuzz targets share. The three stream targets differ only in the
//! protocol, so the drive (SSE decoder, then the protocol's stream parser,
//! then the same bytes as a whole body) is written once here.

use buddy::provider::http::{Flow, Protocol};
use buddy::wire::sse::SseDecoder;

/// Feeds arbitrary bytes through the real SSE decoder into `protocol`'s
/// stream parser, and then to its whole-body parser: whatever a server
/// sends must end in a response or an error, never a panic.
pub fn stream(protocol: &dyn Protocol, data: &[u8]) {
    let sink = |_: buddy::provider::StreamEvent| {};
    // The same bytes as a whole (non-streamed) body, whatever the stream did.
    let _ = protocol.parse_json(data, &sink);
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    if decoder.feed(data, &mut events).is_err() {
        return;
    }
    decoder.finish(&mut events);
    let mut parser = protocol.stream_parser();
    let mut done = false;
    for ev in &events {
        match parser.event(ev, &sink) {
            Ok(Flow::Done) => {
                done = true;
                break;
            }
            Ok(Flow::More) => {}
            Err(_) => return,
        }
    }
    let _ = parser.finish(done);
}
