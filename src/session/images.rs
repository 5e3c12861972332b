//! Where a session keeps copies of the images attached to its prompts,
//! each under its content address (`<sha256>.<ext>`, `Image::stored_name`):
//! a directory beside the journal (`<id>.images/`, [`ImageDir`]), or rows of
//! the session database (`session::postgres`). A record names an image only
//! once its copy is durable; reading a session back gives each image its
//! bytes from here, and one that is missing or not what its hash says stays
//! without them (the protocols send a note in its place).
//!
//! This module does not know the journal or the agent: it keeps bytes by
//! name and gives them back, bounded as an attached image is.

use crate::localfile;
use crate::wire::image::MAX_IMAGE_BYTES;
use crate::wire::{Image, Message};
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

/// A session's image copies, by name.
pub trait ImageStore: Send + Sync {
    /// Keeps `bytes` as `name`, unless a copy is there already (the same
    /// screenshot attached twice is kept once); durable when it returns.
    fn keep(&self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// The copy kept as `name`, if there is one of at most
    /// `MAX_IMAGE_BYTES` that can be read.
    fn read(&self, name: &str) -> Option<Vec<u8>>;
    /// Where the copies are, as a warning names it.
    fn place(&self) -> String;
}

/// The copies as files of one directory.
pub struct ImageDir {
    dir: PathBuf,
}

impl ImageDir {
    pub fn new(dir: PathBuf) -> ImageDir {
        ImageDir { dir }
    }
}

impl ImageStore for ImageDir {
    /// Written whole or not at all.
    fn keep(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self.dir.join(name);
        if path.exists() {
            return Ok(());
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        crate::atomic_file::replace(&path, bytes, crate::atomic_file::PRIVATE)
    }

    fn read(&self, name: &str) -> Option<Vec<u8>> {
        localfile::read_regular(&self.dir.join(name), MAX_IMAGE_BYTES).ok()
    }

    fn place(&self) -> String {
        self.dir.display().to_string()
    }
}

/// Keeps a copy of `image` in `store`. A reference loaded without its bytes
/// has nothing to keep.
pub fn keep(store: &dyn ImageStore, image: &Image) -> io::Result<()> {
    match (image.stored_name(), image.data.as_ref()) {
        (Some(name), Some(data)) => store.keep(&name, data),
        _ => Ok(()),
    }
}

/// Gives every image reference of `history` its bytes from `store`, with
/// one warning for all those whose copy is missing, unreadable or not what
/// its hash says.
pub fn load(history: &mut [Message], store: &dyn ImageStore, id: &str, warnings: &mut Vec<String>) {
    let mut missing = Vec::new();
    for image in history.iter_mut().flat_map(|m| m.images.iter_mut()) {
        let Some(name) = image.stored_name() else {
            missing.push(image.name.clone());
            continue;
        };
        let read = store
            .read(&name)
            .and_then(|bytes| Image::from_bytes(&image.name, bytes))
            .filter(|read| read.sha256 == image.sha256);
        match read {
            Some(read) => image.data = read.data,
            None => missing.push(image.name.clone()),
        }
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "session {id}: the saved copy of {} image(s) ({}) is missing from {}; the model gets a note in their place",
            missing.len(),
            crate::text::visible(&missing.join(", ")),
            store.place()
        ));
    }
}
