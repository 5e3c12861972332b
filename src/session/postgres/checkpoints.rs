//! A session's checkpoints as rows: the checkpoint store's log
//! (`session::checkpoint::CheckpointLog`) in the session database, so a
//! session continued on another instance can rewind to what a tool changed
//! on the first. A file record is one row of `buddy_checkpoints` (the
//! record's JSON, with its turn and path beside it for people reading the
//! table); a content is one row of `buddy_checkpoint_blobs`, kept once per
//! session by its SHA-256.
//!
//! A batch of records is one statement, so it is whole or absent; a batch
//! that keeps a file's state before a change is committed durably before
//! the tool changes the file (the file store's promise). It is written
//! only while this instance holds the session's lease, as its records are:
//! a writer that lost the session changes no file. The bounds are the file
//! store's: the store's size is counted as the file would hold it.

use super::db::{Commit, Db};
use crate::session::checkpoint::{Batch, CheckpointLog, FileRecord, Index};
use std::io;

/// The longest record row read back; a longer one is not ours (a path is
/// at most 4 KiB on Linux).
const MAX_RECORD_BYTES: i32 = 64 * 1024;

/// Session `session`'s checkpoints, written under lease `holder`.
pub struct CheckpointRows {
    db: Db,
    session: String,
    holder: String,
}

impl CheckpointRows {
    pub fn new(db: Db, session: String, holder: String) -> CheckpointRows {
        CheckpointRows {
            db,
            session,
            holder,
        }
    }
}

impl CheckpointLog for CheckpointRows {
    fn read(&mut self) -> io::Result<(Index, Option<String>)> {
        let id = self.session.clone();
        let (records, blobs) = self
            .db
            .call(move |c| async move {
                let records = c
                    .query(
                        "SELECT seq, CASE WHEN length(record) <= $2 THEN record END
                         FROM buddy_checkpoints WHERE session_id = $1 ORDER BY seq",
                        &[&id, &MAX_RECORD_BYTES],
                    )
                    .await?;
                let blobs = c
                    .query(
                        "SELECT sha256, length(content)::bigint FROM buddy_checkpoint_blobs
                         WHERE session_id = $1",
                        &[&id],
                    )
                    .await?;
                Ok((records, blobs))
            })
            .map_err(io::Error::other)?;
        let mut kept = Vec::with_capacity(records.len());
        let mut damage = None;
        for row in &records {
            let seq: i64 = row.get(0);
            let parsed = row
                .get::<_, Option<String>>(1)
                .ok_or_else(|| "it is too long".to_string())
                .and_then(|r| serde_json::from_str::<FileRecord>(&r).map_err(|e| e.to_string()));
            match parsed {
                Ok(r) => kept.push(r),
                // As in the file: what follows a damaged record is not
                // trusted.
                Err(e) => {
                    damage = Some(format!("a bad record at row {seq}: {e}"));
                    break;
                }
            }
        }
        let blobs = blobs
            .iter()
            .map(|r| (r.get(0), u64::try_from(r.get::<_, i64>(1)).unwrap_or(0)))
            .collect();
        Ok((Index::of_parts(kept, blobs)?, damage))
    }

    fn append(&mut self, index: &Index, batch: &Batch<'_>) -> io::Result<u64> {
        let mut shas = Vec::with_capacity(batch.blobs.len());
        let mut contents = Vec::with_capacity(batch.blobs.len());
        for (sha, offset, len) in batch.blobs {
            let bytes = usize::try_from(*offset)
                .ok()
                .zip(usize::try_from(offset + len).ok())
                .and_then(|(from, to)| batch.bytes.get(from..to))
                .ok_or_else(|| io::Error::other("a blob outside its batch"))?;
            shas.push(sha.clone());
            contents.push(bytes.to_vec());
        }
        let mut turns = Vec::with_capacity(batch.records.len());
        let mut paths = Vec::with_capacity(batch.records.len());
        let mut records = Vec::with_capacity(batch.records.len());
        for r in batch.records {
            turns.push(r.turn.clone());
            paths.push(r.path.clone());
            records.push(serde_json::to_string(r).map_err(io::Error::other)?);
        }
        let n = records.len() as i64;
        let (id, holder) = (self.session.clone(), self.holder.clone());
        let commit = if batch.durable {
            Commit::Durable
        } else {
            Commit::Relaxed
        };
        let written = self
            .db
            .call_as(commit, move |c| async move {
                let row = c
                    .query_one(
                        "WITH lease AS (SELECT 1 FROM buddy_leases
                                        WHERE session_id = $1 AND holder = $2 FOR SHARE),
                              blobs AS (INSERT INTO buddy_checkpoint_blobs (session_id, sha256, content)
                                        SELECT $1, b.sha, b.content
                                        FROM unnest($3::text[], $4::bytea[]) AS b(sha, content)
                                        WHERE EXISTS (SELECT 1 FROM lease)
                                        ON CONFLICT DO NOTHING RETURNING 1),
                              recs AS (INSERT INTO buddy_checkpoints (session_id, seq, turn, path, record)
                                       SELECT $1, (SELECT COALESCE(max(seq), 0) FROM buddy_checkpoints
                                                   WHERE session_id = $1) + g.i, g.turn, g.path, g.record
                                       FROM unnest($5::text[], $6::text[], $7::text[])
                                            WITH ORDINALITY AS g(turn, path, record, i)
                                       WHERE EXISTS (SELECT 1 FROM lease)
                                       RETURNING 1)
                         SELECT count(*) FROM recs",
                        &[&id, &holder, &shas, &contents, &turns, &paths, &records],
                    )
                    .await?;
                Ok(row.get::<_, i64>(0))
            })
            .map_err(io::Error::other)?;
        if written != n {
            return Err(io::Error::other(format!(
                "this instance's lease on session {} was taken over; no file is changed here",
                self.session
            )));
        }
        Ok(index.size())
    }

    fn blob(&mut self, sha256: &str, (_, len): (u64, u64)) -> io::Result<Vec<u8>> {
        let (id, sha) = (self.session.clone(), sha256.to_string());
        let len = i64::try_from(len).unwrap_or(i64::MAX);
        let row = self
            .db
            .call(move |c| async move {
                c.query_opt(
                    "SELECT content FROM buddy_checkpoint_blobs
                     WHERE session_id = $1 AND sha256 = $2 AND length(content) = $3::bigint",
                    &[&id, &sha, &len],
                )
                .await
            })
            .map_err(io::Error::other)?;
        row.map(|r| r.get(0))
            .ok_or_else(|| io::Error::other("the content is missing from the store"))
    }
}
