//! Wrappers and shells: where the command a program runs starts in its
//! words (`sudo`, `env -S`, `timeout 5`, `xargs`, `su -c`, `ssh host …`)
//! and what a shell is asked to run (`-c` text and its `$0`…, a script,
//! its input). It only finds the command; `super` checks it.

use super::expand::{assignment, EWord};

pub(super) enum ShellMode {
    /// `-c` and its text (None when missing), then the words after it.
    Command(Option<EWord>, Vec<EWord>),
    /// Runs a script file (or `/dev/stdin`, or a process substitution).
    Script(EWord),
    /// Reads commands from its input.
    Stdin,
}

pub(super) fn shell_mode(args: &[EWord]) -> ShellMode {
    let mut command = false;
    let mut stdin = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let t = a.text.as_str();
        if t == "--" || t == "-" {
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            if matches!(long, "rcfile" | "init-file") {
                it.next();
            }
            continue;
        }
        if let Some(cluster) = t.strip_prefix('-').or_else(|| t.strip_prefix('+')) {
            if cluster.contains('c') {
                command = true;
            }
            if cluster.contains('s') {
                stdin = true;
            }
            if cluster.contains('o') || cluster.contains('O') {
                it.next();
            }
            continue;
        }
        return if command {
            ShellMode::Command(Some(a.clone()), it.cloned().collect())
        } else if stdin {
            ShellMode::Stdin
        } else {
            ShellMode::Script(a.clone())
        };
    }
    if command {
        let text = it.next().cloned();
        ShellMode::Command(text, it.cloned().collect())
    } else {
        ShellMode::Stdin
    }
}

pub(super) enum Unwrapped {
    /// Not a wrapper: judge the command itself.
    NotWrapper,
    /// The wrapped command starts at this index.
    Command(usize),
    /// The wrapper runs this text as a shell command (`su -c`, `ssh host cmd`).
    Script(EWord),
    /// `xargs`: the command starts here; its arguments come from the input.
    Xargs(usize),
    /// Runs nothing (`command -v rm`, `sudo -l`).
    NoCommand,
}

/// Skips a wrapper's options (and `skip` operands after them, such as
/// timeout's duration) and says where the wrapped command starts.
fn after_options(argv: &[EWord], with_value: &str, long_value: &[&str], skip: usize) -> usize {
    let mut i = 1;
    while i < argv.len() {
        let t = argv[i].text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            if !long.contains('=') && long_value.contains(&long) {
                i += 1;
            }
        } else {
            let cluster: Vec<char> = t[1..].chars().collect();
            if let Some(k) = cluster.iter().position(|c| with_value.contains(*c)) {
                if k + 1 == cluster.len() {
                    i += 1;
                }
            }
        }
        i += 1;
    }
    (i + skip).min(argv.len())
}

/// `-p`, `--pid`: ionice and taskset acting on a running process.
const PID: &[&str] = &["-p", "--pid"];

/// Whether one of `flags` is among a wrapper's own options, `argv[1..end]`
/// (the wrapped command starting at `end`), not the wrapped command's.
fn own(argv: &[EWord], end: usize, flags: &[&str]) -> bool {
    argv.get(1..end.min(argv.len()))
        .unwrap_or_default()
        .iter()
        .any(|a| flags.contains(&a.text.as_str()))
}

pub(super) fn unwrap(name: &str, argv: &[EWord]) -> Unwrapped {
    let cmd = |i: usize| {
        if i < argv.len() {
            Unwrapped::Command(i)
        } else {
            Unwrapped::NoCommand
        }
    };
    match name {
        "sudo" => {
            let i = after_options(
                argv,
                "ugCDhprtUTR",
                &[
                    "user",
                    "group",
                    "close-from",
                    "chdir",
                    "host",
                    "prompt",
                    "role",
                    "type",
                    "other-user",
                    "command-timeout",
                    "chroot",
                ],
                0,
            );
            // Only sudo's own options: `sudo sh -e -c …` runs a shell.
            if own(argv, i, &["-l", "--list", "-e", "--edit"]) {
                return Unwrapped::NoCommand;
            }
            cmd(i)
        }
        "doas" => cmd(after_options(argv, "uC", &[], 0)),
        "env" => {
            let i = after_options(argv, "uCSP", &["unset", "chdir", "split-string"], 0);
            // `env -S 'rm -rf /'` splits its argument into a command.
            if let Some(pos) = argv[1..i.min(argv.len())]
                .iter()
                .position(|a| a.text.starts_with("-S") || a.text.starts_with("--split-string"))
            {
                let a = &argv[pos + 1];
                let inline = a
                    .text
                    .strip_prefix("-S")
                    .filter(|s| !s.is_empty())
                    .or_else(|| a.text.strip_prefix("--split-string="));
                let text = inline
                    .map(str::to_string)
                    .or_else(|| argv.get(pos + 2).map(|w| w.text.clone()))
                    .unwrap_or_default();
                let rest: Vec<&str> = argv[i..].iter().map(|w| w.text.as_str()).collect();
                return Unwrapped::Script(EWord {
                    text: format!("{text} {}", rest.join(" ")),
                    decoded: a.decoded,
                    ..EWord::default()
                });
            }
            let n = argv[i..]
                .iter()
                .take_while(|w| assignment(w).is_some())
                .count();
            cmd(i + n)
        }
        "nice" => cmd(after_options(argv, "n", &["adjustment"], 0)),
        _ => unwrap_more(name, argv),
    }
}

fn unwrap_rest(name: &str, argv: &[EWord]) -> Unwrapped {
    let cmd = |i: usize| {
        if i < argv.len() {
            Unwrapped::Command(i)
        } else {
            Unwrapped::NoCommand
        }
    };
    match name {
        "ionice"
            if own(
                argv,
                after_options(argv, "cn", &["class", "classdata"], 0),
                PID,
            ) =>
        {
            Unwrapped::NoCommand
        }
        "taskset" if own(argv, after_options(argv, "", &[], 0), PID) => Unwrapped::NoCommand,
        "faketime" | "chroot" | "taskset" | "chrt" => {
            cmd(after_options(argv, "TPD", &["userspec", "groups"], 1))
        }
        _ => match WRAPPERS.iter().find(|w| w.0 == name) {
            Some((_, short, long)) => cmd(after_options(argv, short, long, 0)),
            None => Unwrapped::NotWrapper,
        },
    }
}

/// Programs that run their arguments as a command, with the options of
/// theirs that take a value (short letters, long names).
const WRAPPERS: &[(&str, &str, &[&str])] = &[
    ("nohup", "", &[]),
    ("setsid", "", &[]),
    ("builtin", "", &[]),
    ("time", "fo", &["format", "output"]),
    ("stdbuf", "ioe", &["input", "output", "error"]),
    ("ionice", "cn", &["class", "classdata"]),
    ("exec", "a", &[]),
    ("strace", "aeEIoOpPsSuUX", &["output", "user"]),
    ("ltrace", "aeEnopsuADS", &["output"]),
    ("unbuffer", "", &[]),
    ("pkexec", "", &["user"]),
    ("torsocks", "uapP", &[]),
    ("proxychains", "f", &[]),
    ("proxychains4", "f", &[]),
    ("fakeroot", "lsi", &[]),
    ("chronic", "", &[]),
];

fn unwrap_more(name: &str, argv: &[EWord]) -> Unwrapped {
    let cmd = |i: usize| {
        if i < argv.len() {
            Unwrapped::Command(i)
        } else {
            Unwrapped::NoCommand
        }
    };
    match name {
        "command" => {
            let i = after_options(argv, "", &[], 0);
            // `command rm -v …` runs rm; `command -v rm` only looks it up.
            if own(argv, i, &["-v", "-V"]) {
                return Unwrapped::NoCommand;
            }
            cmd(i)
        }
        "timeout" => cmd(after_options(argv, "sk", &["signal", "kill-after"], 1)),
        "flock" => {
            // `flock [options] FILE -c TEXT` or `flock [options] FILE CMD…`:
            // a `-c` further on is the command's own (`chmod -c`).
            let file = after_options(argv, "wEn", &["timeout", "conflict-exit-code"], 0);
            let at = argv[1..file.min(argv.len())]
                .iter()
                .position(|a| a.text == "-c" || a.text == "--command")
                .map(|p| p + 1)
                .or_else(|| {
                    argv.get(file + 1)
                        .filter(|a| a.text == "-c" || a.text == "--command")
                        .map(|_| file + 1)
                });
            if let Some(p) = at {
                return argv
                    .get(p + 1)
                    .cloned()
                    .map_or(Unwrapped::NoCommand, Unwrapped::Script);
            }
            cmd((file + 1).min(argv.len()))
        }
        "busybox" => cmd(1),
        "xargs" => Unwrapped::Xargs(after_options(
            argv,
            "adEILnPs",
            &[
                "arg-file",
                "delimiter",
                "eof",
                "replace",
                "max-lines",
                "max-args",
                "max-procs",
                "max-chars",
                "process-slot-var",
            ],
            0,
        )),
        "su" | "runuser" => {
            let mut it = argv.iter().skip(1);
            while let Some(a) = it.next() {
                if a.text == "-c" || a.text == "--command" {
                    return it
                        .next()
                        .cloned()
                        .map_or(Unwrapped::NoCommand, Unwrapped::Script);
                }
                if let Some(t) = a.text.strip_prefix("--command=") {
                    return Unwrapped::Script(EWord {
                        text: t.into(),
                        ..a.clone()
                    });
                }
            }
            // `su` alone opens a shell reading the terminal: nothing to see.
            Unwrapped::NoCommand
        }
        "watch" => {
            let i = after_options(argv, "nqd", &["interval", "differences"], 0);
            joined_script(&argv[i..])
        }
        "ssh" => {
            let mut i = after_options(argv, "BbcDEeFIiJLlmOopQRSWw", &[], 0);
            // The host, then the remote command as one shell string.
            i += 1;
            joined_script(&argv[i.min(argv.len())..])
        }
        _ => unwrap_rest(name, argv),
    }
}

/// Words that a program joins with spaces and hands to a shell.
fn joined_script(words: &[EWord]) -> Unwrapped {
    if words.is_empty() {
        return Unwrapped::NoCommand;
    }
    Unwrapped::Script(EWord {
        text: words
            .iter()
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        decoded: words.iter().any(|w| w.decoded),
        ..EWord::default()
    })
}
