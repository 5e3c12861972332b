//! The Completions stream parser behind the real SSE decoder, on arbitrary bytes
//! (the drive is shared: `buddy_fuzz::stream`).
#![no_main]

use buddy::provider::completions::Completions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| buddy_fuzz::stream(&Completions, data));
