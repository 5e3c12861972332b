//! What buddy takes from its own process, the environment and the working
//! directory, read once when a command starts (`main`, before any other
//! thread) and asked of that reading from then on. Nothing else reads the
//! process: a part that looked later could see a different world from the
//! part that looked first (a directory removed under buddy, a variable a
//! library set), and this file is the one list of where buddy looks.
//! Guard: `architecture::the_process_is_read_in_one_place`.
//!
//! The commands buddy starts still inherit the real environment, filtered
//! by `host::scrub`; this is only what buddy itself decides by.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The process as it was when buddy started.
#[derive(Debug)]
pub struct Facts {
    vars: HashMap<OsString, OsString>,
    /// `None` when the directory could not be read (removed under us).
    cwd: Option<PathBuf>,
}

static FACTS: OnceLock<Facts> = OnceLock::new();

/// Reads the process, the first time only; `main` calls it first thing.
/// Anything that asks before (the library's own tests, a benchmark) gets
/// the reading taken at that first question.
pub fn facts() -> &'static Facts {
    FACTS.get_or_init(|| Facts {
        vars: std::env::vars_os().collect(),
        cwd: std::env::current_dir().ok(),
    })
}

impl Facts {
    /// A variable's value, when it is set.
    pub fn var_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// A variable's value, when it is set and is UTF-8 (as `std::env::var`).
    pub fn var(&self, name: &str) -> Option<String> {
        self.var_os(name)?.to_str().map(str::to_string)
    }

    /// The directory buddy started in; `.` when it could not be read.
    pub fn cwd(&self) -> &Path {
        self.cwd.as_deref().unwrap_or(Path::new("."))
    }
}

/// `facts().var(name)`.
pub fn var(name: &str) -> Option<String> {
    facts().var(name)
}

/// `facts().var_os(name)`, owned.
pub fn var_os(name: &str) -> Option<OsString> {
    facts().var_os(name).map(OsStr::to_os_string)
}

/// `facts().cwd()`, owned.
pub fn cwd() -> PathBuf {
    facts().cwd().to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reading_is_the_process_as_it_was_at_the_first_question() {
        let f = facts();
        assert_eq!(f.var_os("PATH"), std::env::var_os("PATH").as_deref());
        assert_eq!(f.var("PATH"), std::env::var("PATH").ok());
        assert_eq!(f.cwd(), std::env::current_dir().unwrap());
        assert_eq!(f.var("BUDDY_SURELY_NOT_SET_ANYWHERE"), None);
        // Later asks get the same reading, not a new one.
        assert!(std::ptr::eq(f, facts()));
    }
}
