//! The session file format and its reader and writer. A session file is a
//! journal: one JSON record per line, only ever appended to, so saving a turn
//! costs the size of the turn, not of the history. Eight kinds of record:
//!
//! ```text
//! {"header":{"version":4,"id":"…","created":1763905509,"cwd":"/home/me/proj"}}
//! {"message":{"role":"user","content":"…"}}
//! {"partial":{"text":"…"}}
//! {"started":{"ids":["call_1","call_2"]}}
//! {"turn":{"at":…,"messages":12,"model":"…","profile":"…","title":"…","tokens":{…}}}
//! {"compaction":{"replaces":9,"messages":[{"role":"user","content":"[Summary…"}]}}
//! {"rewind":{"keep":4}}
//! {"subagent":{"call":"call_3","message":{"role":"user","content":"…"}}}
//! {"plan":{"entries":[{"content":"…","status":"in_progress"}]}}
//! ```
//!
//! `partial` records carry an answer's text as it streams (each one the text
//! shown since the previous), so a kill loses nothing the user saw. The
//! assistant message record that follows a run of them replaces them; a run
//! followed by anything else, or by the end of the file, loads as an answer
//! marked interrupted. `started` is written just before tool calls run: a
//! call with a start and no result was running when buddy stopped, and may
//! have done its work; a call without one never ran.
//!
//! A `turn` mark closes each turn with the running totals, so a listing reads
//! only the end of a file. A `compaction` says that, in the history as loaded
//! up to it, the first `replaces` messages give way to `messages` (a summary
//! written when the context filled up). The message records stay, so the file
//! is still the whole transcript; only what is loaded for continuing shrinks.
//! A `rewind` (the user took the conversation back to before a turn) keeps
//! only the first `keep` messages of the history as loaded up to it; the
//! messages after it continue from there. A `plan` is the session's plan as
//! a `todo_write` left it, whole; the last one is the plan on resume (a
//! rewind does not take it back). A forked session's header names
//! the session it came from (`forked_from`).
//!
//! A crash can leave the last record half-written; the reader drops such a
//! tail and reports it, but a bad record with good ones after it means the
//! file was damaged some other way, and it is refused whole.

use crate::agent::protocol::PlanEntry;
use crate::agent::TokenTracker;
use crate::wire::{Message, Role};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Write};

/// Written into every header; a file from a newer format is refused, not guessed at.
/// Version 2 added `partial` and `started` records, version 3 `rewind`,
/// version 4 `subagent` and `plan` (an older reader would take them for
/// damage, so it is told the file is newer instead).
pub const FORMAT_VERSION: u32 = 4;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub version: u32,
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub cwd: String,
    /// The model at creation, for listings of sessions without a turn mark yet.
    #[serde(default)]
    pub model: String,
    /// The session this one was forked from (`/fork`, `resume --fork`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnMark {
    /// Unix seconds when the turn ended.
    pub at: u64,
    /// Messages in the session after this turn.
    pub messages: u64,
    pub model: String,
    pub profile: String,
    /// The first words of the session's first prompt.
    pub title: String,
    pub tokens: SavedTokens,
    /// The front end that drove the turn (`exec`, `repl`, …), so listings
    /// can tell one-shot runs from conversations; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedTokens {
    pub prompt_total: u64,
    pub completion_total: u64,
    pub last_prompt: u64,
    pub last_completion: u64,
    /// Absent in sessions saved before prompt caching was tracked.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_total: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_total: u64,
    /// The spend in billionths of a dollar; absent in sessions saved
    /// before costs were tracked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_nanos: Option<u64>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub cost_unknown: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SavedTokens {
    pub fn of(t: &TokenTracker) -> Self {
        SavedTokens {
            prompt_total: t.total_prompt_tokens,
            completion_total: t.total_completion_tokens,
            last_prompt: t.last_prompt_tokens,
            last_completion: t.last_completion_tokens,
            cache_read_total: t.total_cache_read_tokens,
            cache_write_total: t.total_cache_write_tokens,
            cost_nanos: Some(t.cost_nanos),
            cost_unknown: t.cost_unknown,
        }
    }

    /// A tracker holding these totals (the context limit is the caller's to set).
    pub fn tracker(&self) -> TokenTracker {
        TokenTracker {
            context_limit: 0,
            total_prompt_tokens: self.prompt_total,
            total_completion_tokens: self.completion_total,
            last_prompt_tokens: self.last_prompt,
            last_completion_tokens: self.last_completion,
            total_cache_read_tokens: self.cache_read_total,
            total_cache_write_tokens: self.cache_write_total,
            cost_nanos: self.cost_nanos.unwrap_or(0),
            // Tokens spent before costs were kept had a price nobody noted.
            cost_unknown: self.cost_unknown
                || (self.cost_nanos.is_none() && self.prompt_total + self.completion_total > 0),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Compaction {
    /// How many messages at the start of the loaded history (system prompts
    /// not counted) are replaced.
    pub replaces: u64,
    pub messages: Vec<Message>,
}

/// The conversation was taken back: only the first `keep` messages of the
/// history as loaded so far stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewind {
    pub keep: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partial {
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub ids: Vec<String>,
}

/// A message of a sub-agent's history, under the parent's call `call`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Subagent {
    pub call: String,
    pub message: Message,
}

#[derive(Serialize)]
pub struct SubagentRef<'a> {
    pub call: &'a str,
    pub message: &'a Message,
}

/// The session's plan, whole, as the last `todo_write` left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub entries: Vec<PlanEntry>,
}

#[derive(Serialize)]
pub struct CompactionRef<'a> {
    pub replaces: u64,
    pub messages: &'a [Message],
}

/// One line of the journal. Externally tagged (`{"message":{…}}`) so a reader
/// can tell the kind from the first bytes and serde needs no buffering.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    Header(Header),
    Message(Message),
    Turn(TurnMark),
    Compaction(Compaction),
    Partial(Partial),
    Started(Started),
    Rewind(Rewind),
    Subagent(Subagent),
    Plan(Plan),
}

/// The borrowed twin of `Record`, so writing never clones a message.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordRef<'a> {
    Header(&'a Header),
    Message(&'a Message),
    Turn(&'a TurnMark),
    Compaction(CompactionRef<'a>),
    Partial(&'a Partial),
    Started(&'a Started),
    Rewind(&'a Rewind),
    Subagent(SubagentRef<'a>),
    Plan(&'a Plan),
}

const HEADER_PREFIX: &[u8] = b"{\"header\":";
pub const TURN_PREFIX: &[u8] = b"{\"turn\":";
pub const MESSAGE_PREFIX: &[u8] = b"{\"message\":";

/// Appends `record` and a newline to `buf`, with every secret replaced.
pub fn encode(record: RecordRef<'_>, secrets: &[String], buf: &mut Vec<u8>) -> io::Result<()> {
    let start = buf.len();
    serde_json::to_writer(&mut *buf, &record).map_err(io::Error::other)?;
    let secrets: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    // A secret written escaped (quotes, backslashes) would not be seen in the
    // bytes, so such secrets always take the careful path.
    let maybe = secrets.iter().any(|s| {
        contains(&buf[start..], s.as_bytes())
            || s.chars().any(|c| c == '"' || c == '\\' || c.is_control())
    });
    if maybe {
        // Replace only inside string values: a short key must never turn a
        // field name or a number into something no reader can load.
        let mut value = serde_json::to_value(&record).map_err(io::Error::other)?;
        crate::redact::Secrets::new(&secrets).json(&mut value);
        buf.truncate(start);
        serde_json::to_writer(&mut *buf, &value).map_err(io::Error::other)?;
    }
    buf.push(b'\n');
    Ok(())
}

/// What a secret is replaced with in a session file.
pub const REDACTED: &str = crate::redact::REDACTED;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    // memmem: a long answer is searched once per secret on every save.
    !needle.is_empty() && memchr::memmem::find(haystack, needle).is_some()
}

/// A journal read back.
#[derive(Debug, Default)]
pub struct Parsed {
    pub header: Option<Header>,
    /// The history to continue from: every message record, with each
    /// compaction applied in turn.
    pub messages: Vec<Message>,
    /// Message records in the file: the whole transcript, compacted or not.
    pub recorded: u64,
    /// Text of the first user message record, for a title.
    pub first_prompt: Option<String>,
    pub last_turn: Option<TurnMark>,
    /// Length of the file up to the end of its last good record.
    pub good_len: u64,
    /// Bytes after that: a torn or damaged tail, dropped.
    pub dropped: u64,
    /// Ids of tool calls recorded as started.
    pub started: HashSet<String>,
    /// Answers rebuilt from `partial` records (streaming cut off by a stop).
    pub interrupted: u64,
    /// Sub-agents' histories by the parent's call id, in the order their
    /// first records came.
    pub subagents: Vec<(String, Vec<Message>)>,
    /// The last `plan` record's entries (empty without one).
    pub plan: Vec<PlanEntry>,
}

impl Parsed {
    /// The format version of the file (the current one when it has no header yet).
    pub fn version(&self) -> u32 {
        self.header.as_ref().map_or(FORMAT_VERSION, |h| h.version)
    }
}

/// Why a journal cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// A bad record at `line` (1-based) with good records after it.
    Corrupt {
        line: usize,
        reason: String,
    },
    /// The first record is not a header.
    NoHeader {
        line: usize,
    },
    Newer {
        version: u32,
    },
}

/// Reads a whole journal. Blank lines are skipped. A crash can only damage
/// the end: a last record without its newline (a cut write) or zeroed bytes
/// (a power cut) are dropped; any other bad record makes the file corrupt.
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    let mut out = Parsed::default();
    let mut first_bad: Option<(usize, String)> = None;
    let mut pos = 0usize;
    let mut line_no = 0usize;
    // Text of `partial` records not yet replaced by the answer's message.
    let mut streamed: Option<String> = None;
    while pos < bytes.len() {
        line_no += 1;
        let Some(nl) = bytes[pos..].iter().position(|&b| b == b'\n') else {
            // No newline: the write that carried this record was cut short.
            break;
        };
        let line = &bytes[pos..pos + nl];
        let end = pos + nl + 1;
        pos = end;
        if line.iter().all(u8::is_ascii_whitespace) {
            if first_bad.is_none() {
                out.good_len = end as u64;
            }
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(record) => {
                if let Some((line, reason)) = first_bad.take() {
                    return Err(ParseError::Corrupt { line, reason });
                }
                if let Some(text) = streamed.take() {
                    match &record {
                        Record::Partial(_) => streamed = Some(text),
                        // The whole answer was saved after all.
                        Record::Message(m) if m.role == Role::Assistant => {}
                        _ => {
                            out.messages.push(crate::agent::interrupted_answer(&text));
                            out.interrupted += 1;
                        }
                    }
                }
                match record {
                    Record::Header(h) => {
                        if h.version > FORMAT_VERSION {
                            return Err(ParseError::Newer { version: h.version });
                        }
                        if out.header.is_none() {
                            out.header = Some(h);
                        }
                    }
                    _ if out.header.is_none() => {
                        return Err(ParseError::NoHeader { line: line_no })
                    }
                    Record::Message(m) => {
                        out.recorded += 1;
                        if out.first_prompt.is_none() && m.role == Role::User {
                            out.first_prompt = Some(m.shown().unwrap_or(m.text()).to_string());
                        }
                        out.messages.push(m);
                    }
                    Record::Turn(t) => out.last_turn = Some(t),
                    Record::Partial(p) => {
                        streamed.get_or_insert_with(String::new).push_str(&p.text)
                    }
                    Record::Started(s) => out.started.extend(s.ids),
                    Record::Subagent(s) => {
                        match out.subagents.iter_mut().find(|(call, _)| *call == s.call) {
                            Some((_, messages)) => messages.push(s.message),
                            None => out.subagents.push((s.call, vec![s.message])),
                        }
                    }
                    Record::Plan(p) => out.plan = p.entries,
                    Record::Rewind(r) => {
                        let present = out
                            .messages
                            .iter()
                            .filter(|m| m.role != Role::System)
                            .count();
                        if r.keep as usize > present {
                            return Err(ParseError::Corrupt {
                                line: line_no,
                                reason: format!(
                                    "a rewind keeps {} messages but only {present} come before it",
                                    r.keep
                                ),
                            });
                        }
                        out.messages.truncate(r.keep as usize);
                    }
                    Record::Compaction(c) => {
                        // A whole line we wrote that does not fit what precedes
                        // it is no crash damage: refuse rather than guess.
                        apply_compaction(&mut out.messages, c).map_err(|e| ParseError::Corrupt {
                            line: line_no,
                            reason: e.to_string(),
                        })?
                    }
                }
                out.good_len = end as u64;
            }
            // Zeroed blocks are what a power cut can leave after the last write.
            Err(_) if line.iter().all(|&b| b == 0 || b.is_ascii_whitespace()) => {
                first_bad.get_or_insert((line_no, "zeroed bytes".to_string()));
            }
            Err(e) => {
                return Err(ParseError::Corrupt {
                    line: line_no,
                    reason: json_reason(&e),
                })
            }
        }
    }
    if out.header.is_none()
        && !HEADER_PREFIX.starts_with(trimmed_start(&bytes[out.good_len as usize..]))
    {
        // Not even the start of a header: this is not a session file of ours.
        return Err(ParseError::NoHeader { line: 1 });
    }
    if let Some(text) = streamed {
        out.messages.push(crate::agent::interrupted_answer(&text));
        out.interrupted += 1;
    }
    out.dropped = bytes.len() as u64 - out.good_len;
    Ok(out)
}

/// A compaction record that replaces more messages than precede it.
#[derive(Debug, thiserror::Error)]
#[error("a compaction replaces {replaces} messages but only {present} come before it")]
struct CompactionMismatch {
    replaces: u64,
    present: u64,
}

/// Replaces the first `c.replaces` non-system messages of `active` with
/// `c.messages`; system messages among them stay, ahead of the replacement.
fn apply_compaction(active: &mut Vec<Message>, c: Compaction) -> Result<(), CompactionMismatch> {
    let present = active.iter().filter(|m| m.role != Role::System).count() as u64;
    if c.replaces > present {
        return Err(CompactionMismatch {
            replaces: c.replaces,
            present,
        });
    }
    let mut rest = std::mem::take(active).into_iter();
    let mut removed = 0;
    while removed < c.replaces {
        match rest.next() {
            Some(m) if m.role == Role::System => active.push(m),
            Some(_) => removed += 1,
            None => break,
        }
    }
    active.extend(c.messages);
    active.extend(rest);
    Ok(())
}

/// serde's message without its own "at line 1 column N" (each record is one
/// line, so only the column means anything to the reader).
fn json_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let head = text
        .rfind(" at line ")
        .map_or(text.as_str(), |i| &text[..i]);
    format!("{head} at column {}", e.column())
}

/// `bytes` up to (at most) the length of a header's opening.
fn trimmed_start(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(HEADER_PREFIX.len())]
}

/// The write end of an open journal: whole records appended in one write each,
/// and a failed write undone, so the file never holds half a record from us.
pub struct Writer {
    file: File,
    len: u64,
}

impl Writer {
    /// `file` must be open for appending and `len` long.
    pub fn new(file: File, len: u64) -> Self {
        Writer { file, len }
    }

    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let Err(e) = self.file.write_all(bytes) {
            // Best effort: cut back to the last whole record so the next append
            // does not continue a torn one.
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where an open session's records go: its file ([`Writer`]), or rows of a
/// database (`session::postgres`). Each `append` takes whole records; a
/// record is as durable as the sink promises once `append` returns, and all
/// of them once `sync` does.
pub trait RecordSink: Send + Sync {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
}

impl RecordSink for Writer {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        Writer::append(self, bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        Writer::sync(self)
    }
}

/// What a listing needs from the end of a journal: the last turn mark and the
/// number of message records after it. `None` when `tail` holds no turn mark.
pub fn summarize_tail(tail: &[u8], starts_at_file_start: bool) -> Option<(TurnMark, u64)> {
    let mut lines: Vec<&[u8]> = tail.split(|&b| b == b'\n').collect();
    // The last piece is empty after a final newline, or a torn record.
    lines.pop();
    if !starts_at_file_start && !lines.is_empty() {
        // The window may begin mid-record.
        lines.remove(0);
    }
    let mut after = 0u64;
    for line in lines.iter().rev() {
        if line.starts_with(TURN_PREFIX) {
            if let Ok(Record::Turn(t)) = serde_json::from_slice::<Record>(line) {
                return Some((t, after));
            }
        } else if line.starts_with(MESSAGE_PREFIX) {
            after += 1;
        }
    }
    None
}

/// What a listing needs of a journal, read as a stream: no line is held
/// whole past `LISTED_LINE_BYTES`, so a file of one 100 MB record is listed
/// in bounded memory (a full `parse` would hold it several times over).
#[derive(Debug, Default, PartialEq)]
pub struct Listed {
    pub messages: u64,
    pub model: Option<String>,
    pub first_prompt: Option<String>,
}

/// Lines up to this long are parsed; longer ones are classified by their
/// start, and a user message's text is read from that start.
const LISTED_LINE_BYTES: usize = 256 * 1024;

pub fn summarize_stream(mut r: impl io::BufRead) -> io::Result<Listed> {
    let mut out = Listed::default();
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            // A final line without a newline is a torn write: not counted.
            break;
        }
        let (piece, ended) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let room = LISTED_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        cut |= piece.len() > room;
        let used = piece.len() + usize::from(ended);
        r.consume(used);
        if ended {
            listed_line(&line, cut, &mut out);
            line.clear();
            cut = false;
        }
    }
    Ok(out)
}

fn listed_line(line: &[u8], cut: bool, out: &mut Listed) {
    if !cut {
        match serde_json::from_slice::<Record>(line) {
            Ok(Record::Header(h)) if out.model.is_none() => {
                out.model = Some(h.model).filter(|m| !m.is_empty())
            }
            Ok(Record::Message(m)) => {
                out.messages += 1;
                if out.first_prompt.is_none() && m.role == Role::User {
                    out.first_prompt = Some(m.shown().unwrap_or(m.text()).to_string());
                }
            }
            Ok(Record::Turn(t)) if !t.model.is_empty() => out.model = Some(t.model),
            _ => {}
        }
        return;
    }
    if line.starts_with(MESSAGE_PREFIX) {
        out.messages += 1;
        if out.first_prompt.is_none() && memchr::memmem::find(line, b"\"role\":\"user\"").is_some()
        {
            out.first_prompt = Some(text_from_start(line));
        }
    }
}

/// The start of the prompt as typed (what hooks added to it is not the
/// user's), else of the first `"content"`/`"text"` string, in a cut-off
/// record: enough for a title.
fn text_from_start(line: &[u8]) -> String {
    let shown = format!("\"{}\":\"", crate::wire::chat::SHOWN_KEY);
    for key in [
        shown.as_bytes(),
        &b"\"content\":\""[..],
        &b"\"text\":\""[..],
    ] {
        let Some(at) = memchr::memmem::find(line, key) else {
            continue;
        };
        let body = &line[at + key.len() - 1..];
        // Take at most a few KiB of the literal and close it; drop a torn
        // escape or character at the cut.
        let mut end = body.len().min(4096);
        while end > 1 {
            let mut candidate = body[..end].to_vec();
            candidate.push(b'"');
            if let Ok(text) = serde_json::from_slice::<String>(&candidate) {
                return text;
            }
            end -= 1;
        }
    }
    String::new()
}

#[cfg(test)]
mod token_tests {
    use super::*;

    #[test]
    fn cache_totals_survive_a_save_and_old_records_still_load() {
        let mut t = TokenTracker::default();
        t.record(50, 5);
        t.record_cache(40, 8);
        let saved = serde_json::to_string(&SavedTokens::of(&t)).unwrap();
        let back: SavedTokens = serde_json::from_str(&saved).unwrap();
        assert_eq!(back.tracker().total_cache_read_tokens, 40);
        assert_eq!(back.tracker().total_cache_write_tokens, 8);
        // Written before caching was tracked: no cache fields at all.
        let old: SavedTokens = serde_json::from_str(
            r#"{"prompt_total":1,"completion_total":2,"last_prompt":1,"last_completion":2}"#,
        )
        .unwrap();
        assert_eq!(old.tracker().total_cache_read_tokens, 0);
        // And a session without cache use writes none.
        let plain = serde_json::to_string(&SavedTokens::of(&TokenTracker::default())).unwrap();
        assert!(!plain.contains("cache"), "{plain}");
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;

    #[test]
    fn the_last_plan_record_is_the_plan() {
        let file = concat!(
            "{\"header\":{\"version\":4,\"id\":\"s\",\"created\":1,\"cwd\":\"/\"}}\n",
            "{\"plan\":{\"entries\":[{\"content\":\"old\",\"status\":\"pending\"}]}}\n",
            "{\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
            "{\"plan\":{\"entries\":[{\"content\":\"new\",\"status\":\"in_progress\"}]}}\n",
        );
        let parsed = parse(file.as_bytes()).unwrap();
        assert_eq!(parsed.messages.len(), 1);
        assert_eq!(parsed.plan.len(), 1);
        assert_eq!(parsed.plan[0].content, "new");
        let mut buf = Vec::new();
        let record = Plan {
            entries: parsed.plan.clone(),
        };
        encode(RecordRef::Plan(&record), &[], &mut buf).unwrap();
        assert!(buf.starts_with(b"{\"plan\":{\"entries\":["), "{buf:?}");
    }
}
