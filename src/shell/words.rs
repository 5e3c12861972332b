//! Word forms that need no state: a command line that is nothing but
//! literal words (what an "always" prefix and a user's denylist pattern may
//! be), assignment words (`NAME=value`), and the characters of a name.
//! Expanding a word with what a script set earlier is the denylist's job.

use super::ast::{Seg, Word};
use super::lex::{is_name_char, Lexer, Tok};

/// The words of `command` when it is one simple command of nothing but
/// literal words (quotes allowed): no list, pipe, redirection, group,
/// substitution or expansion. The allow list trusts a prefix only on these,
/// so nothing can ride along behind the allowed words.
pub fn literal_words(command: &str) -> Option<Vec<String>> {
    plain_words(command).filter(|w| !w.is_empty())
}

/// A pattern's words when it is nothing but words (quotes allowed).
pub fn plain_words(p: &str) -> Option<Vec<String>> {
    let toks = Lexer::new(p).run();
    toks.into_iter()
        .map(|t| match t {
            Tok::Word(w) => w
                .segs
                .iter()
                .map(|s| match s {
                    Seg::Lit(l, _) => Some(l.as_str()),
                    _ => None,
                })
                .collect::<Option<String>>(),
            _ => None,
        })
        .collect()
}

/// Whether a word is `NAME=value` (or `NAME+=value`) with the name unquoted.
pub fn is_assignment(w: &Word) -> bool {
    let Some(Seg::Lit(s, false)) = w.segs.first() else {
        return false;
    };
    let Some(eq) = s.find('=') else {
        return false;
    };
    let name = s[..eq].strip_suffix('+').unwrap_or(&s[..eq]);
    !name.is_empty()
        && name.chars().all(is_name_char)
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `w` in double quotes, with the four characters that stay special
    /// there escaped.
    fn double_quoted(w: &str) -> String {
        let mut s = String::from('"');
        for c in w.chars() {
            if matches!(c, '"' | '\\' | '$' | '`') {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn any_words_quoted_read_back_as_the_same_words(
            words in prop::collection::vec(any::<String>(), 1..6),
            double in any::<bool>(),
        ) {
            let line: Vec<String> = words
                .iter()
                .map(|w| if double { double_quoted(w) } else { crate::host::shell_quote(w) })
                .collect();
            prop_assert_eq!(literal_words(&line.join(" ")), Some(words));
        }

        #[test]
        fn a_word_beside_an_expansion_or_operator_is_not_literal(
            word in "[a-z]{1,8}",
            extra in prop::sample::select(vec!["$x", "$(ls)", "`ls`", "| cat", "; ls", "> f", "&"]),
        ) {
            prop_assert_eq!(literal_words(&format!("{word} {extra}")), None);
        }
    }
}
