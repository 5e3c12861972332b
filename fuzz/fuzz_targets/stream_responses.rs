//! The Responses stream parser behind the real SSE decoder, on arbitrary bytes:
//! whatever a server sends, it must end in a response or an error, never a panic.
#![no_main]

use buddy::provider::http::{Flow, Protocol};
use buddy::provider::responses::Responses;
use buddy::wire::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    if decoder.feed(data, &mut events).is_err() {
        return;
    }
    decoder.finish(&mut events);
    let sink = |_: buddy::provider::StreamEvent| {};
    let mut parser = Responses.stream_parser();
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
    // The same bytes as a whole (non-streamed) body.
    let _ = Responses.parse_json(data, &sink);
});
