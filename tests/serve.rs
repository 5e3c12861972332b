//! End-to-end tests of `buddy serve`: the real binary serving HTTP on
//! loopback, driven by a plain HTTP/SSE client, against the fake provider.

use crate::support;

use serde_json::{json, Value};
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;
use support::fake_provider::{FakeProvider, Gate, Reply, ToolCallSpec};
use support::http::{Client, SseEvent};
use support::serve::Server;
use support::{fake_config, BuddyCmd};

const CANCELLED: &str = "operation cancelled by user";

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

fn no_confirm(p: &FakeProvider) -> String {
    format!("{}\n[tools]\nshell_confirm = false\n", fake_config(p))
}

fn new_session(c: &Client) -> String {
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["id"].as_str().unwrap().to_string()
}

fn prompt(c: &Client, id: &str, text: &str) -> support::http::SseStream {
    let body = json!({ "text": text }).to_string();
    let (r, s) = c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    s.unwrap()
}

fn find<'a>(events: &'a [SseEvent], name: &str) -> &'a SseEvent {
    events
        .iter()
        .find(|e| e.event == name)
        .unwrap_or_else(|| panic!("no {name} in {events:?}"))
}

fn messages(c: &Client, id: &str) -> Vec<Value> {
    c.get(&format!("/api/sessions/{id}")).json()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_tool_loop_with_an_approval_answered_over_http() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "expr from-the-tool")]),
        Reply::text("All done."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let mut stream = prompt(&c, &id, "run it");
    let before = stream.until("approval_request");
    assert_eq!(find(&before, "tool_call_start").data["name"], "run_shell");
    let ask = before.last().unwrap();
    assert_eq!(ask.data["command"], "expr from-the-tool");
    // A wrong call id is refused; the right one answers.
    let r = c.post(
        &format!("/api/sessions/{id}/approvals/nope"),
        r#"{"approve":true}"#,
    );
    assert_eq!(r.status, 404);
    let r = c.post(
        &format!("/api/sessions/{id}/approvals/c1"),
        r#"{"approve":true}"#,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    let rest = stream.until("done");
    let result = find(&rest, "tool_call_result");
    assert!(result.data["text"]
        .as_str()
        .unwrap()
        .contains("from-the-tool"));
    let text: String = rest
        .iter()
        .filter(|e| e.event == "content_delta")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "All done.");
    let done = rest.last().unwrap();
    assert_eq!(done.data["outcome"]["status"], "answered");
    // Ids increase by one without gaps across the whole run.
    let ids: Vec<u64> = before.iter().chain(&rest).map(|e| e.id.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    assert!(
        stream.next().is_none(),
        "the prompt's stream ends with done"
    );
    let history = messages(&c, &id);
    assert_eq!(history.len(), 4);
    assert!(history[2]["content"]
        .as_str()
        .unwrap()
        .contains("from-the-tool"));
}

#[test]
fn one_run_per_session_a_second_prompt_is_409_and_a_steer_joins_the_run() {
    // The first call runs until the test has posted the steer (30 s at most,
    // should the test fail first).
    let cmd = BuddyCmd::new();
    let go = cmd.work_dir().join("go");
    let nap = format!(
        "i=0; until [ -e '{}' ] || [ $i -ge 1500 ]; do sleep 0.02; i=$((i+1)); done",
        go.display()
    );
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", &nap), shell("two", "echo two")]),
        Reply::text("steered"),
    ]);
    let cmd = cmd
        .config(no_confirm(&p).replace("[agent]\n", "[agent]\ntool_execution = \"sequential\"\n"));
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let mut stream = prompt(&c, &id, "nap");
    stream.until("tool_call_start");
    let path = format!("/api/sessions/{id}/messages");
    let r = c.post(&path, r#"{"text":"another prompt"}"#);
    assert_eq!(r.status, 409, "{}", r.body);
    let r = c.post(&path, r#"{"text":"go left","mode":"steer"}"#);
    assert_eq!(r.status, 202, "{}", r.body);
    std::fs::write(&go, "").unwrap();
    let rest = stream.until("done");
    assert_eq!(rest.last().unwrap().data["outcome"]["text"], "steered");
    let reqs = p.chat_requests();
    let last = reqs[1].json()["messages"].as_array().unwrap().clone();
    assert_eq!(last.last().unwrap()["content"], "go left");
    let skipped = last.iter().find(|m| m["tool_call_id"] == "two").unwrap();
    assert_eq!(skipped["content"], "skipped: the user sent a new message");
}

#[test]
fn interrupt_stops_the_run_and_keeps_every_call_answered() {
    let p = FakeProvider::start(vec![Reply::tool_calls(vec![shell("nap", "sleep 30")])]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let r = c.post(&format!("/api/sessions/{id}/interrupt"), "");
    assert_eq!(r.status, 409, "nothing runs yet");
    let mut stream = prompt(&c, &id, "nap");
    stream.until("tool_call_start");
    let r = c.post(&format!("/api/sessions/{id}/interrupt"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    let rest = stream.until("done");
    assert_eq!(
        rest.last().unwrap().data["outcome"]["status"],
        "interrupted"
    );
    let history = messages(&c, &id);
    let result = history.iter().find(|m| m["tool_call_id"] == "nap").unwrap();
    assert_eq!(result["content"], CANCELLED);
}

#[test]
fn a_dropped_client_does_not_stop_the_run_and_a_reconnect_gets_what_it_missed() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", "sleep 1; echo awake")]),
        Reply::text("finished without you"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let mut stream = prompt(&c, &id, "nap");
    let seen = stream.until("tool_call_start");
    let last_id = seen.last().unwrap().id.unwrap();
    drop(stream);
    let (r, s) = c.sse(
        "GET",
        &format!("/api/sessions/{id}/events"),
        &[("Last-Event-ID", &last_id.to_string())],
        None,
    );
    assert_eq!(r.status, 200);
    let rest = s.unwrap().until("done");
    assert_eq!(rest[0].id, Some(last_id + 1), "{rest:?}");
    assert!(find(&rest, "tool_call_result").data["text"]
        .as_str()
        .unwrap()
        .contains("awake"));
    assert_eq!(
        rest.last().unwrap().data["outcome"]["text"],
        "finished without you"
    );
}

#[test]
fn sessions_run_concurrently() {
    let held = Gate::new();
    let p = FakeProvider::start_repeating(vec![Reply::text("slow answer").gated(&held)]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let a = new_session(&c);
    let b = new_session(&c);
    let mut sa = prompt(&c, &a, "first");
    let mut sb = prompt(&c, &b, "second");
    sa.until("model_request");
    sb.until("model_request");
    p.wait_for_requests(2, Duration::from_secs(10));
    let list = c.get("/api/sessions").json();
    let running: Vec<&Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["running"] == true)
        .collect();
    assert_eq!(running.len(), 2, "{list}");
    held.open();
    for s in [&mut sa, &mut sb] {
        let rest = s.until("done");
        assert_eq!(rest.last().unwrap().data["outcome"]["text"], "slow answer");
    }
}

#[test]
fn off_loopback_a_token_is_required_on_every_request() {
    let p = FakeProvider::start(vec![Reply::text("hello")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let out = cmd.rerun(["serve", "--listen", "0.0.0.0:0"]);
    out.assert_code(2);
    assert!(out.stderr.contains("token"), "{}", out.stderr);
    let server = Server::start(&cmd, &["--listen", "0.0.0.0:0", "--token", "s3cret-token"]);
    let mut c = server.client();
    c.addr = SocketAddr::from(([127, 0, 0, 1], server.addr.port()));
    assert_eq!(c.get("/api/sessions").status, 401);
    assert_eq!(c.get("/").status, 401);
    assert_eq!(c.get("/?token=wrong").status, 401);
    assert_eq!(c.get("/?token=s3cret-token").status, 200);
    c.token = Some("s3cret-token".into());
    assert_eq!(c.get("/api/sessions").status, 200);
    let id = new_session(&c);
    // The event stream is guarded too.
    let anon = Client::new(c.addr);
    let (r, _) = anon.sse("GET", &format!("/api/sessions/{id}/events"), &[], None);
    assert_eq!(r.status, 401);
    let rest = prompt(&c, &id, "hi").until("done");
    assert_eq!(rest.last().unwrap().data["outcome"]["text"], "hello");
}

/// A server that cannot listen is a failure of the run (1), not of the
/// command line (2): the same command works once the port is free.
#[test]
fn an_address_already_in_use_exits_1_not_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let out = cmd.rerun(["serve", "--listen", addr.as_str()]);
    out.assert_code(1);
    assert!(
        out.stderr.contains(&format!("cannot listen on {addr}")),
        "{}",
        out.stderr
    );
}

#[test]
fn foreign_hosts_and_origins_are_refused() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let port = server.addr.port();
    let evil_host = format!("evil.example:{port}");
    let r = c.request("GET", "/api/sessions", &[("Host", &evil_host)], None);
    assert_eq!(r.status, 403, "a rebound DNS name: {}", r.body);
    let r = c.request(
        "POST",
        "/api/sessions",
        &[("Origin", "http://evil.example")],
        Some("{}"),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let own = format!("http://localhost:{port}");
    let host = format!("localhost:{port}");
    let r = c.request(
        "POST",
        "/api/sessions",
        &[("Host", &host), ("Origin", &own)],
        Some("{}"),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    // Bodies are bounded.
    let big = format!("{{\"text\":\"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let id = r.json()["id"].as_str().unwrap().to_string();
    let r = c.post(&format!("/api/sessions/{id}/messages"), &big);
    assert_eq!(r.status, 413);
    // Two Host headers, or a target naming another host, are malformed.
    let own_host = server.addr.to_string();
    let r = c.request(
        "GET",
        "/api/sessions",
        &[("Host", &own_host), ("Host", &evil_host)],
        None,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = c.request(
        "GET",
        &format!("http://{evil_host}/api/sessions"),
        &[("Host", &own_host)],
        None,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = c.request(
        "GET",
        &format!("http://{own_host}/api/sessions"),
        &[("Host", &own_host)],
        None,
    );
    assert_eq!(
        r.status, 200,
        "an absolute-form target of this server: {}",
        r.body
    );
    // The page is served, self-contained, and never framed.
    let page = c.get("/");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("x-frame-options"))
            .map(|(_, v)| v.as_str()),
        Some("DENY")
    );
    let csp = page
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-security-policy"))
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(page.body.contains("<script>") && !page.body.contains("src=\"http"));
}

#[test]
fn served_sessions_continue_in_the_cli_and_cli_sessions_over_http() {
    let p = FakeProvider::start(vec![
        Reply::text("answer over http"),
        Reply::text("answer in the cli"),
        Reply::text("cli session answer"),
        Reply::text("http continues it"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    prompt(&c, &id, "asked over http").until("done");
    // Between runs the session is free: the CLI continues it.
    let out = cmd.rerun(["exec", "--resume", &id, "asked in the cli"]);
    out.assert_success();
    assert_eq!(out.stdout, "answer in the cli\n");
    let sent = p.chat_requests()[1].body_text();
    assert!(sent.contains("asked over http") && sent.contains("answer over http"));
    // And the reverse: a session started by the CLI, continued over HTTP.
    let out = cmd.rerun(["exec", "a cli question"]);
    out.assert_success();
    let r = c.post("/api/sessions", r#"{"resume":"last"}"#);
    assert_eq!(r.status, 201, "{}", r.body);
    let cli_id = r.json()["id"].as_str().unwrap().to_string();
    assert_ne!(cli_id, id);
    let rest = prompt(&c, &cli_id, "and over http?").until("done");
    assert_eq!(
        rest.last().unwrap().data["outcome"]["text"],
        "http continues it"
    );
    let sent = p.chat_requests()[3].body_text();
    assert!(sent.contains("a cli question") && sent.contains("cli session answer"));
}

/// A prompt whose session cannot be opened gets a status that says why, and
/// the one-line reason: 409 while another process holds the session, 404
/// once its file is gone, 500 when the file is damaged. (503, when the server
/// cannot read the file at that moment, is the unit test of `code_of`.)
#[test]
fn a_session_that_cannot_be_opened_answers_with_the_reason() {
    let p = FakeProvider::start_repeating(vec![Reply::text("fine")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let dir = cmd.work_dir().join(".buddyx/sessions");
    let post = |id: &str| {
        c.post(
            &format!("/api/sessions/{id}/messages"),
            &json!({ "text": "hi" }).to_string(),
        )
    };

    // Held by another process (this test takes the same lock buddy does).
    let id = new_session(&c);
    prompt(&c, &id, "first").until("done");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(dir.join(format!("{id}.jsonl")))
        .unwrap();
    file.lock().unwrap();
    let r = post(&id);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.body.contains("in use by another buddy process"),
        "{}",
        r.body
    );
    file.unlock().unwrap();
    drop(file);
    prompt(&c, &id, "free again").until("done");

    // Damaged: not a session journal any more.
    let damaged = new_session(&c);
    prompt(&c, &damaged, "first").until("done");
    std::fs::write(dir.join(format!("{damaged}.jsonl")), "not a journal\n").unwrap();
    let r = post(&damaged);
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(r.body.contains("is damaged"), "{}", r.body);

    // Gone from the disk since it was listed.
    let gone = new_session(&c);
    prompt(&c, &gone, "first").until("done");
    std::fs::remove_file(dir.join(format!("{gone}.jsonl"))).unwrap();
    let r = post(&gone);
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("no session"), "{}", r.body);
}

#[test]
fn an_unanswered_approval_is_denied_after_the_timeout() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "touch never")]),
        Reply::text("ok, not run"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--approval-timeout", "1s"]);
    let c = server.client();
    let id = new_session(&c);
    let events = prompt(&c, &id, "try").until("done");
    let decided = find(&events, "approval_decided");
    assert_eq!(decided.data["approved"], false);
    assert!(decided.data["reason"]
        .as_str()
        .unwrap()
        .contains("nobody answered"));
    assert!(!cmd.work_dir().join("never").exists());
}

#[test]
fn sigterm_interrupts_running_sessions_and_journals_them() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", "sleep 30")]),
        Reply::text("resumed after the restart"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let mut server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let mut stream = prompt(&c, &id, "nap");
    stream.until("tool_call_start");
    let started = std::time::Instant::now();
    assert_eq!(server.terminate(), 0);
    assert!(started.elapsed() < Duration::from_secs(10));
    // Everything reached the session file: the CLI continues it, valid.
    let out = cmd.rerun(["exec", "--resume", &id, "still there?"]);
    out.assert_success();
    let req = &p.chat_requests()[1];
    let ms = req.json()["messages"].as_array().unwrap().clone();
    let result = ms.iter().find(|m| m["tool_call_id"] == "nap").unwrap();
    assert_eq!(result["content"], CANCELLED);
}

/// The stamped pieces (`SEQ@NANOS;`) of a stream's text deltas, checked to
/// be every piece once, in order; with the number of delta events.
fn stamped_text(events: &[SseEvent], pieces: usize) -> (String, usize) {
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e.event == "content_delta")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    let text: String = deltas.concat();
    let seqs: Vec<usize> = support::fake_provider::parse_stamps(&text)
        .unwrap_or_else(|| panic!("not whole stamps: {text:?}"))
        .into_iter()
        .map(|(seq, _)| seq)
        .collect();
    assert_eq!(seqs, (0..pieces).collect::<Vec<_>>());
    let ids: Vec<u64> = events.iter().map(|e| e.id.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    (text, deltas.len())
}

#[test]
fn a_fast_stream_merged_into_batches_reaches_two_clients_whole_and_in_order() {
    // Zero delay: pieces arrive faster than one event each, so buddy merges
    // them; every client must still get all of them once, in order.
    const PIECES: usize = 3000;
    let p = FakeProvider::start(vec![Reply::stamped_text(PIECES)]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let mut first = prompt(&c, &id, "stream fast");
    let (r, second) = c.sse("GET", &format!("/api/sessions/{id}/events"), &[], None);
    assert_eq!(r.status, 200);
    let mut second = second.unwrap();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| first.until("done"));
        let b = s.spawn(|| second.until("done"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (text_a, events_a) = stamped_text(&a, PIECES);
    let (text_b, _) = stamped_text(&b, PIECES);
    assert_eq!(text_a, text_b);
    assert!(events_a <= PIECES, "{events_a} deltas for {PIECES} pieces");
    assert_eq!(a.last().unwrap().data["outcome"]["text"], text_a.as_str());
    let history = messages(&c, &id);
    assert_eq!(history.last().unwrap()["content"], text_a.as_str());
}

/// `{"approve":true,"always":true}` allows the offered prefix for the rest of
/// the run: the next matching command runs without a question.
#[test]
fn always_over_http_allows_the_offered_prefix() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "expr first")]),
        Reply::tool_calls(vec![shell("c2", "expr second")]),
        Reply::text("both ran"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let mut stream = prompt(&c, &id, "run two");
    let before = stream.until("approval_request");
    assert_eq!(before.last().unwrap().data["always"], "expr");
    let r = c.post(
        &format!("/api/sessions/{id}/approvals/c1"),
        r#"{"approve":true,"always":true}"#,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    let rest = stream.until("done");
    assert!(
        !rest.iter().any(|e| e.event == "approval_request"),
        "asked again: {rest:?}"
    );
    let decided: Vec<&SseEvent> = rest
        .iter()
        .filter(|e| e.event == "approval_decided")
        .collect();
    assert_eq!(decided.len(), 2, "{rest:?}");
    assert_eq!(decided[0].data["by"], "user");
    assert_eq!(decided[0].data["always"], "expr");
    assert_eq!(decided[1].data["by"], "allow_list");
    assert_eq!(decided[1].data["call_id"], "c2");
    assert_eq!(rest.last().unwrap().data["outcome"]["status"], "answered");
}

fn answer(c: &Client, id: &str, call_id: &str, body: &str) {
    let r = c.post(&format!("/api/sessions/{id}/approvals/{call_id}"), body);
    assert_eq!(r.status, 204, "{}", r.body);
}

/// Each prompt runs an agent of its own, yet "always" lasts for the served
/// session like it does in the REPL; another session does not share it, and
/// a restarted server has forgotten it (memory only).
#[test]
fn always_lasts_for_the_served_session_and_dies_with_the_server() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "expr first")]),
        Reply::text("one"),
        Reply::tool_calls(vec![shell("c2", "expr second")]),
        Reply::text("two"),
        Reply::tool_calls(vec![shell("c3", "expr third")]),
        Reply::text("three"),
        Reply::tool_calls(vec![shell("c4", "expr fourth")]),
        Reply::text("four"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let mut server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);

    let mut run1 = prompt(&c, &id, "run one");
    let asked = run1.until("approval_request");
    assert_eq!(asked.last().unwrap().data["always"], "expr");
    answer(&c, &id, "c1", r#"{"approve":true,"always":true}"#);
    run1.until("done");

    // A new prompt, so a new agent: the prefix still holds.
    let run2 = prompt(&c, &id, "run two").until("done");
    assert!(
        !run2.iter().any(|e| e.event == "approval_request"),
        "asked again: {run2:?}"
    );
    let decided = find(&run2, "approval_decided");
    assert_eq!(decided.data["call_id"], "c2");
    assert_eq!(decided.data["by"], "allow_list");
    assert_eq!(decided.data["always"], "expr");
    assert!(find(&run2, "tool_call_result").data["text"]
        .as_str()
        .unwrap()
        .contains("second"));

    // Another session has its own (empty) list.
    let other = new_session(&c);
    let mut run3 = prompt(&c, &other, "run three");
    let asked = run3.until("approval_request");
    assert_eq!(asked.last().unwrap().data["call_id"], "c3");
    answer(&c, &other, "c3", r#"{"approve":false}"#);
    run3.until("done");

    // Nothing was saved: the same session on a new server asks again.
    assert_eq!(server.terminate(), 0);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let mut run4 = prompt(&c, &id, "run four");
    let asked = run4.until("approval_request");
    assert_eq!(asked.last().unwrap().data["call_id"], "c4");
    answer(&c, &id, "c4", r#"{"approve":false}"#);
    run4.until("done");
}

/// Sessions share one HTTP client: a second session's model request goes out
/// on the connection the first one left open (built per session, each would
/// open its own and re-read the trust store).
#[test]
fn sessions_share_the_connection_to_the_provider() {
    let p = FakeProvider::start_repeating(vec![Reply::text("hello")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    for text in ["first", "second", "third"] {
        let id = new_session(&c);
        let events = prompt(&c, &id, text).until("done");
        assert_eq!(events.last().unwrap().data["outcome"]["text"], "hello");
    }
    let connections: Vec<usize> = p.chat_requests().iter().map(|r| r.connection).collect();
    assert_eq!(connections.len(), 3, "{connections:?}");
    assert!(
        connections.iter().all(|c| *c == connections[0]),
        "each session opened its own connection: {connections:?}"
    );
}

fn retry_after(r: &support::http::Response) -> Option<&str> {
    r.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
        .map(|(_, v)| v.as_str())
}

/// Polls `f` until it holds, for at most ten seconds.
fn eventually(what: &str, f: impl FnMut() -> bool) {
    support::wait::wait_for(what, Duration::from_secs(10), f)
}

#[test]
fn connections_over_the_cap_get_503_with_retry_after_until_one_closes() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--max-connections", "2"]);
    let c = server.client();
    let id = new_session(&c);
    // Two open event streams hold both places: a request in flight is never
    // closed to make room.
    let path = format!("/api/sessions/{id}/events");
    let (a, first) = c.sse("GET", &path, &[], None);
    let (b, _second) = c.sse("GET", &path, &[], None);
    assert_eq!((a.status, b.status), (200, 200));
    let r = c.get("/api/sessions");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(retry_after(&r), Some("5"));
    assert!(r.json()["error"].as_str().unwrap().contains("retry later"));
    drop(first);
    eventually("a place frees when a connection closes", || {
        c.get("/api/sessions").status == 200
    });
}

#[test]
fn at_the_cap_the_connection_waiting_longest_for_its_head_makes_room() {
    let p = FakeProvider::start(vec![Reply::text("still streaming")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--max-connections", "3"]);
    let c = server.client();
    let id = new_session(&c);
    // The oldest connection has a stream open; the next two sent half a head.
    let (r, stream) = c.sse("GET", &format!("/api/sessions/{id}/events"), &[], None);
    assert_eq!(r.status, 200);
    let mut stream = stream.unwrap();
    let head = format!(
        "GET /api/sessions HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        server.addr
    );
    let mut older = support::serve::raw(server.addr, head.as_bytes());
    let mut newer = support::serve::raw(server.addr, head.as_bytes());
    // A fourth client is answered: the older half head made room for it.
    let r = c.get("/api/sessions");
    assert_eq!(r.status, 200, "{}", r.body);
    let (said, _) = support::serve::until_closed(&mut older, Duration::from_secs(5))
        .expect("the older half head is still connected");
    assert_eq!(said, "", "closed without an answer");
    // The newer one is still there: it finishes its head and is answered.
    newer.write_all(b"\r\n").unwrap();
    let (answer, _) = support::serve::until_closed(&mut newer, Duration::from_secs(5))
        .expect("no answer to the finished head");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The stream, oldest of all, was never touched: it carries the next run.
    prompt(&c, &id, "go").until("done");
    let events = stream.until("done");
    assert_eq!(
        events.last().unwrap().data["outcome"]["text"],
        "still streaming"
    );
}

/// Raises this process's soft descriptor limit to the hard one; the hard
/// limit. A flood holds thousands of sockets.
fn raise_own_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: now.maximum,
            maximum: now.maximum,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Holds `n` connections to `server` that each sent half a request head,
/// then times five GETs of the page by another client: each must be
/// answered in full within 200 ms. `None` (with a note) when this process
/// may not open that many sockets.
fn page_during_a_flood(server: &Server, n: usize) -> Option<Duration> {
    let limit = raise_own_nofile();
    if limit < n as u64 + 200 {
        eprintln!(
            "skipped: a flood of {n} needs {n} descriptors and more; this process may open {limit}"
        );
        return None;
    }
    let head = format!("GET / HTTP/1.1\r\nHost: {}\r\nX-Slow: ", server.addr);
    let t0 = std::time::Instant::now();
    let flood: Vec<std::net::TcpStream> = (0..n)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(server.addr)
                .unwrap_or_else(|e| panic!("flood connection {i}: {e}"));
            // The server may have closed it already (evicted): no matter.
            let _ = s.write_all(head.as_bytes());
            s
        })
        .collect();
    let opened = t0.elapsed();
    let c = server.client();
    let mut worst = Duration::ZERO;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let r = c.get("/");
        let took = t.elapsed();
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("</html>"), "the page is whole");
        worst = worst.max(took);
    }
    eprintln!(
        "flood of {n} half heads (opened in {:.0} ms): the page answered in {:.1} ms at worst of 5",
        opened.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3
    );
    assert!(
        worst < Duration::from_millis(200),
        "the page took {worst:?} during a flood of {n}"
    );
    drop(flood);
    Some(worst)
}

#[test]
fn a_page_is_answered_within_200_ms_during_a_flood_of_2000_half_heads() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    page_during_a_flood(&server, 2_000);
}

#[test]
fn a_page_is_answered_within_200_ms_during_a_flood_of_10000_half_heads() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    page_during_a_flood(&server, 10_000);
}

/// Asked for more connections than its descriptors allow, the server caps
/// them lower: an accept that fails for want of a descriptor could not make
/// room by closing a half head, and the page would wait in the backlog.
#[test]
fn the_connection_cap_follows_the_descriptor_limit_so_a_flood_cannot_stop_accepts() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start_with_nofile(&cmd, &["--max-connections", "5000"], 512);
    page_during_a_flood(&server, 2_000);
}

#[test]
fn a_client_dribbling_its_headers_is_cut_after_the_header_timeout() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--header-timeout", "1s"]);
    let head = format!("GET /api/sessions HTTP/1.1\r\nHost: {}\r\n", server.addr);
    let mut tcp = support::serve::raw(server.addr, head.as_bytes());
    // One more byte of a header that never ends every 100 ms, until the
    // server hangs up (writes then fail) or the test is over.
    let mut writer = tcp.try_clone().unwrap();
    let dribble = std::thread::spawn(move || {
        let _ = writer.write_all(b"X-Slow: ");
        for _ in 0..200 {
            if writer.write_all(b"a").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let (_, took) = support::serve::until_closed(&mut tcp, Duration::from_secs(8))
        .expect("the slow client is still connected after 8 s");
    assert!(took >= Duration::from_millis(900), "cut too soon: {took:?}");
    dribble.join().unwrap();
}

#[test]
fn a_kept_alive_connection_left_idle_is_closed_after_the_header_timeout() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--header-timeout", "1s"]);
    let req = format!(
        "GET /api/sessions HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.addr
    );
    let mut tcp = support::serve::raw(server.addr, req.as_bytes());
    let (answer, _) = support::serve::until_closed(&mut tcp, Duration::from_secs(8))
        .expect("the idle connection is still open after 8 s");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn streams_over_the_cap_get_503_with_retry_after() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--max-streams", "2"]);
    let c = server.client();
    let id = new_session(&c);
    let path = format!("/api/sessions/{id}/events");
    let open = || c.sse("GET", &path, &[], None);
    let (a, _one) = open();
    let (b, _two) = open();
    assert_eq!((a.status, b.status), (200, 200));
    let (r, none) = open();
    assert!(none.is_none());
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(retry_after(&r), Some("5"));
    assert!(r.json()["error"].as_str().unwrap().contains("2 streams"));
    // Another session has places of its own.
    let other = new_session(&c);
    let (r, _) = c.sse("GET", &format!("/api/sessions/{other}/events"), &[], None);
    assert_eq!(r.status, 200);
}

#[test]
fn prompts_over_the_running_cap_get_503_until_a_run_ends() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", "sleep 30")]),
        Reply::text("second"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let server = Server::start(&cmd, &["--max-running", "1"]);
    let c = server.client();
    let (one, two) = (new_session(&c), new_session(&c));
    let mut stream = prompt(&c, &one, "nap");
    stream.until("tool_call_start");
    let body = json!({ "text": "hello" }).to_string();
    let path = format!("/api/sessions/{two}/messages");
    let (r, _) = c.sse("POST", &path, &[], Some(&body));
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(retry_after(&r), Some("5"));
    let r = c.post(&format!("/api/sessions/{one}/interrupt"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    stream.until("done");
    let mut second = None;
    eventually("the ended run gives its place back", || {
        let (r, s) = c.sse("POST", &path, &[], Some(&body));
        assert!(matches!(r.status, 200 | 503), "{}", r.body);
        second = s;
        second.is_some()
    });
    let events = second.unwrap().until("done");
    assert_eq!(find(&events, "done").data["outcome"]["status"], "answered");
}

#[test]
fn a_too_big_body_gets_413_on_every_post_endpoint() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let paths = [
        "/api/sessions".to_string(),
        "/api/render".to_string(),
        format!("/api/sessions/{id}/messages"),
        format!("/api/sessions/{id}/approvals/c1"),
        format!("/api/sessions/{id}/interrupt"),
    ];
    let over = 1024 * 1024 + 1;
    for path in &paths {
        // Declared with its length, or sent in chunks: refused once past
        // the bound.
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {over}\r\n\r\n",
            server.addr
        );
        let mut tcp = support::serve::raw(server.addr, head.as_bytes());
        let _ = tcp.write_all(&vec![b' '; over]);
        let (answer, _) =
            support::serve::until_closed(&mut tcp, Duration::from_secs(10)).expect("an answer");
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(
            answer.contains(r#"{"error":"the request body is larger than"#),
            "{path}: {answer}"
        );
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{over:x}\r\n",
            server.addr
        );
        let mut tcp = support::serve::raw(server.addr, head.as_bytes());
        let _ = tcp.write_all(&vec![b' '; over]);
        let (answer, _) =
            support::serve::until_closed(&mut tcp, Duration::from_secs(10)).expect("an answer");
        assert!(
            answer.starts_with("HTTP/1.1 413"),
            "{path} (chunked): {answer}"
        );
    }
    // Bodies within the bound still work.
    assert_eq!(c.post("/api/sessions", "{}").status, 201);
}

/// The run number an event carries: a kept agent numbers its runs on, a new
/// one starts at 1.
fn run_of(events: &[SseEvent]) -> u64 {
    find(events, "run_started").data["run"].as_u64().unwrap()
}

fn live_agent(c: &Client, id: &str) -> bool {
    c.get(&format!("/api/sessions/{id}")).json()["live_agent"]
        .as_bool()
        .unwrap()
}

/// A session's agent outlives its run and serves the next prompt (its runs
/// are numbered on, and nothing is built again), yet the session file is free
/// between runs: the CLI continues the conversation meanwhile and the kept
/// agent's next run sees that turn. Left idle, the agent is closed, and the
/// next prompt gets a new one.
#[test]
fn the_agent_is_kept_between_prompts_and_closed_when_idle() {
    let p = FakeProvider::start(vec![
        Reply::text("first answer"),
        Reply::text("cli answer"),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--agent-idle", "2s"]);
    let c = server.client();
    let id = new_session(&c);
    assert!(!live_agent(&c, &id));
    let first = prompt(&c, &id, "one").until("done");
    assert_eq!(run_of(&first), 1);
    assert!(live_agent(&c, &id), "the agent was not kept");
    let out = cmd.rerun(["exec", "--resume", &id, "from the cli"]);
    out.assert_success();
    let second = prompt(&c, &id, "two").until("done");
    assert_eq!(run_of(&second), 2, "the second prompt got a new agent");
    assert_eq!(
        find(&second, "done").data["outcome"]["text"],
        "second answer"
    );
    let sent = p.chat_requests()[2].body_text();
    assert!(
        sent.contains("from the cli") && sent.contains("cli answer"),
        "the kept agent did not read the CLI's turn: {sent}"
    );
    eventually("the idle agent is closed", || !live_agent(&c, &id));
    let third = prompt(&c, &id, "three").until("done");
    assert_eq!(run_of(&third), 1, "the closed agent was used again");
    assert_eq!(p.remaining_replies(), 0);
}

/// Two clients prompt one session at the same moment: one run, and a 409
/// for the other.
#[test]
fn two_prompts_at_once_on_one_session_run_once() {
    // The answer waits until both POSTs are answered: the run is in flight.
    let held = Gate::new();
    let p = FakeProvider::start_repeating(vec![Reply::text("slow answer").gated(&held)]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    let posts: Vec<_> = (0..2)
        .map(|i| {
            let (c, id, start) = (server.client(), id.clone(), start.clone());
            std::thread::spawn(move || {
                let body = json!({ "text": format!("client {i}") }).to_string();
                start.wait();
                let (r, s) = c.sse(
                    "POST",
                    &format!("/api/sessions/{id}/messages"),
                    &[],
                    Some(&body),
                );
                (r.status, s)
            })
        })
        .collect();
    let mut got: Vec<_> = posts.into_iter().map(|t| t.join().unwrap()).collect();
    got.sort_by_key(|(status, _)| *status);
    assert_eq!((got[0].0, got[1].0), (200, 409));
    held.open();
    let done = got[0].1.as_mut().unwrap().until("done");
    let done = &done;
    assert_eq!(find(done, "done").data["outcome"]["text"], "slow answer");
    assert_eq!(messages(&c, &id).len(), 2, "one prompt and one answer");
}

/// Past `--max-sessions` live agents, the one idle longest makes room; with
/// every agent running, a new session's prompt gets 503.
#[test]
fn agents_over_the_session_cap_make_room_or_get_503() {
    let p = FakeProvider::start(vec![
        Reply::text("a done"),
        Reply::tool_calls(vec![shell("nap", "sleep 30")]),
        Reply::text("b done"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let server = Server::start(&cmd, &["--max-sessions", "1"]);
    let c = server.client();
    let (a, b, third) = (new_session(&c), new_session(&c), new_session(&c));
    prompt(&c, &a, "a").until("done");
    assert!(live_agent(&c, &a));
    let mut running = prompt(&c, &b, "b");
    running.until("tool_call_start");
    assert!(!live_agent(&c, &a), "a's idle agent was not closed for b");
    let body = json!({ "text": "c" }).to_string();
    let (r, _) = c.sse(
        "POST",
        &format!("/api/sessions/{third}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(retry_after(&r), Some("5"));
    assert!(r.json()["error"].as_str().unwrap().contains("1 sessions"));
    let r = c.post(&format!("/api/sessions/{b}/interrupt"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    running.until("done");
}

/// The server-wide stream cap, set in the config file's `[serve]`: the
/// third stream gets 503 whichever session it follows.
#[test]
fn streams_over_the_server_cap_from_the_config_file_get_503() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config(format!(
        "{}\n[serve]\nmax_streams_total = 2\n",
        fake_config(&p)
    ));
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let ids: Vec<String> = (0..3).map(|_| new_session(&c)).collect();
    let open = |id: &str| c.sse("GET", &format!("/api/sessions/{id}/events"), &[], None);
    let (a, _one) = open(&ids[0]);
    let (b, two) = open(&ids[1]);
    assert_eq!((a.status, b.status), (200, 200));
    let (r, none) = open(&ids[2]);
    assert!(none.is_none());
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(retry_after(&r), Some("5"));
    assert!(r.json()["error"].as_str().unwrap().contains("2 streams"));
    // A closed stream gives its place back.
    drop(two);
    eventually("a closed stream's place is free", || {
        let (r, s) = open(&ids[2]);
        assert!(matches!(r.status, 200 | 503), "{}", r.body);
        s.is_some()
    });
}

#[test]
fn a_zero_limit_in_the_config_file_is_one_clear_error() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config(format!(
        "{}\n[serve]\nmax_connections = 0\n",
        fake_config(&p)
    ));
    let out = cmd.rerun(["serve", "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success());
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(
        errors,
        ["error: config error: serve.max_connections must be at least 1"]
    );
}

/// A client that sends a request's head and then nothing of its body holds
/// its connection only until the idle timeout, not the body's 30 s.
#[test]
fn a_connection_on_which_nothing_moves_is_dropped_after_the_idle_timeout() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--idle-timeout", "1s"]);
    let head = format!(
        "POST /api/sessions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        server.addr
    );
    let mut tcp = support::serve::raw(server.addr, head.as_bytes());
    let (answer, took) = support::serve::until_closed(&mut tcp, Duration::from_secs(8))
        .expect("the stalled client is still connected after 8 s");
    assert!(took >= Duration::from_millis(900), "cut too soon: {took:?}");
    assert!(!answer.contains("408"), "{answer}");
    // A client that keeps reading a quiet stream is not idle: keep-alives
    // come more often than the idle timeout.
    let c = server.client();
    let id = new_session(&c);
    let (r, s) = c.sse("GET", &format!("/api/sessions/{id}/events"), &[], None);
    assert_eq!(r.status, 200);
    let mut s = s.unwrap();
    let stayed = std::time::Instant::now();
    while stayed.elapsed() < Duration::from_secs(3) {
        assert!(s.read_some(), "the reading stream was closed");
    }
}

/// `DELETE /api/sessions/{id}` removes the session's file, passes the same
/// guard as every other change (Origin, token), is refused while the session
/// runs, and never reaches a file outside the session directory.
#[test]
fn a_session_is_deleted_through_the_guard_and_never_while_it_runs() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("c1", "mkdir -v asks-first")]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &["--token", "s3cret-token"]);
    let mut c = server.client();
    c.token = Some("s3cret-token".into());
    let dir = cmd.work_dir().join(".buddyx/sessions");
    let id = new_session(&c);
    let file = dir.join(format!("{id}.jsonl"));
    assert!(file.is_file());
    let path = format!("/api/sessions/{id}");

    // Without the token, or from another origin: refused, the file stays.
    let anon = Client::new(c.addr);
    assert_eq!(anon.delete(&path).status, 401);
    let r = c.request("DELETE", &path, &[("Origin", "http://evil.example")], None);
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(file.is_file());

    // While it runs (here waiting for an approval): 409, still there.
    let mut run = prompt(&c, &id, "make a directory");
    run.until("approval_request");
    let r = c.delete(&path);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.json()["error"].as_str().unwrap().contains("running"));
    assert!(file.is_file());
    answer(&c, &id, "c1", r#"{"approve":false}"#);
    run.until("done");

    // Once the run is over it goes, with nothing left in the listing.
    let r = c.delete(&path);
    assert_eq!(r.status, 204, "{}", r.body);
    assert!(!file.exists());
    let listed = c.get("/api/sessions").json();
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    assert_eq!(c.get(&path).status, 404);
    assert_eq!(c.delete(&path).status, 404);

    // A name that climbs out of the directory names no session.
    let outside = cmd.work_dir().join(".buddyx/victim.jsonl");
    std::fs::write(&outside, "{}\n").unwrap();
    for name in ["..%2Fvictim", "%2E%2E%2Fvictim", ".."] {
        let r = c.delete(&format!("/api/sessions/{name}"));
        assert_eq!(r.status, 404, "{name}: {}", r.body);
    }
    assert!(outside.is_file());
}

/// `GET /api/about` names the model and the directory the server works in.
#[test]
fn about_names_the_model_and_the_directory() {
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let about = server.client().get("/api/about").json();
    let model = about["model"].as_str().unwrap_or_default();
    assert!(!model.is_empty(), "{about}");
    assert!(fake_config(&p).contains(model), "{about}");
    let cwd = std::path::PathBuf::from(about["cwd"].as_str().unwrap_or_default());
    assert_eq!(
        cwd.canonicalize().ok(),
        cmd.work_dir().canonicalize().ok(),
        "{about}"
    );
}

/// A prompt too long for the server's window ends its run failed with the
/// reason, and the session goes on: the next prompt is sent without it and
/// answered (issue 49).
#[test]
fn a_prompt_too_long_for_the_window_fails_its_run_and_the_next_is_answered() {
    use support::fake_provider::{huge_prompt, LLAMA_OVERFLOW};
    let p = FakeProvider::start(vec![
        Reply::status(400, LLAMA_OVERFLOW),
        Reply::text("answered again"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let done = prompt(&c, &id, &huge_prompt()).until("done");
    let outcome = &done.last().unwrap().data["outcome"];
    assert_eq!(outcome["status"], "failed", "{outcome}");
    assert!(
        outcome
            .to_string()
            .contains("context window of 4096 tokens"),
        "{outcome}"
    );
    let done = prompt(&c, &id, "a small follow-up").until("done");
    assert_eq!(
        done.last().unwrap().data["outcome"]["text"],
        "answered again"
    );
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        !reqs[1].body_text().contains("HUGE-PROMPT"),
        "the refused prompt was sent again"
    );
}

/// A sub-agent's progress reaches the event stream, not only its question:
/// its tool calls and their results come as `subagent` events under the
/// parent's `agent` call, before that call's result; its question names it,
/// with the child's call under the parent's (`a1/c1`), and the answer given
/// over HTTP reaches the child, whose command then runs.
#[test]
fn a_childs_calls_and_its_question_stream_under_its_agent_call() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "a1",
            "agent",
            json!({
                "description": "look around",
                "prompt": "Read notes.txt, then run a command (CHILD-MARK).",
                "tools": "all",
            })
            .to_string(),
        )]),
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "r1",
                "read_file",
                json!({ "path": "notes.txt" }).to_string(),
            ),
            shell("c1", "expr child-ran"),
        ])
        .for_marker("CHILD-MARK"),
        Reply::text("the notes say hello").for_marker("CHILD-MARK"),
        Reply::text("The helper looked."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(cmd.work_dir().join("notes.txt"), "hello\n").expect("write");
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let id = new_session(&c);
    let mut stream = prompt(&c, &id, "have a look");
    let before = stream.until("approval_request");
    let ask = &before.last().unwrap().data;
    assert_eq!(ask["call_id"], "a1/c1", "{ask}");
    assert_eq!(ask["subagent"], "look around", "{ask}");
    let r = c.post(
        &format!("/api/sessions/{id}/approvals/a1%2Fc1"),
        r#"{"approve":true}"#,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    let rest = stream.until("done");
    let all: Vec<&SseEvent> = before.iter().chain(&rest).collect();
    let child = |kind: &str, call: &str| {
        all.iter()
            .position(|e| {
                e.event == "subagent"
                    && e.data["call_id"] == "a1"
                    && e.data["description"] == "look around"
                    && e.data["event"]["type"] == kind
                    && e.data["event"]["call_id"] == call
            })
            .unwrap_or_else(|| panic!("no child {kind} of {call} in {all:?}"))
    };
    let parent_result = all
        .iter()
        .position(|e| e.event == "tool_call_result" && e.data["call_id"] == "a1")
        .expect("the agent call's result");
    for call in ["r1", "c1"] {
        assert!(child("tool_call", call) < child("tool_result", call));
        assert!(child("tool_result", call) < parent_result);
    }
    let read = &all[child("tool_result", "r1")].data["event"]["text"];
    assert!(read.as_str().unwrap().contains("hello"), "{read}");
    let ran = &all[child("tool_result", "c1")].data["event"]["text"];
    assert!(ran.as_str().unwrap().contains("child-ran"), "{ran}");
    assert_eq!(all[parent_result].data["text"], "the notes say hello");
}
