//! buddy's own files, which no tool may write: the config files it loaded or
//! would load, the login store, the trust list, the session directory. A
//! model that could rewrite them could turn approvals off for the next run or
//! point a profile (and the user's key) somewhere else. Paths are compared
//! after resolving them the way the file system would (symlinks followed,
//! `.` and `..` applied), and an existing file is also recognised by its
//! inode, so a hard link or another spelling of the path does not get past.
//!
//! A shell command can still touch these files; shell commands are covered
//! by the approval policy, not by this list.

use std::path::{Component, Path, PathBuf};

/// The list as given; each path is resolved when a write is checked, not
/// when the list is made. That costs a plain `exec`, which writes nothing,
/// none of the ~90 system calls resolution takes, and a check follows the
/// file system as it is at the moment of the write (a directory swapped
/// for a symlink since start-up is seen).
#[derive(Debug, Clone, Default)]
pub struct Protected {
    /// (what it is, path): single files.
    files: Vec<(String, PathBuf)>,
    /// (what it is, path): everything inside, and the path itself.
    dirs: Vec<(String, PathBuf)>,
}

impl Protected {
    pub fn new() -> Protected {
        Protected::default()
    }

    /// Protects one file; `what` names it in the refusal ("config file").
    pub fn file(mut self, what: &str, path: &Path) -> Protected {
        self.files.push((what.to_string(), path.to_path_buf()));
        self
    }

    /// Protects a directory and everything under it.
    pub fn dir(mut self, what: &str, path: &Path) -> Protected {
        self.dirs.push((what.to_string(), path.to_path_buf()));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dirs.is_empty()
    }

    /// What of buddy's lies inside `dir` (or is `dir`), if anything: a
    /// directory given as a workspace must not hold its own config.
    pub fn inside(&self, dir: &Path) -> Option<&str> {
        let dir = resolve(dir);
        self.files
            .iter()
            .chain(&self.dirs)
            .find(|(_, p)| resolve(p).starts_with(&dir))
            .map(|(what, _)| what.as_str())
    }

    /// What `path` (absolute, on this host) is of buddy's, if anything.
    pub fn check(&self, path: &Path) -> Option<&str> {
        let real = resolve(path);
        for (what, p) in &self.files {
            let p = resolve(p);
            if real == p || same_inode(&real, &p) {
                return Some(what);
            }
        }
        self.dirs
            .iter()
            .find(|(_, d)| real.starts_with(resolve(d)))
            .map(|(what, _)| what.as_str())
    }
}

#[cfg(unix)]
fn same_inode(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_inode(_: &Path, _: &Path) -> bool {
    false
}

/// `path` as the file system would resolve it: the longest part that exists
/// canonicalised (symlinks followed), the rest, which cannot hold symlinks,
/// applied by hand. A relative path is taken from the working directory.
pub fn resolve(path: &Path) -> PathBuf {
    let path = if path.is_relative() {
        crate::process::facts().cwd().join(path)
    } else {
        path.to_path_buf()
    };
    let parts: Vec<Component<'_>> = path.components().collect();
    for k in (0..=parts.len()).rev() {
        let prefix: PathBuf = parts[..k].iter().collect();
        let base = if prefix.as_os_str().is_empty() {
            Ok(PathBuf::from("/"))
        } else if std::fs::metadata(&prefix).is_err() {
            // One stat per missing level: canonicalising each shorter
            // prefix in turn read every link of every level again.
            continue;
        } else {
            std::fs::canonicalize(&prefix)
        };
        if let Ok(mut base) = base {
            for c in &parts[k..] {
                match c {
                    Component::ParentDir => {
                        base.pop();
                    }
                    Component::Normal(x) => base.push(x),
                    Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                }
            }
            return base;
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("buddy-protect-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(&d).unwrap()
    }

    #[test]
    fn other_spellings_links_and_missing_files_are_recognised() {
        let d = tempdir("paths");
        std::fs::create_dir_all(d.join("proj/sub")).unwrap();
        std::fs::create_dir_all(d.join("home/.config/buddy")).unwrap();
        let p = Protected::new()
            .file("config file", &d.join("proj/buddy.toml"))
            .dir("config directory", &d.join("home/.config/buddy"))
            .dir("session directory", &d.join("proj/.buddyx"));
        // Not there yet: still protected, however spelled.
        assert_eq!(p.check(&d.join("proj/buddy.toml")), Some("config file"));
        assert_eq!(
            p.check(&d.join("proj/sub/../buddy.toml")),
            Some("config file")
        );
        assert_eq!(
            p.check(&d.join("proj/./sub/../buddy.toml")),
            Some("config file")
        );
        assert_eq!(
            p.check(&d.join("proj/nope/../buddy.toml")),
            Some("config file")
        );
        assert_eq!(
            p.check(&d.join("proj/.buddyx/sessions/x.jsonl")),
            Some("session directory")
        );
        assert_eq!(p.check(&d.join("proj/.buddyx")), Some("session directory"));
        assert_eq!(p.check(&d.join("proj/other.toml")), None);
        assert_eq!(p.check(&d.join("proj/.buddyxy")), None);
        // A symlinked directory leading into a protected one.
        std::os::unix::fs::symlink(d.join("home/.config"), d.join("proj/cfg")).unwrap();
        assert_eq!(
            p.check(&d.join("proj/cfg/buddy/auth.json")),
            Some("config directory")
        );
        // A symlink to the file, and a hard link to it once it exists.
        std::os::unix::fs::symlink(d.join("proj/buddy.toml"), d.join("proj/link.toml")).unwrap();
        std::fs::write(d.join("proj/buddy.toml"), "x").unwrap();
        assert_eq!(p.check(&d.join("proj/link.toml")), Some("config file"));
        std::fs::hard_link(d.join("proj/buddy.toml"), d.join("proj/hard.toml")).unwrap();
        assert_eq!(p.check(&d.join("proj/hard.toml")), Some("config file"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_after_the_list_was_made_is_followed() {
        let d = tempdir("swap");
        std::fs::create_dir_all(d.join("home/.config/buddy")).unwrap();
        std::fs::create_dir_all(d.join("elsewhere")).unwrap();
        let p = Protected::new().dir("config directory", &d.join("home/.config/buddy"));
        // buddy would now load its config from `elsewhere`: so that is what
        // a write must not reach.
        std::fs::remove_dir_all(d.join("home/.config/buddy")).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), d.join("home/.config/buddy")).unwrap();
        assert_eq!(
            p.check(&d.join("elsewhere/buddy.toml")),
            Some("config directory")
        );
        assert_eq!(p.check(&d.join("other/buddy.toml")), None);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
