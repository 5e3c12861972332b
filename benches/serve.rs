//! `buddy serve` under load, for docs/PERFORMANCE.md: many sessions streaming a
//! long answer at once through the real release binary, and what an idle
//! session costs in memory.
//!
//! ```text
//! cargo bench --bench serve                       # 100 sessions x 1,000 chunks (20 runs), 1,000 idle
//! cargo bench --bench serve -- --sessions 10 --chunks 200 --idle 100 --pace-ms 1 --runs 1
//! cargo bench --bench serve -- --idle 0 --slow   # and list every event over 20 ms
//! cargo bench --bench serve -- --idle 0 --dump events.txt   # every event, for a closer look
//! cargo bench --bench serve -- --idle 0 --no-direct --runs 20 --buddy OLD --buddy NEW
//! cargo bench --bench serve -- --sessions 0 --idle 0 --no-direct --flood 5000   # the flood alone
//! cargo bench --bench serve -- --sessions 0 --idle 0 --no-direct --flood 0 --cap-flood 2000   # at the cap
//! ```
//!
//! The zero-delay tail varies from run to run on a small machine (a run's p99
//! rests on its slowest 1% of events, often one or two scheduler stalls), so
//! one run shows little: the load is repeated `--runs N` times (20 unless
//! told), each on a fresh server. The first run prints everything, the others
//! a line each, and the summary gives p99 over the runs (median, range, runs
//! under the 5 ms budget) and over every event of every run pooled.
//! With `--buddy` given more than once the builds take turns, run by run, so
//! a change in the machine's load falls on both alike.
//!
//! The model is the tests' fake provider (`tests/support/fake_provider.rs`), run
//! in this process on a thread of its own with zero delay, answering every
//! request with [`Reply::stamped_text`]: each streamed piece is `SEQ@NANOS;`, made
//! just before the fake server writes it, NANOS being the wall clock
//! (`CLOCK_REALTIME`, shared by every process on the machine). The clients are
//! plain threads on blocking sockets that stamp every `read` the same way, so an
//! event's latency is the time from the fake server's write of its first piece
//! (a delta buddy merged under backpressure carries several pieces; the oldest
//! counts) to the read that completed the event, as the client saw it.
//!
//! Phases, each printing its figures:
//!
//! 1. direct: the same clients read the fake provider's own stream, without
//!    buddy: the floor this machine and this harness put under every figure;
//! 2. load: a fresh `buddy serve`, one warm-up run, then `--sessions` sessions
//!    (created first) whose prompts are posted at the same instant, each
//!    streaming `--chunks` pieces; latency percentiles over every
//!    `content_delta` event, events and pieces per second, the server's CPU
//!    time, and its peak RSS (`VmHWM`);
//! 3. idle: another fresh server, one warm-up run, then `--idle` sessions, each
//!    created and given one short prompt whose run finishes (a 25-character
//!    answer: 14 events kept in the session's replay log), one after another;
//!    RSS per idle session is `(VmRSS after − VmRSS before) / --idle`;
//! 4. flood: another fresh server, allowed `--flood` connections and more
//!    (`--max-connections`, and a header timeout long enough that the flood
//!    stays for the whole phase), takes `--flood` connections held open, half
//!    sending nothing and half a request head that never ends; meanwhile
//!    another client loads the page and runs a short prompt, 20 times; the
//!    figures are those times and the server's RSS before and during.
//!    This process raises its own descriptor limit to the hard limit; the
//!    server raises its own to what its limits need;
//! 5. flood at the cap: for each `--cap-flood` size (2,000 and 10,000 unless
//!    told; a size this process has no descriptors for is skipped with a
//!    note), a fresh server with the default limits (256 connections) takes
//!    that many connections each sending half a request head and waiting;
//!    each newcomer makes the server close the oldest such one. Meanwhile
//!    another client loads the page 20 times; the figures are its times
//!    (budget 200 ms) and how fast the flood was opened.
//!
//! The buddy binary is the one cargo builds for this bench (the release
//! profile), or `--buddy PATH` (the first one given, for the idle phase).

#[allow(dead_code)]
#[path = "../tests/support/fake_provider.rs"]
mod fake_provider;

use fake_provider::{parse_stamps, FakeProvider, Reply};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Opts {
    sessions: usize,
    chunks: usize,
    idle: usize,
    pace_ms: u64,
    direct: bool,
    /// The builds to measure (`--buddy`, repeatable; the one cargo builds
    /// for this bench when none is given).
    buddies: Vec<PathBuf>,
    /// Load runs per build (`--runs`), alternated between the builds: the
    /// zero-delay tail varies from run to run, so one run shows little.
    runs: usize,
    /// A profiler to attach to the server for the load phase: these words,
    /// then the server's pid (e.g. `perf record -g -o perf.data -p`); it gets
    /// SIGINT when the load is over.
    attach: Option<String>,
    /// List every event slower than 20 ms, per stream (`--slow`).
    slow: bool,
    /// Write every event of the load through buddy to this file, one line
    /// each: stream, event, write time (ms from the first write), latency (ms).
    dump: Option<PathBuf>,
    /// Connections held open in the flood phase (`--flood`, 0: none).
    flood: usize,
    /// Flood sizes against the default connection cap (`--cap-flood`,
    /// repeatable; 0: none).
    cap_floods: Vec<usize>,
}

fn parse_args() -> Opts {
    let mut o = Opts {
        sessions: 100,
        chunks: 1_000,
        idle: 1_000,
        pace_ms: 0,
        direct: true,
        buddies: Vec::new(),
        runs: 20,
        attach: None,
        slow: false,
        dump: None,
        flood: 5_000,
        cap_floods: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--sessions" => o.sessions = num("--sessions") as usize,
            "--chunks" => o.chunks = num("--chunks") as usize,
            "--idle" => o.idle = num("--idle") as usize,
            "--pace-ms" => o.pace_ms = num("--pace-ms"),
            "--no-direct" => o.direct = false,
            "--slow" => o.slow = true,
            "--dump" => o.dump = Some(PathBuf::from(args.next().expect("--dump needs a path"))),
            "--buddy" => o
                .buddies
                .push(PathBuf::from(args.next().expect("--buddy needs a path"))),
            "--runs" => o.runs = (num("--runs") as usize).max(1),
            "--flood" => o.flood = num("--flood") as usize,
            "--cap-flood" => o.cap_floods.push(num("--cap-flood") as usize),
            "--attach" => o.attach = Some(args.next().expect("--attach needs a command")),
            // cargo bench passes this to every bench target.
            "--bench" => {}
            other => panic!("unknown argument {other:?}"),
        }
    }
    if o.buddies.is_empty() {
        o.buddies.push(PathBuf::from(env!("CARGO_BIN_EXE_buddy")));
    }
    if o.cap_floods.is_empty() {
        o.cap_floods = vec![2_000, 10_000];
    }
    o.cap_floods.retain(|&n| n > 0);
    o
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

// ---------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------

/// A `buddy serve` in a directory of its own (isolated HOME and XDG dirs, a
/// `buddy.toml` pointing at the fake provider). Killed and removed on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
    root: PathBuf,
}

impl Server {
    fn start(buddy: &Path, provider: &FakeProvider, label: &str) -> Server {
        Server::start_with(buddy, provider, label, &[])
    }

    fn start_with(buddy: &Path, provider: &FakeProvider, label: &str, extra: &[String]) -> Server {
        let root = std::env::temp_dir().join(format!(
            "buddy-serve-bench-{label}-{}-{}",
            std::process::id(),
            unix_nanos()
        ));
        let work = root.join("work");
        let config_home = root.join("xdg-config");
        std::fs::create_dir_all(&work).expect("work dir");
        std::fs::create_dir_all(config_home.join("buddy")).expect("config dir");
        // An existing global config keeps buddy from writing one.
        std::fs::write(
            config_home.join("buddy/buddy.toml"),
            include_str!("../buddy.toml.example"),
        )
        .expect("global config");
        std::fs::write(
            work.join("buddy.toml"),
            format!(
                "[agent]\nmodel = \"fake\"\n\n[models.fake]\napi_base_url = \"{}\"\n\
                 model = \"fake-model\"\napi_key = \"sk-fake\"\n",
                provider.base_url()
            ),
        )
        .expect("buddy.toml");
        let mut cmd = Command::new(buddy);
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if name.starts_with("BUDDY_")
                || name.starts_with("AGENT_")
                || name.ends_with("_API_KEY")
            {
                cmd.env_remove(&key);
            }
        }
        let mut child = cmd
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("HOME", root.join("home"))
            .env("XDG_CONFIG_HOME", &config_home)
            .env("XDG_DATA_HOME", root.join("xdg-data"))
            .env("XDG_STATE_HOME", root.join("xdg-state"))
            .env("XDG_CACHE_HOME", root.join("xdg-cache"))
            .env("NO_COLOR", "1")
            .current_dir(&work)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", buddy.display()));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the URL line");
        let addr = line
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap_or_else(|_| panic!("buddy serve printed {line:?}, not its URL"));
        Server { child, addr, root }
    }

    /// A field of /proc/PID/status in KiB (`VmRSS`, `VmHWM`).
    fn status_kib(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/PID/status");
        text.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/PID/status"))
    }

    fn cpu(&self) -> Cpu {
        cpu_of(&format!("/proc/{}/stat", self.child.id()))
    }

    fn new_session(&self) -> String {
        let (status, body) = request(self.addr, "POST", "/api/sessions", "{}");
        assert_eq!(status, 201, "POST /api/sessions: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        v["id"].as_str().expect("an id").to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// User and system CPU time of a process.
#[derive(Clone, Copy)]
struct Cpu {
    user: Duration,
    system: Duration,
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, o: Cpu) -> Cpu {
        Cpu {
            user: self.user.saturating_sub(o.user),
            system: self.system.saturating_sub(o.system),
        }
    }
}

impl Cpu {
    fn total(self) -> Duration {
        self.user + self.system
    }
}

/// User and system CPU time from a /proc/…/stat file (USER_HZ = 100).
fn cpu_of(path: &str) -> Cpu {
    let text = std::fs::read_to_string(path).expect("read /proc stat");
    // Fields after the command name, which is in parentheses.
    let rest = &text[text.rfind(')').expect("stat format") + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the state.
    Cpu {
        user: Duration::from_millis(f[11] * 10),
        system: Duration::from_millis(f[12] * 10),
    }
}

// ---------------------------------------------------------------------------
// A minimal HTTP/1.1 client
// ---------------------------------------------------------------------------

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_nodelay(true).expect("nodelay");
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("read timeout");
    s
}

fn send(s: &mut TcpStream, addr: SocketAddr, method: &str, path: &str, body: &str) {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write request");
}

/// One request, `Connection: close`; the status and the body (not chunked).
fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = connect(addr);
    send(&mut s, addr, method, path, body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, body.to_string())
}

/// Which stream is read: buddy's SSE (`event: content_delta`, JSON with
/// `text`) or the provider's own (`data:` chunks with `delta.content`).
#[derive(Clone, Copy)]
enum Shape {
    Buddy,
    Provider,
    /// Buddy's SSE with any text (not stamped): only read to its end.
    BuddyPlain,
}

/// What one client saw of one stream.
#[derive(Default)]
struct Seen {
    /// Per text event: read time minus the write time of its first piece, ns.
    latencies: Vec<i64>,
    /// Per text event: the write time of its first piece (wall clock, ns).
    written: Vec<u128>,
    /// Pieces received (several per event when buddy merged them).
    pieces: usize,
    /// The stream ended properly (`done`, or `[DONE]`).
    finished: bool,
    /// Wall clock of the last read, ns.
    last_read: u128,
    /// Wall clock just before the request went out, ns.
    posted: u128,
    /// Wall clock of the read that brought the first piece of text, ns.
    first_text: Option<u128>,
}

/// Posts `body` to `path` and reads the SSE answer to its end, timing every
/// text event. Waits on `start` between connecting and sending.
fn stream(addr: SocketAddr, path: &str, body: &str, shape: Shape, start: &Barrier) -> Seen {
    let mut s = connect(addr);
    start.wait();
    let posted = unix_nanos();
    send(&mut s, addr, "POST", path, body);
    let mut seen = Seen {
        posted,
        ..Seen::default()
    };
    let mut next_seq = 0;
    let mut raw: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut decoded: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut head_done = false;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = s.read(&mut buf).expect("read the stream");
        let now = unix_nanos();
        if n == 0 {
            break;
        }
        seen.last_read = now;
        raw.extend_from_slice(&buf[..n]);
        if !head_done {
            let Some(end) = find(&raw, b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            assert!(
                head.starts_with("http/1.1 200"),
                "{path}: {}",
                String::from_utf8_lossy(&raw)
            );
            assert!(head.contains("transfer-encoding: chunked"), "{head}");
            raw.drain(..end + 4);
            head_done = true;
        }
        let body_ended = dechunk(&mut raw, &mut decoded);
        // Every complete event in what has arrived.
        let mut used = 0;
        while let Some(end) = find(&decoded[used..], b"\n\n") {
            let event = &decoded[used..used + end];
            used += end + 2;
            let Some(text) = event_text(event, shape, &mut seen.finished) else {
                continue;
            };
            let stamps = parse_stamps(text).unwrap_or_else(|| panic!("not stamps: {text:?}"));
            for (seq, _) in &stamps {
                assert_eq!(*seq, next_seq, "pieces arrive whole and in order");
                next_seq += 1;
            }
            seen.pieces += stamps.len();
            seen.first_text.get_or_insert(now);
            seen.latencies
                .push((now as i128 - stamps[0].1 as i128) as i64);
            seen.written.push(stamps[0].1);
        }
        decoded.drain(..used);
        if body_ended || seen.finished {
            break;
        }
    }
    seen
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// Moves the complete chunks of a chunked body from `raw` to `out`; true once
/// the last (empty) chunk has arrived.
fn dechunk(raw: &mut Vec<u8>, out: &mut Vec<u8>) -> bool {
    let mut pos = 0;
    let mut ended = false;
    while let Some(eol) = find(&raw[pos..], b"\r\n") {
        let size_text = std::str::from_utf8(&raw[pos..pos + eol]).expect("chunk size line");
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size line {size_text:?}"));
        let start = pos + eol + 2;
        if raw.len() < start + size + 2 {
            break;
        }
        out.extend_from_slice(&raw[start..start + size]);
        pos = start + size + 2;
        if size == 0 {
            ended = true;
            break;
        }
    }
    raw.drain(..pos);
    ended
}

/// The streamed text of one SSE event, if it is a text event; notes the end.
fn event_text<'a>(event: &'a [u8], shape: Shape, finished: &mut bool) -> Option<&'a str> {
    let event = std::str::from_utf8(event).expect("UTF-8 event");
    let mut name = "";
    let mut data = "";
    for line in event.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            name = v.trim();
        } else if let Some(v) = line.strip_prefix("data:") {
            data = v.trim_start();
        }
    }
    // The stamps are digits, `@` and `;`: no JSON escapes to undo.
    let field = |key: &str| -> Option<&'a str> {
        let at = data.find(key)? + key.len();
        let len = data[at..].find('"')?;
        Some(&data[at..at + len])
    };
    match shape {
        Shape::Buddy => match name {
            "content_delta" => field("\"text\":\""),
            "done" => {
                *finished = true;
                None
            }
            "error" => panic!("buddy reported an error: {data}"),
            _ => None,
        },
        Shape::BuddyPlain => {
            *finished |= name == "done";
            None
        }
        Shape::Provider => {
            if data == "[DONE]" {
                *finished = true;
                return None;
            }
            field("\"content\":\"").filter(|t| !t.is_empty())
        }
    }
}

// ---------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------

struct Load {
    seen: Vec<Seen>,
    wall: Duration,
}

/// `paths.len()` clients, each posting `body` to its path at the same instant.
fn load(addr: SocketAddr, paths: Vec<String>, body: String, shape: Shape) -> Load {
    let start = Arc::new(Barrier::new(paths.len() + 1));
    let body = Arc::new(body);
    let threads: Vec<_> = paths
        .into_iter()
        .map(|path| {
            let start = Arc::clone(&start);
            let body = Arc::clone(&body);
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || stream(addr, &path, &body, shape, &start))
                .expect("spawn a client")
        })
        .collect();
    start.wait();
    let t0 = unix_nanos();
    let seen: Vec<Seen> = threads
        .into_iter()
        .map(|t| t.join().expect("a client panicked"))
        .collect();
    let end = seen.iter().map(|s| s.last_read).max().unwrap_or(t0);
    Load {
        seen,
        wall: Duration::from_nanos(end.saturating_sub(t0) as u64),
    }
}

/// Every event of a load, for a closer look than percentiles give.
fn dump(path: &Path, l: &Load) {
    let first = l
        .seen
        .iter()
        .flat_map(|s| s.written.first())
        .min()
        .copied()
        .unwrap_or(0);
    // The origin in wall-clock nanoseconds, to line the events up with other
    // traces of the same run (e.g. `perf record -k CLOCK_REALTIME`).
    let mut out =
        format!("# first write at {first} ns (CLOCK_REALTIME)\nstream event write_ms latency_ms\n");
    for (i, s) in l.seen.iter().enumerate() {
        for (k, (w, lat)) in s.written.iter().zip(&s.latencies).enumerate() {
            out.push_str(&format!(
                "{i} {k} {:.3} {:.3}\n",
                (*w - first) as f64 / 1e6,
                *lat as f64 / 1e6
            ));
        }
    }
    std::fs::write(path, out).expect("write the --dump file");
}

/// The figures of one load, for the summary of several runs.
#[derive(Clone)]
struct Figures {
    p50: f64,
    p99: f64,
    max: f64,
    pieces_per_event: f64,
    /// The slowest stream's time from its request to its first piece, ms.
    first_piece_max: f64,
    /// Every event's latency, sorted (ns): the summary pools the runs.
    latencies: Vec<i64>,
}

/// Checks that every piece arrived once and in order, prints the figures
/// and returns the main ones.
fn report(label: &str, l: &Load, chunks: usize, slow_list: bool) -> Figures {
    let figures = figures(label, l, chunks);
    print_report(label, l, slow_list);
    figures
}

/// Every event's latency (ns), sorted.
fn sorted_latencies(l: &Load) -> Vec<i64> {
    let mut lat: Vec<i64> = l
        .seen
        .iter()
        .flat_map(|s| s.latencies.iter().copied())
        .collect();
    lat.sort_unstable();
    lat
}

/// The `p` percentile of sorted latencies, in ms.
fn percentile(sorted: &[i64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1e6
}

fn figures(label: &str, l: &Load, chunks: usize) -> Figures {
    let lat = sorted_latencies(l);
    let pieces: usize = l.seen.iter().map(|s| s.pieces).sum();
    let unfinished = l.seen.iter().filter(|s| !s.finished).count();
    assert_eq!(
        pieces,
        chunks * l.seen.len(),
        "{label}: every piece arrives"
    );
    assert_eq!(unfinished, 0, "{label}: every stream ends properly");
    let pct = |p: f64| percentile(&lat, p);
    Figures {
        p50: pct(0.50),
        p99: pct(0.99),
        max: lat[lat.len() - 1] as f64 / 1e6,
        pieces_per_event: pieces as f64 / lat.len() as f64,
        first_piece_max: first_piece_ms(l).last().copied().unwrap_or(0.0),
        latencies: lat,
    }
}

/// Per stream, from the request to the read that brought its first piece
/// (set-up, the model request, the first relay), sorted, in ms.
fn first_piece_ms(l: &Load) -> Vec<f64> {
    let mut t: Vec<f64> = l
        .seen
        .iter()
        .filter_map(|s| Some(s.first_text?.saturating_sub(s.posted) as f64 / 1e6))
        .collect();
    t.sort_by(f64::total_cmp);
    t
}

fn print_report(label: &str, l: &Load, slow_list: bool) {
    let lat = sorted_latencies(l);
    let pieces: usize = l.seen.iter().map(|s| s.pieces).sum();
    let pct = |p: f64| percentile(&lat, p);
    let secs = l.wall.as_secs_f64();
    println!(
        "{label}: {} streams, {pieces} pieces in {} events ({:.1} pieces/event), {:.0} ms wall",
        l.seen.len(),
        lat.len(),
        pieces as f64 / lat.len() as f64,
        secs * 1e3
    );
    println!(
        "{label}: latency write->read  p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  max {:.3} ms  min {:.3} ms",
        pct(0.50),
        pct(0.90),
        pct(0.99),
        lat[lat.len() - 1] as f64 / 1e6,
        lat[0] as f64 / 1e6
    );
    // Where in the run the slow events were: a start-up transient, a steady
    // lag or a queue that only grows look different here.
    let events: Vec<(u128, i64)> = l
        .seen
        .iter()
        .flat_map(|s| s.written.iter().copied().zip(s.latencies.iter().copied()))
        .collect();
    let first = events.iter().map(|e| e.0).min().unwrap_or(0);
    let last = events.iter().map(|e| e.0).max().unwrap_or(0);
    let span = (last - first).max(1);
    let mut tenths: Vec<Vec<i64>> = vec![Vec::new(); 10];
    for (w, lat) in &events {
        let i = ((w - first) * 10 / span).min(9) as usize;
        tenths[i].push(*lat);
    }
    let row: Vec<String> = tenths
        .iter_mut()
        .map(|t| {
            if t.is_empty() {
                return "-".into();
            }
            t.sort_unstable();
            format!("{:.1}", percentile(t, 0.99))
        })
        .collect();
    if slow_list {
        for (i, s) in l.seen.iter().enumerate() {
            let slow: Vec<String> = s
                .written
                .iter()
                .zip(&s.latencies)
                .enumerate()
                .filter(|(_, (_, lat))| **lat > 20_000_000)
                .map(|(k, (w, lat))| {
                    format!(
                        "#{k}@{:.0}:{:.0}",
                        (*w - first) as f64 / 1e6,
                        *lat as f64 / 1e6
                    )
                })
                .collect();
            if !slow.is_empty() {
                // #event@write ms (from the first write):latency ms
                println!(
                    "  stream {i}: {} events, slow: {}",
                    s.latencies.len(),
                    slow.join(" ")
                );
            }
        }
    }
    println!(
        "{label}: p99 ms by tenth of the {:.0} ms of writes: {}",
        span as f64 / 1e6,
        row.join(" ")
    );
    println!(
        "{label}: throughput  {:.0} events/s  {:.0} pieces/s",
        lat.len() as f64 / secs,
        pieces as f64 / secs
    );
    let first = first_piece_ms(l);
    if !first.is_empty() {
        let at =
            |p: f64| first[((first.len() as f64 * p).ceil() as usize).clamp(1, first.len()) - 1];
        println!(
            "{label}: request to first piece  p50 {:.1} ms  max {:.1} ms",
            at(0.5),
            at(1.0)
        );
    }
}

/// One load through a fresh `buddy serve` of `buddy`: a warm-up stream, then
/// `--sessions` prompts at once. Prints everything when `verbose`; returns the
/// latency figures and buddy's CPU per piece (µs).
fn through_buddy(
    o: &Opts,
    buddy: &Path,
    prompt: &str,
    label: &str,
    verbose: bool,
    dump_to: Option<&Path>,
) -> (Figures, f64) {
    let reply = Reply::stamped_text(o.chunks).chunk_delay(Duration::from_millis(o.pace_ms));
    let provider = FakeProvider::start_repeating(vec![reply]);
    let server = Server::start(buddy, &provider, "load");
    let warm = server.new_session();
    let one = load(
        server.addr,
        vec![format!("/api/sessions/{warm}/messages")],
        prompt.to_string(),
        Shape::Buddy,
    );
    if verbose {
        report("warm-up (1 stream)", &one, o.chunks, false);
    } else {
        figures("warm-up (1 stream)", &one, o.chunks);
    }
    let paths: Vec<String> = (0..o.sessions)
        .map(|_| format!("/api/sessions/{}/messages", server.new_session()))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let rss_before = server.status_kib("VmRSS");
    let cpu_before = server.cpu();
    let me = cpu_of("/proc/self/stat");
    let profiler = o.attach.as_ref().map(|cmd| {
        let mut words = cmd.split_whitespace();
        let child = Command::new(words.next().expect("--attach: a command"))
            .args(words)
            .arg(server.child.id().to_string())
            .spawn()
            .expect("start the --attach command");
        std::thread::sleep(Duration::from_millis(500));
        child
    });
    let l = load(server.addr, paths, prompt.to_string(), Shape::Buddy);
    let cpu = server.cpu() - cpu_before;
    let me = cpu_of("/proc/self/stat") - me;
    if let Some(mut p) = profiler {
        let _ = Command::new("kill")
            .args(["-INT", &p.id().to_string()])
            .status();
        let _ = p.wait();
    }
    let figs = if verbose {
        report(label, &l, o.chunks, o.slow)
    } else {
        figures(label, &l, o.chunks)
    };
    if let Some(path) = dump_to {
        dump(path, &l);
    }
    let pieces = (o.sessions * o.chunks) as f64;
    let per_piece = cpu.total().as_secs_f64() * 1e6 / pieces;
    if !verbose {
        return (figs, per_piece);
    }
    std::thread::sleep(Duration::from_millis(200));
    println!(
        "buddy serve: CPU {:.0} ms = {:.2} us per piece ({:.2} user + {:.2} system); this process (fake provider + clients) {:.0} ms",
        cpu.total().as_secs_f64() * 1e3,
        per_piece,
        cpu.user.as_secs_f64() * 1e6 / pieces,
        cpu.system.as_secs_f64() * 1e6 / pieces,
        me.total().as_secs_f64() * 1e3
    );
    let rss_after = server.status_kib("VmRSS");
    println!(
        "buddy serve: RSS before {:.1} MiB, peak (VmHWM) {:.1} MiB, after (runs done) {:.1} MiB = {:.0} KiB more per session that streamed {} chunks",
        rss_before as f64 / 1024.0,
        server.status_kib("VmHWM") as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        rss_after.saturating_sub(rss_before) as f64 / o.sessions as f64,
        o.chunks
    );
    (figs, per_piece)
}

/// Across runs of one build: the median and range of p99, and how many runs
/// kept it under the issue's budget (5 ms).
fn summary(build: &str, runs: &[(Figures, f64)]) {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        (v[(n - 1) / 2] + v[n / 2]) / 2.0
    };
    let p99: Vec<f64> = runs.iter().map(|r| r.0.p99).collect();
    let under = p99.iter().filter(|p| **p < 5.0).count();
    println!(
        "{build}: {} runs: p99 median {:.2} ms (min {:.2}, max {:.2}), under 5 ms in {under}; p50 median {:.3} ms; CPU per piece median {:.2} us; last stream's first piece median {:.0} ms",
        runs.len(),
        median(p99.clone()),
        p99.iter().copied().fold(f64::INFINITY, f64::min),
        p99.iter().copied().fold(0.0, f64::max),
        median(runs.iter().map(|r| r.0.p50).collect()),
        median(runs.iter().map(|r| r.1).collect()),
        median(runs.iter().map(|r| r.0.first_piece_max).collect()),
    );
    // A run's p99 rests on its slowest 1% of events, often one or two
    // scheduler stalls; every event of every run pooled estimates the
    // per-event distribution itself.
    let mut all: Vec<i64> = runs
        .iter()
        .flat_map(|r| r.0.latencies.iter().copied())
        .collect();
    all.sort_unstable();
    let over = all.iter().filter(|&&ns| ns >= 5_000_000).count();
    println!(
        "{build}: every event of the {} runs pooled ({}): p50 {:.3} ms, p99 {:.2} ms, p99.9 {:.2} ms; {:.2}% over 5 ms",
        runs.len(),
        all.len(),
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        percentile(&all, 0.999),
        100.0 * over as f64 / all.len().max(1) as f64,
    );
}

fn main() {
    let o = parse_args();
    let reply = || Reply::stamped_text(o.chunks).chunk_delay(Duration::from_millis(o.pace_ms));
    println!(
        "buddy serve under load: {} sessions x {} chunks{}, {} idle sessions; {} cores, load average {}",
        o.sessions,
        o.chunks,
        if o.pace_ms > 0 {
            format!(" ({} ms apart)", o.pace_ms)
        } else {
            " (zero delay)".into()
        },
        o.idle,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    );
    let prompt = serde_json::json!({ "text": "stream it" }).to_string();

    // 1. The provider's own stream, read by the same clients: the floor.
    if o.direct {
        let provider = FakeProvider::start_repeating(vec![reply()]);
        let path = format!("{}/chat/completions", provider.base_url());
        let path = path
            .split_once("/v1")
            .map(|(_, p)| format!("/v1{p}"))
            .unwrap();
        let body = serde_json::json!({"model": "m", "stream": true}).to_string();
        let me = cpu_of("/proc/self/stat");
        let l = load(
            provider.addr(),
            vec![path; o.sessions],
            body,
            Shape::Provider,
        );
        report("direct (no buddy)", &l, o.chunks, o.slow);
        println!(
            "direct (no buddy): CPU of this process (fake provider + clients) {:.0} ms",
            (cpu_of("/proc/self/stat") - me).total().as_secs_f64() * 1e3
        );
    }

    // 2. Through buddy serve: each build in turn, `--runs` times. With one
    // build, its first run prints everything; the rest one line each.
    if o.buddies.len() > 1 {
        for (b, path) in o.buddies.iter().enumerate() {
            println!("build #{}: {}", b + 1, path.display());
        }
    }
    let mut results: Vec<Vec<(Figures, f64)>> = vec![Vec::new(); o.buddies.len()];
    let load_runs = if o.sessions == 0 { 0 } else { o.runs };
    for run in 1..=load_runs {
        for (b, buddy) in o.buddies.iter().enumerate() {
            let verbose = run == 1 && o.buddies.len() == 1;
            let label = if verbose {
                "buddy serve".to_string()
            } else {
                format!("run {run} #{}", b + 1)
            };
            let dump = o.dump.as_ref().map(|d| match verbose {
                true => d.clone(),
                false => PathBuf::from(format!("{}.{}.{run}", d.display(), b + 1)),
            });
            let r = through_buddy(&o, buddy, &prompt, &label, verbose, dump.as_deref());
            if !verbose {
                println!(
                    "{label}: p50 {:.3} ms  p99 {:.3} ms  max {:.1} ms  {:.1} pieces/event  {:.2} us CPU per piece  last first piece {:.0} ms",
                    r.0.p50, r.0.p99, r.0.max, r.0.pieces_per_event, r.1, r.0.first_piece_max
                );
            }
            results[b].push(r);
        }
    }
    if load_runs > 1 {
        for (b, runs) in results.iter().enumerate() {
            summary(&format!("#{}", b + 1), runs);
        }
    }

    // 3. Idle sessions, on a fresh server.
    if o.idle > 0 {
        let provider =
            FakeProvider::start_repeating(vec![Reply::text("hello from the fake model")]);
        let server = Server::start(&o.buddies[0], &provider, "idle");
        let short = |server: &Server| {
            let id = server.new_session();
            let start = Barrier::new(1);
            let s = stream(
                server.addr,
                &format!("/api/sessions/{id}/messages"),
                &prompt,
                Shape::BuddyPlain,
                &start,
            );
            assert!(s.finished, "the short run ends with done");
        };
        // Warm-up: the first session and run build what every later one reuses.
        short(&server);
        std::thread::sleep(Duration::from_millis(200));
        let before = server.status_kib("VmRSS");
        let t0 = Instant::now();
        for _ in 0..o.idle {
            short(&server);
        }
        let took = t0.elapsed();
        std::thread::sleep(Duration::from_millis(500));
        let after = server.status_kib("VmRSS");
        println!(
            "idle: {} sessions, one finished run each ({:.1} ms per create + run): RSS {:.1} -> {:.1} MiB, {:.1} KiB per idle session; peak (VmHWM) {:.1} MiB",
            o.idle,
            took.as_secs_f64() * 1e3 / o.idle as f64,
            before as f64 / 1024.0,
            after as f64 / 1024.0,
            after.saturating_sub(before) as f64 / o.idle as f64,
            server.status_kib("VmHWM") as f64 / 1024.0
        );
    }

    // 4. A flood of connections held open, and another client meanwhile.
    if o.flood > 0 {
        flood(&o, &prompt);
    }

    // 5. Half heads past the connection cap, and another client meanwhile.
    for &n in &o.cap_floods {
        flood_at_the_cap(&o, n);
    }
}

/// Raises this process's soft descriptor limit to its hard limit: the
/// flood holds thousands of sockets.
fn raise_nofile() -> u64 {
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

fn flood(o: &Opts, prompt: &str) {
    let limit = raise_nofile();
    assert!(
        limit > o.flood as u64 + 100,
        "this process may open {limit} descriptors, too few for --flood {}",
        o.flood
    );
    let provider = FakeProvider::start_repeating(vec![Reply::text("hello from the fake model")]);
    let extra = [
        "--max-connections".to_string(),
        (o.flood + 256).to_string(),
        "--header-timeout".to_string(),
        "10m".to_string(),
        "--idle-timeout".to_string(),
        "10m".to_string(),
    ];
    let server = Server::start_with(&o.buddies[0], &provider, "flood", &extra);
    let fds =
        || std::fs::read_dir(format!("/proc/{}/fd", server.child.id())).map_or(0, |d| d.count());
    // One client's visit: the page, a session, a short prompt to its end.
    let visit = || {
        let t0 = Instant::now();
        let (status, page) = request(server.addr, "GET", "/", "");
        assert!(
            status == 200 && page.contains("<script>"),
            "GET /: {status}"
        );
        let page_ms = t0.elapsed().as_secs_f64() * 1e3;
        let id = server.new_session();
        let start = Barrier::new(1);
        let t1 = Instant::now();
        let s = stream(
            server.addr,
            &format!("/api/sessions/{id}/messages"),
            prompt,
            Shape::BuddyPlain,
            &start,
        );
        assert!(s.finished, "the prompt's run ends with done");
        (page_ms, t1.elapsed().as_secs_f64() * 1e3)
    };
    visit();
    std::thread::sleep(Duration::from_millis(200));
    let before = server.status_kib("VmRSS");
    let head = format!("GET / HTTP/1.1\r\nHost: {}\r\nX-Slow: ", server.addr);
    let t0 = Instant::now();
    let held: Vec<TcpStream> = (0..o.flood)
        .map(|i| {
            let mut s = TcpStream::connect(server.addr)
                .unwrap_or_else(|e| panic!("flood connection {i}: {e}"));
            if i % 2 == 1 {
                s.write_all(head.as_bytes()).expect("a slow head");
            }
            s
        })
        .collect();
    let opened = t0.elapsed();
    // Every connection accepted (a descriptor each in the server).
    let deadline = Instant::now() + Duration::from_secs(30);
    while fds() < o.flood && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let during = server.status_kib("VmRSS");
    let mut pages = Vec::new();
    let mut prompts = Vec::new();
    for _ in 0..20 {
        let (p, q) = visit();
        pages.push(p);
        prompts.push(q);
    }
    let still = fds();
    drop(held);
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[v.len() / 2], v[v.len() - 1])
    };
    let (page_p50, page_max) = stat(&mut pages);
    let (prompt_p50, prompt_max) = stat(&mut prompts);
    println!(
        "flood: {} connections held open ({} idle, {} with a head that never ends), opened in {:.0} ms; server descriptors {} during the visits",
        o.flood,
        o.flood - o.flood / 2,
        o.flood / 2,
        opened.as_secs_f64() * 1e3,
        still
    );
    println!(
        "flood: another client, 20 visits: page p50 {page_p50:.1} ms max {page_max:.1} ms; prompt to done p50 {prompt_p50:.1} ms max {prompt_max:.1} ms (budget 100 ms)"
    );
    println!(
        "flood: server RSS {:.1} MiB before, {:.1} MiB with the flood ({:.1} KiB per held connection)",
        before as f64 / 1024.0,
        during as f64 / 1024.0,
        during.saturating_sub(before) as f64 / o.flood as f64
    );
}

fn flood_at_the_cap(o: &Opts, n: usize) {
    let limit = raise_nofile();
    if limit < n as u64 + 100 {
        println!("flood at the cap: {n} skipped, this process may open only {limit} descriptors");
        return;
    }
    let provider = FakeProvider::start_repeating(vec![Reply::text("hello")]);
    let server = Server::start_with(&o.buddies[0], &provider, "cap-flood", &[]);
    let page = || {
        let t0 = Instant::now();
        let (status, page) = request(server.addr, "GET", "/", "");
        assert!(status == 200 && page.contains("</html>"), "GET /: {status}");
        t0.elapsed().as_secs_f64() * 1e3
    };
    page();
    let head = format!("GET / HTTP/1.1\r\nHost: {}\r\nX-Slow: ", server.addr);
    let t0 = Instant::now();
    let held: Vec<TcpStream> = (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(server.addr)
                .unwrap_or_else(|e| panic!("flood connection {i}: {e}"));
            // Already closed by the server (evicted) is fine.
            let _ = s.write_all(head.as_bytes());
            s
        })
        .collect();
    let opened = t0.elapsed();
    let mut times: Vec<f64> = (0..20).map(|_| page()).collect();
    drop(held);
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "flood at the cap (256 places): {n} half heads opened in {:.0} ms ({:.0} a second); another client's page, 20 times: p50 {:.1} ms, max {:.1} ms (budget 200 ms)",
        opened.as_secs_f64() * 1e3,
        n as f64 / opened.as_secs_f64(),
        times[times.len() / 2],
        times[times.len() - 1]
    );
}
