//! `buddy acp` driven end to end by the real ACP client library
//! (`@agentclientprotocol/sdk`, tests/acp/client.mjs) against the scripted
//! fake provider: a prompt with a tool call, a permission answered both
//! ways, a cancel mid-stream, a model's refusal, a saved session loaded
//! again, listed, resumed and closed, session modes changing what is
//! asked, custom commands and skills offered and expanded, the file tools
//! going through the editor's buffers, a command run in the editor's
//! terminal; and, with no
//! library in between, malformed messages answered with JSON-RPC errors
//! on a stdout that carries nothing else, and two sessions in two
//! directories working at once, each in its own.

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;
use support::acp::{run, updates};
use support::fake_provider::{tool_result, FakeProvider, Gate, Reply, SseChunk, ToolCallSpec};
use support::{fake_config, BuddyCmd};

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

#[test]
fn a_prompt_with_a_tool_call_streams_the_call_its_result_and_the_answer() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "ls")])
            .with_reasoning("reasoning_content", "look first"),
        Reply::text("there is one file"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    std::fs::write(cmd.work_dir().join("only.txt"), "x").unwrap();
    let seen = run(&cmd, "tool", &[]);
    let init = &seen["initialize"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["http"], true);
    for method in ["list", "resume", "close"] {
        assert!(
            init["agentCapabilities"]["sessionCapabilities"][method].is_object(),
            "{method} is not offered: {init}"
        );
    }
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    let thought: String = updates(&seen, "agent_thought_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(thought, "look first");
    let call = updates(&seen, "tool_call");
    assert_eq!(call.len(), 1, "{seen}");
    assert_eq!(call[0]["toolCallId"], "c1");
    assert_eq!(call[0]["kind"], "execute");
    assert_eq!(call[0]["title"], "ls");
    let done: Vec<&Value> = updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .collect();
    assert_eq!(done.len(), 1, "{seen}");
    assert!(
        done[0]["content"][0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("only.txt")),
        "{seen}"
    );
    let text: String = updates(&seen, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "there is one file");
    // `ls` only reads: nobody was asked.
    assert_eq!(seen["permissions"], json!([]));
    assert_eq!(seen["exit"], 0, "{seen}");
}

#[test]
fn a_permission_allowed_runs_the_command_and_one_rejected_does_not() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("a", "touch allowed.txt")]),
        Reply::text("created"),
        Reply::tool_calls(vec![shell("r", "touch rejected.txt")]),
        Reply::text("not created"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "permission", &[]);
    assert_eq!(seen["stops"], json!(["end_turn", "end_turn"]), "{seen}");
    let asked = seen["permissions"].as_array().expect("permissions");
    assert_eq!(asked.len(), 2, "{seen}");
    assert_eq!(asked[0]["toolCall"]["toolCallId"], "a");
    let kinds: Vec<&str> = asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    assert!(cmd.work_dir().join("allowed.txt").exists());
    assert!(!cmd.work_dir().join("rejected.txt").exists());
    let reqs = p.chat_requests();
    assert!(
        tool_result(&reqs[3], "r").contains("rejected"),
        "{}",
        tool_result(&reqs[3], "r")
    );
}

#[test]
fn a_cancel_mid_stream_ends_the_turn_as_cancelled() {
    let gate = Gate::new();
    let p = FakeProvider::start(vec![Reply::sse(vec![
        SseChunk::data(
            json!({"choices":[{"index":0,"delta":{"role":"assistant","content":"Once upon"}}]}),
        ),
        SseChunk::gate(&gate),
        SseChunk::data(
            json!({"choices":[{"index":0,"delta":{"content":" a time"},"finish_reason":"stop"}]}),
        ),
        SseChunk::done(),
    ])]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "cancel", &[]);
    gate.open();
    assert_eq!(seen["stops"], json!(["cancelled"]), "{seen}");
    let text: String = updates(&seen, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Once upon");
}

#[test]
fn a_models_refusal_ends_the_turn_with_the_refusal_stop_reason() {
    let p = FakeProvider::start(vec![Reply::refusal("I can't help with that.")]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "answer", &[]);
    assert_eq!(seen["stops"], json!(["refusal"]), "{seen}");
    let text: String = updates(&seen, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "I can't help with that.");
}

#[test]
fn a_saved_session_loads_with_its_history_replayed() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "ls")]),
        Reply::text("the answer to remember"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let first = run(&cmd, "answer", &[]);
    assert_eq!(first["stops"], json!(["end_turn"]), "{first}");
    let id = first["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    let seen = run(&cmd, "load", &[("ACP_TEST_SESSION", &id)]);
    let users = updates(&seen, "user_message_chunk");
    assert_eq!(users.len(), 1, "{seen}");
    assert_eq!(users[0]["content"]["text"], "list the files");
    assert_eq!(updates(&seen, "tool_call")[0]["title"], "ls");
    let text: String = updates(&seen, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "the answer to remember");
    assert_eq!(
        seen["replayed"].as_u64(),
        Some(seen["updates"].as_array().unwrap().len() as u64),
        "every update came before the load's answer: {seen}"
    );
    // Nothing else went to the model.
    assert_eq!(p.chat_requests().len(), 2);
}

#[test]
fn file_tools_read_and_edit_the_editors_buffer_not_the_disk() {
    let cmd = BuddyCmd::new();
    let file = cmd.work_dir().join("notes.txt");
    std::fs::write(&file, "saved text\n").unwrap();
    let path = file.display().to_string();
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "r",
            "read_file",
            json!({ "path": path }).to_string(),
        )]),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "e",
            "edit_file",
            json!({ "path": path, "old_string": "unsaved", "new_string": "edited" }).to_string(),
        )]),
        Reply::text("done"),
    ]);
    let cmd = cmd.config(fake_config(&p));
    let seen = run(&cmd, "files", &[("ACP_TEST_FILE", &path)]);
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    let reqs = p.chat_requests();
    assert!(
        tool_result(&reqs[1], "r").contains("unsaved text"),
        "{}",
        tool_result(&reqs[1], "r")
    );
    assert_eq!(seen["buffer"], "edited text\n", "{seen}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "saved text\n");
    // The edit was asked about with its diff.
    let asked = &seen["permissions"][0]["toolCall"]["content"][0];
    assert_eq!(asked["type"], "diff", "{seen}");
    assert_eq!(asked["oldText"], "unsaved");
}

/// Reads lines from buddy's stdout until one answers `id`.
fn answer(out: &mut impl BufRead, id: Value) -> Value {
    loop {
        let mut line = String::new();
        let n = out.read_line(&mut line).expect("read stdout");
        assert!(n > 0, "buddy closed stdout before answering {id}");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a line that is not JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if v["id"] == id {
            return v;
        }
    }
}

#[test]
fn malformed_messages_get_json_rpc_errors_and_the_agent_goes_on() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let mut child = cmd
        .command_with(&["acp".into()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start buddy acp");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    let init = answer(&mut out, json!(0));
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    // Not JSON at all.
    stdin.write_all(b"{this is not json\n").unwrap();
    let parse = answer(&mut out, Value::Null);
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    // A method nobody serves.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no/such\",\"params\":{}}\n")
        .unwrap();
    assert_eq!(answer(&mut out, json!(1))["error"]["code"], -32601);
    // Parameters of the wrong shape.
    stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\",\"params\":{\"cwd\":5}}\n",
        )
        .unwrap();
    assert_eq!(answer(&mut out, json!(2))["error"]["code"], -32602);
    // A relative working directory.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/new\",\"params\":{\"cwd\":\"rel\",\"mcpServers\":[]}}\n")
        .unwrap();
    assert_eq!(answer(&mut out, json!(3))["error"]["code"], -32602);
    // A prompt for a session that is not open.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"nope\",\"prompt\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n")
        .unwrap();
    assert_eq!(answer(&mut out, json!(4))["error"]["code"], -32002);
    // And still an agent: a session opens.
    let cwd = cmd.work_dir().display().to_string();
    let new =
        json!({"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":cwd,"mcpServers":[]}});
    stdin.write_all(format!("{new}\n").as_bytes()).unwrap();
    let opened = answer(&mut out, json!(5));
    assert!(opened["result"]["sessionId"].is_string(), "{opened}");
    drop(stdin);
    let status =
        support::wait::wait_until("buddy acp to end at EOF", Duration::from_secs(20), || {
            child.try_wait().unwrap()
        });
    assert!(status.success(), "{status}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    for line in rest.lines() {
        let v: Value = serde_json::from_str(line).expect("only JSON-RPC on stdout");
        assert_eq!(v["jsonrpc"], "2.0");
    }
}

/// A prompt too long for the server's window ends its turn, and the next
/// prompt in the same session is sent without it and answered (issue 49).
#[test]
fn a_prompt_too_long_for_the_window_ends_its_turn_and_the_next_is_answered() {
    use crate::support::fake_provider::{huge_prompt, LLAMA_OVERFLOW};
    let p = FakeProvider::start(vec![
        Reply::status(400, LLAMA_OVERFLOW),
        Reply::text("answered again"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "overflow", &[("ACP_TEST_PROMPT", &huge_prompt())]);
    // The first turn fails (an error, or a stop that is not end_turn), the
    // second ends normally.
    let stops = seen["stops"].as_array().unwrap();
    let errors = seen["errors"].as_array().unwrap();
    assert_eq!(stops.len() + errors.len(), 2, "{seen}");
    assert_eq!(stops.last().unwrap(), "end_turn", "{seen}");
    let failed = errors
        .iter()
        .chain(&stops[..stops.len() - 1])
        .map(Value::to_string)
        .collect::<String>();
    assert!(!failed.is_empty(), "{seen}");
    let text: String = updates(&seen, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(text.ends_with("answered again"), "{seen}");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        !reqs[1].body_text().contains("HUGE-PROMPT"),
        "the refused prompt was sent again"
    );
}

/// Reads JSON-RPC lines until the answers to every id in `ids` have come,
/// returning every line read.
fn read_until_answered(out: &mut impl BufRead, ids: &[Value]) -> Vec<Value> {
    let mut seen = Vec::new();
    let mut left: Vec<&Value> = ids.iter().collect();
    while !left.is_empty() {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "stdout ended: {seen:?}"
        );
        let v: Value = serde_json::from_str(&line).expect("JSON-RPC on stdout");
        if v.get("method").is_none() {
            left.retain(|id| **id != v["id"]);
        }
        seen.push(v);
    }
    seen
}

/// Two sessions in two directories, prompted at once, each run `pwd` in
/// its own directory and keep their sessions there: the session's directory
/// is data, never the process's (which would serve only one at a time).
#[test]
fn two_sessions_in_different_directories_each_work_in_their_own() {
    let gate = Gate::new();
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "pwd")]).gated(&gate),
        Reply::tool_calls(vec![shell("c2", "pwd")]).gated(&gate),
        Reply::text("done"),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let dirs = ["a", "b"].map(|d| {
        let dir = cmd.work_dir().join(d);
        std::fs::create_dir(&dir).unwrap();
        dir.canonicalize().unwrap()
    });
    let mut child = cmd
        .command_with(&["acp".into()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start buddy acp");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
    send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}));
    answer(&mut out, json!(0));
    let mut ids = Vec::new();
    for (n, dir) in dirs.iter().enumerate() {
        let id = json!(10 + n);
        send(json!({"jsonrpc":"2.0","id":id,"method":"session/new",
            "params":{"cwd":dir.display().to_string(),"mcpServers":[]}}));
        let opened = answer(&mut out, id);
        ids.push(opened["result"]["sessionId"].as_str().unwrap().to_string());
    }
    for (n, sid) in ids.iter().enumerate() {
        send(
            json!({"jsonrpc":"2.0","id":20 + n,"method":"session/prompt",
            "params":{"sessionId":sid,"prompt":[{"type":"text","text":"where am I"}]}}),
        );
    }
    // Both sessions' first requests are in flight before either goes on.
    p.wait_for_requests(2, Duration::from_secs(20));
    gate.open();
    let seen = read_until_answered(&mut out, &[json!(20), json!(21)]);
    for (sid, dir) in ids.iter().zip(&dirs) {
        let shown: String = seen
            .iter()
            .filter(|v| v["method"] == "session/update" && v["params"]["sessionId"] == *sid)
            .map(|v| &v["params"]["update"])
            .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
            .filter_map(|u| u["content"][0]["content"]["text"].as_str())
            .collect();
        assert!(
            shown.contains(&dir.display().to_string()),
            "session in {} ran pwd elsewhere: {shown:?}",
            dir.display()
        );
        let other = dirs.iter().find(|d| *d != dir).unwrap();
        assert!(!shown.contains(&other.display().to_string()), "{shown:?}");
        assert!(
            dir.join(".buddyx").is_dir(),
            "no session store in {}",
            dir.display()
        );
    }
    assert!(!cmd.work_dir().join(".buddyx").exists());
    // Nor did serving them move the process: it is still where it started.
    let proc_cwd = std::fs::read_link(format!("/proc/{}/cwd", child.id())).unwrap();
    assert_eq!(proc_cwd, cmd.work_dir().canonicalize().unwrap());
    drop(stdin);
    let status =
        support::wait::wait_until("buddy acp to end at EOF", Duration::from_secs(20), || {
            child.try_wait().unwrap()
        });
    assert!(status.success(), "{status}");
}

#[test]
fn saved_sessions_are_listed_resumed_without_a_replay_and_closed() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "ls")]),
        Reply::text("the answer to remember"),
        Reply::text("resumed"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let first = run(&cmd, "answer", &[]);
    let id = first["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    let seen = run(&cmd, "sessions", &[("ACP_TEST_SESSION", &id)]);
    let listed = seen["list"]["sessions"].as_array().expect("sessions");
    assert_eq!(listed.len(), 1, "{seen}");
    assert_eq!(listed[0]["sessionId"], id.as_str());
    assert_eq!(listed[0]["title"], "list the files");
    let cwd = cmd.work_dir().canonicalize().unwrap();
    assert_eq!(
        std::path::Path::new(listed[0]["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        cwd
    );
    assert!(
        listed[0]["updatedAt"]
            .as_str()
            .is_some_and(|t| t.len() == 20 && t.ends_with('Z')),
        "{seen}"
    );
    // Resumed: the mode state, no replay, and the conversation goes on.
    assert_eq!(seen["resumed"]["modes"]["currentModeId"], "default");
    assert_eq!(seen["replayedOnResume"], 0, "{seen}");
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs[2].body_text().contains("the answer to remember"),
        "the resumed session lost its history"
    );
    // Closed: it answers, and the session is gone.
    assert_eq!(seen["closed"], json!({}), "{seen}");
    assert_eq!(seen["afterClose"], -32002, "{seen}");
}

fn write_file(id: &str, path: &str) -> ToolCallSpec {
    ToolCallSpec::new(
        id,
        "write_file",
        json!({ "path": path, "content": "x\n" }).to_string(),
    )
}

#[test]
fn auto_edit_mode_approves_edits_and_still_asks_for_commands() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            write_file("e1", "one.txt"),
            shell("c1", "touch made1.txt"),
        ]),
        Reply::text("done"),
        Reply::tool_calls(vec![
            write_file("e2", "two.txt"),
            shell("c2", "touch made2.txt"),
        ]),
        Reply::text("done again"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "modes", &[]);
    assert_eq!(seen["stops"], json!(["end_turn", "end_turn"]), "{seen}");
    let modes = &seen["modes"];
    assert_eq!(modes["currentModeId"], "default", "{seen}");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["default", "auto-edit", "full-auto", "read-only", "plan"]
    );
    // In the default mode both the edit and the command were asked about.
    assert_eq!(seen["permissionsBeforeMode"], 2, "{seen}");
    let changed = updates(&seen, "current_mode_update");
    assert_eq!(changed.len(), 1, "{seen}");
    assert_eq!(changed[0]["currentModeId"], "auto-edit");
    // In auto-edit only the command was.
    let asked = seen["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 3, "{seen}");
    assert_eq!(asked[2]["toolCall"]["toolCallId"], "c2");
    for f in ["one.txt", "two.txt", "made1.txt", "made2.txt"] {
        assert!(cmd.work_dir().join(f).exists(), "{f} is missing");
    }
    assert_eq!(seen["badMode"], -32602, "{seen}");
}

/// The editor's `plan` mode is buddy's plan mode: a write is refused with a
/// reason the model can act on, without asking the editor, while reading
/// runs; the plan the model keeps arrives as a `plan` update.
#[test]
fn plan_mode_from_the_editor_refuses_changes_and_lets_reading_run() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            write_file("e1", "planned.txt"),
            shell("c1", "ls"),
            ToolCallSpec::new(
                "t1",
                "todo_write",
                json!({"todos": [{"content": "read the code", "status": "in_progress"}]})
                    .to_string(),
            ),
        ]),
        Reply::text("here is the plan"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "plan-mode", &[]);
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    let changed = updates(&seen, "current_mode_update");
    assert_eq!(changed[0]["currentModeId"], "plan", "{seen}");
    assert!(!cmd.work_dir().join("planned.txt").exists());
    assert_eq!(
        seen["permissions"].as_array().map(Vec::len),
        Some(0),
        "{seen}"
    );
    let refused = support::fake_provider::tool_result(&p.chat_requests()[1], "e1");
    assert!(refused.contains("plan mode"), "{refused}");
    let listed = support::fake_provider::tool_result(&p.chat_requests()[1], "c1");
    assert!(!listed.contains("plan mode"), "{listed}");
    let plans = updates(&seen, "plan");
    assert_eq!(plans.len(), 1, "{seen}");
    assert_eq!(plans[0]["entries"][0]["content"], "read the code");
}

/// A sub-agent's question goes to the editor as the parent's would: its
/// `session/request_permission` names the child and a call the editor was
/// shown by a `tool_call` update (the child's call under the parent's,
/// `PARENT/CHILD`), and the editor's answer reaches the child, whose write
/// then runs and ends as that call's update.
#[test]
fn a_childs_question_reaches_the_editor_and_its_answer_the_child() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "a1",
            "agent",
            json!({
                "description": "file maker",
                "prompt": "Create child.txt (CHILD-MARK).",
                "tools": "all",
            })
            .to_string(),
        )]),
        Reply::tool_calls(vec![write_file("w1", "child.txt")]).for_marker("CHILD-MARK"),
        Reply::text("created it").for_marker("CHILD-MARK"),
        Reply::text("the helper made it"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "subagent", &[]);
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    let asked = seen["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{seen}");
    let question = &asked[0]["toolCall"];
    assert_eq!(question["toolCallId"], "a1/w1", "{seen}");
    let title = question["title"].as_str().unwrap_or_default();
    assert!(title.starts_with("[file maker] "), "{title}");
    // The editor saw that call before it was asked about it, named for the
    // child too, and then saw it end.
    let calls = updates(&seen, "tool_call");
    let shown = calls
        .iter()
        .position(|c| c["toolCallId"] == "a1/w1")
        .unwrap_or_else(|| panic!("no tool_call a1/w1 in {seen}"));
    assert!(
        calls[shown]["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("[file maker] ")),
        "{seen}"
    );
    let ended = updates(&seen, "tool_call_update")
        .into_iter()
        .any(|u| u["toolCallId"] == "a1/w1" && u["status"] == "completed");
    assert!(ended, "{seen}");
    // The answer reached the child: its write ran, and the model saw it.
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("child.txt")).unwrap(),
        "x\n"
    );
    let child_done = p
        .chat_requests()
        .into_iter()
        .find(|r| r.body_text().contains("CHILD-MARK") && r.body_text().contains("\"w1\""))
        .expect("the child's request after its write");
    assert!(!tool_result(&child_done, "w1").contains("denied"), "{seen}");
}

/// An accepted `exit_plan_mode` ends plan mode in the agent, and the
/// editor's mode indicator is told so (`current_mode_update` back to the
/// default) without asking for it; the write that follows is no longer
/// refused as planning.
#[test]
fn an_accepted_plan_sends_the_editor_back_to_the_default_mode() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "x1",
            "exit_plan_mode",
            json!({"plan": "1. write done.txt"}).to_string(),
        )]),
        Reply::tool_calls(vec![write_file("e1", "done.txt")]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "plan-accepted", &[]);
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    let changed: Vec<&Value> = updates(&seen, "current_mode_update")
        .iter()
        .map(|u| &u["currentModeId"])
        .collect();
    assert_eq!(changed, [&json!("plan"), &json!("default")], "{seen}");
    // The plan's question, accepted, then the write's, asked as in the
    // default mode.
    let asked = seen["permissions"].as_array().unwrap();
    let ids: Vec<&Value> = asked.iter().map(|a| &a["toolCall"]["toolCallId"]).collect();
    assert_eq!(ids, [&json!("x1"), &json!("e1")], "{seen}");
    assert!(cmd.work_dir().join("done.txt").exists(), "{seen}");
}

#[test]
fn custom_commands_and_skills_are_offered_and_a_command_expands() {
    let p = FakeProvider::start(vec![Reply::text("hello")]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let user = cmd.config_home().join("buddy");
    for (path, text) in [
        (
            "commands/greet.md",
            "---\ndescription: greet someone\n---\nSay hello to $1 warmly.\n",
        ),
        (
            "skills/notes/SKILL.md",
            "---\nname: notes\ndescription: the user's note-taking habits\n---\nbody\n",
        ),
    ] {
        let path = user.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let seen = run(&cmd, "commands", &[("ACP_TEST_PROMPT", "/greet Ada")]);
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    let offered = updates(&seen, "available_commands_update");
    assert_eq!(offered.len(), 1, "{seen}");
    let commands = offered[0]["availableCommands"].as_array().unwrap();
    let names: Vec<&str> = commands.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["greet", "notes"], "{seen}");
    assert_eq!(commands[0]["description"], "greet someone");
    // The model got the command's prompt, not the slash line.
    let body = p.chat_requests()[0].body_text();
    assert!(body.contains("Say hello to Ada warmly."), "{body}");
    assert!(!body.contains("/greet"), "{body}");
}

#[test]
fn a_command_runs_in_the_editors_terminal_when_it_offers_one() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell(
            "t",
            "echo from-the-editor; touch ran.txt; exit 3",
        )]),
        Reply::text("ran"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    let seen = run(&cmd, "terminal", &[]);
    assert_eq!(seen["stops"], json!(["end_turn"]), "{seen}");
    // Asked first, as a command run here would be.
    assert_eq!(
        seen["permissions"][0]["toolCall"]["toolCallId"], "t",
        "{seen}"
    );
    let terms = seen["terminals"].as_array().unwrap();
    assert_eq!(terms.len(), 1, "{seen}");
    let args: Vec<&str> = terms[0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        args.last(),
        Some(&"echo from-the-editor; touch ran.txt; exit 3"),
        "{seen}"
    );
    assert_eq!(
        std::path::Path::new(terms[0]["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        cmd.work_dir().canonicalize().unwrap()
    );
    // Waited for, read and released.
    assert_eq!(
        terms[0]["calls"],
        json!(["create", "wait_for_exit", "output", "release"]),
        "{seen}"
    );
    assert!(cmd.work_dir().join("ran.txt").exists());
    // The terminal was shown in its call, after the call itself.
    let all = seen["updates"].as_array().unwrap();
    let call_at = all
        .iter()
        .position(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "t")
        .expect("the call was shown");
    let shown_at = all
        .iter()
        .position(|u| u["content"][0]["type"] == "terminal")
        .unwrap_or_else(|| panic!("no terminal was shown: {seen}"));
    assert!(call_at < shown_at, "{seen}");
    assert_eq!(all[shown_at]["toolCallId"], "t");
    assert_eq!(all[shown_at]["content"][0]["terminalId"], "term-1");
    let result = tool_result(&p.chat_requests()[1], "t");
    assert!(result.contains("exit code: 3"), "{result}");
    assert!(result.contains("from-the-editor"), "{result}");
}
