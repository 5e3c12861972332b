//! Which command lines only read: the classifier behind approving `ls`,
//! `wc -l f` or `git status` without asking, and the per-program tables of
//! options that write files or run other programs, which also keep an
//! "always" prefix (`agent/allowlist.rs`) from covering them.
//!
//! A line is read-only when every simple command in it (pipelines, `&&`,
//! `||`, `;`, `( … )` included) is a known reader used in a reading form, it
//! has no redirection to a file (`/dev/null` and descriptor copies are fine),
//! no command, process or arithmetic substitution, no leading assignment
//! (`GIT_PAGER=sh git log`), no background job and no function definition.
//! When in doubt the answer is no: the caller then asks as usual. The
//! classifier does not decide approvals (the gate does) and knows nothing of
//! the denylist, which is checked first.
//!
//! What it cannot see: what a program's own configuration makes it do (a
//! repository's `.git/config` can name a pager, an external diff or an
//! fsmonitor hook that `git status` runs); see `docs/SECURITY.md`.

use super::ast::{Cmd, Pipeline, Redir, Seg, Word};

/// One argument as the classifier sees it: its literal text, and whether
/// the shell could make it something else (a variable, a glob that may
/// match a file named `--output=x`), so it might be any option.
struct Arg {
    text: String,
    dynamic: bool,
}

/// Whether the whole command line only reads.
pub fn is_read_only(command: &str) -> bool {
    match super::parse(command) {
        Ok(list) => !list.is_empty() && list.iter().all(pipeline_reads),
        Err(_) => false,
    }
}

fn pipeline_reads(p: &Pipeline) -> bool {
    !p.background && p.stages.iter().all(cmd_reads)
}

fn cmd_reads(cmd: &Cmd) -> bool {
    match cmd {
        Cmd::Group { body, redirs } => {
            !body.is_empty() && body.iter().all(pipeline_reads) && redirs.iter().all(redir_reads)
        }
        // Defining a function changes what later words mean.
        Cmd::Func { .. } => false,
        // A loop is judged as not read-only, as it was before loops were
        // parsed: its body may run any number of times with any value.
        Cmd::For { .. } => false,
        Cmd::Simple { words, redirs } => {
            if words.is_empty() || !redirs.iter().all(redir_reads) {
                return false;
            }
            let Some(argv) = words.iter().map(arg).collect::<Option<Vec<Arg>>>() else {
                return false;
            };
            let Some((name, args)) = argv.split_first() else {
                return false;
            };
            // A command name the shell computes, a path (`./ls` may be
            // anything) or an assignment (`PAGER=sh git log`) is not a
            // known reader.
            if name.dynamic || name.text.contains(['/', '=']) {
                return false;
            }
            program_reads(&name.text, args)
        }
    }
}

/// A word's text, or `None` when expanding it could run something
/// (`$(…)`, backticks, `<(…)`, arithmetic, `${x:-…}`).
fn arg(w: &Word) -> Option<Arg> {
    let mut a = Arg {
        text: String::new(),
        dynamic: false,
    };
    for seg in &w.segs {
        match seg {
            Seg::Lit(s, quoted) => {
                // An unquoted glob or brace list may become any file name,
                // including one that reads as an option.
                if !quoted && s.contains(['*', '?', '[', '{']) {
                    a.dynamic = true;
                }
                a.text.push_str(s);
            }
            Seg::Var(..) | Seg::NonEmpty => a.dynamic = true,
            Seg::Unknown | Seg::Param(..) | Seg::Sub(_) => return None,
        }
    }
    Some(a)
}

/// Input redirections and copies of descriptors only read; output goes
/// nowhere but `/dev/null`. Here-documents are expanded by the shell, so
/// one holding `$` or a backtick may run something.
fn redir_reads(r: &Redir) -> bool {
    let Some(target) = arg(&r.target) else {
        return false;
    };
    // bash opens a network connection for these names.
    if target.dynamic
        || target.text.starts_with("/dev/tcp/")
        || target.text.starts_with("/dev/udp/")
    {
        return false;
    }
    let fd = |t: &str| t == "-" || (!t.is_empty() && t.chars().all(|c| c.is_ascii_digit()));
    match r.op.as_str() {
        "<" => true,
        "<<" | "<<-" => r.body.as_deref().is_none_or(|b| !b.contains(['$', '`'])),
        "<<<" => true,
        "<&" | ">&" => fd(&target.text) || (r.op == ">&" && target.text == "/dev/null"),
        ">" | ">>" | ">|" | "&>" | "&>>" => target.text == "/dev/null",
        _ => false,
    }
}

/// Readers that have no option to write a file or run a program, so any
/// arguments will do.
const PLAIN_READERS: &[&str] = &[
    "basename",
    "b2sum",
    "cat",
    "cd",
    "cksum",
    "cmp",
    "comm",
    "cut",
    "df",
    "diff",
    "dirname",
    "du",
    "echo",
    "false",
    "grep",
    "egrep",
    "fgrep",
    "head",
    "id",
    "ls",
    "md5sum",
    "nl",
    "printf",
    "ps",
    "pwd",
    "readlink",
    "realpath",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "stat",
    "tac",
    "tail",
    "tr",
    "true",
    "uname",
    "wc",
    "which",
    "whoami",
];

fn program_reads(name: &str, args: &[Arg]) -> bool {
    if PLAIN_READERS.contains(&name) {
        return true;
    }
    // The rest have options that write or run something: an argument that
    // could be any option is not judged.
    if args.iter().any(|a| a.dynamic) {
        return false;
    }
    let words: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    match name {
        "find" => !words.iter().any(|w| find_side_door(w)),
        "git" => git_reads(&words),
        "uniq" => uniq_positionals(&words) <= 1 && !side_door(name, &words),
        "sort" | "rg" | "tree" | "file" => !side_door(name, &words),
        _ => false,
    }
}

/// `find` actions that run a program or write a file.
fn find_side_door(w: &str) -> bool {
    matches!(
        w,
        "-exec"
            | "-execdir"
            | "-ok"
            | "-okdir"
            | "-delete"
            | "-fls"
            | "-fprint"
            | "-fprint0"
            | "-fprintf"
    )
}

/// Per program: short options and long options (matched as getopt does,
/// by any prefix) that write files or run programs, and the short options
/// that take a value (so `-t,o` is a separator, not `-o`).
struct SideDoors {
    name: &'static str,
    shorts: &'static str,
    longs: &'static [&'static str],
    with_value: &'static str,
}

const SIDE_DOORS: &[SideDoors] = &[
    SideDoors {
        name: "sort",
        shorts: "o",
        longs: &["output", "compress-program"],
        with_value: "kotST",
    },
    SideDoors {
        name: "uniq",
        shorts: "",
        longs: &[],
        with_value: "fsw",
    },
    // `--pre` runs a program on every file; `--hostname-bin` runs one.
    SideDoors {
        name: "rg",
        shorts: "",
        longs: &["pre", "hostname-bin"],
        with_value: "ABCEefgMmrTtj",
    },
    // `-o` writes the listing; `-R` writes an index file per directory.
    SideDoors {
        name: "tree",
        shorts: "oR",
        longs: &["output"],
        with_value: "LPIoHT",
    },
    // `-C` compiles a magic file and writes it.
    SideDoors {
        name: "file",
        shorts: "C",
        longs: &["compile"],
        with_value: "mfFeP",
    },
    // Any git command: writing its output elsewhere, an external diff or
    // text conversion program, a program to run (`rebase --exec`, `fetch
    // --upload-pack`), configuration that can name one, hook templates.
    SideDoors {
        name: "git",
        shorts: "cxO",
        longs: &[
            "output",
            "ext-diff",
            "textconv",
            "exec",
            "upload-pack",
            "receive-pack",
            "config",
            "config-env",
            "template",
            "open-files-in-pager",
            "extcmd",
            "tool",
            "exec-path",
        ],
        with_value: "CnS",
    },
];

/// Whether `words` (a command's arguments) use one of `program`'s options
/// that write files or run programs. Programs without a table have none
/// known. `git`'s table is checked from its first word on, so it also
/// catches `-c` before a subcommand.
pub fn side_door(program: &str, words: &[&str]) -> bool {
    let Some(t) = SIDE_DOORS.iter().find(|t| t.name == program) else {
        return false;
    };
    for w in words {
        if *w == "--" {
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            // getopt takes `--outp` for `--output`; git's
            // `--output-directory` writes as `--output` does.
            if t.longs.iter().any(|l| {
                l.starts_with(name)
                    || name
                        .strip_prefix(l)
                        .is_some_and(|more| more.starts_with('-'))
            }) {
                return true;
            }
        } else if let Some(cluster) = w.strip_prefix('-') {
            for c in cluster.chars() {
                if t.shorts.contains(c) {
                    return true;
                }
                if t.with_value.contains(c) {
                    break;
                }
            }
        }
    }
    false
}

/// Whether `program` has a table of side doors, so an "always" rule for it
/// can be said to exclude them.
pub fn has_side_doors(program: &str) -> bool {
    SIDE_DOORS.iter().any(|t| t.name == program)
}

/// `uniq IN OUT` writes OUT: count the operands.
fn uniq_positionals(words: &[&str]) -> usize {
    let mut n = 0;
    let mut it = words.iter();
    let mut done = false;
    while let Some(w) = it.next() {
        if done || *w == "-" || !w.starts_with('-') {
            n += 1;
        } else if *w == "--" {
            done = true;
        } else if !w.starts_with("--") && w.len() == 2 && "fsw".contains(&w[1..]) {
            it.next();
        }
    }
    n
}

/// `git` in a listing form: global options limited to `-C DIR`,
/// `--no-pager`, `-P` and `--no-optional-locks`, then a subcommand that
/// only shows things, with no option that writes or runs.
fn git_reads(words: &[&str]) -> bool {
    if side_door("git", words) {
        return false;
    }
    let mut i = 0;
    while let Some(w) = words.get(i) {
        match *w {
            "-C" => i += 2,
            "--no-pager" | "-P" | "--no-optional-locks" => i += 1,
            _ => break,
        }
    }
    let Some((sub, rest)) = words.get(i..).and_then(|w| w.split_first()) else {
        return false;
    };
    match *sub {
        "status" | "log" | "diff" | "show" | "rev-parse" | "ls-files" | "blame" | "shortlog"
        | "describe" => true,
        "branch" => git_branch_lists(rest),
        "tag" => rest.is_empty() || matches!(rest[0], "-l" | "--list"),
        "remote" => rest.iter().all(|w| matches!(*w, "-v" | "--verbose")),
        "stash" => rest.first() == Some(&"list"),
        _ => false,
    }
}

/// `git branch` listing: only listing options, and names only where git
/// reads them as patterns or commits (`--list`, `--contains`…).
fn git_branch_lists(rest: &[&str]) -> bool {
    const LISTING: &[&str] = &[
        "-a",
        "-r",
        "-v",
        "-vv",
        "-l",
        "--all",
        "--remotes",
        "--verbose",
        "--list",
        "--show-current",
        "--no-color",
        "--color",
        "--no-column",
        "--ignore-case",
        "-i",
    ];
    const FILTERS: &[&str] = &[
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
    ];
    let mut list_mode = false;
    for w in rest {
        let name = w.split('=').next().unwrap_or(w);
        if matches!(*w, "-l" | "--list") || FILTERS.contains(&name) {
            list_mode = true;
        } else if !(LISTING.contains(w)
            || name == "--color"
            || name == "--sort"
            || name == "--format"
            || name == "--abbrev"
            || !w.starts_with('-'))
        {
            return false;
        }
    }
    list_mode || rest.iter().all(|w| w.starts_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_readers_in_reading_forms_are_read_only() {
        for command in [
            "ls",
            "ls -la src",
            "wc -l f",
            "cat README.md | head -20",
            "git status",
            "git status --porcelain",
            "git log --oneline -n 5",
            "git -C sub log -3",
            "git --no-pager diff HEAD~1",
            "git show HEAD:src/main.rs",
            "git branch",
            "git branch -a -v",
            "git branch --list 'feat*'",
            "git branch --contains HEAD",
            "git tag -l",
            "git remote -v",
            "git stash list",
            "grep -rn foo src",
            "rg -n 'fn main' src",
            "find . -name '*.rs' -type f",
            "find src -newer Cargo.toml -print",
            "pwd && ls",
            "cd src; ls -l",
            "du -sh . || df -h",
            "ps aux | grep buddy",
            "echo hello",
            "echo \"$HOME\"",
            "ls $HOME",
            "cat *.md",
            "sort -u names.txt | uniq -c",
            "sort -t, -k2 data.csv",
            "tree -L 2",
            "file Cargo.toml",
            "stat -c %s f",
            "which cargo",
            "ls 2>/dev/null",
            "ls >/dev/null 2>&1",
            "grep x f 2>&1 | head",
            "wc -l < input.txt",
            "cat <<'EOF'\nplain text\nEOF",
            "rg --pretty x",
            "(ls; pwd)",
            "{ ls; pwd; }",
            "'ls' -l",
        ] {
            assert!(is_read_only(command), "{command:?} should be read-only");
        }
    }

    #[test]
    fn writes_substitutions_and_side_doors_are_not_read_only() {
        for command in [
            "",
            // Loops and function definitions: not read-only, as before
            // the parser kept them apart.
            "for f in *.rs; do wc -l \"$f\"; done",
            "for f; do cat \"$f\"; done",
            "f() { ls; }",
            "$1",
            "\"$@\"",
            "ls > out",
            "ls >> out",
            "ls &> out",
            "ls 2> err.log",
            "ls >| out",
            "ls > $F",
            "cat f <> g",
            "{ ls; } > out",
            "echo $(rm x)",
            "echo `rm x`",
            "echo \"$(rm x)\"",
            "cat <(rm x)",
            "echo $((x=1))",
            "echo ${x:-$(rm y)}",
            "cat <<EOF\n$(rm x)\nEOF",
            "find . -delete",
            "find . -name x -exec rm {} \\;",
            "find . -execdir sh -c x \\;",
            "find . -ok rm {} \\;",
            "find . -fprint out",
            "find . -fls out",
            "find $DIR -name x",
            "find *",
            "git log --output=pwned.txt -n 1",
            "git log --outp=x",
            "git log --ext-diff",
            "git diff --textconv",
            "git -c core.pager=sh log",
            "git --exec-path=/tmp log",
            "git --git-dir=/x status",
            "git commit -m x",
            "git push",
            "git branch -D main",
            "git branch new-feature",
            "git branch -m a b",
            "git tag v1",
            "git remote add x y",
            "git stash",
            "git",
            "GIT_PAGER=sh git log",
            "FOO=1 ls",
            "x=1",
            "sort -o out f",
            "sort -ro out f",
            "sort --output=out f",
            "sort --compress-program=sh f",
            "uniq in out",
            "rg --pre ./x foo",
            "cat < /dev/tcp/example.org/80",
            "git format-patch --output-directory=x",
            "rg --hostname-bin=./x foo",
            "tree -o out",
            "file -C -m magic",
            "ls; rm x",
            "ls && rm x",
            "ls | sh",
            "ls | xargs rm",
            "ls &",
            "sed -i s/a/b/ f",
            "sed -n p f",
            "awk '{print}' f",
            "tee f",
            "xargs ls",
            "env",
            "printenv",
            "sudo ls",
            "./ls",
            "/tmp/ls",
            "$CMD",
            "f() { ls; }",
            "if ls; then rm x; fi",
            "less f",
            "cp a b",
            "rm x",
        ] {
            assert!(
                !is_read_only(command),
                "{command:?} should not be read-only"
            );
        }
    }

    #[test]
    fn side_doors_are_found_in_any_spelling_and_only_there() {
        assert!(side_door("git", &["log", "--output=x"]));
        assert!(side_door("git", &["log", "--output", "x"]));
        assert!(side_door("git", &["log", "--ext-diff"]));
        assert!(side_door("git", &["-c", "core.pager=x", "log"]));
        assert!(side_door("sort", &["-nro", "x"]));
        assert!(!side_door("sort", &["-to", "f"]));
        assert!(!side_door("git", &["log", "-n", "1"]));
        assert!(!side_door("git", &["log", "--", "--output=x"]));
        assert!(!side_door("cargo", &["--config", "x"]));
        assert!(has_side_doors("git") && !has_side_doors("cargo"));
    }

    #[test]
    fn what_the_parser_cannot_follow_is_not_read_only() {
        let deep = format!("{}ls{}", "(".repeat(100), ")".repeat(100));
        assert!(!is_read_only(&deep));
        assert!(is_read_only("((((ls))))"));
    }

    proptest::proptest! {
        /// A reader made to write, run something else or hide a command
        /// is never read-only, however it is combined.
        #[test]
        fn a_reader_that_writes_or_runs_more_is_not_read_only(
            reader in proptest::sample::select(vec![
                "ls -la", "git status", "cat f", "wc -l f", "grep -rn x src", "echo hi",
            ]),
            form in proptest::sample::select(vec![
                "@ > out", "@ >> out", "@ 2> err", "echo $(@)", "echo `@`", "@ &",
                "@ | sh", "@; rm x", "rm x && @", "x=$(@)", "FOO=1 @", "@ > $(f)",
                "cat <(@)", "( @ ) > out", "f() { @; }", "for i in a; do @; done",
                "@ $((x=1))", "sudo @",
            ]),
        ) {
            // `@` stands for the reader.
            let line = form.replace('@', reader);
            proptest::prop_assert!(is_read_only(reader));
            proptest::prop_assert!(!is_read_only(&line), "{}", line);
        }

        #[test]
        fn any_text_is_judged_without_a_panic(text in proptest::prelude::any::<String>()) {
            let _ = is_read_only(&text);
        }
    }
}
