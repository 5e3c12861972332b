//! Reading shell command lines without running them: the layer below the
//! tools that every check of a command goes through. `lex.rs` splits text
//! into words, operators and redirections; `parse.rs` groups them into the
//! parsed form of `ast.rs` (`parse` is the one entry); `words.rs` holds word
//! forms that need no state (literal words, assignments); `brace.rs` is
//! brace expansion, the one expansion that needs no state. On top of them,
//! shared: which command lines only read (`readonly.rs`, for approval
//! without asking) and which options of a program write files or run other
//! programs (the same tables keep an "always" prefix from covering them).
//!
//! Fail-closed: what the parser cannot follow is an error its readers treat
//! as the worst case. The denylist's rules (`tools/denylist/`) read commands
//! through `parse`; nothing here decides an approval: the gate in
//! `agent/control.rs` does.

pub mod ast;
pub mod brace;
mod lex;
pub mod parse;
pub mod readonly;
pub mod words;

pub use ast::{Cmd, Pipeline, Redir, Seg, Word};
pub use parse::{parse, ParseError};
pub use words::literal_words;
