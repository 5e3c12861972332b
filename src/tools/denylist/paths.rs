//! Which paths the rules guard: `/`, a home, a top-level system directory
//! or everything in one (globs included), after `.`, `..` and repeated
//! slashes are resolved by text; and which device names are whole disks or
//! partitions.

use super::expand::{NON_EMPTY, UNKNOWN};

const SYSTEM_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt",
    "proc", "root", "run", "sbin", "snap", "srv", "sys", "usr", "var",
];

const USR_DIRS: &[&str] = &[
    "bin", "lib", "lib32", "lib64", "libexec", "sbin", "share", "include", "local",
];

/// Whether a path, once normalised, is `/`, `/*`, a top-level system
/// directory (or everything in one), or a home directory. An unknown
/// expansion at the start counts as empty, as it would be when the variable
/// is unset (`"$DIR"/*`); further on it counts as some name
/// (`/home/$USER` is one user's home, not `/home`).
pub(super) fn dangerous_target(text: &str) -> bool {
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
pub(super) fn norm_path(p: &str) -> String {
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
pub(super) fn is_block_device(path: &str) -> bool {
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
