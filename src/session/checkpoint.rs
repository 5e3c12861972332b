//! A session's checkpoint store: the content files had before a tool changed
//! them, so `/rewind` can put the code back as it was before a turn. It is
//! one append-only file beside the session's journal (`ID.checkpoints` in the
//! sessions directory), never inside the user's repository's git data: no
//! index, no stash, no commits.
//!
//! ```text
//! {"header":{"version":1}}
//! {"blob":{"sha256":"9f86…","len":5}}
//! hello
//! {"file":{"turn":"1764160000123-0001","path":"/p/a.txt","at":1764160000,"before":{"state":"kept","sha256":"9f86…","len":5}}}
//! {"file":{"turn":"1764160000123-0001","path":"/p/new.txt","at":1764160000,"before":{"state":"missing"}}}
//! ```
//!
//! A `blob` record is followed by exactly `len` raw bytes and a newline;
//! blobs are content-addressed (SHA-256), so a file written back and forth
//! is kept once. A `file` record says what a path held before turn `turn`
//! first changed it: content (a blob), nothing (`missing`), or content that
//! was not kept and why (`not_kept`: larger than `MAX_FILE_BYTES`, the store
//! past `MAX_STORE_BYTES`, not a regular file). A file on an SSH or container
//! target has `"target"` in its record, the target's name: its content is
//! what the tool read through the target, and only a session working on that
//! target puts it back (through the target, `TargetFiles`).
//!
//! Crash safety: the records for a change are written in one append and
//! synced before `before_change` returns, and the tool changes the file only
//! after that, so a kill (or a power cut) at any moment leaves a store that
//! knows the old content. A torn last record is dropped on load, as in the
//! journal. Records are never rewritten.
//!
//! Where the records and the bytes are kept is a [`CheckpointLog`]: this
//! file ([`CheckpointFile`]), or rows of the session database
//! (`session::postgres`), which keep the same records and blobs under the
//! same bounds and the same promise (durable before `before_change`
//! returns). What to keep, the bounds and the rewinds are this module's,
//! whatever the log.
//!
//! This module does not know turns, the agent or the REPL: it keeps bytes
//! under the turn ids it is given and puts them back on request.

use crate::tools::checkpoint::{
    is_undo, too_large, After, CheckpointError, Checkpoints, FileAction, FileRestore, Prior,
    Remote, TargetFiles, UndoPoint, UNDO_PREFIX,
};
use crate::tools::protect::Protected;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest file whose earlier content is kept (the tools' bound too).
pub const MAX_FILE_BYTES: u64 = crate::tools::checkpoint::MAX_KEPT_BYTES;
/// The most a session's store may hold. Past it, further content is recorded
/// as not kept (the store full), and a rewind says so.
pub const MAX_STORE_BYTES: u64 = 256 * 1024 * 1024;
/// The longest record line read back (a path is at most 4 KiB on Linux; a
/// longer line is damage, not a record of ours).
const MAX_LINE_BYTES: usize = 64 * 1024;
const FORMAT_VERSION: u32 = 1;
/// The store's file name after the session id.
pub const EXT: &str = "checkpoints";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Before {
    Missing,
    Kept { sha256: String, len: u64 },
    NotKept { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub turn: String,
    pub path: String,
    /// The remote target the file is on (its name); none on this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Unix seconds.
    pub at: u64,
    pub before: Before,
    /// What the change left there. A later change of the same file in the
    /// same turn adds a record with the turn's `before` again and its own
    /// `wrote`; readers take `before` from a file's first record of a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrote: Option<After>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    version: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Blob {
    sha256: String,
    len: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Record {
    Header(Header),
    Blob(Blob),
    File(FileRecord),
}

/// The store's file read back: where each blob's bytes are, and the file
/// records in the order they were written.
#[derive(Debug, Default)]
pub struct Index {
    /// sha256 → (offset of the bytes, length).
    blobs: HashMap<String, (u64, u64)>,
    pub records: Vec<FileRecord>,
    /// Length up to the end of the last whole record.
    good_len: u64,
}

/// Reads a store. A record cut short by a crash ends it (the bytes after it
/// are dropped when the store is next written); so does a damaged one, and
/// `damage` says where.
pub fn read_index(mut r: impl BufRead, file_len: u64) -> io::Result<(Index, Option<String>)> {
    let mut index = Index::default();
    let mut pos = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut r)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok((index, None));
        }
        if line.last() != Some(&b'\n') {
            // Torn (no newline) or too long to be ours.
            let damage = (n > MAX_LINE_BYTES).then(|| format!("an overlong record at byte {pos}"));
            return Ok((index, damage));
        }
        let record: Record = match serde_json::from_slice(&line[..n - 1]) {
            Ok(r) => r,
            Err(e) => return Ok((index, Some(format!("a bad record at byte {pos}: {e}")))),
        };
        let mut end = pos + n as u64;
        match record {
            Record::Header(h) if h.version > FORMAT_VERSION => {
                return Ok((
                    index,
                    Some(format!("written by a newer buddy (version {})", h.version)),
                ))
            }
            Record::Header(_) => {}
            Record::File(f) => index.records.push(f),
            Record::Blob(b) => {
                // The bytes and their newline must all be there.
                if end + b.len + 1 > file_len {
                    return Ok((index, None));
                }
                let offset = end;
                io::copy(&mut (&mut r).take(b.len), &mut io::sink())?;
                let mut nl = [0u8; 1];
                r.read_exact(&mut nl)?;
                if nl[0] != b'\n' {
                    return Ok((index, Some(format!("a blob without its end at byte {pos}"))));
                }
                end += b.len + 1;
                index.blobs.insert(b.sha256, (offset, b.len));
            }
        }
        pos = end;
        index.good_len = end;
    }
}

pub use crate::tools::checkpoint::sha256_hex;

impl Index {
    /// The index of a log that keeps `records` (in order) and the blobs
    /// `blobs` (name, length) apart, not in a file: its size is what the
    /// file would hold, so the store's bound means the same in both.
    pub fn of_parts(records: Vec<FileRecord>, blobs: Vec<(String, u64)>) -> io::Result<Index> {
        let mut buf = Vec::new();
        encode(
            &Record::Header(Header {
                version: FORMAT_VERSION,
            }),
            &mut buf,
        )?;
        let mut size = 0u64;
        let mut index = Index::default();
        for (sha256, len) in blobs {
            encode(
                &Record::Blob(Blob {
                    sha256: sha256.clone(),
                    len,
                }),
                &mut buf,
            )?;
            size += len + 1;
            index.blobs.insert(sha256, (0, len));
        }
        for r in &records {
            encode(&Record::File(r.clone()), &mut buf)?;
        }
        index.records = records;
        index.good_len = size + buf.len() as u64;
        Ok(index)
    }

    /// How much the store holds, as its file would.
    pub fn size(&self) -> u64 {
        self.good_len
    }

    /// Where blob `sha256` is in its log, as the log gave it.
    pub fn blob_at(&self, sha256: &str) -> Option<(u64, u64)> {
        self.blobs.get(sha256).copied()
    }
}

/// One write to a checkpoint log: every record of a change of one batch of
/// files, whole or not at all.
pub struct Batch<'a> {
    /// The batch as the file holds it: its records, each blob record
    /// followed by its bytes.
    pub bytes: &'a [u8],
    /// The new blobs: name, where their bytes are in `bytes`, length.
    pub blobs: &'a [(String, u64, u64)],
    /// The file records of `bytes`, in order.
    pub records: &'a [FileRecord],
    /// A file's state before a change is among them: it must be durable
    /// when `append` returns, since the tool changes the file next.
    pub durable: bool,
}

/// Where a checkpoint store keeps its records and blobs. Called under the
/// store's lock, from blocking code (never on the runtime's workers).
pub trait CheckpointLog: Send {
    /// Everything kept so far, and why it could not all be read.
    fn read(&mut self) -> io::Result<(Index, Option<String>)>;
    /// Appends `batch` after what `index` holds, and returns where the
    /// batch starts in the log (a new file's header comes first).
    fn append(&mut self, index: &Index, batch: &Batch<'_>) -> io::Result<u64>;
    /// The bytes of blob `sha256`, kept at `at` (offset, length) as
    /// `read` or `append` said; checked against their name by the caller.
    fn blob(&mut self, sha256: &str, at: (u64, u64)) -> io::Result<Vec<u8>>;
}

/// The store as one append-only file beside the session's journal.
pub struct CheckpointFile {
    path: PathBuf,
    /// Open for appending once anything was written.
    file: Option<File>,
}

impl CheckpointFile {
    pub fn new(path: PathBuf) -> CheckpointFile {
        CheckpointFile { path, file: None }
    }

    /// Opens the file for appending (creating it, with its header), cut
    /// back to its last whole record (`good_len`).
    fn writer(&mut self, good_len: u64) -> io::Result<&mut File> {
        if self.file.is_none() {
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&self.path)?;
            let len = f.metadata()?.len();
            let mut end = good_len;
            if len == 0 {
                let mut header = Vec::new();
                encode(
                    &Record::Header(Header {
                        version: FORMAT_VERSION,
                    }),
                    &mut header,
                )?;
                f.write_all(&header)?;
                end = header.len() as u64;
                // The new name must survive a power cut too.
                if let Some(dir) = self.path.parent() {
                    File::open(dir)?.sync_all()?;
                }
            } else if len != good_len {
                // A torn tail (or damage): appending after it would hide
                // every later record from the reader.
                f.set_len(good_len)?;
            }
            f.seek(SeekFrom::Start(end))?;
            self.file = Some(f);
        }
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("checkpoint store not open"))
    }
}

impl CheckpointLog for CheckpointFile {
    fn read(&mut self) -> io::Result<(Index, Option<String>)> {
        match File::open(&self.path) {
            Ok(f) => {
                let len = f.metadata()?.len();
                read_index(io::BufReader::with_capacity(64 * 1024, f), len)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok((Index::default(), None)),
            Err(e) => Err(e),
        }
    }

    fn append(&mut self, index: &Index, batch: &Batch<'_>) -> io::Result<u64> {
        let f = self.writer(index.good_len)?;
        // A new file's header came first: the batch starts after it.
        let start = f.stream_position()?;
        let written =
            f.write_all(batch.bytes).and_then(
                |()| {
                    if batch.durable {
                        f.sync_data()
                    } else {
                        Ok(())
                    }
                },
            );
        if let Err(e) = written {
            // Cut back to the last whole record, so no half of this batch
            // is ever read as a checkpoint.
            let _ = f.set_len(start);
            let _ = f.seek(SeekFrom::Start(start));
            return Err(e);
        }
        Ok(start)
    }

    fn blob(&mut self, _sha256: &str, (offset, len): (u64, u64)) -> io::Result<Vec<u8>> {
        let mut f = File::open(&self.path)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut bytes = Vec::new();
        f.take(len).read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// What the store holds in memory once loaded: its index, and its log.
struct State {
    loaded: bool,
    index: Index,
    /// Why the store could not be read whole (said at rewind time).
    damage: Option<String>,
    log: Box<dyn CheckpointLog>,
}

/// One session's checkpoint store. Cheap to create: nothing is read or
/// written until a file changes or a rewind asks. Clones share the store.
#[derive(Clone)]
pub struct CheckpointStore {
    /// `MAX_FILE_BYTES` and `MAX_STORE_BYTES`, smaller in tests.
    max_file: u64,
    max_store: u64,
    /// Blocking I/O under one lock: changes to one session's files are
    /// checkpointed one batch at a time, in order.
    state: Arc<Mutex<State>>,
}

impl CheckpointStore {
    /// The store in file `path`.
    pub fn new(path: PathBuf) -> CheckpointStore {
        CheckpointStore::in_log(Box::new(CheckpointFile::new(path)))
    }

    /// The store kept in `log`.
    pub fn in_log(log: Box<dyn CheckpointLog>) -> CheckpointStore {
        CheckpointStore {
            max_file: MAX_FILE_BYTES,
            max_store: MAX_STORE_BYTES,
            state: Arc::new(Mutex::new(State {
                loaded: false,
                index: Index::default(),
                damage: None,
                log,
            })),
        }
    }

    #[cfg(test)]
    fn with_limits(path: PathBuf, max_file: u64, max_store: u64) -> CheckpointStore {
        CheckpointStore {
            max_file,
            max_store,
            ..CheckpointStore::new(path)
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock left at worst an unsynced tail,
        // which the next load drops: the state is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load(&self, st: &mut State) -> io::Result<()> {
        if st.loaded {
            return Ok(());
        }
        let (index, damage) = st.log.read()?;
        st.index = index;
        st.damage = damage;
        st.loaded = true;
        Ok(())
    }

    /// The blocking body of `before_change`: `after[i]` is what the change
    /// leaves at `paths[i]`.
    pub fn keep(
        &self,
        turn: &str,
        paths: &[PathBuf],
        after: &[After],
        remote: Option<&Remote>,
    ) -> io::Result<()> {
        let mut st = self.lock();
        self.load(&mut st)?;
        self.keep_in(&mut st, turn, paths, after, remote)
    }

    fn keep_in(
        &self,
        st: &mut State,
        turn: &str,
        paths: &[PathBuf],
        after: &[After],
        remote: Option<&Remote>,
    ) -> io::Result<()> {
        let at = crate::clock::now_unix();
        let mut buf = Vec::new();
        let mut new_blobs: Vec<(String, u64, u64)> = Vec::new();
        let mut new_records: Vec<FileRecord> = Vec::new();
        // Only a record of a file's state before a change must be on disk
        // before the change; one that only says what a later change of the
        // same turn wrote may be lost in a crash (the file then shows as
        // changed since, which is the safe side).
        let mut must_sync = false;
        let target = remote.map(|r| r.actor.clone());
        for (i, path) in paths.iter().enumerate() {
            // A remote path means nothing on this host's file system.
            let path = match remote {
                Some(_) => path.clone(),
                None => resolved(path),
            };
            let shown = path.to_string_lossy().into_owned();
            let wrote = after.get(i).cloned();
            // Only the state before the turn's first change to a file
            // matters; a later change notes only what it wrote.
            let same = |r: &&FileRecord| r.turn == turn && r.path == shown && r.target == target;
            let first = st.index.records.iter().find(same).cloned();
            let first = first.or_else(|| new_records.iter().find(same).cloned());
            if let Some(first) = first {
                let last = new_records
                    .iter()
                    .rev()
                    .find(same)
                    .or_else(|| st.index.records.iter().rev().find(same));
                if last.is_some_and(|l| l.wrote == wrote) {
                    continue;
                }
                let record = FileRecord { at, wrote, ..first };
                encode(&Record::File(record.clone()), &mut buf)?;
                new_records.push(record);
                continue;
            }
            must_sync = true;
            let now = match remote {
                Some(r) => match r.now.get(i) {
                    Some(Prior::Missing) => Current::Missing,
                    Some(Prior::NotKept(reason)) => Current::Other(reason.clone()),
                    Some(Prior::Content(b)) if b.len() as u64 > self.max_file => {
                        Current::Other(too_large(b.len() as u64, self.max_file))
                    }
                    // Copied into the batch below, not kept here.
                    Some(Prior::Content(b)) => Current::Borrowed(b),
                    None => Current::Other("the tool did not say what it held".into()),
                },
                None => current(&path, self.max_file)?,
            };
            let before = match now {
                Current::Missing => Before::Missing,
                Current::Other(reason) => Before::NotKept { reason },
                Current::Bytes(_) | Current::Borrowed(_) => {
                    let bytes = now.bytes();
                    let sha256 = sha256_hex(bytes);
                    let len = bytes.len() as u64;
                    let known = st.index.blobs.contains_key(&sha256)
                        || new_blobs.iter().any(|(s, _, _)| *s == sha256);
                    let room = st.index.good_len + buf.len() as u64 + len + 256;
                    if known {
                        Before::Kept { sha256, len }
                    } else if room > self.max_store {
                        Before::NotKept {
                            reason: format!(
                                "the session's checkpoint store was full ({} bytes)",
                                self.max_store
                            ),
                        }
                    } else {
                        encode(
                            &Record::Blob(Blob {
                                sha256: sha256.clone(),
                                len,
                            }),
                            &mut buf,
                        )?;
                        let offset = buf.len() as u64;
                        buf.extend_from_slice(bytes);
                        buf.push(b'\n');
                        new_blobs.push((sha256.clone(), offset, len));
                        Before::Kept { sha256, len }
                    }
                }
            };
            let record = FileRecord {
                turn: turn.to_string(),
                path: shown,
                target: target.clone(),
                at,
                before,
                wrote,
            };
            encode(&Record::File(record.clone()), &mut buf)?;
            new_records.push(record);
        }
        if buf.is_empty() {
            return Ok(());
        }
        let start = st.log.append(
            &st.index,
            &Batch {
                bytes: &buf,
                blobs: &new_blobs,
                records: &new_records,
                durable: must_sync,
            },
        )?;
        st.index.good_len = start + buf.len() as u64;
        for (sha, offset, len) in new_blobs {
            st.index.blobs.insert(sha, (start + offset, len));
        }
        st.index.records.extend(new_records);
        Ok(())
    }

    /// The earliest record of each file, in the order the files were first
    /// changed: for a turn, of its changes and later turns' (never an undo
    /// point's); for an undo point, its own.
    fn since<'a>(index: &'a Index, turn: &str) -> Vec<&'a FileRecord> {
        let undo = is_undo(turn);
        let mut out: Vec<&FileRecord> = Vec::new();
        let wanted = |r: &&FileRecord| {
            if undo {
                r.turn == turn
            } else {
                !is_undo(&r.turn) && r.turn.as_str() >= turn
            }
        };
        for r in index.records.iter().filter(wanted) {
            if !out.iter().any(|o| o.path == r.path && o.target == r.target) {
                out.push(r);
            }
        }
        out
    }

    /// The blocking body of `plan`.
    pub fn plan_turns(
        &self,
        turns: &[String],
        here: Option<&str>,
    ) -> io::Result<Vec<Vec<FileRestore>>> {
        let mut st = self.lock();
        self.load(&mut st)?;
        // A file changed in many turns is hashed once per listing.
        let mut hashes: HashMap<String, Option<String>> = HashMap::new();
        let mut out = Vec::with_capacity(turns.len());
        for turn in turns {
            out.push(plan_of(&st.index, turn, here, &mut hashes));
        }
        Ok(out)
    }

    /// The blocking body of `undo_point`.
    pub fn last_undo(&self, here: Option<&str>) -> io::Result<Option<UndoPoint>> {
        let mut st = self.lock();
        self.load(&mut st)?;
        // Undo ids sort in the order they were made.
        let Some(last) = st
            .index
            .records
            .iter()
            .filter(|r| is_undo(&r.turn))
            .max_by(|a, b| a.turn.cmp(&b.turn))
        else {
            return Ok(None);
        };
        let (id, at) = (last.turn.clone(), last.at);
        let files = plan_of(&st.index, &id, here, &mut HashMap::new());
        Ok(Some(UndoPoint { id, at, files }))
    }

    /// Restores every file on this host changed in `turn` or later; a
    /// session that works on no remote target has nothing else to restore.
    /// Nothing is protected but what the rewind checks for itself.
    pub fn restore_turn(&self, turn: &str) -> io::Result<Vec<FileRestore>> {
        Ok(self.restore_here(turn, None, &Protected::new())?.0)
    }

    /// A new undo point's id, later than every one in `index`.
    fn next_undo_id(index: &Index) -> String {
        let last = index
            .records
            .iter()
            .filter_map(|r| r.turn.strip_prefix(UNDO_PREFIX))
            .filter_map(|t| t.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        let id = crate::clock::now_unix_ms().max(last + 1);
        format!("{UNDO_PREFIX}{id:016}")
    }

    /// The blocking part of `restore`: the files on this host put back
    /// (what each held first kept under a new undo point, whose id is
    /// returned), and those on the remote target `here` left to the caller
    /// (their place in the list and their content, `None` to remove them).
    #[allow(clippy::type_complexity)]
    fn restore_here(
        &self,
        turn: &str,
        here: Option<&str>,
        own: &Protected,
    ) -> io::Result<(Vec<FileRestore>, Vec<(usize, Option<Vec<u8>>)>, String)> {
        let mut st = self.lock();
        self.load(&mut st)?;
        let undo_id = Self::next_undo_id(&st.index);
        let records: Vec<FileRecord> = Self::since(&st.index, turn).into_iter().cloned().collect();
        let mut hashes = HashMap::new();
        let mut out = Vec::with_capacity(records.len());
        let mut remote = Vec::new();
        // Files on this host to change: (place in `out`, path, new content).
        let mut local: Vec<(usize, PathBuf, Option<Vec<u8>>)> = Vec::new();
        for r in records {
            let planned = action_for(&st.index, &r, here, &mut hashes);
            let changed_since = r.target.is_none()
                && matches!(planned, FileAction::Restore { .. } | FileAction::Delete)
                && changed_since(&st.index, &r, &mut hashes);
            let path = PathBuf::from(&r.path);
            let content = match (&planned, &r.before) {
                (FileAction::Delete, _) => Ok(None),
                (FileAction::Restore { .. }, Before::Kept { sha256, .. }) => {
                    Self::blob(&mut st, sha256).map(Some)
                }
                _ => Err(io::Error::other("nothing to do")),
            };
            let action = match content {
                Err(_) if !matches!(planned, FileAction::Restore { .. }) => planned,
                Err(e) => FileAction::Failed {
                    reason: format!("its checkpoint cannot be read: {e}"),
                },
                Ok(content) if r.target.is_some() => {
                    remote.push((out.len(), content));
                    planned
                }
                Ok(content) => match refusal(&path, own) {
                    Some(reason) => FileAction::Failed { reason },
                    None => {
                        local.push((out.len(), path, content));
                        planned
                    }
                },
            };
            out.push(FileRestore {
                path: r.path.clone(),
                action,
                changed_since,
            });
        }
        // What is there now is kept before anything changes, in one
        // durable write: the rewind can be taken back as a whole.
        let paths: Vec<PathBuf> = local.iter().map(|(_, p, _)| p.clone()).collect();
        let after: Vec<After> = local
            .iter()
            .map(|(_, _, c)| After::of(c.as_deref()))
            .collect();
        self.keep_in(&mut st, &undo_id, &paths, &after, None)?;
        for (i, path, content) in local {
            let shown = path.to_string_lossy();
            let kept = st
                .index
                .records
                .iter()
                .find(|r| r.turn == undo_id && r.path == shown && r.target.is_none());
            if let Some(FileRecord {
                before: Before::NotKept { reason },
                ..
            }) = kept
            {
                out[i].action = FileAction::Failed {
                    reason: format!(
                        "not touched: what is there now could not be kept first ({reason})"
                    ),
                };
                continue;
            }
            let done = match &content {
                None => match fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(format!("cannot remove it: {e}")),
                },
                Some(bytes) => {
                    write_back(&path, bytes).map_err(|e| format!("cannot write it: {e}"))
                }
            };
            if let Err(reason) = done {
                out[i].action = FileAction::Failed { reason };
            }
        }
        Ok((out, remote, undo_id))
    }

    /// A blob's bytes, checked against their name.
    fn blob(st: &mut State, sha256: &str) -> io::Result<Vec<u8>> {
        let at = st
            .index
            .blob_at(sha256)
            .ok_or_else(|| io::Error::other("the content is missing from the store"))?;
        let len = at.1;
        let bytes = st.log.blob(sha256, at)?;
        if bytes.len() as u64 != len || sha256_hex(&bytes) != sha256 {
            return Err(io::Error::other("the stored content is damaged"));
        }
        Ok(bytes)
    }

    /// Why the store could not be read whole, if it could not.
    pub fn damage(&self) -> Option<String> {
        let mut st = self.lock();
        self.load(&mut st).ok()?;
        st.damage.clone()
    }
}

/// Copies the store in file `from` to `dest` (a forked session's). Nothing
/// to copy is no error; a torn tail is copied as it is, and dropped when
/// the fork's store is read.
pub fn copy_file(from: &Path, dest: &Path) -> io::Result<()> {
    match File::open(from) {
        Ok(mut src) => {
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dest)?;
            io::copy(&mut src, &mut out)?;
            out.sync_data()
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn encode(record: &Record, buf: &mut Vec<u8>) -> io::Result<()> {
    serde_json::to_writer(&mut *buf, record).map_err(io::Error::other)?;
    buf.push(b'\n');
    Ok(())
}

/// A path as the write will change it, resolved the way the file system
/// does: a symlink's target (the write goes through the link), and the
/// real directory it is in. A rewind checks the directory still resolves
/// to itself, so a symlink put in the path since cannot redirect it.
fn resolved(path: &Path) -> PathBuf {
    crate::tools::protect::resolve(path)
}

/// Why a rewind must not change `path` on this host, if it must not: the
/// checks the file tools make. Not one of buddy's own files; not through a
/// directory that leads elsewhere now (the record holds the real directory
/// the file was written in, so any symlink in its path came since); and
/// only a regular file or none (never a device, a FIFO, a directory or a
/// symlink put in its place).
fn refusal(path: &Path, own: &Protected) -> Option<String> {
    if let Some(what) = own.check(path) {
        return Some(format!("not touched: it is buddy's own {what}"));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let now = crate::tools::protect::resolve(dir);
        if now != dir {
            return Some(format!(
                "not touched: {} now leads to {} (a symlink put in its path since buddy wrote it)",
                dir.display(),
                now.display()
            ));
        }
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            Some("not touched: it is now a symbolic link, not the file buddy wrote".into())
        }
        Ok(m) if !m.is_file() => Some(format!(
            "not touched: it is now {}, not a regular file",
            crate::localfile::kind_of(m.file_type())
        )),
        _ => None,
    }
}

/// Whether regular file `path` holds `len` bytes hashing to `sha256`.
/// `hashes` caches each file's hash (none when unreadable): it is read
/// only when its length matches, so the hash is of the whole file.
fn holds(path: &str, sha256: &str, len: u64, hashes: &mut HashMap<String, Option<String>>) -> bool {
    let same_len = fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == len);
    same_len
        && hashes
            .entry(path.to_string())
            .or_insert_with(|| {
                crate::localfile::read_regular(Path::new(path), len)
                    .ok()
                    .map(|b| sha256_hex(&b))
            })
            .as_deref()
            == Some(sha256)
}

/// Whether the file of record `r` (on this host) no longer holds what
/// buddy last wrote there (a tool or a rewind). A store from before these
/// notes says nothing, so nothing is flagged.
fn changed_since(
    index: &Index,
    r: &FileRecord,
    hashes: &mut HashMap<String, Option<String>>,
) -> bool {
    let last = index
        .records
        .iter()
        .rev()
        .filter(|o| o.path == r.path && o.target == r.target)
        .find_map(|o| o.wrote.as_ref());
    match last {
        None => false,
        Some(After::Missing) => fs::symlink_metadata(&r.path).is_ok(),
        Some(After::Content { sha256, len }) => !holds(&r.path, sha256, *len, hashes),
    }
}

/// What restoring to before `turn` (or undo point `turn`) would do.
fn plan_of(
    index: &Index,
    turn: &str,
    here: Option<&str>,
    hashes: &mut HashMap<String, Option<String>>,
) -> Vec<FileRestore> {
    CheckpointStore::since(index, turn)
        .into_iter()
        .map(|r| {
            let action = action_for(index, r, here, hashes);
            let changed = r.target.is_none()
                && matches!(action, FileAction::Restore { .. } | FileAction::Delete)
                && changed_since(index, r, hashes);
            FileRestore {
                path: r.path.clone(),
                action,
                changed_since: changed,
            }
        })
        .collect()
}

enum Current<'a> {
    Missing,
    Bytes(Vec<u8>),
    /// What a tool read on a remote target.
    Borrowed(&'a [u8]),
    /// Not kept, and why.
    Other(String),
}

impl Current<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Current::Bytes(b) => b,
            Current::Borrowed(b) => b,
            Current::Missing | Current::Other(_) => &[],
        }
    }
}

fn current(path: &Path, max_file: u64) -> io::Result<Current<'static>> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Current::Missing),
        Err(e) => return Ok(Current::Other(format!("it could not be read ({e})"))),
    };
    if !meta.is_file() {
        return Ok(Current::Other(format!(
            "it was {}, not a regular file",
            crate::localfile::kind_of(meta.file_type())
        )));
    }
    if meta.len() > max_file {
        return Ok(Current::Other(too_large(meta.len(), max_file)));
    }
    match crate::localfile::read_regular(path, max_file) {
        Ok(b) => Ok(Current::Bytes(b)),
        Err(e) => Ok(Current::Other(format!("it could not be read ({e})"))),
    }
}

/// What a rewind would do to `r.path` now. `hashes` holds the SHA-256 of
/// files read so far (none when unreadable), so a listing reads each once.
fn action_for(
    index: &Index,
    r: &FileRecord,
    here: Option<&str>,
    hashes: &mut HashMap<String, Option<String>>,
) -> FileAction {
    if let Some(target) = &r.target {
        if here != Some(target.as_str()) {
            return FileAction::NotKept {
                reason: format!(
                    "it is on {target}, and this session now works {}",
                    here.map_or_else(|| "on this host".to_string(), |h| format!("on {h}"))
                ),
            };
        }
        // Not looked at from here (a round trip per file per listing): a
        // file already as it was is written back unchanged.
        return match &r.before {
            Before::Missing => FileAction::Delete,
            Before::Kept { sha256, len } if index.blobs.contains_key(sha256) => {
                FileAction::Restore { bytes: *len }
            }
            Before::Kept { .. } => FileAction::NotKept {
                reason: "its content is missing from the checkpoint store".into(),
            },
            Before::NotKept { reason } => FileAction::NotKept {
                reason: reason.clone(),
            },
        };
    }
    match &r.before {
        Before::Missing if fs::symlink_metadata(&r.path).is_err() => FileAction::Unchanged,
        Before::Missing => FileAction::Delete,
        Before::Kept { sha256, len } => {
            // Only a file of the same length can be the same: nothing else
            // is read, however large it grew.
            let same = holds(&r.path, sha256, *len, hashes);
            if same {
                FileAction::Unchanged
            } else if !index.blobs.contains_key(sha256) {
                FileAction::NotKept {
                    reason: "its content is missing from the checkpoint store".into(),
                }
            } else {
                FileAction::Restore { bytes: *len }
            }
        }
        Before::NotKept { reason } => FileAction::NotKept {
            reason: reason.clone(),
        },
    }
}

/// Replaces `path` with `bytes` as the file tools do: atomically, keeping
/// the mode of the file there.
fn write_back(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::atomic_file::replace(path, bytes, crate::atomic_file::Mode::Keep { new: 0o666 })
}

#[async_trait]
impl Checkpoints for CheckpointStore {
    async fn before_change(
        &self,
        turn: &str,
        paths: &[PathBuf],
        after: &[After],
        remote: Option<Remote>,
    ) -> Result<(), CheckpointError> {
        // The sync waits on the disk: off the runtime's workers.
        let store = self.clone();
        let (turn, paths, after) = (turn.to_string(), paths.to_vec(), after.to_vec());
        tokio::task::spawn_blocking(move || store.keep(&turn, &paths, &after, remote.as_ref()))
            .await
            .map_err(|e| CheckpointError::Task(e.to_string()))??;
        Ok(())
    }

    fn plan(
        &self,
        turns: &[String],
        here: Option<&str>,
    ) -> Result<Vec<Vec<FileRestore>>, CheckpointError> {
        Ok(self.plan_turns(turns, here)?)
    }

    fn undo_point(&self, here: Option<&str>) -> Result<Option<UndoPoint>, CheckpointError> {
        Ok(self.last_undo(here)?)
    }

    async fn restore(
        &self,
        turn: &str,
        remote: Option<&dyn TargetFiles>,
        own: Arc<Protected>,
    ) -> Result<Vec<FileRestore>, CheckpointError> {
        let store = self.clone();
        let (turn, here) = (turn.to_string(), remote.map(|r| r.actor()));
        let (mut out, pending, undo_id) =
            tokio::task::spawn_blocking(move || store.restore_here(&turn, here.as_deref(), &own))
                .await
                .map_err(|e| CheckpointError::Task(e.to_string()))??;
        // Only files on `remote` are pending, so it is there.
        let Some(remote) = remote else {
            return Ok(out);
        };
        if pending.is_empty() {
            return Ok(out);
        }
        // What the remote files hold now is kept first, under the same
        // undo point, read through the target as the tools read them.
        let mut paths = Vec::with_capacity(pending.len());
        let mut now = Vec::with_capacity(pending.len());
        let mut after = Vec::with_capacity(pending.len());
        for (i, content) in &pending {
            let Some(file) = out.get(*i) else { continue };
            let path = PathBuf::from(&file.path);
            now.push(remote.read(&path, self.max_file).await);
            after.push(After::of(content.as_deref()));
            paths.push(path);
        }
        let kept = Remote {
            actor: remote.actor(),
            now,
        };
        let store = self.clone();
        let not_kept: Vec<Option<String>> = kept
            .now
            .iter()
            .map(|p| match p {
                Prior::NotKept(reason) => Some(reason.clone()),
                Prior::Content(b) if b.len() as u64 > self.max_file => {
                    Some(too_large(b.len() as u64, self.max_file))
                }
                _ => None,
            })
            .collect();
        tokio::task::spawn_blocking(move || store.keep(&undo_id, &paths, &after, Some(&kept)))
            .await
            .map_err(|e| CheckpointError::Task(e.to_string()))??;
        for ((i, content), not_kept) in pending.into_iter().zip(not_kept) {
            let Some(file) = out.get_mut(i) else { continue };
            if let Some(reason) = not_kept {
                file.action = FileAction::Failed {
                    reason: format!(
                        "not touched: what is there now could not be kept first ({reason})"
                    ),
                };
                continue;
            }
            let path = PathBuf::from(&file.path);
            file.action = match content {
                None => match remote.remove(&path).await {
                    Ok(()) => FileAction::Delete,
                    Err(e) => FileAction::Failed {
                        reason: format!("cannot remove it: {e}"),
                    },
                },
                Some(bytes) => match remote.write(&path, &bytes).await {
                    Ok(()) => FileAction::Restore {
                        bytes: bytes.len() as u64,
                    },
                    Err(e) => FileAction::Failed {
                        reason: format!("cannot write it: {e}"),
                    },
                },
            };
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::checkpoint::TargetFileError;
    use std::os::unix::fs::PermissionsExt;

    fn tempdir(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "buddy-checkpoint-{label}-{}-{}",
            std::process::id(),
            crate::clock::now_unix_ms()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn actions(files: &[FileRestore]) -> Vec<(String, FileAction)> {
        files
            .iter()
            .map(|f| {
                let name = Path::new(&f.path).file_name().unwrap().to_string_lossy();
                (name.into_owned(), f.action.clone())
            })
            .collect()
    }

    #[test]
    fn the_content_before_a_turn_comes_back_and_new_files_go() {
        let d = tempdir("restore");
        let (a, new) = (d.join("a.txt"), d.join("new.txt"));
        fs::write(&a, "one\n").unwrap();
        fs::set_permissions(&a, fs::Permissions::from_mode(0o751)).unwrap();
        let store = CheckpointStore::new(d.join("s.checkpoints"));
        store
            .keep("t1", &[a.clone(), new.clone()], &[], None)
            .unwrap();
        fs::write(&a, "two\n").unwrap();
        fs::write(&new, "made\n").unwrap();
        // A later turn: restoring to before it leaves the first turn's work.
        store
            .keep("t2", std::slice::from_ref(&a), &[], None)
            .unwrap();
        fs::write(&a, "three\n").unwrap();
        // Read back by a store that never saw the writes (a restart).
        let store = CheckpointStore::new(d.join("s.checkpoints"));
        let plan = store.plan_turns(&["t1".into(), "t2".into()], None).unwrap();
        assert_eq!(
            actions(&plan[0]),
            [
                ("a.txt".into(), FileAction::Restore { bytes: 4 }),
                ("new.txt".into(), FileAction::Delete)
            ]
        );
        assert_eq!(
            actions(&plan[1]),
            [("a.txt".into(), FileAction::Restore { bytes: 4 })]
        );
        store.restore_turn("t2").unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "two\n");
        assert!(new.exists(), "turn 1's file stays");
        let done = store.restore_turn("t1").unwrap();
        assert_eq!(
            actions(&done),
            [
                ("a.txt".into(), FileAction::Restore { bytes: 4 }),
                ("new.txt".into(), FileAction::Delete)
            ]
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "one\n");
        assert_eq!(
            fs::metadata(&a).unwrap().permissions().mode() & 0o777,
            0o751
        );
        assert!(!new.exists());
        // Now as it was: nothing to do.
        let again = store.plan_turns(&["t1".into()], None).unwrap();
        assert!(again[0].iter().all(|f| f.action == FileAction::Unchanged));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn content_is_kept_once_by_its_hash_and_once_per_turn() {
        let d = tempdir("dedupe");
        let paths: Vec<PathBuf> = (0..3).map(|i| d.join(format!("f{i}"))).collect();
        for p in &paths {
            fs::write(p, "same content everywhere").unwrap();
        }
        let log = d.join("s.checkpoints");
        let store = CheckpointStore::new(log.clone());
        store.keep("t1", &paths, &[], None).unwrap();
        let text = fs::read(&log).unwrap();
        let blobs = memchr::memmem::find_iter(&text, b"{\"blob\":").count();
        assert_eq!(blobs, 1, "{}", String::from_utf8_lossy(&text));
        assert_eq!(memchr::memmem::find_iter(&text, b"{\"file\":").count(), 3);
        // A second change in the same turn keeps nothing new: what counts
        // is the content before the turn's first change.
        let len = fs::metadata(&log).unwrap().len();
        fs::write(&paths[0], "changed").unwrap();
        store.keep("t1", &paths[..1], &[], None).unwrap();
        assert_eq!(fs::metadata(&log).unwrap().len(), len);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn past_the_caps_a_file_is_recorded_as_not_kept_and_rewind_says_so() {
        let d = tempdir("caps");
        let (big, small, other) = (d.join("big"), d.join("small"), d.join("other"));
        fs::write(&big, vec![b'x'; 700]).unwrap();
        assert!(
            other.to_string_lossy().len() < 200,
            "paths this long change the sums"
        );
        fs::write(&small, "ok").unwrap();
        fs::write(&other, vec![b'y'; 500]).unwrap();
        // Room for the first turn's records (a few hundred bytes with these
        // long paths), not for 500 bytes more.
        let store = CheckpointStore::with_limits(d.join("s.checkpoints"), 600, 1_000);
        store
            .keep("t1", &[big.clone(), small.clone()], &[], None)
            .unwrap();
        // The store holds about 600 bytes now: 500 more do not fit.
        store
            .keep("t2", std::slice::from_ref(&other), &[], None)
            .unwrap();
        for p in [&big, &small, &other] {
            fs::write(p, "new").unwrap();
        }
        let done = store.restore_turn("t1").unwrap();
        let got = actions(&done);
        assert!(
            matches!(&got[0].1, FileAction::NotKept { reason } if reason.contains("700 bytes")),
            "{got:?}"
        );
        assert_eq!(got[1].1, FileAction::Restore { bytes: 2 });
        assert!(
            matches!(&got[2].1, FileAction::NotKept { reason } if reason.contains("full")),
            "{got:?}"
        );
        assert_eq!(fs::read_to_string(&small).unwrap(), "ok");
        assert_eq!(fs::read_to_string(&big).unwrap(), "new");
        // A remote file is bounded the same way by the bytes the tool read.
        let remote = CheckpointStore::with_limits(d.join("r.checkpoints"), 600, 10_000);
        let on = |now| Remote {
            actor: "me@box".into(),
            now: vec![now],
        };
        remote
            .keep(
                "t1",
                std::slice::from_ref(&big),
                &[],
                Some(&on(Prior::Content(vec![b'x'; 700]))),
            )
            .unwrap();
        let plan = remote.plan_turns(&["t1".into()], Some("me@box")).unwrap();
        assert!(
            matches!(&plan[0][0].action, FileAction::NotKept { reason } if reason.contains("700 bytes")),
            "{plan:?}"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_torn_tail_is_dropped_and_what_came_before_still_restores() {
        let d = tempdir("torn");
        let a = d.join("a.txt");
        fs::write(&a, "kept before the crash").unwrap();
        let log = d.join("s.checkpoints");
        CheckpointStore::new(log.clone())
            .keep("t1", std::slice::from_ref(&a), &[], None)
            .unwrap();
        let good = fs::metadata(&log).unwrap().len();
        // A crash mid-append: a blob header and part of its bytes.
        let mut f = OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(b"{\"blob\":{\"sha256\":\"00\",\"len\":50}}\nonly part")
            .unwrap();
        drop(f);
        fs::write(&a, "written after").unwrap();
        let store = CheckpointStore::new(log.clone());
        assert_eq!(store.damage(), None, "a torn tail is no damage");
        // The next checkpoint cuts the tail off before appending.
        let b = d.join("b.txt");
        fs::write(&b, "bee").unwrap();
        store
            .keep("t2", std::slice::from_ref(&b), &[], None)
            .unwrap();
        let text = fs::read(&log).unwrap();
        assert!(memchr::memmem::find(&text, b"only part").is_none());
        assert!(text.len() as u64 > good);
        fs::write(&b, "changed").unwrap();
        let fresh = CheckpointStore::new(log);
        fresh.restore_turn("t1").unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "kept before the crash");
        assert_eq!(fs::read_to_string(&b).unwrap(), "bee");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_checkpoint_is_on_disk_before_keep_returns() {
        // The ordering the file tools rely on: once `keep` returned, the
        // store as read by another process already restores the old
        // content, whatever happens to the file afterwards.
        let d = tempdir("order");
        let a = d.join("a.txt");
        fs::write(&a, "old").unwrap();
        let log = d.join("s.checkpoints");
        let store = CheckpointStore::new(log.clone());
        store
            .keep("t1", std::slice::from_ref(&a), &[], None)
            .unwrap();
        let bytes = fs::read(&log).unwrap();
        let (index, damage) = read_index(&bytes[..], bytes.len() as u64).unwrap();
        assert_eq!(damage, None);
        assert_eq!(index.good_len, bytes.len() as u64);
        assert_eq!(
            index.records[0].before,
            Before::Kept {
                sha256: sha256_hex(b"old"),
                len: 3
            }
        );
        // Damage in the middle is reported, not trusted.
        let mut bad = bytes.clone();
        let at = memchr::memmem::find(&bad, b"{\"file\":").unwrap();
        bad[at] = b'#';
        let (index, damage) = read_index(&bad[..], bad.len() as u64).unwrap();
        assert!(damage.is_some());
        assert!(index.records.is_empty());
        fs::remove_dir_all(&d).unwrap();
    }

    /// A log that keeps records and blobs apart, as the database does.
    #[derive(Default, Clone)]
    struct Rows {
        kept: Arc<Mutex<Kept>>,
    }

    #[derive(Default)]
    struct Kept {
        records: Vec<FileRecord>,
        blobs: HashMap<String, Vec<u8>>,
        /// Whether each append was to be durable.
        durable: Vec<bool>,
    }

    impl CheckpointLog for Rows {
        fn read(&mut self) -> io::Result<(Index, Option<String>)> {
            let kept = self.kept.lock().unwrap();
            let blobs = kept
                .blobs
                .iter()
                .map(|(k, v)| (k.clone(), v.len() as u64))
                .collect();
            Ok((Index::of_parts(kept.records.clone(), blobs)?, None))
        }

        fn append(&mut self, index: &Index, batch: &Batch<'_>) -> io::Result<u64> {
            let mut kept = self.kept.lock().unwrap();
            for (sha, offset, len) in batch.blobs {
                let bytes = &batch.bytes[*offset as usize..(offset + len) as usize];
                kept.blobs.insert(sha.clone(), bytes.to_vec());
            }
            kept.records.extend(batch.records.iter().cloned());
            kept.durable.push(batch.durable);
            Ok(index.size())
        }

        fn blob(&mut self, sha256: &str, _at: (u64, u64)) -> io::Result<Vec<u8>> {
            let kept = self.kept.lock().unwrap();
            kept.blobs
                .get(sha256)
                .cloned()
                .ok_or_else(|| io::Error::other("missing"))
        }
    }

    #[test]
    fn a_store_kept_apart_restores_as_the_file_does_and_counts_its_size_alike() {
        let d = tempdir("rows");
        let (a, b) = (d.join("a.txt"), d.join("b.txt"));
        fs::write(&a, "old a").unwrap();
        let rows = Rows::default();
        let apart = CheckpointStore::in_log(Box::new(rows.clone()));
        let file = CheckpointStore::new(d.join("s.checkpoints"));
        let paths = [a.clone(), b.clone()];
        let after = [After::of(Some(b"new a")), After::of(Some(b"new b"))];
        for store in [&apart, &file] {
            store.keep("t1", &paths, &after, None).unwrap();
            // A later change in the same turn notes only what it wrote.
            store
                .keep(
                    "t1",
                    std::slice::from_ref(&a),
                    &[After::of(Some(b"newer"))],
                    None,
                )
                .unwrap();
        }
        fs::write(&a, "newer").unwrap();
        fs::write(&b, "new b").unwrap();
        // The state before the change had to be durable; the later note not.
        assert_eq!(rows.kept.lock().unwrap().durable, vec![true, false]);
        // Read back afresh, the size is what the file holds: one bound.
        let (index, damage) = rows.clone().read().unwrap();
        assert_eq!(damage, None);
        let on_disk = fs::metadata(d.join("s.checkpoints")).unwrap().len();
        assert_eq!(index.size(), on_disk);
        let again = CheckpointStore::in_log(Box::new(rows));
        let done = again.restore_turn("t1").unwrap();
        assert_eq!(
            actions(&done),
            vec![
                ("a.txt".to_string(), FileAction::Restore { bytes: 5 }),
                ("b.txt".to_string(), FileAction::Delete),
            ]
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "old a");
        assert!(!b.exists());
        fs::remove_dir_all(&d).unwrap();
    }

    /// A tool's change as the file tools make it: checkpoint (with what it
    /// writes), then the write.
    fn tool_writes(store: &CheckpointStore, turn: &str, path: &Path, text: &str) {
        let after = [After::of(Some(text.as_bytes()))];
        store
            .keep(turn, &[path.to_path_buf()], &after, None)
            .unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_rewind_keeps_the_users_later_work_flags_it_and_can_be_undone() {
        let d = tempdir("undo");
        let (a, notes) = (d.join("a.txt"), d.join("notes.md"));
        fs::write(&a, "before\n").unwrap();
        let store = CheckpointStore::new(d.join("s.checkpoints"));
        tool_writes(&store, "t1", &a, "by buddy\n");
        tool_writes(&store, "t1", &notes, "notes by buddy\n");
        // Unflagged while the files are as buddy left them.
        let plan = store.plan_turns(&["t1".into()], None).unwrap();
        assert!(plan[0].iter().all(|f| !f.changed_since), "{plan:?}");
        // The user works on both outside buddy.
        fs::write(&a, "the user's edit\n").unwrap();
        fs::write(&notes, "the user's notes\n").unwrap();
        let plan = store.plan_turns(&["t1".into()], None).unwrap();
        assert!(plan[0].iter().all(|f| f.changed_since), "{plan:?}");
        let done = store.restore_turn("t1").unwrap();
        assert_eq!(
            actions(&done),
            [
                ("a.txt".into(), FileAction::Restore { bytes: 7 }),
                ("notes.md".into(), FileAction::Delete)
            ]
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "before\n");
        assert!(!notes.exists());
        // Read back after a restart: the undo point puts the user's work back.
        let store = CheckpointStore::new(d.join("s.checkpoints"));
        let undo = store.last_undo(None).unwrap().expect("an undo point");
        assert!(is_undo(&undo.id));
        assert_eq!(
            actions(&undo.files),
            [
                ("a.txt".into(), FileAction::Restore { bytes: 16 }),
                ("notes.md".into(), FileAction::Restore { bytes: 17 })
            ]
        );
        // The rewind's own writes count as buddy's: nothing changed since.
        assert!(undo.files.iter().all(|f| !f.changed_since), "{undo:?}");
        // A normal rewind never takes in the undo point.
        let plan = store.plan_turns(&["t1".into()], None).unwrap();
        assert!(plan[0].iter().all(|f| f.action == FileAction::Unchanged));
        store.restore_turn(&undo.id).unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "the user's edit\n");
        assert_eq!(fs::read_to_string(&notes).unwrap(), "the user's notes\n");
        // And undoing the undo goes back again.
        let again = store.last_undo(None).unwrap().expect("a second undo point");
        assert!(again.id > undo.id, "{} {}", again.id, undo.id);
        store.restore_turn(&again.id).unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "before\n");
        assert!(!notes.exists());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_rewind_changes_only_what_a_file_tool_could() {
        let d = tempdir("guard");
        let (work, outside) = (d.join("work"), d.join("outside"));
        fs::create_dir_all(work.join("sub")).unwrap();
        fs::create_dir_all(work.join("cfg")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        let store = CheckpointStore::new(d.join("s.checkpoints"));
        // buddy creates sub/x.txt and cfg/trusted.json, and rewrites fifo.txt.
        tool_writes(&store, "t1", &work.join("sub/x.txt"), "made\n");
        tool_writes(&store, "t1", &work.join("cfg/trusted.json"), "{}\n");
        fs::write(work.join("fifo.txt"), "old\n").unwrap();
        tool_writes(&store, "t1", &work.join("fifo.txt"), "new\n");
        tool_writes(&store, "t1", &work.join("own.toml"), "[x]\n");
        // Later commands put symlinks to a directory outside in their place,
        // where files of the same names live, and a FIFO for fifo.txt.
        for dir in ["sub", "cfg"] {
            fs::remove_dir_all(work.join(dir)).unwrap();
            std::os::unix::fs::symlink(&outside, work.join(dir)).unwrap();
        }
        fs::write(outside.join("x.txt"), "not buddy's\n").unwrap();
        fs::write(outside.join("trusted.json"), "{\"trusted\": []}\n").unwrap();
        fs::remove_file(work.join("fifo.txt")).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(work.join("fifo.txt"))
            .status()
            .unwrap()
            .success());
        let own = Protected::new().file("config file", &work.join("own.toml"));
        let (done, _, _) = store.restore_here("t1", None, &own).unwrap();
        let reasons: Vec<String> = done
            .iter()
            .map(|f| match &f.action {
                FileAction::Failed { reason } => reason.clone(),
                other => panic!("{}: {other:?}", f.path),
            })
            .collect();
        assert!(reasons[0].contains("now leads to"), "{reasons:?}");
        assert!(reasons[1].contains("now leads to"), "{reasons:?}");
        assert!(reasons[2].contains("a FIFO"), "{reasons:?}");
        assert!(
            reasons[3].contains("buddy's own config file"),
            "{reasons:?}"
        );
        assert_eq!(
            fs::read_to_string(outside.join("x.txt")).unwrap(),
            "not buddy's\n"
        );
        assert_eq!(
            fs::read_to_string(outside.join("trusted.json")).unwrap(),
            "{\"trusted\": []}\n"
        );
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(work.join("fifo.txt"))
            .unwrap()
            .file_type()
            .is_fifo());
        assert_eq!(fs::read_to_string(work.join("own.toml")).unwrap(), "[x]\n");
        fs::remove_dir_all(&d).unwrap();
    }

    /// Writes and removals a rewind sends to a remote target, recorded.
    #[derive(Default)]
    struct FakeTarget {
        done: Mutex<Vec<(String, Option<Vec<u8>>)>>,
    }

    #[async_trait]
    impl TargetFiles for FakeTarget {
        fn actor(&self) -> String {
            "me@box".into()
        }
        async fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), TargetFileError> {
            let mut done = self.done.lock().unwrap();
            done.push((path.display().to_string(), Some(bytes.to_vec())));
            Ok(())
        }
        async fn remove(&self, path: &Path) -> Result<(), TargetFileError> {
            let mut done = self.done.lock().unwrap();
            done.push((path.display().to_string(), None));
            Ok(())
        }
        async fn read(&self, _: &Path, _: u64) -> Prior {
            Prior::Content(b"as it is now".to_vec())
        }
    }

    #[tokio::test]
    async fn remote_files_keep_their_content_and_go_back_through_their_target_only() {
        let d = tempdir("remote");
        let store = CheckpointStore::new(d.join("s.checkpoints"));
        let paths = [PathBuf::from("/srv/a.txt"), PathBuf::from("/srv/new.txt")];
        let remote = Remote {
            actor: "me@box".into(),
            now: vec![Prior::Content(b"old\r\nbytes".to_vec()), Prior::Missing],
        };
        store
            .before_change("t1", &paths, &[], Some(remote))
            .await
            .unwrap();
        // Restarted: the records say where the files are.
        let store = CheckpointStore::new(d.join("s.checkpoints"));
        let elsewhere = store.plan(&["t1".into()], None).unwrap();
        assert!(
            elsewhere[0].iter().all(|f| matches!(&f.action,
                FileAction::NotKept { reason } if reason.contains("on me@box, and this session now works on this host"))),
            "{elsewhere:?}"
        );
        let plan = store.plan(&["t1".into()], Some("me@box")).unwrap();
        assert_eq!(
            actions(&plan[0]),
            [
                ("a.txt".into(), FileAction::Restore { bytes: 10 }),
                ("new.txt".into(), FileAction::Delete)
            ]
        );
        // Nothing on this host is touched without the target.
        assert!(store
            .restore_turn("t1")
            .unwrap()
            .iter()
            .all(|f| matches!(f.action, FileAction::NotKept { .. })));
        let target = FakeTarget::default();
        let done = store
            .restore("t1", Some(&target), Default::default())
            .await
            .unwrap();
        assert_eq!(actions(&done), actions(&plan[0]));
        assert_eq!(
            *target.done.lock().unwrap(),
            [
                ("/srv/a.txt".to_string(), Some(b"old\r\nbytes".to_vec())),
                ("/srv/new.txt".to_string(), None)
            ]
        );
        fs::remove_dir_all(&d).unwrap();
    }
}
