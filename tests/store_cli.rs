//! The command line reading a session database (`--store postgres://…`,
//! or `BUDDY_STORE`): `buddy sessions` lists its sessions, `buddy export`
//! writes one out, `buddy resume` continues one under its lease (refused,
//! naming the holder, while an instance holds it). A real PostgreSQL,
//! written by a real `buddy serve`.

use crate::support;
use serde_json::json;
use support::fake_provider::{FakeProvider, Reply};
use support::postgres::Postgres;
use support::serve::Server;
use support::BuddyCmd;

#[test]
fn sessions_export_and_resume_read_the_database_and_resume_takes_the_lease() {
    let test = "store_cli";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let p = FakeProvider::start(vec![
        Reply::text("first answer"),
        Reply::text("second answer"),
    ]);
    let url = pg.url();
    let cmd = BuddyCmd::new().config_for(&p).stdin("second question\n");
    // A session made and run by a server.
    let id = {
        let server = Server::start(&cmd, &["--store", &url]);
        let c = server.client();
        let r = c.post("/api/sessions", "{}");
        assert_eq!(r.status, 201, "{}", r.body);
        let id = r.json()["id"].as_str().unwrap().to_string();
        let body = json!({ "text": "first question" }).to_string();
        let (r, s) = c.sse(
            "POST",
            &format!("/api/sessions/{id}/messages"),
            &[],
            Some(&body),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        s.unwrap().until("done");
        id
    };

    // The directory has no session files; the database has the session.
    let files = cmd.rerun(["sessions"]);
    files.assert_success();
    assert!(!files.stdout.contains(&id[..8]), "{}", files.stdout);
    let listed = cmd.rerun(["sessions", "--store", &url]);
    listed.assert_success();
    assert!(
        listed.stdout.contains("first question"),
        "{}",
        listed.stdout
    );

    let exported = cmd.rerun(["export", "--store", &url, &id, "--format", "json"]);
    exported.assert_success();
    let doc: serde_json::Value = serde_json::from_str(&exported.stdout).unwrap();
    assert_eq!(doc["id"], id.as_str());
    assert!(doc.to_string().contains("first answer"), "{doc}");

    // The variable stands for the flag.
    let by_env = BuddyCmd::new()
        .env("BUDDY_STORE", &url)
        .args(["export", "--last"])
        .run();
    by_env.assert_success();
    assert!(
        by_env.stdout.contains("first question"),
        "{}",
        by_env.stdout
    );

    // Held by an instance: refused, naming it; nothing written.
    pg.query(&format!(
        "INSERT INTO buddy_leases (session_id, holder, expires)
         VALUES ('{id}', 'otherhost:42:beef#0', now() + interval '1 hour') RETURNING 1"
    ));
    let records = || -> u64 {
        pg.query(&format!(
            "SELECT count(*) FROM buddy_records WHERE session_id = '{id}'"
        ))
        .parse()
        .unwrap()
    };
    let before = records();
    let refused = cmd.rerun(["resume", "--store", &url, &id]);
    assert_ne!(refused.code(), Some(0), "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("running on another instance (otherhost:42:beef)"),
        "{}",
        refused.stderr
    );
    assert_eq!(records(), before);
    assert_eq!(p.chat_requests().len(), 1);

    // Free: continued from the command line, written to the database, the
    // lease given back at the end.
    pg.query(&format!(
        "DELETE FROM buddy_leases WHERE session_id = '{id}' RETURNING 1"
    ));
    let resumed = cmd.rerun(["resume", "--store", &url, &id]);
    resumed.assert_success();
    assert!(
        resumed.stdout.contains("second answer"),
        "{}",
        resumed.stdout
    );
    let sent = p.chat_requests();
    assert_eq!(sent.len(), 2);
    assert!(sent[1].body_text().contains("first question"));
    let lines = pg.query(&format!(
        "SELECT string_agg(line, '\n' ORDER BY seq) FROM buddy_records WHERE session_id = '{id}'"
    ));
    assert!(lines.contains("second question"), "{lines}");
    assert!(lines.contains("second answer"), "{lines}");
    let leases = pg.query(&format!(
        "SELECT count(*) FROM buddy_leases WHERE session_id = '{id}'"
    ));
    assert_eq!(leases, "0");
    assert!(
        !resumed.stderr.contains("postgres://"),
        "{}",
        resumed.stderr
    );
}
