//! The shell parser: tokens from `lex.rs` grouped into lists of pipelines of
//! simple commands, `( … )` and `{ …; }` groups, function definitions and
//! `for NAME [in WORDS]; do …; done` loops (other compound commands stay
//! flat: their keywords are words the readers skip).
//! List operators (`;`, `&&`, `||`, newlines) are not kept apart: every
//! reader of the tree checks every command in it, so which one runs after
//! which does not matter to them. It knows nothing of what commands mean.

use super::ast::{Cmd, Pipeline};
use super::lex::{Lexer, Op, Tok};

/// Nesting of `( … )` and `{ …; }` groups the parser follows.
const MAX_GROUPS: usize = 32;

struct Parser {
    toks: Vec<Tok>,
    i: usize,
    depth: usize,
    too_deep: bool,
}

#[derive(PartialEq, Clone, Copy)]
enum Closer {
    Paren,
    Brace,
    /// A `for` loop's body, ended by `done`.
    Done,
}

/// Why a command line could not be read. Every reader treats it as the
/// worst case (refused, or not read-only), never as "nothing to see".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Groups, loops or function bodies nested past `MAX_GROUPS`.
    #[error("nested more than {MAX_GROUPS} deep")]
    TooDeep,
}

/// `text` as a list of pipelines: the one way every reader of command lines
/// (the denylist, the read-only classifier) gets at their commands.
/// Unclosed quotes and substitutions read as if closed; only nesting too
/// deep to follow is an error.
pub fn parse(text: &str) -> Result<Vec<Pipeline>, ParseError> {
    Parser::parse(text)
}

impl Parser {
    fn parse(text: &str) -> Result<Vec<Pipeline>, ParseError> {
        let mut p = Parser {
            toks: Lexer::new(text).run(),
            i: 0,
            depth: 0,
            too_deep: false,
        };
        let list = p.list(None);
        if p.too_deep {
            Err(ParseError::TooDeep)
        } else {
            Ok(list)
        }
    }

    fn is_brace(&self, b: &str) -> bool {
        matches!(self.toks.get(self.i), Some(Tok::Word(w)) if w.bare() == Some(b))
    }

    fn list(&mut self, closer: Option<Closer>) -> Vec<Pipeline> {
        let mut out: Vec<Pipeline> = Vec::new();
        // `while …; do …; done` inside a `for` body: its `done` is not ours.
        let mut inner_loops = 0usize;
        while self.i < self.toks.len() {
            match &self.toks[self.i] {
                Tok::Op(Op::Amp) => {
                    if let Some(p) = out.last_mut() {
                        p.background = true;
                    }
                    self.i += 1;
                }
                Tok::Op(Op::Semi | Op::Newline | Op::AndIf | Op::OrIf | Op::Pipe) => self.i += 1,
                Tok::Op(Op::RParen) => {
                    self.i += 1;
                    if closer == Some(Closer::Paren) {
                        return out;
                    }
                }
                _ if closer == Some(Closer::Brace) && self.is_brace("}") => {
                    self.i += 1;
                    return out;
                }
                _ if closer == Some(Closer::Done) && self.is_brace("done") && inner_loops == 0 => {
                    self.i += 1;
                    return out;
                }
                _ => {
                    if closer == Some(Closer::Done) {
                        if self.is_brace("do") {
                            inner_loops += 1;
                        } else if self.is_brace("done") {
                            inner_loops -= 1;
                        }
                    }
                    let before = self.i;
                    let p = self.pipeline();
                    if self.i == before {
                        self.i += 1;
                    }
                    out.push(p);
                }
            }
        }
        out
    }

    fn pipeline(&mut self) -> Pipeline {
        let mut stages = vec![self.command()];
        while matches!(self.toks.get(self.i), Some(Tok::Op(Op::Pipe))) {
            self.i += 1;
            while matches!(self.toks.get(self.i), Some(Tok::Op(Op::Newline))) {
                self.i += 1;
            }
            stages.push(self.command());
        }
        Pipeline {
            stages,
            background: false,
        }
    }

    fn group(&mut self, closer: Closer) -> Cmd {
        self.i += 1;
        self.depth += 1;
        let body = if self.depth > MAX_GROUPS {
            self.too_deep = true;
            self.i = self.toks.len();
            Vec::new()
        } else {
            self.list(Some(closer))
        };
        self.depth -= 1;
        let mut redirs = Vec::new();
        while let Some(Tok::Redir(r)) = self.toks.get(self.i) {
            redirs.push(r.clone());
            self.i += 1;
        }
        Cmd::Group { body, redirs }
    }

    /// `for NAME [in WORDS] (; or newline) do LIST done`, or `None` (and
    /// nothing consumed) when the tokens are not that shape, such as the
    /// arithmetic `for ((…))`, which stays a flat list of words.
    fn for_loop(&mut self) -> Option<Cmd> {
        let start = self.i;
        let var = match self.toks.get(self.i + 1) {
            Some(Tok::Word(w)) => w
                .bare()
                .filter(|n| !n.is_empty() && n.chars().all(super::lex::is_name_char))?
                .to_string(),
            _ => return None,
        };
        self.i += 2;
        let skip_breaks = |p: &mut Parser| {
            while matches!(p.toks.get(p.i), Some(Tok::Op(Op::Newline))) {
                p.i += 1;
            }
        };
        skip_breaks(self);
        let mut words = None;
        if self.is_brace("in") {
            self.i += 1;
            let mut list = Vec::new();
            while let Some(Tok::Word(w)) = self.toks.get(self.i) {
                list.push(w.clone());
                self.i += 1;
            }
            words = Some(list);
        }
        if matches!(self.toks.get(self.i), Some(Tok::Op(Op::Semi))) {
            self.i += 1;
        }
        skip_breaks(self);
        if !self.is_brace("do") {
            self.i = start;
            return None;
        }
        self.i += 1;
        self.depth += 1;
        let body = if self.depth > MAX_GROUPS {
            self.too_deep = true;
            self.i = self.toks.len();
            Vec::new()
        } else {
            self.list(Some(Closer::Done))
        };
        self.depth -= 1;
        Some(Cmd::For { var, words, body })
    }

    fn command(&mut self) -> Cmd {
        if matches!(self.toks.get(self.i), Some(Tok::Op(Op::LParen))) {
            return self.group(Closer::Paren);
        }
        if self.is_brace("{") {
            return self.group(Closer::Brace);
        }
        if self.is_brace("for") {
            if let Some(c) = self.for_loop() {
                return c;
            }
        }
        let mut words = Vec::new();
        let mut redirs = Vec::new();
        loop {
            match self.toks.get(self.i) {
                Some(Tok::Word(w)) => {
                    words.push(w.clone());
                    self.i += 1;
                }
                Some(Tok::Redir(r)) => {
                    redirs.push(r.clone());
                    self.i += 1;
                }
                Some(Tok::Op(Op::LParen))
                    if words.len() == 1
                        && matches!(self.toks.get(self.i + 1), Some(Tok::Op(Op::RParen))) =>
                {
                    self.i += 2;
                    while matches!(self.toks.get(self.i), Some(Tok::Op(Op::Newline))) {
                        self.i += 1;
                    }
                    let name = words[0].bare().unwrap_or_default().to_string();
                    self.depth += 1;
                    if self.depth > MAX_GROUPS {
                        self.too_deep = true;
                        self.i = self.toks.len();
                    }
                    let body = Box::new(self.command());
                    self.depth -= 1;
                    return Cmd::Func { name, body };
                }
                _ => break,
            }
        }
        Cmd::Simple { words, redirs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::ast::Cmd;

    #[test]
    fn for_loops_keep_their_variable_words_and_body() {
        let list =
            parse("for d in a 'b c'; do while x; do y; done; z; done | cat; echo after").unwrap();
        assert_eq!(list.len(), 2, "{list:?}");
        let Cmd::For { var, words, body } = &list[0].stages[0] else {
            panic!("not a loop: {list:?}");
        };
        assert_eq!(var, "d");
        assert_eq!(words.as_ref().map(Vec::len), Some(2));
        // `while x`, `do y`, `done`, `z`: the inner `done` is not the loop's.
        assert_eq!(body.len(), 4, "{body:?}");
        assert_eq!(list[0].stages.len(), 2);

        let list = parse("for x\ndo echo $x; done").unwrap();
        assert!(matches!(&list[0].stages[0], Cmd::For { words: None, .. }));
        // Not a loop of words: left flat, as before.
        let list = parse("for ((i=0; i<3; i++)); do echo; done").unwrap();
        assert!(!matches!(&list[0].stages[0], Cmd::For { .. }));
    }

    #[test]
    fn nesting_past_the_bound_is_an_error_not_an_overflow() {
        let ok = format!("{}ls{}", "(".repeat(MAX_GROUPS), ")".repeat(MAX_GROUPS));
        assert!(parse(&ok).is_ok());
        for deep in [
            format!("{}ls{}", "(".repeat(100_000), ")".repeat(100_000)),
            "{ ".repeat(100_000),
            "for x in a; do ".repeat(100_000),
            "f() ".repeat(100_000),
        ] {
            assert_eq!(parse(&deep).map(|_| ()), Err(ParseError::TooDeep));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_is_too_deep_without_a_panic(text in proptest::prelude::any::<String>()) {
            let _ = parse(&text);
        }

        #[test]
        fn shell_like_text_parses_without_a_panic(
            text in "[a-z0-9 ${}()|&;<>'\"`\\#\n=*-]{0,200}",
        ) {
            let _ = parse(&text);
        }
    }
}
