//! Project instructions: `AGENTS.md` files from the repository root down to
//! the working directory, added to the system prompt so the model follows a
//! project's own conventions. Outside a repository only the working
//! directory's own file counts, so a stray file in `/home` or `/` is not
//! picked up by every project below it. An instruction file must be a
//! regular file inside the repository (or the directory): a symlink out of
//! it — to `~/.ssh/id_ed25519` or buddy's `auth.json`, say — would send that
//! file to the model server with no tool call and no approval, so it is
//! skipped with a warning.

use std::io::Read;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "AGENTS.md";
/// All instruction files together; more is cut with a note.
const MAX_BYTES: u64 = 64 * 1024;

pub struct ProjectInstructions {
    /// The files used, outermost first.
    pub files: Vec<PathBuf>,
    /// Their text, each under a heading naming its file.
    pub text: String,
    /// One line per instruction file left out, and why.
    pub skipped: Vec<String>,
}

pub fn find(cwd: &Path) -> Option<ProjectInstructions> {
    let mut dirs = Vec::new();
    let mut at = Some(cwd);
    while let Some(dir) = at {
        dirs.push(dir.to_path_buf());
        if dir.join(".git").exists() {
            break;
        }
        at = dir.parent();
    }
    // No repository above: only the working directory itself.
    if !dirs.last().is_some_and(|d| d.join(".git").exists()) {
        dirs.truncate(1);
    }
    dirs.reverse();
    // Where instruction files may live: the repository (or the directory).
    let root = dirs.first().and_then(|d| std::fs::canonicalize(d).ok());
    let mut files = Vec::new();
    let mut text = String::new();
    let mut skipped = Vec::new();
    let mut budget = MAX_BYTES;
    for dir in dirs {
        let path = dir.join(FILE_NAME);
        if let Err(why) = inside(&path, root.as_deref()) {
            if let Some(why) = why {
                skipped.push(format!("skipped {}: {why}", path.display()));
            }
            continue;
        }
        let Some(body) = read_bounded(&path, budget) else {
            continue;
        };
        budget = budget.saturating_sub(body.len() as u64);
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("From {}:\n{}", path.display(), body.trim_end()));
        files.push(path);
        if budget == 0 {
            text.push_str("\n[project instructions cut at 64 KiB]");
            break;
        }
    }
    (!files.is_empty() || !skipped.is_empty()).then_some(ProjectInstructions {
        files,
        text,
        skipped,
    })
}

/// Whether `path` may be read as instructions: `Ok` for a regular file, or a
/// symlink to one, under `root`; `Err(None)` when there is no such file;
/// `Err(Some(why))` when there is one that must not be read.
fn inside(path: &Path, root: Option<&Path>) -> Result<(), Option<String>> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Err(None);
    };
    if meta.is_file() {
        return Ok(());
    }
    if !meta.file_type().is_symlink() {
        return Err(Some("it is not a regular file".into()));
    }
    let Ok(target) = std::fs::canonicalize(path) else {
        return Err(Some("it is a symlink whose target cannot be found".into()));
    };
    if !root.is_some_and(|r| target.starts_with(r)) {
        return Err(Some(
            "it is a symlink to a file outside the repository; project instructions must live in it"
                .into(),
        ));
    }
    match std::fs::metadata(&target) {
        Ok(m) if m.is_file() => Ok(()),
        _ => Err(Some(
            "it is a symlink to something other than a regular file".into(),
        )),
    }
}

/// A regular file's text, at most `max` bytes (cut at a character boundary).
fn read_bounded(path: &Path, max: u64) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(max)
        .read_to_end(&mut bytes)
        .ok()?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut b = e.into_bytes();
            b.truncate(valid);
            String::from_utf8(b).ok()?
        }
    };
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "buddy-agents-{label}-{}-{}",
            std::process::id(),
            crate::clock::now_unix_ms()
        ));
        std::fs::create_dir_all(&d).expect("tmp dir");
        d
    }

    #[test]
    fn a_symlink_out_of_the_repository_is_skipped_with_a_reason() {
        let root = tmp("symlink");
        let outside = tmp("secret");
        std::fs::write(outside.join("id_ed25519"), "PRIVATE KEY").expect("write");
        std::fs::create_dir_all(root.join(".git")).expect("git");
        std::os::unix::fs::symlink(outside.join("id_ed25519"), root.join(FILE_NAME))
            .expect("symlink");
        let found = find(&root).expect("a skipped file is reported");
        assert!(found.files.is_empty());
        assert!(!found.text.contains("PRIVATE KEY"));
        assert_eq!(found.skipped.len(), 1);
        assert!(
            found.skipped[0].contains("outside the repository"),
            "{:?}",
            found.skipped
        );
        // A symlink to a file inside the repository is fine.
        std::fs::remove_file(root.join(FILE_NAME)).expect("rm");
        std::fs::write(root.join("RULES.md"), "inner rules").expect("write");
        std::os::unix::fs::symlink(root.join("RULES.md"), root.join(FILE_NAME)).expect("symlink");
        let found = find(&root).expect("found");
        assert!(found.text.contains("inner rules"));
        assert!(found.skipped.is_empty());
        std::fs::remove_dir_all(root).ok();
        std::fs::remove_dir_all(outside).ok();
    }

    #[test]
    fn files_from_the_repository_root_down_to_the_working_directory() {
        let root = tmp("repo");
        std::fs::create_dir_all(root.join(".git")).expect("git");
        std::fs::create_dir_all(root.join("a/b")).expect("dirs");
        std::fs::write(root.join(FILE_NAME), "root rules").expect("write");
        std::fs::write(root.join("a/b").join(FILE_NAME), "inner rules").expect("write");
        let found = find(&root.join("a/b")).expect("found");
        assert_eq!(found.files.len(), 2);
        let (outer, inner) = (
            found.text.find("root rules").expect("root"),
            found.text.find("inner rules").expect("inner"),
        );
        assert!(outer < inner, "{}", found.text);
        std::fs::remove_dir_all(root).ok();
    }

    #[test]
    fn outside_a_repository_only_the_working_directory_counts() {
        let top = tmp("norepo");
        std::fs::create_dir_all(top.join("sub")).expect("dirs");
        std::fs::write(top.join(FILE_NAME), "parent rules").expect("write");
        assert!(find(&top.join("sub")).is_none());
        std::fs::write(top.join("sub").join(FILE_NAME), "own rules").expect("write");
        let found = find(&top.join("sub")).expect("found");
        assert!(found.text.contains("own rules") && !found.text.contains("parent rules"));
        std::fs::remove_dir_all(top).ok();
    }

    #[test]
    fn a_huge_or_odd_file_is_bounded_or_skipped() {
        let d = tmp("huge");
        std::fs::write(d.join(FILE_NAME), "x".repeat(200 * 1024)).expect("write");
        let found = find(&d).expect("found");
        assert!(found.text.len() < 70 * 1024);
        assert!(found.text.ends_with("cut at 64 KiB]"));
        std::fs::remove_file(d.join(FILE_NAME)).expect("rm");
        std::fs::create_dir(d.join(FILE_NAME)).expect("dir named like the file");
        // Not read, and said so.
        let found = find(&d).expect("reported");
        assert!(found.files.is_empty());
        assert_eq!(found.skipped.len(), 1);
        assert!(found.skipped[0].contains("not a regular file"));
        std::fs::remove_dir_all(d).ok();
    }
}
