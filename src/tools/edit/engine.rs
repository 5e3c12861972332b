//! The matching engine `edit_file` and `apply_patch` share: where a piece
//! of model text is in a file, at the strictest level that finds it, and
//! what the file becomes when it is replaced. A match is used only when it
//! is the only one at its level; anything else changes nothing and says why
//! (every match's line, or the closest region). A refused edit costs the
//! model a retry; a wrong one corrupts a file. Pure text in and out: reading,
//! approving and writing the file are the tools' jobs.

use super::lines::{self, Level, Line};

/// One replacement the model asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub old: String,
    pub new: String,
    /// Replace every match at the level that finds one, not only a unique one.
    pub replace_all: bool,
}

/// Where a replacement went, for the model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// First line of the replaced text, from 1, in the text before this edit.
    pub line: usize,
    pub count: usize,
    pub level: Level,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    #[error("old_string is empty; give the text to replace (write_file creates a file)")]
    EmptyOld,
    #[error("old_string and new_string are the same; nothing to change")]
    Unchanged,
    /// More than one match at `level`, starting at these lines.
    #[error("old_string matches {} places ({}) at lines {}; nothing was changed. Include more surrounding lines so it matches once, or set replace_all to change every one", .lines.len(), .level.describe(), line_list(.lines))]
    Ambiguous { level: Level, lines: Vec<usize> },
    /// No match at any level; the closest region, numbered, if any line of
    /// the old text is in the file at all.
    #[error("{}", missing(.closest.as_deref()))]
    Missing { closest: Option<String> },
    /// This edit's match touches text an earlier edit of the list wrote.
    #[error("its old_string overlaps the text edit {} wrote; nothing was changed. Combine the two into one edit", .earlier + 1)]
    Overlap { earlier: usize },
}

/// Why no match was found: with the closest region, or without one.
fn missing(closest: Option<&str>) -> String {
    match closest {
        Some(region) => format!(
            "old_string was not found (not even ignoring whitespace and Unicode punctuation); nothing was changed. The closest region of the file is:\n{region}\nCopy old_string exactly from the file (read it again if it may have changed)"
        ),
        None => "old_string was not found, and none of its lines are in the file; nothing was changed. Read the file again and copy old_string exactly".to_string(),
    }
}

/// The first 20 line numbers, and how many more there are.
fn line_list(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(20).map(|l| l.to_string()).collect();
    let more = if lines.len() > 20 {
        format!(" and {} more", lines.len() - 20)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(", "))
}

/// A failure of edit `index` (from 0) of `of` edits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{failure}", which(*.index, *.of))]
pub struct EditError {
    pub index: usize,
    pub of: usize,
    pub failure: Failure,
}

/// "edit N of M: " when there are several edits.
fn which(index: usize, of: usize) -> String {
    if of > 1 {
        format!("edit {} of {of}: ", index + 1)
    } else {
        String::new()
    }
}

/// A byte range of the text and what replaces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub start: usize,
    pub end: usize,
    pub insert: String,
}

/// Applies `edits` in order, each to the text the previous ones left; all
/// or nothing.
pub fn apply(text: &str, edits: &[Edit]) -> Result<(String, Vec<Change>), EditError> {
    apply_at(text, edits, &Level::FUZZY)
}

/// `apply` trying only the exact level and then `lenient` ones (the edit
/// benchmark compares exact matching alone with the full set).
pub fn apply_at(
    text: &str,
    edits: &[Edit],
    lenient: &[Level],
) -> Result<(String, Vec<Change>), EditError> {
    // Borrowed until the first splice: one copy of a big file, not two.
    let mut text = std::borrow::Cow::Borrowed(text);
    let mut changes = Vec::with_capacity(edits.len());
    // Text written by earlier edits, in the current text's offsets.
    let mut written: Vec<(usize, usize, usize)> = Vec::new();
    for (index, edit) in edits.iter().enumerate() {
        let fail = |failure| EditError {
            index,
            of: edits.len(),
            failure,
        };
        let old = super::doc::plain_newlines(&edit.old);
        let new = super::doc::plain_newlines(&edit.new);
        if old.is_empty() {
            return Err(fail(Failure::EmptyOld));
        }
        if old == new {
            return Err(fail(Failure::Unchanged));
        }
        let (level, hits) = locate(&text, &old, &new, edit.replace_all, lenient).map_err(fail)?;
        for h in &hits {
            if let Some(&(_, _, earlier)) = written
                .iter()
                .find(|(s, e, _)| h.start < *e && *s < h.end.max(h.start + 1))
            {
                return Err(fail(Failure::Overlap { earlier }));
            }
        }
        changes.push(Change {
            line: lines::line_number(&text, hits[0].start),
            count: hits.len(),
            level,
        });
        let (spliced, starts) = splice(&text, &hits);
        for w in written.iter_mut() {
            // Text after a hit moves by what the hit adds or removes.
            let shift: isize = hits
                .iter()
                .filter(|h| h.end <= w.0)
                .map(|h| h.insert.len() as isize - (h.end - h.start) as isize)
                .sum();
            w.0 = (w.0 as isize + shift) as usize;
            w.1 = (w.1 as isize + shift) as usize;
        }
        for (h, s) in hits.iter().zip(starts) {
            written.push((s, s + h.insert.len(), index));
        }
        text = std::borrow::Cow::Owned(spliced);
    }
    Ok((text.into_owned(), changes))
}

/// `text` with `hits` (in order, not overlapping) replaced, and where each
/// insert starts in the result.
pub fn splice(text: &str, hits: &[Hit]) -> (String, Vec<usize>) {
    let grown: usize = hits.iter().map(|h| h.insert.len()).sum();
    let mut out = String::with_capacity(text.len() + grown);
    let mut at = 0;
    let mut starts = Vec::with_capacity(hits.len());
    for h in hits {
        out.push_str(&text[at..h.start]);
        starts.push(out.len());
        out.push_str(&h.insert);
        at = h.end;
    }
    out.push_str(&text[at..]);
    (out, starts)
}

/// Where `old` is in `text` and what replaces each match, at the first
/// level that finds it (exact, then `lenient` in order); a single match
/// unless `all`.
pub fn locate(
    text: &str,
    old: &str,
    new: &str,
    all: bool,
    lenient: &[Level],
) -> Result<(Level, Vec<Hit>), Failure> {
    let exact = exact_matches(text, old);
    if exact.len() == 1 || (all && !exact.is_empty()) {
        let hits = disjoint(exact.iter().map(|&s| (s, s + old.len())))
            .map(|(start, end)| Hit {
                start,
                end,
                insert: new.to_string(),
            })
            .collect();
        return Ok((Level::Exact, hits));
    }
    if exact.len() > 1 {
        return Err(Failure::Ambiguous {
            level: Level::Exact,
            lines: exact.iter().map(|&s| lines::line_number(text, s)).collect(),
        });
    }
    let (needle, whole) = lines::split(old);
    if needle.iter().all(|l| l.trim().is_empty()) {
        return Err(Failure::Missing { closest: None });
    }
    // Built only when a level needs every line: the whitespace levels find
    // their candidates by searching for the needle's longest line instead.
    let mut index: Option<Vec<Line>> = None;
    for &level in lenient {
        let anchored = match level {
            Level::TrailingWhitespace | Level::Whitespace => anchored_windows(text, &needle, level),
            _ => None,
        };
        let found = if let Some(windows) = anchored {
            windows
                .iter()
                .map(|window| window_hit(text, window, &needle, whole, new, level))
                .collect()
        } else if level == Level::Punctuation && needle.len() == 1 && !whole {
            let index = index.get_or_insert_with(|| lines::index(text));
            fragments(text, index, needle[0], new)
        } else {
            let index = index.get_or_insert_with(|| lines::index(text));
            windows(text, index, &needle, level, 0..index.len())
                .into_iter()
                .map(|s| {
                    window_hit(
                        text,
                        &index[s..s + needle.len()],
                        &needle,
                        whole,
                        new,
                        level,
                    )
                })
                .collect()
        };
        match found.len() {
            0 => continue,
            1 => return Ok((level, found)),
            _ if all => return Ok((level, disjoint_hits(found))),
            _ => {
                return Err(Failure::Ambiguous {
                    level,
                    lines: found
                        .iter()
                        .map(|h| lines::line_number(text, h.start))
                        .collect(),
                })
            }
        }
    }
    let index = index.unwrap_or_else(|| lines::index(text));
    Err(Failure::Missing {
        closest: closest(text, &index, &needle),
    })
}

/// The windows `windows` would find at a level that only trims whitespace,
/// found without indexing every line of the file: a match's lines hold the
/// needle's trimmed lines verbatim, so every match contains the longest of
/// them, and a substring search for it (memmem) finds the few places worth
/// checking. `None` when the needle has no line to search for, or so many
/// places hold it that checking each costs more than the plain scan.
fn anchored_windows(text: &str, needle: &[&str], level: Level) -> Option<Vec<Vec<Line>>> {
    let (at, anchor) = needle
        .iter()
        .map(|l| l.trim())
        .enumerate()
        .max_by_key(|(i, l)| (l.len(), std::cmp::Reverse(*i)))?;
    // A short anchor is everywhere (`}`); the full scan is as fast then.
    if anchor.len() < 8 {
        return None;
    }
    let bytes = text.as_bytes();
    let finder = memchr::memmem::Finder::new(anchor.as_bytes());
    let mut out: Vec<Vec<Line>> = Vec::new();
    let mut last_start = None;
    let mut from = 0;
    let mut seen = 0;
    while let Some(i) = finder.find(&bytes[from..]) {
        let hit = from + i;
        seen += 1;
        if seen > 1_000 {
            return None;
        }
        let line_start = memchr::memrchr(b'\n', &bytes[..hit]).map_or(0, |p| p + 1);
        // The rest of this line holds no other window start.
        from = memchr::memchr(b'\n', &bytes[hit..]).map_or(bytes.len(), |p| hit + p + 1);
        let Some(window) = window_around(text, line_start, at, needle.len()) else {
            continue;
        };
        if last_start == Some(window[0].start) {
            continue;
        }
        last_start = Some(window[0].start);
        if windows(text, &window, needle, level, 0..window.len()).is_empty() {
            continue;
        }
        out.push(window);
    }
    Some(out)
}

/// The `n` lines around the line starting at byte `line_start`, which is
/// line `at` of them (from 0); `None` when the text has too few lines
/// before or after it. Lines as `lines::index` makes them (`lines::line_at`).
fn window_around(text: &str, line_start: usize, at: usize, n: usize) -> Option<Vec<Line>> {
    let bytes = text.as_bytes();
    let mut first = line_start;
    for _ in 0..at {
        if first == 0 {
            return None;
        }
        first = memchr::memrchr(b'\n', &bytes[..first - 1]).map_or(0, |p| p + 1);
    }
    let mut window = Vec::with_capacity(n);
    let mut start = first;
    for _ in 0..n {
        if start >= text.len() {
            return None;
        }
        let line = lines::line_at(text, start);
        start = line.end;
        window.push(line);
    }
    Some(window)
}

/// Start offsets of every occurrence of `old`, overlapping ones included
/// (`aa` is twice in `aaa`: ambiguous, not unique).
fn exact_matches(text: &str, old: &str) -> Vec<usize> {
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = finder.find(&bytes[from..]) {
        let at = from + i;
        out.push(at);
        // Cap the work a one-character needle can cause in a huge file.
        if out.len() > 10_000 {
            break;
        }
        // On by one character: a match starts on a character boundary,
        // and so does the next one.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

fn disjoint(ranges: impl Iterator<Item = (usize, usize)>) -> impl Iterator<Item = (usize, usize)> {
    let mut last_end = 0;
    ranges.filter(move |&(s, e)| {
        let keep = s >= last_end;
        if keep {
            last_end = e;
        }
        keep
    })
}

fn disjoint_hits(hits: Vec<Hit>) -> Vec<Hit> {
    let mut last_end = 0;
    hits.into_iter()
        .filter(|h| {
            let keep = h.start >= last_end;
            if keep {
                last_end = h.end;
            }
            keep
        })
        .collect()
}

/// Starts of every window of `index` lines (within `range`) whose lines
/// equal `needle`'s at `level`, and nest like them when indentation is
/// ignored.
pub fn windows(
    text: &str,
    index: &[Line],
    needle: &[&str],
    level: Level,
    range: std::ops::Range<usize>,
) -> Vec<usize> {
    let n = needle.len();
    if n == 0 || range.end < range.start + n {
        return Vec::new();
    }
    let want: Vec<_> = needle.iter().map(|l| level.normalise(l)).collect();
    let mut out = Vec::new();
    for s in range.start..=range.end - n {
        let matches = (0..n).all(|i| level.normalise(index[s + i].text(text)) == want[i]);
        if !matches {
            continue;
        }
        if level >= Level::Whitespace {
            let file: Vec<&str> = index[s..s + n].iter().map(|l| l.text(text)).collect();
            if !lines::same_nesting(&file, needle) {
                continue;
            }
        }
        out.push(s);
    }
    out
}

/// The replacement of the matched `window` of lines: whole lines when the
/// needle ended in a newline, else up to the end of the last line's text.
pub fn window_hit(
    text: &str,
    window: &[Line],
    needle: &[&str],
    whole: bool,
    new: &str,
    level: Level,
) -> Hit {
    let eol = match window[0].ending(text) {
        "" => "\n",
        e => e,
    };
    let file: Vec<&str> = window.iter().map(|l| l.text(text)).collect();
    let (new_lines, new_whole) = lines::split(new);
    let body = lines::rewrite(&file, needle, &new_lines, level).join(eol);
    let last = window[window.len() - 1];
    let (end, insert) = if whole {
        let end = last.end;
        let insert = if new_lines.is_empty() {
            String::new()
        } else {
            body + eol
        };
        (end, insert)
    } else {
        let insert = if new_whole { body + eol } else { body };
        (last.content_end, insert)
    };
    Hit {
        start: window[0].start,
        end,
        insert,
    }
}

/// Matches of a one-line needle anywhere inside lines, with whitespace at
/// its ends ignored and punctuation folded on both sides. Whitespace the
/// needle had at an end must face whitespace or the line's edge in the file.
fn fragments(text: &str, index: &[Line], needle: &str, new: &str) -> Vec<Hit> {
    let trimmed = needle.trim();
    let want: Vec<char> = trimmed.chars().map(lines::fold_char).collect();
    if want.is_empty() {
        return Vec::new();
    }
    let lead = !needle.starts_with(trimmed);
    let trail = !needle.ends_with(trimmed);
    // The replacement loses the whitespace the needle's ends lost.
    let lead_ws = &needle[..needle.len() - needle.trim_start().len()];
    let trail_ws = &needle[needle.trim_end().len()..];
    let mut insert = new;
    if lead {
        insert = insert.strip_prefix(lead_ws).unwrap_or(insert);
    }
    if trail {
        insert = insert.strip_suffix(trail_ws).unwrap_or(insert);
    }
    let mut out = Vec::new();
    for line in index {
        let s = line.text(text);
        let chars: Vec<(usize, char)> = s
            .char_indices()
            .map(|(i, c)| (i, lines::fold_char(c)))
            .collect();
        if chars.len() < want.len() {
            continue;
        }
        for k in 0..=chars.len() - want.len() {
            if !(0..want.len()).all(|i| chars[k + i].1 == want[i]) {
                continue;
            }
            let a = chars[k].0;
            let b = chars.get(k + want.len()).map_or(s.len(), |c| c.0);
            let before_ok = !lead || k == 0 || chars[k - 1].1.is_whitespace();
            let after_ok = !trail || b == s.len() || chars[k + want.len()].1.is_whitespace();
            if before_ok && after_ok {
                out.push(Hit {
                    start: line.start + a,
                    end: line.start + b,
                    insert: insert.to_string(),
                });
            }
        }
    }
    out
}

/// Lines of context shown around the closest region.
const CLOSEST_CONTEXT: usize = 2;
/// Most lines the closest region shows.
const CLOSEST_LINES: usize = 30;
/// Longest line shown in it, in characters.
const CLOSEST_LINE_CHARS: usize = 200;

/// The numbered lines of the file most like `needle`: the window where the
/// most needle lines are found in place, compared leniently.
pub fn closest(text: &str, index: &[Line], needle: &[&str]) -> Option<String> {
    use std::collections::HashMap;
    let mut wanted: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, l) in needle.iter().enumerate() {
        let key = Level::Punctuation.normalise(l);
        // Braces and blank lines are everywhere; they say nothing about where.
        if key.chars().filter(|c| c.is_alphanumeric()).count() < 2 {
            continue;
        }
        wanted.entry(key.into_owned()).or_default().push(i);
    }
    if wanted.is_empty() {
        return None;
    }
    let mut score = vec![0u32; index.len()];
    for (k, line) in index.iter().enumerate() {
        if let Some(is) = wanted.get(Level::Punctuation.normalise(line.text(text)).as_ref()) {
            for &i in is {
                if k >= i {
                    score[k - i] += 1;
                }
            }
        }
    }
    let (best, &top) = score
        .iter()
        .enumerate()
        .max_by_key(|&(i, s)| (*s, std::cmp::Reverse(i)))?;
    if top == 0 {
        return None;
    }
    let from = best.saturating_sub(CLOSEST_CONTEXT);
    let to = (best + needle.len() + CLOSEST_CONTEXT)
        .min(index.len())
        .min(from + CLOSEST_LINES);
    let width = to.to_string().len();
    let mut out = String::new();
    for (k, line) in index.iter().enumerate().take(to).skip(from) {
        let t = line.text(text);
        let shown = crate::text::clip(t, CLOSEST_LINE_CHARS);
        out.push_str(&format!("{:>width$}| {shown}\n", k + 1));
    }
    // Say where the difference starts: the first needle line not in place.
    if let Some(i) = needle.iter().enumerate().position(|(i, l)| {
        index.get(best + i).is_none_or(|f| {
            Level::Punctuation.normalise(f.text(text)) != Level::Punctuation.normalise(l)
        })
    }) {
        out.push_str(&format!(
            "(line {} of old_string, {:?}, differs from line {} of the file)",
            i + 1,
            crate::text::clip(needle[i], 80),
            best + i + 1
        ));
    }
    Some(out.trim_end().to_string())
}

#[cfg(test)]
mod tests;
