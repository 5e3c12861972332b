//! The plan and plan mode end to end against the fake model: `todo_write`
//! seen as the `plan` line of `exec --json`, journaled and sent again on
//! resume, as ACP's `plan` update and above the REPL's input; plan mode
//! refusing a file write and a command that is not read-only while a
//! read-only one runs, and `exec --plan` printing the plan the model ends
//! planning with.

use crate::support;

use serde_json::{json, Value};
use support::acp::{run as run_acp, updates};
use support::fake_provider::{tool_result, FakeProvider, Reply, ToolCallSpec};
use support::tmux::Tmux;
use support::BuddyCmd;

fn todo_write(id: &str, todos: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, "todo_write", json!({ "todos": todos }).to_string())
}

fn three_steps() -> Value {
    json!([
        {"content": "Read the parser", "status": "completed"},
        {"content": "Fix the off-by-one", "status": "in_progress"},
        {"content": "Add a test", "status": "pending"}
    ])
}

/// The JSON lines of an `exec --json` run's stdout, hello first.
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// Names of the tools a request offered.
fn offered(req: &support::fake_provider::RecordedRequest) -> Vec<String> {
    req.json()["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn todo_write_is_the_plan_line_of_json_and_comes_back_on_resume() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![todo_write("c1", three_steps())]),
        Reply::text("Planned."),
        Reply::text("Still planned."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let out = cmd.rerun(["exec", "--json", "make a plan"]);
    out.assert_success();
    let events = json_lines(&out.stdout);
    let plans = of_type(&events, "plan");
    assert_eq!(plans.len(), 1, "{}", out.stdout);
    let plan = plans[0].as_object().unwrap();
    let mut keys: Vec<&str> = plan.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["entries", "op_id", "run", "seq", "type"]);
    assert_eq!(plan["entries"], three_steps());
    // The model was told what it did, and offered the tool at all.
    let requests = p.chat_requests();
    assert!(offered(&requests[0]).contains(&"todo_write".to_string()));
    assert!(!offered(&requests[0]).contains(&"exit_plan_mode".to_string()));
    assert!(
        tool_result(&requests[1], "c1").contains("3 items"),
        "{}",
        tool_result(&requests[1], "c1")
    );

    // The session file holds it, and a resume sends it again after
    // `session_resumed`, before the new run.
    let sessions = cmd.work_dir().join(".buddyx/sessions");
    let journal = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .expect("a session file");
    let text = std::fs::read_to_string(journal).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("{\"plan\":") && l.contains("Fix the off-by-one")),
        "{text}"
    );
    let again = cmd.rerun(["exec", "--json", "--resume", "last", "and now?"]);
    again.assert_success();
    let events = json_lines(&again.stdout);
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let resumed = types.iter().position(|t| *t == "session_resumed");
    let plan = types.iter().position(|t| *t == "plan");
    let started = types.iter().position(|t| *t == "run_started");
    assert!(
        resumed < plan && plan < started && resumed.is_some(),
        "{types:?}"
    );
    assert_eq!(of_type(&events, "plan")[0]["entries"], three_steps());
}

#[test]
fn an_acp_client_gets_the_plan_as_a_plan_update() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![todo_write("c1", three_steps())]),
        Reply::text("Planned."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let seen = run_acp(&cmd, "tool", &[]);
    let plans = updates(&seen, "plan");
    assert_eq!(plans.len(), 1, "{seen}");
    let entries = plans[0]["entries"].as_array().expect("entries");
    let got: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["content"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("Read the parser", "completed"),
            ("Fix the off-by-one", "in_progress"),
            ("Add a test", "pending")
        ]
    );
    assert!(entries.iter().all(|e| e["priority"] == "medium"));
}

#[test]
fn plan_mode_refuses_a_write_and_a_changing_command_but_runs_a_read_only_one() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "w",
                "write_file",
                json!({"path": "notes.txt", "content": "hi"}).to_string(),
            ),
            ToolCallSpec::new(
                "t",
                "run_shell",
                json!({"command": "touch made"}).to_string(),
            ),
            ToolCallSpec::new("r", "run_shell", json!({"command": "ls"}).to_string()),
        ]),
        Reply::text("I will plan instead."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(cmd.work_dir().join("present.txt"), "x").unwrap();
    // Approving everything does not lift plan mode.
    let out = cmd.rerun([
        "exec",
        "--plan",
        "--dangerously-auto-approve",
        "--json",
        "change things",
    ]);
    out.assert_success();
    assert!(!cmd.work_dir().join("notes.txt").exists());
    assert!(!cmd.work_dir().join("made").exists());
    let requests = p.chat_requests();
    assert!(offered(&requests[0]).contains(&"exit_plan_mode".to_string()));
    for id in ["w", "t"] {
        let result = tool_result(&requests[1], id);
        assert!(
            result.contains("plan mode:")
                && result.contains("is not read-only")
                && result.contains("exit_plan_mode"),
            "{id}: {result}"
        );
    }
    assert!(
        tool_result(&requests[1], "r").contains("present.txt"),
        "{}",
        tool_result(&requests[1], "r")
    );
    let events = json_lines(&out.stdout);
    // The calls run at once: their decisions come in either order.
    let mut refused: Vec<&str> = of_type(&events, "approval_decided")
        .iter()
        .filter(|e| e["by"] == "plan_mode")
        .filter_map(|e| e["call_id"].as_str())
        .collect();
    refused.sort();
    assert_eq!(refused, ["t", "w"]);
    assert_eq!(of_type(&events, "plan_mode")[0]["on"], true);
}

#[test]
fn exec_plan_prints_the_plan_from_exit_plan_mode_and_exits_0() {
    let plan = "1. Fix the off-by-one in `parse`\n2. Add a test";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "x",
            "exit_plan_mode",
            json!({ "plan": plan }).to_string(),
        )]),
        // What the model would say after: exec has stopped at the plan.
        Reply::text("Working on it."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let out = cmd.rerun(["exec", "--plan", "how would you fix it?"]);
    out.assert_success();
    assert_eq!(out.stdout.trim_end(), plan);

    // Outside plan mode the tool is not offered and a call to it fails.
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "x",
            "exit_plan_mode",
            json!({ "plan": plan }).to_string(),
        )]),
        Reply::text("Done."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let out = cmd.rerun(["exec", "fix it"]);
    out.assert_success();
    assert_eq!(out.stdout.trim_end(), "Done.");
    let requests = p.chat_requests();
    assert!(!offered(&requests[0]).contains(&"exit_plan_mode".to_string()));
    assert!(tool_result(&requests[1], "x").contains("unknown tool"));
}

#[test]
fn the_repl_shows_the_plan_above_the_input_and_plan_toggles_plan_mode() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![todo_write("c1", three_steps())]),
        Reply::text("Planned."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = Tmux::start(&cmd, &[]);
    t.wait_for("the prompt", |s| s.lines().any(|l| l.starts_with(">")));
    t.line("make a plan");
    let screen = t.wait_texts(&["Planned.", "plan 1/3 done", "▶ Fix the off-by-one"]);
    let lines: Vec<&str> = screen.lines().collect();
    let heading = lines
        .iter()
        .position(|l| l.contains("plan 1/3 done"))
        .unwrap();
    let current = lines
        .iter()
        .position(|l| l.contains("▶ Fix the off-by-one"))
        .unwrap();
    let prompt = lines.iter().rposition(|l| l.starts_with('>')).unwrap();
    assert!(heading < current && current < prompt, "{screen}");
    assert!(screen.contains("✓ Read the parser"), "{screen}");
    assert!(screen.contains("○ Add a test"), "{screen}");
    t.line("/plan");
    t.wait_text("[plan mode]");
    t.line("/plan");
    t.wait_for("plan mode off", |s| !s.contains("[plan mode]"));
}

#[test]
fn accepting_the_plan_in_the_repl_ends_plan_mode_and_the_model_goes_on() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "x",
            "exit_plan_mode",
            json!({ "plan": "# Fix\n\n1. **Read** the parser\n2. Add a test" }).to_string(),
        )]),
        Reply::text("Starting the work."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = Tmux::start(&cmd, &["--plan"]);
    t.wait_text("[plan mode]");
    t.line("how would you fix it?");
    t.wait_for("the question", |_| t.cursor_line().contains("[y]es"));
    let screen = t.screen();
    // The plan is rendered Markdown (the bold's `**` gone) under its label.
    let lines: Vec<&str> = screen.lines().collect();
    let label = lines.iter().position(|l| *l == "the plan:");
    let item = lines.iter().position(|l| *l == "1. Read the parser");
    assert!(label.is_some() && label < item, "{screen}");
    t.keys(&["y"]);
    t.wait_texts(&["plan mode off", "Starting the work."]);
    t.wait_for("the mark gone", |s| !s.contains("[plan mode]"));
    let result = tool_result(&p.chat_requests()[1], "x");
    assert!(result.contains("plan mode is off"), "{result}");
}
