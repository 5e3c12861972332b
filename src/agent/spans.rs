//! The agent's events as OpenTelemetry spans: one per run, per model
//! request and per tool call, the last two children of their run. The
//! emitter (`emitter.rs`) shows every event here the moment the agent
//! emits it, before any wait for a front end, so the times are the agent's
//! own and every front end (exec, the REPL, serve, ACP) is traced with no
//! code of its own. `telemetry` sends the spans.
//!
//! Only ids, names, counts and outcomes become attributes: never a prompt,
//! an answer, a tool's arguments or output, so nothing secret can leave.

use super::protocol::{EventKind, RunOutcome};
use crate::telemetry::{now_nanos, random_id, Exporter, Span, Value};
use std::collections::HashMap;

/// The attribute names, as docs/OBSERVABILITY.md lists them.
pub const SESSION_ID: &str = "session.id";
pub const MODEL: &str = "gen_ai.request.model";
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const OUTCOME: &str = "buddy.outcome";
pub const TURN: &str = "buddy.turn";
pub const RUN: &str = "buddy.run";

/// Tool calls a run keeps open at once; a model asking for more in one
/// round has the rest untraced rather than a map without bound.
const MAX_OPEN_TOOLS: usize = 256;

/// A span begun and not yet ended.
struct Open {
    id: [u8; 8],
    name: String,
    start: u64,
    attributes: Vec<(&'static str, Value)>,
}

impl Open {
    fn new(name: String, attributes: Vec<(&'static str, Value)>) -> Open {
        Open {
            id: random_id(),
            name,
            start: now_nanos(),
            attributes,
        }
    }
}

struct Run {
    trace: [u8; 16],
    number: u64,
    span: Open,
    request: Option<Open>,
    tools: HashMap<String, Open>,
    input_tokens: u64,
    output_tokens: u64,
}

/// Follows one agent's events and hands each span to the exporter as it ends.
pub struct Spans {
    exporter: Exporter,
    model: String,
    session: Option<String>,
    run: Option<Run>,
}

impl Spans {
    pub fn new(exporter: Exporter, model: String) -> Spans {
        Spans {
            exporter,
            model,
            session: None,
            run: None,
        }
    }

    /// Takes in one event of run `run` (0: outside a run). Gives the one
    /// warning about exporting when there is one to show.
    pub fn observe(&mut self, run: u64, kind: &EventKind) -> Option<String> {
        match kind {
            EventKind::RunStarted { .. } => {
                self.end_run("superseded", false);
                self.run = Some(Run {
                    trace: random_id(),
                    number: run,
                    span: Open::new("buddy.run".into(), Vec::new()),
                    request: None,
                    tools: HashMap::new(),
                    input_tokens: 0,
                    output_tokens: 0,
                });
                return self.exporter.take_warning();
            }
            EventKind::ModelRequest { turn } => {
                self.end_request(None, "no_reply", true);
                let model = self.model.clone();
                if let Some(r) = self.run.as_mut() {
                    r.request = Some(Open::new(
                        format!("chat {model}"),
                        vec![(TURN, Value::Int(i64::from(*turn)))],
                    ));
                }
            }
            EventKind::Usage(u) => {
                if let Some(r) = self.run.as_mut() {
                    r.input_tokens += u.prompt_tokens;
                    r.output_tokens += u.completion_tokens;
                }
                self.end_request(Some((u.prompt_tokens, u.completion_tokens)), "ok", false);
            }
            EventKind::ToolCall { call_id, name, .. } => {
                if let Some(r) = self.run.as_mut() {
                    if r.tools.len() < MAX_OPEN_TOOLS {
                        let attrs = vec![
                            (TOOL_NAME, Value::Str(name.clone())),
                            (TOOL_CALL_ID, Value::Str(call_id.clone())),
                        ];
                        r.tools.insert(
                            call_id.clone(),
                            Open::new(format!("execute_tool {name}"), attrs),
                        );
                    }
                }
            }
            EventKind::ToolResult(result) => {
                let open = self
                    .run
                    .as_mut()
                    .and_then(|r| r.tools.remove(&result.call_id));
                if let Some(open) = open {
                    let outcome = if result.is_error { "error" } else { "ok" };
                    self.finish(open, outcome, result.is_error);
                }
            }
            EventKind::RunFinished(end) => {
                let (outcome, error) = match &end.outcome {
                    RunOutcome::Answered { refused: false, .. } => ("answered", false),
                    RunOutcome::Answered { refused: true, .. } => ("refused", false),
                    RunOutcome::Failed { .. } => ("failed", true),
                    RunOutcome::Interrupted => ("interrupted", false),
                    RunOutcome::LimitReached { .. } => ("limit_reached", false),
                };
                self.end_run(outcome, error);
                return self.exporter.take_warning();
            }
            EventKind::SessionStarted { id }
            | EventKind::SessionResumed { id, .. }
            | EventKind::SessionForked { id, .. } => self.session = Some(id.clone()),
            EventKind::SessionCleared => self.session = None,
            EventKind::ModelSwitched { model, .. } => self.model = model.clone(),
            _ => {}
        }
        None
    }

    fn end_request(&mut self, tokens: Option<(u64, u64)>, outcome: &str, error: bool) {
        let Some(mut open) = self.run.as_mut().and_then(|r| r.request.take()) else {
            return;
        };
        open.attributes
            .push((MODEL, Value::Str(self.model.clone())));
        if let Some((input, output)) = tokens {
            open.attributes
                .push((INPUT_TOKENS, Value::Int(count(input))));
            open.attributes
                .push((OUTPUT_TOKENS, Value::Int(count(output))));
        }
        self.finish(open, outcome, error);
    }

    fn end_run(&mut self, outcome: &str, error: bool) {
        // A request without a reply, and calls without a result, end with
        // the run that held them.
        self.end_request(None, if error { "failed" } else { "no_reply" }, error);
        let Some(mut run) = self.run.take() else {
            return;
        };
        let tools: Vec<Open> = run.tools.drain().map(|(_, o)| o).collect();
        let trace = run.trace;
        let parent = run.span.id;
        for open in tools {
            self.export(trace, Some(parent), open, "not_finished", false);
        }
        run.span.attributes.extend([
            (RUN, Value::Int(count(run.number))),
            (MODEL, Value::Str(self.model.clone())),
            (INPUT_TOKENS, Value::Int(count(run.input_tokens))),
            (OUTPUT_TOKENS, Value::Int(count(run.output_tokens))),
        ]);
        self.export(trace, None, run.span, outcome, error);
    }

    /// Ends `open`, a child of the run in progress.
    fn finish(&self, open: Open, outcome: &str, error: bool) {
        if let Some(r) = &self.run {
            self.export(r.trace, Some(r.span.id), open, outcome, error);
        }
    }

    fn export(
        &self,
        trace: [u8; 16],
        parent: Option<[u8; 8]>,
        open: Open,
        outcome: &str,
        error: bool,
    ) {
        let mut attributes = open.attributes;
        if let Some(s) = &self.session {
            attributes.push((SESSION_ID, Value::Str(s.clone())));
        }
        attributes.push((OUTCOME, Value::Str(outcome.to_string())));
        self.exporter.record(Span {
            trace_id: trace,
            span_id: open.id,
            parent,
            name: open.name,
            start_unix_nanos: open.start,
            end_unix_nanos: now_nanos(),
            attributes,
            error,
        });
    }
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::{RunEnd, ToolCallResult};

    fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
        span.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    #[test]
    fn an_interrupted_run_ends_its_open_request_and_calls_under_it() {
        let (exporter, mut captured) = crate::telemetry::captured(16);
        let mut spans = Spans::new(exporter, "m1".into());
        spans.observe(3, &EventKind::SessionStarted { id: "s-1".into() });
        spans.observe(
            3,
            &EventKind::RunStarted {
                prompt: "secret words".into(),
            },
        );
        spans.observe(3, &EventKind::ModelRequest { turn: 1 });
        for id in ["a", "b"] {
            spans.observe(
                3,
                &EventKind::ToolCall {
                    call_id: id.into(),
                    name: "run_shell".into(),
                    arguments: "{}".into(),
                },
            );
        }
        spans.observe(
            3,
            &EventKind::ToolResult(ToolCallResult {
                call_id: "a".into(),
                name: "run_shell".into(),
                text: "out".into(),
                is_error: true,
                truncated: None,
            }),
        );
        spans.observe(
            3,
            &EventKind::RunFinished(RunEnd {
                outcome: RunOutcome::Interrupted,
            }),
        );
        let got = captured.spans();
        let names: Vec<&str> = got.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "execute_tool run_shell",
                "chat m1",
                "execute_tool run_shell",
                "buddy.run"
            ]
        );
        let run = &got[3];
        assert_eq!(run.parent, None);
        assert_eq!(attr(run, OUTCOME), Some(&Value::Str("interrupted".into())));
        assert_eq!(attr(run, RUN), Some(&Value::Int(3)));
        for child in &got[..3] {
            assert_eq!(child.parent, Some(run.span_id));
            assert_eq!(child.trace_id, run.trace_id);
            assert_eq!(attr(child, SESSION_ID), Some(&Value::Str("s-1".into())));
        }
        assert!(got[0].error, "the call whose result is an error");
        assert_eq!(attr(&got[1], OUTCOME), Some(&Value::Str("no_reply".into())));
        assert_eq!(
            attr(&got[2], OUTCOME),
            Some(&Value::Str("not_finished".into()))
        );
        // Nothing outside a run is traced.
        spans.observe(0, &EventKind::ModelRequest { turn: 1 });
        assert!(captured.spans().is_empty());
    }
}
