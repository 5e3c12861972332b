//! `@path` mentions in a prompt: each one that names a readable regular file
//! in the local working directory has the file's text attached for the model
//! (the prompt itself goes as typed). Reading is bounded per file and in
//! total; whatever is cut, skipped or missing is said in one line each.

use std::io::Read;
use std::path::Path;

/// At most this much of one file is attached.
pub const PER_FILE: usize = 64 * 1024;
/// At most this much of all files of one prompt.
pub const TOTAL: usize = 256 * 1024;

/// The attachment for one prompt.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Attached {
    /// The text for the model, or `None` when no file was attached.
    pub context: Option<String>,
    /// One line each for the user: what was cut, skipped or not found.
    pub notes: Vec<String>,
}

/// The `@word`s of `text`: an `@` at the start or after whitespace, followed
/// by at least one non-space character. Punctuation that ends a sentence
/// (`see @a.rs.`) is not part of the path.
pub fn find(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', ';', ':', '!', '?', ')', '"', '\'']);
        let path = path
            .strip_suffix('.')
            .filter(|p| !p.is_empty() && !p.ends_with('.'))
            .unwrap_or(path);
        if !path.is_empty() && !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

/// Reads the mentioned files of `text` below `cwd`, within the caps.
pub fn attach(text: &str, cwd: &Path) -> Attached {
    attach_capped(text, cwd, PER_FILE, TOTAL)
}

fn attach_capped(text: &str, cwd: &Path, per_file: usize, total: usize) -> Attached {
    let mut out = Attached::default();
    let mut body = String::new();
    let mut used = 0usize;
    for path in find(text) {
        let full = cwd.join(&path);
        let shown = crate::text::visible(&path).into_owned();
        let meta = match std::fs::metadata(&full) {
            Ok(m) => m,
            Err(_) => {
                out.notes
                    .push(format!("@{shown}: no such file; sent as typed"));
                continue;
            }
        };
        if !meta.is_file() {
            out.notes
                .push(format!("@{shown}: not a regular file; sent as typed"));
            continue;
        }
        let room = per_file.min(total - used);
        if room == 0 {
            out.notes.push(format!(
                "@{shown}: not attached, the {} KiB for all files is used",
                total / 1024
            ));
            continue;
        }
        let mut bytes = Vec::new();
        let read =
            std::fs::File::open(&full).and_then(|f| f.take(room as u64).read_to_end(&mut bytes));
        if let Err(e) = read {
            out.notes
                .push(format!("@{shown}: cannot read it ({e}); sent as typed"));
            continue;
        }
        if bytes.contains(&0) {
            out.notes
                .push(format!("@{shown}: binary file; not attached"));
            continue;
        }
        used += bytes.len();
        let size = meta.len();
        let content = String::from_utf8_lossy(&bytes);
        let cut = size > bytes.len() as u64;
        if cut {
            out.notes.push(format!(
                "@{shown}: only the first {} of {size} bytes attached",
                bytes.len()
            ));
            body.push_str(&format!(
                "<file path=\"{path}\" note=\"cut: first {} of {size} bytes\">\n",
                bytes.len()
            ));
        } else {
            body.push_str(&format!("<file path=\"{path}\">\n"));
        }
        body.push_str(&content);
        if !content.ends_with('\n') {
            body.push('\n');
        }
        body.push_str("</file>\n");
    }
    if !body.is_empty() {
        out.context = Some(format!(
            "Files I mention in my next message (@path), read from the working directory:\n\n{body}"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_words_starting_with_at() {
        assert_eq!(find("look at @src/a.rs and @b.txt."), ["src/a.rs", "b.txt"]);
        assert_eq!(find("mail me@example.com @ alone"), Vec::<String>::new());
        assert_eq!(find("@x @x (@y)"), ["x"]);
        assert_eq!(find("@../up.txt, please"), ["../up.txt"]);
    }

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("buddy-mentions-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn files_are_attached_and_missing_ones_noted() {
        let d = dir("basic");
        std::fs::write(d.join("a.txt"), "alpha\n").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        let a = attach("see @a.txt and @nope.txt and @sub", &d);
        let ctx = a.context.unwrap();
        assert!(
            ctx.contains("<file path=\"a.txt\">\nalpha\n</file>"),
            "{ctx}"
        );
        assert_eq!(
            a.notes,
            [
                "@nope.txt: no such file; sent as typed",
                "@sub: not a regular file; sent as typed"
            ]
        );
        assert_eq!(attach("nothing here", &d), Attached::default());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn caps_cut_files_and_stop_at_the_total() {
        let d = dir("caps");
        std::fs::write(d.join("big"), "x".repeat(100)).unwrap();
        std::fs::write(d.join("small"), "y".repeat(10)).unwrap();
        std::fs::write(d.join("bin"), b"a\0b").unwrap();
        let a = attach_capped("@big @small @bin", &d, 40, 45);
        let ctx = a.context.unwrap();
        assert!(
            ctx.contains(&format!(
                "cut: first 40 of 100 bytes\">\n{}\n",
                "x".repeat(40)
            )),
            "{ctx}"
        );
        // 5 bytes of room left for `small`.
        assert!(ctx.contains("yyyyy\n</file>"), "{ctx}");
        assert_eq!(a.notes.len(), 3, "{:?}", a.notes);
        assert!(a.notes[0].contains("first 40 of 100 bytes"));
        assert!(a.notes[2].contains("not attached"), "{:?}", a.notes);
        let _ = std::fs::remove_dir_all(&d);
    }
}
