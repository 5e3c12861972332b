//! End-to-end tests of `buddy exec`: the real binary against the scripted fake
//! provider on 127.0.0.1, checking what reaches stdout/stderr, the exit code and
//! exactly what buddy sent over the wire.

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::fake_provider::{FakeProvider, Reply, SseChunk, ToolCallSpec};
use support::{fake_config, BuddyCmd};

/// `fake_config` plus shell commands that need no approval.
fn config_no_confirm(p: &FakeProvider, extra: &str) -> String {
    format!(
        "{}\n[tools]\nshell_confirm = false\n{extra}\n",
        fake_config(p)
    )
}

fn call(id: &str, name: &str, args: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, name, args.to_string())
}

fn messages(req: &support::fake_provider::RecordedRequest) -> Vec<Value> {
    req.json()["messages"]
        .as_array()
        .expect("messages array")
        .clone()
}

/// The tool message answering `id` in a request.
fn tool_result(req: &support::fake_provider::RecordedRequest, id: &str) -> String {
    messages(req)
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no tool result for {id} in {}", req.body_text()))["content"]
        .as_str()
        .expect("tool content is a string")
        .to_string()
}

#[test]
fn plain_answer_goes_to_stdout_only() {
    let p = FakeProvider::start(vec![Reply::text("Hello from the model")]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "say hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "Hello from the model\n");
    assert!(
        !out.stderr.contains("Hello from the model"),
        "stderr: {}",
        out.stderr
    );
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 1);
    let body = reqs[0].json();
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    let msgs = messages(&reqs[0]);
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(
        msgs.last().unwrap(),
        &json!({"role": "user", "content": "say hello"})
    );
}

#[test]
fn non_streaming_profile_sends_stream_false_and_reads_json() {
    let p = FakeProvider::start(vec![Reply::text("plain json answer")]);
    let cfg = fake_config(&p).replace(
        "model = \"fake-model\"",
        "model = \"fake-model\"\nstream = false",
    );
    let out = BuddyCmd::new().config(cfg).args(["exec", "hi"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "plain json answer\n");
    let body = p.chat_requests()[0].json().clone();
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none());
}

#[test]
fn multi_step_tool_loop_pairs_tool_call_ids() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "call_a",
            "run_shell",
            json!({"command": "echo first-step"}),
        )]),
        Reply::tool_calls(vec![call(
            "call_b",
            "read_file",
            json!({"path": "note.txt"}),
        )]),
        Reply::text("all done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "work"]);
    std::fs::write(cmd.work_dir().join("note.txt"), "contents of the note").unwrap();
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "all done\n");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 3);

    let second = messages(&reqs[1]);
    let assistant = &second[second.len() - 2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"],
        Value::Null,
        "tool-call turns keep content: null"
    );
    assert_eq!(assistant["tool_calls"][0]["id"], "call_a");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "run_shell");
    let r = tool_result(&reqs[1], "call_a");
    assert!(
        r.contains("first-step") && r.contains("exit code: 0"),
        "{r}"
    );

    assert!(tool_result(&reqs[2], "call_b").contains("contents of the note"));
    // The full history is resent: the first pair is still there, in order.
    let third = messages(&reqs[2]);
    let roles: Vec<&str> = third.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "tool"]
    );
}

#[test]
fn streamed_tool_arguments_in_fragments_are_reassembled() {
    // Arguments long enough to be split into many fragments by the fake.
    let cmd_text = "printf '%s' fragmented-arguments-reassembled > frag.txt";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("c1", "run_shell", json!({"command": cmd_text}))]),
        Reply::text("ok"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "go"]);
    let out = cmd.run();
    out.assert_success();
    let written = std::fs::read_to_string(cmd.work_dir().join("frag.txt")).unwrap();
    assert_eq!(written, "fragmented-arguments-reassembled");
}

#[test]
fn parallel_tool_calls_run_together_and_keep_request_order() {
    // Each command waits for the other's flag: they can only finish if they run
    // at the same time. The second finishes first, yet results keep request order.
    let a = "touch a.flag; i=0; while [ ! -f b.flag ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; sleep 0.2; [ -f b.flag ] && echo result-A";
    let b = "touch b.flag; i=0; while [ ! -f a.flag ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; [ -f a.flag ] && echo result-B";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            call("first", "run_shell", json!({"command": a})),
            call("second", "run_shell", json!({"command": b})),
        ]),
        Reply::text("both ran"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "go"])
        .run();
    out.assert_success();
    let reqs = p.chat_requests();
    let msgs = messages(&reqs[1]);
    let tools: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["tool_call_id"], "first");
    assert_eq!(tools[1]["tool_call_id"], "second");
    assert!(
        tools[0]["content"].as_str().unwrap().contains("result-A"),
        "{:?}",
        tools[0]
    );
    assert!(
        tools[1]["content"].as_str().unwrap().contains("result-B"),
        "{:?}",
        tools[1]
    );
}

#[test]
fn unknown_tool_becomes_an_error_result() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("x1", "launch_rockets", json!({}))]),
        Reply::text("sorry"),
    ]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "go"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "sorry\n");
    let r = tool_result(&p.chat_requests()[1], "x1");
    assert!(
        r.contains("unknown tool `launch_rockets`") && r.contains("run_shell"),
        "{r}"
    );
}

#[test]
fn malformed_arguments_become_an_error_result() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new("m1", "read_file", "{\"path\": \"x")]),
        Reply::text("retrying later"),
    ]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "go"]).run();
    out.assert_success();
    let r = tool_result(&p.chat_requests()[1], "m1");
    assert!(r.contains("malformed JSON"), "{r}");
}

#[test]
fn long_output_is_cut_with_a_marker_and_a_warning() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "t1",
            "run_shell",
            json!({"command": "seq 1 20000"}),
        )]),
        Reply::text("seen"),
    ]);
    let cfg = config_no_confirm(&p, "shell_max_output_chars = 500");
    let out = BuddyCmd::new().config(cfg).args(["exec", "go"]).run();
    out.assert_success();
    let r = tool_result(&p.chat_requests()[1], "t1");
    let last = r.lines().last().unwrap();
    assert!(last.starts_with("[output truncated: kept "), "{last}");
    let nums: Vec<usize> = last
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    assert!(nums[0] <= 500 && nums[1] > 100_000, "{last}");
    assert!(
        r.chars().count() < 700,
        "result is bounded: {} chars",
        r.chars().count()
    );
    assert!(out.stderr.contains("truncated"), "stderr: {}", out.stderr);
}

#[test]
fn reasoning_goes_to_stderr_and_round_trips() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("r1", "time", json!({}))])
            .with_reasoning("reasoning_content", "pondering the clock"),
        Reply::text("It is now.").with_reasoning("reasoning_content", "final thoughts"),
    ]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "time?"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "It is now.\n");
    assert!(
        out.stderr.contains("pondering the clock"),
        "stderr: {}",
        out.stderr
    );
    assert!(out.stderr.contains("final thoughts"));
    let msgs = messages(&p.chat_requests()[1]);
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["reasoning_content"], "pondering the clock");
}

#[test]
fn no_tools_key_when_every_tool_is_disabled() {
    let p = FakeProvider::start(vec![Reply::text("a"), Reply::text("b")]);
    let off = "shell_enabled = false\nfiles_enabled = false\nfetch_enabled = false\nsearch_enabled = false\ntime_enabled = false";
    let cfg = format!("{}\n[tools]\n{off}\n", fake_config(&p));
    BuddyCmd::new()
        .config(cfg)
        .args(["exec", "x"])
        .run()
        .assert_success();
    assert!(p.chat_requests()[0].json().get("tools").is_none());

    BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "x"])
        .run()
        .assert_success();
    let tools = p.chat_requests()[1].json()["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for n in [
        "run_shell",
        "read_file",
        "write_file",
        "fetch_url",
        "web_search",
        "time",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
}

#[test]
fn authorization_header_only_with_a_key() {
    let p = FakeProvider::start(vec![Reply::text("a"), Reply::text("b")]);
    BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "x"])
        .run()
        .assert_success();
    assert_eq!(
        p.chat_requests()[0].header("authorization").as_deref(),
        Some("Bearer sk-fake")
    );

    let keyless = fake_config(&p).replace("api_key = \"sk-fake\"\n", "");
    BuddyCmd::new()
        .config(keyless)
        .args(["exec", "x"])
        .run()
        .assert_success();
    assert_eq!(p.chat_requests()[1].header("authorization"), None);
}

#[test]
fn rate_limit_with_retry_after_then_success() {
    let p = FakeProvider::start(vec![
        Reply::json(429, json!({"error": {"message": "slow down"}})).header("Retry-After", "1"),
        Reply::text("made it"),
    ]);
    let started = Instant::now();
    let out = BuddyCmd::new().config_for(&p).args(["exec", "x"]).run();
    out.assert_success();
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After was not honoured"
    );
    assert_eq!(out.stdout, "made it\n");
    assert!(
        out.stderr.contains("429") && out.stderr.contains("retrying"),
        "{}",
        out.stderr
    );
    assert_eq!(p.chat_requests().len(), 2);
}

#[test]
fn persistent_server_error_exits_1_naming_the_status() {
    let err = || Reply::json(500, json!({"error": {"message": "backend exploded"}}));
    let p = FakeProvider::start(vec![err(), err()]);
    let cfg = format!("{}\n[network]\nmax_retries = 1\n", fake_config(&p));
    let out = BuddyCmd::new().config(cfg).args(["exec", "x"]).run();
    out.assert_code(1);
    assert_eq!(out.stdout, "");
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.contains("HTTP 500") && last.contains("backend exploded"),
        "{last}"
    );
    assert_eq!(p.chat_requests().len(), 2, "one try plus one retry");
}

#[test]
fn client_errors_are_not_retried() {
    let p = FakeProvider::start(vec![Reply::json(
        401,
        json!({"error": {"message": "bad key"}}),
    )]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "x"]).run();
    out.assert_code(1);
    assert!(
        out.stderr.contains("HTTP 401") && out.stderr.contains("bad key"),
        "{}",
        out.stderr
    );
    assert_eq!(p.chat_requests().len(), 1);
}

#[test]
fn iteration_cap_exits_1() {
    let replies = (0..3)
        .map(|i| Reply::tool_calls(vec![call(&format!("c{i}"), "time", json!({}))]))
        .collect();
    let p = FakeProvider::start(replies);
    let cfg = fake_config(&p).replace("[agent]\n", "[agent]\nmax_iterations = 3\n");
    let out = BuddyCmd::new().config(cfg).args(["exec", "x"]).run();
    out.assert_code(1);
    assert!(
        out.stderr.contains("stopped after 3 model calls"),
        "{}",
        out.stderr
    );
    assert_eq!(p.chat_requests().len(), 3);
}

#[test]
fn prompt_from_stdin() {
    let p = FakeProvider::start(vec![Reply::text("a"), Reply::text("b")]);
    BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "-"])
        .stdin("question from a pipe\n")
        .run()
        .assert_success();
    BuddyCmd::new()
        .config_for(&p)
        .arg("exec")
        .stdin("implicit stdin")
        .run()
        .assert_success();
    let reqs = p.chat_requests();
    let last_user = |i: usize| messages(&reqs[i]).last().unwrap()["content"].clone();
    assert_eq!(last_user(0), "question from a pipe\n");
    assert_eq!(last_user(1), "implicit stdin");
}

#[test]
fn empty_prompt_is_a_usage_error() {
    let out = BuddyCmd::new().arg("exec").stdin("").run();
    out.assert_code(2);
    assert!(out.stderr.contains("no prompt"), "{}", out.stderr);
}

#[test]
fn invalid_toml_names_file_line_and_column() {
    let out = BuddyCmd::new()
        .config("[agent]\nmax_iterations = = 3\n")
        .args(["exec", "x"])
        .run();
    out.assert_code(2);
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("config error"))
        .expect("a config error line");
    assert!(line.contains("buddy.toml line 2, column"), "{line}");
}

#[test]
fn environment_overrides_file_and_flags_override_environment() {
    let good = FakeProvider::start(vec![Reply::text("from good"), Reply::text("from flag")]);
    let other = FakeProvider::start(vec![Reply::text("from other")]);
    // The file points at a closed port; BUDDY_BASE_URL fixes it.
    let cfg = "[agent]\nmodel = \"a\"\n[models.a]\napi_base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"model-a\"\n[models.b]\napi_base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"model-b\"\n";
    let out = BuddyCmd::new()
        .config(cfg)
        .env("BUDDY_BASE_URL", good.base_url())
        .env("BUDDY_MODEL", "b")
        .env("BUDDY_API_KEY", "sk-env")
        .args(["exec", "x"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "from good\n");
    let r = &good.chat_requests()[0];
    assert_eq!(r.json()["model"], "model-b");
    assert_eq!(r.header("authorization").as_deref(), Some("Bearer sk-env"));

    // Flags beat the environment: --base-url and -m (a raw model id here).
    let out = BuddyCmd::new()
        .config(cfg)
        .env("BUDDY_BASE_URL", good.base_url())
        .env("BUDDY_MODEL", "b")
        .args(["--base-url", &other.base_url(), "-m", "raw-id", "exec", "x"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "from other\n");
    assert_eq!(other.chat_requests()[0].json()["model"], "raw-id");
    assert_eq!(good.chat_requests().len(), 1);
}

#[test]
fn explicit_missing_config_is_an_error() {
    let out = BuddyCmd::new()
        .args(["--config", "/nonexistent/buddy.toml", "exec", "x"])
        .run();
    out.assert_code(2);
    assert!(
        out.stderr.contains("/nonexistent/buddy.toml"),
        "{}",
        out.stderr
    );
}

#[test]
fn huge_command_output_stays_bounded() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "big",
            "run_shell",
            json!({"command": "head -c 200000000 /dev/zero | tr '\\0' a"}),
        )]),
        Reply::text("big done"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "go"])
        .run();
    out.assert_success();
    let r = tool_result(&p.chat_requests()[1], "big");
    assert!(
        r.contains("of 2000000"),
        "marker must report the full size: {}",
        r.lines().last().unwrap()
    );
    assert!(r.len() < 40_000, "result is bounded: {} bytes", r.len());
}

/// Runs buddy without a controlling terminal (a new session), as under cron or CI.
fn run_detached(cmd: &BuddyCmd) -> support::Output {
    let mut c = cmd.command();
    use std::os::unix::process::CommandExt;
    unsafe {
        c.pre_exec(|| {
            if libc_setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = c
        .stdin(std::process::Stdio::null())
        .output()
        .expect("buddy runs");
    support::Output {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

extern "C" {
    #[link_name = "setsid"]
    fn c_setsid() -> i32;
}

fn libc_setsid() -> i32 {
    unsafe { c_setsid() }
}

#[test]
fn without_a_terminal_commands_needing_approval_are_denied() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "s1",
            "run_shell",
            json!({"command": "touch should-not-exist"}),
        )]),
        Reply::text("could not run it"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p).args(["exec", "go"]);
    let out = run_detached(&cmd);
    out.assert_success();
    assert!(
        !cmd.work_dir().join("should-not-exist").exists(),
        "the command must not run"
    );
    let r = tool_result(&p.chat_requests()[1], "s1");
    assert!(r.contains("no terminal"), "the model is told why: {r}");
    assert!(
        out.stderr.contains("--dangerously-auto-approve"),
        "{}",
        out.stderr
    );
}

#[test]
fn auto_approve_runs_commands_but_never_denylisted_ones() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            call("ok", "run_shell", json!({"command": "touch approved-file"})),
            call("bad", "run_shell", json!({"command": "rm -rf /"})),
        ]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--dangerously-auto-approve", "go"]);
    let out = run_detached(&cmd);
    out.assert_success();
    assert!(cmd.work_dir().join("approved-file").exists());
    let r = tool_result(&p.chat_requests()[1], "bad");
    assert!(
        r.to_lowercase().contains("denylist") || r.to_lowercase().contains("refused"),
        "{r}"
    );
}

#[test]
fn version_and_help_need_no_config_or_network() {
    let out = BuddyCmd::new().arg("--version").run();
    out.assert_success();
    assert!(out.stdout.starts_with("buddy "), "{}", out.stdout);
    let out = BuddyCmd::new().arg("help").run();
    out.assert_success();
    assert!(out.stdout.contains("exec"), "{}", out.stdout);
}

#[test]
fn version_fast_path_prints_what_clap_prints() {
    // `--version` alone is answered before clap; with another flag it goes
    // through clap. Both must print the same line.
    let through_clap = BuddyCmd::new().args(["--no-color", "--version"]).run();
    through_clap.assert_success();
    assert!(
        through_clap.stdout.starts_with("buddy "),
        "{}",
        through_clap.stdout
    );
    for flag in ["--version", "-V"] {
        let fast = BuddyCmd::new().arg(flag).run();
        fast.assert_success();
        assert_eq!(fast.stdout, through_clap.stdout, "{flag}");
        assert_eq!(fast.stderr, "", "{flag}");
    }
}

#[test]
fn first_run_without_key_explains_what_to_do() {
    // Only the probe list is set, to a port nothing listens on, so whatever
    // runs on this machine's usual model ports cannot answer.
    let port = support::real_server::free_port();
    let cmd = BuddyCmd::new()
        .config(format!(
            "[discovery]\nlocal_servers = [\"127.0.0.1:{port}\"]\n"
        ))
        .args(["exec", "hello"]);
    let out = cmd.run();
    out.assert_code(2);
    assert!(out.stderr.contains("OPENAI_API_KEY"), "{}", out.stderr);
    assert!(
        out.stderr.contains("start a local model server"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "no local model server answered at 127.0.0.1:{port}"
        )),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"));
    let global = cmd.config_home().join("buddy").join("buddy.toml");
    let text = std::fs::read_to_string(&global).expect("global config created");
    assert!(text.contains("[models.ollama]"));
    // Created once, never overwritten.
    std::fs::write(&global, "# mine\n").unwrap();
    let again = BuddyCmd::new().args(["exec", "hello"]);
    drop(again);
    cmd.run();
    assert_eq!(std::fs::read_to_string(&global).unwrap(), "# mine\n");
}

#[test]
fn stream_dropped_after_text_is_a_clear_error() {
    let full = Reply::text("partial answer that never finishes").stream_chunks();
    let mut chunks: Vec<SseChunk> = full.into_iter().take(2).collect();
    chunks.push(SseChunk::disconnect());
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "x"]).run();
    out.assert_code(1);
    assert!(out.stderr.contains("interrupted"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[test]
fn stream_dropped_before_any_data_is_retried() {
    let p = FakeProvider::start(vec![
        Reply::sse(vec![
            SseChunk::comment("keep-alive"),
            SseChunk::disconnect(),
        ]),
        Reply::text("second try"),
    ]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "x"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "second try\n");
}

#[test]
fn crlf_split_stream_without_done_still_parses() {
    let chunks = Reply::text("split across reads")
        .without_done()
        .stream_chunks();
    let bytes: Vec<u8> =
        SseChunk::concat(&chunks.into_iter().map(|c| c.crlf()).collect::<Vec<_>>());
    let p = FakeProvider::start(vec![Reply::sse(SseChunk::split_every(&bytes, 7))]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "x"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "split across reads\n");
}

#[test]
fn ctrl_c_cancels_a_running_tool_with_exit_130() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "slow",
            "run_shell",
            json!({"command": "touch started; sleep 30"}),
        )]),
        Reply::text("never"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "go"]);
    let child = cmd
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = cmd.work_dir().join("started");
    support::wait::wait_for("the tool to start", Duration::from_secs(20), || {
        started.exists()
    });
    let t0 = Instant::now();
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "cancellation must not wait for the tool"
    );
    assert!(out.stdout.is_empty());
    assert_eq!(p.chat_requests().len(), 1);
}

#[test]
fn context_warning_at_eighty_percent() {
    let p = FakeProvider::start(vec![Reply::text("a"), Reply::text("b")]);
    // A tiny window: the system prompt and tool schemas alone fill most of it.
    let small = fake_config(&p).replace(
        "model = \"fake-model\"",
        "model = \"fake-model\"\ncontext_limit = 600",
    );
    let out = BuddyCmd::new().config(small).args(["exec", "x"]).run();
    out.assert_success();
    assert!(out.stderr.contains("warning: context is"), "{}", out.stderr);
    let roomy = fake_config(&p).replace(
        "model = \"fake-model\"",
        "model = \"fake-model\"\ncontext_limit = 1000000",
    );
    let out = BuddyCmd::new().config(roomy).args(["exec", "x"]).run();
    out.assert_success();
    assert!(!out.stderr.contains("context is"), "{}", out.stderr);
}

/// The context estimate counts the tool definitions as they are sent,
/// schemas and all, not only their descriptions: a window the definitions
/// alone fill past 80% warns, though their descriptions would fill less.
#[test]
fn the_context_estimate_counts_the_tools_schemas() {
    // What a request sends, measured on a roomy window.
    let p = FakeProvider::start(vec![Reply::text("a"), Reply::text("b")]);
    let roomy = fake_config(&p).replace(
        "model = \"fake-model\"",
        "model = \"fake-model\"\ncontext_limit = 1000000",
    );
    BuddyCmd::new()
        .config(roomy)
        .args(["exec", "x"])
        .run()
        .assert_success();
    let reqs = p.chat_requests();
    let sent = reqs[0].json();
    let tools = &sent["tools"];
    let schema_tokens = tools.to_string().len() as u64 / 4;
    let description_tokens: u64 = tools
        .as_array()
        .expect("tools")
        .iter()
        .map(|d| d["function"]["description"].as_str().unwrap_or("").len() as u64 / 4 + 32)
        .sum();
    let message_tokens: u64 = sent["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| (m["content"].as_str().unwrap_or("").len() as u64 + 16) / 4 + 1)
        .sum();
    // The definitions alone are 90% of this window; the messages with the
    // descriptions only (and the old allowance per tool) stay under the 80%
    // that warns, so only counting the schemas makes the warning.
    let limit = schema_tokens * 10 / 9;
    let without_schemas = message_tokens + description_tokens;
    assert!(
        without_schemas * 10 < limit * 8,
        "the test needs schemas that outweigh the rest: {without_schemas} of {limit}"
    );
    let tight = fake_config(&p)
        .replace(
            "model = \"fake-model\"",
            &format!("model = \"fake-model\"\ncontext_limit = {limit}"),
        )
        .replace("[agent]\n", "[agent]\nauto_compact = false\n");
    let out = BuddyCmd::new().config(tight).args(["exec", "x"]).run();
    out.assert_success();
    assert!(out.stderr.contains("warning: context is"), "{}", out.stderr);
}

#[test]
fn api_key_never_appears_in_output_even_on_errors() {
    let p = FakeProvider::start(vec![Reply::json(
        401,
        json!({"error": {"message": "invalid key"}}),
    )]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "x"]).run();
    out.assert_code(1);
    assert!(!out.stdout.contains("sk-fake") && !out.stderr.contains("sk-fake"));
    // Refused connection: the message names the URL, not the key.
    let out = BuddyCmd::new()
        .config(format!(
            "{}\n[network]\nmax_retries = 0\n",
            fake_config(&p).replace(&p.base_url(), "http://127.0.0.1:9/v1")
        ))
        .args(["exec", "x"])
        .env("BUDDY_API_KEY", "sk-secret-env")
        .run();
    out.assert_code(1);
    assert!(out.stderr.contains("127.0.0.1:9"), "{}", out.stderr);
    assert!(!out.stderr.contains("sk-secret-env"));
}

#[test]
fn usage_is_shown_when_asked() {
    let p = FakeProvider::start(vec![Reply::text("a").with_usage(123, 45)]);
    let cfg = format!("{}\n[display]\nshow_tokens = true\n", fake_config(&p));
    let out = BuddyCmd::new().config(cfg).args(["exec", "x"]).run();
    out.assert_success();
    assert!(
        out.stderr
            .contains("tokens: prompt 123, completion 45, session 168"),
        "{}",
        out.stderr
    );
}

#[test]
fn malformed_model_output_is_a_one_line_error() {
    let p = FakeProvider::start(vec![
        Reply::sse(vec![SseChunk::data_text("{not json"), SseChunk::done()]),
        Reply::json(200, json!({"object": "chat.completion", "choices": []})),
    ]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "x"]).run();
    out.assert_code(1);
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: invalid response from model server: malformed stream chunk"),
        "{last}"
    );

    let cfg = fake_config(&p).replace(
        "model = \"fake-model\"",
        "model = \"fake-model\"\nstream = false",
    );
    let out = BuddyCmd::new().config(cfg).args(["exec", "x"]).run();
    out.assert_code(1);
    assert!(out.stderr.contains("no choices"), "{}", out.stderr);
}

#[test]
fn an_answer_cut_at_the_output_limit_is_kept_with_a_warning_in_every_protocol() {
    for (api, reason) in [
        ("completions", "finish_reason: length"),
        ("responses", "incomplete: max_output_tokens"),
        ("messages", "stop_reason: max_tokens"),
    ] {
        for stream in [true, false] {
            let p = FakeProvider::start(vec![
                Reply::text("the first half of").with_finish_reason("length")
            ]);
            let config = format!(
                "[agent]\nmodel = \"p\"\n\n[models.p]\napi_base_url = \"{}\"\napi = \"{api}\"\nmodel = \"fake-model\"\nstream = {stream}\n",
                p.base_url()
            );
            let out = BuddyCmd::new().config(config).args(["exec", "go"]).run();
            out.assert_success();
            assert_eq!(out.stdout, "the first half of\n", "{api} stream={stream}");
            assert!(
                out.stderr.contains("output limit") && out.stderr.contains(reason),
                "{api} stream={stream}: {}",
                out.stderr
            );
        }
    }
    // A normal end warns of nothing.
    let p = FakeProvider::start(vec![Reply::text("complete")]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "go"]).run();
    out.assert_success();
    assert!(!out.stderr.contains("output limit"), "{}", out.stderr);
}

#[test]
fn an_explicit_config_file_is_the_only_config_touched() {
    let p = FakeProvider::start(vec![Reply::text("from the explicit config")]);
    let cmd = BuddyCmd::new();
    let path = cmd.work_dir().join("elsewhere.toml");
    std::fs::write(&path, fake_config(&p)).unwrap();
    let out = cmd.rerun(["--config", path.to_str().unwrap(), "exec", "hi"]);
    out.assert_success();
    assert_eq!(out.stdout, "from the explicit config\n");
    assert!(
        !out.stderr.contains("created a default config"),
        "{}",
        out.stderr
    );
    let global = cmd.config_home().join("buddy");
    assert!(
        !global.join("buddy.toml").exists(),
        "the global config was written"
    );
}

#[test]
fn commands_never_see_buddys_credentials() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "env",
            "run_shell",
            json!({"command": "env; echo marker=$MARKER_VAR"}),
        )]),
        Reply::text("done"),
    ]);
    let cfg = format!(
        "[agent]\nmodel = \"fake\"\n\n[models.fake]\napi_base_url = \"{}\"\nmodel = \"fake-model\"\napi_key_env = \"MY_PROFILE_KEY\"\n\n[tools]\nshell_confirm = false\nhide_env = [\"EXTRA_SECRET\"]\n",
        p.base_url()
    );
    let out = BuddyCmd::new()
        .config(cfg)
        .env("MY_PROFILE_KEY", "sk-profile-secret-1")
        .env("OPENAI_API_KEY", "sk-openai-secret-2")
        .env("EXTRA_SECRET", "extra-secret-3")
        .env("MARKER_VAR", "visible")
        .args(["exec", "show the env"])
        .run();
    out.assert_success();
    let reqs = p.chat_requests();
    // The key still authenticates buddy's own requests…
    assert_eq!(
        reqs[0].header("authorization").as_deref(),
        Some("Bearer sk-profile-secret-1")
    );
    // …but the command saw none of the credentials, and the rest of the environment.
    let result = tool_result(&reqs[1], "env");
    assert!(result.contains("marker=visible"), "{result}");
    for secret in [
        "sk-profile-secret-1",
        "sk-openai-secret-2",
        "extra-secret-3",
    ] {
        assert!(
            !result.contains(secret),
            "{secret} reached the command: {result}"
        );
    }
}

/// Escape sequences from the model and from a command's output reach stderr
/// made visible, while a pipe still gets the answer byte for byte.
#[test]
fn escape_sequences_reach_stderr_visible_and_stdout_pipe_exact() {
    let answer = "done \u{1b}]0;pwned\u{7} here";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "c1",
            "run_shell",
            json!({ "command": "printf 'out \\033[2J\\033[999D gone\\n'" }),
        )])
        .with_reasoning("reasoning_content", "think \u{1b}[31mred"),
        Reply::text(answer),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "go"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, format!("{answer}\n"));
    assert!(
        !out.stderr.contains('\u{1b}'),
        "raw escape on stderr: {:?}",
        out.stderr
    );
    assert!(out.stderr.contains("␛[2J␛[999D gone"), "{}", out.stderr);
    assert!(out.stderr.contains("think ␛[31mred"), "{}", out.stderr);
}

/// Tool calls read as what they do, not as JSON: the command itself, the
/// path written; results as their first lines and a count of the rest, a
/// failed command with its exit status.
#[test]
fn tool_calls_and_results_read_as_a_person_would() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            call("c1", "run_shell", json!({ "command": "seq 1 10" })),
            call(
                "c2",
                "run_shell",
                json!({ "command": "echo oops >&2; exit 3" }),
            ),
            call(
                "c3",
                "write_file",
                json!({ "path": "notes.txt", "content": "one\ntwo\n" }),
            ),
        ]),
        Reply::text("done"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "--dangerously-auto-approve", "go"])
        .run();
    out.assert_success();
    let err = &out.stderr;
    assert!(err.contains("▶ $ seq 1 10"), "{err}");
    assert!(
        err.contains("  ← 1\n    2\n    3\n    4\n    … +6 more lines"),
        "{err}"
    );
    assert!(err.contains("▶ $ echo oops >&2; exit 3"), "{err}");
    assert!(err.contains("  ← oops\n  ✗ run_shell: exit 3"), "{err}");
    assert!(err.contains("▶ write notes.txt (2 lines, 8 B)"), "{err}");
    assert!(!err.contains("{\"command\""), "raw JSON shown: {err}");
}

#[test]
fn config_from_dev_zero_is_one_line_error_at_once() {
    let cmd = BuddyCmd::new()
        .args(["--config", "/dev/zero", "exec", "hi"])
        .timeout(Duration::from_secs(20));
    let out = cmd.run();
    out.assert_code(2);
    assert_eq!(
        out.stderr.trim(),
        "error: config error: cannot read /dev/zero: it is a character device, not a regular file"
    );
}

#[test]
fn stdin_from_dev_zero_is_refused_past_the_cap() {
    let p = FakeProvider::start_repeating(vec![Reply::text("never")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let mut child = cmd
        .command_with(&["exec".into(), "-".into()])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Guard: before the fix buddy read /dev/zero until memory ran out.
    if support::wait::poll_until(Duration::from_secs(30), || child.try_wait().unwrap()).is_none() {
        let _ = child.kill();
        panic!("buddy exec kept reading /dev/zero");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the prompt on stdin is larger than 8 MiB"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert_eq!(p.request_count(), 0);
}

/// What the model says before it calls a tool is not the answer: with stdout
/// a pipe it goes to stderr, ahead of the call it introduces, and the pipe
/// gets the final answer alone.
#[test]
fn narration_before_tool_calls_goes_to_stderr_on_a_pipe() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "c1",
            "run_shell",
            json!({"command": "echo step-output"}),
        )])
        .with_text("Let me look at the files first.\x1b[2J"),
        Reply::text("the final answer"),
    ]);
    let out = BuddyCmd::new()
        .config(config_no_confirm(&p, ""))
        .args(["exec", "work"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "the final answer\n");
    let said = out
        .stderr
        .find("Let me look at the files first.")
        .unwrap_or_else(|| panic!("no narration on stderr: {}", out.stderr));
    let call_line = out
        .stderr
        .find("echo step-output")
        .unwrap_or_else(|| panic!("no tool call on stderr: {}", out.stderr));
    assert!(said < call_line, "stderr: {}", out.stderr);
    assert!(!out.stderr.contains("the final answer"), "{}", out.stderr);
    // Shown, never interpreted: the model's control characters are made visible.
    assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);
}

// ------------------------------------------------- a context that fills up

use support::fake_provider::{huge_prompt, LLAMA_OVERFLOW};

/// A prompt the server refuses as too long fails with one line, and does
/// not stick: the next prompt, resumed from the session, is sent without it
/// and answered. The refused prompt stays in the session file.
#[test]
fn a_prompt_too_long_for_the_window_fails_once_and_the_next_is_answered() {
    let p = FakeProvider::start(vec![
        Reply::text("first answer"),
        Reply::status(400, LLAMA_OVERFLOW),
        Reply::text("answered again"),
    ]);
    let cmd = BuddyCmd::new().config(fake_config(&p));
    cmd.rerun(["exec", "a short first question"])
        .assert_success();
    let huge = huge_prompt();
    let out = cmd.rerun(["exec", "--resume", "last", &huge]);
    out.assert_code(1);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("does not fit in the model's context window of 4096 tokens"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("set aside"), "{}", out.stderr);
    let out = cmd.rerun(["exec", "--resume", "last", "a small follow-up"]);
    out.assert_success();
    assert_eq!(out.stdout, "answered again\n");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 3);
    let sent = reqs[2].body_text();
    assert!(
        !sent.contains("HUGE-PROMPT"),
        "the refused prompt was sent again"
    );
    assert!(sent.contains("a short first question") && sent.contains("first answer"));
    // Kept in the record, behind the mark.
    let dir = cmd.work_dir().join(".buddyx/sessions");
    let all: String = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(all.contains("HUGE-PROMPT"));
}

/// A tool's output larger than the room the window has left is cut before
/// it is sent, with one line saying so, instead of overflowing the request.
#[test]
fn a_tool_result_too_big_for_the_window_is_cut_to_fit_with_a_line() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "big",
            "run_shell",
            json!({"command": "yes 0123456789abcdef | head -c 20000"}),
        )]),
        Reply::text("done"),
    ]);
    // A window that holds the tool definitions (about 14 KB with every
    // built-in tool) with room to spare, but not the 20,000-byte output.
    let cfg = config_no_confirm(&p, "").replace("[tools]", "context_limit = 6000\n[tools]");
    let cmd = BuddyCmd::new().config(cfg);
    let out = cmd.rerun(["exec", "print a lot"]);
    out.assert_success();
    assert!(
        out.stderr.contains(
            "the output of run_shell cut to fit the model's context window (6000 tokens)"
        ),
        "{}",
        out.stderr
    );
    let result = tool_result(&p.chat_requests()[1], "big");
    assert!(result.contains("cut here"), "{result}");
    // What was sent fits: under the window's 6000 tokens (4 chars each).
    let sent = p.chat_requests()[1].body_text().len();
    assert!(sent < 6000 * 4, "sent {sent} bytes");
}

#[test]
fn the_output_limit_warning_names_the_limit_that_was_hit() {
    // (api, max_tokens line, what the warning must name)
    for (api, cap, named) in [
        (
            "completions",
            "max_tokens = 100\n",
            "its output limit, max_tokens = 100 from the profile",
        ),
        ("completions", "", "the server's own output limit"),
        ("responses", "", "the server's own output limit"),
        (
            "messages",
            "",
            "buddy's default output limit of 8192 tokens",
        ),
        (
            "messages",
            "max_tokens = 50\n",
            "max_tokens = 50 from the profile",
        ),
    ] {
        let p = FakeProvider::start(vec![Reply::text("half of it").with_finish_reason("length")]);
        let config = format!(
            "[agent]\nmodel = \"p\"\n\n[models.p]\napi_base_url = \"{}\"\napi = \"{api}\"\nmodel = \"fake-model\"\n{cap}",
            p.base_url()
        );
        let out = BuddyCmd::new().config(config).args(["exec", "go"]).run();
        out.assert_success();
        assert!(out.stderr.contains(named), "{api} {cap:?}: {}", out.stderr);
        // Raising max_tokens is advice only where buddy sent it.
        assert_eq!(
            out.stderr.contains("raise max_tokens"),
            !cap.is_empty(),
            "{api} {cap:?}: {}",
            out.stderr
        );
        if cap.is_empty() && api != "messages" {
            assert!(out.stderr.contains("--n-predict"), "{}", out.stderr);
        }
    }
}

/// `--base-url` alone names a server the profile's model id means nothing
/// to: buddy asks it for its models and sends the first, saying so; `-m`
/// still picks.
#[test]
fn a_bare_base_url_sends_the_first_model_its_server_lists() {
    let p = FakeProvider::start(vec![Reply::text("one"), Reply::text("two")])
        .with_models(&["served-model", "other-model"]);
    // No config of the test's: the default template, whose model is OpenAI's.
    let cmd = BuddyCmd::new();
    let url = p.base_url();
    let out = cmd.rerun(["exec", "--base-url", url.as_str(), "hi"]);
    out.assert_success();
    assert_eq!(p.chat_requests()[0].model(), Some("served-model"));
    assert!(out.stderr.contains("served-model"), "{}", out.stderr);
    let out = cmd.rerun([
        "exec",
        "--base-url",
        url.as_str(),
        "-m",
        "other-model",
        "hi",
    ]);
    out.assert_success();
    assert_eq!(p.chat_requests()[1].model(), Some("other-model"));
}
