//! Several `buddy serve` instances sharing sessions in a real PostgreSQL,
//! behind a real HAProxy: a session created on one is continued on
//! another and followed from a third; a run whose instance is killed loses
//! no event and no record, and the session is free again within the lease.
//! With users, a session is its creator's on every instance, and a user's
//! running limit and daily spending are counted across the instances.

use crate::support;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::balancer::Balancer;
use support::calls::{call, config_no_confirm};
use support::fake_provider::{FakeProvider, Gate, Reply};
use support::http::{Client, SseEvent, SseStream};
use support::postgres::Postgres;
use support::serve::Server;
use support::wait::poll_every;
use support::{fake_config, BuddyCmd};

fn new_session(c: &Client) -> String {
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["id"].as_str().unwrap().to_string()
}

fn prompt(c: &Client, id: &str, text: &str) -> SseStream {
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

fn follow(c: &Client, id: &str, last: Option<u64>) -> SseStream {
    let last = last.map(|n| n.to_string());
    let headers: Vec<(&str, &str)> = last
        .as_deref()
        .map(|n| vec![("Last-Event-ID", n)])
        .unwrap_or_default();
    let (r, s) = c.sse("GET", &format!("/api/sessions/{id}/events"), &headers, None);
    assert_eq!(r.status, 200, "{}", r.body);
    s.unwrap()
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.expect("an event id")).collect()
}

/// The instances share one database, the directory and the config.
fn cluster(pg: &Postgres, cmd: &BuddyCmd, n: usize, lease: &str) -> Vec<Server> {
    let url = pg.url();
    (0..n)
        .map(|_| Server::start(cmd, &["--store", &url, "--lease", lease]))
        .collect()
}

#[test]
fn a_session_made_on_one_instance_continues_on_another_and_is_followed_from_a_third() {
    let test = "serve_cluster_continue";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let p = FakeProvider::start(vec![Reply::text("one"), Reply::text("two")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let servers = cluster(&pg, &cmd, 3, "15s");
    let addrs: Vec<_> = servers.iter().map(|s| s.addr).collect();
    let Some(lb) = Balancer::start(test, &addrs) else {
        return;
    };
    let (a, b, c) = (
        servers[0].client(),
        servers[1].client(),
        servers[2].client(),
    );
    let id = new_session(&a);
    // Every instance knows it at once, and lists it.
    for s in [&b, &c, &Client::new(lb.addr)] {
        let list = s.get("/api/sessions").json();
        assert!(list.to_string().contains(&id), "{list}");
    }
    let first = prompt(&a, &id, "first question").until("done");
    assert_eq!(first.last().unwrap().data["outcome"]["text"], "one");
    // Followed from C, directly and through the balancer, while B runs.
    let last = *ids(&first).last().unwrap();
    let mut from_c = follow(&c, &id, Some(last));
    let mut via_lb = follow(&Client::new(lb.addr), &id, Some(last));
    let second = prompt(&b, &id, "second question").until("done");
    assert_eq!(second.last().unwrap().data["outcome"]["text"], "two");
    // B's model saw A's turn: one conversation.
    let sent = p.chat_requests();
    assert!(
        sent[1].body_text().contains("first question"),
        "{}",
        sent[1].body_text()
    );
    let on_c = from_c.until("done");
    let on_lb = via_lb.until("done");
    assert_eq!(ids(&on_c), ids(&second), "C saw B's run as B's client did");
    assert_eq!(ids(&on_lb), ids(&second));
    // Event ids go on from A's run without a gap.
    assert_eq!(ids(&second)[0], last + 1);
    // The history reads the same everywhere, each prompt once.
    for s in [&a, &b, &c] {
        let h = s.get(&format!("/api/sessions/{id}")).body;
        assert_eq!(h.matches("first question").count(), 1, "{h}");
        assert_eq!(h.matches("second question").count(), 1, "{h}");
    }
    let rows: u64 = pg
        .query(&format!(
            "SELECT count(*) FROM buddy_records WHERE session_id = '{id}'"
        ))
        .parse()
        .unwrap();
    let top: u64 = pg
        .query(&format!(
            "SELECT max(seq) + 1 FROM buddy_records WHERE session_id = '{id}'"
        ))
        .parse()
        .unwrap();
    assert_eq!(rows, top, "records are numbered 0..n without a gap");
}

#[test]
fn killing_the_instance_running_a_turn_loses_no_event_and_frees_the_session_within_the_lease() {
    let test = "serve_cluster_kill";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let held = Gate::new();
    let p = FakeProvider::start_repeating(vec![Reply::text("slow answer").gated(&held)]);
    let cmd = BuddyCmd::new().config_for(&p);
    let lease = Duration::from_secs(3);
    let mut servers = cluster(&pg, &cmd, 3, "3s");
    let addrs: Vec<_> = servers.iter().map(|s| s.addr).collect();
    let Some(lb) = Balancer::start(test, &addrs) else {
        return;
    };
    let a = servers[0].client();
    let id = new_session(&a);
    // The run on B, held at its model request; its client follows it there.
    let b = servers[1].client();
    let mut on_b = prompt(&b, &id, "first question");
    let mut seen = on_b.until("model_request");
    p.wait_for_requests(1, Duration::from_secs(10));
    // A second prompt elsewhere meanwhile is refused: B holds the session.
    let body = json!({ "text": "too early" }).to_string();
    let (r, _) = a.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("another instance"), "{}", r.body);

    let killed = servers.remove(1);
    kill_9(killed);
    let dead = Instant::now();
    // Whatever B stored before it died reaches the client that reconnects
    // through the balancer with the last id it saw.
    let last = *ids(&seen).last().unwrap();
    let lb_client = Client::new(lb.addr);
    let mut again = follow(&lb_client, &id, Some(last));
    held.open();
    // Free again within the lease (plus a renewal period and some slack).
    // Each refused try is a prompt with an agent built for it: not too often.
    let resumed = poll_every(Duration::from_millis(200), lease * 3, || {
        let body = json!({ "text": "second question" }).to_string();
        let (r, s) = lb_client.sse(
            "POST",
            &format!("/api/sessions/{id}/messages"),
            &[],
            Some(&body),
        );
        match r.status {
            200 => s,
            409 => {
                assert!(r.body.contains("another instance"), "{}", r.body);
                None
            }
            // The balancer had not yet seen that B is gone.
            502 | 503 => None,
            other => panic!("{other}: {}", r.body),
        }
    })
    .expect("the session takes a prompt again within three lease bounds");
    let free_after = dead.elapsed();
    assert!(
        // The bound, and time for a try's agent to be built on a busy machine.
        free_after < lease + Duration::from_secs(5),
        "{free_after:?}"
    );
    eprintln!("the session took a prompt again {free_after:?} after the kill");
    let mut run = resumed;
    run.until("done");
    seen.extend(again.until("done"));
    // No event lost or twice: the ids the client saw are the stored ones,
    // each once, in order.
    let got = ids(&seen);
    let unique: BTreeSet<u64> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "an event came twice: {got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
    let stored: Vec<u64> = pg
        .query(&format!(
            "SELECT string_agg(id::text, ',' ORDER BY id) FROM buddy_events WHERE session_id = '{id}' AND id >= {}",
            got[0]
        ))
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let through: Vec<u64> = stored
        .iter()
        .copied()
        .filter(|n| n <= got.last().unwrap())
        .collect();
    // The refused prompt on A published its refusal too; the client saw it.
    assert_eq!(got, through, "the client saw every stored event");
    // No record lost or twice: numbered without a gap, each prompt once.
    let check = pg.query(&format!(
        "SELECT count(*) = max(seq) + 1 FROM buddy_records WHERE session_id = '{id}'"
    ));
    assert_eq!(check, "t");
    let h = a.get(&format!("/api/sessions/{id}")).body;
    assert_eq!(h.matches("first question").count(), 1, "{h}");
    assert_eq!(h.matches("second question").count(), 1, "{h}");
    assert_eq!(h.matches("slow answer").count(), 1, "{h}");
}

/// Session `id`'s turns as instance `c` lists them.
fn turns(c: &Client, id: &str) -> Vec<Value> {
    let r = c.get(&format!("/api/sessions/{id}/turns"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["turns"].as_array().cloned().unwrap_or_default()
}

/// Puts the files back to before `turn` from instance `c`.
fn rewind_code(c: &Client, id: &str, turn: &str) -> Value {
    let r = c.post_json(
        &format!("/api/sessions/{id}/rewind"),
        &json!({ "turn": turn, "code": true }),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn a_file_a_tool_changed_on_one_instance_is_rewound_from_another_and_the_rewind_undone_from_the_first(
) {
    let test = "serve_cluster_rewind";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let p = FakeProvider::start(vec![
        call(
            "w1",
            "write_file",
            json!({ "path": "notes.txt", "content": "written by the tool\n" }),
        ),
        Reply::text("written"),
    ]);
    // Both instances work in the same directory, as a team's would on a
    // shared volume: the tools change files where the instance runs.
    let cmd = BuddyCmd::new().config(config_no_confirm(&p, ""));
    let notes = cmd.work_dir().join("notes.txt");
    std::fs::write(&notes, "the user's own text\n").unwrap();
    let servers = cluster(&pg, &cmd, 2, "15s");
    let (a, b) = (servers[0].client(), servers[1].client());
    let id = new_session(&a);
    prompt(&a, &id, "change notes.txt").until("done");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "written by the tool\n"
    );
    // The checkpoint is in the database, not in A's directory.
    let rows = pg.query(&format!(
        "SELECT count(*) FROM buddy_checkpoints WHERE session_id = '{id}'"
    ));
    assert_eq!(rows, "1");
    let blob = pg.query(&format!(
        "SELECT convert_from(content, 'UTF8') FROM buddy_checkpoint_blobs WHERE session_id = '{id}'"
    ));
    assert_eq!(blob.trim_end(), "the user's own text");
    let sessions = cmd.work_dir().join(".buddyx/sessions");
    let local: Vec<_> = std::fs::read_dir(&sessions)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !local
            .iter()
            .any(|n| n.to_string_lossy().ends_with(".checkpoints")),
        "{local:?}"
    );

    // B lists A's turn with the file to put back, and puts it back.
    let listed = turns(&b, &id);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let turn = listed[0]["turn"].as_str().unwrap().to_string();
    assert_eq!(listed[0]["files"][0]["action"], "restore", "{listed:?}");
    let done = rewind_code(&b, &id, &turn);
    assert_eq!(done["files"][0]["action"], "restore", "{done}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "the user's own text\n"
    );
    // B's undo point is a row too: A takes the rewind back.
    let listed = turns(&a, &id);
    let undo = listed.last().unwrap();
    assert!(
        undo["turn"].as_str().unwrap().starts_with("!undo-"),
        "{listed:?}"
    );
    let undone = rewind_code(&a, &id, undo["turn"].as_str().unwrap());
    assert_eq!(undone["files"][0]["action"], "restore", "{undone}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "written by the tool\n"
    );
    // Followers heard of both rewinds; the session takes prompts again.
    let stored = pg.query(&format!(
        "SELECT count(*) FROM buddy_events WHERE session_id = '{id}' AND data LIKE '%\"rewound\"%'"
    ));
    assert_eq!(stored, "2");
    let leases = pg.query(&format!(
        "SELECT count(*) FROM buddy_leases WHERE session_id = '{id}'"
    ));
    assert_eq!(leases, "0", "a rewind gives the session back");
}

#[test]
fn an_image_attached_on_one_instance_reaches_the_model_from_another() {
    use base64::Engine;
    let test = "serve_cluster_image";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let p = FakeProvider::start(vec![Reply::text("a chart"), Reply::text("still a chart")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let servers = cluster(&pg, &cmd, 2, "15s");
    let (a, b) = (servers[0].client(), servers[1].client());
    let id = new_session(&a);
    let png = b"\x89PNG\r\n\x1a\nnot much of a picture, but a PNG by its first bytes".to_vec();
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    let body = json!({
        "text": "what is in this picture?",
        "images": [{ "name": "shots/chart.png", "data": data }],
    })
    .to_string();
    let (r, s) = a.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    s.unwrap().until("done");
    // The copy is a row, not a file of A's directory.
    let kept = pg.query(&format!(
        "SELECT count(*) FROM buddy_images WHERE session_id = '{id}' AND length(content) = {}",
        png.len()
    ));
    assert_eq!(kept, "1");
    assert!(!cmd
        .work_dir()
        .join(format!(".buddyx/sessions/{id}.images"))
        .exists());
    prompt(&b, &id, "and the colours?").until("done");
    let sent = p.chat_requests();
    assert_eq!(sent.len(), 2);
    assert!(sent[0].body_text().contains(&data), "A sent the image");
    assert!(
        sent[1].body_text().contains(&data),
        "B's request carries the image attached on A: {}",
        sent[1].body_text()
    );
    // The history names it by its file name alone.
    let h = b.get(&format!("/api/sessions/{id}")).body;
    assert!(h.contains("chart.png") && !h.contains("shots/"), "{h}");
}

fn kill_9(server: Server) {
    let pid = server.pid();
    let ok = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -9 {pid}");
    drop(server);
}

/// A user's token in these tests: their name and a suffix.
fn token_of(user: &str) -> String {
    format!("{user}-token-for-the-cluster")
}

/// `[serve]` with `serve` in it, then `[serve.users]` for `users` (each
/// token's hash, as `buddy serve add-user` stores it).
fn team_config(p: &FakeProvider, serve: &str, users: &[&str]) -> String {
    let mut toml = format!("{}\n[serve]\n{serve}\n[serve.users]\n", fake_config(p));
    for user in users {
        let digest = ring::digest::digest(&ring::digest::SHA256, token_of(user).as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        toml.push_str(&format!("{user} = \"sha256:{hex}\"\n"));
    }
    toml
}

/// Two instances on one database, each in a directory of its own (as on
/// two machines: no file is shared), with the same config.
fn two_machines(pg: &Postgres, config: &str, lease: &str) -> (Server, Server) {
    let url = pg.url();
    let start = || {
        let cmd = BuddyCmd::new().config(config);
        Server::start(&cmd, &["--store", &url, "--lease", lease])
    };
    (start(), start())
}

fn as_user(server: &Server, user: &str) -> Client {
    let mut c = server.client();
    c.token = Some(token_of(user));
    c
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

fn post_prompt(c: &Client, id: &str, text: &str) -> support::http::Response {
    let body = json!({ "text": text }).to_string();
    c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    )
    .0
}

#[test]
fn a_session_is_its_creators_on_every_instance_and_nobody_elses() {
    let test = "serve_cluster_owners";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let p = FakeProvider::start_repeating(vec![Reply::text("hello alice")]);
    let (a, b) = two_machines(&pg, &team_config(&p, "", &["alice", "bob"]), "15s");
    let id = new_session(&as_user(&a, "alice"));
    // On B, bob is answered as if it did not exist, and lists nothing.
    let bob = as_user(&b, "bob");
    assert!(listed(&bob).is_empty());
    for (method, path, body) in [
        ("GET", format!("/api/sessions/{id}"), None),
        ("DELETE", format!("/api/sessions/{id}"), None),
        (
            "POST",
            format!("/api/sessions/{id}/messages"),
            Some(r#"{"text":"let me in"}"#),
        ),
    ] {
        let r = bob.request(method, &path, &[], body);
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    let r = bob.post_json("/api/sessions", &json!({ "resume": id }));
    assert_eq!(r.status, 404, "{}", r.body);
    // Alice lists it on B and continues it there.
    let alice = as_user(&b, "alice");
    assert_eq!(listed(&alice), [id.as_str()]);
    let done = prompt(&alice, &id, "hi from B").until("done");
    assert_eq!(done.last().unwrap().data["outcome"]["text"], "hello alice");
    // Bob's own session is his alone, wherever he made it.
    let his = new_session(&bob);
    assert_eq!(listed(&as_user(&a, "bob")), [his.as_str()]);
    assert_eq!(listed(&as_user(&a, "alice")), [id.as_str()]);
    // The owner is the session row's, not a file's of either instance.
    let owner = format!("SELECT owner FROM buddy_sessions WHERE id = '{id}'");
    assert_eq!(pg.query(&owner), "alice");
}

#[test]
fn a_user_at_their_running_limit_on_one_instance_gets_429_on_another() {
    let test = "serve_cluster_running";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let held = Gate::new();
    let p = FakeProvider::start_repeating(vec![Reply::text("slow answer").gated(&held)]);
    let config = team_config(&p, "user_max_running = 1", &["alice", "bob"]);
    let (a, b) = two_machines(&pg, &config, "15s");
    let (alice_a, alice_b) = (as_user(&a, "alice"), as_user(&b, "alice"));
    let first = new_session(&alice_a);
    let second = new_session(&alice_b);
    let mut running = prompt(&alice_a, &first, "one");
    running.until("model_request");
    let r = post_prompt(&alice_b, &second, "two");
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("5"));
    let why = r.json()["error"].as_str().unwrap().to_string();
    assert!(why.contains("user alice has 1 sessions running"), "{why}");
    // Bob's limit is his own.
    let bob = as_user(&b, "bob");
    let theirs = new_session(&bob);
    let mut other = prompt(&bob, &theirs, "three");
    other.until("model_request");
    held.open();
    for s in [&mut running, &mut other] {
        assert_eq!(
            s.until("done").last().unwrap().data["outcome"]["text"],
            "slow answer"
        );
    }
    // Alice's run on A is over: B takes her next prompt at once.
    prompt(&alice_b, &second, "two again").until("done");
    assert_eq!(pg.query("SELECT count(*) FROM buddy_runs"), "0");
}

#[test]
fn spending_on_one_instance_counts_against_the_daily_limit_on_another() {
    let test = "serve_cluster_spending";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    // $2 and $10 per million tokens: a 1000 + 100 token reply costs $0.003.
    let p = FakeProvider::start_repeating(vec![Reply::text("paid").with_usage(1000, 100)]);
    let config = team_config(&p, "user_daily_usd = 0.002", &["alice", "bob"]).replace(
        "[models.fake]\n",
        "[models.fake]\nprice = { input = 2.0, output = 10.0 }\n",
    );
    let (a, b) = two_machines(&pg, &config, "15s");
    let (alice_a, alice_b) = (as_user(&a, "alice"), as_user(&b, "alice"));
    let id = new_session(&alice_a);
    prompt(&alice_a, &id, "spend").until("done");
    // A session of hers made on B: B knows it whatever it knows of A's.
    let on_b = new_session(&alice_b);
    let r = post_prompt(&alice_b, &on_b, "spend more on B");
    assert_eq!(r.status, 429, "{}", r.body);
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    let why = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        why.contains("$0.0030") && why.contains("daily limit"),
        "{why}"
    );
    // Bob's day is his own, on either instance.
    let bob = as_user(&b, "bob");
    let theirs = new_session(&bob);
    prompt(&bob, &theirs, "spend").until("done");
}

#[test]
fn the_runs_of_a_killed_instance_stop_counting_after_the_lease() {
    let test = "serve_cluster_runs_lapse";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let held = Gate::new();
    let p = FakeProvider::start_repeating(vec![Reply::text("slow answer").gated(&held)]);
    let config = team_config(&p, "user_max_running = 1", &["alice"]);
    let lease = Duration::from_secs(3);
    let (a, b) = two_machines(&pg, &config, "3s");
    let (alice_a, alice_b) = (as_user(&a, "alice"), as_user(&b, "alice"));
    let first = new_session(&alice_a);
    let second = new_session(&alice_b);
    let mut running = prompt(&alice_a, &first, "one");
    running.until("model_request");
    kill_9(a);
    let dead = Instant::now();
    held.open();
    // A's run holds her place until its row lapses: refused meanwhile (a
    // refusal builds no agent, so trying often costs little).
    let mut refused = 0;
    let mut run = poll_every(Duration::from_millis(100), lease * 3, || {
        let body = json!({ "text": "two" }).to_string();
        let (r, s) = alice_b.sse(
            "POST",
            &format!("/api/sessions/{second}/messages"),
            &[],
            Some(&body),
        );
        match r.status {
            200 => s,
            429 => {
                refused += 1;
                None
            }
            other => panic!("{other}: {}", r.body),
        }
    })
    .expect("her place is free again within three lease bounds");
    let free_after = dead.elapsed();
    assert!(refused > 0, "the dead instance's run counted at first");
    assert!(
        free_after < lease + Duration::from_secs(5),
        "{free_after:?}"
    );
    run.until("done");
}
