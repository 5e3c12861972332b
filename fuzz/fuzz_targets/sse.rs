//! The SSE decoder on arbitrary bytes, fed in two pieces split where the
//! first byte says: it must never panic, and a split must not change what it
//! decodes.
#![no_main]

use buddy::wire::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(first) % (rest.len() + 1);
    let mut whole = Vec::new();
    let mut d = SseDecoder::new();
    let whole_ok = d.feed(rest, &mut whole).is_ok();
    if whole_ok {
        d.finish(&mut whole);
    }
    let mut split = Vec::new();
    let mut d = SseDecoder::new();
    let split_ok = d.feed(&rest[..at], &mut split).is_ok() && d.feed(&rest[at..], &mut split).is_ok();
    if split_ok {
        d.finish(&mut split);
    }
    if whole_ok && split_ok {
        assert_eq!(whole.len(), split.len());
        for (a, b) in whole.iter().zip(&split) {
            assert_eq!(a.event, b.event);
            assert_eq!(a.data, b.data);
        }
    }
});
