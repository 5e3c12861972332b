//! `read_file`'s reading: a window of lines (`offset`, `limit`) taken from a
//! file on any target, bounded in bytes and characters, refused when it looks
//! binary, and told as "lines A-B of N" with the offset of the next window.
//! Owns the line arithmetic, the local and remote reads and the wording; not
//! the tool's arguments or its timeout (`files.rs`).
//!
//! A read with no window, of a file that fits, returns the file's exact text
//! and nothing else, so what the model copies from it is byte for byte what
//! the file holds.

use super::{ToolContext, ToolError, ToolOutput, Truncation};
use crate::host::{run_script, shell_quote};
use std::io::Read;
use std::path::Path;
use std::time::Instant;

/// Size of the prefix that decides whether a file is text.
const SNIFF_BYTES: usize = 8192;
/// Characters kept free for the note that ends a window.
const NOTE_ROOM: usize = 200;
/// Width of a line number in numbered output, as `cat -n` prints it.
const NUMBER_WIDTH: usize = 6;

/// Which lines to read and how to show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// First line, 1-based.
    pub offset: u64,
    /// Lines at most; `None` is as many as fit.
    pub limit: Option<u64>,
    /// Each line prefixed with its number (`cat -n`'s `     12\t`).
    pub numbered: bool,
    /// The model asked for a window or for numbers: the note is always added.
    pub explicit: bool,
}

/// What was read from the file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// The bytes of the requested lines, from the first one's start, at most
    /// `cap` of them.
    pub bytes: Vec<u8>,
    /// Lines in the whole file (a last line without a newline counts).
    pub total_lines: u64,
    /// Size of the file in bytes.
    pub size: u64,
    /// The byte cap stopped the read before the window's end.
    pub cut: bool,
}

/// Reads the window from a file on this host: one pass, the requested lines
/// kept (at most `cap` bytes), the rest only counted. Blocking; the caller
/// runs it off the runtime. Gives up at `deadline`, so a read abandoned by
/// the tool's timeout does not go on counting lines.
pub fn read_local(
    path: &Path,
    req: &Request,
    cap: usize,
    deadline: Instant,
) -> Result<Window, ToolError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error("read", path, e))?;
    if meta.is_dir() {
        return Err(is_a_directory(path));
    }
    // Opening a FIFO blocks until a writer comes, and a device never ends.
    if !meta.is_file() {
        return Err(ToolError::Failed(format!(
            "{} is {}, not a regular file; read_file reads regular files only",
            path.display(),
            crate::localfile::kind_of(meta.file_type())
        )));
    }
    let mut file = std::fs::File::open(path).map_err(|e| io_error("open", path, e))?;
    let end = req.limit.map(|l| req.offset.saturating_add(l));
    let mut w = Window {
        size: meta.len(),
        ..Window::default()
    };
    let mut buf = vec![0u8; 64 * 1024];
    // The line the next byte belongs to, and whether the window is complete.
    let mut line: u64 = 1;
    let mut collecting = end != Some(req.offset);
    let mut last = b'\n';
    loop {
        if Instant::now() > deadline {
            return Err(ToolError::Failed(format!(
                "reading {} took too long; gave up",
                path.display()
            )));
        }
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("read", path, e)),
        };
        let chunk = &buf[..n];
        last = chunk[n - 1];
        let mut i = 0;
        while i < n {
            let rest = &chunk[i..];
            if collecting && line >= req.offset {
                let (stop, newline) = match memchr::memchr(b'\n', rest) {
                    Some(k) => (i + k + 1, true),
                    None => (n, false),
                };
                let room = cap - w.bytes.len();
                if stop - i > room {
                    w.bytes.extend_from_slice(&chunk[i..i + room]);
                    w.cut = true;
                    collecting = false;
                    // The rest of this line is counted, not kept.
                    i += room;
                    continue;
                }
                w.bytes.extend_from_slice(&chunk[i..stop]);
                if newline {
                    line += 1;
                    collecting = Some(line) != end;
                }
                i = stop;
            } else if collecting {
                // Before the window: skip line by line up to its start.
                match memchr::memchr(b'\n', rest) {
                    Some(k) => {
                        line += 1;
                        i += k + 1;
                    }
                    None => i = n,
                }
            } else {
                line += memchr::memchr_iter(b'\n', rest).count() as u64;
                i = n;
            }
        }
    }
    w.total_lines = if w.size == 0 && line == 1 {
        0
    } else if last == b'\n' {
        line - 1
    } else {
        line
    };
    // `/proc` files report a size of zero; what was read is the better figure.
    w.size = w.size.max(w.bytes.len() as u64);
    Ok(w)
}

/// Reads the window through the target's shell: the size, the line count and
/// whether the last byte is a newline on one line each, then the lines
/// (`tail -n +OFFSET | head -n LIMIT | head -c CAP`), bytes exact.
pub async fn read_remote(
    ctx: &ToolContext,
    path: &Path,
    req: &Request,
    cap: usize,
) -> Result<Window, ToolError> {
    let p = shell_quote(&path.to_string_lossy());
    let lines = match req.limit {
        Some(l) => format!(" | head -n {l}"),
        None => String::new(),
    };
    // One more byte than the cap, so a window that fills it exactly is not
    // taken for a cut one.
    let take = cap + 1;
    let script = format!(
        "if [ -d {p} ]; then exit 21; fi; if [ ! -r {p} ]; then cat -- {p} >/dev/null; exit 22; fi; \
         if [ ! -f {p} ]; then exit 23; fi; \
         wc -c < {p}; wc -l < {p}; tail -c 1 -- {p} | wc -l; \
         tail -n +{} -- {p}{lines} | head -c {take}",
        req.offset
    );
    let (code, out, err) = run_script(ctx.target.as_ref(), &script, &ctx.cwd, None)
        .await
        .map_err(|e| ToolError::Failed(format!("cannot reach {}: {e}", ctx.target.actor())))?;
    match code {
        Some(0) => {}
        Some(21) => return Err(is_a_directory(path)),
        Some(23) => {
            return Err(ToolError::Failed(format!(
                "{} is not a regular file; read_file reads regular files only",
                path.display()
            )))
        }
        _ => {
            return Err(ToolError::Failed(format!(
                "cannot read {} on {}: {}",
                path.display(),
                ctx.target.actor(),
                String::from_utf8_lossy(&err).trim()
            )))
        }
    }
    let mut rest = out.as_slice();
    let mut number = || -> u64 {
        let nl = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let n = String::from_utf8_lossy(&rest[..nl])
            .trim()
            .parse()
            .unwrap_or(0);
        rest = rest.get(nl + 1..).unwrap_or_default();
        n
    };
    let size = number();
    let newlines = number();
    let ends_with_newline = number() == 1;
    let mut bytes = rest.to_vec();
    let cut = bytes.len() > cap;
    bytes.truncate(cap);
    let total_lines = if size > 0 && !ends_with_newline {
        newlines + 1
    } else {
        newlines
    };
    Ok(Window {
        bytes,
        total_lines,
        size,
        cut,
    })
}

/// The window of a file whose whole text is at hand (an editor's buffer):
/// the same lines, counts and cap as `read_local` gives for a file.
pub fn from_text(text: &str, req: &Request, cap: usize) -> Window {
    let bytes = text.as_bytes();
    // The byte just past `lines` more lines from `from` (or the end).
    let skip = |from: usize, lines: u64| {
        let mut pos = from;
        for _ in 0..lines {
            match memchr::memchr(b'\n', &bytes[pos..]) {
                Some(i) => pos += i + 1,
                None => return bytes.len(),
            }
        }
        pos
    };
    let start = skip(0, req.offset.saturating_sub(1));
    let end = req.limit.map_or(bytes.len(), |l| skip(start, l));
    let window = &bytes[start..end];
    let newlines = memchr::memchr_iter(b'\n', bytes).count() as u64;
    let size = bytes.len() as u64;
    Window {
        bytes: window[..window.len().min(cap)].to_vec(),
        total_lines: if size > 0 && !text.ends_with('\n') {
            newlines + 1
        } else {
            newlines
        },
        size,
        cut: window.len() > cap,
    }
}

pub fn is_a_directory(path: &Path) -> ToolError {
    ToolError::Failed(format!(
        "{} is a directory; use glob or run_shell with `ls` to list it",
        path.display()
    ))
}

fn io_error(action: &str, path: &Path, e: std::io::Error) -> ToolError {
    ToolError::Failed(format!("cannot {action} {}: {e}", path.display()))
}

/// The text the model gets for a window: its lines (numbered if asked), then
/// a note saying which lines these are, of how many, and the next offset.
/// `max_chars` bounds the whole text, note included.
pub fn present(
    path: &Path,
    w: Window,
    req: &Request,
    max_chars: usize,
) -> Result<ToolOutput, ToolError> {
    if w.total_lines == 0 {
        return Ok(ToolOutput::text(if req.explicit {
            "[read_file: the file is empty]"
        } else {
            ""
        }));
    }
    if req.offset > w.total_lines {
        return Err(ToolError::Failed(format!(
            "offset {} is past the end of {} ({} line{}); the last window starts at offset {}",
            req.offset,
            path.display(),
            w.total_lines,
            plural(w.total_lines),
            w.total_lines
        )));
    }
    let text = decode_text(&w.bytes, !w.cut).ok_or_else(|| {
        ToolError::Failed(format!(
            "{} looks like a binary file ({} bytes: NUL bytes or invalid UTF-8 near the start); \
             read_file returns text only; use run_shell (e.g. `file`, `xxd | head`) to inspect it",
            path.display(),
            w.size
        ))
    })?;
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    // A cut read ends inside a line: that line is shown from the next window,
    // unless it is the only one (then its start is all there is room for).
    let mut long_line = false;
    if w.cut && lines.len() > 1 && !text.ends_with('\n') {
        lines.pop();
    } else if w.cut && !text.ends_with('\n') {
        long_line = true;
    }
    let budget = max_chars.saturating_sub(NOTE_ROOM).max(1);
    let mut out = String::new();
    let mut used = 0usize;
    let mut shown: u64 = 0;
    for (i, l) in lines.iter().enumerate() {
        let number = req.offset + i as u64;
        let piece = if req.numbered {
            format!("{number:>NUMBER_WIDTH$}\t{l}")
        } else {
            (*l).to_string()
        };
        let chars = piece.chars().count();
        if used + chars > budget {
            if shown == 0 {
                // One line longer than the whole budget: its start.
                let (start, _) = super::truncate(&piece, budget);
                out.push_str(&start);
                shown = 1;
                long_line = true;
            }
            break;
        }
        out.push_str(&piece);
        used += chars;
        shown += 1;
    }
    let first = req.offset;
    let last = first + shown.saturating_sub(1);
    let whole = first == 1 && last == w.total_lines && !long_line;
    if whole && !req.explicit {
        return Ok(ToolOutput::text(out));
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    let total = w.total_lines;
    let note = if long_line {
        let next = if last < total {
            format!("; the next window starts at offset={}", last + 1)
        } else {
            String::new()
        };
        format!(
            "[read_file: line {last} of {total} is longer than shown; only its start is here \
             (run_shell with `sed -n '{last}p' FILE | cut -c …` shows the rest){next}]"
        )
    } else if last < total {
        format!(
            "[read_file: lines {first}-{last} of {total}; the next window starts at offset={}]",
            last + 1
        )
    } else {
        format!("[read_file: lines {first}-{last} of {total}, the end of the file]")
    };
    out.push_str(&note);
    // The model asked for this window: no cut to report, unless the bounds
    // shortened it (fewer lines than asked, or the start of a line).
    let asked_end = req.limit.map_or(total, |l| (first + l - 1).min(total));
    let truncated = (long_line || last < asked_end).then(|| Truncation {
        kept: out.chars().count(),
        total: w.size as usize,
    });
    Ok(ToolOutput {
        text: out,
        truncated,
    })
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The text of `buf`, or `None` when its start looks binary (a NUL byte, or a byte
/// sequence that is not UTF-8). Bad bytes later on are replaced, not refused; a
/// character cut by the end of an incomplete read is dropped.
pub fn decode_text(buf: &[u8], complete: bool) -> Option<String> {
    let sniff = &buf[..buf.len().min(SNIFF_BYTES)];
    if sniff.contains(&0) {
        return None;
    }
    match std::str::from_utf8(sniff) {
        // `error_len() == None` means a character runs past the sniffed prefix.
        Err(e) if e.error_len().is_some() => return None,
        _ => {}
    }
    match std::str::from_utf8(buf) {
        Ok(t) => Some(t.to_string()),
        Err(e) if !complete && e.error_len().is_none() => {
            Some(String::from_utf8_lossy(&buf[..e.valid_up_to()]).into_owned())
        }
        Err(_) => Some(String::from_utf8_lossy(buf).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn req(offset: u64, limit: Option<u64>, numbered: bool) -> Request {
        Request {
            offset,
            limit,
            numbered,
            explicit: true,
        }
    }

    fn file(label: &str, content: &[u8]) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("buddy-window-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("f.txt");
        std::fs::write(&p, content).unwrap();
        p
    }

    fn local(p: &Path, r: &Request, cap: usize) -> Window {
        read_local(p, r, cap, Instant::now() + Duration::from_secs(30)).unwrap()
    }

    fn numbered_lines(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn a_text_window_is_the_file_window() {
        for (label, content) in [
            ("t1", numbered_lines(50)),
            ("t2", "a\nb\nno end".to_string()),
            ("t3", String::new()),
        ] {
            let p = file(label, content.as_bytes());
            for r in [
                req(1, None, false),
                req(3, Some(2), false),
                req(49, Some(5), true),
                req(100, None, false),
            ] {
                for cap in [4, 1 << 20] {
                    assert_eq!(
                        from_text(&content, &r, cap),
                        local(&p, &r, cap),
                        "{label} {r:?} {cap}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_window_keeps_its_lines_and_counts_the_whole_file() {
        let p = file("win", numbered_lines(1000).as_bytes());
        let w = local(&p, &req(200, Some(3), false), 1 << 20);
        assert_eq!(w.bytes, b"line 200\nline 201\nline 202\n");
        assert_eq!((w.total_lines, w.cut), (1000, false));
        let out = present(&p, w, &req(200, Some(3), false), 10_000).unwrap();
        assert_eq!(
            out.text,
            "line 200\nline 201\nline 202\n[read_file: lines 200-202 of 1000; the next window starts at offset=203]"
        );
        assert_eq!(out.truncated, None, "the window the model asked for");
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn numbered_lines_read_like_cat_n_and_the_end_is_said() {
        let p = file("num", b"alpha\nbeta\ngamma");
        let r = req(2, None, true);
        let out = present(&p, local(&p, &r, 1 << 20), &r, 10_000).unwrap();
        assert_eq!(
            out.text,
            "     2\tbeta\n     3\tgamma\n[read_file: lines 2-3 of 3, the end of the file]"
        );
        let err = present(
            &p,
            local(&p, &req(9, None, false), 100),
            &req(9, None, false),
            100,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("offset 9 is past the end"),
            "{err}"
        );
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_whole_file_without_a_window_is_its_exact_text() {
        let p = file("exact", b"one\r\ntwo\n\nthree");
        let r = Request {
            offset: 1,
            limit: None,
            numbered: false,
            explicit: false,
        };
        let out = present(&p, local(&p, &r, 1 << 20), &r, 10_000).unwrap();
        assert_eq!(out, ToolOutput::text("one\r\ntwo\n\nthree"));
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_character_bound_ends_on_a_whole_line_and_names_the_next_offset() {
        let p = file("bound", numbered_lines(5000).as_bytes());
        let r = Request {
            offset: 1,
            limit: None,
            numbered: false,
            explicit: false,
        };
        let out = present(&p, local(&p, &r, 4_004), &r, 1_000).unwrap();
        assert!(out.text.chars().count() <= 1_000, "{}", out.text.len());
        let (body, note) = out.text.rsplit_once('\n').unwrap();
        let shown = body.lines().count() as u64;
        assert_eq!(body.lines().last(), Some(format!("line {shown}").as_str()));
        assert_eq!(
            note,
            format!(
                "[read_file: lines 1-{shown} of 5000; the next window starts at offset={}]",
                shown + 1
            )
        );
        assert!(out.truncated.is_some());
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_byte_cap_drops_a_cut_line_but_keeps_the_start_of_a_lone_long_one() {
        let p = file(
            "cap",
            format!("short\n{}\nafter\n", "x".repeat(5000)).as_bytes(),
        );
        let w = local(&p, &req(1, None, false), 100);
        assert!(w.cut);
        assert_eq!(w.total_lines, 3);
        let out = present(&p, w, &req(1, None, false), 10_000).unwrap();
        assert_eq!(
            out.text,
            "short\n[read_file: lines 1-1 of 3; the next window starts at offset=2]"
        );
        let r = req(2, Some(1), false);
        let out = present(&p, local(&p, &r, 100), &r, 10_000).unwrap();
        assert!(out.text.starts_with(&"x".repeat(100)), "{}", out.text);
        assert!(
            out.text.ends_with("the next window starts at offset=3]"),
            "{}",
            out.text
        );
        assert!(out.text.contains("line 2 of 3 is longer than shown"));
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn decoding_sniffs_only_the_start_and_drops_a_cut_character() {
        let mut late_bad = "a".repeat(SNIFF_BYTES + 10).into_bytes();
        late_bad.push(0xFF);
        let text = decode_text(&late_bad, true).unwrap();
        assert!(text.ends_with('\u{FFFD}'));
        assert_eq!(decode_text("é".as_bytes(), true).as_deref(), Some("é"));
        // The read stopped inside "é": the half character is ours, not the file's.
        assert_eq!(decode_text(b"ab\xC3", false).as_deref(), Some("ab"));
        assert_eq!(decode_text(b"a\0b", true), None);
    }
}
