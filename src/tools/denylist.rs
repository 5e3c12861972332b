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
//! command, `eval "$x"`) is refused rather than guessed. The rules for
//! `git clean` and `rsync --delete` live in `denylist/deleters.rs`.
//!
//! This is not a sandbox. It refuses the well-known ways to destroy a machine
//! however they are spelled; it cannot see what a script file or a downloaded
//! program will do (see `docs/SECURITY.md`). The lexer and parser it reads
//! commands with live in `crate::shell`, shared with the read-only classifier.

mod deleters;
mod wrappers;

use crate::shell::brace;
use crate::shell::lex::{is_name_char, Redir, Seg, Word};
use crate::shell::parse::{plain_words, Cmd, Parser, Pipeline};
use std::collections::HashMap;
use std::fmt;
use wrappers::{shell_mode, unwrap, ShellMode, Unwrapped};

/// How many times a command may nest inside another (`sh -c`, `eval`,
/// `$(…)`) before the denylist refuses it instead of looking further.
const MAX_DEPTH: usize = 8;
/// Stands for an expansion whose value cannot be known here.
const UNKNOWN: char = '\u{E000}';
/// Stands for `${VAR:?}`: unknown, but never empty (the shell stops first).
const NON_EMPTY: char = '\u{E001}';
/// How many commands (counting each loop pass and function call) one
/// command line may make the denylist check before it is refused as too
/// large: loops over brace lists and nested calls multiply.
const MAX_STEPS: usize = 20_000;

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

/// A word after expansion: `UNKNOWN` stands where a value cannot be known.
#[derive(Debug, Clone, Default)]
struct EWord {
    text: String,
    /// Holds a substitution whose commands decode something (`base64 -d`).
    decoded: bool,
    quoted: bool,
    /// `NAME=value` with the name and `=` unquoted.
    assign: bool,
    /// Holds a positional parameter (`$1`, `"$@"`) whose value is unknown.
    from_params: bool,
    /// Holds a variable or parameter whose value is unknown (not only a
    /// command substitution, whose commands are checked).
    opaque: bool,
}

impl EWord {
    fn lit(s: &str) -> EWord {
        EWord {
            text: s.to_string(),
            ..EWord::default()
        }
    }
    fn unknown(&self) -> bool {
        self.text.contains(UNKNOWN)
    }
}

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
}

type Check = Result<Summary, Hit>;

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash", "rbash", "fish", "csh",
    "tcsh",
];

const SYSTEM_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt",
    "proc", "root", "run", "sbin", "snap", "srv", "sys", "usr", "var",
];

const USR_DIRS: &[&str] = &[
    "bin", "lib", "lib32", "lib64", "libexec", "sbin", "share", "include", "local",
];

impl Checker<'_> {
    fn script(&mut self, text: &str, depth: usize) -> Check {
        if depth > MAX_DEPTH {
            return Err(Hit::Rule(TOO_DEEP, crate::text::one_line(text, 60)));
        }
        let list = Parser::parse(text)
            .map_err(|()| Hit::Rule(TOO_DEEP, crate::text::one_line(text, 60)))?;
        self.pipelines(&list, &[], depth)
    }

    /// `upstream`: what feeds the list's input (a group inside a pipeline).
    fn pipelines(&mut self, list: &[Pipeline], upstream: &[Summary], depth: usize) -> Check {
        let mut sum = Summary::default();
        for p in list {
            let mut before: Vec<Summary> = upstream.to_vec();
            for (i, stage) in p.stages.iter().enumerate() {
                let piped = p.stages.len() > 1 || p.background;
                let s = self.cmd(stage, &before, piped, i + 1 < p.stages.len(), depth)?;
                if i == 0 {
                    before.clear();
                }
                before.push(s.clone());
                sum.decodes |= s.decodes;
                if p.stages.len() == 1 {
                    sum.prints = s.prints;
                }
            }
        }
        Ok(sum)
    }

    /// `before`: summaries of the pipeline's earlier stages. `piped`: runs
    /// beside others (pipeline or `&`). `feeds`: a later stage reads its output.
    fn cmd(
        &mut self,
        cmd: &Cmd,
        before: &[Summary],
        piped: bool,
        feeds: bool,
        depth: usize,
    ) -> Check {
        match cmd {
            Cmd::Group { body, redirs } => {
                // `base64 -d | (sh)`: the group's commands read the pipe.
                let sum = self.pipelines(body, before, depth)?;
                self.redirs(redirs, depth)?;
                Ok(sum)
            }
            Cmd::Func { name, body } => {
                self.funcs.push(name.clone());
                self.defining += 1;
                let r = self.cmd(body, &[], false, false, depth);
                self.defining -= 1;
                self.funcs.pop();
                self.defined.insert(name.clone(), (**body).clone());
                r
            }
            Cmd::For { var, words, body } => {
                self.for_loop(var, words.as_deref(), body, before, depth)
            }
            Cmd::Simple { words, redirs } => {
                self.simple(words, redirs, before, piped, feeds, depth)
            }
        }
    }

    /// Expands words, checking what their substitutions run.
    fn expand(&mut self, words: &[Word], depth: usize) -> Result<Vec<EWord>, Hit> {
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
                let before = e.text.chars().count();
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
                let added = e.text.chars().count() - before;
                active.extend(std::iter::repeat_n(literal, added));
            }
            // `/{etc,usr}` is two words; assignments are not brace-expanded.
            let braces = !e.assign && e.text.chars().zip(&active).any(|(c, a)| c == '{' && *a);
            if !braces {
                out.push(e);
                continue;
            }
            let marked: Vec<brace::Marked> = e.text.chars().zip(active).collect();
            let words = brace::expand(&marked).map_err(|()| {
                Hit::Rule(
                    TOO_BIG,
                    format!("{} expands to over {} words", e.text, brace::MAX_WORDS),
                )
            })?;
            out.extend(words.into_iter().map(|text| EWord { text, ..e.clone() }));
        }
        Ok(out)
    }

    /// A positional parameter's value (`@` and `*` joined), if known.
    fn param(&self, p: &str) -> Option<String> {
        let params = self.params.as_ref()?;
        if p == "@" || p == "*" {
            return Some(params.get(1..).unwrap_or_default().join(" "));
        }
        let n: usize = p.parse().ok()?;
        Some(params.get(n).cloned().unwrap_or_default())
    }

    /// `for var in words; do body; done`: the body checked once for each
    /// word standing for `var` (once with `var` unknown when there are none).
    fn for_loop(
        &mut self,
        var: &str,
        words: Option<&[Word]>,
        body: &[Pipeline],
        before: &[Summary],
        depth: usize,
    ) -> Check {
        let mut values: Vec<Option<String>> = match words {
            Some(ws) => self
                .expand(ws, depth)?
                .into_iter()
                .map(|w| (!w.text.contains([UNKNOWN, NON_EMPTY])).then_some(w.text))
                .collect(),
            None => match &self.params {
                Some(p) => p.iter().skip(1).cloned().map(Some).collect(),
                None => vec![None],
            },
        };
        values.dedup();
        if values.is_empty() {
            values.push(None);
        }
        let mut sum = Summary::default();
        for v in values {
            self.vars.insert(var.to_string(), v);
            let s = self.pipelines(body, before, depth)?;
            sum.merge(s);
        }
        Ok(sum)
    }

    /// A call of a function defined earlier: its body checked with the
    /// call's words as positional parameters.
    fn call(&mut self, name: &str, body: &Cmd, argv: &[EWord], ctx: &Ctx) -> Result<(), Hit> {
        if ctx.depth + 1 > MAX_DEPTH {
            return Err(Hit::Rule(TOO_DEEP, name.to_string()));
        }
        let params = argv.iter().map(|w| w.text.clone()).collect();
        let params = if argv.iter().any(|w| w.from_params) {
            None
        } else {
            Some(params)
        };
        let saved_params = std::mem::replace(&mut self.params, params);
        let saved_defining = std::mem::take(&mut self.defining);
        self.funcs.push(name.to_string());
        let r = self.cmd(body, &[], false, false, ctx.depth + 1);
        self.funcs.pop();
        self.defining = saved_defining;
        self.params = saved_params;
        r.map(|_| ())
    }

    /// `set -- a b`, `set a b`: new positional parameters.
    fn set_params(&mut self, args: &[EWord]) {
        let mut i = 0;
        let mut new = None;
        while i < args.len() {
            let t = args[i].text.as_str();
            if t == "--" || t == "-" {
                new = Some(&args[i + 1..]);
                break;
            }
            if t.starts_with(['-', '+']) {
                // `set -o pipefail`: the option's name is not a parameter.
                i += if t.ends_with('o') { 2 } else { 1 };
                continue;
            }
            new = Some(&args[i..]);
            break;
        }
        let Some(new) = new else {
            return;
        };
        if new.iter().any(|w| w.from_params) {
            self.params = None;
            return;
        }
        let zero = self
            .params
            .as_ref()
            .and_then(|p| p.first().cloned())
            .unwrap_or_else(|| UNKNOWN.to_string());
        let mut params = vec![zero];
        params.extend(new.iter().map(|w| w.text.clone()));
        self.params = Some(params);
    }

    /// `shift [n]`.
    fn shift_params(&mut self, args: &[EWord]) {
        if let Some(p) = self.params.as_mut() {
            let n: usize = args
                .first()
                .map_or(Some(1), |w| w.text.parse().ok())
                .unwrap_or(1);
            let n = n.min(p.len().saturating_sub(1));
            p.drain(1..1 + n);
        }
    }

    fn redirs(&mut self, redirs: &[Redir], depth: usize) -> Result<Vec<(Redir, EWord)>, Hit> {
        let mut out = Vec::new();
        for r in redirs {
            let target = self
                .expand(std::slice::from_ref(&r.target), depth)?
                .pop()
                .unwrap_or_default();
            if r.writes() && !(r.op.ends_with('&') && is_fd(&target.text)) {
                let path = norm_path(&target.text);
                if is_block_device(&path) {
                    return Err(Hit::Rule(BLOCK_WRITE, format!("{} {}", r.op, target.text)));
                }
            }
            out.push((r.clone(), target));
        }
        Ok(out)
    }

    fn simple(
        &mut self,
        words: &[Word],
        redirs: &[Redir],
        before: &[Summary],
        piped: bool,
        feeds: bool,
        depth: usize,
    ) -> Check {
        let mut argv = self.expand(words, depth)?;
        let redirs = self.redirs(redirs, depth)?;
        // Leading assignments: `x=rm` alone sets x for later commands;
        // `FOO=1 cmd` only sets it in cmd's environment.
        let n_assign = argv.iter().take_while(|w| assignment(w).is_some()).count();
        if n_assign == argv.len() {
            for w in &argv {
                self.assign(w);
            }
            return Ok(Summary::default());
        }
        argv.drain(..n_assign);
        let ctx = Ctx {
            redirs: &redirs,
            before,
            piped,
            feeds,
            depth,
        };
        self.run(argv, &ctx)
    }

    fn assign(&mut self, w: &EWord) {
        if let Some((name, value)) = assignment(w) {
            let value = (!value.contains([UNKNOWN, NON_EMPTY])).then(|| value.to_string());
            self.vars.insert(name.to_string(), value);
        }
    }

    /// Checks one command given as expanded words, unwrapping wrappers.
    fn run(&mut self, mut argv: Vec<EWord>, ctx: &Ctx) -> Check {
        let mut sum = Summary::default();
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Hit::Rule(TOO_BIG, format!("over {MAX_STEPS} commands")));
        }
        loop {
            let Some(first) = argv.first() else {
                return Ok(sum);
            };
            if first.decoded {
                return Err(Hit::Rule(DECODE_EXEC, first.text.clone()));
            }
            // `"$@"`, `$1` as the command with parameters not known here:
            // it could be anything, `rm -rf /` included.
            if first.from_params && self.defining == 0 {
                return Err(Hit::Rule(UNKNOWN_CMD, first.text.clone()));
            }
            if first.unknown() {
                // `$x -rf /` with x unknown: judged as each command that
                // would make those arguments dangerous.
                for name in ["rm", "chmod", "chown", "dd", "sh"] {
                    let mut guess = argv.clone();
                    guess[0] = EWord::lit(name);
                    self.rules(name, &guess, ctx)?;
                }
                return Ok(sum);
            }
            let name = basename(&first.text).to_string();
            self.user_patterns(&name, &argv)?;
            if !first.quoted {
                match name.as_str() {
                    "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "fi"
                    | "done" | "esac" | "{" | "}" => {
                        argv.remove(0);
                        continue;
                    }
                    "for" | "case" | "select" | "function" | "[[" => return Ok(sum),
                    _ => {}
                }
            }
            match unwrap(&name, &argv) {
                Unwrapped::Command(at) => {
                    argv.drain(..at);
                    // `sudo FOO=1 rm …`, `env FOO=1 rm …`
                    let n = argv.iter().take_while(|w| assignment(w).is_some()).count();
                    argv.drain(..n);
                    continue;
                }
                Unwrapped::Script(text) => {
                    if text.decoded {
                        return Err(Hit::Rule(DECODE_EXEC, text.text));
                    }
                    let s = self.script(&text.text, ctx.depth + 1)?;
                    sum.decodes |= s.decodes;
                    return Ok(sum);
                }
                Unwrapped::NoCommand => return Ok(sum),
                Unwrapped::Xargs(at) => {
                    let mut inner: Vec<EWord> = argv[at..].to_vec();
                    if inner.is_empty() {
                        inner.push(EWord::lit("echo"));
                    }
                    // Its words come from a here-string or here-document,
                    // or from what the stage before prints.
                    let input = match fed_text(ctx) {
                        Some((_, true)) => {
                            return Err(Hit::Rule(DECODE_EXEC, "xargs <<< …".into()));
                        }
                        Some((text, false)) => Some(text),
                        None => ctx.before.last().and_then(|s| s.prints.clone()),
                    };
                    if let Some(text) = input {
                        inner.extend(text.split_whitespace().map(EWord::lit));
                    }
                    argv = inner;
                    continue;
                }
                Unwrapped::NotWrapper => {}
            }
            if let Some(body) = self.defined.get(&name).cloned() {
                if self.funcs.last() == Some(&name) && ctx.piped {
                    return Err(Hit::Rule(FORK_BOMB, name));
                }
                self.call(&name, &body, &argv, ctx)?;
            }
            let s = self.rules(&name, &argv, ctx)?;
            sum.merge(s);
            return Ok(sum);
        }
    }

    fn user_patterns(&self, name: &str, argv: &[EWord]) -> Result<(), Hit> {
        for (i, pat) in self.list.words.iter().enumerate() {
            let Some((head, rest)) = pat.split_first() else {
                continue;
            };
            if basename(head) != name {
                continue;
            }
            let mut args = argv[1..].iter();
            if rest.iter().all(|p| args.any(|a| a.text == *p)) {
                return Err(Hit::Pattern(i));
            }
        }
        Ok(())
    }

    /// The built-in rules for one command, `argv[0]` being `name`.
    fn rules(&mut self, name: &str, argv: &[EWord], ctx: &Ctx) -> Check {
        let args = &argv[1..];
        let mut sum = Summary::default();
        if let Some(f) = self.funcs.last() {
            if f == name && ctx.piped {
                return Err(Hit::Rule(FORK_BOMB, name.to_string()));
            }
        }
        if is_decoder(name, args) {
            sum.decodes = true;
        }
        match name {
            "rm" => rm_rule(args)?,
            "chmod" | "chown" | "chgrp" => {
                let opts = Opts::parse(args, "", &["reference", "from"]);
                if opts.has_short('R') || opts.has_long("recursive", 3) {
                    if let Some(t) = opts.positional.iter().find(|t| dangerous_target(&t.text)) {
                        return Err(Hit::Rule(CHMOD_ROOT, format!("{name} -R {}", t.text)));
                    }
                }
            }
            "find" => find_rule(self, args, ctx)?,
            "dd" => {
                for a in args {
                    if let Some(of) = a.text.strip_prefix("of=") {
                        if is_block_device(&norm_path(of)) {
                            return Err(Hit::Rule(BLOCK_WRITE, a.text.clone()));
                        }
                    }
                }
            }
            "tee" | "shred" | "blkdiscard" | "truncate" | "mkswap" => {
                let opts = Opts::parse(args, "sn", &["size", "iterations", "offset", "length"]);
                if let Some(t) = opts
                    .positional
                    .iter()
                    .find(|t| is_block_device(&norm_path(&t.text)))
                {
                    return Err(Hit::Rule(BLOCK_WRITE, format!("{name} {}", t.text)));
                }
            }
            "cp" | "mv" | "install" | "rsync" => {
                let with_value = match name {
                    "install" => "tSgmo",
                    "rsync" => "e",
                    _ => "tS",
                };
                let opts = Opts::parse(args, with_value, &["target-directory", "suffix"]);
                let dest = match opts.value_of('t', "target-directory") {
                    Some(d) if name != "rsync" => Some(d),
                    _ if opts.positional.len() >= 2 => {
                        opts.positional.last().map(|w| w.text.clone())
                    }
                    _ => None,
                };
                if let Some(d) = dest.filter(|d| is_block_device(&norm_path(d))) {
                    return Err(Hit::Rule(BLOCK_WRITE, format!("{name} … {d}")));
                }
                if name == "rsync" {
                    deleters::rsync_rule(args)?;
                }
            }
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for w in args {
                    self.assign(w);
                }
            }
            n if n.starts_with("mkfs") || n == "mke2fs" || n == "mkdosfs" || n == "mkntfs" => {
                return Err(Hit::Rule(MKFS, n.to_string()));
            }
            "wipefs" => return Err(Hit::Rule(WIPEFS, name.to_string())),
            "fdisk" | "sfdisk" | "cfdisk" | "gdisk" | "sgdisk" | "cgdisk" | "parted"
                if !partition_read_only(name, args) =>
            {
                return Err(Hit::Rule(PARTITION, name.to_string()));
            }
            "echo" | "printf" => sum.prints = Some(printed(name, args)),
            "eval" => {
                if let Some(w) = args.iter().find(|w| w.decoded) {
                    return Err(Hit::Rule(DECODE_EXEC, format!("eval {}", w.text)));
                }
                // `eval "$x"`: text no one here can read. (`eval "$(cmd)"`
                // is left to the check of cmd, as `cmd | sh` is.)
                if let Some(w) = args.iter().find(|w| w.opaque) {
                    return Err(Hit::Rule(UNKNOWN_CMD, format!("eval {}", w.text)));
                }
                let text: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
                let s = self.script(&text.join(" "), ctx.depth + 1)?;
                sum.decodes |= s.decodes;
            }
            "source" | "." => {
                if let Some(w) = args.first() {
                    if w.decoded {
                        return Err(Hit::Rule(DECODE_EXEC, format!("{name} {}", w.text)));
                    }
                    if is_stdin_path(&w.text) {
                        self.stdin_shell(name, ctx)?;
                    }
                }
            }
            "set" => self.set_params(args),
            "shift" => self.shift_params(args),
            "git" => deleters::git_rule(args)?,
            n if SHELLS.contains(&n) => match shell_mode(args) {
                ShellMode::Command(Some(text), rest) => {
                    if text.decoded {
                        return Err(Hit::Rule(DECODE_EXEC, text.text.clone()));
                    }
                    if text.opaque {
                        return Err(Hit::Rule(UNKNOWN_CMD, format!("{name} -c {}", text.text)));
                    }
                    // `sh -c 'rm -rf "$1"' sh /`: the words after the text
                    // are its `$0`, `$1`…
                    let params = if rest.iter().any(|w| w.from_params) {
                        None
                    } else if rest.is_empty() {
                        Some(vec![name.to_string()])
                    } else {
                        Some(rest.iter().map(|w| w.text.clone()).collect())
                    };
                    let saved = std::mem::replace(&mut self.params, params);
                    let s = self.script(&text.text, ctx.depth + 1);
                    self.params = saved;
                    sum.decodes |= s?.decodes;
                }
                ShellMode::Command(None, _) => {}
                ShellMode::Script(w) if w.decoded => {
                    return Err(Hit::Rule(DECODE_EXEC, format!("{name} {}", w.text)));
                }
                ShellMode::Script(w) if is_stdin_path(&w.text) => self.stdin_shell(name, ctx)?,
                ShellMode::Script(_) => {}
                ShellMode::Stdin => self.stdin_shell(name, ctx)?,
            },
            _ => {}
        }
        // What this command prints for a later stage: `cat <<EOF | sh`.
        if name == "cat" && ctx.feeds {
            if let Some(text) = fed_text(ctx) {
                sum.prints = Some(text.0);
                sum.decodes |= text.1;
            }
        }
        Ok(sum)
    }

    /// A shell (or `source /dev/stdin`) running what it reads: check what feeds it.
    fn stdin_shell(&mut self, name: &str, ctx: &Ctx) -> Result<(), Hit> {
        if let Some((text, decoded)) = fed_text(ctx) {
            if decoded {
                return Err(Hit::Rule(DECODE_EXEC, format!("{name} <<< …")));
            }
            self.script(&text, ctx.depth + 1)?;
            return Ok(());
        }
        if ctx.before.iter().any(|s| s.decodes) {
            return Err(Hit::Rule(DECODE_EXEC, format!("… | {name}")));
        }
        if let Some(text) = ctx.before.last().and_then(|s| s.prints.clone()) {
            self.script(&text, ctx.depth + 1)?;
        }
        Ok(())
    }
}

struct Ctx<'r> {
    redirs: &'r [(Redir, EWord)],
    before: &'r [Summary],
    piped: bool,
    feeds: bool,
    depth: usize,
}

/// The text a command's own stdin redirection gives it (here-document or
/// here-string), and whether it was decoded.
fn fed_text(ctx: &Ctx) -> Option<(String, bool)> {
    ctx.redirs
        .iter()
        .rev()
        .find_map(|(r, w)| match r.op.as_str() {
            "<<<" => Some((w.text.clone(), w.decoded)),
            "<<" | "<<-" => r.body.clone().map(|b| (b, false)),
            _ => None,
        })
}

fn is_fd(s: &str) -> bool {
    s == "-" || (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
}

fn is_stdin_path(s: &str) -> bool {
    matches!(s, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

/// Whether a word is `NAME=value` (or `NAME+=value`) with the name unquoted.
fn is_assignment(w: &Word) -> bool {
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

/// The name and value of an assignment word.
fn assignment(w: &EWord) -> Option<(&str, &str)> {
    if !w.assign {
        return None;
    }
    let (name, value) = w.text.split_once('=')?;
    Some((name.trim_end_matches('+'), value))
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// A command's options, parsed the way getopt would: short clusters, long
/// options (`--name=value`), `--` ending them, options after operands.
struct Opts {
    shorts: Vec<char>,
    longs: Vec<String>,
    /// Values of short options that take one, by option letter.
    values: Vec<(char, String)>,
    positional: Vec<EWord>,
}

impl Opts {
    /// `with_value`: short options that take a value; `long_value`: long ones.
    fn parse(args: &[EWord], with_value: &str, long_value: &[&str]) -> Opts {
        let mut o = Opts {
            shorts: Vec::new(),
            longs: Vec::new(),
            values: Vec::new(),
            positional: Vec::new(),
        };
        let mut it = args.iter();
        let mut done = false;
        while let Some(a) = it.next() {
            let t = a.text.as_str();
            if done || t == "-" || !t.starts_with('-') {
                o.positional.push(a.clone());
            } else if t == "--" {
                done = true;
            } else if let Some(long) = t.strip_prefix("--") {
                let (name, _) = long.split_once('=').unwrap_or((long, ""));
                if !long.contains('=')
                    && long_value
                        .iter()
                        .any(|l| l.starts_with(name) && !name.is_empty())
                {
                    let v = it.next().map(|w| w.text.clone()).unwrap_or_default();
                    o.longs.push(format!("{name}={v}"));
                } else {
                    o.longs.push(long.to_string());
                }
            } else {
                let cluster: Vec<char> = t[1..].chars().collect();
                for (k, &c) in cluster.iter().enumerate() {
                    o.shorts.push(c);
                    if with_value.contains(c) {
                        let rest: String = cluster[k + 1..].iter().collect();
                        let v = if rest.is_empty() {
                            it.next().map(|w| w.text.clone()).unwrap_or_default()
                        } else {
                            rest
                        };
                        o.values.push((c, v));
                        break;
                    }
                }
            }
        }
        o
    }

    fn has_short(&self, c: char) -> bool {
        self.shorts.contains(&c)
    }

    /// A long option given as `name` or any unambiguous-looking prefix of it
    /// at least `min` characters long (getopt accepts `--recur`).
    fn has_long(&self, name: &str, min: usize) -> bool {
        self.longs.iter().any(|l| {
            let l = l.split('=').next().unwrap_or(l);
            l.len() >= min && name.starts_with(l)
        })
    }

    fn value_of(&self, short: char, long: &str) -> Option<String> {
        self.values
            .iter()
            .find(|(c, _)| *c == short)
            .map(|(_, v)| v.clone())
            .or_else(|| {
                self.longs.iter().find_map(|l| {
                    let (n, v) = l.split_once('=')?;
                    (n.len() >= 3 && long.starts_with(n)).then(|| v.to_string())
                })
            })
    }
}

fn rm_rule(args: &[EWord]) -> Result<(), Hit> {
    let opts = Opts::parse(args, "", &[]);
    if opts.has_long("no-preserve-root", 4) {
        return Err(Hit::Rule(NO_PRESERVE_ROOT, "rm --no-preserve-root".into()));
    }
    if opts.has_short('r') || opts.has_short('R') || opts.has_long("recursive", 3) {
        if let Some(t) = opts.positional.iter().find(|t| dangerous_target(&t.text)) {
            return Err(Hit::Rule(RM_ROOT, format!("rm -r {}", t.text)));
        }
    }
    Ok(())
}

/// `find / -delete`, `find /etc -exec rm -rf {} +`: the `-exec` commands are
/// checked with `{}` standing for each starting point.
fn find_rule(checker: &mut Checker, args: &[EWord], ctx: &Ctx) -> Result<(), Hit> {
    let starts: Vec<&EWord> = args
        .iter()
        .take_while(|a| !a.text.starts_with('-') && !matches!(a.text.as_str(), "(" | "!"))
        .collect();
    // `find / -name '*.pyc' -delete` only touches what the name selects.
    let by_name = args.iter().any(|a| {
        matches!(
            a.text.as_str(),
            "-name" | "-iname" | "-path" | "-ipath" | "-wholename" | "-regex" | "-iregex"
        )
    });
    let danger = starts.iter().find(|s| dangerous_target(&s.text));
    if let Some(d) = danger.filter(|_| !by_name) {
        if args.iter().any(|a| a.text == "-delete") {
            return Err(Hit::Rule(RM_ROOT, format!("find {} -delete", d.text)));
        }
    }
    let mut i = 0;
    while i < args.len() {
        if matches!(
            args[i].text.as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir"
        ) {
            let end = args[i + 1..]
                .iter()
                .position(|a| a.text == ";" || a.text == "+")
                .map_or(args.len(), |p| i + 1 + p);
            // With a name filter `{}` is never the starting point itself.
            let here = [EWord::lit(if by_name { "./{}" } else { "." })];
            let starts: Vec<&EWord> = if starts.is_empty() || by_name {
                here.iter().collect()
            } else {
                starts.clone()
            };
            for s in starts {
                let inner: Vec<EWord> = args[i + 1..end]
                    .iter()
                    .map(|a| EWord {
                        text: a.text.replace("{}", &s.text),
                        ..a.clone()
                    })
                    .collect();
                let sub = Ctx {
                    redirs: &[],
                    before: &[],
                    piped: false,
                    feeds: false,
                    depth: ctx.depth + 1,
                };
                checker.run(inner, &sub)?;
            }
            i = end;
        }
        i += 1;
    }
    Ok(())
}

/// Whether a path, once normalised, is `/`, `/*`, a top-level system
/// directory (or everything in one), or a home directory. An unknown
/// expansion at the start counts as empty, as it would be when the variable
/// is unset (`"$DIR"/*`); further on it counts as some name
/// (`/home/$USER` is one user's home, not `/home`).
fn dangerous_target(text: &str) -> bool {
    let rest = text.trim_start_matches(UNKNOWN);
    let p = norm_path(&rest.replace(UNKNOWN, &NON_EMPTY.to_string()));
    if p.contains(NON_EMPTY) {
        return false;
    }
    if p == "/" || p == "~" || (p.starts_with('~') && !p.contains('/')) {
        return true;
    }
    let parts: Vec<&str> = p.split('/').collect();
    let glob = |s: &str| s.contains(['*', '?', '[']);
    // `/*`, `/u*`, `/[a-z]*`: a pattern that can match a system directory.
    let wild = |s: &str| {
        let mut lit = String::new();
        let mut in_class = false;
        for c in s.chars() {
            match c {
                '[' => in_class = true,
                ']' => in_class = false,
                '*' | '?' if !in_class => break,
                c if !in_class => lit.push(c),
                _ => {}
            }
        }
        glob(s) && SYSTEM_DIRS.iter().any(|d| d.starts_with(&lit))
    };
    match parts.as_slice() {
        // `~/*`, `~user/*`
        [home, all] if home.starts_with('~') => glob(all) && all.chars().all(|c| "*?".contains(c)),
        ["", top] => SYSTEM_DIRS.contains(top) || wild(top),
        ["", top, all] => {
            SYSTEM_DIRS.contains(top) && (all.chars().all(|c| "*?".contains(c)))
                || *top == "usr" && USR_DIRS.contains(all)
                || *top == "var" && *all == "lib"
        }
        _ => false,
    }
}

/// `//etc/./x/..` -> `/etc`: repeated slashes, `.` and `..` resolved by
/// text; relative paths stay relative.
fn norm_path(p: &str) -> String {
    let abs = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." if abs || parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if abs {
        format!("/{joined}")
    } else if joined.is_empty() && !p.is_empty() {
        ".".into()
    } else {
        joined
    }
}

/// Whole disks and partitions under `/dev` (not `/dev/null`, not files
/// that merely start like one, such as `/dev/sda1.txt`).
fn is_block_device(path: &str) -> bool {
    let Some(dev) = path.strip_prefix("/dev/") else {
        return false;
    };
    if dev.starts_with("mapper/") || dev.starts_with("disk/") {
        return true;
    }
    let letters_then_digits = |s: &str| {
        let rest = s.trim_start_matches(|c: char| c.is_ascii_lowercase());
        rest.len() < s.len() && rest.chars().all(|c| c.is_ascii_digit())
    };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    // `nvme0`, `nvme0n1`, `nvme0n1p2`; `mmcblk0`, `mmcblk0p1`.
    let numbered = |s: &str, inner: char| {
        let mut parts = s.splitn(2, inner);
        let head = parts.next().unwrap_or("");
        digits(head) && parts.next().is_none_or(|t| t.split(['n', 'p']).all(digits))
    };
    ["sd", "hd", "vd", "xvd"]
        .iter()
        .any(|p| dev.strip_prefix(p).is_some_and(letters_then_digits))
        || dev.strip_prefix("nvme").is_some_and(|s| numbered(s, 'n'))
        || dev.strip_prefix("mmcblk").is_some_and(|s| numbered(s, 'p'))
        || dev.strip_prefix("dm-").is_some_and(digits)
        || dev.strip_prefix("md").is_some_and(digits)
}

/// Listing a partition table is harmless (`fdisk -l`); anything else may
/// rewrite it.
fn partition_read_only(name: &str, args: &[EWord]) -> bool {
    let opts = Opts::parse(args, "", &[]);
    match name {
        "fdisk" | "gdisk" => opts.has_short('l') || opts.has_long("list", 3),
        "sfdisk" => {
            opts.shorts.iter().any(|c| "ldsVJ".contains(*c))
                || ["list", "dump", "show-size", "verify", "json"]
                    .iter()
                    .any(|l| opts.has_long(l, 3))
        }
        "sgdisk" => {
            !opts.shorts.is_empty()
                && opts.shorts.iter().all(|c| "piP".contains(*c))
                && opts
                    .longs
                    .iter()
                    .all(|l| l == "print" || l == "info" || l == "pretend")
        }
        "parted" => {
            opts.has_short('l')
                || opts.has_long("list", 3)
                || opts.positional.len() >= 2
                    && opts.positional[1..].iter().all(|w| w.text == "print")
        }
        _ => false,
    }
}

/// Commands that turn unreadable text into something else: base64 and
/// friends, hex, compression, and `printf`/`echo -e` of escape codes.
fn is_decoder(name: &str, args: &[EWord]) -> bool {
    let opts = Opts::parse(args, "", &[]);
    match name {
        "base64" | "base32" | "basenc" | "gbase64" => {
            opts.has_short('d') || opts.has_short('D') || opts.has_long("decode", 3)
        }
        "xxd" => opts.has_short('r') || opts.longs.iter().any(|l| l.starts_with("rev")),
        "openssl" => args
            .iter()
            .any(|a| a.text == "-d" || a.text == "-base64" && args.iter().any(|b| b.text == "-d")),
        "uudecode" | "rev" | "gunzip" | "zcat" | "gzcat" | "bunzip2" | "bzcat" | "xzcat"
        | "unxz" | "unzstd" | "zstdcat" | "lzcat" | "unlzma" => true,
        "gzip" | "bzip2" | "xz" | "zstd" | "lz4" | "lzma" => {
            opts.has_short('d') || opts.has_long("decompress", 3)
        }
        "tr" => true,
        "printf" => args.iter().any(|a| has_escape_codes(&a.text)),
        "echo" => opts.has_short('e') && args.iter().any(|a| has_escape_codes(&a.text)),
        _ => false,
    }
}

/// `\x72`, `\162`, `\u0072`: characters written as codes.
fn has_escape_codes(s: &str) -> bool {
    let b = s.as_bytes();
    b.windows(2)
        .any(|w| w[0] == b'\\' && (matches!(w[1], b'x' | b'u' | b'U') || w[1].is_ascii_digit()))
}

/// What `echo`/`printf` without escape codes print.
fn printed(name: &str, args: &[EWord]) -> String {
    let mut words: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    if name == "echo" {
        while words.first().is_some_and(|w| {
            w.len() > 1 && w.starts_with('-') && w[1..].chars().all(|c| "neE".contains(c))
        }) {
            words.remove(0);
        }
    }
    words.join(" ").replace("\\n", "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(cmd: &str) -> Option<Denial> {
        Denylist::new(&[]).check(cmd)
    }

    /// Each must be refused, with the rule named.
    const DANGEROUS: &[(&str, &str)] = &[
        ("rm -rf /", RM_ROOT),
        ("rm -r -f /", RM_ROOT),
        ("rm -Rf /", RM_ROOT),
        ("rm -fr /", RM_ROOT),
        ("rm -f -R /", RM_ROOT),
        ("rm --recursive --force /", RM_ROOT),
        ("rm --recur --force /", RM_ROOT),
        ("rm -rf -- /", RM_ROOT),
        ("rm / -rf", RM_ROOT),
        ("rm -rf \"/\"", RM_ROOT),
        ("rm -rf '/'", RM_ROOT),
        ("r\"m\" -rf /", RM_ROOT),
        ("\\rm -rf /", RM_ROOT),
        ("'rm' '-rf' '/'", RM_ROOT),
        ("rm -rf //", RM_ROOT),
        ("rm -rf /./", RM_ROOT),
        ("rm -rf /tmp/../", RM_ROOT),
        ("rm -rf /*", RM_ROOT),
        ("rm -rf /etc", RM_ROOT),
        ("rm -rf /usr/", RM_ROOT),
        ("rm -rf /usr/bin", RM_ROOT),
        ("rm -rf /home/*", RM_ROOT),
        ("rm -rf /boot /var", RM_ROOT),
        ("rm -rf ~", RM_ROOT),
        ("rm -rf ~/", RM_ROOT),
        ("rm -rf ~/*", RM_ROOT),
        ("rm -rf $HOME", RM_ROOT),
        ("rm -rf \"${HOME}/\"", RM_ROOT),
        ("rm -rf \"$DIR\"/*", RM_ROOT),
        ("rm -rf /u*", RM_ROOT),
        ("rm -rf /[a-z]*", RM_ROOT),
        ("rm --no-preserve-root -rf /", NO_PRESERVE_ROOT),
        ("rm -r --no-preserve-root /tmp/x", NO_PRESERVE_ROOT),
        ("/bin/rm -rf /", RM_ROOT),
        ("/usr/bin/rm -rf /", RM_ROOT),
        ("sudo rm -rf /", RM_ROOT),
        ("sudo -u root -- rm -rf /", RM_ROOT),
        ("doas rm -rf /", RM_ROOT),
        ("env FOO=1 rm -rf /", RM_ROOT),
        ("FOO=1 rm -rf /", RM_ROOT),
        ("nice -n 10 nohup timeout 5 rm -rf /", RM_ROOT),
        ("time rm -rf /", RM_ROOT),
        ("command rm -rf /", RM_ROOT),
        ("exec rm -rf /", RM_ROOT),
        ("busybox rm -rf /", RM_ROOT),
        ("echo / | xargs rm -rf", RM_ROOT),
        ("xargs -0 rm -rf /", RM_ROOT),
        ("sh -c \"rm -rf /\"", RM_ROOT),
        ("bash -c 'rm -r -f /'", RM_ROOT),
        ("bash -lc 'sudo rm -rf /'", RM_ROOT),
        ("sh -c \"bash -c 'rm -rf /'\"", RM_ROOT),
        ("eval \"rm -rf /\"", RM_ROOT),
        ("eval rm -rf /", RM_ROOT),
        ("su -c 'rm -rf /'", RM_ROOT),
        ("ssh host rm -rf /", RM_ROOT),
        ("env -S 'rm -rf /'", RM_ROOT),
        ("x=rm; $x -rf /", RM_ROOT),
        ("x=rm y=-rf; $x $y /", RM_ROOT),
        ("export x=rm; $x -rf /", RM_ROOT),
        ("c='rm -rf'; $c /", RM_ROOT),
        ("$CMD -rf /", RM_ROOT),
        ("$(echo rm) -rf /", RM_ROOT),
        ("`which rm` -rf /", RM_ROOT),
        ("$'\\x72\\x6d' -rf /", RM_ROOT),
        ("ls; rm -rf /", RM_ROOT),
        ("true && rm -rf /", RM_ROOT),
        ("false || rm -rf /", RM_ROOT),
        ("ls\nrm -rf /", RM_ROOT),
        ("(rm -rf /)", RM_ROOT),
        ("{ rm -rf /; }", RM_ROOT),
        ("sleep 1 & rm -rf /", RM_ROOT),
        ("if true; then rm -rf /; fi", RM_ROOT),
        ("for i in 1; do rm -rf /; done", RM_ROOT),
        ("echo $(rm -rf /)", RM_ROOT),
        ("echo \"`rm -rf /`\"", RM_ROOT),
        ("cat <(rm -rf /)", RM_ROOT),
        ("echo 'rm -rf /' | sh", RM_ROOT),
        ("printf 'rm -rf /\\n' | bash", RM_ROOT),
        ("sh <<< 'rm -rf /'", RM_ROOT),
        ("bash <<EOF\nrm -rf /\nEOF", RM_ROOT),
        ("cat <<'EOF' | sh\nrm -rf /\nEOF", RM_ROOT),
        ("find / -delete", RM_ROOT),
        ("find / -exec rm -rf {} +", RM_ROOT),
        ("mkfs.ext4 /dev/sda1", MKFS),
        ("mkfs -t xfs /dev/nvme0n1", MKFS),
        ("sudo mke2fs /dev/sdb", MKFS),
        ("wipefs -a /dev/sda", WIPEFS),
        ("fdisk /dev/sda", PARTITION),
        ("parted /dev/sda mklabel gpt", PARTITION),
        ("sgdisk --zap-all /dev/nvme0n1", PARTITION),
        ("dd if=/dev/zero of=/dev/sda bs=1M", BLOCK_WRITE),
        ("dd if=/dev/urandom of=/dev/nvme0n1p2", BLOCK_WRITE),
        ("dd of=/dev/mmcblk0 if=image.img", BLOCK_WRITE),
        ("cat /dev/zero > /dev/sda", BLOCK_WRITE),
        ("echo x >> /dev/vda", BLOCK_WRITE),
        ("cat img 2> /dev/hda", BLOCK_WRITE),
        ("cat img &> /dev/xvda", BLOCK_WRITE),
        ("cat img >| /dev/dm-0", BLOCK_WRITE),
        ("cat img | tee /dev/mapper/root", BLOCK_WRITE),
        ("cp disk.img /dev/sdb", BLOCK_WRITE),
        ("shred -n 1 /dev/sda", BLOCK_WRITE),
        ("d=/dev/sda; cat x > $d", BLOCK_WRITE),
        (":(){ :|:& };:", FORK_BOMB),
        ("bomb() { bomb | bomb & }; bomb", FORK_BOMB),
        ("chmod -R 777 /", CHMOD_ROOT),
        ("chown -R nobody:nogroup /", CHMOD_ROOT),
        ("chmod --recursive 000 /etc", CHMOD_ROOT),
        ("echo cm0gLXJmIC8K | base64 -d | sh", DECODE_EXEC),
        ("base64 --decode payload.txt | bash", DECODE_EXEC),
        ("cat x | base64 -d | gunzip | sh", DECODE_EXEC),
        ("xxd -r -p hex.txt | bash", DECODE_EXEC),
        ("eval \"$(echo cm0gLXJmIC8K | base64 -d)\"", DECODE_EXEC),
        ("sh -c \"$(base64 -d <<< cm0gLXJmIC8K)\"", DECODE_EXEC),
        ("bash <(echo cm0= | base64 -d)", DECODE_EXEC),
        ("$(echo cm0= | base64 -d) -rf /", DECODE_EXEC),
        (
            "printf '\\x72\\x6d\\x20\\x2d\\x72\\x66\\x20\\x2f' | sh",
            DECODE_EXEC,
        ),
        ("echo -e '\\x72\\x6d -rf /' | bash", DECODE_EXEC),
        ("base64 -d x | sudo sh", DECODE_EXEC),
        ("base64 -d x | (sh)", DECODE_EXEC),
    ];

    const SAFE: &[&str] = &[
        "rm -rf /tmp/x",
        "rm -rf ./build",
        "rm -rf build target",
        "rm -rf ~/.cache/buddy",
        "rm -rf \"$HOME/.cache\"",
        "rm -rf /tmp/*",
        "rm -f /etc/foo.conf",
        "rm /",
        "rm -rf \"${DIR:?}\"/*",
        "echo \"rm -rf /\"",
        "echo rm -rf /",
        "grep mkfs notes.txt",
        "grep -r 'rm -rf /' .",
        "git commit -m \"rm -rf /\"",
        "cat /dev/sda1.txt",
        "cat /dev/sda > disk.img",
        "dd if=/dev/sda of=backup.img bs=4M",
        "echo hi > /dev/null",
        "ls 2>&1 > out.txt",
        "fdisk -l",
        "sudo parted /dev/sda print",
        "chmod -R 755 ./public",
        "chown -R me /srv/app/data",
        "base64 -d key.b64 > key.bin",
        "echo aGk= | base64 -d",
        "curl -fsSL https://example.org/install.sh | sh",
        "find . -name '*.o' -delete",
        "find /tmp -exec rm -rf {} +",
        "cat <<'EOF' > notes.md\nrm -rf /\nEOF",
        "sudo reboot",
        "shutdown -h now",
        "command -v rm",
        "man rm",
        "ls -la /",
        "cp /dev/sda1.txt backup/",
        "x=hello; echo $x",
        "printf '%s\\n' hello | sh",
        "it's a typo in a pane",
        "rm -rf $TMPDIR/buddy-*",
        "chown -R $USER:$USER /home/$USER",
        "rm -rf /usr/$X",
        "find / -name '*.pyc' -delete",
        "find / -name __pycache__ -exec rm -rf {} +",
        "bash script.sh",
        "sudo apt-get install -y ripgrep",
        "ssh -i key host",
        "tr -d '\\r' < in.txt > out.txt",
        "mkswap /swapfile",
    ];

    /// The nine spellings from issue 34 that reached `rm -rf /`, each
    /// with the rule that now refuses it.
    const ISSUE_34: &[(&str, &str)] = &[
        ("bash -c 'rm -rf /{etc,usr}'", RM_ROOT),
        ("bash -c '{rm,-rf,/}'", RM_ROOT),
        ("bash -c 'rm -rf {/,/}'", RM_ROOT),
        ("bash -c 'set -- rm -rf /; \"$@\"'", RM_ROOT),
        ("f(){ rm -rf \"$1\"; }; f /", RM_ROOT),
        ("for d in /; do rm -rf $d; done", RM_ROOT),
        ("bash -c 'xargs rm -rf <<< /'", RM_ROOT),
        ("git clean -ffdx /", GIT_CLEAN),
        ("rsync -a --delete empty/ /", RSYNC_DELETE),
    ];

    #[test]
    fn issue_34_spellings_are_each_refused_by_their_rule() {
        for (cmd, rule) in ISSUE_34 {
            let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
            assert_eq!(d.rule, *rule, "{cmd:?}: {d}");
        }
    }

    #[test]
    fn brace_expansion_is_expanded_before_the_rules() {
        for cmd in [
            ISSUE_34[0].0,
            ISSUE_34[1].0,
            ISSUE_34[2].0,
            "rm -rf /{tmp/x,etc}",
            "rm -rf /{a..z}{a..z}{a..z}",
            "{sudo,rm,-rf,/}",
            "rm -rf /{,tmp}",
        ] {
            let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
            assert!(d.rule == RM_ROOT || d.rule == TOO_BIG, "{cmd:?}: {d}");
        }
        assert_eq!(denied("rm -rf /{a..z}{a..z}{a..z}").unwrap().rule, TOO_BIG);
        for cmd in [
            "rm -rf build/{debug,release}",
            "rm -rf '/{etc,usr}'",
            "echo {1..100}",
            "mkdir -p src/{a,b}/tests",
            "find . -exec rm {} +",
            "x=/{etc,usr}; echo $x",
        ] {
            assert_eq!(denied(cmd), None, "{cmd:?}");
        }
    }

    #[test]
    fn positional_parameters_set_in_the_script_are_followed() {
        for cmd in [
            ISSUE_34[3].0,
            "set rm -rf /; $@",
            "set -e -- x /; shift; rm -rf \"$1\"",
            "set -- / ; rm -rf \"$@\"",
            "sh -c 'rm -rf \"$1\"' sh /",
            "bash -c '\"$0\" -rf /' rm",
        ] {
            assert_eq!(
                denied(cmd).map(|d| d.rule),
                Some(RM_ROOT.to_string()),
                "{cmd:?}"
            );
        }
        assert_eq!(denied("set -- ls -la; \"$@\""), None);
        assert_eq!(denied("sh -c 'echo \"$1\"' sh hello"), None);
    }

    #[test]
    fn unknown_parameters_or_text_as_a_command_are_refused_as_unknown() {
        for cmd in [
            "\"$@\"",
            "$1 -rf /tmp/x",
            "f(){ \"$@\"; }; f $@",
            "eval \"$CMD\"",
            "eval \"$1\"",
            "sh -c \"$1\"",
            "bash -c \"$SCRIPT\"",
        ] {
            let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
            assert_eq!(d.rule, UNKNOWN_CMD, "{cmd:?}: {d}");
        }
        // A substitution's commands are checked, as `cmd | sh` is.
        assert_eq!(denied("eval \"$(ssh-agent -s)\""), None);
        assert_eq!(denied("echo \"$1\" \"$@\""), None);
    }

    #[test]
    fn function_bodies_are_checked_with_each_calls_words() {
        for cmd in [
            ISSUE_34[4].0,
            "f(){ \"$@\"; }; f rm -rf /",
            "f() { g \"$1\"; }; g() { rm -rf \"$1\"; }; f /etc",
            "f() rm -rf /; echo",
            "wipe() { for d in \"$@\"; do rm -rf \"$d\"; done; }; wipe /tmp/x /usr",
        ] {
            assert_eq!(
                denied(cmd).map(|d| d.rule),
                Some(RM_ROOT.to_string()),
                "{cmd:?}"
            );
        }
        // Endless recursion cannot be followed to the end: refused.
        assert_eq!(
            denied("f(){ f; }; f").map(|d| d.rule),
            Some(TOO_DEEP.to_string())
        );
        for cmd in [
            "f(){ rm -rf \"$1\"; }; f build",
            "greet() { echo \"hello $1\"; }; greet world",
            "run() { \"$@\"; }; run cargo test",
            "lines() { wc -l \"$@\"; }",
        ] {
            assert_eq!(denied(cmd), None, "{cmd:?}");
        }
    }

    #[test]
    fn for_loops_check_their_body_with_each_word() {
        for cmd in [
            ISSUE_34[5].0,
            "for d in /tmp/x /etc; do rm -rf \"$d\"; done",
            "for d in /{etc,usr}; do rm -rf $d; done",
            "for d in a b; do\n  for e in /; do rm -rf $e; done\ndone",
            "for x in 1; do while true; do echo; done; rm -rf /; done",
            "set -- /; for d; do rm -rf $d; done",
            "for d in x; do echo; done; rm -rf /",
        ] {
            assert_eq!(
                denied(cmd).map(|d| d.rule),
                Some(RM_ROOT.to_string()),
                "{cmd:?}"
            );
        }
        for cmd in [
            "for f in *.rs; do wc -l \"$f\"; done",
            "for d in build target; do rm -rf \"$d\"; done",
            "for i in {1..5}; do echo $i; done",
            "for ((i=0; i<3; i++)); do echo $i; done",
        ] {
            assert_eq!(denied(cmd), None, "{cmd:?}");
        }
        assert_eq!(
            denied("for i in {1..1000}; do for j in {1..1000}; do echo; done; done")
                .map(|d| d.rule),
            Some(TOO_BIG.to_string())
        );
    }

    #[test]
    fn here_strings_and_documents_feeding_xargs_are_its_words() {
        for cmd in [
            ISSUE_34[6].0,
            "xargs rm -rf <<< /",
            "xargs rm -rf <<EOF\n/etc\nEOF",
            "xargs -0 sudo rm -rf <<< '/usr'",
        ] {
            assert_eq!(
                denied(cmd).map(|d| d.rule),
                Some(RM_ROOT.to_string()),
                "{cmd:?}"
            );
        }
        assert_eq!(denied("xargs rm -rf <<< build"), None);
        assert_eq!(
            denied("xargs sh -c <<< \"$(echo cm0= | base64 -d)\"").map(|d| d.rule),
            Some(DECODE_EXEC.to_string())
        );
    }

    #[test]
    fn git_clean_with_force_outside_the_tree_is_refused() {
        for cmd in [
            ISSUE_34[7].0,
            "git clean -fdx ~",
            "git clean --force -d /etc",
            "git -C / clean -ffdx",
            "git --work-tree=/ clean -fdx",
            "git clean -fd ../other",
            "sudo git clean -fdx -- /",
        ] {
            assert_eq!(
                denied(cmd).map(|d| d.rule),
                Some(GIT_CLEAN.to_string()),
                "{cmd:?}"
            );
        }
        for cmd in [
            "git clean -fd",
            "git clean -fdx build/",
            "git clean -n /",
            "git clean -ndx ~",
            "git -C ../other clean -fd",
            "git status /",
        ] {
            assert_eq!(denied(cmd), None, "{cmd:?}");
        }
    }

    #[test]
    fn rsync_deleting_in_a_system_directory_is_refused() {
        for cmd in [
            ISSUE_34[8].0,
            "rsync -a --delete-after x/ /etc/",
            "rsync -av --del --exclude .git src/ ~",
            "rsync -a --delete x/ host:/",
            "rsync --remove-source-files -a /usr/ backup/",
            "rsync -e ssh --delete-excluded -r a/ /var",
        ] {
            assert_eq!(
                denied(cmd).map(|d| d.rule),
                Some(RSYNC_DELETE.to_string()),
                "{cmd:?}"
            );
        }
        for cmd in [
            "rsync -a src/ dst/",
            "rsync -a --delete src/ dst/",
            "rsync -a / backup/",
            "rsync -a --delete --exclude / src/ dst/",
            "rsync --remove-source-files -a out/ /srv/archive/",
            "rsync /",
        ] {
            assert_eq!(denied(cmd), None, "{cmd:?}");
        }
    }

    #[test]
    fn dangerous_variants_are_refused() {
        let mut count = 0;
        for (cmd, rule) in DANGEROUS {
            let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
            assert_eq!(d.rule, *rule, "{cmd:?}: {d}");
            count += 1;
        }
        assert!(count >= 40);
    }

    #[test]
    fn look_alikes_pass() {
        for cmd in SAFE {
            assert_eq!(denied(cmd), None, "{cmd:?}");
        }
        assert!(SAFE.len() >= 20);
    }

    /// A small xorshift generator: the same seed gives the same cases.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
            xs[(self.next() % xs.len() as u64) as usize]
        }
        fn chance(&mut self, in_n: u64) -> bool {
            self.next().is_multiple_of(in_n)
        }
    }

    /// One shell spelling of the word `w`.
    fn quote(rng: &mut Rng, w: &str) -> String {
        match rng.next() % 6 {
            0 => format!("'{w}'"),
            1 => format!("\"{w}\""),
            2 => w.chars().map(|c| format!("\\{c}")).collect(),
            3 if w.len() > 1 => format!("{}''{}", &w[..1], &w[1..]),
            4 if w.len() > 1 => format!("\"{}\"{}", &w[..1], &w[1..]),
            _ => w.to_string(),
        }
    }

    /// `text` as one word for `sh -c` / `eval`.
    fn as_one_word(rng: &mut Rng, text: &str) -> String {
        if !text.contains('\'') && rng.chance(2) {
            format!("'{text}'")
        } else {
            let escaped: String = text
                .chars()
                .map(|c| match c {
                    '"' | '\\' | '$' | '`' => format!("\\{c}"),
                    c => c.to_string(),
                })
                .collect();
            format!("\"{escaped}\"")
        }
    }

    fn variant(rng: &mut Rng) -> String {
        let flag_sets: &[&[&str]] = &[
            &["-rf"],
            &["-fr"],
            &["-Rf"],
            &["-r", "-f"],
            &["-f", "-R"],
            &["-r"],
            &["-R"],
            &["--recursive", "--force"],
            &["--force", "--recursive"],
            &["-rfv"],
            &["-v", "-r", "-i"],
        ];
        let flags = flag_sets[(rng.next() % flag_sets.len() as u64) as usize];
        let name = rng.pick(&["rm", "/bin/rm", "/usr/bin/rm", "rm"]);
        let target = rng.pick(&[
            "/", "//", "/.", "/./", "/*", "/usr", "/etc/", "~", "/tmp/..",
        ]);
        let mut words = vec![quote(rng, name)];
        let flags: Vec<String> = flags.iter().map(|f| quote(rng, f)).collect();
        let target = if target.contains(['*', '~']) {
            target.to_string()
        } else {
            quote(rng, target)
        };
        if rng.chance(3) {
            words.push(target);
            words.extend(flags);
        } else {
            words.extend(flags);
            if rng.chance(3) {
                words.push("--".into());
            }
            words.push(target);
        }
        let mut cmd = words.join(" ");
        for _ in 0..rng.next() % 4 {
            cmd = match rng.next() % 9 {
                0 => format!("sudo {cmd}"),
                1 => format!("env A=1 {cmd}"),
                2 => format!("nice -n 5 {cmd}"),
                3 => format!("timeout 10 {cmd}"),
                4 => format!(
                    "{} -c {}",
                    rng.pick(&["sh", "bash", "dash", "zsh"]),
                    as_one_word(rng, &cmd)
                ),
                5 => format!("eval {}", as_one_word(rng, &cmd)),
                6 => format!("true && {cmd}"),
                7 => format!("( {cmd} )"),
                _ => format!("FOO=bar {cmd}"),
            };
        }
        cmd
    }

    #[test]
    fn random_spellings_of_rm_rf_root_are_always_refused() {
        let mut rng = Rng(0x5eed_1234_abcd_9876);
        for _ in 0..5000 {
            let cmd = variant(&mut rng);
            let d = denied(&cmd).unwrap_or_else(|| panic!("not refused: {cmd}"));
            assert_eq!(d.rule, RM_ROOT, "{cmd}: {d}");
        }
    }

    #[test]
    fn user_patterns_match_leading_words_after_wrappers() {
        let list = Denylist::new(&["git push --force".to_string(), "curl".to_string()]);
        for cmd in [
            "git push --force",
            "sudo git push --force origin main",
            "git push origin main --force",
            "cd repo && 'git' push \"--force\"",
            "sh -c 'git push --force'",
            "curl -fsSL https://example.org/x | sh",
        ] {
            let d = list
                .check(cmd)
                .unwrap_or_else(|| panic!("not refused: {cmd}"));
            assert!(d.user_pattern, "{cmd}");
        }
        for cmd in [
            "git push origin main",
            "git push --force-with-lease",
            "echo git push --force",
            "git commit -m 'git push --force'",
        ] {
            assert_eq!(list.check(cmd), None, "{cmd}");
        }
        // The built-in rules stay on beside the user's list.
        assert_eq!(list.check("rm -rf /").map(|d| d.rule), Some(RM_ROOT.into()));
        let d = list.check("sudo git push --force").unwrap();
        assert_eq!(
            d.to_string(),
            "it matches the denylist pattern `git push --force`"
        );
    }

    #[test]
    fn patterns_that_are_not_plain_words_keep_the_old_text_match() {
        let list = Denylist::new(&["> /dev/ttyS".to_string(), "  ".to_string()]);
        assert!(list.check("echo hi >   /dev/ttyS0").is_some());
        assert_eq!(list.check("echo hi > out.txt"), None);
    }

    #[test]
    fn broken_quoting_is_read_as_if_closed() {
        assert_eq!(denied("rm -rf \"/").map(|d| d.rule), Some(RM_ROOT.into()));
        assert_eq!(
            denied("sh -c 'rm -rf /").map(|d| d.rule),
            Some(RM_ROOT.into())
        );
        assert_eq!(
            denied("echo $(rm -rf /").map(|d| d.rule),
            Some(RM_ROOT.into())
        );
        assert_eq!(denied("echo \"it's fine"), None);
    }

    #[test]
    fn nesting_too_deep_is_refused_not_overflowed() {
        let mut cmd = "ls".to_string();
        for _ in 0..12 {
            cmd = format!("sh -c {}", as_one_word(&mut Rng(7), &cmd));
        }
        assert_eq!(denied(&cmd).map(|d| d.rule), Some(TOO_DEEP.into()));
        // Far past any limit, on a small stack: refused, and no overflow.
        let deep = format!("{}ls{}", "(".repeat(100_000), ")".repeat(100_000));
        let funcs = "f()".repeat(100_000);
        let subs = format!("{}ls{}", "$(".repeat(50_000), ")".repeat(50_000));
        let rule = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                [deep, funcs, subs]
                    .iter()
                    .map(|c| denied(c).map(|d| d.rule))
                    .collect::<Vec<_>>()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(rule, vec![Some(TOO_DEEP.to_string()); 3]);
    }

    #[test]
    fn the_reason_names_the_rule_and_shows_the_match_safely() {
        let d = denied("rm -rf \"/\x1b[2J\"/..").unwrap();
        assert_eq!(d.rule, RM_ROOT);
        assert!(!d.to_string().contains('\x1b'), "{d}");
        let d = denied("rm -rf \"$D\"/*").unwrap();
        assert_eq!(
            d.to_string(),
            "it is recursive removal of / or a system directory (`rm -r $…/*`)"
        );
    }
}
