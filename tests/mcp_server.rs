//! `buddy mcp-server` driven by a real MCP client (rmcp's, over the child's
//! stdin and stdout) with the scripted fake provider as the model: the
//! tools and their schemas, a turn with a tool call and progress, a session
//! continued, approvals by the caller's word, bad calls answered without
//! the server dying, and a cancelled call interrupting its run.

use crate::support;

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::calls::{call, result_of};
use support::fake_provider::{FakeProvider, Reply};
use support::BuddyCmd;

/// The client: records the progress messages the server sends.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut seen = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        seen.push(params.message.unwrap_or_default());
    }
}

/// A running `buddy mcp-server` and the client session with it.
struct Server {
    client: Client,
    service: RunningService<RoleClient, Client>,
    _child: tokio::process::Child,
    stderr: std::path::PathBuf,
}

impl Server {
    async fn start(cmd: &BuddyCmd) -> Server {
        let stderr = cmd.work_dir().join("..").join("server-stderr.txt");
        let log = std::fs::File::create(&stderr).expect("stderr file");
        let mut std_cmd = cmd.command_with(&["mcp-server".into()]);
        std_cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let mut child = tokio::process::Command::from(std_cmd)
            .kill_on_drop(true)
            .spawn()
            .expect("start buddy mcp-server");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let client = Client::default();
        let service = client
            .clone()
            .serve((stdout, stdin))
            .await
            .expect("MCP handshake with buddy mcp-server");
        Server {
            client,
            service,
            _child: child,
            stderr,
        }
    }

    async fn call(&self, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        tokio::time::timeout(Duration::from_secs(60), self.service.call_tool(params))
            .await
            .unwrap_or_else(|_| panic!("no answer to {tool} within 60 s; {}", self.log()))
    }

    /// A call that must succeed as a tool result (error or not).
    async fn result(&self, tool: &str, args: Value) -> CallToolResult {
        self.call(tool, args)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e}; {}", self.log()))
    }

    fn progress(&self) -> Vec<String> {
        self.client
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn log(&self) -> String {
        format!(
            "server stderr:\n{}",
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        )
    }
}

fn texts(r: &CallToolResult) -> Vec<String> {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn session_of(r: &CallToolResult) -> String {
    let s = r.structured_content.as_ref().expect("structured content");
    s["session_id"].as_str().expect("session_id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_client_runs_turns_continues_sessions_and_approvals_follow_the_caller() {
    let provider = FakeProvider::start(vec![
        call("c1", "run_shell", json!({"command": "ls"})),
        Reply::text("the listing is in"),
        Reply::text("second answer"),
        call("c2", "run_shell", json!({"command": "touch denied-marker"})),
        Reply::text("could not"),
        call(
            "c3",
            "run_shell",
            json!({"command": "touch allowed-marker"}),
        ),
        Reply::text("made it"),
    ]);
    let cmd = BuddyCmd::new().config_for(&provider);
    let server = Server::start(&cmd).await;

    // Both tools, with their input schemas.
    let tools = server.service.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["buddy", "buddy-reply"]);
    let schema = |i: usize| Value::Object((*tools[i].input_schema).clone());
    assert_eq!(schema(0)["required"], json!(["prompt"]));
    for p in ["prompt", "cwd", "model", "approval"] {
        assert!(schema(0)["properties"][p].is_object(), "buddy lacks {p}");
    }
    assert_eq!(schema(1)["required"], json!(["session_id", "prompt"]));

    // One turn with a read-only command: it ran, the answer came back,
    // progress was reported along the way.
    let first = server
        .result("buddy", json!({"prompt": "list the files"}))
        .await;
    assert_eq!(first.is_error, Some(false), "{:?}", texts(&first));
    assert_eq!(texts(&first)[0], "the listing is in");
    let session = session_of(&first);
    assert!(texts(&first)[1].contains(&session), "{:?}", texts(&first));
    let reqs = provider.chat_requests();
    assert!(
        result_of(&reqs, "c1").contains("buddy.toml"),
        "ls did not run: {}",
        result_of(&reqs, "c1")
    );
    let progress = server.progress();
    assert!(
        progress.iter().any(|m| m.starts_with("run_shell")),
        "no progress for the tool call: {progress:?}"
    );
    assert!(progress.iter().any(|m| m == "model turn 2"), "{progress:?}");

    // The session continues: the model sees the earlier exchange.
    let second = server
        .result(
            "buddy-reply",
            json!({"session_id": session, "prompt": "and then?"}),
        )
        .await;
    assert_eq!(texts(&second)[0], "second answer", "{:?}", texts(&second));
    assert_eq!(session_of(&second), session);
    let reqs = provider.chat_requests();
    let body = reqs[2].body_text();
    for earlier in ["list the files", "the listing is in", "and then?"] {
        assert!(body.contains(earlier), "history lacks {earlier:?}: {body}");
    }

    // By default a command that writes is denied, not run, and the model
    // is told why.
    let denied = server
        .result("buddy", json!({"prompt": "make a file"}))
        .await;
    assert_eq!(texts(&denied)[0], "could not");
    assert!(!cmd.work_dir().join("denied-marker").exists());
    let reqs = provider.chat_requests();
    assert!(
        result_of(&reqs, "c2").contains("read-only"),
        "{}",
        result_of(&reqs, "c2")
    );
    assert!(
        texts(&denied)
            .iter()
            .any(|t| t.contains("touch denied-marker")),
        "{:?}",
        texts(&denied)
    );
    assert_ne!(session_of(&denied), session, "a new session per buddy call");

    // With approval "full" the same kind of command runs.
    let full = server
        .result(
            "buddy",
            json!({"prompt": "make a file", "approval": "full"}),
        )
        .await;
    assert_eq!(texts(&full)[0], "made it", "{}", server.log());
    assert!(
        cmd.work_dir().join("allowed-marker").exists(),
        "not created: {}",
        server.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_get_one_clear_error_and_the_server_carries_on() {
    let provider = FakeProvider::start(vec![
        Reply::status(404, "no model fakr here"),
        Reply::status(500, "upstream broke"),
        Reply::text("still here"),
    ]);
    let config = format!(
        "{}\n[network]\nmax_retries = 0\n",
        support::fake_config(&provider)
    );
    let cmd = BuddyCmd::new().config(config);
    let server = Server::start(&cmd).await;

    let bad_cwd = server
        .result("buddy", json!({"prompt": "hi", "cwd": "/no/such/dir"}))
        .await;
    assert_eq!(bad_cwd.is_error, Some(true));
    let line = &texts(&bad_cwd)[0];
    assert!(
        line.contains("/no/such/dir") && line.contains("not a directory") && !line.contains('\n'),
        "{line}"
    );

    let bad_model = server
        .result("buddy", json!({"prompt": "hi", "model": "fakr"}))
        .await;
    // A model id the profile's server does not know: its error, one line.
    assert_eq!(bad_model.is_error, Some(true), "{:?}", texts(&bad_model));
    assert!(
        texts(&bad_model)[0].contains("404") && !texts(&bad_model)[0].contains('\n'),
        "{:?}",
        texts(&bad_model)
    );
    assert_eq!(provider.chat_requests()[0].model(), Some("fakr"));

    let unknown = server
        .reply_session_error(json!({"session_id": "nope", "prompt": "hi"}))
        .await;
    assert!(unknown.contains("nope"), "{unknown}");

    // Protocol errors: JSON-RPC errors, not results.
    for (tool, args) in [
        ("no-such-tool", json!({"prompt": "hi"})),
        ("buddy", json!({})),
        ("buddy", json!({"prompt": 3})),
        ("buddy", json!({"prompt": "hi", "approval": "sometimes"})),
        ("buddy-reply", json!({"prompt": "hi"})),
    ] {
        match server.call(tool, args.clone()).await {
            Err(ServiceError::McpError(e)) => {
                assert_eq!(
                    e.code,
                    rmcp::model::ErrorCode::INVALID_PARAMS,
                    "{tool} {args}"
                )
            }
            other => panic!("{tool} {args}: expected a JSON-RPC error, got {other:?}"),
        }
    }

    // A failed turn is an error result of one line.
    let failed = server.result("buddy", json!({"prompt": "hi"})).await;
    assert_eq!(failed.is_error, Some(true), "{:?}", texts(&failed));
    assert!(
        texts(&failed)[0].contains("500") && !texts(&failed)[0].contains('\n'),
        "{:?}",
        texts(&failed)
    );

    // And the server still works.
    let ok = server.result("buddy", json!({"prompt": "hi"})).await;
    assert_eq!(texts(&ok)[0], "still here", "{}", server.log());
}

impl Server {
    /// The error line of a `buddy-reply` that must fail as a tool result.
    async fn reply_session_error(&self, args: Value) -> String {
        let r = self.result("buddy-reply", args).await;
        assert_eq!(r.is_error, Some(true), "{:?}", texts(&r));
        texts(&r).join("\n")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_interrupts_its_run() {
    let provider = FakeProvider::start(vec![
        Reply::text("too late").delay(Duration::from_secs(40)),
        Reply::text("next one"),
    ]);
    let cmd = BuddyCmd::new().config_for(&provider);
    let server = Server::start(&cmd).await;
    let args = json!({"prompt": "take your time"});
    let Value::Object(args) = args else {
        unreachable!()
    };
    let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::Request::new(
        CallToolRequestParams::new("buddy").with_arguments(args),
    ));
    let handle = server
        .service
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await
        .expect("send");
    // The model has the request: the run is under way.
    tokio::task::block_in_place(|| provider.wait_for_requests(1, Duration::from_secs(30)));
    // notifications/cancelled for the request.
    handle
        .cancel(Some("changed my mind".into()))
        .await
        .expect("cancel");
    // The next call is answered long before the first reply would have
    // come: the first run was interrupted, not waited for.
    let started = Instant::now();
    let next = server.result("buddy", json!({"prompt": "now"})).await;
    assert_eq!(texts(&next)[0], "next one", "{}", server.log());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

/// A caller with approval "full" cannot make a filesystem root, or a
/// directory holding buddy's own config, the workspace its writes are
/// confined to; read-only calls there still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_call_is_refused_a_root_or_a_directory_holding_buddys_config() {
    let provider = FakeProvider::start(vec![Reply::text("looked around")]);
    let cmd = BuddyCmd::new().config(support::fake_config(&provider));
    // The user's own config, which a call elsewhere uses.
    std::fs::create_dir_all(cmd.config_home().join("buddy")).unwrap();
    std::fs::write(
        cmd.config_home().join("buddy/buddy.toml"),
        support::fake_config(&provider),
    )
    .unwrap();
    let server = Server::start(&cmd).await;
    let holder = cmd.config_home().display().to_string();
    for cwd in ["/", holder.as_str()] {
        let r = server
            .result(
                "buddy",
                json!({"prompt": "tidy up", "cwd": cwd, "approval": "full"}),
            )
            .await;
        assert_eq!(r.is_error, Some(true), "{:?}", texts(&r));
        let line = &texts(&r)[0];
        assert!(
            line.contains("--allow-any-cwd") && !line.contains('\n'),
            "{line}"
        );
    }
    assert_eq!(
        provider.request_count(),
        0,
        "a refused call reached the model"
    );
    // Reading there is fine.
    let r = server
        .result(
            "buddy",
            json!({"prompt": "look", "cwd": holder, "approval": "read-only"}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{:?}", texts(&r));
    assert!(texts(&r)[0].contains("looked around"), "{:?}", texts(&r));
}

/// A request line past the server's 16 MiB bound is answered with an error
/// naming its id (the caller would wait forever otherwise), and the
/// connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_16_mib_is_answered_with_an_error_and_the_server_goes_on() {
    let provider = FakeProvider::start(vec![Reply::text("still here")]);
    let cmd = BuddyCmd::new().config_for(&provider);
    let server = Server::start(&cmd).await;
    let huge = "x".repeat(17 * 1024 * 1024);
    let Value::Object(args) = json!({ "prompt": huge }) else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("buddy").with_arguments(args);
    let answer = tokio::time::timeout(Duration::from_secs(30), server.service.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("no answer to a 17 MiB request; {}", server.log()));
    let err = answer.expect_err("a 17 MiB request was taken");
    assert!(
        err.to_string().contains("longer than 16777216 bytes"),
        "{err}"
    );
    let next = server.result("buddy", json!({"prompt": "hi"})).await;
    assert_eq!(texts(&next)[0], "still here", "{:?}", texts(&next));
}

/// The MCP servers in the config are started for the calls, and their tools
/// offered from the first call on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_mcp_servers_are_offered_to_the_first_call() {
    let provider = FakeProvider::start(vec![Reply::text("seen")]);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp/hostile.py")
        .display()
        .to_string();
    let config = format!(
        "{}\n[mcp_servers.side]\ncommand = \"python3\"\nargs = [{}, \"malformed\"]\n",
        support::fake_config(&provider),
        serde_json::to_string(&script).expect("a string")
    );
    let cmd = BuddyCmd::new().config(config);
    let server = Server::start(&cmd).await;
    let first = server.result("buddy", json!({"prompt": "hi"})).await;
    assert_eq!(texts(&first)[0], "seen", "{:?}", texts(&first));
    let body = provider.chat_requests()[0].body_text();
    assert!(body.contains("mcp__side__peak"), "{body}");
}
