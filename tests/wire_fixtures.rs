//! Replays every recorded provider response in `tests/fixtures/wire/` through the
//! real binary: the fake provider sends the recorded body (a stream cut into
//! uneven pieces, so SSE lines and UTF-8 characters are split across reads),
//! `buddy exec` runs against it, and the answer, reasoning, tool calls, usage and
//! errors are checked against `expected.toml`. Where the recorded turn ends in tool
//! calls, a second scripted reply ("done") ends the run and the calls are checked
//! in the history that second request carries.
//!
//! Every fixture is run and reported (PASS/FAIL on stderr); the test fails at the
//! end listing all that failed, so one run shows everything.

use crate::support;

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, SseChunk};
use support::BuddyCmd;

/// The piece sizes a stream is cut into, in turn.
const PIECES: [usize; 4] = [1, 7, 3, 64];

/// The answer the second scripted reply gives after tool calls.
const DONE: &str = "done";

#[derive(Debug, Deserialize)]
struct Expectations {
    fixture: Vec<Fixture>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    file: String,
    provider: String,
    api: String,
    #[serde(default = "ok_status")]
    status: u16,
    answer: Option<String>,
    #[serde(default)]
    reasoning: Vec<String>,
    #[serde(default)]
    tool_calls: Vec<ExpectedCall>,
    text_before_tools: Option<String>,
    usage: Option<[u64; 2]>,
    #[serde(default)]
    exit: i32,
    error: Option<String>,
    requests: Option<usize>,
    #[serde(default)]
    max_retries: u32,
    #[serde(default = "one")]
    repeat: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedCall {
    name: String,
    arguments: String,
}

fn ok_status() -> u16 {
    200
}

fn one() -> usize {
    1
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wire")
}

impl Fixture {
    fn streamed(&self) -> bool {
        self.file.ends_with(".sse")
    }

    /// The recorded body as one scripted reply.
    fn reply(&self, body: &[u8]) -> Reply {
        if self.streamed() {
            let mut chunks = Vec::new();
            let mut at = 0;
            let mut i = 0;
            while at < body.len() {
                let end = (at + PIECES[i % PIECES.len()]).min(body.len());
                chunks.push(SseChunk::raw(body[at..end].to_vec()));
                at = end;
                i += 1;
            }
            Reply::sse(chunks)
        } else {
            Reply::status(self.status, String::from_utf8_lossy(body).into_owned())
                .header("Content-Type", "application/json")
        }
    }

    fn config(&self, p: &FakeProvider) -> String {
        format!(
            "[agent]\nmodel = \"fake\"\n\n\
             [models.fake]\napi = \"{}\"\napi_base_url = \"{}\"\n\
             model = \"fake-model\"\napi_key = \"sk-fake\"\nstream = {}\n\n\
             [tools]\nshell_confirm = false\n\n\
             [network]\nmax_retries = {}\n\n\
             [display]\nshow_tokens = true\n",
            self.api,
            p.base_url(),
            self.streamed(),
            self.max_retries
        )
    }

    /// The model requests of this protocol.
    fn model_requests(&self, p: &FakeProvider) -> Vec<RecordedRequest> {
        match self.api.as_str() {
            "responses" => p.responses_requests(),
            "messages" => p.messages_requests(),
            _ => p.chat_requests(),
        }
    }

    /// Replays the fixture; returns what did not match (empty when it passed).
    fn check(&self) -> Vec<String> {
        let path = fixtures_dir().join(&self.file);
        let body = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => return vec![format!("cannot read {}: {e}", path.display())],
        };
        let mut script = vec![self.reply(&body); self.repeat];
        if !self.tool_calls.is_empty() {
            script.push(Reply::text(DONE));
        }
        let p = FakeProvider::start(script);
        let out = BuddyCmd::new()
            .config(self.config(&p))
            .args(["exec", "replay the recorded answer"])
            .run();
        let mut bad = Vec::new();
        let requests = self.model_requests(&p);
        let show = |what: &str| {
            format!(
                "{what}\n      --- stdout ---\n{}\n      --- stderr ---\n{}",
                indent(&out.stdout),
                indent(&out.stderr)
            )
        };

        if out.code() != Some(self.exit) {
            bad.push(show(&format!(
                "exit code {:?}, expected {}",
                out.code(),
                self.exit
            )));
        }
        let want_requests = self
            .requests
            .unwrap_or(if self.tool_calls.is_empty() { 1 } else { 2 });
        if requests.len() != want_requests {
            bad.push(format!(
                "{} model request(s), expected {want_requests}",
                requests.len()
            ));
        }
        if let Some(answer) = &self.answer {
            let want = format!("{answer}\n");
            if out.stdout != want {
                bad.push(format!(
                    "stdout {:?}, expected {:?}",
                    clip(&out.stdout),
                    clip(&want)
                ));
            }
        }
        if !self.tool_calls.is_empty() && !out.stdout.ends_with(&format!("{DONE}\n")) {
            bad.push(format!(
                "stdout {:?} does not end with the final answer {DONE:?}",
                clip(&out.stdout)
            ));
        }
        for text in &self.reasoning {
            let seen = out.stderr.matches(text.as_str()).count();
            if seen != 1 {
                bad.push(show(&format!(
                    "reasoning {:?} shown {seen} time(s) on stderr, expected once",
                    clip(text)
                )));
            }
            if out.stdout.contains(text.as_str()) {
                bad.push(format!("reasoning {:?} leaked to stdout", clip(text)));
            }
        }
        if let Some([prompt, completion]) = self.usage {
            let line = format!("tokens: prompt {prompt}, completion {completion},");
            if !out.stderr.contains(&line) {
                let seen: Vec<&str> = out
                    .stderr
                    .lines()
                    .filter(|l| l.contains("tokens:"))
                    .collect();
                bad.push(format!("no token line {line:?} on stderr; saw {seen:?}"));
            }
        }
        if let Some(error) = &self.error {
            if !out.stderr.contains(error.as_str()) {
                bad.push(show(&format!("stderr lacks the error text {error:?}")));
            }
        }
        if !self.tool_calls.is_empty() {
            match requests.get(1) {
                None => bad.push("no second request to check the tool calls in".into()),
                Some(next) => bad.extend(self.check_history(next.json())),
            }
        }
        bad
    }

    /// Checks the tool calls (and the text beside them) in the history of the
    /// request that followed them.
    fn check_history(&self, body: &Value) -> Vec<String> {
        let mut bad = Vec::new();
        let (calls, text) = match self.api.as_str() {
            "responses" => responses_history(body),
            "messages" => messages_history(body),
            _ => completions_history(body),
        };
        let got: Vec<(String, Option<Value>)> = calls
            .iter()
            .map(|(n, a)| (n.clone(), parse_args(a)))
            .collect();
        let want: Vec<(String, Option<Value>)> = self
            .tool_calls
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    parse_args(&Value::String(c.arguments.clone())),
                )
            })
            .collect();
        if got != want {
            bad.push(format!("tool calls in history {got:?}, expected {want:?}"));
        }
        if let Some(want_text) = &self.text_before_tools {
            if text.trim() != want_text.trim() {
                bad.push(format!(
                    "assistant text in history {:?}, expected {:?}",
                    clip(&text),
                    clip(want_text)
                ));
            }
        }
        bad
    }
}

/// Arguments as JSON: a string is parsed, an object taken as it is.
fn parse_args(args: &Value) -> Option<Value> {
    match args {
        Value::String(s) if s.trim().is_empty() => Some(Value::Object(Default::default())),
        Value::String(s) => serde_json::from_str(s).ok(),
        Value::Null => None,
        other => Some(other.clone()),
    }
}

/// Chat Completions history: the last assistant message with tool calls.
fn completions_history(body: &Value) -> (Vec<(String, Value)>, String) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let Some(m) = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
    else {
        return (Vec::new(), String::new());
    };
    let calls = m["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                c["function"]["arguments"].clone(),
            )
        })
        .collect();
    (calls, text_of(&m["content"]))
}

/// Responses history: the `function_call` items and the assistant message items.
fn responses_history(body: &Value) -> (Vec<(String, Value)>, String) {
    let items = body["input"].as_array().cloned().unwrap_or_default();
    let calls = items
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| {
            (
                i["name"].as_str().unwrap_or_default().to_string(),
                i["arguments"].clone(),
            )
        })
        .collect();
    let text = items
        .iter()
        .filter(|i| i["role"] == "assistant")
        .map(|i| text_of(&i["content"]))
        .collect::<Vec<_>>()
        .join("");
    (calls, text)
}

/// Messages history: the `tool_use` and text blocks of the last assistant turn.
fn messages_history(body: &Value) -> (Vec<(String, Value)>, String) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let Some(m) = messages.iter().rev().find(|m| m["role"] == "assistant") else {
        return (Vec::new(), String::new());
    };
    let blocks = m["content"].as_array().cloned().unwrap_or_default();
    let calls = blocks
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            (
                b["name"].as_str().unwrap_or_default().to_string(),
                b["input"].clone(),
            )
        })
        .collect();
    (calls, text_of(&m["content"]))
}

/// The text of a content value: a string, or the text of its text parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| {
                matches!(
                    p["type"].as_str(),
                    Some("text" | "output_text" | "input_text")
                )
            })
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The first and last characters of a long text, for messages.
fn clip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 240 {
        return text.to_string();
    }
    let head: String = chars[..160].iter().collect();
    let tail: String = chars[chars.len() - 60..].iter().collect();
    format!("{head}…[{} chars]…{tail}", chars.len())
}

fn indent(text: &str) -> String {
    let clipped: Vec<&str> = text.lines().collect();
    let start = clipped.len().saturating_sub(30);
    clipped[start..]
        .iter()
        .map(|l| format!("      {}", clip(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_recorded_response_replays_correctly() {
    let path = fixtures_dir().join("expected.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let expectations: Expectations =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));

    // Every body in the directory has an expectation, and every expectation a body.
    let mut on_disk: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("read the fixtures directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sse") || n.ends_with(".json"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = expectations
        .fixture
        .iter()
        .map(|f| f.file.clone())
        .collect();
    listed.sort();
    assert_eq!(on_disk, listed, "fixture files and expected.toml disagree");

    let mut failed = Vec::new();
    for fixture in &expectations.fixture {
        let problems = fixture.check();
        if problems.is_empty() {
            eprintln!("PASS {} ({})", fixture.file, fixture.provider);
        } else {
            eprintln!("FAIL {} ({})", fixture.file, fixture.provider);
            for p in &problems {
                eprintln!("    - {p}");
            }
            failed.push(fixture.file.clone());
        }
    }
    eprintln!(
        "{} of {} recorded responses replayed correctly",
        expectations.fixture.len() - failed.len(),
        expectations.fixture.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} fixtures failed:\n  {}",
        failed.len(),
        expectations.fixture.len(),
        failed.join("\n  ")
    );
}
