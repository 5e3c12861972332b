//! Brace expansion, as bash does it before anything else touches a word:
//! `/{etc,usr}` is `/etc /usr`, `{a..c}` is `a b c`, `x{1..9..4}` is
//! `x1 x5 x9`. Only braces, commas and dots the shell would see unquoted
//! take part: the caller marks each character as active or not. It does
//! not look at variables, globs or quoting otherwise, and it is bounded:
//! a word that would grow past `MAX_WORDS` is an error, not a slow loop.

/// The most words one word may expand to before it is "too many to check".
pub(crate) const MAX_WORDS: usize = 1024;

/// A character of a word and whether the shell would see it unquoted.
pub(crate) type Marked = (char, bool);

/// The words `word` expands to (itself when it holds no expansion), or
/// `Err(())` when there would be more than `MAX_WORDS`.
pub(crate) fn expand(word: &[Marked]) -> Result<Vec<String>, ()> {
    let mut out = Vec::new();
    expand_into(word.to_vec(), &mut out)?;
    Ok(out)
}

fn expand_into(word: Vec<Marked>, out: &mut Vec<String>) -> Result<(), ()> {
    let Some((open, close, alts)) = first_expansion(&word) else {
        if out.len() >= MAX_WORDS {
            return Err(());
        }
        out.push(word.iter().map(|(c, _)| c).collect());
        return Ok(());
    };
    for alt in alts {
        let mut next = word[..open].to_vec();
        next.extend(alt);
        next.extend_from_slice(&word[close + 1..]);
        expand_into(next, out)?;
    }
    Ok(())
}

/// The first `{…}` that expands: its bounds and its alternatives.
#[allow(clippy::type_complexity)]
fn first_expansion(w: &[Marked]) -> Option<(usize, usize, Vec<Vec<Marked>>)> {
    let active = |i: usize, c: char| w[i] == (c, true);
    for open in 0..w.len() {
        // `${…}` never reaches here as text; a literal `$` before a brace
        // still stops bash from expanding it.
        if !active(open, '{') || (open > 0 && w[open - 1].0 == '$') {
            continue;
        }
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (i, _) in w.iter().enumerate().skip(open) {
            if active(i, '{') {
                depth += 1;
            } else if active(i, '}') {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            } else if active(i, ',') && depth == 1 {
                commas.push(i);
            }
        }
        let Some(close) = close else {
            continue;
        };
        if !commas.is_empty() {
            let mut alts = Vec::new();
            let mut start = open + 1;
            for c in commas.into_iter().chain([close]) {
                alts.push(w[start..c].to_vec());
                start = c + 1;
            }
            return Some((open, close, alts));
        }
        let inner: String = w[open + 1..close].iter().map(|(c, _)| c).collect();
        if let Some(seq) = sequence(&inner) {
            let alts = seq
                .into_iter()
                .map(|s| s.chars().map(|c| (c, false)).collect())
                .collect();
            return Some((open, close, alts));
        }
    }
    None
}

/// `1..5`, `05..10..5`, `a..e`, `z..a..2`: the words, or `None` when the
/// text is not a sequence. A sequence longer than `MAX_WORDS` is not built:
/// `MAX_WORDS + 1` placeholders stand for it, so the caller reports it as
/// too many.
fn sequence(inner: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = inner.split("..").collect();
    let (a, b, step) = match parts.as_slice() {
        [a, b] => (*a, *b, 1i64),
        [a, b, s] => (*a, *b, s.parse::<i64>().ok()?.checked_abs()?.max(1)),
        _ => return None,
    };
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let count = (x.abs_diff(y) / step.unsigned_abs()).saturating_add(1);
        if count > MAX_WORDS as u64 {
            // Too many to list: one word that still says "a number here".
            return Some(vec!["\u{E000}".into(); MAX_WORDS + 1]);
        }
        let width = if [a, b]
            .iter()
            .any(|s| s.trim_start_matches('-').starts_with('0') && s.len() > 1)
        {
            a.len().max(b.len())
        } else {
            0
        };
        let dir = if y >= x { step } else { -step };
        let mut v = x;
        let mut out = Vec::new();
        while (dir > 0 && v <= y) || (dir < 0 && v >= y) {
            out.push(format!("{v:0width$}"));
            v += dir;
        }
        return Some(out);
    }
    let (mut ca, mut cb) = (a.chars(), b.chars());
    match (ca.next(), ca.next(), cb.next(), cb.next()) {
        (Some(x), None, Some(y), None) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
            let (lo, hi) = (x.min(y) as u8, x.max(y) as u8);
            let mut out: Vec<String> = (lo..=hi)
                .step_by(step as usize)
                .map(|c| char::from(c).to_string())
                .collect();
            if x > y {
                out.reverse();
            }
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(s: &str) -> Vec<Marked> {
        s.chars().map(|c| (c, true)).collect()
    }

    #[test]
    fn lists_sequences_and_nesting_expand_as_bash_does() {
        let cases: &[(&str, &[&str])] = &[
            ("/{etc,usr}", &["/etc", "/usr"]),
            ("{rm,-rf,/}", &["rm", "-rf", "/"]),
            ("/{,etc}", &["/", "/etc"]),
            ("a{b,c{d,e}}f", &["abf", "acdf", "acef"]),
            ("{1..3}", &["1", "2", "3"]),
            ("{3..1}", &["3", "2", "1"]),
            ("{01..10..3}", &["01", "04", "07", "10"]),
            ("{a..c}", &["a", "b", "c"]),
            ("x{a,b}{1,2}", &["xa1", "xa2", "xb1", "xb2"]),
            ("{}", &["{}"]),
            ("{a}", &["{a}"]),
            ("{a,b", &["{a,b"]),
            ("${a,b}", &["${a,b}"]),
        ];
        for (word, want) in cases {
            assert_eq!(expand(&active(word)).unwrap(), *want, "{word}");
        }
    }

    #[test]
    fn quoted_braces_stay_literal() {
        let mut w = active("/{etc,usr}");
        for c in &mut w[1..] {
            c.1 = false;
        }
        assert_eq!(expand(&w).unwrap(), ["/{etc,usr}"]);
    }

    #[test]
    fn too_many_words_is_an_error_not_a_long_wait() {
        assert!(expand(&active("{1..100000}")).is_err());
        assert!(expand(&active(
            "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"
        ))
        .is_err());
        assert_eq!(expand(&active("{1..1024}")).unwrap().len(), 1024);
    }
}
