//! Tests of the fake provider itself, with a plain reqwest client and raw sockets,
//! so the end-to-end tests built on it can trust what it sends and records.

use crate::support;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::fake_provider::{
    parse_script, parse_stamps, FakeProvider, Reply, SseChunk, ToolCallSpec, EXHAUSTED_MESSAGE,
};

fn chat_url(provider: &FakeProvider) -> String {
    format!("{}/chat/completions", provider.base_url())
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> reqwest::Response {
    client
        .post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("serialize request"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url} failed: {e}"))
}

async fn body_text(response: reqwest::Response) -> String {
    response.text().await.expect("read response body")
}

/// The `data:` payloads of an SSE body, in order.
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .flat_map(|event| event.lines())
        .filter_map(|line| line.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

fn parse(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {data}"))
}

/// Sends raw bytes on a fresh connection and reads until the server closes it.
fn raw_exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the fake provider");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set read timeout");
    stream.write_all(request).expect("write raw request");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .expect("read raw response until close");
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn json_reply_is_served_with_its_status_and_body() {
    let provider = FakeProvider::start(vec![Reply::json(201, json!({"ok": true, "n": 3}))]);
    let client = reqwest::Client::new();
    let response = post(&client, &chat_url(&provider), &json!({"model": "m"})).await;
    assert_eq!(response.status().as_u16(), 201);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let body: Value = serde_json::from_str(&body_text(response).await).expect("JSON body");
    assert_eq!(body, json!({"ok": true, "n": 3}));
}

#[tokio::test]
async fn a_marked_reply_answers_the_request_that_carries_its_marker() {
    let provider = FakeProvider::start(vec![
        Reply::json(200, json!({"for": "a"})).for_marker("MARK-A"),
        Reply::json(200, json!({"for": "b"})).for_marker("MARK-B"),
        Reply::json(200, json!({"for": "any"})),
    ]);
    let client = reqwest::Client::new();
    let url = chat_url(&provider);
    let ask = |text: &str| json!({"messages": [{"role": "user", "content": text}]});
    // Out of script order: B's request first, then one without a marker,
    // then A's.
    let b = body_text(post(&client, &url, &ask("do MARK-B")).await).await;
    let any = body_text(post(&client, &url, &ask("plain")).await).await;
    let a = body_text(post(&client, &url, &ask("do MARK-A")).await).await;
    assert_eq!(
        serde_json::from_str::<Value>(&b).unwrap(),
        json!({"for": "b"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&any).unwrap(),
        json!({"for": "any"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&a).unwrap(),
        json!({"for": "a"})
    );
    assert_eq!(provider.remaining_replies(), 0);
}

#[tokio::test]
async fn sse_chunks_arrive_as_separate_reads_after_their_delays() {
    let step = Duration::from_millis(120);
    let chunks = vec![
        SseChunk::data(json!({"n": 1})),
        SseChunk::data(json!({"n": 2})).delay(step),
        SseChunk::comment("keep-alive"),
        SseChunk::done().delay(step),
    ];
    let expected: Vec<Vec<u8>> = chunks.iter().map(|c| c.bytes().to_vec()).collect();
    let cumulative = [Duration::ZERO, step, step, step * 2];
    let provider = FakeProvider::start(vec![Reply::sse(chunks)]);
    let client = reqwest::Client::new();

    let started = Instant::now();
    let mut response = post(&client, &chat_url(&provider), &json!({"stream": true})).await;
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut received = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("read SSE chunk") {
        received.push((chunk.to_vec(), started.elapsed()));
    }

    let pieces: Vec<Vec<u8>> = received.iter().map(|(b, _)| b.clone()).collect();
    assert_eq!(pieces, expected, "each SSE chunk should be its own read");
    for ((_, at), min) in received.iter().zip(cumulative) {
        assert!(
            *at >= min,
            "chunk arrived after {at:?}, before its delay {min:?}"
        );
    }
}

#[tokio::test]
async fn keep_alive_serves_three_sequential_requests_on_one_connection() {
    let provider = FakeProvider::start(vec![
        Reply::json(200, json!({"reply": 0})),
        Reply::sse(vec![SseChunk::data_text("one"), SseChunk::done()]),
        Reply::status(200, "two"),
    ]);
    let client = reqwest::Client::new();
    let url = chat_url(&provider);

    let first = body_text(post(&client, &url, &json!({"i": 0})).await).await;
    let second = body_text(post(&client, &url, &json!({"i": 1})).await).await;
    let third = body_text(post(&client, &url, &json!({"i": 2})).await).await;

    assert_eq!(first, r#"{"reply":0}"#);
    assert_eq!(second, "data: one\n\ndata: [DONE]\n\n");
    assert_eq!(third, "two");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    for (i, request) in requests.iter().enumerate() {
        assert_eq!(request.index, i);
        assert_eq!(request.json()["i"], i);
        assert_eq!(
            request.connection, requests[0].connection,
            "request {i} should reuse the first connection"
        );
    }
}

#[tokio::test]
async fn requests_are_recorded_with_method_path_headers_and_body() {
    let provider = FakeProvider::start(vec![
        Reply::json(200, json!({})),
        Reply::json(200, json!({})),
    ]);
    let client = reqwest::Client::new();
    let body = json!({"model": "gpt-test", "stream": false, "messages": [{"role": "user", "content": "hi"}]});
    post(&client, &chat_url(&provider), &body).await;
    let get = client
        .get(format!("{}/files?x=1", provider.base_url()))
        .header("Authorization", "Bearer sk-test")
        .header("X-Custom-Thing", "Value With Case")
        .send()
        .await
        .expect("GET /v1/files");
    assert_eq!(get.status().as_u16(), 200);

    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let chat = &requests[0];
    assert_eq!(chat.method, "POST");
    assert_eq!(chat.path, "/v1/chat/completions");
    assert!(chat.is_chat_completion());
    assert_eq!(
        chat.header("Content-Type").as_deref(),
        Some("application/json")
    );
    assert_eq!(chat.body, serde_json::to_vec(&body).unwrap());
    assert_eq!(chat.json(), &body);
    assert_eq!(chat.model(), Some("gpt-test"));
    assert!(!chat.wants_stream());

    let models = &requests[1];
    assert_eq!(models.method, "GET");
    assert_eq!(models.path, "/v1/files?x=1");
    assert!(!models.is_chat_completion());
    assert!(models.body.is_empty());
    assert!(models.body_json.is_none());
    assert!(
        models.headers.iter().any(|(n, _)| n == "x-custom-thing"),
        "header names are stored lowercased: {:?}",
        models.headers
    );
    assert_eq!(
        models.header("authorization").as_deref(),
        Some("Bearer sk-test")
    );
    assert_eq!(
        models.header("X-CUSTOM-THING").as_deref(),
        Some("Value With Case")
    );
    assert_eq!(models.header("x-missing"), None);
    assert_eq!(provider.chat_requests().len(), 1);
}

#[test]
fn chunked_request_body_is_decoded() {
    let provider = FakeProvider::start(vec![Reply::status(200, "got it")]);
    let response = raw_exchange(
        provider.addr(),
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
          Connection: close\r\n\r\n5\r\n{\"a\":\r\n4;ext=1\r\n 12}\r\n0\r\nX-Trailer: t\r\n\r\n",
    );
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.contains("connection: close\r\n"), "{response}");
    assert!(response.ends_with("\r\n\r\ngot it"), "{response}");
    let request = &provider.requests()[0];
    assert_eq!(request.body_text(), "{\"a\": 12}");
    assert_eq!(request.json(), &json!({"a": 12}));
}

#[tokio::test]
async fn exhausted_script_answers_500_with_a_json_error() {
    let provider = FakeProvider::start(vec![Reply::status(200, "only one")]);
    let client = reqwest::Client::new();
    let url = chat_url(&provider);
    assert_eq!(
        body_text(post(&client, &url, &json!({})).await).await,
        "only one"
    );
    assert_eq!(provider.remaining_replies(), 0);

    let response = post(&client, &url, &json!({})).await;
    assert_eq!(response.status().as_u16(), 500);
    let body: Value = serde_json::from_str(&body_text(response).await).expect("JSON error body");
    assert_eq!(body["error"]["message"], EXHAUSTED_MESSAGE);
    assert_eq!(
        provider.request_count(),
        2,
        "exhausted requests are still recorded"
    );
}

#[tokio::test]
async fn status_reply_carries_retry_after_header() {
    let provider = FakeProvider::start(vec![
        Reply::status(429, "slow down").header("Retry-After", "2")
    ]);
    let client = reqwest::Client::new();
    let response = post(&client, &chat_url(&provider), &json!({})).await;
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"].to_str().unwrap(), "2");
    assert_eq!(body_text(response).await, "slow down");
}

#[tokio::test]
async fn reply_delay_holds_back_the_response_head() {
    let delay = Duration::from_millis(150);
    let provider = FakeProvider::start(vec![Reply::status(503, "later").delay(delay)]);
    let client = reqwest::Client::new();
    let started = Instant::now();
    let response = post(&client, &chat_url(&provider), &json!({})).await;
    assert!(
        started.elapsed() >= delay,
        "head came after {:?}",
        started.elapsed()
    );
    assert_eq!(response.status().as_u16(), 503);
}

#[tokio::test]
async fn text_reply_streams_deltas_then_usage_then_done_when_asked() {
    let provider = FakeProvider::start(vec![Reply::text("Hello there, world")
        .with_reasoning("reasoning_content", "thinking hard")
        .with_usage(42, 7)]);
    let client = reqwest::Client::new();
    let request =
        json!({"model": "m-1", "stream": true, "stream_options": {"include_usage": true}});
    let response = post(&client, &chat_url(&provider), &request).await;
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let data = sse_data(&body_text(response).await);

    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| parse(d)).collect();
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "m-1", "the request's model is echoed");
    }
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(
        usage_chunk["usage"],
        json!({"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49})
    );
    let deltas: Vec<&Value> = chunks[..chunks.len() - 1]
        .iter()
        .map(|c| &c["choices"][0]["delta"])
        .collect();
    assert_eq!(deltas[0]["role"], "assistant");
    let reasoning: String = deltas
        .iter()
        .filter_map(|d| d["reasoning_content"].as_str())
        .collect();
    assert_eq!(reasoning, "thinking hard");
    let content_deltas: Vec<&str> = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert!(
        content_deltas.len() > 3,
        "text is streamed in several deltas: {content_deltas:?}"
    );
    assert_eq!(content_deltas.concat(), "Hello there, world");
    let first_content = deltas
        .iter()
        .position(|d| d["content"].as_str().is_some_and(|s| !s.is_empty()))
        .unwrap();
    let last_reasoning = deltas
        .iter()
        .rposition(|d| d.get("reasoning_content").is_some())
        .unwrap();
    assert!(
        last_reasoning < first_content,
        "reasoning streams before content"
    );
    let finish = &chunks[chunks.len() - 2]["choices"][0]["finish_reason"];
    assert_eq!(finish, "stop");
}

#[tokio::test]
async fn stamped_text_streams_one_delta_per_piece_stamped_at_write_time() {
    let script = parse_script(r#"[{"stamped_chunks": 50}]"#).expect("valid script");
    let provider = FakeProvider::start(vec![Reply::stamped_text(200), script[0].clone()]);
    let client = reqwest::Client::new();
    let request = json!({"model": "m", "stream": true});
    for expected in [200, 50] {
        let before = unix_nanos();
        let data = sse_data(&body_text(post(&client, &chat_url(&provider), &request).await).await);
        let after = unix_nanos();
        assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
        let texts: Vec<String> = data[..data.len() - 1]
            .iter()
            .map(|d| parse(d))
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(String::from)
            })
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(texts.len(), expected, "one delta per piece");
        let mut last = before;
        for (i, text) in texts.iter().enumerate() {
            let stamps = parse_stamps(text).unwrap_or_else(|| panic!("not a stamp: {text:?}"));
            assert_eq!(stamps.len(), 1, "{text:?}");
            let (seq, nanos) = stamps[0];
            assert_eq!(seq, i);
            assert!(
                nanos >= last && nanos <= after,
                "stamped in order, at write time"
            );
            last = nanos;
        }
        // Merged pieces split back into their stamps.
        let merged = texts[..3].concat();
        let seqs: Vec<usize> = parse_stamps(&merged).unwrap().iter().map(|s| s.0).collect();
        assert_eq!(seqs, [0, 1, 2]);
    }
    assert_eq!(parse_stamps("1@2"), None);
    assert_eq!(parse_stamps("x;"), None);
    assert!(parse_script(r#"[{"stamped_chunks": 5, "text": "x"}]"#).is_err());
}

fn unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[tokio::test]
async fn text_reply_is_a_chat_completion_without_stream() {
    let provider = FakeProvider::start(vec![
        Reply::text("plain answer").with_reasoning("reasoning", "hmm"),
        Reply::text("defaults"),
    ]);
    let client = reqwest::Client::new();
    let url = chat_url(&provider);
    let response = post(&client, &url, &json!({"model": "m-2", "stream": false})).await;
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let body: Value = serde_json::from_str(&body_text(response).await).expect("JSON completion");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "m-2");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "plain answer");
    assert_eq!(choice["message"]["reasoning"], "hmm");
    assert!(choice["message"].get("tool_calls").is_none());

    let body: Value =
        serde_json::from_str(&body_text(post(&client, &url, &json!({})).await).await).unwrap();
    let usage = &body["usage"];
    let prompt = usage["prompt_tokens"]
        .as_u64()
        .expect("default prompt_tokens");
    let completion = usage["completion_tokens"]
        .as_u64()
        .expect("default completion_tokens");
    assert!(
        prompt > 0 && completion > 0,
        "plausible default usage: {usage}"
    );
    assert_eq!(usage["total_tokens"].as_u64(), Some(prompt + completion));
}

#[tokio::test]
async fn tool_calls_stream_id_and_name_first_then_argument_fragments() {
    let calls = vec![
        ToolCallSpec::new("call_1", "run_shell", r#"{"command":"echo hi"}"#),
        ToolCallSpec::new("call_2", "read_file", r#"{"path":"Cargo.toml"}"#),
    ];
    let provider = FakeProvider::start(vec![Reply::tool_calls(calls.clone())]);
    let client = reqwest::Client::new();
    let response = post(&client, &chat_url(&provider), &json!({"stream": true})).await;
    let data = sse_data(&body_text(response).await);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));

    let mut fragments: Vec<Vec<Value>> = vec![Vec::new(), Vec::new()];
    let mut finish = None;
    for d in &data[..data.len() - 1] {
        let chunk = parse(d);
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_string());
        }
        for call in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"]
                .as_u64()
                .expect("tool call delta has an index") as usize;
            fragments[index].push(call.clone());
        }
    }
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    for (spec, fragments) in calls.iter().zip(&fragments) {
        assert!(
            fragments.len() > 2,
            "arguments come in several fragments: {fragments:?}"
        );
        assert_eq!(fragments[0]["id"], spec.id.as_str());
        assert_eq!(fragments[0]["type"], "function");
        assert_eq!(fragments[0]["function"]["name"], spec.name.as_str());
        assert!(fragments[1..].iter().all(|f| f.get("id").is_none()));
        let arguments: String = fragments
            .iter()
            .filter_map(|f| f["function"]["arguments"].as_str())
            .collect();
        assert_eq!(arguments, spec.arguments);
    }
}

#[tokio::test]
async fn tool_calls_without_stream_come_in_the_message() {
    let provider = FakeProvider::start(vec![Reply::tool_calls(vec![ToolCallSpec::new(
        "c1", "time", "{}",
    )])
    .with_text("checking")]);
    let client = reqwest::Client::new();
    let body: Value = serde_json::from_str(
        &body_text(post(&client, &chat_url(&provider), &json!({})).await).await,
    )
    .unwrap();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], "checking");
    assert_eq!(
        message["tool_calls"],
        json!([{"id": "c1", "type": "function", "function": {"name": "time", "arguments": "{}"}}])
    );
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn disconnect_mid_stream_fails_the_client_read() {
    let provider = FakeProvider::start(vec![Reply::sse(vec![
        SseChunk::raw("data: {\"par"),
        SseChunk::disconnect(),
    ])]);
    let client = reqwest::Client::new();
    let mut response = post(&client, &chat_url(&provider), &json!({"stream": true})).await;
    let first = response.chunk().await.expect("first chunk arrives");
    assert_eq!(first.as_deref(), Some(&b"data: {\"par"[..]));
    let mut outcome = response.chunk().await;
    while let Ok(Some(_)) = outcome {
        outcome = response.chunk().await;
    }
    assert!(
        outcome.is_err(),
        "a dropped stream is an error, got {outcome:?}"
    );
}

#[tokio::test]
async fn stream_without_done_and_with_crlf_ends_cleanly() {
    let chunks: Vec<SseChunk> = Reply::text("abc")
        .without_done()
        .stream_chunks()
        .into_iter()
        .map(SseChunk::crlf)
        .collect();
    let provider = FakeProvider::start(vec![Reply::sse(chunks)]);
    let client = reqwest::Client::new();
    let body = body_text(post(&client, &chat_url(&provider), &json!({"stream": true})).await).await;
    assert!(!body.contains("[DONE]"));
    assert!(body.ends_with("}\r\n\r\n"), "{body:?}");
    assert!(
        !body.replace("\r\n", "").contains('\n'),
        "only CRLF line ends: {body:?}"
    );
}

#[test]
fn sse_chunk_helpers_build_the_expected_bytes() {
    assert_eq!(
        SseChunk::data(json!({"a": 1})).bytes(),
        b"data: {\"a\":1}\n\n"
    );
    assert_eq!(SseChunk::done().bytes(), b"data: [DONE]\n\n");
    assert_eq!(SseChunk::comment("keep-alive").bytes(), b": keep-alive\n\n");
    assert_eq!(
        SseChunk::raw("a\nb\r\n\n").crlf().bytes(),
        b"a\r\nb\r\n\r\n"
    );
    let all = SseChunk::concat(&[SseChunk::done(), SseChunk::disconnect(), SseChunk::done()]);
    assert_eq!(all, b"data: [DONE]\n\ndata: [DONE]\n\n");
    let split = SseChunk::split_every(&all, 5);
    assert_eq!(split.len(), all.len().div_ceil(5));
    assert_eq!(SseChunk::concat(&split), all);
}

#[tokio::test]
async fn repeating_server_cycles_its_script() {
    let provider =
        FakeProvider::start_repeating(vec![Reply::status(200, "a"), Reply::status(503, "b")]);
    let client = reqwest::Client::new();
    let url = chat_url(&provider);
    let mut seen = Vec::new();
    for _ in 0..5 {
        let response = post(&client, &url, &json!({})).await;
        seen.push((response.status().as_u16(), body_text(response).await));
    }
    let want = [(200, "a"), (503, "b"), (200, "a"), (503, "b"), (200, "a")];
    let want: Vec<(u16, String)> = want.iter().map(|(s, b)| (*s, b.to_string())).collect();
    assert_eq!(seen, want);
    assert_eq!(provider.remaining_replies(), 2);
}

#[test]
fn wait_for_requests_returns_once_they_arrive() {
    let provider = FakeProvider::start(vec![Reply::status(200, "x")]);
    let addr = provider.addr();
    let sender = std::thread::spawn(move || {
        raw_exchange(
            addr,
            b"GET /v1/files HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
    });
    let requests = provider.wait_for_requests(1, Duration::from_secs(10));
    assert_eq!(requests[0].path, "/v1/files");
    let response = sender.join().expect("sender thread");
    assert!(response.ends_with("\r\n\r\nx"), "{response}");
}

#[test]
fn malformed_request_gets_400() {
    let provider = FakeProvider::start(vec![]);
    let response = raw_exchange(provider.addr(), b"NONSENSE\r\n\r\n");
    assert!(response.starts_with("HTTP/1.1 400 "), "{response}");
    assert_eq!(provider.request_count(), 0);
}

#[tokio::test]
async fn dropping_the_provider_closes_its_port_and_connections() {
    // A marker only this provider answers with: other tests, running at the
    // same time, may bind the freed port again, and that must not count.
    let marker = format!("only-this-provider-{}", std::process::id());
    let provider = FakeProvider::start_repeating(vec![Reply::status(200, marker.clone())]);
    let addr = provider.addr();
    // A keep-alive connection that has had its answer and stays open.
    let mut kept = TcpStream::connect(addr).expect("connect");
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    kept.write_all(request.as_bytes()).expect("send");
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(&marker) {
        let n = kept.read(&mut buf).expect("the answer");
        assert!(n > 0, "closed before answering");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(provider);
    // The kept connection is closed by the server: EOF (or a reset).
    match kept.read(&mut buf) {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!("the connection stayed open and sent {n} more bytes"),
    }
    // Nothing answers on the port, or what does is not this provider.
    if let Ok(mut again) = TcpStream::connect(addr) {
        again
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let closing = request.replacen("\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1);
        let _ = again.write_all(closing.as_bytes());
        let mut answer = Vec::new();
        let _ = again.read_to_end(&mut answer);
        assert!(
            !String::from_utf8_lossy(&answer).contains(&marker),
            "the dropped provider still answers on {addr}"
        );
    }
}

#[tokio::test]
async fn script_file_format_builds_each_reply_kind() {
    let script = parse_script(
        r#"[
            {"text": "hello", "reasoning": "hm", "usage": {"prompt_tokens": 5, "completion_tokens": 6}},
            {"tool_calls": [{"id": "c1", "name": "run_shell", "arguments": {"command": "true"}}]},
            {"status": 500, "body": "boom", "headers": {"retry-after": "1"}},
            {"json": {"x": 1}, "status": 404},
            {"sse": ["data: 1\n\n", "data: [DONE]\n\n"], "chunk_delay_ms": 1}
        ]"#,
    )
    .expect("valid script");
    let provider = FakeProvider::start(script);
    let client = reqwest::Client::new();
    let url = chat_url(&provider);

    let body: Value =
        serde_json::from_str(&body_text(post(&client, &url, &json!({})).await).await).unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "hello");
    assert_eq!(body["choices"][0]["message"]["reasoning_content"], "hm");
    assert_eq!(body["usage"]["total_tokens"], 11);

    let body: Value =
        serde_json::from_str(&body_text(post(&client, &url, &json!({})).await).await).unwrap();
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], r#"{"command":"true"}"#);

    let response = post(&client, &url, &json!({})).await;
    assert_eq!(response.status().as_u16(), 500);
    assert_eq!(response.headers()["retry-after"].to_str().unwrap(), "1");
    assert_eq!(body_text(response).await, "boom");

    let response = post(&client, &url, &json!({})).await;
    assert_eq!(response.status().as_u16(), 404);
    assert_eq!(body_text(response).await, r#"{"x":1}"#);

    let response = post(&client, &url, &json!({})).await;
    assert_eq!(body_text(response).await, "data: 1\n\ndata: [DONE]\n\n");
}

#[test]
fn script_file_format_rejects_mistakes_with_a_reason() {
    let err = |text: &str| parse_script(text).expect_err("should be rejected");
    assert!(err(r#"[{"txet": "x"}]"#).contains("unknown field"));
    assert!(err(r#"[{"text": "x"}, {}]"#).starts_with("script entry 1:"));
    assert!(err(r#"[{"text": "x", "json": {}}]"#).contains("only one"));
    assert!(
        err(r#"[{"status": 500, "usage": {"prompt_tokens": 1, "completion_tokens": 1}}]"#)
            .contains("usage")
    );
    assert!(err("{").contains("not a valid reply list"));
}

#[test]
fn buddy_cmd_runs_the_binary_in_an_isolated_home() {
    let cmd = support::BuddyCmd::new()
        .config("# empty\n")
        .env("BUDDY_TEST_MARKER", "1")
        .arg("--version");
    let out = cmd.run();
    out.assert_success();
    assert!(out.stdout.starts_with("buddy "), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("buddy.toml")).expect("config written"),
        "# empty\n"
    );
    assert!(cmd.home_dir().starts_with(std::env::temp_dir()));
}

#[tokio::test]
async fn the_model_list_is_answered_outside_the_script() {
    let provider = FakeProvider::start(vec![Reply::text("scripted")]).with_models(&["m1", "m2"]);
    let client = reqwest::Client::new();
    let response = client
        .get(format!("{}/models", provider.base_url()))
        .send()
        .await
        .expect("GET /v1/models");
    let list: Value = serde_json::from_str(&body_text(response).await).expect("a JSON model list");
    assert_eq!(list["data"][0]["id"], "m1");
    assert_eq!(list["data"][1]["id"], "m2");
    assert_eq!(provider.remaining_replies(), 1, "the script is untouched");
    assert_eq!(provider.requests()[0].path, "/v1/models");
}
