//! The per-agent allow list behind the "always" answer to an approval: which
//! command prefix "always" offers for a shell command, and whether a later
//! command starts with a prefix the user allowed. It lives in memory for as
//! long as its holders do (the REPL's agent; a served session while the
//! server runs). Some of its rules may have been remembered in the user's
//! config (`config::approvals`): the front end's host loads and saves them;
//! nothing here touches a file. It does not decide anything on its own: the
//! gate in `control.rs` asks it only after the denylist and the policy.
//!
//! A prefix is whole words, not text: `cargo test` allows `cargo test
//! --release x` but not `cargo testify`. Both the command that offered it and
//! any command it approves later must be one simple command of literal words
//! (the shell parser in `crate::shell` decides), so `cargo test; rm -rf ~`,
//! `cargo test $(x)`, `cargo test > f` or `cargo test && y` never match. Nor
//! does a command whose later words use an option of the program that writes
//! files or runs programs (`git log --output=x`, `sort -o f`): the tables in
//! `shell::readonly` say which, and the offer says it excludes them.

use crate::shell::literal_words;
use crate::shell::readonly::{has_side_doors, side_door};
use std::sync::{Arc, Mutex};

/// Tools whose second word picks what they do (`git push` is not `git
/// status`): "always" offers the program and that word.
const WITH_SUBCOMMANDS: &[&str] = &[
    "apt",
    "apt-get",
    "aws",
    "az",
    "brew",
    "bun",
    "bundle",
    "cabal",
    "cargo",
    "composer",
    "conda",
    "deno",
    "docker",
    "dotnet",
    "gcloud",
    "gh",
    "git",
    "go",
    "gradle",
    "helm",
    "just",
    "kubectl",
    "make",
    "mix",
    "mvn",
    "nix",
    "npm",
    "npx",
    "pip",
    "pip3",
    "pnpm",
    "podman",
    "poetry",
    "rake",
    "rustup",
    "stack",
    "systemctl",
    "terraform",
    "uv",
    "yarn",
    "zig",
];

/// Programs that run whatever their arguments say (interpreters, wrappers,
/// shell keywords): the program name alone would allow anything, so
/// "always" offers the whole command as the prefix.
const RUNS_ITS_ARGUMENTS: &[&str] = &[
    "awk", "bash", "builtin", "busybox", "chroot", "command", "dash", "doas", "env", "eval",
    "exec", "find", "fish", "flock", "gawk", "ionice", "ksh", "nice", "node", "nohup", "nsenter",
    "perl", "php", "python", "python3", "ruby", "script", "sed", "setsid", "sh", "source", "ssh",
    "stdbuf", "strace", "su", "sudo", "time", "timeout", "unshare", "watch", "xargs", "zsh", "if",
    "for", "while", "until", "case", "function", "coproc", "then", "do", "select",
];

/// Characters a shell would expand when unquoted; a prefix holding one is
/// not offered, since the words a later command spells could mean more.
const EXPANDING: &[char] = &['*', '?', '[', ']', '{', '}', '~'];

/// One allowed prefix as a front end lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    /// The prefix as the user would type it (`git log`).
    pub shown: String,
    /// Saved in the user's config, so later runs start with it.
    pub remembered: bool,
}

/// The prefixes allowed so far, as words, in the order they were allowed.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    prefixes: Vec<(Vec<String>, bool)>,
}

impl AllowList {
    pub fn add(&mut self, prefix: Vec<String>) {
        self.insert(prefix, false);
    }

    /// Adds `prefix` (or marks it) as remembered in the user's config.
    pub fn add_remembered(&mut self, prefix: Vec<String>) {
        self.insert(prefix, true);
    }

    fn insert(&mut self, prefix: Vec<String>, remembered: bool) {
        if prefix.is_empty() {
            return;
        }
        match self.prefixes.iter_mut().find(|(p, _)| *p == prefix) {
            Some((_, r)) => *r |= remembered,
            None => self.prefixes.push((prefix, remembered)),
        }
    }

    /// The allowed prefix `command` starts with, as shown to the user. The
    /// words after it must not open one of the program's side doors.
    pub fn find(&self, tool: &str, command: &str) -> Option<String> {
        if tool != "run_shell" || self.prefixes.is_empty() {
            return None;
        }
        let words = literal_words(command.trim())?;
        let program = words[0].rsplit('/').next().unwrap_or(&words[0]);
        let rest: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        if side_door(program, &rest) {
            return None;
        }
        self.prefixes
            .iter()
            .find(|(p, _)| words.len() >= p.len() && words[..p.len()] == p[..])
            .map(|(p, _)| shown(p))
    }

    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Every rule, remembered ones first, each in the order allowed.
    pub fn rules(&self) -> Vec<AllowRule> {
        let (mut saved, session): (Vec<AllowRule>, Vec<AllowRule>) = self
            .prefixes
            .iter()
            .map(|(p, remembered)| AllowRule {
                shown: shown(p),
                remembered: *remembered,
            })
            .partition(|r| r.remembered);
        saved.extend(session);
        saved
    }

    /// Drops the rule shown as `shown`; whether there was one.
    pub fn remove(&mut self, shown_rule: &str) -> bool {
        let before = self.prefixes.len();
        self.prefixes.retain(|(p, _)| shown(p) != shown_rule);
        self.prefixes.len() != before
    }
}

/// An allow list more than one agent may hold in turn: `buddy serve` starts
/// an agent per prompt and hands each the list of its session, so "always"
/// lasts as long as it does in the REPL. Clones share the list.
#[derive(Debug, Clone, Default)]
pub struct SharedAllowList(Arc<Mutex<AllowList>>);

impl SharedAllowList {
    fn lock(&self) -> std::sync::MutexGuard<'_, AllowList> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, prefix: Vec<String>) {
        self.lock().add(prefix);
    }

    pub fn find(&self, tool: &str, command: &str) -> Option<String> {
        self.lock().find(tool, command)
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub fn add_remembered(&self, prefix: Vec<String>) {
        self.lock().add_remembered(prefix);
    }

    pub fn rules(&self) -> Vec<AllowRule> {
        self.lock().rules()
    }

    pub fn remove(&self, shown_rule: &str) -> bool {
        self.lock().remove(shown_rule)
    }
}

/// The words of a rule as written in config (`git log`), if it is one a
/// prefix can be: literal words that "always" could have offered.
pub fn rule_words(rule: &str) -> Option<Vec<String>> {
    let words = literal_words(rule.trim())?;
    let ok = words
        .iter()
        .all(|w| !w.is_empty() && !w.contains(EXPANDING) && !w.contains('\n'))
        && !words[0].contains('=');
    ok.then_some(words)
}

/// What an "always" rule for `prefix` (as shown) covers beyond its words:
/// for a program with options that write files or run programs, a note that
/// those are left out; `None` for others.
pub fn scope_note(prefix: &str) -> Option<&'static str> {
    let words = literal_words(prefix)?;
    let program = words[0].rsplit('/').next().unwrap_or(&words[0]);
    has_side_doors(program).then_some("without options that write files or run programs")
}

/// What "always" would allow for this request, if it is offered: only for
/// `run_shell`, and only for a simple command of literal words. File writes
/// and text typed into a pane are asked about each time.
pub fn offer(tool: &str, command: &str) -> Option<Vec<String>> {
    if tool != "run_shell" {
        return None;
    }
    let words = literal_words(command.trim())?;
    if words
        .iter()
        .any(|w| w.is_empty() || w.contains(EXPANDING) || w.contains('\n'))
    {
        return None;
    }
    let program = &words[0];
    // `FOO=1 cmd`: an assignment first changes what the rest means.
    if program.contains('=') {
        return None;
    }
    let name = program.rsplit('/').next().unwrap_or(program);
    let special = RUNS_ITS_ARGUMENTS.contains(&name) || WITH_SUBCOMMANDS.contains(&name);
    let len = if RUNS_ITS_ARGUMENTS.contains(&name) || !is_plain_name(program) {
        words.len()
    } else if WITH_SUBCOMMANDS.contains(&name) {
        match words.get(1) {
            Some(sub) if sub.starts_with(|c: char| c.is_ascii_alphanumeric()) => 2,
            // `git -C dir push`: options first; only this command exactly.
            Some(_) => words.len(),
            None => 1,
        }
    } else {
        1
    };
    // `git` or `bash` alone as a prefix would allow everything they do.
    if special && len == 1 {
        return None;
    }
    Some(words[..len].to_vec())
}

fn is_plain_name(word: &str) -> bool {
    !word.starts_with('-')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./+@:-".contains(c))
}

/// Words as a person would type them: quoted where a word needs it.
pub fn shown(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./+@:%=,-".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(command: &str) -> Option<String> {
        offer("run_shell", command).map(|w| shown(&w))
    }

    fn allowing(command: &str) -> AllowList {
        let mut list = AllowList::default();
        list.add(offer("run_shell", command).expect("a prefix is offered"));
        list
    }

    #[test]
    fn the_offered_prefix_is_program_and_subcommand_for_known_tools() {
        assert_eq!(
            offered("cargo test --release").as_deref(),
            Some("cargo test")
        );
        assert_eq!(offered("git status").as_deref(), Some("git status"));
        assert_eq!(
            offered("/usr/bin/git log -3").as_deref(),
            Some("/usr/bin/git log")
        );
        assert_eq!(offered("ls -la src").as_deref(), Some("ls"));
        assert_eq!(offered("./build.sh --fast").as_deref(), Some("./build.sh"));
        assert_eq!(offered("  echo hi\n").as_deref(), Some("echo"));
        // Options before the subcommand, or a program that runs its
        // arguments: only this command (plus more arguments).
        assert_eq!(offered("git -C x push").as_deref(), Some("git -C x push"));
        assert_eq!(offered("sh -c 'rm x'").as_deref(), Some("sh -c 'rm x'"));
        assert_eq!(offered("python3 t.py").as_deref(), Some("python3 t.py"));
        assert_eq!(offered("! rm x").as_deref(), Some("'!' rm x"));
    }

    #[test]
    fn always_is_not_offered_where_a_prefix_could_hide_more() {
        for command in [
            "cargo test; rm -rf ~",
            "cargo test && rm x",
            "cargo test | tee log",
            "cargo test > log",
            "cargo test $(whoami)",
            "cargo test `whoami`",
            "cargo test $HOME",
            "cargo test &",
            "(cargo test)",
            "cargo test\nrm x",
            "FOO=1 cargo test",
            "ls *.rs",
            "git",
            "bash",
            "",
        ] {
            assert_eq!(offered(command), None, "{command:?}");
        }
        assert_eq!(
            offer("write_file", "write_file a.txt (3 bytes, new file)"),
            None
        );
        assert_eq!(offer("send-keys", "ls"), None);
    }

    #[test]
    fn a_prefix_matches_whole_words_of_a_simple_command_only() {
        let list = allowing("cargo test");
        assert_eq!(
            list.find("run_shell", "cargo test --release x").as_deref(),
            Some("cargo test")
        );
        assert_eq!(
            list.find("run_shell", "cargo 'test'").as_deref(),
            Some("cargo test")
        );
        for command in [
            "cargo testify",
            "cargo build",
            "cargo",
            "cargo test; rm -rf ~",
            "cargo test && rm -rf ~",
            "cargo test || rm x",
            "cargo test | sh",
            "cargo test > ~/.bashrc",
            "cargo test < /etc/shadow",
            "cargo test $(rm x)",
            "cargo test `rm x`",
            "cargo test <(rm x)",
            "cargo test ${X:-y}",
            "cargo test &",
            "cargo test\nrm x",
            "(cargo test)",
            "{ cargo test; }",
            "X=1 cargo test",
            "echo cargo test",
        ] {
            assert_eq!(list.find("run_shell", command), None, "{command:?}");
        }
        assert_eq!(list.find("send-keys", "cargo test"), None);
    }

    #[test]
    fn a_prefix_never_covers_options_that_write_files_or_run_programs() {
        let list = allowing("git log -n 1");
        assert!(list.find("run_shell", "git log -n 3 --stat").is_some());
        for command in [
            "git log --output=pwned.txt -n 1",
            "git log --output pwned.txt",
            "git log --outp=x",
            "git log --ext-diff",
            "git log -p --textconv",
            "git -c core.pager=sh log",
            "git log > out",
            "git log 2>/dev/null",
        ] {
            assert_eq!(list.find("run_shell", command), None, "{command:?}");
        }
        let list = allowing("sort -u names");
        assert!(list.find("run_shell", "sort -r x").is_some());
        assert!(list.find("run_shell", "sort -o out x").is_none());
        assert_eq!(
            scope_note("git log"),
            Some("without options that write files or run programs")
        );
        assert_eq!(scope_note("cargo test"), None);
    }

    #[test]
    fn remembered_rules_list_first_and_can_be_dropped() {
        let mut list = allowing("cargo test");
        list.add_remembered(rule_words("git log").expect("a rule"));
        list.add_remembered(rule_words("cargo test").expect("a rule"));
        list.add(rule_words("ls").expect("a rule"));
        let shown: Vec<(String, bool)> = list
            .rules()
            .into_iter()
            .map(|r| (r.shown, r.remembered))
            .collect();
        assert_eq!(
            shown,
            [
                ("cargo test".to_string(), true),
                ("git log".to_string(), true),
                ("ls".to_string(), false)
            ]
        );
        assert!(list.remove("git log"));
        assert!(!list.remove("git log"));
        assert!(list.find("run_shell", "git log").is_none());
        assert_eq!(rule_words("ls *"), None);
        assert_eq!(rule_words("X=1 ls"), None);
        assert_eq!(rule_words("ls; rm x"), None);
    }

    #[test]
    fn a_program_prefix_allows_its_arguments_but_not_other_programs() {
        let list = allowing("ls -la");
        assert!(list.find("run_shell", "ls src").is_some());
        assert!(list.find("run_shell", "lsblk").is_none());
        assert!(list.find("run_shell", "ls; rm x").is_none());
    }
}
