//! Hooks end to end: `[[hooks.EVENT]]` commands run by the real binary
//! around tool calls, prompts, the end of a run, a session's start and a
//! waiting approval, in exec, exec --json, the REPL (real tmux) and serve,
//! against the scripted fake provider. Each hook script records the JSON it
//! got, so the tests check Claude Code's field names on the way in and its
//! answers (exit 2, a JSON decision, added context) on the way out.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use support::fake_provider::{tool_result, FakeProvider, Reply, ToolCallSpec};
use support::{fake_config, BuddyCmd};

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

/// `fake_config` with shell commands that need no approval, plus `hooks`.
fn config_with_hooks(p: &FakeProvider, hooks: &str) -> String {
    format!(
        "{}\n[tools]\nshell_confirm = false\n\n{hooks}\n",
        fake_config(p)
    )
}

/// The JSON a hook saved with `cat > FILE`.
fn saved_input(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the hook wrote no {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The `content` of the last user message of a recorded request.
fn last_user_text(req: &support::fake_provider::RecordedRequest) -> String {
    req.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no user message: {}", req.body_text()))
        .to_string()
}

#[test]
fn pre_tool_use_exit_2_blocks_the_call_and_the_model_gets_stderr() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "touch ran")]),
        Reply::text("understood"),
    ]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\nmatcher = \"run_shell\"\n\
         command = 'cat > \"$BUDDY_PROJECT_DIR/pre.json\"; echo \"no shell today\" >&2; exit 2'\n",
    );
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "make a file"]);
    let out = cmd.run();
    out.assert_success();
    let work = cmd.work_dir();
    assert!(!work.join("ran").exists(), "the blocked command ran");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    let result = tool_result(&reqs[1], "c1");
    assert!(result.contains("no shell today"), "{result}");
    assert!(
        out.stderr
            .contains("hook: PreToolUse blocked run_shell: no shell today"),
        "{}",
        out.stderr
    );
    let input = saved_input(&work.join("pre.json"));
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "run_shell");
    assert_eq!(input["tool_input"]["command"], "touch ran");
    assert_eq!(input["tool_use_id"], "c1");
    assert_eq!(
        Path::new(input["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        work.canonicalize().unwrap()
    );
    assert!(
        input["session_id"].as_str().is_some_and(|s| !s.is_empty()),
        "{input}"
    );
}

#[test]
fn a_json_decision_blocks_and_exec_json_shows_a_hook_blocked_event() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "touch ran")]),
        Reply::text("fine"),
    ]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\nmatcher = \"\"\n\
         command = '''echo '{\"decision\":\"block\",\"reason\":\"json says no\"}' '''\n",
    );
    let cmd = BuddyCmd::new()
        .config(cfg)
        .args(["exec", "--json", "make a file"]);
    let out = cmd.run();
    out.assert_success();
    assert!(!cmd.work_dir().join("ran").exists());
    let blocked: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "hook_blocked")
        .collect();
    assert_eq!(blocked.len(), 1, "{}", out.stdout);
    assert_eq!(blocked[0]["hook_event"], "PreToolUse");
    assert_eq!(blocked[0]["call_id"], "c1");
    assert_eq!(blocked[0]["tool"], "run_shell");
    assert_eq!(blocked[0]["reason"], "json says no");
    assert!(tool_result(&p.chat_requests()[1], "c1").contains("json says no"));
}

#[test]
fn an_allowing_hook_lets_the_call_run_and_post_tool_use_sees_the_result() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "touch ran && echo made-it")]),
        Reply::text("done"),
    ]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\nmatcher = \"write_file|run_sh.*\"\ncommand = \"exit 0\"\n\n\
         [[hooks.PostToolUse]]\nmatcher = \"read_file\"\ncommand = \"touch never\"\n\n\
         [[hooks.PostToolUse]]\ncommand = 'cat > \"$BUDDY_PROJECT_DIR/post.json\"'\n",
    );
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "go"]);
    let out = cmd.run();
    out.assert_success();
    assert!(
        cmd.work_dir().join("ran").exists(),
        "the allowed command did not run"
    );
    assert!(
        !cmd.work_dir().join("never").exists(),
        "a hook whose matcher does not match ran"
    );
    let input = saved_input(&cmd.work_dir().join("post.json"));
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "run_shell");
    assert!(
        input["tool_response"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("made-it")),
        "{input}"
    );
    assert_eq!(input["tool_response"]["is_error"], false);
    assert!(!out.stderr.contains("hook:"), "{}", out.stderr);
}

#[test]
fn post_tool_use_block_reason_joins_the_result_the_model_reads() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "echo formatted")]),
        Reply::text("done"),
    ]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PostToolUse]]\ncommand = \"echo 'lint failed: line 3' >&2; exit 2\"\n",
    );
    BuddyCmd::new()
        .config(cfg)
        .args(["exec", "go"])
        .run()
        .assert_success();
    let result = tool_result(&p.chat_requests()[1], "c1");
    assert!(result.contains("formatted"), "{result}");
    assert!(
        result.contains("[PostToolUse hook] lint failed: line 3"),
        "{result}"
    );
}

#[test]
fn a_failing_hook_is_one_visible_warning_and_blocks_nothing() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "touch ran")]),
        Reply::text("done"),
    ]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\ncommand = \"printf 'bad\\\\033[2J\\\\nthing' >&2; exit 1\"\n",
    );
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "go"]);
    let out = cmd.run();
    out.assert_success();
    assert!(cmd.work_dir().join("ran").exists(), "a failed hook blocked");
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("PreToolUse hook"))
        .unwrap_or_else(|| panic!("no warning: {}", out.stderr));
    assert!(
        line.contains("failed (exit status 1): bad␛[2J thing"),
        "{line}"
    );
    assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);
}

#[test]
fn a_hook_past_its_timeout_is_killed_with_its_children_and_blocks_nothing() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "touch ran")]),
        Reply::text("done"),
    ]);
    // 2 s: room for the hook's shell to start its child and note its pid
    // before the kill, on a loaded machine.
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\ntimeout_secs = 2\n\
         command = 'sleep 300 & echo $! > \"$BUDDY_PROJECT_DIR/child.pid\"; wait'\n",
    );
    let started = Instant::now();
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "go"]);
    let out = cmd.run();
    out.assert_success();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        cmd.work_dir().join("ran").exists(),
        "a timed-out hook blocked"
    );
    assert!(
        out.stderr.contains("timed out after 2 s and was stopped"),
        "{}",
        out.stderr
    );
    let pid = std::fs::read_to_string(cmd.work_dir().join("child.pid")).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    // Killed, so gone (or a zombie until init reaps it).
    support::wait::wait_for(
        "the hook's child to end with its timeout",
        Duration::from_secs(10),
        || !std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z ")),
    );
}

#[test]
fn user_prompt_submit_blocks_the_prompt_or_adds_context() {
    let p = FakeProvider::start(vec![Reply::text("answer")]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.UserPromptSubmit]]\n\
         command = 'cat > \"$BUDDY_PROJECT_DIR/prompt.json\"; grep -q secret \"$BUDDY_PROJECT_DIR/prompt.json\" && { echo \"no secrets in prompts\" >&2; exit 2; }; echo \"branch: main\"'\n",
    );
    let cmd = BuddyCmd::new()
        .config(cfg.clone())
        .args(["exec", "tell the secret"]);
    let blocked = cmd.run();
    blocked.assert_code(1);
    assert_eq!(p.request_count(), 0, "a blocked prompt reached the model");
    assert!(
        blocked
            .stderr
            .contains("hook: UserPromptSubmit blocked: no secrets in prompts"),
        "{}",
        blocked.stderr
    );
    let input = saved_input(&cmd.work_dir().join("prompt.json"));
    assert_eq!(input["hook_event_name"], "UserPromptSubmit");
    assert_eq!(input["prompt"], "tell the secret");

    let cmd = BuddyCmd::new().config(cfg).args(["exec", "say hi"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "answer\n");
    let sent = last_user_text(&p.chat_requests()[0]);
    assert_eq!(sent, "say hi\n\nbranch: main");
    // The session's title is what the user typed, not the hook's addition.
    let listed = cmd.rerun(["sessions"]);
    listed.assert_success();
    assert!(listed.stdout.contains("say hi"), "{}", listed.stdout);
    assert!(!listed.stdout.contains("branch"), "{}", listed.stdout);
}

#[test]
fn a_stop_hook_that_blocks_makes_the_model_go_on_once() {
    let p = FakeProvider::start(vec![Reply::text("first try"), Reply::text("second try")]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.Stop]]\n\
         command = 'grep -q \"\\\"stop_hook_active\\\":true\" && exit 0; echo \"run the tests too\" >&2; exit 2'\n",
    );
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "work"]);
    let out = cmd.run();
    out.assert_success();
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2, "the Stop hook did not make the run go on");
    assert!(
        last_user_text(&reqs[1]).contains("run the tests too"),
        "{}",
        reqs[1].body_text()
    );
    assert!(out.stdout.contains("second try"), "{}", out.stdout);
}

#[test]
fn session_start_context_goes_with_the_first_prompt() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.SessionStart]]\n\
         command = 'cat > \"$BUDDY_PROJECT_DIR/start.json\"; echo \"open issues: 3\"'\n",
    );
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "hello"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(
        last_user_text(&p.chat_requests()[0]),
        "hello\n\nopen issues: 3"
    );
    let input = saved_input(&cmd.work_dir().join("start.json"));
    assert_eq!(input["hook_event_name"], "SessionStart");
    assert_eq!(input["source"], "startup");
}

#[test]
fn an_untrusted_project_config_adds_no_hook() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "echo hi")]),
        Reply::text("done"),
    ]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\ncommand = 'touch \"$BUDDY_PROJECT_DIR/owned\"'\n\n\
         [[hooks.UserPromptSubmit]]\ncommand = 'touch \"$BUDDY_PROJECT_DIR/owned\"'\n",
    );
    let cmd =
        BuddyCmd::new()
            .project_config(cfg)
            .args(["exec", "--dangerously-auto-approve", "go"]);
    let out = cmd.run();
    out.assert_success();
    assert!(
        !cmd.work_dir().join("owned").exists(),
        "an untrusted file's hook ran"
    );
    assert!(out.stderr.contains("hooks"), "{}", out.stderr);
}

#[test]
fn a_bad_matcher_is_one_config_error() {
    let p = FakeProvider::start(vec![Reply::text("never")]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\nmatcher = \"(\"\ncommand = \"true\"\n",
    );
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "go"]);
    let out = cmd.run();
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("config error: hooks.PreToolUse: matcher `(` is not a regular expression"),
        "{}",
        out.stderr
    );
    assert_eq!(p.request_count(), 0);
}

#[test]
fn a_served_session_runs_hooks_and_streams_the_block() {
    use support::serve::Server;
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "touch ran")]),
        Reply::text("served"),
    ]);
    let cfg = config_with_hooks(
        &p,
        "[[hooks.PreToolUse]]\nmatcher = \"run_shell\"\n\
         command = 'echo \"not over http\" >&2; exit 2'\n",
    );
    let cmd = BuddyCmd::new().config(cfg);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_string();
    let body = json!({ "text": "make a file" }).to_string();
    let (r, stream) = c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let events = stream.unwrap().until("done");
    let blocked = events
        .iter()
        .find(|e| e.event == "hook_blocked")
        .unwrap_or_else(|| panic!("no hook_blocked in {events:?}"));
    assert_eq!(blocked.data["hook_event"], "PreToolUse");
    assert_eq!(blocked.data["reason"], "not over http");
    assert!(!cmd.work_dir().join("ran").exists());
    assert!(tool_result(&p.chat_requests()[1], "c1").contains("not over http"));
}
