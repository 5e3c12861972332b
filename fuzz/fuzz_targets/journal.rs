//! The session journal reader on arbitrary bytes: parsed or refused, never a
//! panic; what it keeps ends on a record boundary.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = buddy::session::journal::parse(data) {
        assert!(parsed.good_len as usize <= data.len());
        assert_eq!(parsed.good_len + parsed.dropped, data.len() as u64);
        assert!(parsed.good_len == 0 || data[parsed.good_len as usize - 1] == b'\n');
    }
});
