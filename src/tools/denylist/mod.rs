//! The denylist: commands refused even when the user approved everything.
//!
//! A substring match is easy to walk around (`rm -r -f /`, `sh -c "rm -rf /"`,
//! `x=rm; $x -rf /`), so the command is parsed the way a shell would read it,
//! well enough for a guard rail: words are unquoted and brace-expanded,
//! lists, pipelines, subshells, substitutions, redirections, wrappers
//! (`sudo`, `env`, `xargs` with what feeds it…) and nested `sh -c` / `eval`
//! strings are taken apart, `for` bodies are checked once per listed word,
//! function bodies once per call with its words, positional parameters set
//! on the line are followed, and the built-in rules and the user's patterns
//! are checked against every simple command found. What could hide a
//! command and cannot be known here (`"$@"` with unknown parameters as the
//! command, `eval "$x"`) is refused rather than guessed.
//!
//! This file holds the API (`Denylist`, `Denial`), the rule names and the
//! checker's state. The work is split by job: `walk.rs` follows the parsed
//! tree (lists, pipelines, loops, functions, what feeds a shell),
//! `expand.rs` turns words into what the shell would pass, `wrappers.rs`
//! finds the command inside `sudo`, `env`, `xargs`, `sh -c`…, `rules.rs` and
//! `deleters.rs` (`git clean`, `rsync --delete`) judge one command,
//! `paths.rs` says which paths and devices are dangerous, and `opts.rs`
//! reads a command's options as getopt would.
//!
//! This is not a sandbox. It refuses the well-known ways to destroy a machine
//! however they are spelled; it cannot see what a script file or a downloaded
//! program will do (see `docs/SECURITY.md`). The lexer and parser it reads
//! commands with live in `crate::shell`, shared with the read-only classifier.

mod deleters;
mod expand;
mod opts;
mod paths;
mod rules;
mod walk;
mod wrappers;

use crate::shell::ast::{Cmd, Redir};
use crate::shell::words::plain_words;
use expand::{EWord, NON_EMPTY, UNKNOWN};
use std::collections::HashMap;
use std::fmt;

/// How many times a command may nest inside another (`sh -c`, `eval`,
/// `$(…)`) before the denylist refuses it instead of looking further.
const MAX_DEPTH: usize = 8;
/// How many commands (counting each loop pass and function call) one
/// command line may make the denylist check before it is refused as too
/// large: loops over brace lists and nested calls multiply.
const MAX_STEPS: usize = 20_000;
/// The most bytes of expanded words one check may build, per byte of the
/// line, and at least `MIN_CHARS`: variables built from variables
/// (`x=$x$x`), function calls and brace lists multiply text (a 200-byte line
/// the fuzzer found asked for over 4 GB), and building words is most of a
/// check's time, so the bound keeps that time in proportion to the line.
const CHARS_PER_BYTE: usize = 8;
const MIN_CHARS: usize = 1 << 20;

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The rule's plain name, or the user's pattern.
    pub rule: String,
    /// What in the command matched, already made one safe line.
    pub detail: String,
    /// From the user's `tools.shell_denylist`, not a built-in rule.
    pub user_pattern: bool,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.user_pattern {
            write!(f, "it matches the denylist pattern `{}`", self.rule)
        } else if self.detail.is_empty() {
            write!(f, "it is {}", self.rule)
        } else {
            write!(f, "it is {} (`{}`)", self.rule, self.detail)
        }
    }
}

/// The built-in rules plus the user's patterns; built-ins cannot be turned off.
#[derive(Debug, Clone, Default)]
pub struct Denylist {
    words: Vec<Vec<String>>,
    /// Patterns that are not plain words (`:(){`, `> /dev/sd`): matched, as
    /// before this parser existed, against the whitespace-normalised text.
    texts: Vec<String>,
    /// The patterns as the user wrote them, for the refusal reason.
    shown_words: Vec<String>,
}

impl Denylist {
    /// The built-in rules and `patterns` from config.
    pub fn new(patterns: &[String]) -> Denylist {
        let mut list = Denylist::default();
        for p in patterns {
            let p = p.trim();
            if p.is_empty() {
                continue;
            }
            match plain_words(p) {
                Some(words) if !words.is_empty() => {
                    list.words.push(words);
                    list.shown_words.push(p.to_string());
                }
                _ => list.texts.push(normalise_ws(p)),
            }
        }
        list
    }

    /// Whether `command` is refused, and why.
    pub fn check(&self, command: &str) -> Option<Denial> {
        let normalised = format!("{} ", normalise_ws(command));
        if let Some(p) = self.texts.iter().find(|p| normalised.contains(p.as_str())) {
            return Some(Denial {
                rule: crate::text::one_line(p, 80),
                detail: String::new(),
                user_pattern: true,
            });
        }
        let mut checker = Checker {
            list: self,
            vars: HashMap::new(),
            funcs: Vec::new(),
            params: None,
            defined: HashMap::new(),
            defining: 0,
            steps: 0,
            chars: 0,
            max_chars: command.len().saturating_mul(CHARS_PER_BYTE).max(MIN_CHARS),
        };
        checker.script(command, 0).err().map(|hit| match hit {
            Hit::Rule(rule, detail) => Denial {
                rule: rule.to_string(),
                detail: crate::text::one_line(&detail.replace([UNKNOWN, NON_EMPTY], "$…"), 80),
                user_pattern: false,
            },
            Hit::Pattern(i) => Denial {
                rule: crate::text::one_line(&self.shown_words[i], 80),
                detail: String::new(),
                user_pattern: true,
            },
        })
    }
}

fn normalise_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

enum Hit {
    Rule(&'static str, String),
    /// Index into the user's word patterns.
    Pattern(usize),
}

const RM_ROOT: &str = "recursive removal of / or a system directory";
const NO_PRESERVE_ROOT: &str = "rm --no-preserve-root";
const MKFS: &str = "making a filesystem";
const WIPEFS: &str = "wiping filesystem signatures";
const PARTITION: &str = "changing a disk's partitions";
const BLOCK_WRITE: &str = "writing to a block device";
const FORK_BOMB: &str = "a fork bomb";
const CHMOD_ROOT: &str = "recursive chmod/chown of / or a system directory";
const DECODE_EXEC: &str = "running decoded or hidden text as commands";
const TOO_DEEP: &str = "nested too deeply to check";
const TOO_BIG: &str = "too large to check";
const UNKNOWN_CMD: &str = "running a command that cannot be known here";
const GIT_CLEAN: &str = "git clean of /, a home or system directory, or outside the working tree";
const RSYNC_DELETE: &str = "rsync deleting in /, a home or a system directory";

/// What a checked piece of script tells its neighbours.
#[derive(Default, Clone)]
struct Summary {
    /// Some command in it decodes or unscrambles text.
    decodes: bool,
    /// The text it prints, when it is `echo`/`printf`/`cat <<EOF`.
    prints: Option<String>,
}

impl Summary {
    fn merge(&mut self, other: Summary) {
        self.decodes |= other.decodes;
        if other.prints.is_some() {
            self.prints = other.prints;
        }
    }
}

struct Checker<'a> {
    list: &'a Denylist,
    /// Variables assigned earlier in the command; `None` when the value is
    /// not known.
    vars: HashMap<String, Option<String>>,
    /// Functions being defined or called around the current command.
    funcs: Vec<String>,
    /// The positional parameters, `$0` first; `None` when unknown (the
    /// top level: a pane's shell may have any).
    params: Option<Vec<String>>,
    /// Functions defined so far, checked again at each call with its words.
    defined: HashMap<String, Cmd>,
    /// Inside a function definition: `"$@"` as a command is checked at the
    /// calls, where the words are known, not refused here.
    defining: usize,
    /// Commands checked so far, against `MAX_STEPS`.
    steps: usize,
    /// Bytes of expanded words built so far, against `max_chars`.
    chars: usize,
    /// This check's budget of expanded words (`CHARS_PER_BYTE`).
    max_chars: usize,
}

type Check = Result<Summary, Hit>;

/// What a command's check knows of where it stands: its own redirections
/// (expanded), what the earlier stages of its pipeline print or decode,
/// whether it runs beside others and feeds a later stage, and how deep it
/// is nested.
struct Ctx<'r> {
    redirs: &'r [(Redir, EWord)],
    before: &'r [Summary],
    piped: bool,
    feeds: bool,
    depth: usize,
}

#[cfg(test)]
mod tests;
