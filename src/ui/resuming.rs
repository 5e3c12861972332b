//! A saved session loaded before a conversation starts (`buddy resume`,
//! `exec --resume`): the renderer that waits on the drive loop for the
//! agent's answer to `Op::Resume` or `Op::Fork` and tells the user what
//! came of it. Sending the op, and what to do on failure, is the caller's.

use super::json::JsonFrontEnd;
use super::style::Style;
use crate::agent::protocol::{Event, EventKind, OpId};
use crate::agent::service::OpSender;
use crate::drive::{Flow, Renderer};

/// What is shown of the resumed session.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// Nothing: the front end shows the event itself (the REPL replays it).
    Quiet,
    /// Warnings and the model note.
    Notes,
    /// Those and the last exchange.
    LastExchange,
}

/// Why no session was loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The agent refused the resume or fork: its error line.
    #[error("{0}")]
    Refused(String),
    #[error("the agent stopped unexpectedly")]
    Stopped,
}

pub struct Resuming<'a> {
    style: Style,
    notice: Notice,
    /// `exec --json`: every event is a line on stdout too.
    json: Option<&'a mut JsonFrontEnd>,
    /// The `Op::Resume` or `Op::Fork` whose reply is awaited; other
    /// events are shown but answer nothing.
    op: Option<OpId>,
    /// The `SessionResumed` event, or the error that refused the resume.
    answer: Option<Result<Event, ResumeError>>,
}

impl<'a> Resuming<'a> {
    pub fn new(style: Style, notice: Notice, json: Option<&'a mut JsonFrontEnd>) -> Self {
        Resuming {
            style,
            notice,
            json,
            op: None,
            answer: None,
        }
    }

    /// Waits for the replies to `op` (the caller's `Op::Resume` or
    /// `Op::Fork`); `None` when it could not be sent, and nothing answers.
    pub fn awaiting(&mut self, op: Option<OpId>) {
        self.op = op;
    }

    /// The `SessionResumed` event, or why there is none.
    pub fn answer(self) -> Result<Event, ResumeError> {
        self.answer.unwrap_or(Err(ResumeError::Stopped))
    }
}

impl Renderer for Resuming<'_> {
    type Input = ();

    fn on_event(&mut self, ev: Event, _ops: &OpSender) -> Flow {
        if let Some(j) = self.json.as_mut() {
            j.event(&ev);
        }
        if self.op.is_none() || ev.op_id != self.op {
            return Flow::Continue;
        }
        let style = self.style;
        match &ev.kind {
            EventKind::SessionForked { id, from, .. } => eprintln!(
                "{}",
                style.dim(&format!(
                    "forked session {from}: this conversation goes on as session {id}; {from} stays as it was"
                ))
            ),
            EventKind::SessionResumed { warnings, note, .. } => {
                match self.notice {
                    Notice::LastExchange => {
                        let text = super::resumed_text(&ev.kind, style).unwrap_or_default();
                        eprintln!("{text}");
                    }
                    Notice::Notes => {
                        for w in warnings {
                            eprintln!("{} {w}", style.warning("warning:"));
                        }
                        if let Some(n) = note {
                            eprintln!("{}", style.dim(n));
                        }
                    }
                    Notice::Quiet => {}
                }
                self.answer = Some(Ok(ev));
                return Flow::Stop;
            }
            EventKind::Error { message, .. } => {
                self.answer = Some(Err(ResumeError::Refused(message.clone())));
                return Flow::Stop;
            }
            _ => {}
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resumed(op_id: Option<OpId>) -> Event {
        Event {
            op_id,
            ..Event::fixture(EventKind::SessionResumed {
                id: "s1".into(),
                messages: 0,
                warnings: Vec::new(),
                note: None,
                last_prompt: None,
                last_answer: None,
                replay: Vec::new(),
            })
        }
    }

    #[test]
    fn only_the_reply_to_its_own_op_answers_the_resume() {
        let (ops, _rx) = OpSender::channel(1);
        let mut shown = Resuming::new(Style::plain(), Notice::Quiet, None);
        shown.awaiting(Some(7));
        let refused = Event {
            op_id: Some(3),
            ..Event::fixture(EventKind::error("not yours"))
        };
        assert_eq!(shown.on_event(refused, &ops), Flow::Continue);
        assert_eq!(shown.on_event(resumed(Some(3)), &ops), Flow::Continue);
        assert_eq!(shown.on_event(resumed(Some(7)), &ops), Flow::Stop);
        assert!(matches!(shown.answer(), Ok(ev) if ev.op_id == Some(7)));
    }

    #[test]
    fn a_resume_that_was_never_sent_is_answered_by_nothing() {
        let (ops, _rx) = OpSender::channel(1);
        let mut shown = Resuming::new(Style::plain(), Notice::Quiet, None);
        shown.awaiting(None);
        assert_eq!(shown.on_event(resumed(None), &ops), Flow::Continue);
        assert_eq!(shown.answer().unwrap_err(), ResumeError::Stopped);
    }
}
