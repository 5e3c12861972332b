//! Prompt history: recalled with Up/Down (Ctrl-P/N) and kept across runs in a
//! file in the user's config directory, one entry per line with newlines and
//! backslashes escaped so multi-line prompts survive. Navigation is O(1) per
//! key whatever the history's size.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

pub const MAX_ENTRIES: usize = 10_000;

#[derive(Debug, Default)]
pub struct History {
    entries: Vec<String>,
    /// Index of the entry shown while navigating; `entries.len()` = the draft.
    pos: usize,
    /// What was being typed before navigation started.
    draft: Option<String>,
    file: Option<PathBuf>,
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl History {
    /// Loads `file` (a missing or unreadable file is an empty history).
    pub fn load(file: Option<PathBuf>) -> History {
        let mut entries: Vec<String> = file
            .as_ref()
            .and_then(|f| fs::read(f).ok())
            .map(|bytes| {
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(unescape)
                    .collect()
            })
            .unwrap_or_default();
        if entries.len() > MAX_ENTRIES {
            entries.drain(..entries.len() - MAX_ENTRIES);
        }
        History {
            pos: entries.len(),
            entries,
            draft: None,
            file,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records a submitted prompt (not blanks, not a repeat of the last one)
    /// and appends it to the file, rewriting the file only when it has grown
    /// to twice the limit.
    pub fn add(&mut self, entry: &str) {
        self.draft = None;
        if entry.trim().is_empty() || self.entries.last().map(String::as_str) == Some(entry) {
            self.pos = self.entries.len();
            return;
        }
        self.entries.push(entry.to_string());
        let compact = self.entries.len() > 2 * MAX_ENTRIES;
        if compact {
            self.entries.drain(..self.entries.len() - MAX_ENTRIES);
        }
        self.pos = self.entries.len();
        if let Some(path) = &self.file {
            // History is a convenience: failing to save it must not disturb the user.
            let _ = if compact {
                self.rewrite(path)
            } else {
                append(path, entry)
            };
        }
    }

    fn rewrite(&self, path: &std::path::Path) -> std::io::Result<()> {
        let text: String = self.entries.iter().map(|e| escape(e) + "\n").collect();
        crate::atomic_file::replace(path, text.as_bytes(), crate::atomic_file::PRIVATE)
    }

    /// The older entry, saving `current` as the draft when navigation starts.
    pub fn older(&mut self, current: &str) -> Option<&str> {
        if self.pos == 0 {
            return None;
        }
        if self.pos == self.entries.len() {
            self.draft = Some(current.to_string());
        }
        self.pos -= 1;
        Some(&self.entries[self.pos])
    }

    /// The newest entry before index `before` that contains `query` (Ctrl-R):
    /// its index. A linear scan from the newest end; at 10,000 entries it
    /// stays well inside a keystroke's budget.
    pub fn search(&self, query: &str, before: usize) -> Option<usize> {
        let end = before.min(self.entries.len());
        self.entries[..end].iter().rposition(|e| e.contains(query))
    }

    pub fn entry(&self, index: usize) -> Option<&str> {
        self.entries.get(index).map(String::as_str)
    }

    /// The newer entry, or the draft once past the newest.
    pub fn newer(&mut self) -> Option<String> {
        if self.pos >= self.entries.len() {
            return None;
        }
        self.pos += 1;
        if self.pos == self.entries.len() {
            return Some(self.draft.take().unwrap_or_default());
        }
        Some(self.entries[self.pos].clone())
    }
}

fn append(path: &PathBuf, entry: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    f.write_all((escape(entry) + "\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn navigation_returns_to_the_draft() {
        let mut h = History::load(None);
        h.add("one");
        h.add("two");
        h.add("two");
        h.add("  ");
        assert_eq!(h.len(), 2);
        assert_eq!(h.older("typing"), Some("two"));
        assert_eq!(h.older("two"), Some("one"));
        assert_eq!(h.older("one"), None);
        assert_eq!(h.newer().as_deref(), Some("two"));
        assert_eq!(h.newer().as_deref(), Some("typing"));
        assert_eq!(h.newer(), None);
    }

    #[test]
    fn search_finds_older_matches_in_turn() {
        let mut h = History::load(None);
        for e in ["cargo build", "ls", "cargo test", "git status"] {
            h.add(e);
        }
        let newest = h.search("cargo", h.len());
        assert_eq!(newest.and_then(|i| h.entry(i)), Some("cargo test"));
        let older = newest.and_then(|i| h.search("cargo", i));
        assert_eq!(older.and_then(|i| h.entry(i)), Some("cargo build"));
        assert_eq!(older.and_then(|i| h.search("cargo", i)), None);
        assert_eq!(h.search("nothing like it", h.len()), None);
    }

    #[test]
    fn multi_line_entries_survive_the_file() {
        let path = std::env::temp_dir().join(format!("buddy-history-{}", std::process::id()));
        let _ = fs::remove_file(&path);
        let mut h = History::load(Some(path.clone()));
        h.add("line one\nline \\n two");
        h.add("plain");
        let mut again = History::load(Some(path.clone()));
        assert_eq!(again.older(""), Some("plain"));
        assert_eq!(again.older(""), Some("line one\nline \\n two"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let _ = fs::remove_file(&path);
    }

    #[test]
    fn a_compacted_file_is_replaced_whole_and_stays_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir =
            std::env::temp_dir().join(format!("buddy-history-compact-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("history");
        let mut h = History::load(Some(path.clone()));
        h.add("first");
        h.add("second");
        h.rewrite(&path).unwrap();
        let again = History::load(Some(path.clone()));
        assert_eq!(again.entries, ["first", "second"]);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Nothing beside it: no temporary file left over.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        let _ = fs::remove_dir_all(&dir);
    }
}
