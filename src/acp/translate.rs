//! The agent's events as ACP session updates: one `Translator` per session
//! turns each `Event` into the `session/update`s an editor shows (message
//! and thought chunks, tool calls and their updates), the permission
//! question to put to the client, and how a prompt turn ends (its
//! `stopReason`). It only maps: it sends nothing and owns no channel, so the
//! connection (`acp::run`) does the I/O and this stays a pure function of
//! the events seen, testable without a client. A replayed session
//! (`SessionResumed`'s `replay`) is mapped here too, and so is the session's
//! plan (`Plan`, ACP's `plan` update).

use crate::agent::protocol::{
    ApprovalQuestion, Event, EventKind, Replayed, RunEnd, RunOutcome, SubagentEvent, ToolCallResult,
};
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, StopReason, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;
use std::collections::HashMap;

/// Longest tool call title, in characters (a command line can be long).
const TITLE_CHARS: usize = 120;

/// What one event asks of the connection.
#[derive(Debug)]
pub enum Step {
    /// A `session/update` notification.
    Update(SessionUpdate),
    /// A `session/request_permission` for this call; the answer goes back to
    /// the agent as `Op::Approve { call_id }`. `always` offers "allow always".
    Ask {
        call_id: String,
        tool_call: ToolCallUpdate,
        always: Option<String>,
    },
    /// The prompt turn is over: its stop reason, or the error to answer
    /// the `session/prompt` request with.
    Done(Result<StopReason, TurnFailed>),
}

/// A prompt turn whose run failed: the run's message, for the error answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TurnFailed(pub String);

/// What the translator remembers of a call between its events.
struct Call {
    name: String,
    kind: ToolKind,
    /// For an edit, the diff to show with its result.
    diff: Option<Diff>,
}

/// One session's event-to-update mapping.
#[derive(Default)]
pub struct Translator {
    calls: HashMap<String, Call>,
    /// A `UserPromptSubmit` hook blocked the prompt: the turn ends as a refusal.
    refused: bool,
}

impl Translator {
    pub fn new() -> Translator {
        Translator::default()
    }

    /// The steps one agent event asks for (often none).
    pub fn on_event(&mut self, ev: &Event) -> Vec<Step> {
        match &ev.kind {
            EventKind::RunStarted { .. } => {
                self.refused = false;
                Vec::new()
            }
            EventKind::TextDelta { text } => vec![chunk(SessionUpdate::AgentMessageChunk, text)],
            EventKind::Reasoning { text, .. } => {
                vec![chunk(SessionUpdate::AgentThoughtChunk, text)]
            }
            EventKind::ToolCall {
                call_id,
                name,
                arguments,
            } => self.call_started(call_id, name, arguments, None),
            EventKind::ToolProgress { call_id, tail } => progress(call_id, tail),
            EventKind::Subagent(sub) => self.child_steps(sub),
            EventKind::ApprovalRequested(ApprovalQuestion {
                call_id,
                tool,
                command,
                detail,
                always,
                subagent,
                ..
            }) => {
                // A child's question names the child in its title.
                let title = match subagent {
                    Some(name) => format!("[{name}] {command}"),
                    None => command.clone(),
                };
                let mut fields = ToolCallUpdateFields::new()
                    .status(ToolCallStatus::Pending)
                    .title(crate::text::one_line(&title, TITLE_CHARS));
                let diff = self.calls.get(call_id).and_then(|c| c.diff.clone());
                let mut content = Vec::new();
                if let Some(d) = diff {
                    content.push(ToolCallContent::Diff(d));
                } else if let Some(detail) = detail {
                    content.push(text_content(fenced(detail)));
                } else if tool == "run_shell" {
                    content.push(text_content(fenced(command)));
                }
                if !content.is_empty() {
                    fields = fields.content(content);
                }
                vec![Step::Ask {
                    call_id: call_id.clone(),
                    tool_call: ToolCallUpdate::new(call_id.clone(), fields),
                    always: always.clone(),
                }]
            }
            EventKind::ApprovalDecided {
                call_id, approved, ..
            } if *approved => {
                vec![update(
                    call_id,
                    ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                )]
            }
            EventKind::ToolResult(ToolCallResult {
                call_id,
                text,
                is_error,
                ..
            }) => self.call_ended(call_id, text, *is_error),
            EventKind::HookBlocked { hook_event, .. } if hook_event == "UserPromptSubmit" => {
                self.refused = true;
                Vec::new()
            }
            EventKind::RunFinished(RunEnd { outcome }) => {
                // Calls the run never answered (it stopped first) fail.
                let mut steps: Vec<Step> = self
                    .calls
                    .drain()
                    .map(|(id, _)| {
                        update(
                            &id,
                            ToolCallUpdateFields::new().status(ToolCallStatus::Failed),
                        )
                    })
                    .collect();
                steps.push(Step::Done(stop_reason(outcome, self.refused)));
                steps
            }
            EventKind::SessionResumed { replay, .. } => replay_steps(replay),
            EventKind::Plan { entries } => vec![Step::Update(SessionUpdate::Plan(plan(entries)))],
            _ => Vec::new(),
        }
    }

    fn call_started(
        &mut self,
        call_id: &str,
        name: &str,
        arguments: &str,
        child: Option<&str>,
    ) -> Vec<Step> {
        let (call, mut first) = started(call_id, name, arguments);
        if let Some(child) = child {
            // A child's call names the child, as its questions do.
            first.title = crate::text::one_line(&format!("[{child}] {}", first.title), TITLE_CHARS);
        }
        self.calls.insert(call_id.to_string(), call);
        vec![Step::Update(SessionUpdate::ToolCall(first))]
    }

    fn call_ended(&mut self, call_id: &str, text: &str, is_error: bool) -> Vec<Step> {
        let call = self.calls.remove(call_id);
        let status = if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        let mut content = Vec::new();
        if let Some(Call {
            diff: Some(d),
            kind: ToolKind::Edit,
            ..
        }) = &call
        {
            if !is_error {
                content.push(ToolCallContent::Diff(d.clone()));
            }
        }
        let shown = match call.as_ref().map(|c| c.name.as_str()) {
            // Command output reads as a terminal's: kept verbatim.
            Some("run_shell") => fenced(text),
            _ => text.to_string(),
        };
        content.push(text_content(shown));
        vec![update(
            call_id,
            ToolCallUpdateFields::new()
                .status(status)
                .content(content)
                .raw_output(Value::String(text.to_string())),
        )]
    }

    /// A sub-agent's tool calls, shown as calls of their own under the ids
    /// its questions use (`PARENT/CHILD`, deeper for a grandchild): the
    /// editor has seen the call a `session/request_permission` names, and
    /// follows the child's progress. The rest of a child's events (its
    /// text, its usage) stay in it: its answer is the `agent` call's result.
    fn child_steps(&mut self, sub: &SubagentEvent) -> Vec<Step> {
        let mut prefix = sub.call_id.clone();
        let mut names = sub.description.clone();
        let mut event = &*sub.event;
        while let EventKind::Subagent(inner) = event {
            prefix = format!("{prefix}/{}", inner.call_id);
            names = format!("{names} > {}", inner.description);
            event = &inner.event;
        }
        match event {
            EventKind::ToolCall {
                call_id,
                name,
                arguments,
            } => self.call_started(
                &format!("{prefix}/{call_id}"),
                name,
                arguments,
                Some(&names),
            ),
            EventKind::ToolProgress { call_id, tail } => {
                progress(&format!("{prefix}/{call_id}"), tail)
            }
            EventKind::ToolResult(r) => {
                self.call_ended(&format!("{prefix}/{}", r.call_id), &r.text, r.is_error)
            }
            _ => Vec::new(),
        }
    }
}

fn progress(call_id: &str, tail: &str) -> Vec<Step> {
    let fields = ToolCallUpdateFields::new()
        .status(ToolCallStatus::InProgress)
        .content(vec![text_content(fenced(tail))]);
    vec![update(call_id, fields)]
}

/// The session's plan as ACP's: every entry, whole (the client replaces
/// its plan with each). buddy's items have no priority; all are medium.
fn plan(entries: &[crate::agent::protocol::PlanEntry]) -> Plan {
    use crate::agent::protocol::PlanStatus;
    Plan::new(
        entries
            .iter()
            .map(|e| {
                let status = match e.status {
                    PlanStatus::Pending => PlanEntryStatus::Pending,
                    PlanStatus::InProgress => PlanEntryStatus::InProgress,
                    PlanStatus::Completed => PlanEntryStatus::Completed,
                };
                PlanEntry::new(e.content.clone(), PlanEntryPriority::Medium, status)
            })
            .collect(),
    )
}

/// How a run's outcome ends the prompt turn. A run that fails for any
/// reason but a refusal is an error answer, not a stop reason.
fn stop_reason(outcome: &RunOutcome, refused: bool) -> Result<StopReason, TurnFailed> {
    match outcome {
        RunOutcome::Answered { refused: true, .. } => Ok(StopReason::Refusal),
        RunOutcome::Answered { .. } => Ok(StopReason::EndTurn),
        RunOutcome::Interrupted => Ok(StopReason::Cancelled),
        // Every limit (model requests, tokens, time) bounds the turn's
        // requests to the model; ACP has one reason for that.
        RunOutcome::LimitReached { .. } => Ok(StopReason::MaxTurnRequests),
        RunOutcome::Failed { .. } if refused => Ok(StopReason::Refusal),
        RunOutcome::Failed { message } => Err(TurnFailed(message.clone())),
    }
}

fn chunk(make: fn(ContentChunk) -> SessionUpdate, text: &str) -> Step {
    Step::Update(make(ContentChunk::new(ContentBlock::from(
        text.to_string(),
    ))))
}

fn update(call_id: &str, fields: ToolCallUpdateFields) -> Step {
    Step::Update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        fields,
    )))
}

fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::from(text))
}

/// Text in a Markdown code block whose fence is longer than any run of
/// backticks inside, so output can never close it early.
fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let nl = if text.ends_with('\n') { "" } else { "\n" };
    format!("{fence}\n{text}{nl}{fence}")
}

/// The kind an editor shows for a tool, by buddy's tool names; MCP tools
/// and anything unknown are `other`.
pub fn kind_of(name: &str) -> ToolKind {
    builtin_kind(name).unwrap_or(ToolKind::Other)
}

/// The kind of each of buddy's own tools, `None` for any other name. Every
/// built-in tool is listed, even where its kind is `other` (`time`), so a
/// unit test in `app::setup` can tell a tool added without a kind.
pub fn builtin_kind(name: &str) -> Option<ToolKind> {
    Some(match name {
        "read_file" | "capture-pane" | "skill" | "shell_output" => ToolKind::Read,
        "write_file" | "edit_file" | "apply_patch" => ToolKind::Edit,
        "grep" | "glob" | "web_search" => ToolKind::Search,
        "run_shell" | "send-keys" | "shell_write" | "shell_kill" => ToolKind::Execute,
        "fetch_url" => ToolKind::Fetch,
        "time" => ToolKind::Other,
        _ => return None,
    })
}

/// The `tool_call` update for a call as the model asked for it, and what to
/// remember of it.
fn started(call_id: &str, name: &str, arguments: &str) -> (Call, ToolCall) {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let s = |key: &str| args.get(key).and_then(Value::as_str);
    let kind = kind_of(name);
    let title = match (name, s("path")) {
        ("run_shell", _) => s("command").map(str::to_string),
        ("read_file", Some(p)) => Some(format!("Read {p}")),
        ("write_file", Some(p)) => Some(format!("Write {p}")),
        ("edit_file", Some(p)) => Some(format!("Edit {p}")),
        ("grep", _) => s("pattern").map(|p| format!("Search for {p}")),
        ("glob", _) => s("pattern").map(|p| format!("Find {p}")),
        ("fetch_url", _) => s("url").map(|u| format!("Fetch {u}")),
        ("web_search", _) => s("query").map(|q| format!("Search the web for {q}")),
        ("shell_output", _) => s("job_id").map(|j| format!("Read job {j}'s output")),
        ("shell_write", _) => s("job_id").map(|j| format!("Write to job {j}")),
        ("shell_kill", _) => s("job_id").map(|j| format!("Stop job {j}")),
        _ => None,
    }
    .unwrap_or_else(|| name.to_string());
    let diff = match (name, s("path")) {
        ("write_file", Some(p)) => s("content").map(|c| Diff::new(p, c)),
        ("edit_file", Some(p)) => match (s("old_string"), s("new_string")) {
            (Some(old), Some(new)) => Some(Diff::new(p, new).old_text(old.to_string())),
            _ => None,
        },
        _ => None,
    };
    let mut call = ToolCall::new(
        call_id.to_string(),
        crate::text::one_line(&title, TITLE_CHARS),
    )
    .kind(kind)
    .status(ToolCallStatus::Pending)
    .raw_input(args.clone());
    if let Some(p) = s("path") {
        call = call.locations(vec![ToolCallLocation::new(p)]);
    }
    (
        Call {
            name: name.to_string(),
            kind,
            diff,
        },
        call,
    )
}

/// A saved conversation as the updates that show it: the user's messages,
/// the answers, and each tool call with its result.
fn replay_steps(replay: &[Replayed]) -> Vec<Step> {
    let mut steps = Vec::new();
    // Results name their tool, not their call: they answer the calls of the
    // answer before them, in order.
    let mut open: std::collections::VecDeque<String> = Default::default();
    let mut n = 0usize;
    for item in replay {
        match item {
            Replayed::User { text, .. } => {
                steps.push(chunk(SessionUpdate::UserMessageChunk, text));
            }
            Replayed::Assistant { text, calls } => {
                if !text.is_empty() {
                    steps.push(chunk(SessionUpdate::AgentMessageChunk, text));
                }
                for c in calls {
                    n += 1;
                    let id = format!("replay-{n}");
                    let (_, call) = started(&id, &c.name, &c.arguments);
                    steps.push(Step::Update(SessionUpdate::ToolCall(call)));
                    open.push_back(id);
                }
            }
            Replayed::Tool { text, .. } => {
                if let Some(id) = open.pop_front() {
                    steps.push(update(
                        &id,
                        ToolCallUpdateFields::new()
                            .status(ToolCallStatus::Completed)
                            .content(vec![text_content(text.clone())]),
                    ));
                }
            }
            // The call's result is the child's answer; its own steps are
            // not the editor's conversation.
            Replayed::Subagent { .. } => {}
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::ReplayedCall;

    fn json(step: &Step) -> Value {
        match step {
            Step::Update(u) => serde_json::to_value(u).unwrap(),
            Step::Ask { tool_call, .. } => serde_json::to_value(tool_call).unwrap(),
            Step::Done(r) => serde_json::json!(format!("{r:?}")),
        }
    }

    #[test]
    fn the_plan_becomes_a_plan_update_with_every_entry() {
        use crate::agent::protocol::{PlanEntry, PlanStatus};
        let mut t = Translator::new();
        let steps = t.on_event(&Event::fixture(EventKind::Plan {
            entries: vec![
                PlanEntry {
                    content: "read".into(),
                    status: PlanStatus::Completed,
                },
                PlanEntry {
                    content: "write".into(),
                    status: PlanStatus::InProgress,
                },
            ],
        }));
        let v = json(&steps[0]);
        assert_eq!(v["sessionUpdate"], "plan");
        assert_eq!(v["entries"][0]["content"], "read");
        assert_eq!(v["entries"][0]["status"], "completed");
        assert_eq!(v["entries"][1]["status"], "in_progress");
        assert_eq!(v["entries"][1]["priority"], "medium");
    }

    #[test]
    fn text_and_reasoning_become_message_and_thought_chunks() {
        let mut t = Translator::new();
        let steps = t.on_event(&Event::fixture(EventKind::TextDelta { text: "hi".into() }));
        let v = json(&steps[0]);
        assert_eq!(v["sessionUpdate"], "agent_message_chunk");
        assert_eq!(v["content"]["text"], "hi");
        let steps = t.on_event(&Event::fixture(EventKind::Reasoning {
            field: "reasoning_content".into(),
            text: "hmm".into(),
        }));
        assert_eq!(json(&steps[0])["sessionUpdate"], "agent_thought_chunk");
    }

    #[test]
    fn a_shell_call_goes_pending_then_completed_with_its_output_fenced() {
        let mut t = Translator::new();
        let s = t.on_event(&Event::fixture(EventKind::ToolCall {
            call_id: "c1".into(),
            name: "run_shell".into(),
            arguments: r#"{"command":"ls -l"}"#.into(),
        }));
        let v = json(&s[0]);
        assert_eq!(v["sessionUpdate"], "tool_call");
        assert_eq!(v["kind"], "execute");
        // Pending is the protocol's default status, which the SDK leaves out.
        assert!(
            v["status"].is_null() || v["status"] == "pending",
            "{}",
            v["status"]
        );
        assert_eq!(v["title"], "ls -l");
        let s = t.on_event(&Event::fixture(EventKind::ToolResult(ToolCallResult {
            call_id: "c1".into(),
            name: "run_shell".into(),
            text: "a ``` b".into(),
            is_error: false,
            truncated: None,
        })));
        let v = json(&s[0]);
        assert_eq!(v["sessionUpdate"], "tool_call_update");
        assert_eq!(v["status"], "completed");
        assert_eq!(v["content"][0]["content"]["text"], "````\na ``` b\n````");
    }

    #[test]
    fn an_edit_shows_its_diff_and_asks_with_it() {
        let mut t = Translator::new();
        t.on_event(&Event::fixture(EventKind::ToolCall {
            call_id: "e".into(),
            name: "edit_file".into(),
            arguments: r#"{"path":"a.txt","old_string":"x","new_string":"y"}"#.into(),
        }));
        let s = t.on_event(&Event::fixture(EventKind::ApprovalRequested(
            ApprovalQuestion {
                call_id: "e".into(),
                tool: "edit_file".into(),
                actor: "me@here".into(),
                command: "edit a.txt".into(),
                detail: Some("-x\n+y".into()),
                always: None,
                subagent: None,
            },
        )));
        let Step::Ask { tool_call, .. } = &s[0] else {
            panic!("expected a question, got {s:?}");
        };
        let v = serde_json::to_value(tool_call).unwrap();
        assert_eq!(v["content"][0]["type"], "diff");
        assert_eq!(v["content"][0]["oldText"], "x");
        assert_eq!(v["content"][0]["newText"], "y");
    }

    #[test]
    fn outcomes_map_to_stop_reasons() {
        let done = |t: &mut Translator, outcome| match t
            .on_event(&Event::fixture(EventKind::RunFinished(RunEnd { outcome })))
            .pop()
        {
            Some(Step::Done(r)) => r,
            other => panic!("{other:?}"),
        };
        let mut t = Translator::new();
        assert_eq!(
            done(
                &mut t,
                RunOutcome::Answered {
                    text: "a".into(),
                    refused: false
                }
            ),
            Ok(StopReason::EndTurn)
        );
        assert_eq!(
            done(
                &mut t,
                RunOutcome::Answered {
                    text: "I can't help with that.".into(),
                    refused: true
                }
            ),
            Ok(StopReason::Refusal)
        );
        assert_eq!(
            done(&mut t, RunOutcome::Interrupted),
            Ok(StopReason::Cancelled)
        );
        assert_eq!(
            done(
                &mut t,
                RunOutcome::LimitReached {
                    message: "m".into()
                }
            ),
            Ok(StopReason::MaxTurnRequests)
        );
        assert_eq!(
            done(
                &mut t,
                RunOutcome::Failed {
                    message: "boom".into()
                }
            ),
            Err(TurnFailed("boom".into()))
        );
        t.on_event(&Event::fixture(EventKind::HookBlocked {
            hook_event: "UserPromptSubmit".into(),
            call_id: None,
            tool: None,
            reason: "no".into(),
        }));
        assert_eq!(
            done(
                &mut t,
                RunOutcome::Failed {
                    message: "blocked".into()
                }
            ),
            Ok(StopReason::Refusal)
        );
    }

    #[test]
    fn a_replay_pairs_results_with_their_calls() {
        let steps = replay_steps(&[
            Replayed::User {
                text: "list".into(),
                attached: 0,
            },
            Replayed::Assistant {
                text: String::new(),
                calls: vec![ReplayedCall {
                    name: "run_shell".into(),
                    arguments: r#"{"command":"ls"}"#.into(),
                }],
            },
            Replayed::Tool {
                name: "run_shell".into(),
                text: "a.txt".into(),
            },
            Replayed::Assistant {
                text: "done".into(),
                calls: Vec::new(),
            },
        ]);
        let v: Vec<Value> = steps.iter().map(json).collect();
        assert_eq!(v[0]["sessionUpdate"], "user_message_chunk");
        assert_eq!(v[1]["sessionUpdate"], "tool_call");
        assert_eq!(v[2]["sessionUpdate"], "tool_call_update");
        assert_eq!(v[2]["toolCallId"], v[1]["toolCallId"]);
        assert_eq!(v[3]["sessionUpdate"], "agent_message_chunk");
    }

    #[test]
    fn fences_outlast_backticks_inside() {
        assert_eq!(fenced("x"), "```\nx\n```");
        assert_eq!(fenced("````"), "`````\n````\n`````");
    }
}
