//! Replacing a local file's content atomically, the one way every writer of
//! whole files does it (config and trust files, the login store, session
//! images, checkpoints written back, the file tools, the REPL history): the
//! bytes go to a temporary file beside the target, created with its final
//! permissions, synced, renamed over the target, and the directory synced
//! so the new name survives a power cut. A crash at any moment leaves the
//! old content or the new, never half of either.
//!
//! Not here: appending (the session journal, the checkpoint store keep
//! their own files open), files on a remote target (the tools' door streams
//! those through a script), and any check of what the path is (a symlink is
//! replaced itself: callers that mean the file behind it resolve it first).
//! Depends on nothing of ours.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The permissions of the replaced file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Exactly these bits (less the umask), whatever the file had before,
    /// from the moment the temporary file exists: 0o600 keeps credentials
    /// and sessions the user's alone at every instant.
    Fixed(u32),
    /// The mode of the file being replaced; for a new file, `new` less the
    /// umask (0o666 makes what any editor would make).
    Keep { new: u32 },
}

/// Owner read and write only: credentials, sessions, settings.
pub const PRIVATE: Mode = Mode::Fixed(0o600);

/// Replaces `path` with `bytes`, creating missing parent directories.
pub fn replace(path: &Path, bytes: &[u8], mode: Mode) -> io::Result<()> {
    replace_with(path, bytes, mode, sync_dir)
}

/// `replace` with the directory sync handed in, so a test can see it
/// happen on the right directory after the rename.
fn replace_with(
    path: &Path,
    bytes: &[u8],
    mode: Mode,
    sync_dir: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    let dir = parent_of(path);
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} has no file name", path.display()),
        )
    })?;
    let existing = match mode {
        Mode::Fixed(_) => None,
        Mode::Keep { .. } => std::fs::metadata(path).ok().map(|m| m.permissions()),
    };
    let create_mode = match (mode, &existing) {
        (Mode::Fixed(bits), _) => bits,
        // Never wider than the file it replaces, even for an instant.
        (Mode::Keep { .. }, Some(p)) => p.mode() & 0o777,
        (Mode::Keep { new }, None) => new,
    };
    let (tmp, mut file) = create_temp(dir, &name.to_string_lossy(), create_mode)?;
    let written = (|| {
        file.write_all(bytes)?;
        if let Some(perms) = existing {
            // The exact bits back, those the umask took at creation too.
            file.set_permissions(perms)?;
        }
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)
}

/// The directory a path's file lives in ("." for a bare name).
fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Distinguishes the temporary files of concurrent writes of this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// How many taken temporary names are skipped before giving up.
const TEMP_ATTEMPTS: u32 = 16;

/// A new temporary file in `dir` for `name`, created with `mode` (less
/// the umask). Its name starts with a dot, so listings of kept files
/// (session images) pass over a leftover. `create_new` refuses whatever
/// already sits at the name, a symlink included; a name left by an
/// earlier process with the same id is skipped, never removed.
fn create_temp(dir: &Path, name: &str, mode: u32) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..TEMP_ATTEMPTS {
        let tmp = dir.join(format!(
            ".{name}.buddy-tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// Makes the rename durable. A filesystem that cannot sync a directory
/// (EINVAL) has nothing more to give, and the content is already safe.
fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir)?.sync_all() {
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;
    use std::io::Read;

    fn tempdir(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("buddy-atomic-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn content_is_replaced_whole_under_a_new_inode() {
        let d = tempdir("replace");
        let path = d.join("a.txt");
        std::fs::write(&path, "old content\n").unwrap();
        // A reader that opened the file before keeps seeing the old content
        // whole: the new one arrives by rename, never by rewriting in place.
        let mut reader = File::open(&path).unwrap();
        replace(&path, b"new\n", Mode::Keep { new: 0o666 }).unwrap();
        let mut seen = String::new();
        reader.read_to_string(&mut seen).unwrap();
        assert_eq!(seen, "old content\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(names(&d), ["a.txt"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_fixed_mode_is_honoured_on_create_and_over_a_looser_file() {
        let d = tempdir("fixed");
        let new = d.join("sub/auth.json");
        replace(&new, b"{}", PRIVATE).unwrap();
        assert_eq!(mode_of(&new), 0o600);
        let loose = d.join("loose");
        std::fs::write(&loose, "x").unwrap();
        std::fs::set_permissions(&loose, Permissions::from_mode(0o644)).unwrap();
        replace(&loose, b"y", PRIVATE).unwrap();
        assert_eq!(mode_of(&loose), 0o600);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_temporary_file_is_private_from_its_creation() {
        let d = tempdir("temp-mode");
        let (tmp, _file) = create_temp(&d, "auth.json", 0o600).unwrap();
        // Nothing written yet: the mode is the one it was created with.
        assert_eq!(mode_of(&tmp), 0o600);
        assert!(tmp
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(".auth.json.buddy-tmp-"));
        // A leftover at the next name is skipped, not opened or removed.
        let next = TEMP_COUNTER.load(Ordering::Relaxed);
        let taken = d.join(format!(".x.buddy-tmp-{}-{next}", std::process::id()));
        std::fs::write(&taken, "someone else's").unwrap();
        let (other, _f) = create_temp(&d, "x", 0o600).unwrap();
        assert_ne!(other, taken);
        assert_eq!(std::fs::read_to_string(&taken).unwrap(), "someone else's");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn keep_takes_the_old_files_mode_or_the_default_for_a_new_one() {
        let d = tempdir("keep");
        let script = d.join("run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, Permissions::from_mode(0o751)).unwrap();
        replace(&script, b"new", Mode::Keep { new: 0o666 }).unwrap();
        assert_eq!(mode_of(&script), 0o751);
        // A new file gets what any program creating it would: 0o666 less
        // the umask, as File::create makes it.
        let reference = d.join("reference");
        File::create(&reference).unwrap();
        let fresh = d.join("fresh");
        replace(&fresh, b"x", Mode::Keep { new: 0o666 }).unwrap();
        assert_eq!(mode_of(&fresh), mode_of(&reference));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file_and_the_target_as_it_was() {
        let d = tempdir("fail");
        // The rename onto a non-empty directory fails after the temporary
        // file was written and synced.
        let target = d.join("busy");
        std::fs::create_dir_all(target.join("inside")).unwrap();
        let e = replace(&target, b"data", Mode::Keep { new: 0o666 }).unwrap_err();
        assert_ne!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert_eq!(names(&d), ["busy"]);
        assert_eq!(names(&target), ["inside"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_parent_directory_is_synced_after_the_rename() {
        let d = tempdir("dirsync");
        let path = d.join("deep/er/file");
        let mut synced = None;
        replace_with(&path, b"content", PRIVATE, |dir| {
            // The new name is already in place when the directory is synced.
            synced = Some((dir.to_path_buf(), std::fs::read_to_string(&path).unwrap()));
            sync_dir(dir)
        })
        .unwrap();
        assert_eq!(synced, Some((d.join("deep/er"), "content".to_string())));
        // A failing directory sync is the caller's to hear about.
        let e = replace_with(&path, b"again", PRIVATE, |_| {
            Err(io::Error::other("disk gone"))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "disk gone");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_directory_of_a_bare_name_is_the_current_one() {
        assert_eq!(parent_of(Path::new("file")), Path::new("."));
        assert_eq!(parent_of(Path::new("/file")), Path::new("/"));
        assert_eq!(parent_of(Path::new("a/b")), Path::new("a"));
    }
}
