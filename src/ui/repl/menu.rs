//! The completion menu under the cursor's word: slash commands (typed `/` at
//! the start of the input) and `@path` file mentions. Pure data and
//! filtering; the editor decides when it opens and draws it. Path listings
//! are bounded and cached per directory, so a keystroke costs a filter over
//! at most `MAX_LISTED` names, not a directory walk.

use crate::ui::style::visible_width;
use std::path::{Path, PathBuf};

/// At most this many entries of one directory are read.
pub const MAX_LISTED: usize = 2_000;
/// Rows the menu shows at once; the selection scrolls through the rest.
pub const ROWS: usize = 8;
/// Completions kept per keystroke: more than anyone scrolls through, and
/// the cost of a key in a huge directory stays small.
pub const MAX_ITEMS: usize = 200;
/// Directories never offered: big, generated or not the user's files.
const SKIPPED: &[&str] = &[".git", "target", "node_modules"];

/// What the word being completed is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Slash,
    Mention,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What replaces the word (`/help`, `@src/`).
    pub insert: String,
    /// One line about it (a command's description; empty for paths).
    pub detail: String,
}

#[derive(Debug, Clone)]
pub struct Menu {
    pub kind: Kind,
    /// Where the word starts in the buffer (a char index).
    pub start: usize,
    pub items: Vec<Item>,
    pub selected: usize,
}

impl Menu {
    pub fn next(&mut self) {
        if !self.items.is_empty() {
            self.selected = (self.selected + 1) % self.items.len();
        }
    }

    pub fn prev(&mut self) {
        if !self.items.is_empty() {
            let n = self.items.len();
            self.selected = (self.selected + n - 1) % n;
        }
    }

    pub fn current(&self) -> Option<&Item> {
        self.items.get(self.selected)
    }

    /// The visible rows, each cut to `width` columns; the selected one marked.
    /// `dim` styles the others and the descriptions.
    pub fn render(&self, width: usize, dim: &dyn Fn(&str) -> String) -> Vec<String> {
        let first = (self.selected + 1).saturating_sub(ROWS);
        let name_width = self
            .items
            .iter()
            .map(|i| i.insert.chars().count())
            .max()
            .unwrap_or(0)
            .min(40);
        let mut rows = Vec::new();
        for (i, item) in self.items.iter().enumerate().skip(first).take(ROWS) {
            let mark = if i == self.selected { "›" } else { " " };
            let mut line = format!("  {mark} {:<name_width$}", item.insert);
            if !item.detail.is_empty() {
                line.push_str("  ");
                line.push_str(&item.detail);
            }
            // File names are outside text.
            let line = cut(&crate::text::visible(&line), width.saturating_sub(1));
            rows.push(if i == self.selected { line } else { dim(&line) });
        }
        if self.items.len() > ROWS {
            rows.push(dim(&cut(
                &format!(
                    "    ({} of {}; ↑/↓ to move, Tab or Enter to take, Esc to close)",
                    self.selected + 1,
                    self.items.len()
                ),
                width.saturating_sub(1),
            )));
        }
        rows
    }
}

/// `s` cut to `width` display columns.
fn cut(s: &str, width: usize) -> String {
    if visible_width(s) <= width {
        return s.to_string();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        w += cw;
        out.push(c);
    }
    out.push('…');
    out
}

/// The word the cursor ends, when it can be completed: the whole input while
/// it is a `/word` (no spaces yet), or an `@word` that starts the input or
/// follows whitespace. Returns its kind, start and text (without `@`).
pub fn word_at(chars: &[char], cursor: usize) -> Option<(Kind, usize, String)> {
    if cursor != chars.len() && !chars[cursor].is_whitespace() {
        return None;
    }
    let start = chars[..cursor]
        .iter()
        .rposition(|c| c.is_whitespace())
        .map_or(0, |i| i + 1);
    let word: String = chars[start..cursor].iter().collect();
    if start == 0 && word.starts_with('/') && cursor == chars.len() {
        return Some((Kind::Slash, 0, word));
    }
    let rest = word.strip_prefix('@')?;
    Some((Kind::Mention, start, rest.to_string()))
}

/// The commands whose names start with `typed`, in table order.
pub fn slash_items(typed: &str, table: &[(&str, &str)]) -> Vec<Item> {
    table
        .iter()
        .filter(|(name, _)| name.starts_with(typed))
        .map(|(name, detail)| Item {
            insert: name.to_string(),
            detail: detail.to_string(),
        })
        .collect()
}

/// One directory's entries: (name, is a directory), sorted, bounded.
#[derive(Debug, Default)]
pub struct Listing {
    pub dir: PathBuf,
    pub entries: Vec<(String, bool)>,
}

impl Listing {
    pub fn read(dir: &Path) -> Listing {
        let mut entries = Vec::new();
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten().take(MAX_LISTED) {
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                if SKIPPED.contains(&name.as_str()) {
                    continue;
                }
                // Symlinks to directories count as directories.
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir())
                    || (e.file_type().is_ok_and(|t| t.is_symlink())
                        && std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()));
                entries.push((name, is_dir));
            }
        }
        entries.sort();
        Listing {
            dir: dir.to_path_buf(),
            entries,
        }
    }
}

/// Splits a typed mention (`src/ma`) into its directory part (`src/`) and the
/// name prefix (`ma`).
pub fn split_mention(typed: &str) -> (&str, &str) {
    match typed.rfind('/') {
        Some(i) => (&typed[..=i], &typed[i + 1..]),
        None => ("", typed),
    }
}

/// The entries of `listing` (the directory of `typed`) that complete it:
/// directories end in `/`; hidden names only when the typed name starts with
/// a dot.
pub fn path_items(typed: &str, listing: &Listing) -> Vec<Item> {
    let (dir, name) = split_mention(typed);
    let hidden = name.starts_with('.');
    listing
        .entries
        .iter()
        .filter(|(n, _)| n.starts_with(name) && (hidden || !n.starts_with('.')))
        .take(MAX_ITEMS)
        .map(|(n, is_dir)| Item {
            insert: format!("@{dir}{n}{}", if *is_dir { "/" } else { "" }),
            detail: String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[(&str, &str)] = &[
        ("/status", "model and tokens"),
        ("/session", "sessions"),
        ("/help", "this list"),
    ];

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn the_word_at_the_cursor() {
        let c = chars("/st");
        assert_eq!(word_at(&c, 3), Some((Kind::Slash, 0, "/st".into())));
        let c = chars("/status now");
        assert_eq!(word_at(&c, 11), None);
        let c = chars("look at @src/ma");
        assert_eq!(word_at(&c, 15), Some((Kind::Mention, 8, "src/ma".into())));
        let c = chars("mail a@b");
        assert_eq!(word_at(&c, 8), None);
        let c = chars("@x rest");
        assert_eq!(word_at(&c, 2), Some((Kind::Mention, 0, "x".into())));
        // Inside a word: nothing.
        assert_eq!(word_at(&c, 1), None);
    }

    #[test]
    fn slash_items_filter_by_prefix() {
        let all = slash_items("/", TABLE);
        assert_eq!(all.len(), 3);
        let s: Vec<_> = slash_items("/s", TABLE)
            .into_iter()
            .map(|i| i.insert)
            .collect();
        assert_eq!(s, ["/status", "/session"]);
        assert!(slash_items("/x", TABLE).is_empty());
    }

    #[test]
    fn path_items_mark_directories_and_hide_dot_files() {
        let listing = Listing {
            dir: PathBuf::from("src"),
            entries: vec![
                (".hidden".into(), false),
                ("main.rs".into(), false),
                ("menu".into(), true),
                ("other.rs".into(), false),
            ],
        };
        let got: Vec<_> = path_items("src/m", &listing)
            .into_iter()
            .map(|i| i.insert)
            .collect();
        assert_eq!(got, ["@src/main.rs", "@src/menu/"]);
        assert_eq!(path_items("src/", &listing).len(), 3);
        let got: Vec<_> = path_items("src/.", &listing)
            .into_iter()
            .map(|i| i.insert)
            .collect();
        assert_eq!(got, ["@src/.hidden"]);
    }

    #[test]
    fn listings_skip_build_and_vcs_directories() {
        let dir = std::env::temp_dir().join(format!("buddy-menu-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["target", ".git", "node_modules", "src"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("a.txt"), "x").unwrap();
        let l = Listing::read(&dir);
        assert_eq!(
            l.entries,
            [("a.txt".to_string(), false), ("src".to_string(), true)]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn render_scrolls_to_the_selection_and_cuts_long_rows() {
        let items: Vec<Item> = (0..20)
            .map(|i| Item {
                insert: format!("/c{i}"),
                detail: "d".repeat(200),
            })
            .collect();
        let mut m = Menu {
            kind: Kind::Slash,
            start: 0,
            items,
            selected: 0,
        };
        for _ in 0..10 {
            m.next();
        }
        let rows = m.render(40, &|s: &str| s.to_string());
        assert_eq!(rows.len(), ROWS + 1);
        assert!(rows.iter().any(|r| r.contains("› /c10")), "{rows:?}");
        assert!(rows.iter().all(|r| visible_width(r) < 40));
        m.prev();
        assert_eq!(m.current().map(|i| i.insert.as_str()), Some("/c9"));
    }
}
