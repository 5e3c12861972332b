//! Sessions: every conversation saved as it happens, so it can be listed and
//! continued. A `Store` is the directory of session files for a working
//! directory (`.buddyx/sessions`, or a legacy `.agentx/sessions`); a `Session`
//! is one open, locked session file that the agent appends to through the
//! `HistorySink` trait. The file format lives in `journal`. The directory
//! ignores itself (a `.gitignore` of `*` written with the first session), so
//! transcripts stay out of the project's repository.
//!
//! This module does not know the REPL or exec; it stores messages and totals
//! and hands them back, repaired so a provider accepts them.

pub mod checkpoint;
pub mod error;
pub mod journal;
pub mod postgres;

pub use error::{out_of_resources, SessionError};

use crate::agent::{repair_history_with, HistorySink, HostedError, TokenTracker};
use crate::clock;
use crate::localfile::{self, ReadError};
use crate::tools::checkpoint::Checkpoints;
use crate::wire::{Message, Role};
use checkpoint::CheckpointStore;
use journal::{Header, RecordRef, RecordSink, SavedTokens, TurnMark, Writer};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

pub const DIR: &str = ".buddyx";
pub const LEGACY_DIR: &str = ".agentx";
const EXT: &str = "jsonl";
/// How much of a file's end a listing reads to find its last turn mark: a
/// little first, more if the last turn was big, then the whole file.
const SMALL_TAIL_WINDOW: u64 = 4 * 1024;
const TAIL_WINDOW: u64 = 64 * 1024;
/// The largest session file buddy loads. A session holds its whole transcript
/// (tool outputs are capped at a few KiB each), so real ones stay far below;
/// the bound keeps a wrong file from filling memory.
pub const MAX_SESSION_BYTES: u64 = 256 * 1024 * 1024;
/// Characters of the first prompt kept as a session's title.
const TITLE_CHARS: usize = 60;

/// What a session records about the model it talks to, and what it must keep
/// out of its file.
#[derive(Debug, Clone, Default)]
pub struct SessionInfo {
    pub model: String,
    pub profile: String,
    pub cwd: String,
    /// Values (API keys) replaced by `[REDACTED]` wherever they would be written.
    pub secrets: Vec<String>,
    /// The front end writing (`exec`, `repl`, `serve`, `editor`), recorded
    /// with each turn.
    pub origin: Option<String>,
}

/// The session files of one working directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    /// The directory given a `.gitignore` of `*` when sessions are written
    /// (`.buddyx/`), so transcripts are never committed by accident.
    ignored: PathBuf,
}

/// A session opened for continuing, with its history ready for the agent.
pub struct Opened {
    pub session: Session,
    /// The saved conversation as compacted, with results filled in for
    /// unanswered tool calls.
    pub history: Vec<Message>,
    /// How many of `history`'s messages are already in the file (as message
    /// records or as part of a compaction); only the repairs after them are not.
    pub saved: usize,
    pub tokens: TokenTracker,
    pub last_turn: Option<TurnMark>,
    /// Things the user should know (a dropped torn record, repairs, permissions).
    pub warnings: Vec<String>,
    /// Sub-agents' histories by the parent's call id (`subagent` records).
    pub subagents: Vec<(String, Vec<Message>)>,
    /// The plan as last written (`todo_write`); empty when none.
    pub plan: Vec<crate::agent::protocol::PlanEntry>,
}

/// Where the images of the session whose journal is `journal` are kept:
/// `<id>.images/` beside `<id>.jsonl`.
pub fn images_dir(journal: &Path) -> PathBuf {
    journal.with_extension("images")
}

/// Keeps a copy of `image` in `dir` under its content address
/// (`<sha256>.<ext>`), unless one is there already: the same screenshot
/// attached twice is stored once. Written whole or not at all.
fn store_image(dir: &Path, image: &crate::wire::Image) -> io::Result<()> {
    let (Some(name), Some(data)) = (image.stored_name(), image.data.as_ref()) else {
        // A reference loaded without its copy: nothing to keep.
        return Ok(());
    };
    let path = dir.join(name);
    if path.exists() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    crate::atomic_file::replace(&path, data, crate::atomic_file::PRIVATE)
}

/// Copies every image kept in `from` into `to` (a fork's own copy, so
/// deleting either session leaves the other whole). Each copy is bounded as
/// an attached image is; anything else in `from` (not a regular file, too
/// large) is skipped, as a resume would not load it either.
fn copy_images(from: &Path, to: &Path) -> io::Result<()> {
    let entries = match fs::read_dir(from) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        // A leftover temporary file of an interrupted write is no image.
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let dest = to.join(entry.file_name());
        let Ok(bytes) = localfile::read_regular(&entry.path(), crate::wire::image::MAX_IMAGE_BYTES)
        else {
            continue;
        };
        if !dest.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(to)?;
            crate::atomic_file::replace(&dest, &bytes, crate::atomic_file::PRIVATE)?;
        }
    }
    Ok(())
}

/// Gives every image reference of `history` its bytes from `dir`. A copy
/// that is missing, unreadable or not what its hash says stays without
/// bytes (the protocols send a placeholder text in its place), with one
/// warning for the lot.
fn load_images(history: &mut [Message], dir: &Path, id: &str, warnings: &mut Vec<String>) {
    let mut missing = Vec::new();
    for image in history.iter_mut().flat_map(|m| m.images.iter_mut()) {
        let Some(name) = image.stored_name() else {
            missing.push(image.name.clone());
            continue;
        };
        let read = localfile::read_regular(&dir.join(&name), crate::wire::image::MAX_IMAGE_BYTES)
            .ok()
            .and_then(|bytes| crate::wire::Image::from_bytes(&image.name, bytes))
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
            dir.display()
        ));
    }
}

/// One line of `buddy sessions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub id: String,
    /// Unix seconds of the last write.
    pub used: u64,
    pub messages: u64,
    /// Size of the file.
    pub bytes: u64,
    pub model: String,
    pub title: String,
    /// The front end of the last turn, when it was recorded.
    pub origin: Option<String>,
}

/// One session file of a listing, in the listing's order, read or not.
#[derive(Debug)]
pub struct Entry {
    pub id: String,
    /// Unix seconds of the last write.
    pub used: u64,
    pub summary: Result<Summary, SessionError>,
}

impl Store {
    /// The store for `cwd`: `.buddyx/sessions`, unless only a legacy `.agentx/`
    /// exists, which is then reused.
    pub fn for_workdir(cwd: &Path) -> Store {
        let legacy = cwd.join(LEGACY_DIR);
        let root = if !cwd.join(DIR).exists() && legacy.is_dir() {
            legacy
        } else {
            cwd.join(DIR)
        };
        Store {
            dir: root.join("sessions"),
            ignored: root,
        }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Store {
        let dir = dir.into();
        Store {
            ignored: dir.clone(),
            dir,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.{EXT}"))
    }

    /// Where session `id` keeps the files its tools changed (beside its
    /// journal; `checkpoint` says what is in it).
    pub fn checkpoints_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.{}", checkpoint::EXT))
    }

    /// Creates the directory (0700, parents too) and tightens an existing one.
    fn ensure_dir(&self) -> Result<Vec<String>, SessionError> {
        let mut warnings = Vec::new();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| SessionError::io("create the session directory", &self.dir, e))?;
        if let Some(w) = restrict(&self.dir, 0o700)? {
            warnings.push(w);
        }
        if let Some(w) = ignore_itself(&self.ignored) {
            warnings.push(w);
        }
        Ok(warnings)
    }

    /// Starts a new session file, locked for this process.
    pub fn create(&self, info: SessionInfo) -> Result<(Session, Vec<String>), SessionError> {
        self.create_from(info, None)
    }

    /// Branches a session into a new one that continues separately: its
    /// file starts with `history` (the conversation as it stands, compacted
    /// and rewound) and the token totals, and it gets a copy of the images
    /// and of the checkpoint store of `from`, so the shared past's images
    /// load and rewinding into it works in both. `from` itself is only read.
    pub fn fork(
        &self,
        from: &str,
        history: &[Message],
        tokens: &TokenTracker,
        info: SessionInfo,
    ) -> Result<(Session, Vec<String>), SessionError> {
        let (mut session, warnings) = self.create_from(info, Some(from.to_string()))?;
        // The images before the records that name them, as in every write.
        let images = images_dir(&session.path);
        copy_images(&images_dir(&self.path_of(from)), &images)
            .map_err(|e| SessionError::io("copy the images to", &images, e))?;
        session
            .write(history, tokens, true)
            .map_err(|e| SessionError::io("write session file", &session.path, e))?;
        let dest = self.checkpoints_of(&session.id);
        CheckpointStore::new(self.checkpoints_of(from))
            .copy_to(&dest)
            .map_err(|e| SessionError::io("copy the checkpoints to", &dest, e))?;
        Ok((session, warnings))
    }

    fn create_from(
        &self,
        info: SessionInfo,
        forked_from: Option<String>,
    ) -> Result<(Session, Vec<String>), SessionError> {
        let warnings = self.ensure_dir()?;
        let now = clock::now_unix();
        let mut attempt = 0;
        let (id, path, file) = loop {
            let id = new_id(now);
            let path = self.path_of(&id);
            match OpenOptions::new()
                .read(true)
                .append(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(f) => break (id, path, f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 8 => {
                    attempt += 1;
                }
                Err(e) => return Err(SessionError::io("create session file", &path, e)),
            }
        };
        lock(&file, &id, &path)?;
        let place = Place {
            images: images_dir(&path),
            checkpoints: self.checkpoints_of(&id),
            path,
        };
        let session = start(id, info, place, Box::new(Writer::new(file, 0)), forked_from)?;
        Ok((session, warnings))
    }

    /// Session ids with the time each file was last written, newest first.
    pub fn ids(&self) -> Result<Vec<(String, SystemTime)>, SessionError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(SessionError::io("read the session directory", &self.dir, e)),
        };
        let mut ids = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(&format!(".{EXT}")))
            else {
                continue;
            };
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            ids.push((id.to_string(), modified));
        }
        ids.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        Ok(ids)
    }

    /// Deletes session `id` (an exact id): its journal, images and
    /// checkpoints, all inside this store's directory. The journal is locked
    /// first, so a session another process holds is refused (`Locked`) and
    /// left whole; a name that is not a plain id is `NotFound`.
    pub fn delete(&self, id: &str) -> Result<(), SessionError> {
        let not_found = || SessionError::NotFound {
            query: id.to_string(),
            dir: self.dir.clone(),
        };
        // A path separator or a leading dot could name something outside the
        // directory, or one of its own files.
        if id.is_empty() || id.starts_with('.') || id.contains(['/', '\\', '\0']) {
            return Err(not_found());
        }
        let path = self.path_of(id);
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => not_found(),
                _ => SessionError::io("open session file", &path, e),
            })?;
        lock(&file, id, &path)?;
        // Beside-files first: a journal left without them still loads, the
        // other way round they would be orphans no listing shows.
        for dir in [images_dir(&path), self.checkpoints_of(id)] {
            match fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(SessionError::io("delete", &dir, e)),
            }
        }
        fs::remove_file(&path).map_err(|e| SessionError::io("delete session file", &path, e))
    }

    /// The id `query` names: `last` (the most recently used), an exact id, or
    /// a prefix of exactly one id.
    pub fn resolve(&self, query: &str) -> Result<String, SessionError> {
        // An exact id is one lookup: listing and stat-ing every session would
        // make each request of `buddy serve` cost O(sessions).
        if query != "last"
            && !query.is_empty()
            && !query.starts_with('.')
            && !query.contains(['/', '\\', '\0'])
            && fs::symlink_metadata(self.path_of(query)).is_ok()
        {
            return Ok(query.to_string());
        }
        let ids = self.ids()?;
        if query == "last" {
            return ids.into_iter().next().map(|(id, _)| id).ok_or_else(|| {
                SessionError::NoSessions {
                    dir: self.dir.clone(),
                }
            });
        }
        if ids.iter().any(|(id, _)| id == query) {
            return Ok(query.to_string());
        }
        let mut matches: Vec<String> = ids
            .into_iter()
            .filter(|(id, _)| !query.is_empty() && id.starts_with(query))
            .map(|(id, _)| id)
            .collect();
        match matches.len() {
            0 => Err(SessionError::NotFound {
                query: query.to_string(),
                dir: self.dir.clone(),
            }),
            1 => Ok(matches.remove(0)),
            _ => {
                matches.sort();
                Err(SessionError::Ambiguous {
                    query: query.to_string(),
                    matches,
                })
            }
        }
    }

    /// Session `id`'s title as a listing shows it.
    pub fn title(&self, id: &str) -> Result<String, SessionError> {
        self.summarize(id, 0).map(|s| s.title)
    }

    /// Session `id`'s conversation as a resume would load it, read without
    /// taking its lock (it may be in use): for showing, not for continuing.
    pub fn read_history(&self, id: &str) -> Result<Vec<Message>, SessionError> {
        let path = self.path_of(id);
        let bytes =
            localfile::read_regular(&path, MAX_SESSION_BYTES).map_err(|e| read_error(&path, e))?;
        history_of(&bytes, &path)
    }

    /// `read_history`, with the sub-agents' histories by the parent's call
    /// id: what an export shows.
    #[allow(clippy::type_complexity)]
    pub fn read_transcript(
        &self,
        id: &str,
    ) -> Result<(Vec<Message>, Vec<(String, Vec<Message>)>), SessionError> {
        let path = self.path_of(id);
        let bytes =
            localfile::read_regular(&path, MAX_SESSION_BYTES).map_err(|e| read_error(&path, e))?;
        transcript_of(&bytes, &path)
    }

    /// Session `id`'s conversation (its images' bytes loaded) and token
    /// totals, read without taking its lock (for a fork, which leaves the
    /// original as it is), and what the user should know about it.
    pub fn read_saved(
        &self,
        id: &str,
    ) -> Result<(Vec<Message>, TokenTracker, Vec<String>), SessionError> {
        let path = self.path_of(id);
        let bytes =
            localfile::read_regular(&path, MAX_SESSION_BYTES).map_err(|e| read_error(&path, e))?;
        let mut parsed = journal::parse(&bytes).map_err(|e| parse_error(&path, e))?;
        let mut history: Vec<Message> = std::mem::take(&mut parsed.messages)
            .into_iter()
            .filter(|m| m.role != Role::System)
            .collect();
        repair(&mut history, &parsed);
        // The images' bytes too: a fork's first request carries them.
        let mut warnings = Vec::new();
        load_images(&mut history, &images_dir(&path), id, &mut warnings);
        let tokens = parsed
            .last_turn
            .as_ref()
            .map(|t| t.tokens.tracker())
            .unwrap_or_default();
        Ok((history, tokens, warnings))
    }

    /// Opens session `id` for continuing: locks it, reads it, drops a torn
    /// last record, fills in results for unanswered tool calls, and makes sure
    /// only its owner can read it.
    pub fn open(&self, id: &str, info: SessionInfo) -> Result<Opened, SessionError> {
        let path = self.path_of(id);
        let mut warnings = self.ensure_dir()?;
        let file = localfile::open_regular(&path, |p| {
            OpenOptions::new().read(true).append(true).open(p)
        })
        .map_err(|e| read_error(&path, e))?;
        lock(&file, id, &path)?;
        let bytes =
            localfile::read_bounded(&file, MAX_SESSION_BYTES).map_err(|e| read_error(&path, e))?;
        let parsed = journal::parse(&bytes).map_err(|e| parse_error(&path, e))?;
        drop(bytes);
        if let Some(w) = restrict(&path, 0o600)? {
            warnings.push(w);
        }
        if parsed.dropped > 0 {
            // Only a crash mid-write leaves such a tail; it was never a whole record.
            file.set_len(parsed.good_len)
                .map_err(|e| SessionError::io("repair session file", &path, e))?;
            warnings.push(format!(
                "session {id}: dropped an incomplete last record ({} bytes), left by an interrupted save; everything before it is kept",
                parsed.dropped
            ));
        }
        let len = parsed.good_len;
        let place = Place {
            images: images_dir(&path),
            checkpoints: self.checkpoints_of(id),
            path,
        };
        assemble(
            id,
            parsed,
            info,
            place,
            Box::new(Writer::new(file, len)),
            warnings,
        )
    }
    /// Every session, most recently used first, and the files that could not be read.
    pub fn list(&self) -> Result<(Vec<Summary>, Vec<SessionError>), SessionError> {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for entry in self.entries()? {
            match entry.summary {
                Ok(s) => out.push(s),
                Err(e) => errors.push(e),
            }
        }
        Ok((out, errors))
    }

    /// Every session file, most recently used first, each with its summary
    /// or the reason it could not be read (for a picker that shows both).
    pub fn entries(&self) -> Result<Vec<Entry>, SessionError> {
        Ok(self
            .ids()?
            .into_iter()
            .map(|(id, modified)| {
                let used = modified
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let summary = self.summarize(&id, used);
                Entry { id, used, summary }
            })
            .collect())
    }

    /// Reads the end of a file for its last turn mark; only a file without one
    /// there (a crash in its first turn, or a giant last turn) is read whole.
    fn summarize(&self, id: &str, used: u64) -> Result<Summary, SessionError> {
        let path = self.path_of(id);
        // A FIFO or device here must not hang the listing.
        let mut file =
            localfile::open_regular(&path, |p| File::open(p)).map_err(|e| read_error(&path, e))?;
        let len = file
            .metadata()
            .map_err(|e| SessionError::io("read session file", &path, e))?
            .len();
        // The last turn mark is almost always in the last few KiB; a turn with
        // big tool results can push it further back.
        let mut tail = Vec::new();
        let mut start = len;
        for window in [SMALL_TAIL_WINDOW, TAIL_WINDOW] {
            start = len.saturating_sub(window);
            tail.clear();
            file.seek(SeekFrom::Start(start))
                .and_then(|_| file.read_to_end(&mut tail))
                .map_err(|e| SessionError::io("read session file", &path, e))?;
            if let Some((turn, after)) = journal::summarize_tail(&tail, start == 0) {
                return Ok(Summary {
                    id: id.to_string(),
                    used,
                    messages: turn.messages + after,
                    bytes: len,
                    model: turn.model,
                    title: turn.title,
                    origin: turn.origin,
                });
            }
            if start == 0 {
                break;
            }
        }
        if start == 0 {
            let parsed = journal::parse(&tail).map_err(|e| parse_error(&path, e))?;
            let origin = parsed.last_turn.as_ref().and_then(|t| t.origin.clone());
            return Ok(Summary {
                id: id.to_string(),
                used,
                messages: parsed.recorded,
                bytes: len,
                origin,
                model: parsed
                    .last_turn
                    .map(|t| t.model)
                    .or(parsed.header.map(|h| h.model))
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| "-".to_string()),
                title: parsed
                    .first_prompt
                    .as_deref()
                    .map(title_of)
                    .unwrap_or_default(),
            });
        }
        // No turn mark near the end of a big file (a crash in its first
        // turn, a giant last turn): read it as a stream, never whole.
        file.seek(SeekFrom::Start(0))
            .map_err(|e| SessionError::io("read session file", &path, e))?;
        let listed = journal::summarize_stream(io::BufReader::with_capacity(
            64 * 1024,
            (&file).take(MAX_SESSION_BYTES),
        ))
        .map_err(|e| SessionError::io("read session file", &path, e))?;
        Ok(Summary {
            id: id.to_string(),
            used,
            messages: listed.messages,
            bytes: len,
            model: listed.model.unwrap_or_else(|| "-".to_string()),
            // Only a file without a turn mark near its end gets here.
            origin: None,
            title: listed
                .first_prompt
                .as_deref()
                .map(title_of)
                .unwrap_or_default(),
        })
    }
}

fn read_error(path: &Path, e: ReadError) -> SessionError {
    let source = match e {
        ReadError::Io(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
    };
    SessionError::io("read session file", path, source)
}

/// Text of the result given on load to a tool call that was running when
/// buddy stopped (a kill, a crash): it may have done its work.
pub const INTERRUPTED_TOOL: &str = "interrupted: buddy stopped while this tool call was running; it may have run in part or in full, so check its effects before running it again";
/// Text of the result given on load to a tool call that never started.
pub const NOT_STARTED_TOOL: &str = "not run: buddy stopped before this tool call started";

/// Fills in results for unanswered tool calls: interrupted for those recorded
/// as started (and for every one in a version 1 file, which recorded no
/// starts), not run for the rest. Returns (interrupted, not run).
fn repair(history: &mut Vec<Message>, parsed: &journal::Parsed) -> (usize, usize) {
    let (mut ran, mut never) = (0, 0);
    let knows_starts = parsed.version() >= 2;
    repair_history_with(history, |id| {
        if !knows_starts || parsed.started.contains(id) {
            ran += 1;
            INTERRUPTED_TOOL
        } else {
            never += 1;
            NOT_STARTED_TOOL
        }
    });
    (ran, never)
}

pub(crate) fn parse_error(path: &Path, e: journal::ParseError) -> SessionError {
    match e {
        journal::ParseError::Corrupt { line, reason } => SessionError::Corrupt {
            path: path.to_path_buf(),
            line,
            reason,
        },
        journal::ParseError::NoHeader { line } => SessionError::Corrupt {
            path: path.to_path_buf(),
            line,
            reason: "it does not start with a session header".to_string(),
        },
        journal::ParseError::Newer { version } => SessionError::Newer {
            path: path.to_path_buf(),
            version,
        },
    }
}

/// Takes the advisory lock that keeps a second process from writing the session.
/// A lock held only for a moment (a child forked by this very process holds
/// a copy of the descriptor until it execs) is waited out, briefly; a lock
/// another buddy holds for its whole run is not.
fn lock(file: &File, id: &str, path: &Path) -> Result<(), SessionError> {
    let mut attempt = 0;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) if attempt < 10 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(SessionError::Locked {
                    id: id.to_string(),
                    path: path.to_path_buf(),
                })
            }
            Err(TryLockError::Error(e)) => {
                return Err(SessionError::io("lock session file", path, e))
            }
        }
    }
}

/// Removes group and other permissions from `path` if it has any, saying so.
/// What the sessions directory's `.gitignore` says: everything in it,
/// itself included, is ignored.
const GITIGNORE: &str = "# buddy's saved sessions: never committed\n*\n";

/// Writes `dir/.gitignore` unless one is there (a user's own is kept as it
/// is). A failure only costs the protection, so it is a warning.
fn ignore_itself(dir: &Path) -> Option<String> {
    let path = dir.join(".gitignore");
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| io::Write::write_all(&mut f, GITIGNORE.as_bytes()));
    match written {
        Ok(()) => None,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => None,
        Err(e) => Some(format!(
            "could not write {} (git may show the saved sessions): {e}",
            path.display()
        )),
    }
}

fn restrict(path: &Path, mode: u32) -> Result<Option<String>, SessionError> {
    let meta = fs::metadata(path).map_err(|e| SessionError::io("inspect", path, e))?;
    let current = meta.permissions().mode() & 0o777;
    if current & 0o077 == 0 {
        return Ok(None);
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| SessionError::io("restrict the permissions of", path, e))?;
    Ok(Some(format!(
        "{} was readable by others (mode {current:o}); restricted it to {mode:o}",
        path.display()
    )))
}

/// `YYYYMMDD-HHMMSS-xxxx`: sorts by creation time; the suffix keeps ids
/// made in the same second apart.
pub(crate) fn new_id(now: u64) -> String {
    let mut suffix = [0u8; 2];
    let random = File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut suffix))
        .is_ok();
    if !random {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mixed = nanos ^ std::process::id().rotate_left(16);
        suffix = [(mixed >> 8) as u8, mixed as u8];
    }
    format!(
        "{}-{:02x}{:02x}",
        clock::compact_utc(now),
        suffix[0],
        suffix[1]
    )
}

/// The first words of the first user message, on one line.
pub fn first_prompt_title(messages: &[Message]) -> Option<String> {
    messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| title_of(m.shown().unwrap_or(m.text())))
}

/// One line of at most `TITLE_CHARS` characters, `…` when cut.
fn title_of(prompt: &str) -> String {
    let flat = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= TITLE_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Where an open session keeps what is not its records: the name its
/// errors give (its file), its images and its checkpoints.
pub struct Place {
    pub path: PathBuf,
    pub images: PathBuf,
    pub checkpoints: PathBuf,
}

/// A session read from its records (`parsed`), ready for continuing: a
/// torn tail already dropped, results filled in for unanswered tool calls,
/// a header written when none was whole, and its further records going
/// to `writer`.
pub fn assemble(
    id: &str,
    mut parsed: journal::Parsed,
    info: SessionInfo,
    place: Place,
    mut writer: Box<dyn RecordSink>,
    mut warnings: Vec<String>,
) -> Result<Opened, SessionError> {
    let mut history: Vec<Message> = std::mem::take(&mut parsed.messages)
        .into_iter()
        .filter(|m| m.role != Role::System)
        .collect();
    let saved = history.len();
    load_images(&mut history, &place.images, id, &mut warnings);
    if parsed.interrupted > 0 {
        warnings.push(format!(
            "session {id}: an answer was cut off by an earlier stop; it is kept as far as it was shown, marked interrupted"
        ));
    }
    let (ran, never) = repair(&mut history, &parsed);
    if ran > 0 {
        warnings.push(format!(
            "session {id}: {ran} tool call(s) were running when buddy stopped; they are recorded as interrupted (they may have run)"
        ));
    }
    if never > 0 {
        warnings.push(format!(
            "session {id}: {never} tool call(s) never started; they are recorded as not run"
        ));
    }
    // From the file's first prompt: a compacted history starts with its summary.
    let title = parsed
        .last_turn
        .as_ref()
        .map(|t| t.title.clone())
        .filter(|t| !t.is_empty())
        .or_else(|| parsed.first_prompt.as_deref().map(title_of))
        .unwrap_or_default();
    let tokens = parsed
        .last_turn
        .as_ref()
        .map(|t| t.tokens.tracker())
        .unwrap_or_default();
    if parsed.header.is_none() {
        // The crash came before even the header was whole: start it again.
        let header = Header {
            version: journal::FORMAT_VERSION,
            id: id.to_string(),
            created: clock::now_unix(),
            cwd: info.cwd.clone(),
            model: info.model.clone(),
            forked_from: None,
        };
        let mut buf = Vec::new();
        journal::encode(RecordRef::Header(&header), &info.secrets, &mut buf)
            .and_then(|()| writer.append(&buf))
            .map_err(|e| SessionError::io("write session file", &place.path, e))?;
    }
    Ok(Opened {
        session: Session {
            checkpoints: CheckpointStore::new(place.checkpoints),
            id: id.to_string(),
            images: place.images,
            path: place.path,
            writer,
            info,
            title,
            count: parsed.recorded,
        },
        history,
        saved,
        tokens,
        last_turn: parsed.last_turn,
        warnings,
        subagents: std::mem::take(&mut parsed.subagents),
        plan: parsed.plan,
    })
}

/// A new session whose records go to `writer`, its header written first.
pub fn start(
    id: String,
    info: SessionInfo,
    place: Place,
    writer: Box<dyn RecordSink>,
    forked_from: Option<String>,
) -> Result<Session, SessionError> {
    let mut session = Session {
        checkpoints: CheckpointStore::new(place.checkpoints),
        id: id.clone(),
        images: place.images,
        path: place.path,
        writer,
        info,
        title: String::new(),
        count: 0,
    };
    let header = Header {
        version: journal::FORMAT_VERSION,
        id,
        created: clock::now_unix(),
        cwd: session.info.cwd.clone(),
        model: session.info.model.clone(),
        forked_from,
    };
    let mut buf = Vec::new();
    journal::encode(RecordRef::Header(&header), &session.info.secrets, &mut buf)
        .and_then(|()| session.writer.append(&buf))
        .map_err(|e| SessionError::io("write session file", &session.path, e))?;
    Ok(session)
}

/// The conversation that a session's records (`bytes`, read from `path`)
/// hold, as a resume would load it: for showing, not for continuing.
pub fn history_of(bytes: &[u8], path: &Path) -> Result<Vec<Message>, SessionError> {
    let mut parsed = journal::parse(bytes).map_err(|e| parse_error(path, e))?;
    let mut history: Vec<Message> = std::mem::take(&mut parsed.messages)
        .into_iter()
        .filter(|m| m.role != Role::System)
        .collect();
    repair(&mut history, &parsed);
    Ok(history)
}

/// The conversation in `bytes` (a journal's) with the sub-agents'
/// histories by the parent's call id: what an export shows.
#[allow(clippy::type_complexity)]
pub fn transcript_of(
    bytes: &[u8],
    path: &Path,
) -> Result<(Vec<Message>, Vec<(String, Vec<Message>)>), SessionError> {
    let mut parsed = journal::parse(bytes).map_err(|e| parse_error(path, e))?;
    let mut history: Vec<Message> = std::mem::take(&mut parsed.messages)
        .into_iter()
        .filter(|m| m.role != Role::System)
        .collect();
    repair(&mut history, &parsed);
    Ok((history, std::mem::take(&mut parsed.subagents)))
}

/// One session file, open and locked, that the agent appends to.
pub struct Session {
    id: String,
    /// The file, or what stands for it in errors (a database's session).
    path: PathBuf,
    /// Where copies of its images are kept.
    images: PathBuf,
    /// The content of files before this session's tools changed them.
    checkpoints: CheckpointStore,
    writer: Box<dyn RecordSink>,
    info: SessionInfo,
    title: String,
    count: u64,
}

impl Session {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Message records in the file: the whole transcript, however compacted.
    pub fn message_count(&self) -> u64 {
        self.count
    }

    fn write(&mut self, new: &[Message], tokens: &TokenTracker, turn_end: bool) -> io::Result<()> {
        // The copies first: a record never names an image that is not there.
        for image in new.iter().flat_map(|m| &m.images) {
            store_image(&self.images, image)?;
        }
        let mut buf = Vec::new();
        let mut count = self.count;
        let mut title = None;
        for m in new.iter().filter(|m| m.role != Role::System) {
            if self.title.is_empty() && title.is_none() && m.role == Role::User {
                // What the user typed, not what hooks added for the model.
                title = Some(title_of(m.shown().unwrap_or(m.text())));
            }
            journal::encode(RecordRef::Message(m), &self.info.secrets, &mut buf)?;
            count += 1;
        }
        let title = title.unwrap_or_else(|| self.title.clone());
        if turn_end {
            let mark = TurnMark {
                at: clock::now_unix(),
                messages: count,
                model: self.info.model.clone(),
                profile: self.info.profile.clone(),
                title: title.clone(),
                tokens: SavedTokens::of(tokens),
                origin: self.info.origin.clone(),
            };
            journal::encode(RecordRef::Turn(&mark), &self.info.secrets, &mut buf)?;
        }
        if !buf.is_empty() {
            self.writer.append(&buf)?;
        }
        if turn_end {
            self.writer.sync()?;
        }
        self.count = count;
        self.title = title;
        Ok(())
    }

    /// Appends a compaction and a turn mark with the running totals (the
    /// summary cost a model call), and makes both durable: a resume must not
    /// come back to a history that no longer fits the context.
    fn write_compaction(
        &mut self,
        replaces: usize,
        with: &[Message],
        tokens: &TokenTracker,
    ) -> io::Result<()> {
        // The system prompt is never stored, here as elsewhere.
        let with: Vec<Message> = with
            .iter()
            .filter(|m| m.role != Role::System)
            .cloned()
            .collect();
        let record = journal::CompactionRef {
            replaces: replaces as u64,
            messages: &with,
        };
        let mut buf = Vec::new();
        journal::encode(RecordRef::Compaction(record), &self.info.secrets, &mut buf)?;
        let mark = TurnMark {
            at: clock::now_unix(),
            messages: self.count,
            model: self.info.model.clone(),
            profile: self.info.profile.clone(),
            title: self.title.clone(),
            tokens: SavedTokens::of(tokens),
            origin: self.info.origin.clone(),
        };
        journal::encode(RecordRef::Turn(&mark), &self.info.secrets, &mut buf)?;
        self.writer.append(&buf)?;
        self.writer.sync()
    }
}

impl Session {
    /// Appends a rewind and a turn mark and makes both durable: a resume
    /// must come back to the conversation the user took it back to.
    fn write_rewind(&mut self, keep: usize, tokens: &TokenTracker) -> io::Result<()> {
        let mut buf = Vec::new();
        let record = journal::Rewind { keep: keep as u64 };
        journal::encode(RecordRef::Rewind(&record), &self.info.secrets, &mut buf)?;
        let mark = TurnMark {
            at: clock::now_unix(),
            messages: self.count,
            model: self.info.model.clone(),
            profile: self.info.profile.clone(),
            title: self.title.clone(),
            tokens: SavedTokens::of(tokens),
            origin: self.info.origin.clone(),
        };
        journal::encode(RecordRef::Turn(&mark), &self.info.secrets, &mut buf)?;
        self.writer.append(&buf)?;
        self.writer.sync()
    }

    /// One record in one write, not synced: a kill cannot lose what reached
    /// the kernel, and a power cut may lose this much anyway.
    fn append_record(&mut self, record: RecordRef<'_>) -> Result<(), HostedError> {
        let mut buf = Vec::new();
        journal::encode(record, &self.info.secrets, &mut buf)
            .and_then(|()| self.writer.append(&buf))
            .map_err(|e| SessionError::io("write", &self.path, e).into())
    }
}

impl HistorySink for Session {
    fn save(
        &mut self,
        new: &[Message],
        tokens: &TokenTracker,
        turn_end: bool,
    ) -> Result<(), HostedError> {
        self.write(new, tokens, turn_end)
            .map_err(|e| SessionError::io("write", &self.path, e).into())
    }

    fn compacted(
        &mut self,
        replaces: usize,
        with: &[Message],
        tokens: &TokenTracker,
    ) -> Result<(), HostedError> {
        self.write_compaction(replaces, with, tokens)
            .map_err(|e| SessionError::io("write", &self.path, e).into())
    }

    fn partial(&mut self, text: &str) -> Result<(), HostedError> {
        let record = journal::Partial {
            text: text.to_string(),
        };
        self.append_record(RecordRef::Partial(&record))
    }

    fn subagent(&mut self, call_id: &str, new: &[Message]) -> Result<(), HostedError> {
        let mut buf = Vec::new();
        for m in new.iter().filter(|m| m.role != Role::System) {
            let record = journal::SubagentRef {
                call: call_id,
                message: m,
            };
            journal::encode(RecordRef::Subagent(record), &self.info.secrets, &mut buf)
                .map_err(|e| SessionError::io("write", &self.path, e))?;
        }
        if buf.is_empty() {
            return Ok(());
        }
        self.writer
            .append(&buf)
            .map_err(|e| SessionError::io("write", &self.path, e).into())
    }

    fn tools_started(&mut self, ids: &[&str]) -> Result<(), HostedError> {
        let record = journal::Started {
            ids: ids.iter().map(|s| s.to_string()).collect(),
        };
        self.append_record(RecordRef::Started(&record))
    }

    fn plan(&mut self, entries: &[crate::agent::protocol::PlanEntry]) -> Result<(), HostedError> {
        let record = journal::Plan {
            entries: entries.to_vec(),
        };
        self.append_record(RecordRef::Plan(&record))
    }

    fn rewound(&mut self, keep: usize, tokens: &TokenTracker) -> Result<(), HostedError> {
        self.write_rewind(keep, tokens)
            .map_err(|e| SessionError::io("write", &self.path, e).into())
    }

    fn checkpoints(&self) -> Option<Arc<dyn Checkpoints>> {
        Some(Arc::new(self.checkpoints.clone()))
    }

    fn set_model(&mut self, model: &str, profile: &str) {
        self.info.model = model.to_string();
        self.info.profile = profile.to_string();
    }
}

#[cfg(test)]
mod tests;
