//! The shell analyser on arbitrary text: the parser, the denylist, the
//! read-only classifier and the "always" prefix reader must each answer,
//! never panic; a refusal is one bounded line; words read as plain
//! literals read back the same once quoted.
#![no_main]

use buddy::tools::denylist::Denylist;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = buddy::shell::parse(&text);
    let _ = buddy::shell::readonly::is_read_only(&text);
    if let Some(denial) = Denylist::new(&[]).check(&text) {
        let line = denial.to_string();
        assert!(!line.contains('\n'));
        assert!(line.chars().count() < 400);
    }
    if let Some(words) = buddy::shell::literal_words(&text) {
        let quoted: Vec<String> = words.iter().map(|w| buddy::host::shell_quote(w)).collect();
        assert_eq!(buddy::shell::literal_words(&quoted.join(" ")), Some(words));
    }
});
