//! Rules for programs whose ordinary work includes deleting a tree: `git
//! clean` with force and `rsync` with `--delete` or
//! `--remove-source-files`. They are refused only where the tree is `/`, a
//! home or a system directory (or, for `git clean`, outside the working
//! tree); the rest of the denylist (`super`) finds the commands and the
//! words, and owns what "dangerous" means (`dangerous_target`).

use super::expand::EWord;
use super::opts::Opts;
use super::paths::{dangerous_target, norm_path};
use super::{Hit, GIT_CLEAN, RSYNC_DELETE};

/// git's own options before the subcommand that take a value.
const GIT_VALUE_OPTS: &[&str] = &["-C", "-c", "--git-dir", "--work-tree", "--namespace"];

/// `git clean -f…` of `/`, `~`, a system directory, a path that climbs out
/// of the working tree (`../x`), or in a tree (`-C`, `--work-tree`) that is
/// one of those. A dry run (`-n`) or no force deletes nothing.
pub(super) fn git_rule(args: &[EWord]) -> Result<(), Hit> {
    let mut trees: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        if !t.starts_with('-') {
            break;
        }
        if let Some(v) = t.strip_prefix("--work-tree=") {
            trees.push(v.to_string());
        } else if GIT_VALUE_OPTS.contains(&t) {
            if matches!(t, "-C" | "--work-tree") {
                if let Some(v) = args.get(i + 1) {
                    trees.push(v.text.clone());
                }
            }
            i += 1;
        }
        i += 1;
    }
    if args.get(i).map(|w| w.text.as_str()) != Some("clean") {
        return Ok(());
    }
    let opts = Opts::parse(&args[i + 1..], "e", &["exclude"]);
    let force = opts.has_short('f') || opts.has_long("force", 3);
    let dry = opts.has_short('n') || opts.has_long("dry-run", 3);
    if !force || dry {
        return Ok(());
    }
    if let Some(t) = trees.iter().find(|t| dangerous_target(t)) {
        return Err(Hit::Rule(GIT_CLEAN, format!("git -C {t} clean")));
    }
    let outside = |p: &str| {
        let n = norm_path(p);
        n == ".." || n.starts_with("../")
    };
    if let Some(p) = opts
        .positional
        .iter()
        .find(|p| dangerous_target(&p.text) || outside(&p.text))
    {
        return Err(Hit::Rule(GIT_CLEAN, format!("git clean {}", p.text)));
    }
    Ok(())
}

/// rsync's options that take a value as the next word.
const RSYNC_SHORT_VALUES: &str = "eBfTM";
const RSYNC_LONG_VALUES: &[&str] = &[
    "rsh",
    "rsync-path",
    "filter",
    "exclude",
    "exclude-from",
    "include",
    "include-from",
    "files-from",
    "partial-dir",
    "temp-dir",
    "compare-dest",
    "copy-dest",
    "link-dest",
    "backup-dir",
    "suffix",
    "chmod",
    "chown",
    "usermap",
    "groupmap",
    "log-file",
    "log-file-format",
    "password-file",
    "max-size",
    "min-size",
    "max-delete",
    "timeout",
    "contimeout",
    "port",
    "out-format",
    "bwlimit",
    "block-size",
    "remote-option",
];

/// `rsync --delete… SRC… DEST` with DEST `/`, `~` or a system directory
/// (what `--delete` empties is the destination), and `rsync
/// --remove-source-files` with such a source (what it empties is the source).
pub(super) fn rsync_rule(args: &[EWord]) -> Result<(), Hit> {
    let opts = Opts::parse(args, RSYNC_SHORT_VALUES, RSYNC_LONG_VALUES);
    let names = || opts.longs.iter().map(|l| l.split('=').next().unwrap_or(l));
    // `--del`, `--delete`, `--delete-after`, `--delete-excluded`… (not
    // `--delay-updates`).
    let deletes = names().any(|l| l == "del" || l.starts_with("delete"));
    let removes_sources = names().any(|l| l.starts_with("remove-s"));
    let Some((dest, sources)) = opts.positional.split_last() else {
        return Ok(());
    };
    if sources.is_empty() {
        // One operand only lists it.
        return Ok(());
    }
    if deletes && dangerous_target(local_path(&dest.text)) {
        return Err(Hit::Rule(
            RSYNC_DELETE,
            format!("rsync --delete … {}", dest.text),
        ));
    }
    if removes_sources {
        if let Some(s) = sources
            .iter()
            .find(|s| dangerous_target(local_path(&s.text)))
        {
            return Err(Hit::Rule(
                RSYNC_DELETE,
                format!("rsync --remove-source-files {} …", s.text),
            ));
        }
    }
    Ok(())
}

/// The path part of `host:path` (another machine's `/` is no less a root);
/// a daemon's `host::module` or `rsync://` URL names no path we can judge.
fn local_path(s: &str) -> &str {
    if s.contains("::") || s.starts_with("rsync://") {
        return "";
    }
    match s.split_once(':') {
        Some((host, path)) if !host.contains('/') => path,
        _ => s,
    }
}
