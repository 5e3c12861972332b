//! The config parser on arbitrary text: an error, never a panic, and the
//! error is one bounded line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = buddy::config::parse(&text, Some(Path::new("/fuzz/buddy.toml"))) {
        let line = e.to_string();
        assert!(!line.contains('\n'));
        assert!(line.chars().count() < 1000);
    }
});
