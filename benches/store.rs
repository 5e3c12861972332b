//! The session store behind `buddy serve` for docs/PERFORMANCE.md: records
//! appended per second and an append's p99, for the session files and for
//! PostgreSQL (a throwaway server this bench starts on loopback, as
//! tests/serve_cluster.rs does), and an event's latency from one instance
//! storing it to another reading it (NOTIFY, then the row), p99.
//!
//! ```text
//! cargo bench --bench store            # needs PostgreSQL installed, and root
//! ```
//!
//! A file append is a write to the page cache, and a turn's end an fsync; a
//! PostgreSQL append is a committed transaction that does not wait for the
//! WAL's flush, and a turn's end one that does (src/session/postgres/rows.rs).

#[path = "../tests/support/ports.rs"]
mod ports;
#[allow(dead_code)]
#[path = "../tests/support/postgres.rs"]
mod postgres;
// support::postgres asks its parent for a free port, as in the suite.
pub use ports::free_port;

use buddy::agent::{HistorySink, TokenTracker};
use buddy::session::postgres::{Pg, LEASE};
use buddy::session::{SessionInfo, Store};
use buddy::wire::Message;
use std::time::{Duration, Instant};

const APPENDS: usize = 2_000;
const TURN_ENDS: usize = 200;
const EVENTS: usize = 1_000;

fn info() -> SessionInfo {
    SessionInfo {
        model: "bench-model".into(),
        profile: "bench".into(),
        cwd: "/bench".into(),
        secrets: Vec::new(),
        origin: Some("serve".into()),
    }
}

/// An answer of a few lines, as most records are.
fn record(n: usize) -> Message {
    Message::assistant(format!(
        "Step {n}: the build passed on all targets; the two flaky tests were retried once and passed. Next I will look at the release notes."
    ))
}

/// Appends per second and the p99 of one append, over [`APPENDS`].
fn appends(sink: &mut dyn HistorySink) -> (f64, Duration) {
    let tokens = TokenTracker::new(200_000);
    let mut took = Vec::with_capacity(APPENDS);
    let start = Instant::now();
    for n in 0..APPENDS {
        let msg = [record(n)];
        let t = Instant::now();
        sink.save(&msg, &tokens, false).expect("append");
        took.push(t.elapsed());
    }
    let rate = APPENDS as f64 / start.elapsed().as_secs_f64();
    (rate, p99(&mut took))
}

/// The p99 of a turn's end (a record and its turn mark, made durable: an
/// fsync of the file, a durable commit of the rows), over [`TURN_ENDS`].
fn turn_ends(sink: &mut dyn HistorySink) -> Duration {
    let tokens = TokenTracker::new(200_000);
    let mut took = Vec::with_capacity(TURN_ENDS);
    for n in 0..TURN_ENDS {
        let msg = [record(n)];
        let t = Instant::now();
        sink.save(&msg, &tokens, true).expect("turn end");
        took.push(t.elapsed());
    }
    p99(&mut took)
}

fn p99(took: &mut [Duration]) -> Duration {
    took.sort();
    took[(took.len() * 99 / 100).min(took.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("buddy-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = Store::at(dir.join("sessions"));
    let (mut session, _) = files.create(info()).expect("a session file");
    let (rate, p) = appends(&mut session);
    let end = turn_ends(&mut session);
    println!(
        "file store: {rate:.0} appends/s, append p99 {}; turn end p99 {}",
        ms(p),
        ms(end)
    );
    drop(session);

    let Some(pg) = postgres::Postgres::start("bench_store") else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let connect = || {
        rt.block_on(Pg::connect(&pg.url(), LEASE))
            .expect("connect to PostgreSQL")
    };
    let (b, c) = (connect(), connect());
    let mut session = b.create(info()).expect("a session row");
    let (rate, p) = appends(&mut session);
    let end = turn_ends(&mut session);
    println!(
        "postgres store: {rate:.0} appends/s, append p99 {}; turn end p99 {}",
        ms(p),
        ms(end)
    );

    // An event stored by instance B, announced, read by instance C.
    let id = session.id().to_string();
    let mut announced = c.announced();
    let mut took = Vec::with_capacity(EVENTS);
    let data = r#"{"type":"text_delta","text":"the build passed on all targets"}"#;
    for _ in 0..EVENTS {
        let t = Instant::now();
        b.append_event(&id, data.to_string());
        rt.block_on(async {
            let (_, n) = announced.recv().await.expect("an announcement");
            let rows = c
                .events_between(&id, n - 1, n + 1, 1)
                .await
                .expect("the event's row");
            assert_eq!(rows.len(), 1);
        });
        took.push(t.elapsed());
    }
    println!(
        "postgres cross-instance event: p99 {} (median {})",
        ms(p99(&mut took)),
        ms(took[took.len() / 2])
    );
    drop(session);
    drop(pg);
    let _ = std::fs::remove_dir_all(&dir);
}
