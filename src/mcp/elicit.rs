//! What a server asks the user in the middle of a call (elicitation), on
//! either revision: an `elicitation/create` request of a 2025 server, and
//! the elicitation in an `input_required` result of a 2026-07-28 one (the
//! SDK answers those through the same handler, then sends the request
//! again with the answers and the server's `requestState`). Owns which
//! call a question belongs to (the calls in flight register here, and a
//! question goes to the latest one's approver), the bound on its wait, the
//! note the model reads about it, and keeping a call's timeout from running
//! while its question waits. Does not own the question's form or checks
//! (`tools::elicitation`) nor asking anyone (the agent's gate and the front
//! ends).

use crate::tools::elicitation::{Action, Outcome, Question};
use crate::tools::Approver;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Notes one call keeps at most: a server asking without end does not
/// grow the result without end.
const MAX_NOTES: usize = 8;

/// Numbers questions, so each id is new in this process.
static NEXT_QUESTION: AtomicU64 = AtomicU64::new(1);

/// One call in flight that can take a question.
struct Asker {
    approver: Arc<dyn Approver>,
    call_id: String,
    /// What the model should read about its questions.
    notes: Mutex<Vec<String>>,
    /// Questions waiting now.
    open: AtomicUsize,
    /// When the last question ended.
    answered: Mutex<Option<Instant>>,
}

/// A server's calls in flight, newest last.
#[derive(Default)]
pub(super) struct Askers {
    calls: Mutex<Vec<Arc<Asker>>>,
}

impl Askers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Asker>>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a call whose questions go to `approver` until the
    /// returned guard is dropped.
    pub fn enter(&self, approver: Arc<dyn Approver>, call_id: &str) -> Entered<'_> {
        let asker = Arc::new(Asker {
            approver,
            call_id: call_id.to_string(),
            notes: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            answered: Mutex::new(None),
        });
        self.lock().push(Arc::clone(&asker));
        Entered {
            askers: self,
            asker,
        }
    }

    /// The call a question now belongs to. A server asks during a call of
    /// its own, and calls to one server rarely overlap; when they do, the
    /// newest is the likeliest asker (the protocol does not say which
    /// request a 2025 server's question is about).
    fn current(&self) -> Option<Arc<Asker>> {
        self.lock().last().cloned()
    }
}

/// A call registered for questions; unregistered when dropped.
pub(super) struct Entered<'a> {
    askers: &'a Askers,
    asker: Arc<Asker>,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.askers.lock().retain(|a| !Arc::ptr_eq(a, &self.asker));
    }
}

impl Entered<'_> {
    /// What the model should read about the call's questions, one line each.
    pub fn notes(&self) -> Vec<String> {
        self.asker
            .notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `call` within `limit`, not counting the time its questions
    /// wait for the user: a call that asked gets `limit` again from the
    /// answer. `None` when the limit passed.
    pub async fn within<F: Future>(&self, limit: Duration, call: F) -> Option<F::Output> {
        tokio::pin!(call);
        let mut deadline = Instant::now() + limit;
        loop {
            tokio::select! {
                out = &mut call => return Some(out),
                _ = tokio::time::sleep_until(deadline) => {
                    let asker = &self.asker;
                    if asker.open.load(Ordering::SeqCst) > 0 {
                        deadline = Instant::now() + limit;
                        continue;
                    }
                    let answered = *asker.answered.lock().unwrap_or_else(|p| p.into_inner());
                    match answered {
                        Some(t) if t + limit > Instant::now() => deadline = t + limit,
                        _ => return None,
                    }
                }
            }
        }
    }
}

/// Answers a server's question: put to the call in flight's approver (the
/// agent's gate, which asks a front end), at most `wait`, and withdrawn
/// when the server cancels its request. Declined when no call can take it
/// or buddy cannot show it.
pub(super) async fn answer(
    askers: &Askers,
    server: &str,
    wait: Duration,
    params: ElicitRequestParams,
    withdrawn: CancellationToken,
) -> ElicitResult {
    let Some(asker) = askers.current() else {
        return ElicitResult::new(ElicitationAction::Decline);
    };
    let id = format!(
        "{}-q{}",
        asker.call_id,
        NEXT_QUESTION.fetch_add(1, Ordering::Relaxed)
    );
    let (message, question) = match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let question = serde_json::to_value(&requested_schema)
                .map_err(|e| e.to_string())
                .and_then(|schema| Question::form(id, server, &asker.call_id, &message, &schema));
            (message, question)
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            let question = Question::url(id, server, &asker.call_id, &message, &url);
            (message, question)
        }
        _ => (
            String::new(),
            Err("it is of a kind buddy does not know".to_string()),
        ),
    };
    let outcome = match question {
        Err(why) => Outcome::Refused(format!("buddy cannot ask it: {why}")),
        Ok(question) => {
            asker.open.fetch_add(1, Ordering::SeqCst);
            let outcome = tokio::select! {
                o = asker.approver.elicit(question, wait) => o,
                _ = withdrawn.cancelled() => Outcome::Ended,
            };
            asker.open.fetch_sub(1, Ordering::SeqCst);
            *asker.answered.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            outcome
        }
    };
    {
        let mut notes = asker.notes.lock().unwrap_or_else(|p| p.into_inner());
        if notes.len() < MAX_NOTES {
            notes.push(outcome.note(server, &message));
        }
    }
    match outcome.action() {
        Action::Accept { content } => ElicitResult::new(ElicitationAction::Accept)
            .with_content(serde_json::Value::Object(content)),
        Action::Decline => ElicitResult::new(ElicitationAction::Decline),
        Action::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// The questions of a call typed by hand (`buddy mcp call`), where nobody
/// is asked: declined, or with `accept_defaults` answered with the form's
/// defaults when every required field has one.
pub struct HandAsker {
    pub accept_defaults: bool,
}

#[async_trait::async_trait]
impl Approver for HandAsker {
    async fn approve(&self, _request: crate::tools::ApprovalRequest) -> crate::tools::Approval {
        // The person typed the call; nothing else asks here.
        crate::tools::Approval::Approved
    }

    async fn elicit(&self, question: Question, _wait: Duration) -> Outcome {
        if !self.accept_defaults {
            return Outcome::Refused(
                "`buddy mcp call` does not ask questions (--accept-defaults takes a form's defaults)"
                    .into(),
            );
        }
        let content = question.defaults();
        match question.check(&content) {
            Ok(()) => Outcome::User(Action::Accept { content }),
            Err(e) => Outcome::Refused(format!("the form's defaults do not answer it ({e})")),
        }
    }
}

/// A result's text with the notes about the call's questions after it, in
/// brackets, so the model knows what the user was asked and what came of it.
pub(super) fn with_notes(text: String, notes: &[String]) -> String {
    if notes.is_empty() {
        return text;
    }
    let notes: Vec<String> = notes.iter().map(|n| format!("[{n}]")).collect();
    match text.is_empty() {
        true => notes.join("\n"),
        false => format!("{text}\n{}", notes.join("\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Approval, ApprovalRequest};
    use async_trait::async_trait;

    /// Answers every question with the form's defaults, after `delay`.
    struct Defaults {
        delay: Duration,
    }

    #[async_trait]
    impl Approver for Defaults {
        async fn approve(&self, _: ApprovalRequest) -> Approval {
            Approval::Approved
        }
        async fn elicit(&self, q: Question, _wait: Duration) -> Outcome {
            tokio::time::sleep(self.delay).await;
            Outcome::User(Action::Accept {
                content: q.defaults(),
            })
        }
    }

    fn form() -> ElicitRequestParams {
        serde_json::from_value(serde_json::json!({
            "mode": "form", "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "default": "Ann"}}}
        }))
        .expect("a form request")
    }

    #[tokio::test]
    async fn a_question_goes_to_the_call_in_flight_and_leaves_a_note() {
        let askers = Askers::default();
        let none = answer(
            &askers,
            "s",
            Duration::from_secs(1),
            form(),
            CancellationToken::new(),
        );
        assert_eq!(none.await.action, ElicitationAction::Decline);
        let call = askers.enter(
            Arc::new(Defaults {
                delay: Duration::ZERO,
            }),
            "c1",
        );
        let got = answer(
            &askers,
            "s",
            Duration::from_secs(1),
            form(),
            CancellationToken::new(),
        )
        .await;
        assert_eq!(got.action, ElicitationAction::Accept);
        assert_eq!(got.content, Some(serde_json::json!({"name": "Ann"})));
        assert_eq!(
            call.notes(),
            vec!["the MCP server `s` asked the user: \"Name?\"; they answered".to_string()]
        );
        drop(call);
        assert!(askers.current().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_calls_timeout_does_not_run_while_its_question_waits() {
        let askers = Arc::new(Askers::default());
        let call = askers.enter(
            Arc::new(Defaults {
                delay: Duration::from_secs(50),
            }),
            "c1",
        );
        let a = Arc::clone(&askers);
        // The "server" asks at once, then needs 5 s more after the answer:
        // 55 s in all, against a limit of 10 s.
        let work = async move {
            answer(
                &a,
                "s",
                Duration::from_secs(60),
                form(),
                CancellationToken::new(),
            )
            .await;
            tokio::time::sleep(Duration::from_secs(5)).await;
            "done"
        };
        assert_eq!(
            call.within(Duration::from_secs(10), work).await,
            Some("done")
        );
        let slow = tokio::time::sleep(Duration::from_secs(11));
        assert_eq!(call.within(Duration::from_secs(10), slow).await, None);
    }
}
