//! A server's questions for the user during a call (MCP elicitation),
//! against a real server written with the `mcp` package
//! (`tests/fixtures/mcp/asks.py`) spoken to in either revision: 2026-07-28,
//! where the question comes back as an `input_required` result, and
//! 2025-11-25 (`LEGACY`), where it is an `elicitation/create` request. The
//! REPL asks it as a form in a real terminal (tmux); exec declines it with a
//! line naming the server and its question; an editor over ACP draws it.
//! Also a tools list's `ttlMs`: listed again once it has passed, not before.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{tool_result, FakeProvider, Reply, ToolCallSpec};
use support::mcp;
use support::{fake_config, BuddyCmd};

fn call(id: &str, tool: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, tool, json!({}).to_string())
}

/// `[mcp_servers.asks]` for the asking server, with `env` for it and
/// `extra` lines.
fn asks(env: &str, extra: &str) -> String {
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/asks.py");
    format!(
        "\n[mcp_servers.asks]\ncommand = {}\nargs = [{}]\nenv = {{ {env} }}\n{extra}\n",
        mcp::quoted(&mcp::python().display().to_string()),
        mcp::quoted(&script.display().to_string())
    )
}

/// Starts the REPL and waits until the server's tools are offered (the
/// REPL does not wait for servers), asking `/mcp` every half second.
fn repl_with_asks(cmd: &BuddyCmd) -> support::tmux::Tmux {
    let t = support::tmux::Tmux::start(cmd, &["--no-tmux"]);
    t.wait_for("the prompt", |s| s.lines().any(|l| l.starts_with('>')));
    let asked = std::cell::Cell::new(std::time::Instant::now());
    t.line("/mcp");
    t.wait_for("the server's tools", |s| {
        if s.replace('\n', "").contains("mcp__asks__order") {
            return true;
        }
        if asked.get().elapsed() > std::time::Duration::from_millis(500) {
            asked.set(std::time::Instant::now());
            t.line("/mcp");
        }
        false
    });
    t
}

/// Both revisions: the server's env for each, and its name in messages.
const ERAS: [(&str, &str); 2] = [("", "2026-07-28"), ("LEGACY = \"1\"", "2025-11-25")];

#[test]
fn the_repl_asks_a_servers_question_field_by_field_in_either_revision() {
    for (env, era) in ERAS {
        let p = FakeProvider::start(vec![
            Reply::tool_calls(vec![call("c1", "mcp__asks__order")]),
            Reply::text("order placed"),
        ]);
        let cmd = BuddyCmd::new().config(format!("{}{}", fake_config(&p), asks(env, "")));
        let t = repl_with_asks(&cmd);
        t.line("/approve all");
        t.line("order for me");
        t.wait_texts(&["MCP server `asks` asks:", "Your order, please", "Your name"]);
        // Required, without a default: an empty line is asked again.
        t.line("");
        t.wait_text("an answer is required");
        t.line("Ann");
        t.wait_texts(&["1) small", "2) large", "Size"]);
        t.line("2");
        // Enter takes the default; a word that is no number is refused.
        t.wait_text("How many");
        t.line("lots");
        t.wait_text("not a whole number");
        t.line("");
        t.wait_text("Gift wrap");
        t.line("maybe");
        t.wait_text("answer yes or no");
        t.line("y");
        t.wait_text("order placed");
        let result = tool_result(&p.chat_requests()[1], "c1");
        assert!(
            result.contains("ordered 1 large for Ann, gift wrap True"),
            "{era}: {result}"
        );
        assert!(
            result.contains("asked the user: \"Your order, please\"; they answered"),
            "{era}: {result}"
        );
    }
}

#[test]
fn esc_declines_and_an_unanswered_question_is_cancelled_after_its_bound() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("c1", "mcp__asks__order")]),
        Reply::text("first done"),
        Reply::tool_calls(vec![call("c2", "mcp__asks__order")]),
        Reply::text("second done"),
    ]);
    let servers = asks("", "question_timeout_secs = 2");
    let cmd = BuddyCmd::new().config(format!("{}{servers}", fake_config(&p)));
    let t = repl_with_asks(&cmd);
    t.line("/approve all");
    t.line("order");
    t.wait_text("Your name");
    t.keys(&["Escape"]);
    t.wait_text("first done");
    let declined = tool_result(&p.chat_requests()[1], "c1");
    assert!(
        declined.contains("no order: the user chose decline"),
        "{declined}"
    );
    assert!(declined.contains("they declined to answer"), "{declined}");

    // Nobody answers: after 2 s the form goes and the server hears cancel.
    t.line("order again");
    t.wait_text("nobody answered within 2 s");
    t.wait_text("second done");
    let cancelled = tool_result(&p.chat_requests()[3], "c2");
    assert!(
        cancelled.contains("no order: the user chose cancel"),
        "{cancelled}"
    );
    assert!(cancelled.contains("nobody answered in time"), "{cancelled}");
}

#[test]
fn exec_declines_a_servers_question_saying_so_to_the_user_and_the_model() {
    for (env, era) in ERAS {
        let p = FakeProvider::start(vec![
            Reply::tool_calls(vec![call("c1", "mcp__asks__order")]),
            Reply::text("done"),
        ]);
        let cmd = BuddyCmd::new()
            .config(format!("{}{}", fake_config(&p), asks(env, "")))
            .args(["exec", "--dangerously-auto-approve", "order"]);
        let out = cmd.run_detached();
        out.assert_success();
        let line = out
            .stderr
            .lines()
            .find(|l| l.contains("question:"))
            .unwrap_or_else(|| panic!("{era}: no line for the question:\n{}", out.stderr));
        assert!(
            line.contains("the MCP server `asks` asked \"Your order, please\"; declined: buddy exec does not ask"),
            "{era}: {line}"
        );
        let result = tool_result(&p.chat_requests()[1], "c1");
        assert!(
            result.contains("no order: the user chose decline"),
            "{era}: {result}"
        );
        assert!(
            result.contains("declined: buddy exec does not ask a server's questions"),
            "{era}: {result}"
        );
    }
}

#[test]
fn exec_json_emits_the_question_and_its_refusal_as_events() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("c1", "mcp__asks__order")]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(format!("{}{}", fake_config(&p), asks("", "")))
        .args(["exec", "--json", "--dangerously-auto-approve", "order"]);
    let out = cmd.run_detached();
    out.assert_success();
    let events: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let asked = events
        .iter()
        .find(|e| e["type"] == "elicitation_requested")
        .unwrap_or_else(|| panic!("no question event:\n{}", out.stdout));
    assert_eq!(asked["server"], "asks");
    assert_eq!(asked["mode"], "form");
    assert_eq!(asked["message"], "Your order, please");
    let fields: Vec<&str> = asked["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert!(
        fields.contains(&"name") && fields.contains(&"size"),
        "{asked}"
    );
    let decided = events
        .iter()
        .find(|e| e["type"] == "elicitation_decided")
        .expect("a decision event");
    assert_eq!(decided["action"], "decline");
    assert_eq!(decided["by"], "refused");
}

#[test]
fn an_editor_that_draws_forms_answers_a_servers_question_over_acp() {
    // ACP sessions do not wait for their servers, and this server holds its
    // tool list for two seconds: the model's call, which comes at once,
    // names a tool buddy has not been told of yet. The call waits for the
    // server's list instead of failing as an unknown tool.
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("c1", "mcp__asks__order")]),
        Reply::text("ordered"),
    ]);
    let cmd = BuddyCmd::new().config(format!(
        "{}{}",
        fake_config(&p),
        asks("LIST_DELAY_MS = \"2000\"", "")
    ));
    let seen = support::acp::run(&cmd, "elicitation", &[]);
    let asked = &seen["elicitation"];
    assert_eq!(asked["mode"], "form", "{seen}");
    assert_eq!(asked["message"], "Your order, please");
    assert!(asked["toolCallId"].is_string(), "{asked}");
    assert_eq!(asked["requestedSchema"]["required"], json!(["name"]));
    let result = tool_result(&p.chat_requests()[1], "c1");
    assert!(
        result.contains("ordered 3 small for Editor, gift wrap False"),
        "{seen}"
    );
}

#[test]
fn a_tools_list_is_listed_again_once_its_ttl_passed_and_not_before() {
    // `grow` adds a tool without saying the list changed: only a new
    // listing can show it. With a ttl of 1 ms the listing made at the start
    // has passed by the second request; with an hour it has not.
    for (ttl, relisted) in [("1", true), ("3600000", false)] {
        let p = FakeProvider::start(vec![
            Reply::tool_calls(vec![call("c1", "mcp__asks__grow")]),
            Reply::text("done"),
        ]);
        let servers = asks(&format!("TOOLS_TTL_MS = \"{ttl}\""), "");
        let cmd = BuddyCmd::new()
            .config(format!("{}{servers}", fake_config(&p)))
            .args(["exec", "--dangerously-auto-approve", "grow"]);
        let out = cmd.run_detached();
        out.assert_success();
        let reqs = p.chat_requests();
        assert!(tool_result(&reqs[1], "c1").contains("grown"));
        let offered = |i: usize| reqs[i].body_text().contains("mcp__asks__extra");
        assert!(!offered(0), "ttl {ttl}: offered before it was added");
        assert_eq!(offered(1), relisted, "ttl {ttl}");
    }
}
