//! A small line-based unified diff, for showing a file change before it is
//! approved. Common leading and trailing lines are set aside first, then the
//! middle is aligned by Myers' algorithm (the `similar` crate) under a time
//! budget, past which it settles for a coarser but still correct diff. The
//! text is capped, so a huge rewrite costs a bounded event.

/// Time the line alignment may take before it settles for a coarser diff.
const ALIGN_BUDGET: std::time::Duration = std::time::Duration::from_millis(200);
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
    let same_start = common_prefix(a, b);
    let room = a.len().min(b.len()) - same_start;
    let same_end = common_suffix(&a[a.len() - room..], &b[b.len() - room..]);
    // Back to the start of the line CONTEXT lines before the first change.
    let mut from = memchr::memrchr(b'\n', &a[..same_start]).map_or(0, |i| i + 1);
    for _ in 0..CONTEXT {
        if from == 0 {
            break;
        }
        from = memchr::memrchr(b'\n', &a[..from - 1]).map_or(0, |i| i + 1);
    }
    // On to the end of the line CONTEXT lines after the last change.
    let tail_of = |s: &[u8]| {
        let mut to = s.len() - same_end;
        for _ in 0..=CONTEXT {
            match memchr::memchr(b'\n', &s[to..]) {
                Some(i) => to += i + 1,
                None => return s.len(),
            }
        }
        to
    };
    let (old_to, new_to) = (tail_of(a), tail_of(b));
    let skipped = memchr::memchr_iter(b'\n', &a[..from]).count();
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

/// Bytes equal at the start of both. Compared a block at a time (a
/// memcmp) and only the differing block byte by byte: a byte loop over a
/// 10 MB file costs milliseconds.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Bytes equal at the end of both, compared like `common_prefix`.
pub fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut left = n;
    while left >= BLOCK && a[left - BLOCK..left] == b[left - BLOCK..left] {
        left -= BLOCK;
    }
    n - left
        + a[..left]
            .iter()
            .rev()
            .zip(b[..left].iter().rev())
            .take_while(|(x, y)| x == y)
            .count()
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
    // Past the deadline Myers' search settles for a longer, still correct
    // script, so a huge rewrite costs bounded time.
    let deadline = std::time::Instant::now() + ALIGN_BUDGET;
    for op in
        similar::capture_diff_slices_deadline(similar::Algorithm::Myers, ma, mb, Some(deadline))
    {
        let (tag, old, new) = op.as_tag_tuple();
        if tag == similar::DiffTag::Equal {
            out.extend(ma[old].iter().map(|l| Line::Same(l)));
            continue;
        }
        out.extend(ma[old].iter().map(|l| Line::Removed(l)));
        out.extend(mb[new].iter().map(|l| Line::Added(l)));
    }
    out.extend(a[a.len() - suffix..].iter().map(|l| Line::Same(l)));
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
    fn common_ends_agree_with_a_byte_loop_across_block_edges() {
        let base: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for at in [0, 1, 4095, 4096, 4097, 8191, 9_999] {
            let mut other = base.clone();
            other[at] ^= 0xff;
            assert_eq!(common_prefix(&base, &other), at);
            assert_eq!(common_suffix(&base, &other), base.len() - at - 1);
        }
        assert_eq!(common_prefix(&base, &base[..5000]), 5000);
        assert_eq!(common_suffix(&base, &base[5000..]), 5000);
        assert_eq!(common_prefix(b"", b"x"), 0);
        assert_eq!(common_suffix(b"ab", b"b"), 1);
    }

    #[test]
    fn changes_far_apart_in_a_big_file_are_two_small_hunks() {
        // 3,000 x 3,000 lines between the first and last change: an LCS
        // table of 9 million cells, once shown as a whole-file rewrite.
        let old: String = (0..3_000).map(|i| format!("line {i}\n")).collect();
        let new = old
            .replacen("line 0\n", "first\n", 1)
            .replacen("line 2999\n", "last\n", 1);
        let diff = unified("f", &old, &new);
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.contains("-line 0\n+first\n") && diff.contains("-line 2999\n+last\n"));
        assert!(diff.lines().count() < 20, "{diff}");
    }

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
