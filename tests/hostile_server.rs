//! End-to-end tests of buddy against a hostile or broken model server on
//! 127.0.0.1: the real binary, the fake provider sending what no good server
//! would (a tool-call index of a billion, an endless answer, keep-alives
//! forever, an HTML page, a stream with nothing in it). Each run must end with
//! one clear, sanitised error line, a failing exit code, and a history with no
//! empty or partial assistant message in it.

use crate::support;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::fake_provider::{FakeProvider, Gate, Reply, SseChunk};
use support::{fake_config, BuddyCmd, Output};

/// `fake_config` with no retries (each test scripts one reply) and `network`
/// settings of its own.
fn config(p: &FakeProvider, network: &str) -> String {
    format!(
        "{}\n[network]\nmax_retries = 0\n{network}\n",
        fake_config(p)
    )
}

/// The non-empty lines of stderr, less the first run's note about the
/// config file it wrote.
fn stderr_lines(out: &Output) -> Vec<&str> {
    out.stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("created a default config at "))
        .collect()
}

/// Stderr is exactly one line, an error, with no control character in it.
fn assert_one_clean_error_line(out: &Output) -> String {
    let lines = stderr_lines(out);
    assert_eq!(lines.len(), 1, "stderr: {:?}", out.stderr);
    let line = lines[0];
    assert!(line.starts_with("error:"), "stderr: {:?}", out.stderr);
    assert!(
        !line.chars().any(|c| c.is_control()),
        "control character in {line:?}"
    );
    line.to_string()
}

fn session_files(cmd: &BuddyCmd) -> Vec<PathBuf> {
    std::fs::read_dir(cmd.work_dir().join(".buddyx/sessions"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether any JSON object in `v` is a message with this role.
fn has_role(v: &Value, role: &str) -> bool {
    match v {
        Value::Object(map) => {
            map.get("role").and_then(Value::as_str) == Some(role)
                || map.values().any(|v| has_role(v, role))
        }
        Value::Array(items) => items.iter().any(|v| has_role(v, role)),
        _ => false,
    }
}

/// The run's session holds the user's prompt and no assistant message.
fn assert_no_assistant_message_saved(cmd: &BuddyCmd) {
    let files = session_files(cmd);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("session file");
    let values: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        values.iter().any(|v| has_role(v, "user")),
        "the prompt was not saved: {text}"
    );
    // Text shown before the cut is journaled (what the user saw survives a
    // kill), so it may stay as an answer marked interrupted, never as whole.
    let whole = text.lines().any(|l| {
        l.contains("\"role\":\"assistant\"")
            && !l.contains("[interrupted: the answer was cut off here]")
    });
    assert!(!whole, "a complete assistant message was saved: {text}");
}

/// Nothing at all from the model was saved (nothing was shown either).
fn assert_no_assistant_message_at_all(cmd: &BuddyCmd) {
    let files = session_files(cmd);
    let text = std::fs::read_to_string(&files[0]).expect("session file");
    assert!(
        !text.contains("\"role\":\"assistant\""),
        "an assistant message was saved: {text}"
    );
}

fn content_chunk(text: &str) -> SseChunk {
    SseChunk::data(json!({"choices":[{"index":0,"delta":{"content":text}}]}))
}

fn call_chunk(index: u64, id: &str) -> SseChunk {
    SseChunk::data(json!({"choices":[{"index":0,"delta":{"tool_calls":[
        {"index":index,"id":id,"type":"function","function":{"name":"time","arguments":"{}"}}]}}]}))
}

#[test]
fn a_tool_call_index_of_a_billion_is_just_a_key() {
    // Indexing a vector by the server's number allocated 9.6 GB and aborted.
    let p = FakeProvider::start(vec![
        Reply::sse(vec![
            call_chunk(1_000_000_000, "far"),
            SseChunk::data(
                json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
            ),
            SseChunk::done(),
        ]),
        Reply::text("it is late"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config(&p, ""))
        .args(["exec", "what time is it?"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "it is late\n");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    let answered = reqs[1].json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "far");
    assert!(answered, "{}", reqs[1].body_text());
}

#[test]
fn more_than_128_tool_calls_end_the_run_with_one_error_line() {
    let mut chunks: Vec<SseChunk> = (0..129)
        .map(|i| call_chunk(1_000_000_000 + i, &format!("c{i}")))
        .collect();
    chunks.push(SseChunk::done());
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let cmd = BuddyCmd::new().config(config(&p, "")).args(["exec", "hi"]);
    let out = cmd.run();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let line = assert_one_clean_error_line(&out);
    assert!(line.contains("more than 128 tool calls"), "{line}");
    assert_eq!(p.request_count(), 1);
    assert_no_assistant_message_saved(&cmd);
}

#[test]
fn an_endless_answer_stops_at_the_configured_cap() {
    // A stream that would go on for 10 MB without ending; the cap is 64 KiB.
    let piece = "x".repeat(1000);
    let chunks: Vec<SseChunk> = (0..10_000).map(|_| content_chunk(&piece)).collect();
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let cmd = BuddyCmd::new()
        .config(config(&p, "max_answer_bytes = 65536"))
        .args(["exec", "hi"]);
    let out = cmd.run();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let error = stderr_lines(&out)
        .into_iter()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {}", out.stderr))
        .to_string();
    assert!(
        error.contains("larger than 65536 bytes (network.max_answer_bytes)"),
        "{error}"
    );
    // What was shown before the cap is at most the cap (plus one event).
    assert!(out.stdout.len() <= 65536 + 1000 + 1, "{}", out.stdout.len());
    assert_eq!(p.request_count(), 1);
    assert_no_assistant_message_saved(&cmd);
}

#[test]
fn a_non_streamed_answer_over_the_cap_is_refused() {
    let p = FakeProvider::start(vec![Reply::text("y".repeat(5000))]);
    let cfg = config(&p, "max_answer_bytes = 4096").replace(
        "model = \"fake-model\"",
        "model = \"fake-model\"\nstream = false",
    );
    let cmd = BuddyCmd::new().config(cfg).args(["exec", "hi"]);
    let out = cmd.run();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let line = assert_one_clean_error_line(&out);
    assert!(line.contains("larger than 4096 bytes"), "{line}");
    assert_eq!(out.stdout, "");
}

#[test]
fn keep_alives_alone_hit_the_idle_deadline() {
    // Keep-alive comments and empty chunks every 100 ms for 30 s: each read
    // is well within the 120 s read timeout, yet nothing is ever said.
    let chunks: Vec<SseChunk> = (0..300)
        .map(|i| {
            let c = if i % 2 == 0 {
                SseChunk::comment("keep-alive")
            } else {
                SseChunk::data(json!({"choices":[{"index":0,"delta":{}}]}))
            };
            c.delay(Duration::from_millis(100))
        })
        .collect();
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let cmd = BuddyCmd::new()
        .config(config(&p, "idle_timeout_secs = 1"))
        .args(["exec", "hi"]);
    let started = Instant::now();
    let out = cmd.run();
    let took = started.elapsed();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let line = assert_one_clean_error_line(&out);
    assert!(
        line.contains("no new output for 1 s, only keep-alives or empty events"),
        "{line}"
    );
    // Ended by the deadline, long before the server would have stopped.
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_no_assistant_message_saved(&cmd);
}

/// A stream that goes silent (no byte at all) ends at the read timeout, even
/// with a steady flow of text before it: the deadline moves with every read,
/// and holds once nothing comes.
#[test]
fn a_stream_that_goes_silent_ends_at_the_read_timeout() {
    let gate = Gate::new();
    let mut chunks: Vec<SseChunk> = (0..15)
        .map(|i| content_chunk(&format!("piece{i} ")).delay(Duration::from_millis(100)))
        .collect();
    chunks.push(SseChunk::gate(&gate));
    chunks.push(SseChunk::done());
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let cmd = BuddyCmd::new()
        .config(config(&p, "api_timeout_secs = 1\nidle_timeout_secs = 600"))
        .args(["exec", "hi"]);
    let started = Instant::now();
    let out = cmd.run();
    let took = started.elapsed();
    gate.open();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    // 1.5 s of text, each read well inside the 1 s timeout, then silence.
    assert!(
        out.stderr.contains("no data for 1 s"),
        "stderr: {}",
        out.stderr
    );
    assert!(took >= Duration::from_millis(2300), "ended early: {took:?}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

#[test]
fn output_then_silence_hits_the_idle_deadline_too() {
    let mut chunks = vec![content_chunk("Thinking about it")];
    chunks.extend((0..300).map(|_| SseChunk::comment("ping").delay(Duration::from_millis(100))));
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let cmd = BuddyCmd::new()
        .config(config(&p, "idle_timeout_secs = 1"))
        .args(["exec", "hi"]);
    let started = Instant::now();
    let out = cmd.run();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("no new output for 1 s"),
        "{}",
        out.stderr
    );
    assert_no_assistant_message_saved(&cmd);
}

const HOSTILE_PAGE: &str = "<!DOCTYPE html>\n<html>\n<head><title>Sign in</title></head>\n<body>\n\x1b]0;owned\x07\x1b[2J\x1b[H<h1>Please sign in</h1>\r\n<p>Your session has expired.</p>\n</body>\n</html>\n";

#[test]
fn an_html_page_with_status_200_is_one_clean_error_line() {
    let p = FakeProvider::start(vec![
        Reply::status(200, HOSTILE_PAGE).header("content-type", "text/html; charset=utf-8")
    ]);
    let cmd = BuddyCmd::new().config(config(&p, "")).args(["exec", "hi"]);
    let out = cmd.run();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let line = assert_one_clean_error_line(&out);
    assert!(
        line.contains("the server answered with text/html, not an event stream: <!DOCTYPE html> <html> <head><title>Sign in</title>"),
        "{line}"
    );
    assert!(line.contains("␛]0;owned␇"), "{line}");
    assert_eq!(out.stdout, "");
    assert_no_assistant_message_saved(&cmd);
}

#[test]
fn binary_and_html_bodies_of_any_status_are_one_clean_line() {
    let binary: String = (0u8..=255).map(char::from).cycle().take(4000).collect();
    for reply in [
        // Claimed to be JSON, but is not.
        Reply::status(200, binary.clone()).header("content-type", "application/json"),
        Reply::status(502, HOSTILE_PAGE).header("content-type", "text/html"),
        Reply::status(400, binary),
    ] {
        let p = FakeProvider::start(vec![reply]);
        let out = BuddyCmd::new()
            .config(config(&p, ""))
            .args(["exec", "hi"])
            .run();
        assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
        let line = assert_one_clean_error_line(&out);
        assert!(line.chars().count() < 1100, "{line}");
    }
}

#[test]
fn a_stream_of_only_done_is_an_error_and_saves_no_empty_answer() {
    let p = FakeProvider::start(vec![Reply::sse(vec![SseChunk::done()])]);
    let cmd = BuddyCmd::new().config(config(&p, "")).args(["exec", "hi"]);
    let out = cmd.run();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let line = assert_one_clean_error_line(&out);
    assert!(
        line.contains("the server ended the stream without a reply"),
        "{line}"
    );
    assert_eq!(out.stdout, "");
    assert_no_assistant_message_saved(&cmd);
    assert_no_assistant_message_at_all(&cmd);
}

#[test]
fn an_endless_line_is_refused_at_the_line_cap() {
    // One `data:` line of 17 MiB with no line end: over the 16 MiB cap.
    let chunk = vec![b'a'; 1 << 20];
    let mut chunks = vec![SseChunk::raw(b"data: ".to_vec())];
    chunks.extend((0..17).map(|_| SseChunk::raw(chunk.clone())));
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let cmd = BuddyCmd::new().config(config(&p, "")).args(["exec", "hi"]);
    let out = cmd.run();
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let line = assert_one_clean_error_line(&out);
    assert!(
        line.contains("a stream line exceeds 16777216 bytes"),
        "{line}"
    );
}

/// `config` for a profile speaking `api` (`messages` or `responses`).
fn config_api(p: &FakeProvider, api: &str, network: &str) -> String {
    config(p, network).replace(
        "[models.fake]\n",
        &format!("[models.fake]\napi = \"{api}\"\n"),
    )
}

fn named(kind: &str, data: Value) -> SseChunk {
    SseChunk::raw(format!("event: {kind}\ndata: {data}\n\n"))
}

#[test]
fn the_answer_cap_holds_for_messages_and_responses_too() {
    let piece = "z".repeat(1000);
    let messages: Vec<SseChunk> = [
        named("message_start", json!({"type":"message_start","message":{"usage":{"input_tokens":1}}})),
        named("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})),
    ]
    .into_iter()
    .chain((0..10_000).map(|_| {
        named("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":piece}}))
    }))
    .collect();
    let responses: Vec<SseChunk> = [named(
        "response.output_item.added",
        json!({"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}),
    )]
    .into_iter()
    .chain((0..10_000).map(|_| {
        named("response.output_text.delta", json!({"type":"response.output_text.delta","output_index":0,"delta":piece}))
    }))
    .collect();
    for (api, chunks) in [("messages", messages), ("responses", responses)] {
        let p = FakeProvider::start(vec![Reply::sse(chunks)]);
        let cmd = BuddyCmd::new()
            .config(config_api(&p, api, "max_answer_bytes = 65536"))
            .args(["exec", "hi"]);
        let out = cmd.run();
        assert_ne!(out.code(), Some(0), "{api}: {}", out.stderr);
        assert!(
            out.stderr.contains("larger than 65536 bytes"),
            "{api}: {}",
            out.stderr
        );
        assert_eq!(p.request_count(), 1, "{api}");
        assert_no_assistant_message_saved(&cmd);
    }
}

#[test]
fn pings_are_not_progress_for_messages_either() {
    let mut chunks = vec![named(
        "message_start",
        json!({"type":"message_start","message":{"usage":{"input_tokens":1}}}),
    )];
    chunks.extend(
        (0..300).map(|_| named("ping", json!({"type":"ping"})).delay(Duration::from_millis(100))),
    );
    let p = FakeProvider::start(vec![Reply::sse(chunks)]);
    let cmd = BuddyCmd::new()
        .config(config_api(&p, "messages", "idle_timeout_secs = 1"))
        .args(["exec", "hi"]);
    let started = Instant::now();
    let out = cmd.run();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_ne!(out.code(), Some(0), "stderr: {}", out.stderr);
    let line = assert_one_clean_error_line(&out);
    assert!(line.contains("no new output for 1 s"), "{line}");
}

#[test]
fn a_completion_labelled_text_plain_is_still_read() {
    // Careless labels are not hostile: a JSON object is read whatever its type.
    let body = json!({"id":"x","object":"chat.completion","choices":[{"index":0,
        "message":{"role":"assistant","content":"plain but fine"},"finish_reason":"stop"}]});
    let p = FakeProvider::start(vec![Reply::status(200, body.to_string())]);
    let out = BuddyCmd::new()
        .config(config(&p, ""))
        .args(["exec", "hi"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "plain but fine\n");
}

// A hostile MCP server (tests/fixtures/mcp/hostile.py, plain JSON-RPC over
// stdio): each attack below once grew buddy's memory by gigabytes. The
// server's `peak` tool answers with buddy's peak resident memory (VmHWM of
// its parent process), read after the attack is over.

/// buddy's peak resident memory under any of these attacks stays below this.
const MAX_PEAK_KB: u64 = 64 * 1024;

/// `config` with the hostile server in `mode` as `[mcp_servers.hostile]`,
/// and room in the context for 256 tools' definitions.
fn hostile_mcp(p: &FakeProvider, mode: &str, extra: &str) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp/hostile.py")
        .display()
        .to_string();
    // Deferral off: these tests read which tools were listed from the
    // request, so the servers' tools go whole however many there are.
    format!(
        "{}\n[tools]\ntool_search_after_bytes = 0\n[mcp_servers.hostile]\ncommand = \"python3\"\nargs = [{}, {}]\n{extra}\n",
        config(p, "").replace(
            "[models.fake]\n",
            "[models.fake]\ncontext_limit = 1000000\n"
        ),
        serde_json::to_string(&script).expect("a string"),
        serde_json::to_string(mode).expect("a string"),
    )
}

/// What `peak` answered to call `id`, from the request after it.
fn peak_of(req: &support::fake_provider::RecordedRequest, id: &str) -> Value {
    let text = support::fake_provider::tool_result(req, id);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("peak answered {text:?}: {e}"))
}

fn mcp_call(id: &str, tool: &str) -> support::fake_provider::ToolCallSpec {
    support::fake_provider::ToolCallSpec::new(id, tool, "{}")
}

fn mcp_tool_names(req: &support::fake_provider::RecordedRequest) -> Vec<String> {
    req.json()["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|d| d["function"]["name"].as_str())
                .filter(|n| n.starts_with("mcp__"))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Runs exec against the hostile server in `mode`: the model calls `calls`
/// one turn each, then answers. Returns the requests and the output.
fn run_hostile(
    mode: &str,
    calls: &[&str],
) -> (Vec<support::fake_provider::RecordedRequest>, Output) {
    let mut script: Vec<Reply> = calls
        .iter()
        .enumerate()
        .map(|(i, tool)| Reply::tool_calls(vec![mcp_call(&format!("c{i}"), tool)]))
        .collect();
    script.push(Reply::text("done"));
    let p = FakeProvider::start(script);
    let cmd = BuddyCmd::new()
        .config(hostile_mcp(&p, mode, "startup_timeout_secs = 20"))
        .args(["exec", "--dangerously-auto-approve", "hi"]);
    let started = Instant::now();
    let out = cmd.run_detached();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    (p.chat_requests(), out)
}

fn assert_peak_under_cap(peak: &Value, what: &str) -> u64 {
    let kb = peak["vmhwm_kb"].as_u64().expect("vmhwm_kb");
    eprintln!("{what}: buddy's peak RSS {kb} kB ({peak})");
    assert!(kb < MAX_PEAK_KB, "{what}: peak RSS {kb} kB");
    kb
}

#[test]
fn an_mcp_tools_list_paging_forever_is_cut_and_memory_stays_bounded() {
    let (reqs, out) = run_hostile("tools-forever", &["mcp__hostile__peak"]);
    out.assert_success();
    let names = mcp_tool_names(&reqs[0]);
    assert!(
        names.contains(&"mcp__hostile__peak".to_string()),
        "{names:?}"
    );
    assert!(names.len() <= 256, "{} tools", names.len());
    let peak = peak_of(&reqs[1], "c0");
    assert_peak_under_cap(&peak, "tools/list paging forever");
    assert!(
        out.stderr.contains("lists more than 256 tools"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_mcp_resources_list_paging_forever_after_list_changed_stays_bounded() {
    let (reqs, out) = run_hostile("resources-forever", &["mcp__hostile__peak"]);
    out.assert_success();
    let peak = peak_of(&reqs[1], "c0");
    assert_peak_under_cap(&peak, "resources/list paging forever");
    // The first listing, the one after the change, and no page past the cap.
    let listed = peak["resources_list"].as_u64().expect("resources_list");
    assert!(listed >= 2, "the change was not listed: {peak}");
    assert!(listed <= 1 + 100, "{listed} resources/list requests");
}

#[test]
fn a_flood_of_list_changed_notifications_is_coalesced() {
    let (reqs, out) = run_hostile("notify-flood", &["mcp__hostile__peak"]);
    out.assert_success();
    let peak = peak_of(&reqs[1], "c0");
    assert_peak_under_cap(&peak, "100,000 tools/list_changed");
    // One listing at start, then a handful for 100,000 notifications.
    let listed = peak["tools_list"].as_u64().expect("tools_list");
    assert!(listed < 1000, "{listed} tools/list requests");
}

#[test]
fn a_result_of_550000_empty_parts_is_counted_against_the_cap() {
    let (reqs, out) = run_hostile(
        "empty-parts",
        &["mcp__hostile__parts", "mcp__hostile__peak"],
    );
    out.assert_success();
    let parts = support::fake_provider::tool_result(&reqs[1], "c0");
    assert!(parts.len() < 40_000, "{} bytes", parts.len());
    assert!(
        parts.contains("more parts not read"),
        "{}",
        &parts[parts.len().saturating_sub(300)..]
    );
    let peak = peak_of(&reqs[2], "c1");
    assert_peak_under_cap(&peak, "550,000 empty parts");
}

#[test]
fn a_tool_listed_twice_or_malformed_is_dropped_and_named() {
    let (reqs, out) = run_hostile("malformed", &[]);
    out.assert_success();
    let mut names = mcp_tool_names(&reqs[0]);
    names.sort();
    assert_eq!(
        names,
        [
            "mcp__hostile__parts",
            "mcp__hostile__peak",
            "mcp__hostile__twice"
        ],
        "stderr: {}",
        out.stderr
    );
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning: MCP server `hostile`"))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("tool `broken` was dropped")),
        "{}",
        out.stderr
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("tool number 6 was dropped")),
        "{}",
        out.stderr
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("lists the tool `twice` twice")),
        "{}",
        out.stderr
    );
}
