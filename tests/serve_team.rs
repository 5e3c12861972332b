//! End-to-end tests of `buddy serve` for a team: users with their own
//! tokens (`buddy serve add-user`), sessions only their creator sees,
//! per-user limits, the audit log, and `GET /metrics` read by the
//! Prometheus Python client's own parser.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{FakeProvider, Gate, Reply, ToolCallSpec};
use support::http::{Client, SseStream};
use support::prometheus;
use support::serve::Server;
use support::{fake_config, BuddyCmd};

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

/// `buddy serve add-user NAME` in `cmd`'s directory; the token it printed.
fn add_user(cmd: &BuddyCmd, name: &str) -> String {
    let out = cmd.rerun(["serve", "add-user", name]);
    out.assert_success();
    out.stdout.trim().to_string()
}

fn as_user(server: &Server, token: &str) -> Client {
    let mut c = server.client();
    c.token = Some(token.to_string());
    c
}

fn new_session(c: &Client) -> String {
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["id"].as_str().unwrap().to_string()
}

fn post_prompt(c: &Client, id: &str, text: &str) -> (support::http::Response, Option<SseStream>) {
    let body = json!({ "text": text }).to_string();
    c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    )
}

fn prompt(c: &Client, id: &str, text: &str) -> SseStream {
    let (r, s) = post_prompt(c, id, text);
    assert_eq!(r.status, 200, "{}", r.body);
    s.unwrap()
}

fn listed(c: &Client) -> Vec<String> {
    let r = c.get("/api/sessions");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn add_user_prints_the_token_once_and_keeps_only_its_hash_in_a_0600_file() {
    let cmd = BuddyCmd::new();
    let token = add_user(&cmd, "ann");
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
    let file = cmd.work_dir().join(".buddyx/serve/users");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&token), "{text}");
    assert!(text.starts_with("ann sha256:"), "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A name that could break a line or a label is refused.
    let out = cmd.rerun(["serve", "add-user", "ann smith"]);
    assert_ne!(out.code(), Some(0));
    assert!(out.stderr.contains("not a user name"), "{}", out.stderr);
}

#[test]
fn a_user_cannot_see_read_prompt_or_follow_another_users_session() {
    let p = FakeProvider::start_repeating(vec![Reply::text("hello ann")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let ann_token = add_user(&cmd, "ann");
    let bob_token = add_user(&cmd, "bob");
    let server = Server::start(&cmd, &["--token", "the-admin"]);
    let ann = as_user(&server, &ann_token);
    let bob = as_user(&server, &bob_token);
    // With users, even loopback needs a token.
    assert_eq!(server.client().get("/api/sessions").status, 401);
    assert_eq!(
        as_user(&server, "nobody's").get("/api/sessions").status,
        401
    );

    let id = new_session(&ann);
    let done = prompt(&ann, &id, "hi").until("done");
    assert_eq!(done.last().unwrap().data["outcome"]["text"], "hello ann");
    assert_eq!(listed(&ann), [id.as_str()]);
    assert!(listed(&bob).is_empty());
    // The admin's token sees every session.
    assert_eq!(listed(&as_user(&server, "the-admin")), [id.as_str()]);

    // Every route answers bob as if the session did not exist.
    for (method, path, body) in [
        ("GET", format!("/api/sessions/{id}"), None),
        ("GET", format!("/api/sessions/{id}/view"), None),
        ("DELETE", format!("/api/sessions/{id}"), None),
        ("POST", format!("/api/sessions/{id}/interrupt"), Some("")),
        (
            "POST",
            format!("/api/sessions/{id}/approvals/c1"),
            Some(r#"{"approve":true}"#),
        ),
        (
            "POST",
            format!("/api/sessions/{id}/messages"),
            Some(r#"{"text":"let me in"}"#),
        ),
    ] {
        let r = bob.request(method, &path, &[], body);
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    let (r, stream) = bob.sse("GET", &format!("/api/sessions/{id}/events"), &[], None);
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(stream.is_none());
    let r = bob.post_json("/api/sessions", &json!({ "resume": id }));
    assert_eq!(r.status, 404, "{}", r.body);
    // Ann's own requests still work, and the session still has its run.
    let r = ann.get(&format!("/api/sessions/{id}"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["messages"].as_array().unwrap().len(), 2);
    // Owners outlast a restart of the server.
    drop(server);
    let server = Server::start(&cmd, &[]);
    assert_eq!(listed(&as_user(&server, &ann_token)), [id.as_str()]);
    assert!(listed(&as_user(&server, &bob_token)).is_empty());
}

#[test]
fn a_user_at_their_running_limit_gets_429_with_retry_after_and_others_do_not() {
    let held = Gate::new();
    let p = FakeProvider::start_repeating(vec![Reply::text("slow answer").gated(&held)]);
    let cmd = BuddyCmd::new().config(format!(
        "{}\n[serve]\nuser_max_running = 1\n",
        fake_config(&p)
    ));
    let ann = add_user(&cmd, "ann");
    let bob = add_user(&cmd, "bob");
    let server = Server::start(&cmd, &[]);
    let (ann, bob) = (as_user(&server, &ann), as_user(&server, &bob));
    let first = new_session(&ann);
    let second = new_session(&ann);
    let mut running = prompt(&ann, &first, "one");
    running.until("model_request");
    let (r, none) = post_prompt(&ann, &second, "two");
    assert!(none.is_none());
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("5"));
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("user ann has 1 sessions running"),
        "{}",
        r.body
    );
    // Bob's own limit is untouched by ann's runs.
    let theirs = new_session(&bob);
    let mut other = prompt(&bob, &theirs, "three");
    held.open();
    for s in [&mut running, &mut other] {
        assert_eq!(
            s.until("done").last().unwrap().data["outcome"]["text"],
            "slow answer"
        );
    }
    // Ann's run is over: her next prompt is taken.
    prompt(&ann, &second, "two again").until("done");
}

#[test]
fn a_user_past_their_daily_spending_gets_429_until_midnight() {
    // $2 and $10 per million tokens: a 1000 + 100 token reply costs $0.003.
    let p = FakeProvider::start_repeating(vec![Reply::text("paid").with_usage(1000, 100)]);
    let config = fake_config(&p).replace(
        "[models.fake]\n",
        "[models.fake]\nprice = { input = 2.0, output = 10.0 }\n",
    );
    let cmd = BuddyCmd::new().config(format!("{config}\n[serve]\nuser_daily_usd = 0.002\n"));
    let ann = add_user(&cmd, "ann");
    let bob = add_user(&cmd, "bob");
    let server = Server::start(&cmd, &[]);
    let (ann, bob) = (as_user(&server, &ann), as_user(&server, &bob));
    let id = new_session(&ann);
    prompt(&ann, &id, "spend").until("done");
    let (r, _) = post_prompt(&ann, &id, "spend more");
    assert_eq!(r.status, 429, "{}", r.body);
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    let why = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        why.contains("$0.0030") && why.contains("daily limit"),
        "{why}"
    );
    // Another user has their own day.
    let theirs = new_session(&bob);
    prompt(&bob, &theirs, "spend").until("done");
}

#[test]
fn the_audit_log_has_a_line_per_change_with_the_approved_command_and_no_prompt_text() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "expr audited-command")]),
        Reply::text("All done."),
        Reply::tool_calls(vec![shell("c2", "expr never-run")]),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let ann = add_user(&cmd, "ann");
    let server = Server::start(&cmd, &[]);
    let ann = as_user(&server, &ann);
    let id = new_session(&ann);
    let mut s = prompt(&ann, &id, "the secret plan");
    s.until("approval_request");
    let r = ann.post(
        &format!("/api/sessions/{id}/approvals/c1"),
        r#"{"approve":true}"#,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    s.until("done");
    let mut s = prompt(&ann, &id, "another secret");
    s.until("approval_request");
    let r = ann.post(&format!("/api/sessions/{id}/interrupt"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    s.until("done");

    let path = cmd.work_dir().join(".buddyx/serve/audit.log");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("secret"), "{text}");
    assert!(!text.contains("All done"), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let actions: Vec<&str> = lines
        .iter()
        .map(|l| l["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["create", "prompt", "approval", "prompt", "interrupt"],
        "{text}"
    );
    for l in &lines {
        assert_eq!(l["user"], "ann", "{l}");
        assert_eq!(l["session"], id.as_str(), "{l}");
        assert_eq!(l["outcome"], "ok", "{l}");
        assert!(l["time"].as_str().unwrap().ends_with('Z'), "{l}");
    }
    assert_eq!(lines[0]["status"], 201);
    assert_eq!(lines[2]["command"], "expr audited-command");
    assert_eq!(lines[2]["decision"], "approve");
    assert_eq!(lines[2]["status"], 204);
    assert_eq!(lines[4]["status"], 202);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn metrics_parse_with_the_prometheus_parser_and_move_after_a_run() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "expr counted")]),
        Reply::text("counted"),
    ]);
    let cmd = BuddyCmd::new().config(format!(
        "{}\n[tools]\nshell_confirm = false\n",
        fake_config(&p)
    ));
    let server = Server::start(&cmd, &["--token", "the-admin"]);
    assert_eq!(server.client().get("/metrics").status, 401);
    let c = as_user(&server, "the-admin");
    let scrape = || {
        let r = c.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r
            .header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4"));
        prometheus::parse(&r.body)
    };
    let before = scrape();
    let finished = |s: &[prometheus::Sample]| {
        prometheus::value(
            s,
            "buddy_serve_runs_finished_total",
            &[("outcome", "answered")],
        )
    };
    let tools = |s: &[prometheus::Sample]| {
        prometheus::value(
            s,
            "buddy_serve_tool_calls_total",
            &[("tool", "run_shell"), ("outcome", "ok")],
        )
    };
    assert_eq!((finished(&before), tools(&before)), (0.0, 0.0));

    let id = new_session(&c);
    let done = prompt(&c, &id, "count").until("done");
    assert_eq!(done.last().unwrap().data["outcome"]["text"], "counted");
    let after = scrape();
    assert_eq!(finished(&after), 1.0);
    assert_eq!(tools(&after), 1.0);
    assert_eq!(
        prometheus::value(&after, "buddy_serve_runs_started_total", &[]),
        1.0
    );
    assert_eq!(
        prometheus::value(&after, "buddy_serve_run_seconds_count", &[]),
        1.0
    );
    assert_eq!(
        prometheus::value(&after, "buddy_serve_first_token_seconds_count", &[]),
        1.0
    );
    assert_eq!(
        prometheus::value(
            &after,
            "buddy_serve_requests_total",
            &[("route", "/api/sessions"), ("status", "201")]
        ),
        1.0
    );
    // The refused scrape was counted too, under its route.
    assert_eq!(
        prometheus::value(
            &after,
            "buddy_serve_requests_total",
            &[("route", "/metrics"), ("status", "401")]
        ),
        1.0
    );
    let tokens: f64 = after
        .iter()
        .filter(|s| s.name == "buddy_serve_model_tokens_total")
        .map(|s| s.value)
        .sum();
    assert!(tokens > 0.0, "{after:?}");
    assert!(prometheus::value(&after, "buddy_serve_open_connections", &[]) >= 1.0);
    assert_eq!(
        prometheus::value(&after, "buddy_serve_live_agents", &[]),
        1.0,
        "the session's agent is kept for its next prompt"
    );
    let kind = |family: &str| {
        after
            .iter()
            .find(|s| s.family == family)
            .map(|s| s.kind.clone())
    };
    assert_eq!(
        kind("buddy_serve_run_seconds").as_deref(),
        Some("histogram")
    );
    assert_eq!(
        kind("buddy_serve_runs_finished").as_deref(),
        Some("counter")
    );
    assert_eq!(
        kind("buddy_serve_open_connections").as_deref(),
        Some("gauge")
    );
}
