//! End-to-end tests of `buddy export`: a session `buddy exec` saved (a tool
//! call, then an answer, against the fake provider) written out as Markdown
//! and as JSON, to stdout and to a file.

use crate::support;

use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use support::calls::config_no_confirm;
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::BuddyCmd;

/// A directory holding one saved session: the prompt, a `run_shell` call
/// with its result, and the answer.
fn one_session() -> (FakeProvider, BuddyCmd) {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({ "command": "echo from-tool" }).to_string(),
        )]),
        Reply::text("The tool said **from-tool**."),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "what does the tool say?"]);
    cmd.run().assert_success();
    (p, cmd)
}

fn position(doc: &str, what: &str) -> usize {
    doc.find(what)
        .unwrap_or_else(|| panic!("{what:?} not in:\n{doc}"))
}

#[test]
fn export_last_writes_prompt_call_and_answer_in_order_as_markdown() {
    let (_p, cmd) = one_session();
    let out = cmd.rerun(["export", "--last"]);
    out.assert_success();
    let md = &out.stdout;
    assert!(md.starts_with("# what does the tool say?\n"), "{md}");
    let prompt = position(md, "## You\n\nwhat does the tool say?\n");
    let fold = position(
        md,
        "<details>\n<summary>run_shell: $ echo from-tool</summary>",
    );
    let arguments = position(md, "\"command\": \"echo from-tool\"");
    let result = position(md, "stdout:\nfrom-tool\n");
    let closed = position(md, "</details>");
    let answer = position(md, "## Assistant\n\nThe tool said **from-tool**.");
    assert!(prompt < fold && fold < arguments && arguments < result);
    assert!(result < closed && closed < answer, "{md}");
    // `--last` was asked for: nothing to explain on stderr.
    assert!(!out.stderr.contains("most recent"), "{}", out.stderr);
}

#[test]
fn export_without_a_session_named_says_it_takes_the_most_recent() {
    let (_p, cmd) = one_session();
    let out = cmd.rerun(["export"]);
    out.assert_success();
    assert!(out.stdout.contains("## You"), "{}", out.stdout);
    assert!(
        out.stderr.contains("exporting the most recent session"),
        "{}",
        out.stderr
    );
}

#[test]
fn export_as_json_has_the_conversations_items() {
    let (_p, cmd) = one_session();
    let out = cmd.rerun(["export", "--last", "--format", "json"]);
    out.assert_success();
    let doc: Value = serde_json::from_str(&out.stdout).expect("export is JSON");
    assert_eq!(doc["title"], "what does the tool say?");
    assert!(doc["id"].as_str().is_some_and(|id| !id.is_empty()));
    let items = doc["items"].as_array().expect("items");
    let roles: Vec<&str> = items.iter().filter_map(|i| i["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{doc}");
    assert_eq!(items[0]["text"], "what does the tool say?");
    assert_eq!(items[1]["calls"][0]["name"], "run_shell");
    let args: Value =
        serde_json::from_str(items[1]["calls"][0]["arguments"].as_str().unwrap_or("")).unwrap();
    assert_eq!(args["command"], "echo from-tool");
    assert_eq!(items[2]["name"], "run_shell");
    assert!(items[2]["text"]
        .as_str()
        .unwrap_or("")
        .contains("from-tool"));
    assert_eq!(items[3]["text"], "The tool said **from-tool**.");
}

#[test]
fn export_to_a_file_is_owner_only_and_stdout_stays_empty() {
    let (_p, cmd) = one_session();
    let file = cmd.work_dir().join("out/session.md");
    let out = cmd.rerun(["export", "-o", file.to_str().expect("a UTF-8 path")]);
    out.assert_success();
    assert_eq!(out.stdout, "");
    let md = fs::read_to_string(&file).expect("the file was written");
    assert!(md.contains("## You\n\nwhat does the tool say?"), "{md}");
    let mode = fs::metadata(&file).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn export_of_an_unknown_session_is_a_usage_error() {
    let (_p, cmd) = one_session();
    let out = cmd.rerun(["export", "no-such-session"]);
    out.assert_code(2);
    assert!(out.stdout.is_empty());
}
