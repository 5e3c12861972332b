//! A scripted, OpenAI-compatible Chat Completions server for end-to-end tests and
//! benchmarks.
//!
//! It owns: a real HTTP/1.1 listener on `127.0.0.1` (random port) running on its own
//! thread and tokio runtime, keep-alive connections, request recording, and a script
//! of [`Reply`] values consumed one per request, in arrival order. Replies are either
//! low level (a status, a JSON body, raw SSE bytes with delays and disconnects) or
//! high level ([`Reply::text`], [`Reply::tool_calls`]) which answer with a correct
//! `chat.completion` object, or a `chat.completion.chunk` SSE stream when the request
//! body says `"stream": true`.
//!
//! It does not own: any knowledge of buddy. It answers every path and method the same
//! way, so tests can also see requests buddy should not have made, with one
//! exception: `GET …/models` lists the models (`fake-model` unless
//! [`FakeProvider::with_models`] says otherwise) without using the script, as a
//! real server does; it is still recorded.
//!
//! Usable from synchronous `#[test]` functions: [`FakeProvider::start`] returns once
//! the socket is listening, and dropping the [`FakeProvider`] stops the server.

use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

// The Responses and Anthropic Messages shapes of a scripted answer.
#[path = "fake_provider/messages.rs"]
mod messages;
#[path = "fake_provider/responses.rs"]
mod responses;

/// Which wire protocol a request speaks, from its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Completions,
    Responses,
    Messages,
}

/// The message of the 500 answered once the script has run out.
pub const EXHAUSTED_MESSAGE: &str = "fake provider: script exhausted";

/// Request heads larger than this are refused with 400.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Request bodies larger than this are refused with 400.
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;
/// Streamed text is cut into pieces of at most this many characters, like tokens.
const PIECE_CHARS: usize = 4;
/// Text shorter than this many pieces is still cut into (up to) this many.
const MIN_PIECES: usize = 3;

// ---------------------------------------------------------------------------
// The server handle
// ---------------------------------------------------------------------------

/// A running fake server. Dropping it shuts the server down and closes every
/// connection.
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeProvider {
    /// Starts a server that answers requests with `script`, in order, then with a
    /// 500 saying "fake provider: script exhausted".
    pub fn start(script: Vec<Reply>) -> FakeProvider {
        FakeProvider::launch(script, false)
    }

    /// Starts a server that cycles through `script` forever (for benchmarks).
    pub fn start_repeating(script: Vec<Reply>) -> FakeProvider {
        FakeProvider::launch(script, true)
    }

    fn launch(script: Vec<Reply>, repeat: bool) -> FakeProvider {
        // Binding here, before the thread starts, means the port accepts connections
        // (into the kernel backlog) as soon as `start` returns.
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("fake provider: cannot bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("fake provider: cannot make the listener non-blocking");
        let addr = listener
            .local_addr()
            .expect("fake provider: listener has no local address");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                requests: Vec::new(),
                script,
                next: 0,
                used: Vec::new(),
                repeat,
                connections: 0,
                summary: None,
                models: vec!["fake-model".to_string()],
                models_reply: None,
            }),
            arrived: Condvar::new(),
        });
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fake-provider-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake provider: cannot build a tokio runtime");
                runtime.block_on(serve(listener, thread_shared, shutdown_rx));
                // Dropping the runtime here cancels whatever is still running.
            })
            .expect("fake provider: cannot spawn the server thread");
        FakeProvider {
            addr,
            shared,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }
    }

    /// Answers `GET …/models` with `reply` instead of the list (a server
    /// still loading its model answers 503).
    pub fn with_models_reply(self, reply: Reply) -> FakeProvider {
        self.shared.lock().models_reply = Some(reply);
        self
    }

    /// Lists these model ids on `GET …/models` (in this order).
    pub fn with_models(self, ids: &[&str]) -> FakeProvider {
        self.shared.lock().models = ids.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Answers every request that offers no tools (buddy's context-summary
    /// request) with `reply`, leaving the script for the conversation.
    pub fn with_summaries(self, reply: Reply) -> FakeProvider {
        self.shared.lock().summary = Some(reply);
        self
    }

    /// `http://127.0.0.1:PORT/v1`, the value for `api_base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The received `POST …/chat/completions` requests, in arrival order.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_chat_completion())
            .collect()
    }

    /// The received `POST …/responses` requests, in arrival order.
    pub fn responses_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| {
                r.method == "POST"
                    && r.path
                        .split('?')
                        .next()
                        .is_some_and(|p| p.ends_with("/responses"))
            })
            .collect()
    }

    /// The received `POST …/messages` requests, in arrival order.
    pub fn messages_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| {
                r.method == "POST"
                    && r.path
                        .split('?')
                        .next()
                        .is_some_and(|p| p.ends_with("/messages"))
            })
            .collect()
    }

    /// How many requests have been received so far.
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// How many scripted replies have not been used yet (always the script length
    /// for a repeating server).
    pub fn remaining_replies(&self) -> usize {
        let state = self.shared.lock();
        if state.repeat {
            state.script.len()
        } else {
            state.script.len().saturating_sub(state.next)
        }
    }

    /// Blocks until at least `count` requests have arrived and returns them all.
    /// Panics after `timeout`, listing what did arrive.
    pub fn wait_for_requests(&self, count: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        while state.requests.len() < count {
            let now = Instant::now();
            if now >= deadline {
                let seen: Vec<String> = state
                    .requests
                    .iter()
                    .map(|r| format!("{} {}", r.method, r.path))
                    .collect();
                panic!(
                    "fake provider: waited {timeout:?} for {count} request(s), got {}: {seen:?}",
                    state.requests.len()
                );
            }
            state = self
                .shared
                .arrived
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.requests.clone()
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            // An error means the server already stopped; nothing to tell.
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() && !std::thread::panicking() {
                panic!("fake provider: the server thread panicked (see its message above)");
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// Signalled whenever a request is recorded.
    arrived: Condvar,
}

struct State {
    requests: Vec<RecordedRequest>,
    script: Vec<Reply>,
    next: usize,
    /// Positions of the replies already sent, when replies are matched by
    /// content ([`Reply::for_marker`]).
    used: Vec<usize>,
    repeat: bool,
    connections: usize,
    /// Answers requests that offer no tools (a context summary), outside the script.
    summary: Option<Reply>,
    /// Listed on `GET …/models`, outside the script.
    models: Vec<String>,
    /// Sent on `GET …/models` instead of the list, when set.
    models_reply: Option<Reply>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not hide the recorded requests from the test.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_connection_id(&self) -> usize {
        let mut state = self.lock();
        state.connections += 1;
        state.connections
    }

    /// Numbers and records `request` and picks its reply (`None` once the script is
    /// exhausted). Returns the request as recorded.
    fn record(&self, mut request: RecordedRequest) -> (RecordedRequest, Option<Reply>) {
        let mut state = self.lock();
        request.index = state.requests.len();
        state.requests.push(request.clone());
        // Only a JSON body without `tools` is a summary request.
        let summary_request = state.summary.is_some()
            && serde_json::from_str::<Value>(&request.body_text())
                .is_ok_and(|v| v.is_object() && v.get("tools").is_none());
        let listing = request.method == "GET"
            && request
                .path
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/models"));
        let reply = if let Some(r) = state.models_reply.as_ref().filter(|_| listing) {
            Some(r.clone())
        } else if listing {
            let data: Vec<Value> = state
                .models
                .iter()
                .map(|id| json!({"id": id, "object": "model", "owned_by": "fake"}))
                .collect();
            Some(Reply::json(200, json!({"object": "list", "data": data})))
        } else if let Some(summary) = state.summary.as_ref().filter(|_| summary_request) {
            Some(summary.clone())
        } else if state.script.is_empty() {
            None
        } else if state.repeat {
            let i = state.next % state.script.len();
            state.next = state.next.wrapping_add(1);
            Some(state.script[i].clone())
        } else if state.script.iter().any(|r| r.marker.is_some()) {
            // Matched by content: the first unused reply that fits.
            let found = (0..state.script.len())
                .find(|&i| !state.used.contains(&i) && state.script[i].fits(&request));
            found.map(|i| {
                state.used.push(i);
                state.next += 1;
                state.script[i].clone()
            })
        } else {
            let reply = state.script.get(state.next).cloned();
            state.next += 1;
            reply
        };
        drop(state);
        self.arrived.notify_all();
        (request, reply)
    }
}

// ---------------------------------------------------------------------------
// Recorded requests
// ---------------------------------------------------------------------------

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Position in arrival order, from 0.
    pub index: usize,
    /// Which TCP connection carried it (from 1, in accept order); equal ids mean
    /// keep-alive reuse.
    pub connection: usize,
    pub method: String,
    /// The request target as sent, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names lowercased, values trimmed, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body after undoing any chunked transfer encoding.
    pub body: Vec<u8>,
    /// The body parsed as JSON, when it parses.
    pub body_json: Option<Value>,
}

/// The content of the tool result for call `id` in a recorded request's
/// messages; panics (showing the body) when there is none.
pub fn tool_result(req: &RecordedRequest, id: &str) -> String {
    req.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id}: {}", req.body_text()))
        .to_string()
}

impl RecordedRequest {
    /// The text of the last user message of a Chat Completions request.
    pub fn last_user_text(&self) -> Option<String> {
        let messages = self.body_json.as_ref()?.get("messages")?.as_array()?;
        let last = messages.iter().rev().find(|m| m["role"] == "user")?;
        match &last["content"] {
            Value::String(s) => Some(s.clone()),
            // Parts: the text parts, joined.
            Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        }
    }

    /// The body as JSON; panics (showing the body) when it is not JSON.
    pub fn json(&self) -> &Value {
        match &self.body_json {
            Some(v) => v,
            None => panic!(
                "fake provider: body of request #{} ({} {}) is not JSON: {:?}",
                self.index,
                self.method,
                self.path,
                self.body_text()
            ),
        }
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }

    /// The body as text, with invalid UTF-8 replaced.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// True for a `POST …/chat/completions`.
    pub fn is_chat_completion(&self) -> bool {
        self.method == "POST"
            && self
                .path
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/chat/completions"))
    }

    /// True when the JSON body has `"stream": true`.
    pub fn wants_stream(&self) -> bool {
        self.body_json
            .as_ref()
            .and_then(|v| v.get("stream"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The `model` field of the JSON body, if any.
    pub fn model(&self) -> Option<&str> {
        self.body_json
            .as_ref()
            .and_then(|v| v.get("model"))
            .and_then(Value::as_str)
    }
}

// ---------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------

/// One scripted answer. Build with [`Reply::json`], [`Reply::status`],
/// [`Reply::sse`], [`Reply::text`] or [`Reply::tool_calls`], then adjust with the
/// builder methods.
#[derive(Clone, Debug)]
pub struct Reply {
    kind: ReplyKind,
    headers: Vec<(String, String)>,
    delay: Duration,
    /// Sent only for a request whose last user message contains this
    /// ([`Reply::for_marker`]).
    marker: Option<String>,
}

#[derive(Clone, Debug)]
enum ReplyKind {
    Json { status: u16, body: Value },
    Status { status: u16, body: String },
    Sse(Vec<SseChunk>),
    Completion(Completion),
}

/// A model answer, sent as SSE or JSON depending on the request.
#[derive(Clone, Debug)]
struct Completion {
    content: Option<String>,
    tool_calls: Vec<ToolCallSpec>,
    reasoning: Vec<(String, String)>,
    usage: Option<(u64, u64)>,
    /// Prompt-cache (read, write) tokens, for protocols that report them.
    cache_tokens: Option<(u64, u64)>,
    send_usage: bool,
    send_done: bool,
    finish_reason: Option<String>,
    /// The content is the model's refusal: Chat Completions' `refusal`
    /// field, a Responses `refusal` part, Anthropic's `stop_reason: refusal`.
    refusal: bool,
    chunk_delay: Duration,
    /// When above 0, the content is this many pieces stamped at write time (see
    /// [`Reply::stamped_text`]) instead of `content`.
    stamped: usize,
}

/// A tool call the fake model makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallSpec {
    pub id: String,
    pub name: String,
    /// The arguments exactly as the model sends them (normally a JSON object text).
    pub arguments: String,
}

impl ToolCallSpec {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ToolCallSpec {
        ToolCallSpec {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

impl Reply {
    fn new(kind: ReplyKind) -> Reply {
        Reply {
            kind,
            headers: Vec::new(),
            delay: Duration::ZERO,
            marker: None,
        }
    }

    /// This reply answers only a request whose last user message contains
    /// `marker`, whenever it comes. With such replies in the script, each
    /// request takes the first unused reply that fits it (an unmarked one
    /// fits any request), so requests made at the same time (sub-agents)
    /// get their own answers whatever order they arrive in.
    pub fn for_marker(mut self, marker: impl Into<String>) -> Reply {
        self.marker = Some(marker.into());
        self
    }

    /// Whether this reply may answer `request` (see [`Reply::for_marker`]).
    fn fits(&self, request: &RecordedRequest) -> bool {
        match &self.marker {
            None => true,
            Some(m) => request
                .last_user_text()
                .is_some_and(|t| t.contains(m.as_str())),
        }
    }

    /// A JSON response with `status` and `body` (sent with Content-Length).
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::new(ReplyKind::Json { status, body })
    }

    /// A `text/plain` response with `status` and `body`.
    pub fn status(status: u16, body: impl Into<String>) -> Reply {
        Reply::new(ReplyKind::Status {
            status,
            body: body.into(),
        })
    }

    /// A 200 `text/event-stream` response made of exactly these chunks, each written
    /// and flushed on its own (as one HTTP chunk), after its delay. Nothing is added:
    /// include [`SseChunk::done`] if the stream should end with `data: [DONE]`.
    pub fn sse(chunks: Vec<SseChunk>) -> Reply {
        Reply::new(ReplyKind::Sse(chunks))
    }

    /// An assistant answer `text`: streamed as several content deltas when the
    /// request asks for a stream, else a `chat.completion` object.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::new(ReplyKind::Completion(Completion {
            content: Some(text.into()),
            ..Completion::empty()
        }))
    }

    /// The model declining with `text`, in each protocol's own shape:
    /// `refusal` deltas (or `message.refusal`, content null) for Chat
    /// Completions, a `refusal` content part streamed as
    /// `response.refusal.delta` for Responses, and text with `stop_reason:
    /// refusal` for Anthropic Messages.
    pub fn refusal(text: impl Into<String>) -> Reply {
        Reply::new(ReplyKind::Completion(Completion {
            content: Some(text.into()),
            refusal: true,
            ..Completion::empty()
        }))
    }

    /// An assistant answer of `chunks` streamed content deltas, each made when it
    /// is written: piece `i` (from 0) is `i@NANOS;`, where NANOS is the wall clock
    /// (nanoseconds since the Unix epoch, `CLOCK_REALTIME`) just before the write.
    /// A client on the same machine can then tell each piece's age on arrival, and
    /// split deltas that were merged on the way ([`parse_stamps`]). Streamed in
    /// the Chat Completions shape only; without a stream, the message's content is
    /// the pieces stamped when the body is built.
    pub fn stamped_text(chunks: usize) -> Reply {
        Reply::new(ReplyKind::Completion(Completion {
            stamped: chunks,
            ..Completion::empty()
        }))
    }

    /// An assistant turn calling these tools (indexes 0, 1, … in order). When
    /// streamed, each call's first fragment has its id and name and the arguments
    /// follow in several fragments.
    pub fn tool_calls(calls: Vec<ToolCallSpec>) -> Reply {
        Reply::new(ReplyKind::Completion(Completion {
            tool_calls: calls,
            ..Completion::empty()
        }))
    }

    /// Adds a response header (sent after the defaults, replacing a default of the
    /// same name). `Connection: close` makes the server close after this reply.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// This completion streamed, held before its first chunk until `gate`
    /// opens: the run stays in flight for as long as the test needs.
    pub fn gated(&self, gate: &Gate) -> Reply {
        let mut chunks = self.stream_chunks();
        chunks.insert(0, SseChunk::gate(gate));
        Reply::sse(chunks)
    }

    /// Waits this long before sending the response head.
    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Adds a reasoning trace in the extra field `field` (e.g. `reasoning_content`)
    /// of the delta or message; streamed before the content.
    pub fn with_reasoning(mut self, field: impl Into<String>, text: impl Into<String>) -> Reply {
        self.completion_mut("with_reasoning")
            .reasoning
            .push((field.into(), text.into()));
        self
    }

    /// Reports this usage instead of the default estimate (about four characters a
    /// token of request body and of output).
    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Reply {
        self.completion_mut("with_usage").usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// Sets the assistant text (e.g. some words before tool calls).
    pub fn with_text(mut self, text: impl Into<String>) -> Reply {
        self.completion_mut("with_text").content = Some(text.into());
        self
    }

    /// Overrides the finish reason (default `tool_calls` with calls, else `stop`).
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Reply {
        self.completion_mut("with_finish_reason").finish_reason = Some(reason.into());
        self
    }

    /// Sends no usage: no usage chunk in a stream, no `usage` in JSON.
    pub fn without_usage(mut self) -> Reply {
        self.completion_mut("without_usage").send_usage = false;
        self
    }

    /// Ends the stream without `data: [DONE]` (the body still ends cleanly).
    pub fn without_done(mut self) -> Reply {
        self.completion_mut("without_done").send_done = false;
        self
    }

    /// When streamed, waits this long before each chunk (for cancellation tests).
    pub fn chunk_delay(mut self, delay: Duration) -> Reply {
        self.completion_mut("chunk_delay").chunk_delay = delay;
        self
    }

    /// The SSE chunks this completion would stream (model `fake-model`), for tests
    /// that want to alter a realistic stream and send it with [`Reply::sse`].
    pub fn stream_chunks(&self) -> Vec<SseChunk> {
        self.completion("stream_chunks")
            .stream_chunks("fake-model", "chatcmpl-fake", 0)
    }

    /// The `chat.completion` object this completion would answer without streaming
    /// (model `fake-model`).
    pub fn completion_json(&self) -> Value {
        self.completion("completion_json")
            .response_json("fake-model", "chatcmpl-fake", 0)
    }

    fn completion(&self, what: &str) -> &Completion {
        match &self.kind {
            ReplyKind::Completion(c) => c,
            other => {
                panic!("Reply::{what} applies to Reply::text / Reply::tool_calls, not {other:?}")
            }
        }
    }

    fn completion_mut(&mut self, what: &str) -> &mut Completion {
        match &mut self.kind {
            ReplyKind::Completion(c) => c,
            other => {
                panic!("Reply::{what} applies to Reply::text / Reply::tool_calls, not {other:?}")
            }
        }
    }

    /// Whether the server should close the connection after this reply.
    fn closes_connection(&self) -> bool {
        self.headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("connection") && v.to_ascii_lowercase().contains("close")
        })
    }
}

/// One piece of an SSE body, written and flushed on its own after its delay.
#[derive(Clone, Debug)]
pub struct SseChunk {
    piece: Piece,
    delay: Duration,
}

#[derive(Clone, Debug)]
enum Piece {
    Bytes(Vec<u8>),
    /// Close the socket here, without ending the chunked body.
    Disconnect,
    /// Wait here until the test opens the gate.
    Gate(Gate),
    /// `head`, then stamp `seq` made at write time ([`stamp`]), then `tail`.
    Stamped {
        head: Vec<u8>,
        seq: usize,
        tail: Vec<u8>,
    },
}

/// A point where a stream waits for the test ([`SseChunk::gate`]); clones
/// share one gate.
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Gate {
    pub fn new() -> Gate {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }

    /// Lets every stream waiting here (and any that reaches it later) go on.
    pub fn open(&self) {
        self.0.add_permits(1);
    }
}

impl Default for Gate {
    fn default() -> Gate {
        Gate::new()
    }
}

impl SseChunk {
    /// `data: <compact JSON>\n\n`.
    pub fn data(value: Value) -> SseChunk {
        SseChunk::data_text(&value.to_string())
    }

    /// `data: <text>\n\n` (text should be one line).
    pub fn data_text(text: &str) -> SseChunk {
        SseChunk::raw(format!("data: {text}\n\n"))
    }

    /// `data: [DONE]\n\n`.
    pub fn done() -> SseChunk {
        SseChunk::data_text("[DONE]")
    }

    /// A comment line, `: <text>\n\n` (e.g. `keep-alive`).
    pub fn comment(text: &str) -> SseChunk {
        SseChunk::raw(format!(": {text}\n\n"))
    }

    /// These bytes exactly, e.g. half an event.
    pub fn raw(bytes: impl Into<Vec<u8>>) -> SseChunk {
        SseChunk {
            piece: Piece::Bytes(bytes.into()),
            delay: Duration::ZERO,
        }
    }

    /// Holds the stream at this point until `gate` is opened, so a test can
    /// act at a known point of a stream (resize the terminal, say) instead
    /// of after a sleep.
    pub fn gate(gate: &Gate) -> SseChunk {
        SseChunk {
            piece: Piece::Gate(gate.clone()),
            delay: Duration::ZERO,
        }
    }

    /// Drops the connection at this point, mid-body.
    pub fn disconnect() -> SseChunk {
        SseChunk {
            piece: Piece::Disconnect,
            delay: Duration::ZERO,
        }
    }

    /// Waits this long before writing this chunk.
    pub fn delay(mut self, delay: Duration) -> SseChunk {
        self.delay = delay;
        self
    }

    /// Rewrites bare `\n` line ends as `\r\n`.
    pub fn crlf(mut self) -> SseChunk {
        if let Piece::Bytes(bytes) = &self.piece {
            let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8);
            for (i, &b) in bytes.iter().enumerate() {
                if b == b'\n' && (i == 0 || bytes[i - 1] != b'\r') {
                    out.push(b'\r');
                }
                out.push(b);
            }
            self.piece = Piece::Bytes(out);
        }
        self
    }

    /// The bytes this chunk writes (empty for a disconnect, and for a stamped
    /// piece, whose bytes exist only once it is written).
    pub fn bytes(&self) -> &[u8] {
        match &self.piece {
            Piece::Bytes(b) => b,
            Piece::Disconnect | Piece::Stamped { .. } | Piece::Gate(_) => &[],
        }
    }

    /// All the bytes of `chunks`, joined.
    pub fn concat(chunks: &[SseChunk]) -> Vec<u8> {
        chunks
            .iter()
            .flat_map(|c| c.bytes().iter().copied())
            .collect()
    }

    /// `bytes` cut into raw chunks of `size` bytes (the last may be shorter), so
    /// events and even UTF-8 characters are split across reads.
    pub fn split_every(bytes: &[u8], size: usize) -> Vec<SseChunk> {
        assert!(size > 0, "SseChunk::split_every needs a size above 0");
        bytes.chunks(size).map(SseChunk::raw).collect()
    }
}

impl Completion {
    fn empty() -> Completion {
        Completion {
            content: None,
            tool_calls: Vec::new(),
            reasoning: Vec::new(),
            usage: None,
            cache_tokens: None,
            send_usage: true,
            send_done: true,
            finish_reason: None,
            refusal: false,
            chunk_delay: Duration::ZERO,
            stamped: 0,
        }
    }

    fn finish_reason(&self) -> &str {
        match &self.finish_reason {
            Some(r) => r,
            None if self.tool_calls.is_empty() => "stop",
            None => "tool_calls",
        }
    }

    fn usage_json(&self, request_body_len: usize) -> Value {
        let (prompt, completion) = self.usage.unwrap_or_else(|| {
            let output: usize = self.content.as_deref().map_or(0, str::len)
                + self.reasoning.iter().map(|(_, t)| t.len()).sum::<usize>()
                + self
                    .tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>();
            (10 + (request_body_len / 4) as u64, 1 + (output / 4) as u64)
        });
        json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        })
    }

    fn stream_chunks(&self, model: &str, id: &str, request_body_len: usize) -> Vec<SseChunk> {
        let created = unix_now();
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            })
        };
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        for (field, text) in &self.reasoning {
            for piece in pieces(text) {
                let mut delta = serde_json::Map::new();
                delta.insert(field.clone(), Value::from(piece));
                events.push(chunk(Value::Object(delta), None));
            }
        }
        // Stamped pieces go right after the events so far; they are cut out of a
        // template chunk whose content is a marker, around the marker.
        let stamped_at = events.len();
        let mut stamped = Vec::new();
        if self.stamped > 0 {
            // JSON-escaping leaves this marker as it is.
            const MARK: &str = "@@STAMP@@";
            let template = SseChunk::data(chunk(json!({"content": MARK}), None));
            let text = String::from_utf8_lossy(template.bytes()).into_owned();
            let (head, tail) = text
                .split_once(MARK)
                .expect("the marker is in the template");
            stamped = (0..self.stamped)
                .map(|seq| SseChunk {
                    piece: Piece::Stamped {
                        head: head.as_bytes().to_vec(),
                        seq,
                        tail: tail.as_bytes().to_vec(),
                    },
                    delay: Duration::ZERO,
                })
                .collect();
        }
        if let Some(content) = &self.content {
            let field = if self.refusal { "refusal" } else { "content" };
            for piece in pieces(content) {
                events.push(chunk(json!({ field: piece }), None));
            }
        }
        for (index, call) in self.tool_calls.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }]}),
                None,
            ));
            for piece in pieces(&call.arguments) {
                events.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        events.push(chunk(json!({}), Some(self.finish_reason())));
        if self.send_usage {
            events.push(json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": self.usage_json(request_body_len),
            }));
        }
        let mut chunks: Vec<SseChunk> = events.into_iter().map(SseChunk::data).collect();
        chunks.splice(stamped_at..stamped_at, stamped);
        if self.send_done {
            chunks.push(SseChunk::done());
        }
        chunks
            .into_iter()
            .map(|c| c.delay(self.chunk_delay))
            .collect()
    }

    fn response_json(&self, model: &str, id: &str, request_body_len: usize) -> Value {
        let mut message = serde_json::Map::new();
        message.insert("role".into(), Value::from("assistant"));
        let content = if self.stamped > 0 {
            Some((0..self.stamped).map(stamp).collect::<String>())
        } else {
            self.content.clone()
        };
        if self.refusal {
            message.insert("content".into(), Value::Null);
            message.insert("refusal".into(), content.map_or(Value::Null, Value::from));
        } else {
            message.insert("content".into(), content.map_or(Value::Null, Value::from));
        }
        for (field, text) in &self.reasoning {
            message.insert(field.clone(), Value::from(text.as_str()));
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<Value> = self
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })
                })
                .collect();
            message.insert("tool_calls".into(), Value::from(calls));
        }
        let mut body = json!({
            "id": id,
            "object": "chat.completion",
            "created": unix_now(),
            "model": model,
            "choices": [{
                "index": 0,
                "message": Value::Object(message),
                "finish_reason": self.finish_reason(),
            }],
        });
        if self.send_usage {
            body["usage"] = self.usage_json(request_body_len);
        }
        body
    }
}

/// Cuts `text` into token-sized pieces: at least [`MIN_PIECES`] when it has that
/// many characters, at most [`PIECE_CHARS`] characters each. Never splits a char.
fn pieces(text: &str) -> Vec<&str> {
    let chars = text.chars().count();
    if chars == 0 {
        return Vec::new();
    }
    let per = chars.div_ceil(MIN_PIECES).clamp(1, PIECE_CHARS);
    let mut out = Vec::with_capacity(chars / per + 1);
    let mut start = 0;
    let mut count = 0;
    for (i, _) in text.char_indices() {
        if count == per {
            out.push(&text[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    out.push(&text[start..]);
    out
}

/// Stamp `seq` of a [`Reply::stamped_text`] answer: `seq@NANOS;`, NANOS the
/// wall clock now in nanoseconds since the Unix epoch.
fn stamp(seq: usize) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{seq}@{nanos};")
}

/// The `(seq, nanos)` stamps in `text`, a [`Reply::stamped_text`] answer or any
/// run of its pieces (e.g. several merged into one delta), in order. `None` when
/// the text is not made of whole stamps.
pub fn parse_stamps(text: &str) -> Option<Vec<(usize, u128)>> {
    let body = text.strip_suffix(';')?;
    body.split(';')
        .map(|s| {
            let (seq, nanos) = s.split_once('@')?;
            Some((seq.parse().ok()?, nanos.parse().ok()?))
        })
        .collect()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn exhausted_reply() -> Reply {
    Reply::json(
        500,
        json!({"error": {
            "message": EXHAUSTED_MESSAGE,
            "type": "server_error",
            "code": "script_exhausted",
        }}),
    )
}

// ---------------------------------------------------------------------------
// The script file format (used by examples/fake_provider.rs)
// ---------------------------------------------------------------------------

/// One entry of a JSON script; see [`parse_script`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptEntry {
    text: Option<String>,
    tool_calls: Option<Vec<ScriptToolCall>>,
    reasoning: Option<String>,
    reasoning_field: Option<String>,
    usage: Option<ScriptUsage>,
    status: Option<u16>,
    body: Option<String>,
    json: Option<Value>,
    sse: Option<Vec<String>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    delay_ms: Option<u64>,
    chunk_delay_ms: Option<u64>,
    stamped_chunks: Option<usize>,
    refusal: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptToolCall {
    id: String,
    name: String,
    /// A string is sent as is; any other JSON value is sent as its JSON text.
    arguments: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// Parses a JSON array of replies. Each entry is one of
///
/// - a completion: `{"text": "hi"}`, `{"tool_calls": [{"id": "c1", "name":
///   "run_shell", "arguments": "{\"command\":\"true\"}"}]}` (both may be given),
///   with optional `"reasoning"`, `"reasoning_field"` (default
///   `reasoning_content`), `"usage": {"prompt_tokens": 1, "completion_tokens": 2}`,
///   `"chunk_delay_ms"`;
/// - `{"refusal": "I can't help with that."}`: [`Reply::refusal`], with the
///   same options as a completion (no `text` or `tool_calls` with it);
/// - `{"stamped_chunks": 1000}`: [`Reply::stamped_text`], with the same options
///   as a completion (a `text` or `tool_calls` may not be given with it);
/// - `{"status": 500, "body": "boom"}` (text/plain);
/// - `{"json": {...}}` with optional `"status"` (default 200);
/// - `{"sse": ["data: {}\n\n", ...]}`, raw chunks, with optional `"chunk_delay_ms"`;
///
/// and any entry may add `"headers": {"retry-after": "1"}` and `"delay_ms"`.
pub fn parse_script(text: &str) -> Result<Vec<Reply>, String> {
    let entries: Vec<ScriptEntry> =
        serde_json::from_str(text).map_err(|e| format!("script is not a valid reply list: {e}"))?;
    entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| script_reply(entry).map_err(|e| format!("script entry {i}: {e}")))
        .collect()
}

fn script_reply(e: ScriptEntry) -> Result<Reply, String> {
    if e.stamped_chunks.is_some() && (e.text.is_some() || e.tool_calls.is_some()) {
        return Err("stamped_chunks replaces text and tool_calls".into());
    }
    if e.refusal.is_some()
        && (e.text.is_some() || e.tool_calls.is_some() || e.stamped_chunks.is_some())
    {
        return Err("refusal replaces text, tool_calls and stamped_chunks".into());
    }
    let is_completion = e.text.is_some()
        || e.tool_calls.is_some()
        || e.stamped_chunks.is_some()
        || e.refusal.is_some();
    let kinds = [is_completion, e.json.is_some(), e.sse.is_some()];
    if kinds.iter().filter(|&&k| k).count() > 1 {
        return Err("give only one of text/tool_calls, json, sse".into());
    }
    if !is_completion && (e.reasoning.is_some() || e.reasoning_field.is_some() || e.usage.is_some())
    {
        return Err("reasoning and usage apply only to text/tool_calls".into());
    }
    if e.body.is_some() && (is_completion || e.json.is_some() || e.sse.is_some()) {
        return Err("body goes only with status".into());
    }
    let chunk_delay = Duration::from_millis(e.chunk_delay_ms.unwrap_or(0));
    let mut reply = if is_completion {
        if e.status.is_some() {
            return Err("status does not apply to text/tool_calls (they answer 200)".into());
        }
        let calls = e
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let arguments = match c.arguments {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                ToolCallSpec::new(c.id, c.name, arguments)
            })
            .collect();
        let mut reply = match (e.stamped_chunks, e.refusal) {
            (Some(n), _) => Reply::stamped_text(n),
            (None, Some(text)) => Reply::refusal(text),
            (None, None) => Reply::tool_calls(calls),
        }
        .chunk_delay(chunk_delay);
        if let Some(text) = e.text {
            reply = reply.with_text(text);
        }
        if let Some(reasoning) = e.reasoning {
            let field = e
                .reasoning_field
                .unwrap_or_else(|| "reasoning_content".into());
            reply = reply.with_reasoning(field, reasoning);
        }
        if let Some(u) = e.usage {
            reply = reply.with_usage(u.prompt_tokens, u.completion_tokens);
        }
        reply
    } else if let Some(body) = e.json {
        Reply::json(e.status.unwrap_or(200), body)
    } else if let Some(sse) = e.sse {
        if e.status.is_some() {
            return Err("status does not apply to sse (it answers 200)".into());
        }
        Reply::sse(
            sse.into_iter()
                .map(|s| SseChunk::raw(s).delay(chunk_delay))
                .collect(),
        )
    } else if let Some(status) = e.status {
        Reply::status(status, e.body.unwrap_or_default())
    } else {
        return Err("needs one of text, tool_calls, status, json, sse".into());
    };
    if e.chunk_delay_ms.is_some()
        && !matches!(reply.kind, ReplyKind::Completion(_) | ReplyKind::Sse(_))
    {
        return Err("chunk_delay_ms applies only to streamed replies".into());
    }
    for (name, value) in e.headers {
        reply = reply.header(name, value);
    }
    Ok(reply.delay(Duration::from_millis(e.delay_ms.unwrap_or(0))))
}

// ---------------------------------------------------------------------------
// HTTP/1.1
// ---------------------------------------------------------------------------

async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let listener = TcpListener::from_std(listener)
        .expect("fake provider: cannot register the listener with tokio");
    // Owns every connection task; dropping it at the end aborts them.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let id = shared.new_connection_id();
                    connections.spawn(handle_connection(stream, id, Arc::clone(&shared)));
                }
                Err(e) => {
                    eprintln!("fake provider: accept failed: {e}");
                    // Back off so a persistent error (out of file descriptors) does
                    // not spin this thread.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(done) = connections.join_next(), if !connections.is_empty() => {
                if let Err(e) = done {
                    if e.is_panic() {
                        eprintln!("fake provider: a connection task panicked: {e}");
                    }
                }
            }
        }
    }
    connections.shutdown().await;
}

/// Why a request could not be read.
enum ReadError {
    /// The client closed the connection or the socket failed: just close.
    Gone,
    /// The bytes are not HTTP we understand: answer 400 and close.
    Malformed(String),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> ReadError {
        ReadError::Gone
    }
}

async fn handle_connection(stream: TcpStream, connection: usize, shared: Arc<Shared>) {
    // Every SSE chunk must leave as soon as it is written.
    let _ = stream.set_nodelay(true);
    let mut conn = BufReader::new(stream);
    loop {
        let (request, keep_alive) = match read_request(&mut conn, connection).await {
            Ok(Some(r)) => r,
            Ok(None) | Err(ReadError::Gone) => return,
            Err(ReadError::Malformed(why)) => {
                eprintln!("fake provider: bad request: {why}");
                let reply = Reply::status(400, format!("fake provider: bad request: {why}\n"));
                let _ = respond(conn.get_mut(), reply, None, false).await;
                return;
            }
        };
        let (request, reply) = shared.record(request);
        let reply = match reply {
            Some(reply) => reply,
            None => {
                eprintln!(
                    "fake provider: script exhausted at request #{} ({} {})",
                    request.index, request.method, request.path
                );
                exhausted_reply()
            }
        };
        let keep_alive = keep_alive && !reply.closes_connection();
        match respond(conn.get_mut(), reply, Some(&request), keep_alive).await {
            Ok(true) if keep_alive => continue,
            _ => {
                let _ = conn.get_mut().shutdown().await;
                return;
            }
        }
    }
}

/// Reads one request. `Ok(None)` when the client closed the connection cleanly
/// between requests. The returned flag says whether the client allows keep-alive.
async fn read_request(
    conn: &mut BufReader<TcpStream>,
    connection: usize,
) -> Result<Option<(RecordedRequest, bool)>, ReadError> {
    let mut head_bytes = 0;
    let mut line = String::new();
    // Tolerate blank lines before a request line (RFC 9112 section 2.2).
    loop {
        line.clear();
        let n = read_line(conn, &mut line, &mut head_bytes).await?;
        if n == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, path, version) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(p), Some(v)) if v.starts_with("HTTP/1.") => {
            (m.to_string(), p.to_string(), v.to_string())
        }
        _ => {
            return Err(ReadError::Malformed(format!(
                "request line {:?}",
                line.trim_end()
            )))
        }
    };
    let mut headers = Vec::new();
    loop {
        line.clear();
        if read_line(conn, &mut line, &mut head_bytes).await? == 0 {
            return Err(ReadError::Gone);
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            break;
        }
        let Some((name, value)) = trimmed.split_once(':') else {
            return Err(ReadError::Malformed(format!("header line {trimmed:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let connection_header = header("connection").unwrap_or_default();
    let keep_alive = if version == "HTTP/1.0" {
        connection_header.contains("keep-alive")
    } else {
        !connection_header.contains("close")
    };
    if header("expect").is_some_and(|v| v == "100-continue") {
        conn.get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await?;
    }
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked_body(conn).await?
    } else if let Some(len) = header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| ReadError::Malformed(format!("content-length {len:?}")))?;
        if len > MAX_BODY_BYTES {
            return Err(ReadError::Malformed(format!("body of {len} bytes")));
        }
        let mut body = vec![0; len];
        conn.read_exact(&mut body).await?;
        body
    } else {
        Vec::new()
    };
    let body_json = serde_json::from_slice(&body).ok();
    let request = RecordedRequest {
        index: 0, // numbered by `Shared::record`
        connection,
        method,
        path,
        headers,
        body,
        body_json,
    };
    Ok(Some((request, keep_alive)))
}

/// Reads one line (with its line end) into `line`, counting against the head limit.
async fn read_line(
    conn: &mut BufReader<TcpStream>,
    line: &mut String,
    head_bytes: &mut usize,
) -> Result<usize, ReadError> {
    let mut raw = Vec::new();
    let n = conn.read_until(b'\n', &mut raw).await?;
    *head_bytes += n;
    if *head_bytes > MAX_HEAD_BYTES {
        return Err(ReadError::Malformed("request head too large".into()));
    }
    line.push_str(&String::from_utf8_lossy(&raw));
    Ok(n)
}

async fn read_chunked_body(conn: &mut BufReader<TcpStream>) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        // The size line and the trailers count against the head limit, per chunk.
        let mut line_bytes = 0;
        if read_line(conn, &mut line, &mut line_bytes).await? == 0 {
            return Err(ReadError::Gone);
        }
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ReadError::Malformed(format!("chunk size line {:?}", line.trim_end())))?;
        if size == 0 {
            // Trailer fields, then the blank line that ends the body.
            loop {
                line.clear();
                if read_line(conn, &mut line, &mut line_bytes).await? == 0 {
                    return Err(ReadError::Gone);
                }
                if line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(ReadError::Malformed("chunked body too large".into()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        conn.read_exact(&mut body[start..]).await?;
        let mut crlf = [0; 2];
        conn.read_exact(&mut crlf).await?;
        if &crlf != b"\r\n" {
            return Err(ReadError::Malformed("chunk not followed by CRLF".into()));
        }
    }
}

/// Writes `reply`. `Ok(true)` when the response ended cleanly (the connection may
/// be reused), `Ok(false)` when the script dropped the connection.
async fn respond(
    stream: &mut TcpStream,
    reply: Reply,
    request: Option<&RecordedRequest>,
    keep_alive: bool,
) -> io::Result<bool> {
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let body_len = request.map_or(0, |r| r.body.len());
    let model = request
        .and_then(RecordedRequest::model)
        .unwrap_or("fake-model");
    let id = format!("chatcmpl-fake-{}", request.map_or(0, |r| r.index));
    let (status, content_type, body) = match reply.kind {
        ReplyKind::Json { status, body } => (status, "application/json", body.to_string()),
        ReplyKind::Status { status, body } => (status, "text/plain; charset=utf-8", body),
        ReplyKind::Sse(chunks) => {
            return write_sse(stream, &reply.headers, &chunks, keep_alive).await;
        }
        ReplyKind::Completion(c) => {
            // The same scripted answer in the shape of the protocol asked for.
            let path = request.map_or("", |r| r.path.split('?').next().unwrap_or(""));
            let protocol = if path.ends_with("/responses") {
                Protocol::Responses
            } else if path.ends_with("/messages") {
                Protocol::Messages
            } else {
                Protocol::Completions
            };
            if request.is_some_and(RecordedRequest::wants_stream) {
                let chunks = match protocol {
                    Protocol::Completions => c.stream_chunks(model, &id, body_len),
                    Protocol::Responses => responses::stream_chunks(&c, model, &id, body_len),
                    Protocol::Messages => messages::stream_chunks(&c, model, &id, body_len),
                };
                return write_sse(stream, &reply.headers, &chunks, keep_alive).await;
            }
            let body = match protocol {
                Protocol::Completions => c.response_json(model, &id, body_len),
                Protocol::Responses => responses::response_json(&c, model, &id, body_len),
                Protocol::Messages => messages::response_json(&c, model, &id, body_len),
            };
            (200, "application/json", body.to_string())
        }
    };
    let defaults = [
        ("content-type", content_type.to_string()),
        ("content-length", body.len().to_string()),
    ];
    let mut out = response_head(status, &defaults, &reply.headers, keep_alive);
    out.extend_from_slice(body.as_bytes());
    stream.write_all(&out).await?;
    stream.flush().await?;
    Ok(true)
}

async fn write_sse(
    stream: &mut TcpStream,
    headers: &[(String, String)],
    chunks: &[SseChunk],
    keep_alive: bool,
) -> io::Result<bool> {
    let defaults = [
        ("content-type", "text/event-stream".to_string()),
        ("cache-control", "no-cache".to_string()),
        ("transfer-encoding", "chunked".to_string()),
    ];
    let head = response_head(200, &defaults, headers, keep_alive);
    stream.write_all(&head).await?;
    stream.flush().await?;
    for chunk in chunks {
        if !chunk.delay.is_zero() {
            tokio::time::sleep(chunk.delay).await;
        }
        let stamped;
        let bytes: &[u8] = match &chunk.piece {
            Piece::Disconnect => return Ok(false),
            Piece::Gate(gate) => {
                // The permit goes back when dropped: once open, it stays open.
                let _ = gate.0.acquire().await;
                continue;
            }
            Piece::Bytes(bytes) => bytes,
            Piece::Stamped { head, seq, tail } => {
                // The stamp must be the time of the write. Tokio's budget
                // makes a busy task yield at its next I/O, which here would
                // be the write after the stamp, and the chunk would then
                // leave a whole scheduler round (tens of ms with 100 streams)
                // after its stamp. So the yield, when due, comes first.
                tokio::task::consume_budget().await;
                stamped = [head.as_slice(), stamp(*seq).as_bytes(), tail].concat();
                &stamped
            }
        };
        // A zero-length HTTP chunk would end the body.
        if !bytes.is_empty() {
            let mut out = format!("{:x}\r\n", bytes.len()).into_bytes();
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
            // Unconstrained: only a full socket (the reader not keeping up)
            // may hold a stamped chunk back, never the budget.
            tokio::task::unconstrained(async {
                stream.write_all(&out).await?;
                stream.flush().await
            })
            .await?;
        }
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.flush().await?;
    Ok(true)
}

fn response_head(
    status: u16,
    defaults: &[(&str, String)],
    extra: &[(String, String)],
    keep_alive: bool,
) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    let overridden = |name: &str| extra.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    for (name, value) in defaults {
        if !overridden(name) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    if !keep_alive && !overridden("connection") {
        head.push_str("connection: close\r\n");
    }
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// llama.cpp's answer to a request longer than its window, verbatim.
pub const LLAMA_OVERFLOW: &str = r#"{"error":{"code":400,"message":"request (6033 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":6033,"n_ctx":4096}}"#;

/// A prompt long for a 4,096-token window with the tools' definitions
/// beside it (about 2,100 tokens of its own, and the definitions, schemas
/// and all, about 3,000 more), but not for the 8,192 tokens buddy assumes of
/// a model it does not know: the estimate stays under the compaction
/// threshold (80%), so nothing is compacted first and the server refuses it.
pub fn huge_prompt() -> String {
    format!("HUGE-PROMPT {}", "lorem ipsum ".repeat(700))
}
