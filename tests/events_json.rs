//! `buddy exec --json`: every line of real runs is checked against the event
//! types documented in docs/EVENTS.md (and every documented example against
//! the code's `Event`), so the documentation and the code cannot drift.

use crate::support;

use buddy::agent::protocol::{Event, EventKind, Op};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::{fake_config, BuddyCmd};

/// Every event type, by the same names serde gives them. The match below
/// fails to compile when a kind is added; add its name here and document it.
const ALL: &[&str] = &[
    "run_started",
    "model_request",
    "text_delta",
    "reasoning",
    "tool_call",
    "tool_progress",
    "tool_result",
    "usage",
    "retrying",
    "warning",
    "hook_blocked",
    "approval_requested",
    "approval_decided",
    "subagent",
    "user_message",
    "queues",
    "unqueued",
    "compacted",
    "run_finished",
    "status",
    "sessions",
    "timeout_set",
    "command_ran",
    "jobs",
    "approval_policy_changed",
    "model_switched",
    "session_started",
    "session_resumed",
    "session_cleared",
    "turns",
    "rewound",
    "session_forked",
    "error",
    "shutdown_complete",
    "plan",
    "plan_mode",
    "plan_ready",
    "elicitation_requested",
    "elicitation_decided",
];

fn name(kind: &EventKind) -> &'static str {
    match kind {
        EventKind::RunStarted { .. } => "run_started",
        EventKind::ModelRequest { .. } => "model_request",
        EventKind::TextDelta { .. } => "text_delta",
        EventKind::Reasoning { .. } => "reasoning",
        EventKind::ToolCall { .. } => "tool_call",
        EventKind::ToolProgress { .. } => "tool_progress",
        EventKind::ToolResult { .. } => "tool_result",
        EventKind::Usage { .. } => "usage",
        EventKind::Retrying { .. } => "retrying",
        EventKind::Warning { .. } => "warning",
        EventKind::HookBlocked { .. } => "hook_blocked",
        EventKind::ApprovalRequested { .. } => "approval_requested",
        EventKind::ApprovalDecided { .. } => "approval_decided",
        EventKind::Subagent(_) => "subagent",
        EventKind::UserMessage { .. } => "user_message",
        EventKind::Queues { .. } => "queues",
        EventKind::Unqueued { .. } => "unqueued",
        EventKind::Compacted { .. } => "compacted",
        EventKind::RunFinished { .. } => "run_finished",
        EventKind::Status(_) => "status",
        EventKind::Sessions { .. } => "sessions",
        EventKind::TimeoutSet { .. } => "timeout_set",
        EventKind::CommandRan(_) => "command_ran",
        EventKind::Jobs { .. } => "jobs",
        EventKind::ApprovalPolicyChanged { .. } => "approval_policy_changed",
        EventKind::ModelSwitched { .. } => "model_switched",
        EventKind::SessionStarted { .. } => "session_started",
        EventKind::SessionResumed { .. } => "session_resumed",
        EventKind::SessionCleared => "session_cleared",
        EventKind::Turns { .. } => "turns",
        EventKind::Rewound { .. } => "rewound",
        EventKind::SessionForked { .. } => "session_forked",
        EventKind::Error { .. } => "error",
        EventKind::ShutdownComplete => "shutdown_complete",
        EventKind::Plan { .. } => "plan",
        EventKind::PlanMode { .. } => "plan_mode",
        EventKind::PlanReady { .. } => "plan_ready",
        EventKind::ElicitationRequested(_) => "elicitation_requested",
        EventKind::ElicitationDecided { .. } => "elicitation_decided",
    }
}

/// The example lines of docs/EVENTS.md's json blocks.
fn documented_lines() -> Vec<Value> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/EVENTS.md"))
        .expect("docs/EVENTS.md");
    let mut out = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        match line.trim() {
            "```json" => inside = true,
            "```" => inside = false,
            l if inside && !l.is_empty() => out.push(
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("not JSON in EVENTS.md: {l}: {e}")),
            ),
            _ => {}
        }
    }
    out
}

/// Documented event types with every field their examples show.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let mut types: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for v in documented_lines() {
        if v.get("op").is_some() {
            serde_json::from_value::<Op>(v.clone())
                .unwrap_or_else(|e| panic!("documented op is not an Op: {v}: {e}"));
            continue;
        }
        let ty = v["type"].as_str().expect("type").to_string();
        if ty != "hello" {
            let ev: Event = serde_json::from_value(v.clone())
                .unwrap_or_else(|e| panic!("documented event is not an Event: {v}: {e}"));
            assert_eq!(name(&ev.kind), ty);
        }
        types
            .entry(ty)
            .or_default()
            .extend(v.as_object().unwrap().keys().cloned());
    }
    types
}

#[test]
fn every_event_type_is_documented_and_every_example_parses() {
    let types = documented();
    let mut expected: BTreeSet<&str> = ALL.iter().copied().collect();
    expected.insert("hello");
    let documented: BTreeSet<&str> = types.keys().map(String::as_str).collect();
    assert_eq!(documented, expected);
}

/// Checks a run's stdout line by line; returns the events.
fn check_lines(stdout: &str) -> Vec<Map<String, Value>> {
    let types = documented();
    let mut lines = stdout.lines();
    let hello: Value = serde_json::from_str(lines.next().expect("a hello line")).unwrap();
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["v"], 1);
    let mut out = Vec::new();
    let mut last_seq = 0;
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let ev: Event = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(ev.seq, last_seq + 1, "seq has a gap before {line}");
        last_seq = ev.seq;
        let ty = v["type"].as_str().unwrap();
        let known = types
            .get(ty)
            .unwrap_or_else(|| panic!("undocumented event type {ty}: {line}"));
        for key in v.as_object().unwrap().keys() {
            assert!(
                known.contains(key),
                "field {key} of {ty} is not documented: {line}"
            );
        }
        out.push(v.as_object().unwrap().clone());
    }
    out
}

fn types_of(events: &[Map<String, Value>]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn a_tool_loop_as_json_lines() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({"command": "echo from-the-tool"}).to_string(),
        )])
        .with_reasoning("reasoning_content", "I should run it"),
        Reply::text("All done."),
    ]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--json", "--dangerously-auto-approve", "go"])
        .run();
    out.assert_success();
    let events = check_lines(&out.stdout);
    let types = types_of(&events);
    for ty in [
        "session_started",
        "run_started",
        "user_message",
        "model_request",
        "reasoning",
        "usage",
        "tool_call",
        "approval_decided",
        "tool_result",
        "text_delta",
        "run_finished",
    ] {
        assert!(types.contains(&ty), "no {ty} in {types:?}");
    }
    assert_eq!(*types.last().unwrap(), "run_finished");
    let last = events.last().unwrap();
    assert_eq!(
        last["outcome"],
        json!({"status": "answered", "text": "All done."})
    );
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert!(result["text"].as_str().unwrap().contains("from-the-tool"));
    let decided = events
        .iter()
        .find(|e| e["type"] == "approval_decided")
        .unwrap();
    assert_eq!(decided["by"], "policy");
    // The text deltas add up to the answer; nothing else reaches stdout.
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "All done.");
}

#[test]
fn without_a_terminal_the_denial_is_an_event_and_a_failure_keeps_its_exit_code() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({"command": "touch never"}).to_string(),
        )]),
        Reply::status(500, "boom"),
        Reply::status(500, "boom"),
        Reply::status(500, "boom"),
        Reply::status(500, "boom"),
    ]);
    let cfg = format!("{}\n[network]\nmax_retries = 1\n", fake_config(&p));
    let cmd = BuddyCmd::new().config(cfg);
    let out = cmd.rerun(["exec", "--json", "go"]);
    out.assert_code(1);
    let events = check_lines(&out.stdout);
    let decided = events
        .iter()
        .find(|e| e["type"] == "approval_decided")
        .expect("the denial is an event");
    assert_eq!(decided["by"], "no_approver");
    assert_eq!(decided["approved"], false);
    assert!(!cmd.work_dir().join("never").exists());
    assert!(types_of(&events).contains(&"retrying"));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run_finished");
    assert_eq!(last["outcome"]["status"], "failed");
    // Human diagnostics stay on stderr.
    assert!(out.stderr.contains("no terminal to ask"), "{}", out.stderr);
    assert!(out.stderr.contains("error:"), "{}", out.stderr);
}

#[test]
fn a_resumed_session_replays_its_messages_in_the_event() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({"command": "echo replayed"}).to_string(),
        )]),
        Reply::text("The tool said replayed."),
        Reply::text("Still here."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    cmd.rerun(["exec", "--dangerously-auto-approve", "run it"])
        .assert_success();
    let out = cmd.rerun(["exec", "--json", "--resume", "last", "and now?"]);
    out.assert_success();
    let events = check_lines(&out.stdout);
    let resumed = events
        .iter()
        .find(|e| e["type"] == "session_resumed")
        .expect("a session_resumed event");
    assert_eq!(resumed["messages"], 4);
    let replay = resumed["replay"].as_array().expect("replay");
    let roles: Vec<&str> = replay.iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(replay[0]["text"], "run it");
    assert_eq!(replay[1]["calls"][0]["name"], "run_shell");
    assert_eq!(replay[2]["name"], "run_shell");
    assert!(replay[2]["text"].as_str().unwrap().contains("replayed"));
    assert_eq!(replay[3]["text"], "The tool said replayed.");
}

/// `exec --json` (run directly, and with `--tmux` in the pane) reports a
/// running command's latest lines under its call id before its result.
fn progress_comes_before_the_result(extra: &[&str]) {
    let command = "echo step1; sleep 1; echo step2; sleep 1; echo done-$((1+1))";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({ "command": command }).to_string(),
        )]),
        Reply::text("All done."),
    ]);
    let mut args = vec!["exec", "--json", "--dangerously-auto-approve"];
    args.extend_from_slice(extra);
    args.push("go");
    // Auto-approval in a tmux pane needs the sandbox turned off explicitly.
    let config = format!("{}\n[tools]\nsandbox = \"off\"\n", support::fake_config(&p));
    let out = BuddyCmd::new().config(config).args(args).run();
    out.assert_success();
    let events = check_lines(&out.stdout);
    let result = events
        .iter()
        .position(|e| e["type"] == "tool_result")
        .expect("a tool_result");
    let progress: Vec<&Map<String, Value>> = events
        .iter()
        .filter(|e| e["type"] == "tool_progress")
        .collect();
    assert!(!progress.is_empty(), "no tool_progress in {}", out.stdout);
    let first = events
        .iter()
        .position(|e| e["type"] == "tool_progress")
        .unwrap_or(usize::MAX);
    assert!(first < result, "progress after the result: {}", out.stdout);
    assert!(
        events[result..]
            .iter()
            .all(|e| e["type"] != "tool_progress"),
        "{}",
        out.stdout
    );
    assert!(progress.iter().all(|e| e["call_id"] == "c1"));
    // Seen while it ran: step1 before the command got to its end.
    assert!(
        progress.iter().any(|e| e["tail"] == "step1"),
        "{}",
        out.stdout
    );
    assert!(events[result]["text"]
        .as_str()
        .unwrap_or("")
        .ends_with("step1\nstep2\ndone-2"));
}

#[test]
fn progress_events_come_before_the_result_when_run_directly() {
    progress_comes_before_the_result(&[]);
}

#[test]
fn progress_events_come_before_the_result_in_the_tmux_pane() {
    progress_comes_before_the_result(&["--tmux"]);
}
