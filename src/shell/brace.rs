//! Brace expansion, as bash does it before anything else touches a word:
//! `/{etc,usr}` is `/etc /usr`, `{a..c}` is `a b c`, `x{1..9..4}` is
//! `x1 x5 x9`. Only braces, commas and dots the shell would see unquoted
//! take part: the caller marks each character as active or not. It does
//! not look at variables, globs or quoting otherwise, and it is bounded:
//! a word that would grow past `MAX_WORDS` is an error, not a slow loop.

/// The most words one word may expand to before it is "too many to check".
pub(crate) const MAX_WORDS: usize = 1024;

/// The most steps (a word looked at for its next expansion) one word may
/// take. Every list has two or more alternatives, so a word of at most
/// `MAX_WORDS` words takes fewer than `2 * MAX_WORDS`; only a chain of
/// thousands of one-word sequences (`{1..1}{1..1}…`) reaches this.
const MAX_STEPS: usize = 4 * MAX_WORDS;

/// The most characters all steps of one word may look at and copy: each
/// step reads and rebuilds the whole word, so a long word with many steps
/// (nested pairs that are no expansion, or long text beside the lists)
/// costs steps × length. 1 Mi characters keep a word under ~10 ms; a
/// word past it is too large to check.
const MAX_WORK: usize = 1 << 20;

/// A word that would expand to more than `MAX_WORDS` words, or take more
/// than `MAX_STEPS` steps or `MAX_WORK` characters of work to expand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooMany;

/// A character of a word and whether the shell would see it unquoted.
pub(crate) type Marked = (char, bool);

/// The words `word` expands to (itself when it holds no expansion), or
/// `TooMany`.
pub(crate) fn expand(word: &[Marked]) -> Result<Vec<String>, TooMany> {
    // Lists side by side multiply: `{a,b}` two hundred times is refused
    // here, before a first word is built.
    // Every one of those lists (and sequences) is a step on the way to
    // the first word: thousands of `{1..1}` are refused here too.
    let (words, steps) = at_least(word);
    if words > MAX_WORDS || steps > MAX_STEPS {
        return Err(TooMany);
    }
    let mut out = Vec::new();
    let mut spent = Spent::default();
    expand_into(word.to_vec(), &mut out, &mut spent)?;
    Ok(out)
}

/// What expanding one word has cost so far.
#[derive(Default)]
struct Spent {
    steps: usize,
    chars: usize,
}

fn expand_into(word: Vec<Marked>, out: &mut Vec<String>, spent: &mut Spent) -> Result<(), TooMany> {
    spent.steps += 1;
    spent.chars = spent.chars.saturating_add(word.len());
    if spent.steps > MAX_STEPS || spent.chars > MAX_WORK {
        return Err(TooMany);
    }
    let Some((open, close, alts)) = first_expansion(&word) else {
        if out.len() >= MAX_WORDS {
            return Err(TooMany);
        }
        out.push(word.iter().map(|(c, _)| c).collect());
        return Ok(());
    };
    for alt in alts {
        let mut next = word[..open].to_vec();
        next.extend(alt);
        next.extend_from_slice(&word[close + 1..]);
        expand_into(next, out, spent)?;
    }
    Ok(())
}

/// A lower bound of how many words `w` expands to: the product of the
/// sizes of its outermost comma lists, counting only those whose meaning
/// nothing before them can change (not after a `$`, and after another list
/// only when none of that one's alternatives could leave a `$` or nothing
/// before it). Each of those stays a list whatever is chosen before it, so
/// the word expands to at least this many: refusing above `MAX_WORDS` here
/// is what building the words would end in. Saturates, never overflows.
///
/// Also how many outermost lists and sequences it holds that stay so: each
/// is a step on the way to every word.
fn at_least(w: &[Marked]) -> (usize, usize) {
    let mut product: usize = 1;
    let mut groups: usize = 0;
    let mut last_close: Option<usize> = None;
    // Whether the last outermost list may leave a `$` (or nothing) before
    // the next character.
    let mut last_may_dollar = true;
    for p in pairs(w) {
        if last_close.is_some_and(|c| p.open <= c) {
            continue; // nested in the last outermost pair
        }
        let before = p.open.checked_sub(1).map(|i| w[i]);
        let counts = match before {
            None => true,
            Some(('$', _)) => false,
            Some(('}', true)) if last_close == Some(p.open - 1) => !last_may_dollar,
            Some(_) => true,
        };
        // Outermost pairs do not overlap, so reading each one's text once
        // costs the word's length.
        let is_sequence = p.commas.is_empty() && !p.nested && {
            let inner: String = w[p.open + 1..p.close].iter().map(|(c, _)| c).collect();
            sequence(&inner).is_some()
        };
        let mut ends = p.commas.iter().copied().chain([p.close]);
        let mut start = p.open + 1;
        // A sequence's words are never empty and never end in `$`.
        last_may_dollar = !is_sequence
            && (p.commas.is_empty()
                || ends.any(|end| {
                    let alt_empty = end == start;
                    // A nested list at the end may leave a `$` there too.
                    let alt_dollar = end > start && matches!(w[end - 1].0, '$' | '}');
                    start = end + 1;
                    alt_empty || alt_dollar
                }));
        last_close = Some(p.close);
        if counts && !p.commas.is_empty() {
            product = product.saturating_mul(p.commas.len() + 1);
            groups += 1;
        } else if counts && is_sequence {
            groups += 1;
        }
    }
    (product, groups)
}

/// A `{…}` pair of active braces, as one pass over the word finds it.
struct Pair {
    open: usize,
    close: usize,
    /// Active commas directly inside it (not inside a nested pair).
    commas: Vec<usize>,
    /// Holds another active `{`, so it cannot be a sequence.
    nested: bool,
}

/// The word's pairs of active braces, leftmost first. One pass with a
/// stack pairs them, so a word of many unclosed `{` costs its length, not
/// its length squared.
fn pairs(w: &[Marked]) -> Vec<Pair> {
    let mut open: Vec<(usize, Vec<usize>, bool)> = Vec::new();
    let mut pairs: Vec<Pair> = Vec::new();
    for (i, &(c, active)) in w.iter().enumerate() {
        if !active {
            continue;
        }
        match c {
            '{' => {
                if let Some(top) = open.last_mut() {
                    top.2 = true;
                }
                open.push((i, Vec::new(), false));
            }
            '}' => {
                if let Some((o, commas, nested)) = open.pop() {
                    pairs.push(Pair {
                        open: o,
                        close: i,
                        commas,
                        nested,
                    });
                }
            }
            ',' => {
                if let Some(top) = open.last_mut() {
                    top.1.push(i);
                }
            }
            _ => {}
        }
    }
    pairs.sort_unstable_by_key(|p| p.open);
    pairs
}

/// The first `{…}` that expands: its bounds and its alternatives.
#[allow(clippy::type_complexity)]
fn first_expansion(w: &[Marked]) -> Option<(usize, usize, Vec<Vec<Marked>>)> {
    for p in pairs(w) {
        // `${…}` never reaches here as text; a literal `$` before a brace
        // still stops bash from expanding it.
        if p.open > 0 && w[p.open - 1].0 == '$' {
            continue;
        }
        if !p.commas.is_empty() {
            let mut alts = Vec::new();
            let mut start = p.open + 1;
            for c in p.commas.into_iter().chain([p.close]) {
                alts.push(w[start..c].to_vec());
                start = c + 1;
            }
            return Some((p.open, p.close, alts));
        }
        // A sequence holds no brace, so one with a nested pair is not one.
        if p.nested {
            continue;
        }
        let inner: String = w[p.open + 1..p.close].iter().map(|(c, _)| c).collect();
        if let Some(seq) = sequence(&inner) {
            let alts = seq
                .into_iter()
                .map(|s| s.chars().map(|c| (c, false)).collect())
                .collect();
            return Some((p.open, p.close, alts));
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
        assert_eq!(expand(&active("{1..100000}")), Err(TooMany));
        assert!(expand(&active(
            "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"
        ))
        .is_err());
        assert_eq!(expand(&active("{1..1024}")).unwrap().len(), 1024);
    }

    /// Brace expansion as it was before the one-pass pairing and the early
    /// refusals, kept to check that they change no result.
    fn reference_into(word: Vec<Marked>, out: &mut Vec<String>) -> Result<(), ()> {
        let Some((open, close, alts)) = reference_first(&word) else {
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
            reference_into(next, out)?;
        }
        Ok(())
    }

    /// The first `{…}` that expands: its bounds and its alternatives.
    #[allow(clippy::type_complexity)]
    fn reference_first(w: &[Marked]) -> Option<(usize, usize, Vec<Vec<Marked>>)> {
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

    fn reference(word: &[Marked]) -> Result<Vec<String>, ()> {
        let mut out = Vec::new();
        reference_into(word.to_vec(), &mut out)?;
        Ok(out)
    }

    #[test]
    fn a_long_word_with_many_steps_is_refused_before_a_long_wait() {
        // 1,024 words of 2,010 characters: 2 MiB of text to build.
        let long = format!("{}{}", "{a,b}".repeat(10), "x".repeat(2000));
        let started = std::time::Instant::now();
        assert_eq!(expand(&active(&long)), Err(TooMany));
        // The same lists beside short text still expand.
        let short = format!("{}{}", "{a,b}".repeat(10), "x".repeat(20));
        assert_eq!(expand(&active(&short)).unwrap().len(), 1024);
        // Nested pairs that are no expansion, beside lists: every step
        // reads them all again.
        let nested = format!("{}{}", "{a,b}".repeat(9), "{.{l..3}.}".repeat(200));
        assert_eq!(expand(&active(&nested)), Err(TooMany));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn long_words_are_refused_or_expanded_in_linear_time() {
        let unclosed = active(&"{".repeat(200_000));
        assert_eq!(expand(&unclosed).unwrap().len(), 1);
        assert_eq!(expand(&active(&"{a,b}".repeat(200_000))), Err(TooMany));
        assert_eq!(expand(&active(&"{1..1}".repeat(200_000))), Err(TooMany));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// The same words (or the same refusal) as the reference, on words
        /// made of the characters that matter, some of them quoted.
        #[test]
        fn expansion_matches_the_reference(
            chars in proptest::collection::vec(
                (proptest::sample::select(vec!['{', '}', ',', '.', '$', 'a', '1', '2']), proptest::prelude::any::<bool>()),
                0..64,
            ),
        ) {
            let got = expand(&chars).map_err(|_| ());
            proptest::prop_assert_eq!(got, reference(&chars));
        }
    }
}
