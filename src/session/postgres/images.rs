//! A session's image copies as rows of `buddy_images` (session, name,
//! bytes), so a session continued on another instance sends the model the
//! images attached on the first. Names are content addresses: a copy is
//! inserted once and never changed. Bounded as the directory's copies are
//! (`MAX_IMAGE_BYTES` each, read back only when within it).

use super::db::Db;
use crate::session::images::ImageStore;
use crate::wire::image::MAX_IMAGE_BYTES;
use std::io;

/// Session `session`'s image copies.
pub struct ImageRows {
    db: Db,
    session: String,
}

impl ImageRows {
    pub fn new(db: Db, session: String) -> ImageRows {
        ImageRows { db, session }
    }
}

impl ImageStore for ImageRows {
    /// Committed durably: the record naming the image comes after it.
    fn keep(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        if bytes.len() as u64 > MAX_IMAGE_BYTES {
            return Err(io::Error::other(format!(
                "image {name} is larger than {} MiB",
                MAX_IMAGE_BYTES >> 20
            )));
        }
        let (id, name, bytes) = (self.session.clone(), name.to_string(), bytes.to_vec());
        self.db
            .call(move |c| async move {
                c.execute(
                    "INSERT INTO buddy_images (session_id, name, content) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                    &[&id, &name, &bytes],
                )
                .await
            })
            .map_err(io::Error::other)?;
        Ok(())
    }

    fn read(&self, name: &str) -> Option<Vec<u8>> {
        let (id, name) = (self.session.clone(), name.to_string());
        let max = i64::try_from(MAX_IMAGE_BYTES).unwrap_or(i64::MAX);
        self.db
            .call(move |c| async move {
                c.query_opt(
                    "SELECT content FROM buddy_images
                     WHERE session_id = $1 AND name = $2 AND length(content) <= $3::bigint",
                    &[&id, &name, &max],
                )
                .await
            })
            .ok()
            .flatten()
            .map(|r| r.get(0))
    }

    fn place(&self) -> String {
        "the session database".into()
    }
}
