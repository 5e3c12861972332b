//! The built-in rules for one command, its words expanded and its wrappers
//! removed: recursive removal and chmod of `/`, a home or a system
//! directory, `find … -delete`/`-exec`, filesystems and partitions, writes
//! to block devices, decoded text run as commands, `eval` and shells given
//! text (checked as scripts), and what `echo`/`printf`/`cat` print for a
//! later stage. `deleters.rs` has `git clean` and `rsync --delete`.

use super::expand::EWord;
use super::opts::Opts;
use super::paths::{dangerous_target, is_block_device, norm_path};
use super::walk::{fed_text, is_stdin_path};
use super::wrappers::{shell_mode, ShellMode};
use super::{
    deleters, Check, Checker, Ctx, Hit, Summary, BLOCK_WRITE, CHMOD_ROOT, DECODE_EXEC, FORK_BOMB,
    MKFS, NO_PRESERVE_ROOT, PARTITION, RM_ROOT, UNKNOWN_CMD, WIPEFS,
};

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash", "rbash", "fish", "csh",
    "tcsh",
];

impl Checker<'_> {
    /// The built-in rules for one command, `argv[0]` being `name`.
    pub(super) fn rules(&mut self, name: &str, argv: &[EWord], ctx: &Ctx) -> Check {
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
