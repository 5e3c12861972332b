//! The shell lexer: text to words, operators and redirections, the way `sh`
//! would split it, well enough for the checks that read commands (the
//! denylist, the read-only classifier, "always" prefixes). Words keep their
//! quoting and expansions as segments; nothing is expanded or run here.
//! Unclosed quotes and substitutions end with the text rather than failing.
//! It does not group words into commands: `parse.rs` does, into the types
//! of `ast.rs`.

use super::ast::{Redir, Seg, Word};

/// A character of a variable name.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Semi,
    Amp,
    AndIf,
    OrIf,
    Pipe,
    Newline,
    LParen,
    RParen,
}

#[derive(Debug, Clone)]
pub(crate) enum Tok {
    Word(Word),
    Op(Op),
    Redir(Redir),
}

pub(crate) struct Lexer {
    c: Vec<char>,
    i: usize,
    toks: Vec<Tok>,
    /// Here-documents whose text starts after the next newline: token index,
    /// delimiter, strip leading tabs.
    pending: Vec<(usize, String, bool)>,
}

fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>'
    )
}

impl Lexer {
    pub(crate) fn new(s: &str) -> Lexer {
        Lexer {
            c: s.chars().collect(),
            i: 0,
            toks: Vec::new(),
            pending: Vec::new(),
        }
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.c.get(self.i + k).copied()
    }

    /// Unclosed quotes and substitutions end with the text: a shell would
    /// refuse the command, and text typed into a pane may not be shell at
    /// all, so it is checked as if closed rather than waved through.
    pub(crate) fn run(mut self) -> Vec<Tok> {
        while let Some(ch) = self.peek(0) {
            match ch {
                ' ' | '\t' | '\r' => self.i += 1,
                '\\' if self.peek(1) == Some('\n') => self.i += 2,
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                '\n' => {
                    self.i += 1;
                    self.toks.push(Tok::Op(Op::Newline));
                    self.read_heredocs();
                }
                ';' => {
                    self.i += 1;
                    if self.peek(0) == Some(';') {
                        self.i += 1;
                    }
                    self.toks.push(Tok::Op(Op::Semi));
                }
                '&' if self.peek(1) == Some('&') => {
                    self.i += 2;
                    self.toks.push(Tok::Op(Op::AndIf));
                }
                '&' if self.peek(1) == Some('>') => {
                    self.i += 2;
                    let op = if self.peek(0) == Some('>') {
                        self.i += 1;
                        "&>>"
                    } else {
                        "&>"
                    };
                    self.redir(op.to_string());
                }
                '&' => {
                    self.i += 1;
                    self.toks.push(Tok::Op(Op::Amp));
                }
                '|' if self.peek(1) == Some('|') => {
                    self.i += 2;
                    self.toks.push(Tok::Op(Op::OrIf));
                }
                '|' => {
                    self.i += 1;
                    if self.peek(0) == Some('&') {
                        self.i += 1;
                    }
                    self.toks.push(Tok::Op(Op::Pipe));
                }
                '(' => {
                    self.i += 1;
                    self.toks.push(Tok::Op(Op::LParen));
                }
                ')' => {
                    self.i += 1;
                    self.toks.push(Tok::Op(Op::RParen));
                }
                '<' | '>' if self.peek(1) == Some('(') => {
                    let w = self.word();
                    self.toks.push(Tok::Word(w));
                }
                '<' | '>' => self.redir_op(),
                c if c.is_ascii_digit() && self.fd_redir_follows() => {
                    while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
                        self.i += 1;
                    }
                    self.redir_op();
                }
                _ => {
                    let w = self.word();
                    self.toks.push(Tok::Word(w));
                }
            }
        }
        self.toks
    }

    /// `2>`, `10>>`: digits directly followed by a redirection.
    fn fd_redir_follows(&self) -> bool {
        let mut k = 0;
        while self.peek(k).is_some_and(|c| c.is_ascii_digit()) {
            k += 1;
        }
        matches!(self.peek(k), Some('<' | '>')) && self.peek(k + 1) != Some('(')
    }

    fn redir_op(&mut self) {
        let mut op = String::new();
        let first = self.peek(0).unwrap_or('>');
        op.push(first);
        self.i += 1;
        match (first, self.peek(0), self.peek(1)) {
            ('<', Some('<'), Some('<')) => {
                op.push_str("<<");
                self.i += 2;
            }
            ('<', Some('<'), Some('-')) => {
                op.push_str("<-");
                self.i += 2;
            }
            ('<', Some('<' | '>' | '&'), _) | ('>', Some('>' | '|' | '&'), _) => {
                op.extend(self.peek(0));
                self.i += 1;
            }
            _ => {}
        }
        self.redir(op);
    }

    fn redir(&mut self, op: String) {
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.i += 1;
        }
        let target = if self.peek(0).is_some_and(|c| !is_meta(c)) {
            self.word()
        } else {
            Word::default()
        };
        if op == "<<" || op == "<<-" {
            let delim: String = target
                .segs
                .iter()
                .map(|s| match s {
                    Seg::Lit(l, _) => l.clone(),
                    Seg::Var(v, _) => format!("${v}"),
                    _ => String::new(),
                })
                .collect();
            self.pending.push((self.toks.len(), delim, op == "<<-"));
        }
        self.toks.push(Tok::Redir(Redir {
            op,
            target,
            body: None,
        }));
    }

    fn read_heredocs(&mut self) {
        for (at, delim, strip) in std::mem::take(&mut self.pending) {
            let mut body = String::new();
            while self.i < self.c.len() {
                let start = self.i;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.i += 1;
                }
                let line: String = self.c[start..self.i].iter().collect();
                self.i += 1;
                let line = if strip {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if line == delim {
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            if let Some(Tok::Redir(r)) = self.toks.get_mut(at) {
                r.body = Some(body);
            }
        }
    }

    /// The text up to the `)` that closes a `(` just consumed, honouring
    /// quotes and nesting.
    fn until_close_paren(&mut self) -> String {
        let start = self.i;
        let mut depth = 1usize;
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => self.i += 1,
                '\'' => {
                    self.i += 1;
                    while self.peek(0).is_some_and(|c| c != '\'') {
                        self.i += 1;
                    }
                }
                '"' => {
                    self.i += 1;
                    while let Some(c) = self.peek(0) {
                        if c == '\\' {
                            self.i += 1;
                        } else if c == '"' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        let inner = self.c[start..self.i].iter().collect();
                        self.i += 1;
                        return inner;
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
        self.i = self.i.min(self.c.len());
        self.c[start.min(self.c.len())..].iter().collect()
    }

    fn word(&mut self) -> Word {
        let mut w = Word::default();
        let mut lit = String::new();
        let flush = |lit: &mut String, w: &mut Word, quoted: bool| {
            if !lit.is_empty() {
                w.segs.push(Seg::Lit(std::mem::take(lit), quoted));
            }
        };
        while let Some(c) = self.peek(0) {
            match c {
                '<' | '>' if self.peek(1) == Some('(') => {
                    flush(&mut lit, &mut w, false);
                    self.i += 2;
                    let inner = self.until_close_paren();
                    w.segs.push(Seg::Sub(inner));
                }
                c if is_meta(c) => break,
                '\\' => {
                    flush(&mut lit, &mut w, false);
                    self.i += 1;
                    match self.peek(0) {
                        Some('\n') => self.i += 1,
                        Some(c) => {
                            self.i += 1;
                            w.segs.push(Seg::Lit(c.to_string(), true));
                        }
                        None => {}
                    }
                }
                '\'' => {
                    flush(&mut lit, &mut w, false);
                    self.i += 1;
                    let mut s = String::new();
                    while let Some(c) = self.peek(0) {
                        self.i += 1;
                        if c == '\'' {
                            break;
                        }
                        s.push(c);
                    }
                    w.segs.push(Seg::Lit(s, true));
                }
                '"' => {
                    flush(&mut lit, &mut w, false);
                    self.i += 1;
                    self.double_quoted(&mut w);
                }
                '$' if self.peek(1) == Some('\'') => {
                    flush(&mut lit, &mut w, false);
                    self.i += 2;
                    let s = self.ansi_c();
                    w.segs.push(Seg::Lit(s, true));
                }
                '$' if self.peek(1) == Some('"') => {
                    flush(&mut lit, &mut w, false);
                    self.i += 2;
                    self.double_quoted(&mut w);
                }
                '$' => {
                    flush(&mut lit, &mut w, false);
                    self.dollar(&mut w, false);
                }
                '`' => {
                    flush(&mut lit, &mut w, false);
                    self.i += 1;
                    let s = self.backtick();
                    w.segs.push(Seg::Sub(s));
                }
                c => {
                    lit.push(c);
                    self.i += 1;
                }
            }
        }
        flush(&mut lit, &mut w, false);
        w
    }

    fn double_quoted(&mut self, w: &mut Word) {
        let mut s = String::new();
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.i += 1;
                    break;
                }
                '\\' => {
                    self.i += 1;
                    match self.peek(0) {
                        Some('\n') => self.i += 1,
                        Some(c @ ('$' | '`' | '"' | '\\')) => {
                            s.push(c);
                            self.i += 1;
                        }
                        _ => s.push('\\'),
                    }
                }
                '$' | '`' => {
                    if !s.is_empty() {
                        w.segs.push(Seg::Lit(std::mem::take(&mut s), true));
                    }
                    if c == '`' {
                        self.i += 1;
                        let inner = self.backtick();
                        w.segs.push(Seg::Sub(inner));
                    } else {
                        self.dollar(w, true);
                    }
                }
                c => {
                    s.push(c);
                    self.i += 1;
                }
            }
        }
        // `""` is still a word, an empty one.
        w.segs.push(Seg::Lit(s, true));
    }

    fn backtick(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '`' => break,
                '\\' if matches!(self.peek(0), Some('`' | '\\' | '$')) => {
                    s.extend(self.peek(0));
                    self.i += 1;
                }
                c => s.push(c),
            }
        }
        s
    }

    /// At a `$`: a variable, a substitution or arithmetic.
    fn dollar(&mut self, w: &mut Word, quoted: bool) {
        self.i += 1;
        match self.peek(0) {
            Some('(') if self.peek(1) == Some('(') => {
                self.i += 2;
                let _ = self.until_close_paren();
                if self.peek(0) == Some(')') {
                    self.i += 1;
                }
                w.segs.push(Seg::Unknown);
            }
            Some('(') => {
                self.i += 1;
                let inner = self.until_close_paren();
                w.segs.push(Seg::Sub(inner));
            }
            Some('{') => {
                self.i += 1;
                let start = self.i;
                let mut depth = 1;
                while let Some(c) = self.peek(0) {
                    match c {
                        '\\' => self.i += 1,
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                let end = self.i.min(self.c.len());
                let inner: String = self.c[start..end].iter().collect();
                self.i = (self.i + 1).min(self.c.len());
                let name: String = inner.chars().take_while(|&c| is_name_char(c)).collect();
                let rest = &inner[name.len()..];
                if !name.is_empty() && rest.is_empty() && name.chars().all(|c| c.is_ascii_digit()) {
                    w.segs.push(Seg::Param(name, quoted));
                } else if inner == "@" || inner == "*" {
                    w.segs.push(Seg::Param(inner, quoted));
                } else if !name.is_empty() && rest.is_empty() {
                    w.segs.push(Seg::Var(name, quoted));
                } else if !name.is_empty() && (rest.starts_with(":?") || rest.starts_with('?')) {
                    w.segs.push(Seg::NonEmpty);
                } else {
                    // A default (`${x:-rm}`) may hide a command: look inside.
                    if let Some(pos) = rest.find(['-', '=', '+']) {
                        w.segs.push(Seg::Sub(format!("echo {}", &rest[pos + 1..])));
                    }
                    w.segs.push(Seg::Unknown);
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let start = self.i;
                while self.peek(0).is_some_and(is_name_char) {
                    self.i += 1;
                }
                w.segs
                    .push(Seg::Var(self.c[start..self.i].iter().collect(), quoted));
            }
            Some(c) if c.is_ascii_digit() || c == '@' || c == '*' => {
                self.i += 1;
                w.segs.push(Seg::Param(c.to_string(), quoted));
            }
            Some(c) if "#?$!-".contains(c) => {
                self.i += 1;
                w.segs.push(Seg::Unknown);
            }
            _ => w.segs.push(Seg::Lit("$".into(), quoted)),
        }
    }

    /// `$'…'` with its escapes decoded, as bash does.
    fn ansi_c(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '\'' => break,
                '\\' => {
                    let Some(e) = self.peek(0) else { break };
                    self.i += 1;
                    match e {
                        'n' => s.push('\n'),
                        't' => s.push('\t'),
                        'r' => s.push('\r'),
                        'e' | 'E' => s.push('\x1b'),
                        'a' => s.push('\x07'),
                        'b' => s.push('\x08'),
                        'x' => s.push(self.digits(16, 2).unwrap_or('x')),
                        'u' => s.push(self.digits(16, 4).unwrap_or('u')),
                        'U' => s.push(self.digits(16, 8).unwrap_or('U')),
                        '0'..='7' => {
                            self.i -= 1;
                            s.push(self.digits(8, 3).unwrap_or('0'));
                        }
                        other => s.push(other),
                    }
                }
                c => s.push(c),
            }
        }
        s
    }

    fn digits(&mut self, radix: u32, max: usize) -> Option<char> {
        let mut v = 0u32;
        let mut n = 0;
        while n < max {
            match self.peek(0).and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    v = v * radix + d;
                    self.i += 1;
                    n += 1;
                }
                None => break,
            }
        }
        (n > 0).then(|| char::from_u32(v)).flatten()
    }
}
