//! A small line-based unified diff, for showing a file change before it is
//! approved. Common leading and trailing lines are set aside first, then the
//! middle is aligned by longest common subsequence; a middle too large for
//! that (the table grows with the product of the line counts) is shown as
//! removed then added, which is still a correct diff. The text is capped, so
//! a huge rewrite costs a bounded event.

/// Largest table the alignment may build (cells); beyond it the middle is
/// shown whole.
const MAX_CELLS: usize = 1_000_000;
/// Unchanged lines shown around each change.
const CONTEXT: usize = 3;
/// Longest diff text handed on, in characters.
pub const MAX_DIFF_CHARS: usize = 8_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// A unified diff from `old` to `new` labelled with `path`, at most
/// `MAX_DIFF_CHARS` characters; empty when nothing changes.
pub fn unified(path: &str, old: &str, new: &str) -> String {
    unified_from(
        path,
        old,
        new,
        0,
        old.ends_with('\n') != new.ends_with('\n'),
    )
}

/// Like `unified`, for an edit of a file of any size: only the lines from
/// a few before the first difference to a few after the last are compared,
/// so a one-line change to a 10 MB file costs a scan, not an alignment of
/// the whole file.
pub fn unified_excerpt(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let same_start = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - same_start;
    let same_end = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    // Back to the start of the line CONTEXT lines before the first change.
    let mut from = a[..same_start]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    for _ in 0..CONTEXT {
        if from == 0 {
            break;
        }
        from = a[..from - 1]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |i| i + 1);
    }
    // On to the end of the line CONTEXT lines after the last change.
    let tail_of = |s: &[u8]| {
        let mut to = s.len() - same_end;
        for _ in 0..=CONTEXT {
            match s[to..].iter().position(|&c| c == b'\n') {
                Some(i) => to += i + 1,
                None => return s.len(),
            }
        }
        to
    };
    let (old_to, new_to) = (tail_of(a), tail_of(b));
    let skipped = a[..from].iter().filter(|&&c| c == b'\n').count();
    match (old.get(from..old_to), new.get(from..new_to)) {
        (Some(o), Some(n)) => unified_from(
            path,
            o,
            n,
            skipped,
            old.ends_with('\n') != new.ends_with('\n'),
        ),
        // Not on character boundaries (cannot happen at line starts); the
        // whole texts still give a correct diff.
        _ => unified(path, old, new),
    }
}

/// The diff of `old` and `new`, excerpts that start after `skipped` lines
/// of the file.
fn unified_from(
    path: &str,
    old: &str,
    new: &str,
    skipped: usize,
    eof_newline_changes: bool,
) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let lines = align(&a, &b);
    let mut out = format!("--- {path}\n+++ {path}\n");
    for (start, end) in hunks(&lines) {
        let (mut old_at, mut new_at) = (1 + skipped, 1 + skipped);
        for l in &lines[..start] {
            match l {
                Line::Same(_) => {
                    old_at += 1;
                    new_at += 1;
                }
                Line::Removed(_) => old_at += 1,
                Line::Added(_) => new_at += 1,
            }
        }
        let hunk = &lines[start..end];
        let old_len = hunk.iter().filter(|l| !matches!(l, Line::Added(_))).count();
        let new_len = hunk
            .iter()
            .filter(|l| !matches!(l, Line::Removed(_)))
            .count();
        out.push_str(&format!(
            "@@ -{},{old_len} +{},{new_len} @@\n",
            if old_len == 0 { old_at - 1 } else { old_at },
            if new_len == 0 { new_at - 1 } else { new_at },
        ));
        for l in hunk {
            let (mark, text) = match l {
                Line::Same(t) => (' ', t),
                Line::Removed(t) => ('-', t),
                Line::Added(t) => ('+', t),
            };
            out.push(mark);
            out.push_str(text);
            out.push('\n');
        }
    }
    if eof_newline_changes && !old.is_empty() && !new.is_empty() {
        out.push_str("\\ the newline at the end of the file changes\n");
    }
    cap(out)
}

/// Cuts `text` to `MAX_DIFF_CHARS` on a line boundary and says so.
fn cap(text: String) -> String {
    if text.chars().count() <= MAX_DIFF_CHARS {
        return text;
    }
    let total_lines = text.lines().count();
    let mut out = String::new();
    let mut kept = 0;
    for line in text.lines() {
        if out.chars().count() + line.chars().count() + 1 > MAX_DIFF_CHARS - 80 {
            break;
        }
        out.push_str(line);
        out.push('\n');
        kept += 1;
    }
    out.push_str(&format!(
        "[diff cut: showed {kept} of {total_lines} lines]\n"
    ));
    out
}

/// Every line of both texts in order, marked same, removed or added.
fn align<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Line<'a>> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut out: Vec<Line<'a>> = a[..prefix].iter().map(|l| Line::Same(l)).collect();
    if ma.len().saturating_mul(mb.len()) <= MAX_CELLS {
        out.extend(lcs(ma, mb));
    } else {
        out.extend(ma.iter().map(|l| Line::Removed(l)));
        out.extend(mb.iter().map(|l| Line::Added(l)));
    }
    out.extend(a[a.len() - suffix..].iter().map(|l| Line::Same(l)));
    out
}

fn lcs<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Line<'a>> {
    let (n, m) = (a.len(), b.len());
    // len[i][j]: the common subsequence of a[i..] and b[j..].
    let w = m + 1;
    let mut len = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[i * w + j] = if a[i] == b[j] {
                len[(i + 1) * w + j + 1] + 1
            } else {
                len[(i + 1) * w + j].max(len[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(n + m);
    while i < n && j < m {
        if a[i] == b[j] {
            out.push(Line::Same(a[i]));
            i += 1;
            j += 1;
        } else if len[(i + 1) * w + j] >= len[i * w + j + 1] {
            out.push(Line::Removed(a[i]));
            i += 1;
        } else {
            out.push(Line::Added(b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| Line::Removed(l)));
    out.extend(b[j..].iter().map(|l| Line::Added(l)));
    out
}

/// Ranges of `lines` to show: each change with `CONTEXT` lines around it,
/// neighbours that touch merged.
fn hunks(lines: &[Line<'_>]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if matches!(l, Line::Same(_)) {
            continue;
        }
        let start = i.saturating_sub(CONTEXT);
        let end = (i + 1 + CONTEXT).min(lines.len());
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_one_changed_line_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            unified("x.txt", old, new),
            "--- x.txt\n+++ x.txt\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
        assert_eq!(unified("x", old, old), "");
    }

    #[test]
    fn a_new_file_is_all_additions_and_separate_changes_are_separate_hunks() {
        assert_eq!(
            unified("n", "", "one\ntwo\n"),
            "--- n\n+++ n\n@@ -0,0 +1,2 @@\n+one\n+two\n"
        );
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("2\n", "two\n").replace("17\n", "seventeen\n");
        let d = unified("f", &old, &new);
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(
            d.contains("-2\n+two\n") && d.contains("-17\n+seventeen\n"),
            "{d}"
        );
    }

    #[test]
    fn huge_changes_are_bounded() {
        let old: String = (0..3000).map(|i| format!("old line {i}\n")).collect();
        let new: String = (0..3000).map(|i| format!("new line {i}\n")).collect();
        let d = unified("big", &old, &new);
        assert!(d.chars().count() <= MAX_DIFF_CHARS, "{}", d.len());
        assert!(d.ends_with("lines]\n"), "{}", &d[d.len() - 60..]);
        assert!(d.contains("-old line 0\n"));
    }
}
