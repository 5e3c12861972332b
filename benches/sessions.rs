//! Session store figures for docs/PERFORMANCE.md: listing 200 sessions, loading a
//! 5,000-message (~20 MB) session, the cost of saving one turn at turn 10
//! and at turn 5,000 of a session, and reading the rows of `buddy resume`'s
//! picker for 1,000 sessions.
//!
//! ```text
//! cargo bench --bench sessions                 # prints the figures
//! cargo bench --bench sessions -- --keep DIR   # also leaves DIR/.buddyx/sessions
//! ```
//!
//! With `--keep`, `DIR` can then be used as a working directory for timing the
//! binary (`buddy sessions`, `buddy exec --resume big …`), as `bench/run.sh` does.

use buddy::agent::{HistorySink, TokenTracker};
use buddy::session::{SessionInfo, Store};
use buddy::wire::{Message, ToolCall};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const BIG_MESSAGES: usize = 5_000;
const SMALL_SESSIONS: usize = 199;
const SMALL_MESSAGES: usize = 20;
const PICKER_SESSIONS: usize = 1_000;

fn info() -> SessionInfo {
    SessionInfo {
        model: "bench-model".into(),
        profile: "bench".into(),
        cwd: "/bench".into(),
        secrets: vec!["sk-bench-not-a-real-key".into()],
        origin: None,
    }
}

/// One turn of four messages; the tool result is about 15,000 characters of
/// command output, as a capped `run_shell` result would be.
fn turn(n: usize) -> Vec<Message> {
    let mut call = Message::assistant("");
    call.content = None;
    call.tool_calls = Some(vec![ToolCall::new(
        format!("call_{n}"),
        "run_shell",
        format!(
            "{{\"command\":\"ls -la /var/log/app{n} && tail -n 200 /var/log/app{n}/current\"}}"
        ),
    )]);
    let mut output = String::from("exit code: 0\nstdout:\n");
    let mut line = 0;
    while output.len() < 15_000 {
        output.push_str(&format!(
            "2026-11-23T10:{:02}:{:02}Z app[{n}] request id={line:06} path=\"/api/v1/items\" status=200 took={}ms\n",
            line % 60,
            (line * 7) % 60,
            line % 97
        ));
        line += 1;
    }
    vec![
        Message::user(format!(
            "Turn {n}: look at the logs of app{n} and tell me whether anything failed in the last hour."
        )),
        call,
        Message::tool_result(format!("call_{n}"), output),
        Message::assistant(format!(
            "Nothing failed for app{n}: all {line} requests in the last hour returned 200, the slowest took 96 ms."
        )),
    ]
}

fn tokens(turns: usize) -> TokenTracker {
    let mut t = TokenTracker::new(200_000);
    for _ in 0..turns {
        t.record(4_000, 60);
    }
    t
}

fn write_session(store: &Store, messages: usize) -> String {
    let (mut s, _) = store.create(info()).expect("create session");
    let mut written = 0;
    let mut n = 0;
    while written < messages {
        let t = turn(n);
        let take = t.len().min(messages - written);
        s.save(&t[..take], &tokens(n + 1), true).expect("save turn");
        written += take;
        n += 1;
    }
    s.id().to_string()
}

fn stats(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<52} min {:8.2} ms   median {:8.2} ms   ({} runs)",
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        samples.len()
    );
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Vec<Duration> {
    (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            std::hint::black_box(f());
            t0.elapsed()
        })
        .collect()
}

/// Saving one whole turn (four messages, a turn mark and the fsync) `runs` times.
fn save_turns(store: &Store, id: &str, runs: usize) -> (Vec<Duration>, Vec<Duration>) {
    let mut opened = store.open(id, info()).expect("open");
    let base = opened.history.len() / 4;
    let mut with_sync = Vec::new();
    let mut write_only = Vec::new();
    for i in 0..runs {
        let t = turn(base + i);
        let t0 = Instant::now();
        opened.session.save(&t, &tokens(1), false).expect("save");
        let write = t0.elapsed();
        let t1 = Instant::now();
        opened.session.save(&[], &tokens(1), true).expect("sync");
        write_only.push(write);
        with_sync.push(write + t1.elapsed());
    }
    (write_only, with_sync)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut keep: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        if a == "--keep" {
            keep = args.next().map(PathBuf::from);
        }
    }
    let root = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("buddy-session-bench-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(root.join(".buddyx"));
    std::fs::create_dir_all(&root).expect("bench dir");
    let store = Store::for_workdir(&root);

    let t0 = Instant::now();
    for _ in 0..SMALL_SESSIONS {
        write_session(&store, SMALL_MESSAGES);
    }
    let small = write_session(&store, 40);
    let big = write_session(&store, BIG_MESSAGES);
    let size = std::fs::metadata(store.path_of(&big))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "generated {} sessions in {:.1} s; the big one: {BIG_MESSAGES} messages, {:.1} MB ({big})",
        SMALL_SESSIONS + 2,
        t0.elapsed().as_secs_f64(),
        size as f64 / 1e6
    );

    stats(
        "list 201 sessions (Store::list)",
        time(50, || store.list().expect("list").0.len()),
    );
    stats(
        "load the 5,000-message session (Store::open)",
        time(20, || store.open(&big, info()).expect("open").history.len()),
    );
    let (w10, s10) = save_turns(&store, &small, 50);
    let (w5k, s5k) = save_turns(&store, &big, 50);
    stats("save one turn at turn 10, write only", w10);
    stats("save one turn at turn 1,250 (msg 5,000), write only", w5k);
    stats("save one turn at turn 10, with fsync", s10);
    stats("save one turn at turn 1,250 (msg 5,000), with fsync", s5k);

    // What `buddy resume`'s picker reads: every file's summary (its tail),
    // for a store of 1,000 sessions of 20 messages.
    let picker_root = root.join("picker");
    let _ = std::fs::remove_dir_all(&picker_root);
    let picker_store = Store::for_workdir(&picker_root);
    for _ in 0..PICKER_SESSIONS {
        write_session(&picker_store, SMALL_MESSAGES);
    }
    stats(
        "picker rows of 1,000 sessions (Store::entries)",
        time(20, || {
            picker_store
                .entries()
                .expect("entries")
                .iter()
                .filter(|e| e.summary.is_ok())
                .count()
        }),
    );
    let _ = std::fs::remove_dir_all(&picker_root);

    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&root);
    } else {
        // For bench/run.sh: the id of the big session.
        let _ = std::fs::write(root.join("big-session-id"), &big);
    }
}
