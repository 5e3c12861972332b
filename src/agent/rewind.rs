//! Turns and rewinding. Every user message that joins the conversation
//! (a prompt, a steer, a follow-up) is a turn: it carries a turn id in its
//! `buddy_turn` field (never sent to a model; ids sort in the order the
//! turns began), and the file checkpoints made while the tools served it are
//! kept under that id. A rewind takes the files (through the session's
//! `Checkpoints`), the conversation (through the `HistorySink`, which
//! journals it), or both back to before a turn. A rewind of the files
//! leaves an undo point (what they held just before it), listed after the
//! turns, which takes the files back to that state.
//!
//! This module does not keep file contents (that is `session::checkpoint`)
//! or draw a picker (that is the REPL's); it answers `Op::Turns` and
//! `Op::Rewind` with plain data.

use super::protocol::{EventKind, TurnSummary, MAX_LISTED_TURNS};
use super::Agent;
use crate::tools::checkpoint::{is_undo, CheckpointError, Checkpoints, FileAction, TargetFiles};
use crate::wire::{Message, Role};
use serde_json::Value;
use std::sync::Arc;

/// `Message::extra` key of a user message's turn id. The `buddy_` prefix
/// keeps it out of every request (see `wire::SHOWN_KEY`).
pub const TURN_KEY: &str = "buddy_turn";
/// Characters of a turn's text in a listing.
const TURN_TEXT_CHARS: usize = 200;
/// Shell commands listed per turn, and characters of each.
const COMMANDS_LISTED: usize = 20;
const COMMAND_CHARS: usize = 200;

/// `m` marked as turn `turn`.
pub fn with_turn(mut m: Message, turn: &str) -> Message {
    m.extra.insert(TURN_KEY.into(), Value::String(turn.into()));
    m
}

/// The turn id of a user message, if it starts a turn.
pub fn turn_of(m: &Message) -> Option<&str> {
    (m.role == Role::User)
        .then(|| m.extra.get(TURN_KEY).and_then(Value::as_str))
        .flatten()
}

/// A turn id: milliseconds since the epoch and a sequence number, both
/// zero-padded so ids compare as strings in the order they were made.
fn turn_id(ms: u64, seq: u32) -> String {
    format!("{ms:013}-{seq:04}")
}

fn parse_turn(id: &str) -> Option<(u64, u32)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// One line of at most `chars` characters, `…` when cut.
fn clip_line(text: &str, chars: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= chars {
        return flat;
    }
    let mut cut: String = flat.chars().take(chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The shell work the model asked for in `m` (run_shell commands, text
/// typed into a pane), as a person would read it.
fn shell_commands(m: &Message) -> impl Iterator<Item = String> + '_ {
    m.calls().iter().filter_map(|c| {
        let args: Value = serde_json::from_str(&c.function.arguments).ok()?;
        match c.function.name.as_str() {
            "run_shell" => args["command"]
                .as_str()
                .map(|s| clip_line(s, COMMAND_CHARS)),
            "send-keys" => args["text"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(|t| format!("(typed into a pane) {}", clip_line(t, COMMAND_CHARS))),
            _ => None,
        }
    })
}

impl Agent {
    /// A turn id later than every turn in the conversation, even if the
    /// clock went back since the last one.
    pub(super) fn next_turn_id(&mut self) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.turn_seq = (self.turn_seq + 1) % 10_000;
        let candidate = turn_id(now, self.turn_seq);
        let last = self.messages.iter().rev().find_map(turn_of);
        match last.and_then(|l| parse_turn(l).map(|p| (l, p))) {
            Some((l, (ms, seq))) if candidate.as_str() <= l => {
                if seq >= 9_999 {
                    turn_id(ms + 1, 0)
                } else {
                    turn_id(ms, seq + 1)
                }
            }
            _ => candidate,
        }
    }

    /// Shell commands from message `from` on, clipped to a listing's size.
    fn commands_since(&self, from: usize) -> Vec<String> {
        let all: Vec<String> = self.messages[from..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(shell_commands)
            .collect();
        let more = all.len().saturating_sub(COMMANDS_LISTED);
        let mut out: Vec<String> = all.into_iter().take(COMMANDS_LISTED).collect();
        if more > 0 {
            out.push(format!("… and {more} more"));
        }
        out
    }

    /// The reply to `Op::Turns`.
    pub async fn turns(&self) -> EventKind {
        let found: Vec<(usize, &str)> = self
            .messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| turn_of(m).map(|t| (i, t)))
            .collect();
        let found = &found[found.len().saturating_sub(MAX_LISTED_TURNS)..];
        let ids: Vec<String> = found.iter().map(|(_, t)| t.to_string()).collect();
        let here = (!self.tool_ctx.target.is_local()).then(|| self.tool_ctx.target.actor());
        let (plans, undo, note) = match self.tool_ctx.checkpoints.clone() {
            Some(store) => match blocking(store, move |s| {
                Ok((
                    s.plan(&ids, here.as_deref())?,
                    s.undo_point(here.as_deref())?,
                ))
            })
            .await
            {
                Ok((plans, undo)) => (plans, undo, None),
                Err(e) => (
                    Vec::new(),
                    None,
                    Some(format!("the file checkpoints cannot be read: {e}")),
                ),
            },
            None => (
                Vec::new(),
                None,
                Some("files are not checkpointed: this conversation is not saved".to_string()),
            ),
        };
        let mut turns: Vec<TurnSummary> = found
            .iter()
            .enumerate()
            .map(|(n, (i, turn))| {
                let m = &self.messages[*i];
                TurnSummary {
                    turn: turn.to_string(),
                    text: clip_line(
                        &super::replay::as_typed(m).unwrap_or_default(),
                        TURN_TEXT_CHARS,
                    ),
                    at: parse_turn(turn).map_or(0, |(ms, _)| ms / 1000),
                    files: plans.get(n).cloned().unwrap_or_default(),
                    commands: self.commands_since(*i),
                }
            })
            .collect();
        // The last rewind can be taken back: listed after the turns (the
        // newest entry), while it would still change something.
        if let Some(u) = undo.filter(|u| u.files.iter().any(|f| f.action != FileAction::Unchanged))
        {
            turns.push(TurnSummary {
                turn: u.id,
                text: "undo the last rewind: the files as they were just before it".into(),
                at: u.at,
                files: u.files,
                commands: Vec::new(),
            });
        }
        EventKind::Turns { turns, note }
    }

    /// The reply to `Op::Rewind`: the files, the conversation or both back
    /// to before `turn`.
    pub async fn rewind(&mut self, turn: &str, code: bool, conversation: bool) -> EventKind {
        if !code && !conversation {
            return EventKind::error(
                "nothing to rewind: ask for the code, the conversation or both",
            );
        }
        let undo = is_undo(turn);
        if undo && conversation {
            return EventKind::error("an undo point takes back files only: ask for the code alone");
        }
        let at = if undo {
            self.messages.len()
        } else {
            match self.messages.iter().position(|m| turn_of(m) == Some(turn)) {
                Some(at) => at,
                None => {
                    return EventKind::error(format!(
                        "no turn {turn} in this conversation (/rewind lists them)"
                    ))
                }
            }
        };
        // Everything must be in the journal before part of it is taken back.
        self.persist(false).await;
        let commands = self.commands_since(at);
        let files = if code {
            match self.tool_ctx.checkpoints.clone() {
                Some(store) => {
                    // Files kept on the session's remote target go back
                    // through it.
                    let remote = crate::tools::door::RemoteFiles::of(&self.tool_ctx);
                    let remote = remote.as_ref().map(|r| r as &dyn TargetFiles);
                    let own = self.tool_ctx.protected.clone();
                    match store.restore(turn, remote, own).await {
                        Ok(files) => Some(files),
                        Err(e) => {
                            return EventKind::error(format!(
                                "the files were not rewound: {e}"
                            ))
                        }
                    }
                }
                None => {
                    return EventKind::error(
                        "the files cannot be rewound: this conversation is not saved, so nothing was checkpointed",
                    )
                }
            }
        } else {
            None
        };
        let mut removed = 0;
        let mut prompt = None;
        if conversation {
            prompt = super::replay::as_typed(&self.messages[at]);
            removed = self.drop_turn_from(at).await;
        }
        EventKind::Rewound {
            turn: turn.to_string(),
            files,
            removed,
            prompt,
            commands,
        }
    }
}

impl Agent {
    /// Takes the turn whose prompt is at `at` out of the history, with the
    /// context attached just before it (files, `!` output), and journals a
    /// rewind mark so a resume loads the conversation without them (the
    /// record keeps them). Returns how many messages left.
    pub(super) async fn drop_turn_from(&mut self, at: usize) -> usize {
        let base = self.base();
        let mut keep = at.min(self.messages.len()).max(base);
        while keep > base
            && self.messages[keep - 1].role == Role::User
            && turn_of(&self.messages[keep - 1]).is_none()
        {
            keep -= 1;
        }
        let removed = self.messages.len() - keep;
        self.messages.truncate(keep);
        if let Some(sink) = self.sink.as_mut() {
            if let Err(e) = sink.rewound(keep - base, &self.tracker) {
                self.save_failing = true;
                self.warn(format!("session not saved: {e}")).await;
            }
        }
        self.history_replaced();
        removed
    }

    /// After the history was shortened (compacted, rewound, set aside): all
    /// of it is in the journal, and the server's last token count described
    /// the longer one, so the window's use is estimated afresh.
    pub(super) fn history_replaced(&mut self) {
        self.saved = self.messages.len();
        self.tracker.last_prompt_tokens = 0;
        self.tracker.last_completion_tokens = 0;
        self.warned_full = false;
    }
}

/// Runs a store call off the runtime's workers (it reads, hashes and
/// writes files).
async fn blocking<T: Send + 'static>(
    store: Arc<dyn Checkpoints>,
    job: impl FnOnce(&dyn Checkpoints) -> Result<T, CheckpointError> + Send + 'static,
) -> Result<T, CheckpointError> {
    tokio::task::spawn_blocking(move || job(store.as_ref()))
        .await
        .map_err(|e| CheckpointError::Task(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_ids_sort_in_time_order_and_parse_back() {
        let a = turn_id(999, 12);
        let b = turn_id(1_000, 1);
        assert!(a < b, "{a} {b}");
        assert_eq!(parse_turn(&b), Some((1_000, 1)));
        let m = with_turn(Message::user("hi"), &a);
        assert_eq!(turn_of(&m), Some(a.as_str()));
        assert_eq!(turn_of(&Message::user("no turn")), None);
    }

    #[test]
    fn shell_work_is_listed_from_calls() {
        let mut m = Message::assistant("");
        m.tool_calls = Some(vec![
            crate::wire::ToolCall::new("c1", "run_shell", r#"{"command":"rm -rf build"}"#),
            crate::wire::ToolCall::new("c2", "write_file", r#"{"path":"a"}"#),
            crate::wire::ToolCall::new("c3", "send-keys", r#"{"text":"make"}"#),
        ]);
        let got: Vec<String> = shell_commands(&m).collect();
        assert_eq!(got, ["rm -rf build", "(typed into a pane) make"]);
    }
}
