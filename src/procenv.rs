//! buddy's own initial environment, as `/proc/PID/environ` shows it to any
//! process of the same user — and to root whatever the dumpable flag says —
//! scrubbed of secrets. The kernel reads that file from the process's memory
//! (the block the program started with), so the only way to keep a key out
//! of it is to overwrite the key there. Each secret variable is first copied
//! into a fresh allocation (`set_var`), so buddy and the commands it starts
//! still see the real value; then its bytes in the original block are
//! overwritten. Which commands get which variables is `host::scrub`'s job,
//! not this module's.

use std::ffi::{CStr, OsStr, OsString};
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;

extern "C" {
    /// The C library's environment array.
    static environ: *const *const c_char;
}

/// Names whose values buddy treats as secrets before any config is read:
/// its own and the providers' keys, and the usual spellings of tokens,
/// passwords and keys.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const SUFFIXES: &[&str] = &[
        "_API_KEY",
        "_APIKEY",
        "_TOKEN",
        "_SECRET",
        "_SECRET_KEY",
        "_ACCESS_KEY",
        "_PASSWORD",
        "_PASSWD",
        "_CREDENTIALS",
    ];
    upper == "API_KEY" || SUFFIXES.iter().any(|s| upper.ends_with(s))
}

/// Overwrites, in the original environment block, the values of every
/// variable for which `secret` holds, after moving each to a fresh copy.
/// Call it before other threads start (main does, for the names that look
/// secret) or, for names only the config reveals, where std's own lock on
/// the environment is the only access (buddy's code reads the environment
/// through std alone).
pub fn scrub(secret: impl Fn(&str) -> bool) {
    for (value_at, len, name, value) in original_entries(&secret) {
        // The fresh copy first: from here on the C library's array points at
        // it, and nothing refers to the original bytes any more.
        std::env::set_var(&name, &value);
        // SAFETY: `value_at..value_at + len` lies inside a NUL-terminated
        // entry of the block the process started with (writable, as the
        // stack it was given is), and no pointer to it remains in `environ`
        // after the `set_var` above replaced that entry.
        unsafe {
            std::ptr::write_bytes(value_at, b'*', len);
        }
    }
}

/// The entries of `environ` that still point into the original block and
/// name a secret: where the value starts, its length, the name and value.
fn original_entries(secret: &impl Fn(&str) -> bool) -> Vec<(*mut u8, usize, OsString, OsString)> {
    let mut out = Vec::new();
    // SAFETY: `environ` is a NULL-terminated array of NUL-terminated strings
    // maintained by the C library; it is read here, not changed.
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return out;
        }
        while !(*entry).is_null() {
            let ptr = *entry;
            entry = entry.add(1);
            let bytes = CStr::from_ptr(ptr).to_bytes();
            let Some(eq) = bytes.iter().position(|&b| b == b'=') else {
                continue;
            };
            let name = OsStr::from_bytes(&bytes[..eq]);
            let value = &bytes[eq + 1..];
            if value.is_empty() || !name.to_str().is_some_and(secret) {
                continue;
            }
            out.push((
                ptr.add(eq + 1) as *mut u8,
                value.len(),
                name.to_owned(),
                OsStr::from_bytes(value).to_owned(),
            ));
        }
    }
    if out.is_empty() {
        return out;
    }
    // Only now the block's bounds (a file read): an entry outside it is
    // already a copy set_var made, not in what /proc shows.
    let Some((start, end)) = original_block() else {
        return Vec::new();
    };
    out.retain(|(at, len, _, _)| (*at as usize) >= start && (*at as usize) + len <= end);
    out
}

/// The bounds of the environment block the kernel shows as
/// `/proc/self/environ` (fields 50 and 51 of `/proc/self/stat`), so only
/// bytes inside it are ever written.
fn original_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields after its closing parenthesis, which is field 3's start.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field n of the whole line is rest[n - 3].
    let start = fields.get(50 - 3)?.parse().ok()?;
    let end = fields.get(51 - 3)?.parse().ok()?;
    (start < end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for n in [
            "OPENAI_API_KEY",
            "BUDDY_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "BUDDY_SERVE_TOKEN",
            "db_password",
        ] {
            assert!(looks_secret(n), "{n}");
        }
        for n in ["PATH", "HOME", "TERM", "TOKENIZERS_PARALLELISM", "KEYMAP"] {
            assert!(!looks_secret(n), "{n}");
        }
    }

    #[test]
    fn the_block_is_found() {
        let (start, end) = original_block().expect("env_start and env_end");
        assert!(end > start);
    }
}
