//! Words as the shell would pass them: quotes removed, variables and
//! positional parameters set earlier on the line filled in (an unquoted one
//! split into words), `"$@"` one word per parameter, brace lists expanded,
//! and substitutions checked as scripts of their own. What cannot be known
//! here stands as `UNKNOWN` in the text, and the word says why.

use super::{Checker, Hit, TOO_BIG};
use crate::shell::ast::{Seg, Word};
use crate::shell::brace;
use crate::shell::words::is_assignment;

/// Stands for an expansion whose value cannot be known here.
pub(super) const UNKNOWN: char = '\u{E000}';
/// Stands for `${VAR:?}`: unknown, but never empty (the shell stops first).
pub(super) const NON_EMPTY: char = '\u{E001}';

/// A word after expansion: `UNKNOWN` stands where a value cannot be known.
#[derive(Debug, Clone, Default)]
pub(super) struct EWord {
    pub(super) text: String,
    /// Holds a substitution whose commands decode something (`base64 -d`).
    pub(super) decoded: bool,
    pub(super) quoted: bool,
    /// `NAME=value` with the name and `=` unquoted.
    pub(super) assign: bool,
    /// Holds a positional parameter (`$1`, `"$@"`) whose value is unknown.
    pub(super) from_params: bool,
    /// Holds a variable or parameter whose value is unknown (not only a
    /// command substitution, whose commands are checked).
    pub(super) opaque: bool,
}

impl EWord {
    pub(super) fn lit(s: &str) -> EWord {
        EWord {
            text: s.to_string(),
            ..EWord::default()
        }
    }
    pub(super) fn unknown(&self) -> bool {
        self.text.contains(UNKNOWN)
    }
}

impl Checker<'_> {
    /// Expands words, checking what their substitutions run.
    pub(super) fn expand(&mut self, words: &[Word], depth: usize) -> Result<Vec<EWord>, Hit> {
        let mut out = Vec::new();
        for w in words {
            // `x="rm -rf"; $x /`: an unquoted variable splits into words.
            if let [Seg::Var(name, false)] = w.segs.as_slice() {
                if let Some(Some(v)) = self.vars.get(name) {
                    out.extend(v.split_whitespace().map(EWord::lit));
                    continue;
                }
            }
            // `"$@"` is one word per parameter; `$@` and `$*` split them.
            // (`"…"` leaves an empty literal beside what it quoted.)
            let segs: Vec<&Seg> = w
                .segs
                .iter()
                .filter(|s| !matches!(s, Seg::Lit(l, _) if l.is_empty()))
                .collect();
            if let ([Seg::Param(p, quoted)], Some(params)) = (segs.as_slice(), &self.params) {
                if p == "@" || p == "*" {
                    let rest = params.iter().skip(1);
                    if *quoted && p == "@" {
                        out.extend(rest.map(|v| EWord {
                            quoted: true,
                            ..EWord::lit(v)
                        }));
                    } else if !*quoted {
                        out.extend(rest.flat_map(|v| v.split_whitespace()).map(EWord::lit));
                    } else {
                        let all: Vec<&str> = rest.map(String::as_str).collect();
                        out.push(EWord {
                            quoted: true,
                            ..EWord::lit(&all.join(" "))
                        });
                    }
                    continue;
                }
            }
            let mut e = EWord {
                assign: is_assignment(w),
                ..EWord::default()
            };
            // Which characters the shell sees unquoted, for brace expansion.
            let mut active: Vec<bool> = Vec::new();
            for seg in &w.segs {
                // Counted from the byte length before, not the whole text
                // again: a word of many pieces stays linear.
                let before = e.text.len();
                let mut literal = false;
                match seg {
                    Seg::Lit(s, q) => {
                        e.text.push_str(s);
                        e.quoted |= q;
                        literal = !q;
                    }
                    Seg::Var(name, q) => {
                        e.quoted |= q;
                        match self.vars.get(name) {
                            Some(Some(v)) => e.text.push_str(v),
                            None if name == "HOME" => e.text.push('~'),
                            Some(None) | None => {
                                e.text.push(UNKNOWN);
                                e.opaque = true;
                            }
                        }
                    }
                    Seg::Param(p, q) => {
                        e.quoted |= q;
                        match self.param(p) {
                            Some(v) => e.text.push_str(&v),
                            None => {
                                e.text.push(UNKNOWN);
                                e.from_params = true;
                                e.opaque = true;
                            }
                        }
                    }
                    Seg::NonEmpty => {
                        e.text.push(NON_EMPTY);
                        e.opaque = true;
                    }
                    Seg::Unknown => {
                        e.text.push(UNKNOWN);
                        e.opaque = true;
                    }
                    Seg::Sub(inner) => {
                        let saved = std::mem::take(&mut self.funcs);
                        let r = self.script(inner, depth + 1);
                        self.funcs = saved;
                        e.decoded |= r?.decodes;
                        e.text.push(UNKNOWN);
                    }
                }
                // Checked as the word grows: one word of many large
                // variables would otherwise be built first.
                self.within_budget(e.text.len())?;
                let added = e.text[before..].chars().count();
                active.extend(std::iter::repeat_n(literal, added));
            }
            // `/{etc,usr}` is two words; assignments are not brace-expanded.
            let braces = !e.assign && e.text.chars().zip(&active).any(|(c, a)| c == '{' && *a);
            if !braces {
                self.spend(e.text.len())?;
                out.push(e);
                continue;
            }
            let marked: Vec<brace::Marked> = e.text.chars().zip(active).collect();
            let words = brace::expand(&marked).map_err(|brace::TooMany| {
                Hit::Rule(
                    TOO_BIG,
                    format!("{} expands to over {} words", e.text, brace::MAX_WORDS),
                )
            })?;
            self.spend(words.iter().map(String::len).sum())?;
            out.extend(words.into_iter().map(|text| EWord { text, ..e.clone() }));
        }
        Ok(out)
    }

    /// Counts `bytes` more of expanded words against the check's budget.
    fn spend(&mut self, bytes: usize) -> Result<(), Hit> {
        self.chars = self.chars.saturating_add(bytes);
        self.within_budget(0)
    }

    /// Whether `more` bytes beside those built so far stay within budget.
    fn within_budget(&self, more: usize) -> Result<(), Hit> {
        if self.chars.saturating_add(more) > self.max_chars {
            return Err(Hit::Rule(
                TOO_BIG,
                format!("over {} bytes of words to check", self.max_chars),
            ));
        }
        Ok(())
    }

    /// A positional parameter's value (`@` and `*` joined), if known.
    pub(super) fn param(&self, p: &str) -> Option<String> {
        let params = self.params.as_ref()?;
        if p == "@" || p == "*" {
            return Some(params.get(1..).unwrap_or_default().join(" "));
        }
        let n: usize = p.parse().ok()?;
        Some(params.get(n).cloned().unwrap_or_default())
    }
}

/// The name and value of an assignment word.
pub(super) fn assignment(w: &EWord) -> Option<(&str, &str)> {
    if !w.assign {
        return None;
    }
    let (name, value) = w.text.split_once('=')?;
    Some((name.trim_end_matches('+'), value))
}
