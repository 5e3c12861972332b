//! The parsed form of a command line, what every reader of commands sees:
//! words as segments (literal text with its quoting, expansions,
//! substitutions' inner text), redirections, simple commands, groups,
//! function definitions and `for` loops, in pipelines. `lex.rs` makes the
//! words, `parse.rs` the rest; nothing here is expanded or judged.

/// A piece of a word, as the lexer read it.
#[derive(Debug, Clone)]
pub enum Seg {
    /// Literal text; the flag says whether it was quoted.
    Lit(String, bool),
    /// `$name`, `${name}`; the flag says whether it stood inside quotes.
    Var(String, bool),
    /// `${name:?…}`.
    NonEmpty,
    /// A positional parameter: `$1`, `${12}`, `$@`, `$*` (the digits, `@`
    /// or `*`); the flag says whether it stood inside quotes.
    Param(String, bool),
    /// Any other expansion: arithmetic, `${x:-y}`, `$@`…
    Unknown,
    /// `$(…)`, `` `…` ``, `<(…)`, `>(…)`: the inner text.
    Sub(String),
}

/// One shell word: its pieces in order.
#[derive(Debug, Clone, Default)]
pub struct Word {
    pub segs: Vec<Seg>,
}

impl Word {
    /// The word as an unquoted literal (`{`, `if`), if it is one.
    pub fn bare(&self) -> Option<&str> {
        match self.segs.as_slice() {
            [Seg::Lit(s, false)] => Some(s),
            _ => None,
        }
    }
}

/// A redirection and what it names.
#[derive(Debug, Clone)]
pub struct Redir {
    /// `>`, `>>`, `<`, `<<`, `<<<`, `&>`, `>&`, …
    pub op: String,
    pub target: Word,
    /// The here-document's text.
    pub body: Option<String>,
}

impl Redir {
    /// Whether it sends output somewhere (`>`, `>>`, `&>`, `>&`, …).
    pub fn writes(&self) -> bool {
        self.op.contains('>')
    }
}

#[derive(Debug, Clone)]
/// One command of a pipeline.
pub enum Cmd {
    Simple {
        words: Vec<Word>,
        redirs: Vec<Redir>,
    },
    Group {
        body: Vec<Pipeline>,
        redirs: Vec<Redir>,
    },
    Func {
        name: String,
        body: Box<Cmd>,
    },
    /// `for var in words; do body; done`; `words` is `None` without `in`
    /// (the loop then runs over the positional parameters).
    For {
        var: String,
        words: Option<Vec<Word>>,
        body: Vec<Pipeline>,
    },
}

#[derive(Debug, Clone)]
/// Commands joined by `|`, possibly run in the background (`&`).
pub struct Pipeline {
    pub stages: Vec<Cmd>,
    pub background: bool,
}
