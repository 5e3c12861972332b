//! The per-agent allow list behind the "always" answer to an approval: which
//! command prefix "always" offers for a shell command, and whether a later
//! command starts with a prefix the user allowed. It lives in memory only,
//! for as long as its holders do (the REPL's agent; a served session while
//! the server runs); nothing here is read from or written to config. It does not decide anything on its own: the gate in `control.rs`
//! asks it only after the denylist and the approval policy.
//!
//! A prefix is whole words, not text: `cargo test` allows `cargo test
//! --release x` but not `cargo testify`. Both the command that offered it and
//! any command it approves later must be one simple command of literal words
//! (the denylist's shell parser decides), so `cargo test; rm -rf ~`,
//! `cargo test $(x)`, `cargo test > f` or `cargo test && y` never match.

use crate::tools::denylist::literal_words;
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

/// The prefixes allowed so far, as words.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    prefixes: Vec<Vec<String>>,
}

impl AllowList {
    pub fn add(&mut self, prefix: Vec<String>) {
        if !prefix.is_empty() && !self.prefixes.contains(&prefix) {
            self.prefixes.push(prefix);
        }
    }

    /// The allowed prefix `command` starts with, as shown to the user.
    pub fn find(&self, tool: &str, command: &str) -> Option<String> {
        if tool != "run_shell" || self.prefixes.is_empty() {
            return None;
        }
        let words = literal_words(command.trim())?;
        self.prefixes
            .iter()
            .find(|p| words.len() >= p.len() && words[..p.len()] == p[..])
            .map(|p| shown(p))
    }

    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
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
    fn a_program_prefix_allows_its_arguments_but_not_other_programs() {
        let list = allowing("ls -la");
        assert!(list.find("run_shell", "ls src").is_some());
        assert!(list.find("run_shell", "lsblk").is_none());
        assert!(list.find("run_shell", "ls; rm x").is_none());
    }
}
