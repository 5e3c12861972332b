//! MCP servers' tools through the built binary, against real servers
//! (server-everything from npm over stdio and Streamable HTTP, and a Python
//! server written with the `mcp` package: `tests/support/mcp.rs`) and the
//! fake provider: the names the model is offered, a call and its result on
//! the wire, a server that crashes, hangs, floods or fails, approvals, and
//! project configs that may not add servers.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{tool_result, FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::mcp;
use support::{fake_config, BuddyCmd};

fn call(id: &str, tool: &str, args: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, tool, args.to_string())
}

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    req.json()["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|d| d["function"]["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// exec with everything approved, `servers` appended to the fake config.
fn exec(p: &FakeProvider, servers: &str, prompt: &str) -> (BuddyCmd, support::Output) {
    let cmd = BuddyCmd::new()
        .config(format!("{}{servers}", fake_config(p)))
        .args(["exec", "--dangerously-auto-approve", prompt]);
    let out = cmd.run_detached();
    (cmd, out)
}

#[test]
fn server_everything_over_stdio_is_offered_by_prefixed_names_and_echoes() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "c1",
            "mcp__everything__echo",
            json!({"message": "hello from buddy"}),
        )]),
        Reply::text("done"),
    ]);
    let (_cmd, out) = exec(&p, &mcp::everything_stdio("everything"), "echo it");
    out.assert_success();
    assert_eq!(out.stdout.trim(), "done");
    let reqs = p.chat_requests();
    let names = tool_names(&reqs[0]);
    assert!(
        names.contains(&"mcp__everything__echo".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"run_shell".to_string()), "{names:?}");
    assert!(names.iter().all(|n| n.len() <= 64));
    let result = tool_result(&reqs[1], "c1");
    assert!(result.contains("hello from buddy"), "{result}");
}

#[test]
fn server_everything_over_streamable_http_answers_a_call() {
    let server = mcp::EverythingHttp::start();
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call(
            "c1",
            "mcp__web__echo",
            json!({"message": "over http"}),
        )]),
        Reply::text("done"),
    ]);
    let servers = format!("\n[mcp_servers.web]\nurl = {}\n", mcp::quoted(&server.url));
    let (_cmd, out) = exec(&p, &servers, "echo it");
    out.assert_success();
    let reqs = p.chat_requests();
    assert!(tool_names(&reqs[0]).contains(&"mcp__web__echo".to_string()));
    let result = tool_result(&reqs[1], "c1");
    assert!(result.contains("over http"), "{result}");
}

#[test]
fn a_python_server_gets_its_env_and_a_crash_is_an_error_then_a_restart() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("c1", "mcp__py__crash", json!({}))]),
        Reply::tool_calls(vec![call(
            "c2",
            "mcp__py__peek",
            json!({"name": "TEST_SECRET"}),
        )]),
        Reply::text("done"),
    ]);
    let servers = mcp::python_server("py", "env = { TEST_SECRET = \"hunter2-very-secret\" }");
    let (cmd, out) = exec(&p, &servers, "crash it");
    out.assert_success();
    let reqs = p.chat_requests();
    let crashed = tool_result(&reqs[1], "c1");
    assert!(crashed.starts_with("error:"), "{crashed}");
    assert!(crashed.contains("the MCP server `py`"), "{crashed}");
    assert!(
        crashed.contains("started again on the next call"),
        "{crashed}"
    );
    // Started again, with its environment; the value is a secret.
    let peeked = tool_result(&reqs[2], "c2");
    assert_eq!(peeked, "[REDACTED]");
    let sessions = cmd.work_dir().join(".buddyx/sessions");
    for entry in std::fs::read_dir(&sessions).expect("sessions") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        assert!(!text.contains("hunter2-very-secret"));
    }
}

#[test]
fn a_hanging_tool_is_cut_at_its_timeout_and_a_failing_one_is_an_error() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            call("c1", "mcp__py__hang", json!({})),
            call("c2", "mcp__py__fail", json!({})),
        ]),
        Reply::text("done"),
    ]);
    let servers = mcp::python_server("py", "tool_timeout_secs = 2");
    let started = std::time::Instant::now();
    let (_cmd, out) = exec(&p, &servers, "hang");
    out.assert_success();
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let reqs = p.chat_requests();
    let hung = tool_result(&reqs[1], "c1");
    assert!(hung.contains("did not answer `hang` within 2 s"), "{hung}");
    let failed = tool_result(&reqs[1], "c2");
    assert!(failed.starts_with("error:"), "{failed}");
    assert!(failed.contains("the fail tool failed as asked"), "{failed}");
}

#[test]
fn a_server_sending_50_mb_is_cut_off_and_a_large_result_truncated() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("c1", "mcp__py__flood", json!({"megabytes": 50}))]),
        Reply::tool_calls(vec![call("c2", "mcp__py__flood", json!({"megabytes": 1}))]),
        Reply::text("done"),
    ]);
    let (_cmd, out) = exec(&p, &mcp::python_server("py", ""), "flood");
    out.assert_success();
    let reqs = p.chat_requests();
    let flood = tool_result(&reqs[1], "c1");
    assert!(
        flood.contains("over 16 MiB"),
        "{}",
        &flood[..flood.len().min(500)]
    );
    let big = tool_result(&reqs[2], "c2");
    assert!(big.len() < 40_000, "{}", big.len());
    assert!(big.contains("[output truncated: kept 30000 of 1048576 characters]"));
}

#[test]
fn mcp_calls_ask_like_any_tool_and_read_only_ones_run_only_when_trusted() {
    let p = FakeProvider::start_repeating(vec![
        Reply::tool_calls(vec![
            call("c1", "mcp__py__shout", json!({"text": "hi"})),
            call("c2", "mcp__py__peek", json!({"name": "HOME"})),
            call("c3", "mcp__ro__peek", json!({"name": "HOME"})),
        ]),
        Reply::text("done"),
    ]);
    let servers = format!(
        "{}{}",
        mcp::python_server("py", ""),
        mcp::python_server("ro", "trust_read_only = true")
    );
    // No terminal and no --dangerously-auto-approve: nobody can approve.
    let cmd = BuddyCmd::new()
        .config(format!("{}{servers}", fake_config(&p)))
        .args(["exec", "shout"]);
    cmd.run_detached().assert_success();
    let reqs = p.chat_requests();
    assert!(tool_result(&reqs[1], "c1").starts_with("not run:"));
    assert!(tool_result(&reqs[1], "c2").starts_with("not run:"));
    let ran = tool_result(&reqs[1], "c3");
    assert!(
        !ran.starts_with("not run:") && !ran.starts_with("error:"),
        "{ran}"
    );
}

#[test]
fn an_untrusted_project_config_or_mcp_json_adds_no_server() {
    let p = FakeProvider::start_repeating(vec![Reply::text("done")]);
    let cmd = BuddyCmd::new()
        .project_config(format!(
            "{}{}",
            fake_config(&p),
            mcp::python_server("proj", "")
        ))
        .args(["exec", "hi"]);
    let out = cmd.run_detached();
    out.assert_success();
    assert!(out.stderr.contains("mcp_servers.proj"), "{}", out.stderr);
    assert!(!tool_names(&p.chat_requests()[0])
        .iter()
        .any(|n| n.starts_with("mcp__")));

    let p = FakeProvider::start_repeating(vec![Reply::text("done")]);
    let cmd = BuddyCmd::new().config_for(&p).args(["exec", "hi"]);
    let json = json!({"mcpServers": {"claude": {
        "command": mcp::python().display().to_string(),
        "args": [mcp::test_server().display().to_string()]
    }}});
    std::fs::write(cmd.work_dir().join(".mcp.json"), json.to_string()).expect("write");
    let out = cmd.run_detached();
    out.assert_success();
    assert!(
        out.stderr.contains("buddy trust .mcp.json"),
        "{}",
        out.stderr
    );
    assert!(!tool_names(&p.chat_requests()[0])
        .iter()
        .any(|n| n.starts_with("mcp__")));
    // Trusted, the same file adds its server.
    cmd.rerun(["trust", ".mcp.json"]).assert_success();
    let out = cmd.rerun_detached(["exec", "hi"]);
    out.assert_success();
    let names = tool_names(&p.chat_requests()[1]);
    assert!(
        names.contains(&"mcp__claude__shout".to_string()),
        "{names:?}"
    );
}

#[test]
fn a_server_that_cannot_start_leaves_exec_answering() {
    let p = FakeProvider::start(vec![Reply::text("still here")]);
    let servers = "\n[mcp_servers.ghost]\ncommand = \"/nonexistent/mcp-server\"\n\
                   [mcp_servers.slow]\ncommand = \"sleep\"\nargs = [\"60\"]\nstartup_timeout_secs = 1\n";
    let started = std::time::Instant::now();
    let (_cmd, out) = exec(&p, servers, "hi");
    out.assert_success();
    assert_eq!(out.stdout.trim(), "still here");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(!tool_names(&p.chat_requests()[0])
        .iter()
        .any(|n| n.starts_with("mcp__")));
}

#[test]
fn the_repl_prompt_does_not_wait_for_a_slow_server_and_mcp_shows_each_state() {
    let p = FakeProvider::start_repeating(vec![Reply::text("done")]);
    let servers = format!(
        "{}\n[mcp_servers.slow]\ncommand = \"sleep\"\nargs = [\"60\"]\nstartup_timeout_secs = 30\n",
        mcp::python_server("py", "")
    );
    let cmd = BuddyCmd::new().config(format!("{}{servers}", fake_config(&p)));
    let t = support::tmux::Tmux::start(&cmd, &["--no-tmux"]);
    t.wait_for("the prompt", |s| s.lines().any(|l| l.starts_with('>')));
    // The slow server needs 30 s to fail; the prompt is already here.
    t.line("/mcp");
    t.wait_text("slow  starting");
    // Asked again every half second until the Python server is ready.
    let asked = std::cell::Cell::new(std::time::Instant::now());
    t.wait_for("py ready with its tools", |s| {
        // The first tool: the line wraps at the pane's 100 columns.
        if s.contains("py  ready") && s.contains("tools: mcp__py__crash") {
            return true;
        }
        if asked.get().elapsed() > std::time::Duration::from_millis(500) {
            asked.set(std::time::Instant::now());
            t.line("/mcp");
        }
        false
    });
}

#[test]
fn hooks_see_mcp_calls_like_any_tool_and_a_pre_tool_use_hook_blocks_one() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            call(
                "c1",
                "mcp__everything__echo",
                json!({"message": "blocked?"}),
            ),
            call("c2", "mcp__everything__get-sum", json!({"a": 2, "b": 3})),
        ]),
        Reply::text("done"),
    ]);
    let hooks = "\n[[hooks.PreToolUse]]\nmatcher = \"mcp__everything__echo\"\n\
                 command = 'echo \"no echo today\" >&2; exit 2'\n\n\
                 [[hooks.PostToolUse]]\nmatcher = \"mcp__.*\"\n\
                 command = 'cat > \"$BUDDY_PROJECT_DIR/post.json\"'\n";
    let servers = format!("{}{hooks}", mcp::everything_stdio("everything"));
    let (cmd, out) = exec(&p, &servers, "echo and add");
    out.assert_success();
    let reqs = p.chat_requests();
    let blocked = tool_result(&reqs[1], "c1");
    assert!(blocked.contains("no echo today"), "{blocked}");
    assert!(
        !blocked.contains("blocked?"),
        "the blocked call ran: {blocked}"
    );
    let sum = tool_result(&reqs[1], "c2");
    assert!(sum.contains('5'), "{sum}");
    let post: Value = serde_json::from_str(
        &std::fs::read_to_string(cmd.work_dir().join("post.json")).expect("PostToolUse ran"),
    )
    .expect("the hook's input is JSON");
    assert_eq!(post["tool_name"], "mcp__everything__get-sum");
    assert_eq!(post["tool_input"]["a"], 2);
    assert!(
        post["tool_response"]["text"]
            .as_str()
            .is_some_and(|t| t.contains('5')),
        "{post}"
    );
}

/// Asks `/mcp` every half second until its report (wrapped lines joined)
/// contains `text`.
fn wait_mcp_report(t: &support::tmux::Tmux, text: &str) {
    let asked = std::cell::Cell::new(std::time::Instant::now());
    t.line("/mcp");
    t.wait_for(text, |s| {
        if s.replace('\n', "").contains(text) {
            return true;
        }
        if asked.get().elapsed() > std::time::Duration::from_millis(500) {
            asked.set(std::time::Instant::now());
            t.line("/mcp");
        }
        false
    });
}

#[test]
fn resources_are_mentions_prompts_are_slash_commands_and_list_changed_refreshes() {
    let p = FakeProvider::start(vec![
        Reply::text("weather noted"),
        Reply::text("doc read"),
        Reply::tool_calls(vec![call(
            "c1",
            "mcp__everything__gzip-file-as-resource",
            json!({"name": "note.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"}),
        )]),
        Reply::text("zipped"),
    ]);
    let cmd = BuddyCmd::new().config(format!(
        "{}{}",
        fake_config(&p),
        mcp::everything_stdio("everything")
    ));
    let t = support::tmux::Tmux::start(&cmd, &["--no-tmux"]);
    t.wait_for("the prompt", |s| s.lines().any(|l| l.starts_with('>')));
    wait_mcp_report(&t, "/everything:args-prompt");

    // A prompt with its arguments, one by position and one by name.
    t.line("/everything:args-prompt Paris state=IDF");
    t.wait_text("weather noted");
    let body = p.chat_requests()[0].body_text();
    assert!(body.contains("What's weather in Paris, IDF?"), "{body}");

    // A resource mention: its text goes with the prompt, which goes as typed.
    let doc = std::fs::read_to_string(
        mcp::everything()
            .parent()
            .and_then(|bin| bin.parent())
            .expect("node_modules")
            .join("@modelcontextprotocol/server-everything/dist/docs/architecture.md"),
    )
    .expect("server-everything's architecture.md");
    let line = doc
        .lines()
        .find(|l| {
            l.len() > 30
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || " .,-()".contains(c))
        })
        .expect("a plain line in the document");
    t.line("summarise @everything:demo://resource/static/document/architecture.md please");
    t.wait_text("doc read");
    let body = p.chat_requests()[1].body_text();
    assert!(body.contains(line), "{line:?} not in {body}");
    assert!(body
        .contains("summarise @everything:demo://resource/static/document/architecture.md please"));

    // A tool that registers a resource: the server says the list changed,
    // and /mcp shows the new one without a restart.
    t.line("/approve all");
    t.line("zip it");
    t.wait_text("zipped");
    wait_mcp_report(&t, "@everything:demo://resource/session/note.gz");
}

/// `mcp add` on a config made from buddy.toml.example appends its table after
/// the whole file, so a commented key of an earlier table, uncommented later,
/// still lands in that table (it used to land in the new server's table).
#[test]
fn mcp_add_appends_after_the_example_configs_comments() {
    let cmd = BuddyCmd::new();
    let dir = cmd.config_home().join("buddy");
    std::fs::create_dir_all(&dir).expect("create the config dir");
    let path = dir.join("buddy.toml");
    let example = include_str!("../buddy.toml.example");
    std::fs::write(&path, example).expect("write the config");
    cmd.rerun(["mcp", "add", "echo", "--", "echo", "hi"])
        .assert_success();
    let text = std::fs::read_to_string(&path).expect("read the config");
    // The new table comes after everything that was there, comments included.
    let at = text.find("[mcp_servers.echo]").expect("the new table");
    assert!(
        text[..at].trim_end().ends_with(example.trim_end()),
        "the new table is not at the end:\n{text}"
    );
    // `tmux_session` is documented, commented out, under `[execution]`.
    let commented = "# tmux_session = \"buddy-work\"";
    assert!(text.contains(commented), "{text}");
    std::fs::write(
        &path,
        text.replacen(commented, "tmux_session = \"buddy-work\"", 1),
    )
    .expect("write the config");
    let out = cmd.rerun(["mcp", "list"]);
    out.assert_success();
    assert!(out.stdout.contains("echo"), "{}", out.stdout);
}

/// Past `[tools] tool_search_after_bytes` of servers' definitions, the model
/// gets the built-in tools whole and the servers' as one line each in
/// `tool_search`'s description; a search loads the full definition for the
/// next request, and the loaded tool is then called like any other.
#[test]
fn past_the_bound_server_tools_go_as_one_line_until_tool_search_loads_them() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("s1", "tool_search", json!({"query": "shout"}))]),
        Reply::tool_calls(vec![call("c1", "mcp__py__shout", json!({"text": "hi"}))]),
        Reply::text("done"),
    ]);
    let servers = format!(
        "\n[tools]\ntool_search_after_bytes = 200\n{}",
        mcp::python_server("py", "")
    );
    let (_cmd, out) = exec(&p, &servers, "shout hi");
    out.assert_success();
    assert_eq!(out.stdout.trim(), "done");
    let reqs = p.chat_requests();
    let definition = |req: &RecordedRequest, name: &str| -> Option<Value> {
        req.json()["tools"]
            .as_array()?
            .iter()
            .find(|d| d["function"]["name"] == name)
            .cloned()
    };
    // First request: built-ins whole, the server's tools only listed.
    let first = tool_names(&reqs[0]);
    assert!(first.contains(&"run_shell".to_string()), "{first:?}");
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__py__")),
        "{first:?}"
    );
    let search = definition(&reqs[0], "tool_search").expect("tool_search offered");
    let listing = search["function"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(listing.contains("- mcp__py__shout:"), "{listing}");
    assert!(listing.contains("- mcp__py__peek:"), "{listing}");
    let result = tool_result(&reqs[1], "s1");
    assert!(result.starts_with("Loaded 1 tool(s)"), "{result}");
    // Next request: shout whole (its schema), the rest still listed.
    let shout = definition(&reqs[1], "mcp__py__shout").expect("shout loaded");
    assert!(
        shout["function"]["parameters"]["properties"]["text"].is_object(),
        "{shout}"
    );
    assert!(definition(&reqs[1], "mcp__py__peek").is_none());
    let result = tool_result(&reqs[2], "c1");
    assert!(result.contains("HI"), "{result}");
}

#[test]
fn each_server_is_spoken_to_in_its_own_revision_and_mcp_call_calls_one_tool() {
    // server-everything has only `initialize` (2025-11-25); the Python
    // server answers `server/discover` (2026-07-28). Both over stdio.
    let servers = format!(
        "{}{}",
        mcp::everything_stdio("old"),
        mcp::python_server("new", "")
    );
    let cmd = BuddyCmd::new().config(servers);
    let out = cmd.rerun(["mcp", "get", "old"]);
    out.assert_success();
    assert!(
        out.stdout.contains("protocol: 2025-11-25\n"),
        "{}",
        out.stdout
    );
    let out = cmd.rerun(["mcp", "get", "new"]);
    out.assert_success();
    assert!(
        out.stdout.contains("protocol: 2026-07-28\n"),
        "{}",
        out.stdout
    );
    let out = cmd.rerun(["mcp", "call", "old", "echo", r#"{"message": "by hand"}"#]);
    out.assert_success();
    assert!(out.stdout.contains("by hand"), "{}", out.stdout);
    let out = cmd.rerun(["mcp", "call", "new", "shout", r#"{"text": "modern"}"#]);
    out.assert_success();
    assert!(out.stdout.contains("MODERN"), "{}", out.stdout);
    // A tool the server does not offer is refused, not sent.
    let out = cmd.rerun(["mcp", "call", "new", "nope"]);
    out.assert_code(1);
    assert!(
        out.stderr.contains("offers no tool `nope`"),
        "{}",
        out.stderr
    );
}
