//! End-to-end tests of sub-agents (the `agent` tool) against the fake
//! provider: two children of one reply in flight at once, a child's request
//! without the parent's conversation, cancelling the parent stopping its
//! children, the children's usage counted in the parent's cost and
//! `--max-cost`, and children journaled in the session (export nests them,
//! resume shows them).

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::calls::config_no_confirm;
use support::fake_provider::{FakeProvider, Gate, RecordedRequest, Reply, ToolCallSpec};
use support::BuddyCmd;

/// $1 per million prompt tokens, nothing for completions.
const PRICE: &str = "price = { input = 1.0, output = 0.0 }";

/// A config for `p` with prices, so costs are counted.
fn priced(p: &FakeProvider) -> String {
    config_no_confirm(p, "").replace(
        "model = \"fake-model\"",
        &format!("model = \"fake-model\"\n{PRICE}"),
    )
}

/// The parent's reply that starts one child per `(call id, marker)`.
fn spawn_children(children: &[(&str, &str)]) -> Reply {
    Reply::tool_calls(
        children
            .iter()
            .map(|(id, marker)| {
                ToolCallSpec::new(
                    *id,
                    "agent",
                    json!({
                        "description": format!("look for {marker}"),
                        "prompt": format!("Find where {marker} is defined."),
                    })
                    .to_string(),
                )
            })
            .collect(),
    )
}

fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The request a child with `marker` made.
fn child_request<'a>(reqs: &'a [RecordedRequest], marker: &str) -> &'a RecordedRequest {
    reqs.iter()
        .find(|r| r.last_user_text().is_some_and(|t| t.contains(marker)))
        .unwrap_or_else(|| panic!("no request of the child {marker}"))
}

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    req.json()["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|d| d["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn two_children_of_one_reply_are_in_flight_at_once() {
    let gate = Gate::new();
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A"), ("a2", "MARK-B")]),
        Reply::text("A is in a.rs")
            .gated(&gate)
            .for_marker("MARK-A"),
        Reply::text("B is in b.rs")
            .gated(&gate)
            .for_marker("MARK-B"),
        Reply::text("Both found."),
    ]);
    let cmd =
        BuddyCmd::new()
            .config(config_no_confirm(&p, ""))
            .args(["exec", "--json", "find both"]);
    let child = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("buddy starts");
    // Both children's requests arrive while both replies are held: they
    // run at the same time (one after the other would wait here forever).
    let reqs = p.wait_for_requests(3, Duration::from_secs(30));
    child_request(&reqs, "MARK-A");
    child_request(&reqs, "MARK-B");
    gate.open();
    let out = child.wait_with_output().expect("buddy ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&stdout);
    // Each child's answer is its call's result, in the parent's history.
    let last = p.chat_requests().pop().expect("the parent's last request");
    assert_eq!(
        support::fake_provider::tool_result(&last, "a1"),
        "A is in a.rs"
    );
    assert_eq!(
        support::fake_provider::tool_result(&last, "a2"),
        "B is in b.rs"
    );
    // The children's events come tagged with the parent's call.
    for id in ["a1", "a2"] {
        assert!(
            evs.iter().any(|e| e["type"] == "subagent"
                && e["call_id"] == id
                && e["event"]["type"] == "run_finished"),
            "{stdout}"
        );
    }
    let finished = evs
        .iter()
        .rev()
        .find(|e| e["type"] == "run_finished")
        .expect("run_finished");
    assert_eq!(finished["outcome"]["text"], "Both found.");
}

#[test]
fn a_childs_request_has_its_prompt_and_not_the_parents_conversation() {
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A")]),
        Reply::text("found it").for_marker("MARK-A"),
        Reply::text("done"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "PARENT-ONLY words the child must not see"])
        .run();
    out.assert_success();
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 3);
    let child = child_request(&reqs, "MARK-A");
    let body = child.body_text();
    assert!(!body.contains("PARENT-ONLY"), "{body}");
    let messages = child.json()["messages"]
        .as_array()
        .expect("messages")
        .clone();
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user"], "{body}");
    // Read-only by default, and no children of its own.
    let tools = tool_names(child);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    assert!(!tools.contains(&"run_shell".to_string()), "{tools:?}");
    assert!(!tools.contains(&"agent".to_string()), "{tools:?}");
    assert!(tool_names(&reqs[0]).contains(&"agent".to_string()));
}

#[test]
fn interrupting_the_parent_stops_its_running_children() {
    let gate = Gate::new();
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A"), ("a2", "MARK-B")]),
        // Held until the end of the test: only a cancel ends these children.
        Reply::text("never").gated(&gate).for_marker("MARK-A"),
        Reply::text("never").gated(&gate).for_marker("MARK-B"),
        Reply::text("never either"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "find both"]);
    let child = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("buddy starts");
    p.wait_for_requests(3, Duration::from_secs(30));
    let t0 = Instant::now();
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    let out = child.wait_with_output().expect("buddy ends");
    // The run ended although both children's replies never came: the
    // interrupt reached them and dropped their streams.
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(p.chat_requests().len(), 3, "nothing ran after the cancel");
    gate.open();
}

#[test]
fn childrens_usage_adds_to_the_parents_cost() {
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A"), ("a2", "MARK-B")]).with_usage(1_000_000, 0),
        Reply::text("A")
            .for_marker("MARK-A")
            .with_usage(1_000_000, 0),
        Reply::text("B")
            .for_marker("MARK-B")
            .with_usage(1_000_000, 0),
        Reply::text("done").with_usage(1_000_000, 0),
    ]);
    let out = BuddyCmd::new()
        .config(priced(&p))
        .args(["exec", "--json", "find both"])
        .run();
    out.assert_success();
    let evs = events(&out.stdout);
    let usage: Vec<&Value> = evs.iter().filter(|e| e["type"] == "usage").collect();
    let last = usage.last().expect("a usage event");
    // Four requests at $1 each: the parent's two and one per child.
    let spent = last["session_cost_usd"].as_f64().expect("a session cost");
    assert!((spent - 4.0).abs() < 1e-9, "{}", out.stdout);
}

#[test]
fn max_cost_counts_the_childrens_spend() {
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A")]).with_usage(1_000_000, 0),
        Reply::text("A")
            .for_marker("MARK-A")
            .with_usage(1_000_000, 0),
        Reply::text("never reached"),
    ]);
    let out = BuddyCmd::new()
        .config(priced(&p))
        .args(["exec", "--max-cost", "1.5", "find it"])
        .run();
    out.assert_code(1);
    // $1 for the parent's reply, $1 for the child's: past $1.50 before the
    // parent would ask again.
    assert!(
        out.stderr.contains("stopped after spending $2"),
        "{}",
        out.stderr
    );
    assert_eq!(p.chat_requests().len(), 2);
}

/// A session whose one `agent` call ran a child that read a file: the
/// parent's call, the child's `read_file` call and answer, the parent's answer.
fn session_with_a_child() -> (FakeProvider, BuddyCmd) {
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A")]),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "r1",
            "read_file",
            json!({ "path": "notes.txt" }).to_string(),
        )])
        .for_marker("MARK-A"),
        Reply::text("MARK-A is in notes.txt").for_marker("MARK-A"),
        Reply::text("The child found it."),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "where is it?"]);
    std::fs::write(cmd.work_dir().join("notes.txt"), "MARK-A lives here\n").expect("write");
    cmd.run().assert_success();
    (p, cmd)
}

fn position(doc: &str, what: &str) -> usize {
    doc.find(what)
        .unwrap_or_else(|| panic!("{what:?} not in:\n{doc}"))
}

#[test]
fn export_nests_a_sub_agent_under_its_call() {
    let (_p, cmd) = session_with_a_child();
    let out = cmd.rerun(["export", "--last"]);
    out.assert_success();
    let md = &out.stdout;
    let call = position(md, "<summary>agent: ");
    let child = position(md, "<summary>sub-agent: look for MARK-A</summary>");
    let prompt = position(md, "### You\n\nFind where MARK-A is defined.");
    let read = position(md, "<summary>read_file: ");
    let child_answer = position(md, "### Assistant\n\nMARK-A is in notes.txt");
    let answer = position(md, "## Assistant\n\nThe child found it.");
    assert!(call < child && child < prompt && prompt < read, "{md}");
    assert!(read < child_answer && child_answer < answer, "{md}");
    let out = cmd.rerun(["export", "--last", "--format", "json"]);
    out.assert_success();
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let items = doc["items"].as_array().expect("items");
    let roles: Vec<&str> = items.iter().filter_map(|i| i["role"].as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "subagent", "assistant"],
        "{doc}"
    );
    let child = &items[3];
    assert_eq!(child["description"], "look for MARK-A");
    let child_roles: Vec<&str> = child["items"]
        .as_array()
        .expect("the child's items")
        .iter()
        .filter_map(|i| i["role"].as_str())
        .collect();
    assert_eq!(
        child_roles,
        ["user", "assistant", "tool", "assistant"],
        "{doc}"
    );
}

#[test]
fn resume_replays_the_child_under_its_call() {
    let (p, cmd) = session_with_a_child();
    drop(p);
    let p = FakeProvider::start(vec![Reply::text("again")]);
    let cmd = cmd.config(config_no_confirm(&p, ""));
    let out = cmd.rerun(["exec", "--json", "--resume", "last", "and now?"]);
    out.assert_success();
    let evs = events(&out.stdout);
    let resumed = evs
        .iter()
        .find(|e| e["type"] == "session_resumed")
        .expect("session_resumed");
    let replay = resumed["replay"].as_array().expect("replay");
    let at = replay
        .iter()
        .position(|i| i["role"] == "subagent")
        .unwrap_or_else(|| panic!("no child in {resumed}"));
    assert_eq!(
        replay[at - 1]["role"],
        "tool",
        "right after its call's result"
    );
    assert_eq!(replay[at]["description"], "look for MARK-A");
    assert_eq!(replay[at]["items"][1]["calls"][0]["name"], "read_file");
    // The model gets the parent's conversation, not the child's (its
    // read of notes.txt, its call `r1`).
    let req = p.chat_requests().pop().expect("a request");
    let body = req.body_text();
    assert!(body.contains("MARK-A is in notes.txt"), "{body}");
    assert!(
        !body.contains("MARK-A lives here") && !body.contains("\"r1\""),
        "{body}"
    );
}

#[test]
fn a_childs_messages_are_in_the_session_file_while_it_runs() {
    let gate = Gate::new();
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A")]),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "r1",
            "read_file",
            json!({ "path": "notes.txt" }).to_string(),
        )])
        .for_marker("MARK-A"),
        Reply::text("never").gated(&gate).for_marker("MARK-A"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "where is it?"]);
    std::fs::write(cmd.work_dir().join("notes.txt"), "MARK-A lives here\n").expect("write");
    let mut child = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("buddy starts");
    p.wait_for_requests(3, Duration::from_secs(30));
    let sessions = cmd.work_dir().join(".buddyx/sessions");
    // The child's read is journaled under the parent's call before the
    // child's next request is answered.
    support::wait::wait_for("the child's records", Duration::from_secs(10), || {
        std::fs::read_dir(&sessions)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
            .any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|t| {
                    t.contains(r#"{"subagent":{"call":"a1""#) && t.contains("MARK-A lives here")
                })
            })
    });
    child.kill().expect("kill -9");
    let _ = child.wait();
    gate.open();
    let out = cmd.rerun(["export", "--last"]);
    out.assert_success();
    assert!(
        out.stdout
            .contains("<summary>sub-agent: look for MARK-A</summary>"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("MARK-A lives here"), "{}", out.stdout);
}

/// With `subagent_depth = 2` a child's own child is journaled too, under
/// both calls (`a1/b1`), and export and resume show it nested in the child
/// under the child's call.
#[test]
fn a_grandchild_is_journaled_exported_and_resumed_nested_in_its_parent() {
    let p = FakeProvider::start(vec![
        spawn_children(&[("a1", "MARK-A")]),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "b1",
            "agent",
            json!({ "description": "dig deeper", "prompt": "Read the notes (MARK-B)." })
                .to_string(),
        )])
        .for_marker("MARK-A"),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "r1",
            "read_file",
            json!({ "path": "notes.txt" }).to_string(),
        )])
        .for_marker("MARK-B"),
        Reply::text("the notes say where").for_marker("MARK-B"),
        Reply::text("my helper found it").for_marker("MARK-A"),
        Reply::text("All found."),
    ]);
    let cfg = config_no_confirm(&p, "").replace("[agent]\n", "[agent]\nsubagent_depth = 2\n");
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "where is it?"]);
    std::fs::write(cmd.work_dir().join("notes.txt"), "MARK-B lives here\n").expect("write");
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "All found.\n");
    // The grandchild asked the model once it had its own prompt only.
    assert!(child_request(&p.chat_requests(), "MARK-B")
        .body_text()
        .contains("Read the notes (MARK-B)."));
    let sessions = cmd.work_dir().join(".buddyx/sessions");
    let journal: String = std::fs::read_dir(&sessions)
        .expect("sessions")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(
        journal.contains(r#"{"subagent":{"call":"a1/b1""#),
        "{journal}"
    );
    // Export: the grandchild's box inside the child's, after the child's call.
    let md = cmd.rerun(["export", "--last"]);
    md.assert_success();
    let md = &md.stdout;
    let child = position(md, "<summary>sub-agent: look for MARK-A</summary>");
    let grandchild = position(md, "<summary>sub-agent: dig deeper</summary>");
    let read = position(md, "MARK-B lives here");
    // The child's own answer (the agent call's result above says it too).
    let child_answer = position(md, "### Assistant\n\nmy helper found it");
    assert!(
        child < grandchild && grandchild < read && read < child_answer,
        "{md}"
    );
    let doc = cmd.rerun(["export", "--last", "--format", "json"]);
    doc.assert_success();
    let doc: Value = serde_json::from_str(&doc.stdout).expect("JSON");
    let nested = |items: &Value, description: &str| -> Value {
        items
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|i| i["role"] == "subagent" && i["description"] == description)
            })
            .unwrap_or_else(|| panic!("no {description} in {items}"))["items"]
            .clone()
    };
    let inner = nested(&nested(&doc["items"], "look for MARK-A"), "dig deeper");
    let roles: Vec<&str> = inner
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{doc}");
    // Resume replays it nested the same way.
    drop(p);
    let p = FakeProvider::start(vec![Reply::text("again")]);
    let cmd = cmd.config(config_no_confirm(&p, ""));
    let out = cmd.rerun(["exec", "--json", "--resume", "last", "and now?"]);
    out.assert_success();
    let evs = events(&out.stdout);
    let resumed = evs
        .iter()
        .find(|e| e["type"] == "session_resumed")
        .expect("session_resumed");
    let inner = nested(&nested(&resumed["replay"], "look for MARK-A"), "dig deeper");
    assert_eq!(inner[1]["calls"][0]["name"], "read_file", "{resumed}");
}

/// In the REPL a resumed child is one line under its call, and its own tool
/// calls are one key away: Ctrl-O lists them.
#[test]
fn the_repl_folds_a_resumed_child_and_ctrl_o_shows_its_tool_calls() {
    let (p, cmd) = session_with_a_child();
    drop(p);
    let p = FakeProvider::start(vec![Reply::text("again")]);
    let cmd = cmd.config(config_no_confirm(&p, ""));
    let t = support::tmux::Tmux::start(&cmd, &["resume", "--last"]);
    let screen = t.wait_text("sub-agent look for MARK-A");
    assert!(screen.contains("(Ctrl-O)"), "{screen}");
    assert!(!screen.contains("notes.txt\"}"), "folded: {screen}");
    t.keys(&["C-o"]);
    t.wait_text("▶ read notes.txt");
}
