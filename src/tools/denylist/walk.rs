//! Following the parsed tree: lists and pipelines (what each stage gets
//! from the ones before), groups, function definitions and calls (a body
//! checked with each call's words), `for` loops (the body once per word),
//! positional parameters set on the line, leading assignments, wrappers
//! unwrapped to the command they run, and shells fed by a here-string, a
//! here-document or an earlier stage. Each command found goes to the user's
//! patterns and to `rules.rs`.

use super::expand::{assignment, EWord, NON_EMPTY, UNKNOWN};
use super::paths::{is_block_device, norm_path};
use super::wrappers::{unwrap, Unwrapped};
use super::{
    Check, Checker, Ctx, Hit, Summary, BLOCK_WRITE, DECODE_EXEC, FORK_BOMB, MAX_DEPTH, MAX_STEPS,
    TOO_BIG, TOO_DEEP, UNKNOWN_CMD,
};
use crate::shell::ast::{Cmd, Pipeline, Redir, Word};

impl Checker<'_> {
    pub(super) fn script(&mut self, text: &str, depth: usize) -> Check {
        if depth > MAX_DEPTH {
            return Err(Hit::Rule(TOO_DEEP, crate::text::one_line(text, 60)));
        }
        let list = crate::shell::parse(text)
            .map_err(|_| Hit::Rule(TOO_DEEP, crate::text::one_line(text, 60)))?;
        self.pipelines(&list, &[], depth)
    }

    /// `upstream`: what feeds the list's input (a group inside a pipeline).
    pub(super) fn pipelines(
        &mut self,
        list: &[Pipeline],
        upstream: &[Summary],
        depth: usize,
    ) -> Check {
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
    pub(super) fn cmd(
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

    /// `for var in words; do body; done`: the body checked once for each
    /// word standing for `var` (once with `var` unknown when there are none).
    pub(super) fn for_loop(
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
    pub(super) fn call(
        &mut self,
        name: &str,
        body: &Cmd,
        argv: &[EWord],
        ctx: &Ctx,
    ) -> Result<(), Hit> {
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
    pub(super) fn set_params(&mut self, args: &[EWord]) {
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
    pub(super) fn shift_params(&mut self, args: &[EWord]) {
        if let Some(p) = self.params.as_mut() {
            let n: usize = args
                .first()
                .map_or(Some(1), |w| w.text.parse().ok())
                .unwrap_or(1);
            let n = n.min(p.len().saturating_sub(1));
            p.drain(1..1 + n);
        }
    }

    pub(super) fn redirs(
        &mut self,
        redirs: &[Redir],
        depth: usize,
    ) -> Result<Vec<(Redir, EWord)>, Hit> {
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

    pub(super) fn simple(
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

    pub(super) fn assign(&mut self, w: &EWord) {
        if let Some((name, value)) = assignment(w) {
            let value = (!value.contains([UNKNOWN, NON_EMPTY])).then(|| value.to_string());
            self.vars.insert(name.to_string(), value);
        }
    }

    /// Checks one command given as expanded words, unwrapping wrappers.
    pub(super) fn run(&mut self, mut argv: Vec<EWord>, ctx: &Ctx) -> Check {
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
                        // `then FOO=1 rm …`: assignments after a keyword
                        // belong to the command, as at the start of a line
                        // (proptest found `if true; then FOO=bar rm -rf /;
                        // fi` passing).
                        let n = argv.iter().take_while(|w| assignment(w).is_some()).count();
                        if n == argv.len() {
                            for w in &argv {
                                self.assign(w);
                            }
                        }
                        argv.drain(..n);
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

    pub(super) fn user_patterns(&self, name: &str, argv: &[EWord]) -> Result<(), Hit> {
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

    /// A shell (or `source /dev/stdin`) running what it reads: check what feeds it.
    pub(super) fn stdin_shell(&mut self, name: &str, ctx: &Ctx) -> Result<(), Hit> {
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

/// The text a command's own stdin redirection gives it (here-document or
/// here-string), and whether it was decoded.
pub(super) fn fed_text(ctx: &Ctx) -> Option<(String, bool)> {
    ctx.redirs
        .iter()
        .rev()
        .find_map(|(r, w)| match r.op.as_str() {
            "<<<" => Some((w.text.clone(), w.decoded)),
            "<<" | "<<-" => r.body.clone().map(|b| (b, false)),
            _ => None,
        })
}

pub(super) fn is_fd(s: &str) -> bool {
    s == "-" || (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
}

pub(super) fn is_stdin_path(s: &str) -> bool {
    matches!(s, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

pub(super) fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}
