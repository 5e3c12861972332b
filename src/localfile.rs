//! Reading local files buddy expects to be regular files of a sane size
//! (config, key files, session journals, `read_file`). A FIFO, a device or a
//! huge file named by mistake must give one clear error, never a read that
//! blocks forever or fills memory: the file's type is checked before it is
//! opened (opening a FIFO for reading blocks until a writer comes) and again
//! on the open descriptor, and every read stops one byte past its limit.

use std::fs::{File, FileType, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not a regular file; `kind` says what it is ("a FIFO", "a directory"…).
    #[error("it is {kind}, not a regular file")]
    NotRegular { kind: &'static str },
    /// Longer than `limit` bytes.
    #[error("it is larger than {}", size(*.limit))]
    TooBig { limit: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl ReadError {
    /// True when the path does not exist (callers that search a path list skip those).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

/// `n` bytes as a short human figure ("1 MiB", "300 KiB", "12 bytes").
pub fn size(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// What a file type is, in words, for errors.
pub fn kind_of(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Ok for a regular file (symbolic links followed by `metadata`).
pub fn check_regular(meta: &Metadata) -> Result<(), ReadError> {
    if meta.is_file() {
        Ok(())
    } else {
        Err(ReadError::NotRegular {
            kind: kind_of(meta.file_type()),
        })
    }
}

/// Checks `path` is a regular file, then opens it with `open` and checks the
/// descriptor again (the path may have changed in between).
pub fn open_regular(
    path: &Path,
    open: impl FnOnce(&Path) -> io::Result<File>,
) -> Result<File, ReadError> {
    check_regular(&std::fs::metadata(path)?)?;
    let file = open(path)?;
    check_regular(&file.metadata()?)?;
    Ok(file)
}

/// The whole of regular file `path`, refused if longer than `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path, |p| File::open(p))?;
    read_bounded(file, limit)
}

/// All of `reader`, refused once it passes `limit` bytes (only `limit + 1`
/// are ever read, so an endless source such as /dev/zero ends quickly).
pub fn read_bounded(reader: impl Read, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooBig { limit });
    }
    Ok(buf)
}

/// Why a file could not be attached as an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Its first bytes are not those of a PNG, JPEG, GIF or WebP file.
    #[error("not a PNG, JPEG, GIF or WebP image (judged by its first bytes)")]
    NotImage,
    /// Larger than `wire::image::MAX_IMAGE_BYTES`.
    #[error(
        "{}, over the {} limit for an image",
        crate::wire::image::human_size(*.size),
        crate::localfile::size(crate::wire::image::MAX_IMAGE_BYTES)
    )]
    TooBig { size: u64 },
    #[error("cannot read it: {0}")]
    Read(#[source] ReadError),
}

/// The first bytes of `path`, enough to tell an image by (`wire::image::MAGIC_LEN`),
/// or `None` when it cannot be read as a regular file.
pub fn image_type(path: &Path) -> Option<&'static str> {
    let file = open_regular(path, |p| File::open(p)).ok()?;
    let mut head = Vec::new();
    file.take(crate::wire::image::MAGIC_LEN as u64)
        .read_to_end(&mut head)
        .ok()?;
    crate::wire::image::media_type_of(&head)
}

/// The image in regular file `path`: at most `MAX_IMAGE_BYTES` (checked
/// before reading, and again while reading), recognised by its first bytes.
/// Its name is the path's last component, made safe for a terminal.
pub fn read_image(path: &Path) -> Result<crate::wire::Image, ImageError> {
    use crate::wire::image::MAX_IMAGE_BYTES;
    let file = open_regular(path, |p| File::open(p)).map_err(ImageError::Read)?;
    let size = file
        .metadata()
        .map_err(|e| ImageError::Read(e.into()))?
        .len();
    if size > MAX_IMAGE_BYTES {
        return Err(ImageError::TooBig { size });
    }
    let bytes = read_bounded(file, MAX_IMAGE_BYTES).map_err(|e| match e {
        // It grew while being read.
        ReadError::TooBig { .. } => ImageError::TooBig {
            size: MAX_IMAGE_BYTES + 1,
        },
        other => ImageError::Read(other),
    })?;
    let name = path
        .file_name()
        .map(|n| crate::text::visible(&n.to_string_lossy()).into_owned())
        .unwrap_or_else(|| "image".into());
    crate::wire::Image::from_bytes(&name, bytes).ok_or(ImageError::NotImage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("buddy-localfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        // Opening a FIFO with no writer would block this test forever.
        let e = read_regular(&fifo, 100).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a FIFO (named pipe), not a regular file"
        );
        let e = read_regular(Path::new("/dev/zero"), 100).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a character device, not a regular file"
        );
        let e = read_regular(&dir, 100).unwrap_err();
        assert_eq!(e.to_string(), "it is a directory, not a regular file");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_stop_one_byte_past_the_limit() {
        let zero = File::open("/dev/zero").unwrap();
        let e = read_bounded(zero, 1024 * 1024).unwrap_err();
        assert_eq!(e.to_string(), "it is larger than 1 MiB");
        assert_eq!(read_bounded(&b"12345"[..], 5).unwrap(), b"12345");
        assert!(matches!(
            read_bounded(&b"123456"[..], 5),
            Err(ReadError::TooBig { limit: 5 })
        ));
    }
}
