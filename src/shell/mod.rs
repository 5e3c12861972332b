//! Reading shell command lines without running them: a lexer (`lex.rs`) and
//! a parser (`parse.rs`) that take a line apart roughly as `sh` would, brace
//! expansion (`brace.rs`, the one expansion that needs no state), and
//! what is built on them and shared: which command lines only read
//! (`readonly.rs`, for approval without asking) and which options of a
//! program write files or run other programs (the same tables keep an
//! "always" prefix from covering them). The denylist (`tools/denylist.rs`)
//! reads commands with the same parser. Nothing here decides an approval:
//! the gate in `agent/control.rs` does.

pub mod brace;
pub mod lex;
pub mod parse;
pub mod readonly;

pub use parse::literal_words;
