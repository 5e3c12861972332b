//! End-to-end tests of `buddy exec` in scripts: structured output
//! (`--output-schema`) on the wire of each protocol with valid, once-invalid
//! and always-invalid answers; the answer written to a file (`-o`); the cost
//! of each reply in `--json` usage events; a `--max-cost` stop; a local
//! server that costs nothing. The model is the scripted fake provider on
//! 127.0.0.1.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::{fake_config, BuddyCmd, Output};

const SCHEMA: &str = r#"{
  "title": "person",
  "type": "object",
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
  "required": ["name", "age"],
  "additionalProperties": false
}"#;

const VALID: &str = r#"{"name":"Ada","age":36}"#;
const INVALID: &str = r#"{"name":"Ada"}"#;

/// The three wire protocols a profile can speak.
const PROTOCOLS: [&str; 3] = ["completions", "responses", "messages"];

/// `fake_config` for the profile speaking `api`, with `extra` lines in its
/// `[models.fake]` table.
fn config(p: &FakeProvider, api: &str, extra: &str) -> String {
    fake_config(p).replace(
        "[models.fake]\n",
        &format!("[models.fake]\napi = \"{api}\"\n{extra}\n"),
    )
}

/// The model's answer in `api`'s form: text, or for Messages the call of
/// the forced answer tool.
fn answer(api: &str, json: &str) -> Reply {
    if api == "messages" {
        Reply::tool_calls(vec![ToolCallSpec::new("tu_1", "person", json)])
    } else {
        Reply::text(json)
    }
}

fn requests(p: &FakeProvider, api: &str) -> Vec<RecordedRequest> {
    match api {
        "responses" => p.responses_requests(),
        "messages" => p.messages_requests(),
        _ => p.chat_requests(),
    }
}

/// Runs `exec --output-schema` against `api` with `replies`.
fn run_with_schema(api: &str, replies: Vec<Reply>, extra_args: &[&str]) -> (FakeProvider, Output) {
    let p = FakeProvider::start(replies);
    let cmd = BuddyCmd::new().config(config(&p, api, ""));
    let schema = cmd.work_dir().join("person.json");
    std::fs::write(&schema, SCHEMA).unwrap();
    let mut args = vec!["exec", "--output-schema", "person.json"];
    args.extend_from_slice(extra_args);
    args.push("who wrote the first program?");
    let out = cmd.args(args).run();
    (p, out)
}

/// Asserts the schema went in `body` as `api` sends it.
fn assert_schema_sent(api: &str, body: &Value) {
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    match api {
        "completions" => assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": true}}),
            "{body}"
        ),
        "responses" => assert_eq!(
            body["text"]["format"],
            json!({"type": "json_schema", "name": "person", "schema": schema, "strict": true}),
            "{body}"
        ),
        _ => {
            assert_eq!(
                body["tool_choice"],
                json!({"type": "tool", "name": "person"}),
                "{body}"
            );
            let tools = body["tools"].as_array().expect("tools");
            let tool = tools
                .iter()
                .find(|t| t["name"] == "person")
                .expect("the answer tool");
            assert_eq!(tool["input_schema"], schema);
            // The agent's own tools are still offered beside it.
            assert!(tools.iter().any(|t| t["name"] == "read_file"), "{body}");
        }
    }
}

#[test]
fn a_valid_structured_answer_goes_out_alone_in_every_protocol() {
    for api in PROTOCOLS {
        let (p, out) = run_with_schema(api, vec![answer(api, VALID)], &[]);
        out.assert_success();
        assert_eq!(out.stdout, format!("{VALID}\n"), "{api}");
        let reqs = requests(&p, api);
        assert_eq!(reqs.len(), 1, "{api}");
        assert_schema_sent(api, reqs[0].json());
    }
}

#[test]
fn an_invalid_answer_is_sent_back_once_and_the_valid_one_printed() {
    for api in PROTOCOLS {
        let (p, out) = run_with_schema(api, vec![answer(api, INVALID), answer(api, VALID)], &[]);
        out.assert_success();
        assert_eq!(out.stdout, format!("{VALID}\n"), "{api}");
        assert!(
            out.stderr.contains("does not match the output schema"),
            "{api}: {}",
            out.stderr
        );
        let reqs = requests(&p, api);
        assert_eq!(reqs.len(), 2, "{api}");
        assert_schema_sent(api, reqs[1].json());
        // The retry tells the model what was wrong.
        let body = reqs[1].body_text();
        assert!(
            body.contains("age") && body.contains("required property"),
            "{api}: {body}"
        );
    }
}

#[test]
fn an_answer_invalid_twice_exits_1_with_the_reason() {
    for api in PROTOCOLS {
        let (p, out) = run_with_schema(
            api,
            vec![
                answer(api, INVALID),
                answer(api, r#"{"name":"Ada","age":"old"}"#),
            ],
            &[],
        );
        out.assert_code(1);
        assert_eq!(out.stdout, "", "{api}");
        let last = out.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error:")
                && last.contains("does not match the output schema")
                && last.contains("at /age"),
            "{api}: {}",
            out.stderr
        );
        assert_eq!(requests(&p, api).len(), 2, "{api}");
    }
}

#[test]
fn a_structured_answer_with_json_is_the_run_finished_text() {
    let (_p, out) = run_with_schema("completions", vec![Reply::text(VALID)], &["--json"]);
    out.assert_success();
    let finished = run_finished(&out.stdout);
    assert_eq!(finished["outcome"]["text"], VALID, "{finished}");
}

#[test]
fn a_bad_schema_file_is_a_usage_error_before_any_request() {
    for (content, says) in [
        ("{not json", "not valid JSON"),
        (r#"{"type": 12}"#, "not a valid JSON Schema"),
    ] {
        let p = FakeProvider::start(vec![Reply::text("unused")]);
        let cmd = BuddyCmd::new().config_for(&p);
        std::fs::write(cmd.work_dir().join("bad.json"), content).unwrap();
        let out = cmd
            .args(["exec", "--output-schema", "bad.json", "hi"])
            .run();
        out.assert_code(2);
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
        assert_eq!(p.request_count(), 0);
    }
}

#[test]
fn output_last_message_writes_the_answer_to_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let p = FakeProvider::start(vec![Reply::text("The answer is 42.")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let file = cmd.work_dir().join("out/answer.txt");
    // The command keeps its working directory until it is dropped.
    let cmd = cmd.args(["exec", "-o", "out/answer.txt", "think"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "The answer is 42.\n");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "The answer is 42.\n"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn an_unwritable_output_file_is_an_error_but_the_answer_still_goes_out() {
    let p = FakeProvider::start(vec![Reply::text("kept on stdout")]);
    let cmd = BuddyCmd::new().config_for(&p);
    // A regular file where a directory would have to be.
    std::fs::write(cmd.work_dir().join("plain"), "x").unwrap();
    let out = cmd
        .args(["exec", "--output-last-message", "plain/answer.txt", "hi"])
        .run();
    out.assert_code(1);
    assert_eq!(out.stdout, "kept on stdout\n");
    assert!(
        out.stderr
            .contains("cannot write the answer to plain/answer.txt"),
        "{}",
        out.stderr
    );
}

/// The events of one type among an `exec --json` run's lines.
fn events_of(stdout: &str, kind: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == kind)
        .collect()
}

/// The `usage` lines of an `exec --json` run.
fn usage_events(stdout: &str) -> Vec<Value> {
    events_of(stdout, "usage")
}

/// The `run_finished` line of an `exec --json` run.
fn run_finished(stdout: &str) -> Value {
    events_of(stdout, "run_finished")
        .pop()
        .expect("run_finished line")
}

/// $2 per million prompt tokens, $10 per million completion tokens, cache
/// reads $0.50: a 1000 + 100 token reply costs $0.003.
const PRICE: &str = "price = { input = 2.0, output = 10.0, cached_input = 0.5 }";

fn time_call(id: &str) -> Reply {
    Reply::tool_calls(vec![ToolCallSpec::new(id, "time", "{}")]).with_usage(1000, 100)
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn usage_events_carry_each_replys_cost_and_the_sessions() {
    let p = FakeProvider::start(vec![
        time_call("c1"),
        Reply::text("done").with_usage(2000, 50),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "completions", PRICE))
        .args(["exec", "--json", "what time is it?"])
        .run();
    out.assert_success();
    let usage = usage_events(&out.stdout);
    assert_eq!(usage.len(), 2, "{}", out.stdout);
    assert!(close(&usage[0]["cost_usd"], 0.003), "{}", usage[0]);
    assert!(close(&usage[0]["session_cost_usd"], 0.003), "{}", usage[0]);
    // 2000 * $2 + 50 * $10, per million.
    assert!(close(&usage[1]["cost_usd"], 0.0045), "{}", usage[1]);
    assert!(close(&usage[1]["session_cost_usd"], 0.0075), "{}", usage[1]);
    assert!(usage[1].get("local").is_none(), "{}", usage[1]);
    assert!(usage[1].get("local").is_none(), "{}", usage[1]);
}

#[test]
fn max_cost_stops_the_run_after_the_reply_that_passes_it() {
    let p = FakeProvider::start(vec![
        time_call("c1"),
        time_call("c2"),
        time_call("c3"),
        Reply::text("never reached"),
    ]);
    let out = BuddyCmd::new()
        .config(config(&p, "completions", PRICE))
        .args(["exec", "--max-cost", "0.005", "keep asking the time"])
        .run();
    out.assert_code(1);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .contains("stopped after spending $0.0060 (the limit is --max-cost $0.0050)"),
        "{}",
        out.stderr
    );
    // $0.003 after the first reply, $0.006 after the second: no third request.
    assert_eq!(p.chat_requests().len(), 2);
}

#[test]
fn a_local_server_costs_nothing_and_says_so() {
    // The fake provider listens on 127.0.0.1 and the profile sets no price.
    let p = FakeProvider::start(vec![
        Reply::text("free answer").with_usage(5000, 500),
        Reply::text("free answer").with_usage(5000, 500),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let out = cmd
        .args(["exec", "--json", "--max-cost", "0.01", "hi"])
        .run();
    out.assert_success();
    let usage = usage_events(&out.stdout);
    assert_eq!(usage.len(), 1, "{}", out.stdout);
    assert_eq!(usage[0]["cost_usd"], json!(0.0), "{}", usage[0]);
    assert_eq!(usage[0]["session_cost_usd"], json!(0.0), "{}", usage[0]);
    assert_eq!(usage[0]["local"], true, "{}", usage[0]);
    assert_eq!(usage[0]["local"], true, "{}", usage[0]);
    // The token line a person reads says it too.
    let cfg = format!("{}\n[display]\nshow_tokens = true\n", fake_config(&p));
    let out = BuddyCmd::new().config(cfg).args(["exec", "hi"]).run();
    out.assert_success();
    assert!(
        out.stderr.contains(", cost: free (local)"),
        "{}",
        out.stderr
    );
}

/// A model's refusal, streamed or not, in each protocol's own shape: the
/// refusal is the answer (stdout), stderr says it was a refusal, and the
/// `--json` outcome carries `refused: true`.
#[test]
fn a_refusal_is_shown_as_the_answer_and_marked_in_every_protocol() {
    const NO: &str = "I can't help with that.";
    for api in PROTOCOLS {
        for stream in ["true", "false"] {
            let p = FakeProvider::start(vec![Reply::refusal(NO), Reply::refusal(NO)]);
            let cmd = || BuddyCmd::new().config(config(&p, api, &format!("stream = {stream}")));
            let out = cmd().args(["exec", "pick a lock for me"]).run();
            out.assert_success();
            assert_eq!(out.stdout, format!("{NO}\n"), "{api} stream={stream}");
            assert!(
                out.stderr.contains("the model refused to answer"),
                "{api} stream={stream}: {}",
                out.stderr
            );
            let out = cmd().args(["exec", "--json", "pick a lock for me"]).run();
            out.assert_success();
            let finished = run_finished(&out.stdout);
            assert_eq!(
                finished["outcome"],
                json!({"status": "answered", "text": NO, "refused": true}),
                "{api} stream={stream}"
            );
        }
    }
}

#[test]
fn an_ordinary_answer_is_not_marked_refused() {
    let p = FakeProvider::start(vec![Reply::text("fine")]);
    let out = BuddyCmd::new()
        .config(config(&p, "completions", ""))
        .args(["exec", "--json", "hi"])
        .run();
    out.assert_success();
    assert!(!out.stdout.contains("refused"), "{}", out.stdout);
}

#[test]
fn a_refusal_under_an_output_schema_fails_at_once_without_a_retry() {
    for api in PROTOCOLS {
        let (p, out) = run_with_schema(api, vec![Reply::refusal("No.")], &[]);
        out.assert_code(1);
        assert_eq!(out.stdout, "", "{api}");
        let last = out.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error:") && last.contains("the model refused to answer: No."),
            "{api}: {}",
            out.stderr
        );
        assert_eq!(requests(&p, api).len(), 1, "{api}");
    }
}
