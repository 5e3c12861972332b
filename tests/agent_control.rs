//! End-to-end tests of the agent's run control through the real binary and
//! the fake provider: execution limits (flags and config), tool execution
//! strategies, and context compaction with its journal record.

use crate::support;

use serde_json::{json, Value};
use std::fs;
use support::fake_provider::{tool_result, FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::{fake_config, BuddyCmd};

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

/// `fake_config` with extra lines in `[agent]` and shell commands unasked.
fn config(p: &FakeProvider, agent: &str) -> String {
    format!(
        "{}\n[tools]\nshell_confirm = false\n",
        fake_config(p).replace("[agent]\n", &format!("[agent]\n{agent}\n"))
    )
}

fn messages(req: &RecordedRequest) -> Vec<Value> {
    req.json()["messages"].as_array().expect("messages").clone()
}

/// Every assistant tool call in a request is followed by its results.
fn assert_paired(req: &RecordedRequest) {
    let ms = messages(req);
    let mut i = 0;
    while i < ms.len() {
        assert_ne!(ms[i]["role"], "tool", "orphan tool result at {i}");
        let calls = ms[i]["tool_calls"].as_array().cloned().unwrap_or_default();
        i += 1;
        for c in calls {
            assert_eq!(ms[i]["role"], "tool", "{}", req.body_text());
            assert_eq!(ms[i]["tool_call_id"], c["id"]);
            i += 1;
        }
    }
}

fn loop_of_calls(n: usize) -> Vec<Reply> {
    (0..n)
        .map(|i| Reply::tool_calls(vec![shell(&format!("c{i}"), "echo step")]))
        .collect()
}

#[test]
fn max_turns_flag_ends_the_run_with_one_line_and_exit_1() {
    let mut script = loop_of_calls(2);
    script.push(Reply::text("resumed fine"));
    let p = FakeProvider::start(script);
    let cmd = BuddyCmd::new().config(config(&p, ""));
    let out = cmd.rerun(["exec", "--max-turns", "2", "loop"]);
    out.assert_code(1);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("stopped after 2 model calls"),
        "{}",
        out.stderr
    );
    assert!(errors[0].contains("--max-turns"), "{}", out.stderr);
    assert_eq!(p.chat_requests().len(), 2);
    assert!(out.stdout.is_empty());
    // The history is valid and saved: resuming sends it with every call answered.
    let out = cmd.rerun(["exec", "--resume", "last", "and now?"]);
    out.assert_success();
    assert_eq!(out.stdout, "resumed fine\n");
    let req = &p.chat_requests()[2];
    assert_paired(req);
    assert!(tool_result(req, "c1").contains("step"));
}

#[test]
fn max_turns_from_config() {
    let p = FakeProvider::start(loop_of_calls(5));
    let out = BuddyCmd::new()
        .config(config(&p, "max_turns = 3"))
        .args(["exec", "loop"])
        .run();
    out.assert_code(1);
    assert!(out.stderr.contains("agent.max_turns = 3"), "{}", out.stderr);
    assert_eq!(p.chat_requests().len(), 3);
}

#[test]
fn max_tokens_counts_the_usage_the_server_reports() {
    let replies = (0..4)
        .map(|i| Reply::tool_calls(vec![shell(&format!("c{i}"), "true")]).with_usage(400, 100))
        .collect();
    let p = FakeProvider::start(replies);
    let out = BuddyCmd::new()
        .config(config(&p, ""))
        .args(["exec", "--max-tokens", "1000", "loop"])
        .run();
    out.assert_code(1);
    // 500 after the first request, 1000 after the second: no third.
    assert_eq!(p.chat_requests().len(), 2);
    assert!(
        out.stderr.contains("stopped after using 1000 tokens"),
        "{}",
        out.stderr
    );
}

#[test]
fn timeout_flag_stops_a_running_command_and_answers_its_call() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", "sleep 30")]),
        Reply::text("ok"),
    ]);
    let cmd = BuddyCmd::new().config(config(&p, ""));
    let started = std::time::Instant::now();
    let out = cmd.rerun(["exec", "--timeout", "1s", "nap"]);
    out.assert_code(1);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert!(out.stderr.contains("time limit"), "{}", out.stderr);
    cmd.rerun(["exec", "--resume", "last", "again"])
        .assert_success();
    let req = &p.chat_requests()[1];
    assert_paired(req);
    assert!(tool_result(req, "nap").contains("time limit"));
}

#[test]
fn max_duration_in_config_is_checked_when_loading() {
    let p = FakeProvider::start(vec![]);
    let out = BuddyCmd::new()
        .config(config(&p, "max_duration = \"ten minutes\""))
        .args(["exec", "x"])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("agent.max_duration"), "{}", out.stderr);
    assert_eq!(p.request_count(), 0);
}

/// Three calls that each mark themselves running and report whether another
/// call ran at the same time: each looks for another's mark for up to 1.5 s
/// (however late the shells start) and, having found one, keeps its own a
/// second longer so the other finds it too.
fn overlap_calls() -> Reply {
    let call = |id: &str| {
        shell(
            id,
            &format!(
                "touch {id}.run; o=; for i in $(seq 75); do o=$(ls *.run 2>/dev/null | grep -v {id}); [ -n \"$o\" ] && break; sleep 0.02; done; [ -n \"$o\" ] && sleep 1; rm -f {id}.run; [ -n \"$o\" ] && echo overlap || echo alone"
            ),
        )
    };
    Reply::tool_calls(vec![call("a"), call("b"), call("c")])
}

fn run_strategy(agent: &str) -> Vec<String> {
    let p = FakeProvider::start(vec![overlap_calls(), Reply::text("done")]);
    BuddyCmd::new()
        .config(config(&p, agent))
        .args(["exec", "go"])
        .run()
        .assert_success();
    let req = &p.chat_requests()[1];
    ["a", "b", "c"]
        .iter()
        .map(|id| {
            let r = tool_result(req, id);
            if r.contains("overlap") {
                "overlap".to_string()
            } else {
                assert!(r.contains("alone"), "{r}");
                "alone".to_string()
            }
        })
        .collect()
}

#[test]
fn tool_strategies_parallel_sequential_and_batched() {
    assert_eq!(run_strategy(""), ["overlap", "overlap", "overlap"]);
    assert_eq!(
        run_strategy("tool_execution = \"sequential\""),
        ["alone", "alone", "alone"]
    );
    assert_eq!(
        run_strategy("tool_execution = \"batched\"\ntool_batch_size = 2"),
        ["overlap", "overlap", "alone"]
    );
}

/// The heuristic buddy estimates with: ~4 characters per token, plus 16
/// characters of framing per message (text, call names, arguments and ids).
fn estimate(req: &RecordedRequest) -> u64 {
    let chars: usize = messages(req)
        .iter()
        .map(|m| {
            let text = m["content"].as_str().map_or(0, str::len);
            let calls: usize = m["tool_calls"].as_array().map_or(0, |cs| {
                cs.iter()
                    .map(|c| {
                        c["function"]["name"].as_str().map_or(0, str::len)
                            + c["function"]["arguments"].as_str().map_or(0, str::len)
                            + c["id"].as_str().map_or(0, str::len)
                    })
                    .sum()
            });
            text + calls + 16
        })
        .sum();
    chars.div_ceil(4) as u64
}

#[test]
fn a_session_past_a_small_context_limit_is_compacted_and_resumes_compacted() {
    const LIMIT: u64 = 3000;
    // Each turn: a command printing 4,000 characters, then an answer.
    let mut replies = Vec::new();
    for i in 0..5 {
        replies.push(Reply::tool_calls(vec![shell(
            &format!("c{i}"),
            "head -c 4000 /dev/zero | tr '\\0' x",
        )]));
        replies.push(Reply::text(format!("answer {i}")));
    }
    replies.push(Reply::text("still here"));
    let p = FakeProvider::start(replies)
        .with_summaries(Reply::text("the summary: five listings were made"));
    let cfg = config(&p, "").replace(
        "model = \"fake-model\"",
        &format!("model = \"fake-model\"\ncontext_limit = {LIMIT}"),
    );
    let cmd = BuddyCmd::new().config(cfg);
    cmd.rerun(["exec", "list 0"]).assert_success();
    for i in 1..5 {
        let out = cmd.rerun(["exec", "--resume", "last", &format!("list {i}")]);
        out.assert_success();
        assert_eq!(out.stdout, format!("answer {i}\n"));
    }
    let reqs = p.chat_requests();
    let mut summaries = 0;
    for r in &reqs {
        assert!(estimate(r) < LIMIT, "a request of ~{} tokens", estimate(r));
        assert_paired(r);
        if r.json().get("tools").is_none() {
            summaries += 1;
            // The summary request: instructions, then one transcript message.
            let ms = messages(r);
            assert_eq!(ms.len(), 2, "{}", r.body_text());
            assert_eq!(ms[0]["role"], "system");
            assert_eq!(ms[1]["role"], "user");
            // The first summary covers the first turn itself; later ones
            // carry the earlier summary forward.
            let transcript = ms[1]["content"].as_str().unwrap();
            if summaries == 1 {
                assert!(transcript.contains("list 0"), "{transcript}");
            } else {
                assert!(
                    transcript.contains("five listings were made"),
                    "{transcript}"
                );
            }
        }
    }
    assert!(summaries >= 1, "no summary request among {}", reqs.len());
    // The file keeps the full transcript and a compaction record; a resume
    // starts from the summary.
    let dir = cmd.work_dir().join(".buddyx/sessions");
    let file = fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let text = fs::read_to_string(file).unwrap();
    assert!(text.contains("{\"compaction\":"), "no compaction record");
    assert_eq!(text.matches("\"content\":\"list 0\"").count(), 1);
    let out = cmd.rerun(["exec", "--resume", "last", "recap"]);
    out.assert_success();
    assert_eq!(out.stdout, "still here\n");
    let req = p.chat_requests().pop().unwrap();
    let ms = messages(&req);
    assert!(
        ms[1]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("[Summary of the earlier conversation"),
        "{}",
        req.body_text()
    );
    assert!(!req.body_text().contains("\"list 0\""));
}
