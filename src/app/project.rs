//! Project instructions: `AGENTS.md` files from the repository root down to
//! the working directory, added to the system prompt so the model follows a
//! project's own conventions. Outside a repository only the working
//! directory's own file counts, so a stray file in `/home` or `/` is not
//! picked up by every project below it.

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
    let mut files = Vec::new();
    let mut text = String::new();
    let mut budget = MAX_BYTES;
    for dir in dirs {
        let path = dir.join(FILE_NAME);
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
    (!files.is_empty()).then_some(ProjectInstructions { files, text })
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
        assert!(find(&d).is_none());
        std::fs::remove_dir_all(d).ok();
    }
}
