//! Lines of a text and the normalisation levels the matching tries, from
//! strict to lenient: exact, trailing whitespace ignored, leading and
//! trailing whitespace ignored, then Unicode punctuation folded as well
//! (curly quotes, dashes, non-breaking and other odd spaces). Also the
//! re-indentation that puts model text into the file's own indentation
//! style. No decisions about which match wins; `engine` makes them.

use std::borrow::Cow;

/// How loosely a needle was matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Exact,
    TrailingWhitespace,
    Whitespace,
    Punctuation,
}

impl Level {
    /// The lenient levels, in the order they are tried.
    pub const FUZZY: [Level; 3] = [
        Level::TrailingWhitespace,
        Level::Whitespace,
        Level::Punctuation,
    ];

    /// Every level, strictest first.
    pub const ALL: [Level; 4] = [
        Level::Exact,
        Level::TrailingWhitespace,
        Level::Whitespace,
        Level::Punctuation,
    ];

    /// How a result describes the match to the model.
    pub fn describe(self) -> &'static str {
        match self {
            Level::Exact => "exact match",
            Level::TrailingWhitespace => "matched ignoring trailing whitespace",
            Level::Whitespace => "matched ignoring indentation and trailing whitespace",
            Level::Punctuation => {
                "matched ignoring whitespace and Unicode punctuation (quotes, dashes, spaces)"
            }
        }
    }

    /// A line as this level compares it.
    pub fn normalise(self, line: &str) -> Cow<'_, str> {
        match self {
            Level::Exact => Cow::Borrowed(line),
            Level::TrailingWhitespace => Cow::Borrowed(line.trim_end()),
            Level::Whitespace => Cow::Borrowed(line.trim()),
            Level::Punctuation => fold(line.trim()),
        }
    }
}

/// One line of a text: byte offsets of its start, the end of its content
/// (before `\n` or `\r\n`), and the end of its line ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    pub start: usize,
    pub content_end: usize,
    pub end: usize,
}

impl Line {
    pub fn text(self, s: &str) -> &str {
        &s[self.start..self.content_end]
    }

    /// The line's own ending, `""` for a last line without one.
    pub fn ending(self, s: &str) -> &str {
        &s[self.content_end..self.end]
    }
}

/// Every line of `s`; a final line ending does not start an empty line.
pub fn index(s: &str) -> Vec<Line> {
    let mut out = Vec::with_capacity(s.len() / 32 + 1);
    let mut start = 0;
    while start < s.len() {
        let line = line_at(s, start);
        start = line.end;
        out.push(line);
    }
    out
}

/// The line of `s` that starts at byte `start` (a line start, before the
/// end of `s`): up to its `\n` or `\r\n`, or to the end of `s`.
pub fn line_at(s: &str, start: usize) -> Line {
    let bytes = s.as_bytes();
    let nl = memchr::memchr(b'\n', &bytes[start..]).map(|i| start + i);
    let (content_end, end) = match nl {
        Some(i) if i > start && bytes[i - 1] == b'\r' => (i - 1, i + 1),
        Some(i) => (i, i + 1),
        None => (s.len(), s.len()),
    };
    Line {
        start,
        content_end,
        end,
    }
}

/// The line (from 1) holding byte `at`.
pub fn line_number(s: &str, at: usize) -> usize {
    memchr::memchr_iter(b'\n', &s.as_bytes()[..at.min(s.len())]).count() + 1
}

/// The needle's lines, and whether it ended in a newline (whole lines).
pub fn split(s: &str) -> (Vec<&str>, bool) {
    let whole = s.ends_with('\n');
    let body = s.strip_suffix('\n').unwrap_or(s);
    if body.is_empty() && !whole {
        return (Vec::new(), false);
    }
    (body.split('\n').collect(), whole)
}

/// One Unicode punctuation or space character as the ASCII one a model
/// writes for it, or itself.
pub fn fold_char(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{00B4}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}'
        | '\u{00BB}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' => '-',
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        c => c,
    }
}

/// `s` with every character folded; borrowed when nothing folds.
pub fn fold(s: &str) -> Cow<'_, str> {
    if s.is_ascii() || !s.chars().any(|c| fold_char(c) != c) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(fold_char).collect())
}

/// The leading whitespace of a line.
pub fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Columns of an indentation, a tab counting as `TAB` columns.
const TAB: usize = 4;

fn cols(indent: &str) -> usize {
    indent
        .chars()
        .map(|c| if c == '\t' { TAB } else { 1 })
        .sum()
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The indentation structure of some lines: the base (first non-blank
/// line's indent, in columns) and the unit each step of nesting takes
/// (0 when every line sits at the base).
#[derive(Debug, Clone, Copy)]
struct Shape {
    base: usize,
    unit: usize,
}

fn shape<'a>(lines: impl Iterator<Item = &'a str> + Clone) -> Shape {
    let base = lines
        .clone()
        .find(|l| !l.trim().is_empty())
        .map_or(0, |l| cols(indent(l)));
    let unit = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| cols(indent(l)).abs_diff(base))
        .fold(0, gcd);
    Shape { base, unit }
}

/// Whether `file` lines (matched by trimmed content) nest the way `needle`
/// lines do, in their own units: 4-space code matched by 2-space text is
/// fine, a flattened or jumbled needle is not (re-indenting new text from
/// it could change what the code means).
pub fn same_nesting(file: &[&str], needle: &[&str]) -> bool {
    let f = shape(file.iter().copied());
    let n = shape(needle.iter().copied());
    file.iter().zip(needle).all(|(fl, nl)| {
        if fl.trim().is_empty() || nl.trim().is_empty() {
            return true;
        }
        let fd = cols(indent(fl)) as isize - f.base as isize;
        let nd = cols(indent(nl)) as isize - n.base as isize;
        // fd / f.unit == nd / n.unit, without dividing by a zero unit.
        fd * n.unit.max(1) as isize == nd * f.unit.max(1) as isize && (fd == 0) == (nd == 0)
    })
}

/// The new lines as they go into the file in place of `file` (the matched
/// lines, which `needle` matched at `level`). A new line equal to a needle
/// line is that file line itself, as it was (its indentation, trailing
/// space, quotes); at the levels that ignore indentation the others are
/// moved from the needle's indentation to the file's (its base, its unit,
/// tabs or spaces).
pub fn rewrite(file: &[&str], needle: &[&str], new: &[&str], level: Level) -> Vec<String> {
    let f = shape(file.iter().copied());
    let n = shape(needle.iter().chain(new.iter()).copied());
    let n_base = shape(needle.iter().copied()).base;
    let tabs = file.iter().any(|l| indent(l).contains('\t'));
    let f_base_text = file
        .iter()
        .find(|l| !l.trim().is_empty())
        .map_or("", |l| indent(l));
    let n_base_text = needle
        .iter()
        .find(|l| !l.trim().is_empty())
        .map_or("", |l| indent(l));
    // Nesting steps of a different width (2 spaces for the file's 4) also
    // need moving, even when both start at the same column.
    let own_unit = shape(needle.iter().copied()).unit;
    let reindent = level >= Level::Whitespace
        && (f_base_text != n_base_text
            || tabs != n_base_text.contains('\t')
            || (f.unit != 0 && own_unit != 0 && f.unit != own_unit));
    // Units: the file's own, else the needle's (one step is one step).
    let (f_unit, n_unit) = match (f.unit, n.unit) {
        (0, 0) => (TAB, TAB),
        (0, u) => (if tabs { TAB } else { u }, u),
        (u, 0) => (u, u),
        (fu, nu) => (fu, nu),
    };
    let mut next = 0;
    new.iter()
        .map(|line| {
            let same = (next..needle.len())
                .chain(0..next)
                .find(|&j| needle[j] == *line);
            if let Some(j) = same {
                next = j + 1;
                return file[j].to_string();
            }
            if !reindent || line.trim().is_empty() {
                return line.to_string();
            }
            let delta = cols(indent(line)) as isize - n_base as isize;
            let steps = delta.div_euclid(n_unit as isize);
            let rest = delta.rem_euclid(n_unit as isize) as usize;
            let width = (f.base as isize + steps * f_unit as isize).max(0) as usize + rest;
            let mut out = if tabs {
                "\t".repeat(width / TAB) + &" ".repeat(width % TAB)
            } else {
                " ".repeat(width)
            };
            out.push_str(line.trim_start());
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_know_their_endings() {
        let s = "a\r\nb\nc";
        let l = index(s);
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].text(s), "a");
        assert_eq!(l[0].ending(s), "\r\n");
        assert_eq!(l[1].ending(s), "\n");
        assert_eq!((l[2].text(s), l[2].ending(s)), ("c", ""));
        assert_eq!(index("x\n").len(), 1);
        assert_eq!(line_number(s, 4), 2);
    }

    #[test]
    fn levels_normalise_as_named() {
        assert_eq!(Level::TrailingWhitespace.normalise("  a \t"), "  a");
        assert_eq!(Level::Whitespace.normalise("  a \t"), "a");
        assert_eq!(
            Level::Punctuation.normalise("\u{a0}“it’s” — ok"),
            "\"it's\" - ok"
        );
    }

    #[test]
    fn nesting_must_agree_for_reindentation() {
        let file = ["    if x {", "        y();", "    }"];
        assert!(same_nesting(&file, &["if x {", "  y();", "}"]));
        assert!(!same_nesting(&file, &["if x {", "y();", "}"]));
        assert!(!same_nesting(&file, &["  if x {", "y();", "}"]));
    }

    #[test]
    fn rewrite_moves_new_lines_into_the_files_indentation() {
        let file = ["\tif x {", "\t\ty();", "\t}"];
        let needle = ["if x {", "    y();", "}"];
        let new = ["if x {", "    y();", "    z();", "}"];
        assert_eq!(
            rewrite(&file, &needle, &new, Level::Whitespace),
            ["\tif x {", "\t\ty();", "\t\tz();", "\t}"]
        );
        // Same base, narrower steps: the new line takes the file's step.
        let file = ["fn f() {", "    a();", "}"];
        assert_eq!(
            rewrite(
                &file,
                &["fn f() {", "  a();", "}"],
                &["fn f() {", "  // b", "  a();", "}"],
                Level::Whitespace
            ),
            ["fn f() {", "    // b", "    a();", "}"]
        );
        // Exact indentation: new lines are taken as written.
        let file = ["a  ", "b"];
        assert_eq!(
            rewrite(&file, &["a", "b"], &["a", "c"], Level::TrailingWhitespace),
            ["a  ", "c"]
        );
    }
}
