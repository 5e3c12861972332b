//! `buddy serve --store postgres://…` when its database goes away: calls
//! made meanwhile are answered 503 with `Retry-After` at once, the server
//! reconnects by itself, a follower that followed across the outage gets
//! every event, and events that could not be stored are counted in
//! `/metrics` and stored once the database is back. The URL's password
//! never reaches stderr.

use crate::support;
use serde_json::json;
use std::time::{Duration, Instant};
use support::fake_provider::{FakeProvider, Gate, Reply};
use support::http::{Client, SseEvent, SseStream};
use support::postgres::Postgres;
use support::prometheus;
use support::serve::Server;
use support::wait::poll_every;
use support::BuddyCmd;

/// PostgreSQL here trusts every local connection, so the password is only
/// there to be kept out of what buddy prints.
const PASSWORD: &str = "pw-never-shown";

fn url(pg: &Postgres) -> String {
    format!(
        "postgres://postgres:{PASSWORD}@127.0.0.1:{}/postgres",
        pg.port
    )
}

fn new_session(c: &Client) -> String {
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["id"].as_str().unwrap().to_string()
}

/// A prompt's stream, or the refusal's status and whether it said when to
/// retry.
fn try_prompt(c: &Client, id: &str, text: &str) -> Result<SseStream, (u16, bool, String)> {
    let body = json!({ "text": text }).to_string();
    let (r, s) = c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    match s {
        Some(s) if r.status == 200 => Ok(s),
        _ => Err((r.status, r.header("retry-after").is_some(), r.body)),
    }
}

fn follow(c: &Client, id: &str, last: u64) -> SseStream {
    let last = last.to_string();
    let (r, s) = c.sse(
        "GET",
        &format!("/api/sessions/{id}/events"),
        &[("Last-Event-ID", &last)],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    s.unwrap()
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.expect("an event id")).collect()
}

/// A call while the database is down: 503 with `Retry-After`, quickly.
fn refused_while_down(c: &Client) {
    let asked = Instant::now();
    let r = c.get("/api/sessions");
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
    assert!(r.body.contains("session database"), "{}", r.body);
    assert!(!r.body.contains(PASSWORD), "{}", r.body);
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
}

/// Prompts until the server takes it (it reconnects with backoff: the first
/// tries may be refused, with 503 and `Retry-After`).
fn prompt_once_back(c: &Client, id: &str, text: &str) -> SseStream {
    poll_every(
        Duration::from_millis(200),
        Duration::from_secs(30),
        || match try_prompt(c, id, text) {
            Ok(s) => Some(s),
            Err((503, true, _)) => None,
            Err((status, retry, body)) => panic!("{status} (Retry-After: {retry}): {body}"),
        },
    )
    .expect("a prompt is taken once the database is back")
}

fn assert_continuous(got: &[u64]) {
    assert!(
        got.windows(2).all(|w| w[1] == w[0] + 1),
        "ids with a gap or twice: {got:?}"
    );
}

#[test]
fn a_restarted_database_is_reconnected_and_a_follower_across_it_misses_no_event() {
    let test = "serve_store_restart";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let p = FakeProvider::start_repeating(vec![Reply::text("an answer")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let url = url(&pg);
    let mut a = Server::start(&cmd, &["--store", &url]);
    let b = Server::start(&cmd, &["--store", &url]);
    let (ca, cb) = (a.client(), b.client());
    let id = new_session(&ca);
    let first = match try_prompt(&ca, &id, "first question") {
        Ok(mut s) => s.until("done"),
        Err(e) => panic!("{e:?}"),
    };
    let last = *ids(&first).last().unwrap();
    // B follows from the last event it saw, across the restart.
    let mut on_b = follow(&cb, &id, last);

    pg.stop();
    refused_while_down(&ca);
    refused_while_down(&cb);
    pg.start_again();

    let second = prompt_once_back(&ca, &id, "second question").until("done");
    assert_eq!(ids(&second)[0], last + 1, "ids go on from the first run's");
    assert_continuous(&ids(&second));
    let seen = on_b.until("done");
    assert_eq!(ids(&seen), ids(&second), "B saw every event of A's run");
    // B works on its own again too.
    let third = prompt_once_back(&cb, &id, "third question").until("done");
    assert_eq!(ids(&third)[0], ids(&second).last().unwrap() + 1);

    let stderr = a.terminate_for_stderr();
    assert!(
        stderr.contains("lost the session database postgres://postgres:***@127.0.0.1"),
        "{stderr}"
    );
    assert!(stderr.contains("is back after"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}

#[test]
fn events_that_fail_to_be_stored_are_counted_and_stored_when_the_database_is_back() {
    let test = "serve_store_failed_events";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let held = Gate::new();
    let p = FakeProvider::start_repeating(vec![Reply::text("late answer").gated(&held)]);
    let cmd = BuddyCmd::new().config_for(&p);
    let url = url(&pg);
    let mut a = Server::start(&cmd, &["--store", &url]);
    let c = a.client();
    let id = new_session(&c);
    let errors = |c: &Client| {
        let r = c.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        let samples = prometheus::parse(&r.body);
        prometheus::value(
            &samples,
            "buddy_serve_store_errors_total",
            &[("kind", "event")],
        )
    };
    assert_eq!(errors(&c), 0.0);
    let mut run = match try_prompt(&c, &id, "a question") {
        Ok(s) => s,
        Err(e) => panic!("{e:?}"),
    };
    let mut seen = run.until("model_request");
    p.wait_for_requests(1, Duration::from_secs(10));

    // The database goes away in the middle of the run; the model answers.
    pg.stop();
    held.open();
    let counted = poll_every(Duration::from_millis(50), Duration::from_secs(20), || {
        let n = errors(&c);
        (n > 0.0).then_some(n)
    })
    .expect("failed event inserts are counted");
    assert!(counted >= 1.0);
    refused_while_down(&c);

    pg.start_again();
    // The held events are stored in order and reach the client.
    seen.extend(run.until("done"));
    let got = ids(&seen);
    assert_continuous(&got);
    let stored = pg.query(&format!(
        "SELECT count(*) = max(id) AND min(id) = 1 FROM buddy_events WHERE session_id = '{id}'"
    ));
    assert_eq!(
        stored, "t",
        "every event stored once, numbered without a gap"
    );
    let top: u64 = pg
        .query(&format!(
            "SELECT max(id) FROM buddy_events WHERE session_id = '{id}'"
        ))
        .parse()
        .unwrap();
    assert_eq!(top, *got.last().unwrap());
    // The count stays (a counter never goes down).
    assert!(errors(&c) >= counted);

    let stderr = a.terminate_for_stderr();
    assert!(
        stderr.contains("could not store an event of session"),
        "{stderr}"
    );
    assert!(stderr.contains("events are stored again"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}
