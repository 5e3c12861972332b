//! One `buddy` tool call's events as MCP: what to say in a progress
//! notification, the session the call ran in, and the tool result it ends
//! with. Pure: it reads `Event`s and returns what to send; it sends nothing
//! and drives no agent: the call's renderer of the drive loop (`super`'s
//! `CallFrontEnd`) feeds it and does the sending.

use crate::agent::protocol::{Event, EventKind, RunOutcome};
use crate::text::one_line;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

/// Most characters of an answer a tool result carries; the rest is cut with
/// a note (the whole answer stays in the session). About 25k tokens, where
/// Claude Code starts warning about a tool's output.
pub const MAX_ANSWER_CHARS: usize = 100_000;

/// Longest progress message, and the part of a tool call's arguments shown.
const PROGRESS_CHARS: usize = 120;

/// Most denied commands listed in a result.
const MAX_DENIED: usize = 20;

/// What an event asks of the MCP side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Nothing to send.
    None,
    /// A `notifications/progress` with this message.
    Progress(String),
    /// The run is over: send `CallRenderer::result`.
    Finished,
}

/// The state of one call, fed every event of its agent.
#[derive(Debug, Default)]
pub struct CallRenderer {
    session: Option<String>,
    outcome: Option<RunOutcome>,
    /// An op failed before the run (the session could not be resumed).
    error: Option<String>,
    /// Commands the approval setting refused, for the caller to see.
    denied: Vec<String>,
}

impl CallRenderer {
    pub fn new() -> CallRenderer {
        CallRenderer::default()
    }

    /// The session the conversation is saved in, once known.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Takes one event in; says what to send for it.
    pub fn on_event(&mut self, ev: &Event) -> Update {
        match &ev.kind {
            EventKind::SessionStarted { id } | EventKind::SessionResumed { id, .. } => {
                self.session = Some(id.clone());
                Update::None
            }
            EventKind::SessionForked { id, .. } => {
                self.session = Some(id.clone());
                Update::None
            }
            EventKind::ModelRequest { turn } => Update::Progress(format!("model turn {turn}")),
            EventKind::ToolCall {
                name, arguments, ..
            } => Update::Progress(one_line(
                &format!("{name} {}", one_line(arguments, PROGRESS_CHARS)),
                PROGRESS_CHARS,
            )),
            EventKind::ApprovalDecided {
                approved: false,
                tool,
                command,
                ..
            } => {
                if self.denied.len() < MAX_DENIED {
                    self.denied.push(one_line(command, PROGRESS_CHARS));
                }
                Update::Progress(one_line(
                    &format!("denied {tool}: {}", one_line(command, PROGRESS_CHARS)),
                    PROGRESS_CHARS,
                ))
            }
            EventKind::Compacted { .. } => Update::Progress("compacted the conversation".into()),
            // The plan's count done and its current item, as progress.
            EventKind::Plan { entries } => Update::Progress(one_line(
                &crate::ui::plan::summary_line(entries),
                PROGRESS_CHARS,
            )),
            EventKind::RunFinished(end) => {
                self.outcome = Some(end.outcome.clone());
                Update::Finished
            }
            // Only an op's own failure ends the call here; a run reports its
            // failure through `RunFinished`.
            EventKind::Error { message, .. } if self.outcome.is_none() && ev.run == 0 => {
                self.error = Some(message.clone());
                Update::Finished
            }
            _ => Update::None,
        }
    }

    /// The tool result: the answer as text, then a line naming the session
    /// (and, when some were refused, the commands denied); the same as
    /// structured content. A run that did not answer is an error result
    /// of one line.
    pub fn result(&self) -> CallToolResult {
        if let Some(e) = &self.error {
            return error_result(&one_line(e, 400));
        }
        let text = match &self.outcome {
            Some(RunOutcome::Answered { text, .. }) => text,
            Some(RunOutcome::Failed { message }) => {
                return error_result(&format!("the turn failed: {}", one_line(message, 400)))
            }
            Some(RunOutcome::LimitReached { message }) => {
                return error_result(&format!("the turn stopped: {}", one_line(message, 400)))
            }
            Some(RunOutcome::Interrupted) => return error_result("the turn was interrupted"),
            None => return error_result("the agent stopped before the turn ended"),
        };
        let session = self.session.clone().unwrap_or_default();
        let answer = capped(text, &session);
        let mut content = vec![
            ContentBlock::text(answer.clone()),
            ContentBlock::text(format!(
                "session_id: {session} (pass it to buddy-reply to continue)"
            )),
        ];
        if !self.denied.is_empty() {
            content.push(ContentBlock::text(format!(
                "denied (approval needed; call again with approval \"full\" to allow): {}",
                self.denied.join("; ")
            )));
        }
        let mut result = CallToolResult::success(content);
        result.structured_content = Some(json!({
            "answer": answer,
            "session_id": session,
            "denied": self.denied,
        }));
        result
    }
}

/// A result with `isError` and one line.
pub fn error_result(line: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(line.to_string())])
}

/// `text` cut to `MAX_ANSWER_CHARS` characters, with a note where it was.
fn capped(text: &str, session: &str) -> String {
    match text.char_indices().nth(MAX_ANSWER_CHARS) {
        None => text.to_string(),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!(
                "{}\n[… {rest} more characters cut; the whole answer is in session {session}]",
                &text[..at]
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::{DecidedBy, RunEnd};

    fn texts(r: &CallToolResult) -> Vec<String> {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[test]
    fn an_answered_run_gives_the_answer_then_its_session() {
        let mut r = CallRenderer::new();
        assert_eq!(
            r.on_event(&Event::fixture(EventKind::SessionStarted {
                id: "s1".into()
            })),
            Update::None
        );
        assert_eq!(
            r.on_event(&Event::fixture(EventKind::ModelRequest { turn: 1 })),
            Update::Progress("model turn 1".into())
        );
        assert_eq!(
            r.on_event(&Event::fixture(EventKind::ToolCall {
                call_id: "c".into(),
                name: "run_shell".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            })),
            Update::Progress("run_shell {\"command\":\"ls\"}".into())
        );
        let done = Event::fixture(EventKind::RunFinished(RunEnd {
            outcome: RunOutcome::Answered {
                text: "42".into(),
                refused: false,
            },
        }));
        assert_eq!(r.on_event(&done), Update::Finished);
        let result = r.result();
        assert_eq!(result.is_error, Some(false));
        let t = texts(&result);
        assert_eq!(t[0], "42");
        assert!(t[1].contains("s1"), "{t:?}");
        let s = result.structured_content.unwrap();
        assert_eq!(s["session_id"], "s1");
        assert_eq!(s["answer"], "42");
    }

    #[test]
    fn denials_are_listed_and_failures_are_one_error_line() {
        let mut r = CallRenderer::new();
        r.on_event(&Event::fixture(EventKind::ApprovalDecided {
            call_id: "c".into(),
            tool: "run_shell".into(),
            command: "touch x".into(),
            approved: false,
            by: DecidedBy::NoApprover,
            reason: None,
            always: None,
        }));
        r.on_event(&Event::fixture(EventKind::RunFinished(RunEnd {
            outcome: RunOutcome::Answered {
                text: "no".into(),
                refused: false,
            },
        })));
        assert!(texts(&r.result())[2].contains("touch x"));
        let mut r = CallRenderer::new();
        r.on_event(&Event::fixture(EventKind::RunFinished(RunEnd {
            outcome: RunOutcome::Failed {
                message: "HTTP 500\nbody".into(),
            },
        })));
        let result = r.result();
        assert_eq!(result.is_error, Some(true));
        let t = texts(&result);
        assert_eq!(t.len(), 1);
        assert!(!t[0].contains('\n') && t[0].contains("HTTP 500"), "{t:?}");
    }

    #[test]
    fn long_answers_are_cut_with_a_note() {
        let long = "é".repeat(MAX_ANSWER_CHARS + 10);
        let out = capped(&long, "s9");
        assert!(out.starts_with(&"é".repeat(MAX_ANSWER_CHARS)));
        assert!(out.ends_with("[… 10 more characters cut; the whole answer is in session s9]"));
        assert_eq!(capped("short", "s9"), "short");
    }
}
