//! `@path` mentions in a prompt: each one that names a readable regular file
//! in the local working directory has the file's text attached for the model
//! (the prompt itself goes as typed). Reading is bounded per file and in
//! total; whatever is cut, skipped or missing is said in one line each.
//!
//! A mentioned file whose first bytes are a PNG, JPEG, GIF or WebP image is
//! attached as an image instead (`localfile::read_image`, 20 MiB at most),
//! and one that cannot be (too big, unreadable) stops the prompt: the user
//! asked for it, and a model answering without it wastes the call. A line
//! that is nothing but paths of image files (pasted or dropped into the
//! terminal: quoted, `\ `-escaped or `file://` URLs) is found by `pasted`.

use crate::wire::Image;
use std::io::Read;
use std::path::{Path, PathBuf};

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
    /// Images mentioned, in order, for the prompt's own message.
    pub images: Vec<Image>,
    /// One line each for an image that could not be attached; any of them
    /// means the prompt is not sent.
    pub refused: Vec<String>,
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
    attach_capped(text, cwd, PER_FILE, TOTAL, &[])
}

/// Like [`attach`], leaving out the mentions in `taken` (attached as
/// something else: an MCP server's resource).
pub fn attach_except(text: &str, cwd: &Path, taken: &[String]) -> Attached {
    attach_capped(text, cwd, PER_FILE, TOTAL, taken)
}

fn attach_capped(
    text: &str,
    cwd: &Path,
    per_file: usize,
    total: usize,
    taken: &[String],
) -> Attached {
    let mut out = Attached::default();
    let mut body = String::new();
    let mut used = 0usize;
    for path in find(text).into_iter().filter(|p| !taken.contains(p)) {
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
        if crate::localfile::image_type(&full).is_some() {
            match crate::localfile::read_image(&full) {
                Ok(image) => out.images.push(image),
                Err(e) => out.refused.push(format!("@{shown}: {e}; nothing was sent")),
            }
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

/// The image files a line consists of, when every word of it (after
/// unquoting, `\ ` escapes and a `file://` prefix) names an existing image
/// file below `cwd` or absolute: what a terminal types when a screenshot is
/// dropped on it or its path pasted. `None` for any other line, so a prompt
/// that merely mentions a path is sent as typed.
pub fn pasted(line: &str, cwd: &Path) -> Option<Vec<PathBuf>> {
    let words = words(line.trim())?;
    if words.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for word in words {
        let word = match word.strip_prefix("file://") {
            Some(rest) => percent_decode(rest)?,
            None => word,
        };
        let path = cwd.join(&word);
        crate::localfile::image_type(&path)?;
        out.push(path);
    }
    Some(out)
}

/// Words as a shell splits them: spaces separate, `'…'` and `"…"` quote,
/// `\` escapes the next character. `None` for an unclosed quote.
fn words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        q if q == c => break,
                        '\\' if c == '"' => word.push(chars.next()?),
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Some(out)
}

/// `%20` and the like decoded; `None` when the result is not UTF-8 or a
/// `%` is not followed by two hex digits.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
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

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn image_mentions_are_attached_as_images_by_their_bytes() {
        let d = dir("images");
        std::fs::write(d.join("shot.png"), PNG).unwrap();
        // Named like an image, but text: attached as text.
        std::fs::write(d.join("notes.png"), "plain words\n").unwrap();
        // Named like text, but a GIF: attached as an image.
        std::fs::write(d.join("pic.txt"), b"GIF89a\x01\0\x01\0").unwrap();
        let a = attach("compare @shot.png with @pic.txt, see @notes.png", &d);
        let names: Vec<&str> = a.images.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["shot.png", "pic.txt"]);
        assert_eq!(a.images[1].media_type, "image/gif");
        let ctx = a.context.unwrap();
        assert!(
            ctx.contains("<file path=\"notes.png\">\nplain words\n"),
            "{ctx}"
        );
        assert!(!ctx.contains("PNG"), "{ctx}");
        assert!(
            a.refused.is_empty() && a.notes.is_empty(),
            "{:?} {:?}",
            a.refused,
            a.notes
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn pasted_image_paths_are_found_in_every_form_a_terminal_types() {
        let d = dir("pasted");
        std::fs::write(d.join("Screen Shot.png"), PNG).unwrap();
        std::fs::write(d.join("b.png"), PNG).unwrap();
        std::fs::write(d.join("text.md"), "hi").unwrap();
        let full = d.join("Screen Shot.png");
        let url = format!("file://{}", full.display()).replace(' ', "%20");
        for line in [
            "'Screen Shot.png'",
            "\"Screen Shot.png\"",
            "Screen\\ Shot.png",
            url.as_str(),
            &format!(" {}  ", full.display().to_string().replace(' ', "\\ ")),
        ] {
            assert_eq!(pasted(line, &d), Some(vec![full.clone()]), "{line}");
        }
        assert_eq!(
            pasted("b.png 'Screen Shot.png'", &d).map(|v| v.len()),
            Some(2)
        );
        assert_eq!(pasted("look at b.png", &d), None);
        assert_eq!(pasted("text.md", &d), None);
        assert_eq!(pasted("nope.png", &d), None);
        assert_eq!(pasted("'b.png", &d), None);
        assert_eq!(pasted("", &d), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn caps_cut_files_and_stop_at_the_total() {
        let d = dir("caps");
        std::fs::write(d.join("big"), "x".repeat(100)).unwrap();
        std::fs::write(d.join("small"), "y".repeat(10)).unwrap();
        std::fs::write(d.join("bin"), b"a\0b").unwrap();
        let a = attach_capped("@big @small @bin", &d, 40, 45, &[]);
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
