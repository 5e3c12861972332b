//! End-to-end tests of images attached to a prompt: `exec --image` and
//! `@shot.png` in the REPL, sent as each protocol's image part (checked in
//! the requests the fake provider recorded), refused when they are not
//! images, too big, or the profile says `images = false`, a server's 400
//! explained, and sessions keeping a copy by reference that a resume reads.

use crate::support;

use base64::Engine;
use serde_json::Value;
use std::path::PathBuf;
use support::fake_provider::{FakeProvider, RecordedRequest, Reply};
use support::tmux::Tmux;
use support::BuddyCmd;

/// A small but real PNG (1×1, one red pixel).
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xDE, 0x00, 0x00, 0x00, 0x0C, 0x49, 0x44, 0x41, 0x54, 0x08, 0xD7, 0x63, 0xF8, 0xCF, 0xC0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xDD, 0x8D, 0xB0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E,
    0x44, 0xAE, 0x42, 0x60, 0x82,
];

/// The start of a JPEG file (SOI and an APP0 marker) and some bytes.
const JPEG: &[u8] = b"\xFF\xD8\xFF\xE0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00rest";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A config whose profile `fake` speaks `api` to `p`, with `extra` lines in it.
fn config(p: &FakeProvider, api: &str, extra: &str) -> String {
    format!(
        "[agent]\nmodel = \"fake\"\n\n\
         [models.fake]\napi = \"{api}\"\napi_base_url = \"{}\"\n\
         model = \"fake-model\"\napi_key = \"sk-fake\"\n{extra}\n",
        p.base_url()
    )
}

fn put(cmd: &BuddyCmd, name: &str, bytes: &[u8]) -> PathBuf {
    let path = cmd.work_dir().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn user_messages(req: &RecordedRequest, key: &str) -> Vec<Value> {
    req.json()[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} array in {}", req.body_text()))
        .iter()
        .filter(|m| m["role"] == "user")
        .cloned()
        .collect()
}

/// stderr without the note of a first run creating the global config.
fn errors(out: &support::Output) -> String {
    out.stderr
        .lines()
        .filter(|l| !l.starts_with("created a default config"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn session_files(cmd: &BuddyCmd) -> Vec<PathBuf> {
    let dir = cmd.work_dir().join(".buddyx/sessions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

fn sha256_hex(bytes: &[u8]) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn exec_image_goes_as_an_image_url_part_and_the_session_keeps_a_reference() {
    let p = FakeProvider::start(vec![Reply::text("a red dot"), Reply::text("still red")]);
    let cmd = BuddyCmd::new().config(config(&p, "completions", ""));
    put(&cmd, "dot.png", PNG);
    let out = cmd.rerun(["exec", "--image", "dot.png", "what is this?"]);
    out.assert_success();
    assert_eq!(out.stdout, "a red dot\n");

    let req = &p.chat_requests()[0];
    let users = user_messages(req, "messages");
    assert_eq!(users.len(), 1);
    let parts = users[0]["content"].as_array().expect("a content array");
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[0]["type"], "image_url");
    assert_eq!(
        parts[0]["image_url"]["url"],
        format!("data:image/png;base64,{}", b64(PNG))
    );
    assert_eq!(
        parts[1],
        serde_json::json!({"type": "text", "text": "what is this?"})
    );
    assert!(
        !req.body_text().contains("buddy_images"),
        "references stay home"
    );
    // The system prompt is still a plain string: only the image's message changed.
    let system = &req.json()["messages"][0];
    assert_eq!(system["role"], "system");
    assert!(system["content"].is_string(), "{system}");

    // The journal holds a reference; the bytes are a content-addressed copy.
    let files = session_files(&cmd);
    assert_eq!(files.len(), 1);
    let journal = std::fs::read_to_string(&files[0]).unwrap();
    let hash = sha256_hex(PNG);
    assert!(journal.contains(&hash), "{journal}");
    assert!(
        journal.contains("\"media_type\":\"image/png\""),
        "{journal}"
    );
    assert!(!journal.contains(&b64(PNG)), "no base64 in the journal");
    let copy = files[0]
        .with_extension("images")
        .join(format!("{hash}.png"));
    assert_eq!(std::fs::read(&copy).unwrap(), PNG);

    // A resume reads the copy and sends the image again with the history.
    let again = cmd.rerun(["exec", "--resume", "last", "and now?"]);
    again.assert_success();
    assert_eq!(again.stdout, "still red\n");
    let users = user_messages(&p.chat_requests()[1], "messages");
    assert_eq!(users.len(), 2);
    assert_eq!(
        users[0]["content"][0]["image_url"]["url"],
        format!("data:image/png;base64,{}", b64(PNG))
    );
    // A text-only prompt is a plain string, exactly as before.
    assert_eq!(users[1]["content"], "and now?");
}

#[test]
fn responses_get_input_image_parts() {
    let p = FakeProvider::start(vec![Reply::text("two pictures")]);
    let cmd = BuddyCmd::new().config(config(&p, "responses", ""));
    put(&cmd, "a.png", PNG);
    put(&cmd, "b.jpg", JPEG);
    cmd.rerun([
        "exec", "--image", "a.png", "--image", "b.jpg", "compare", "them",
    ])
    .assert_success();
    let req = &p.responses_requests()[0];
    let users = user_messages(req, "input");
    let parts = users[0]["content"].as_array().expect("content");
    assert_eq!(
        parts[0],
        serde_json::json!({"type": "input_image", "image_url": format!("data:image/png;base64,{}", b64(PNG))})
    );
    assert_eq!(
        parts[1],
        serde_json::json!({"type": "input_image", "image_url": format!("data:image/jpeg;base64,{}", b64(JPEG))})
    );
    assert_eq!(
        parts[2],
        serde_json::json!({"type": "input_text", "text": "compare them"})
    );
}

#[test]
fn messages_get_base64_image_blocks() {
    let p = FakeProvider::start(vec![Reply::text("a dot")]);
    let cmd = BuddyCmd::new().config(config(&p, "messages", ""));
    put(&cmd, "dot.png", PNG);
    cmd.rerun(["exec", "--image", "dot.png", "describe"])
        .assert_success();
    let req = &p.messages_requests()[0];
    let users = user_messages(req, "messages");
    let blocks = users[0]["content"].as_array().expect("blocks");
    assert_eq!(blocks[0]["type"], "image");
    assert_eq!(
        blocks[0]["source"],
        serde_json::json!({"type": "base64", "media_type": "image/png", "data": b64(PNG)})
    );
    assert_eq!(blocks[1]["type"], "text");
    assert_eq!(blocks[1]["text"], "describe");
}

#[test]
fn a_file_that_is_not_an_image_or_too_big_is_refused_before_anything_is_sent() {
    let p = FakeProvider::start(vec![Reply::text("never")]);
    let cmd = BuddyCmd::new().config(config(&p, "completions", ""));
    // Named like an image, but text: the first bytes decide.
    put(&cmd, "fake.png", b"just some words\n");
    let out = cmd.rerun(["exec", "--image", "fake.png", "look"]);
    out.assert_code(2);
    assert_eq!(
        out.stderr.trim_end(),
        "error: --image fake.png: not a PNG, JPEG, GIF or WebP image (judged by its first bytes); nothing was sent"
    );
    // A PNG of 21 MiB (sparse: only its header is written).
    let big = put(&cmd, "big.png", PNG);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(21 * 1024 * 1024)
        .unwrap();
    let out = cmd.rerun(["exec", "--image", "big.png", "look"]);
    out.assert_code(2);
    assert_eq!(
        out.stderr.trim_end(),
        "error: --image big.png: 21.0 MiB, over the 20 MiB limit for an image; nothing was sent"
    );
    let out = cmd.rerun(["exec", "--image", "nowhere.png", "look"]);
    out.assert_code(2);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("--image nowhere.png: cannot read it"));
    assert_eq!(p.request_count(), 0, "nothing was sent");
    assert!(
        !cmd.work_dir().join(".buddyx/sessions").exists() || session_files(&cmd).is_empty(),
        "no session was started"
    );
}

#[test]
fn a_profile_without_images_refuses_them_in_one_line() {
    let p = FakeProvider::start(vec![Reply::text("never")]);
    let cmd = BuddyCmd::new().config(config(&p, "completions", "images = false"));
    put(&cmd, "dot.png", PNG);
    let out = cmd.rerun(["exec", "--image", "dot.png", "look"]);
    out.assert_code(2);
    assert_eq!(
        errors(&out),
        "error: model fake-model (profile fake) takes no images (images = false in [models.fake]); nothing was sent"
    );
    assert_eq!(p.request_count(), 0);
}

#[test]
fn a_server_that_rejects_the_image_gets_one_line_naming_the_cause() {
    let p = FakeProvider::start(vec![Reply::json(
        400,
        serde_json::json!({"error": {"message": "Invalid content type. image_url is only supported by certain models."}}),
    )]);
    let cmd = BuddyCmd::new().config(config(&p, "completions", ""));
    put(&cmd, "dot.png", PNG);
    let out = cmd.rerun(["exec", "--image", "dot.png", "look"]);
    assert_ne!(out.code(), Some(0));
    assert_eq!(out.stdout, "");
    let line = errors(&out);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains("HTTP 400 Bad Request to a request with an image")
            && line.contains("image_url is only supported by certain models")
            && line.contains("this model probably takes no images")
            && line.contains("images = false"),
        "{line}"
    );
    assert_eq!(p.request_count(), 1, "a 400 is not retried");
}

#[test]
fn piped_input_json_events_and_an_image_go_together() {
    let p = FakeProvider::start(vec![Reply::text("seen")]);
    let cmd = BuddyCmd::new()
        .config(config(&p, "completions", ""))
        .stdin(b"log line 1\n".to_vec());
    put(&cmd, "dot.png", PNG);
    let out = cmd.rerun(["exec", "--json", "--image", "dot.png", "explain"]);
    out.assert_success();
    let users = user_messages(&p.chat_requests()[0], "messages");
    let parts = users[0]["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "image_url");
    assert_eq!(parts[1]["text"], "explain\n\n<stdin>\nlog line 1\n</stdin>");
    let event = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "user_message")
        .expect("a user_message event");
    assert_eq!(
        event["images"],
        serde_json::json!([{
            "name": "dot.png",
            "media_type": "image/png",
            "sha256": sha256_hex(PNG),
            "bytes": PNG.len(),
        }])
    );
    assert!(!out.stdout.contains(&b64(PNG)), "no bytes in events");
}

#[test]
fn a_missing_copy_loads_as_a_note_and_the_session_goes_on() {
    let p = FakeProvider::start(vec![Reply::text("one"), Reply::text("two")]);
    let cmd = BuddyCmd::new().config(config(&p, "messages", ""));
    put(&cmd, "dot.png", PNG);
    cmd.rerun(["exec", "--image", "dot.png", "look"])
        .assert_success();
    let journal = &session_files(&cmd)[0];
    std::fs::remove_dir_all(journal.with_extension("images")).unwrap();
    let out = cmd.rerun(["exec", "--resume", "last", "again"]);
    out.assert_success();
    assert!(
        out.stderr
            .contains("the saved copy of 1 image(s) (dot.png) is missing"),
        "{}",
        out.stderr
    );
    let users = user_messages(&p.messages_requests()[1], "messages");
    let first = users[0]["content"].as_array().unwrap();
    assert_eq!(first[0]["type"], "text");
    assert!(
        first[0]["text"]
            .as_str()
            .unwrap()
            .contains("image dot.png (69 bytes) was attached here, but its saved copy is missing"),
        "{first:?}"
    );
    assert_eq!(first[1]["text"], "look");
}

/// Waits for the REPL's first prompt line.
fn started(cmd: &BuddyCmd) -> Tmux {
    let t = Tmux::start(cmd, &[]);
    t.wait_for("the prompt", |s| {
        s.lines().any(|l| l.starts_with("> ")) || s.contains("\n>")
    });
    t
}

fn wait_requests(p: &FakeProvider, n: usize) -> Vec<RecordedRequest> {
    p.wait_for_requests(n, std::time::Duration::from_secs(10))
}

#[test]
fn repl_mention_attaches_the_image_and_echoes_it() {
    let p = FakeProvider::start(vec![Reply::text("a red dot")]);
    let cmd = BuddyCmd::new().config(config(&p, "completions", ""));
    put(&cmd, "shot.png", PNG);
    let t = started(&cmd);
    t.line("what is in @shot.png?");
    let screen = t.wait_text("a red dot");
    assert!(
        screen.contains("> what is in @shot.png? [image: shot.png 69 bytes]"),
        "{screen}"
    );
    let reqs = wait_requests(&p, 1);
    let users = user_messages(&reqs[0], "messages");
    assert_eq!(users.len(), 1, "no text attachment for an image: {users:?}");
    let parts = users[0]["content"].as_array().unwrap();
    assert_eq!(
        parts[0]["image_url"]["url"],
        format!("data:image/png;base64,{}", b64(PNG))
    );
    assert_eq!(parts[1]["text"], "what is in @shot.png?");
}

#[test]
fn repl_pasted_path_waits_for_the_next_prompt_and_a_too_big_mention_sends_nothing() {
    let p = FakeProvider::start(vec![Reply::text("I see it")]);
    let cmd = BuddyCmd::new().config(config(&p, "completions", ""));
    let shot = put(&cmd, "Screen Shot.png", PNG);
    let big = put(&cmd, "big.png", PNG);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(21 * 1024 * 1024)
        .unwrap();
    let t = started(&cmd);
    // (A word after the mention: Enter right after it would pick from the
    // completion menu.)
    t.line("look at @big.png please");
    t.wait_text("@big.png: 21.0 MiB, over the 20 MiB limit for an image; nothing was sent");
    // The line is back in the input, unsent; clear it.
    t.keys(&["C-u"]);
    // Dropped on the terminal: quoted absolute path.
    t.line(&format!("'{}'", shot.display()));
    t.wait_text("attached [image: Screen Shot.png 69 bytes]; it goes with your next message");
    assert_eq!(p.request_count(), 0, "a pasted path alone sends nothing");
    t.line("what is it?");
    t.wait_text("I see it");
    let reqs = wait_requests(&p, 1);
    assert_eq!(reqs.len(), 1);
    let users = user_messages(&reqs[0], "messages");
    let parts = users[0]["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "image_url");
    assert_eq!(parts[1]["text"], "what is it?");
}

#[test]
fn repl_refuses_an_image_for_a_profile_without_images() {
    let p = FakeProvider::start(vec![Reply::text("never")]);
    let cmd = BuddyCmd::new().config(config(&p, "completions", "images = false"));
    put(&cmd, "shot.png", PNG);
    let t = started(&cmd);
    t.line("what is in @shot.png?");
    t.wait_text(
        "model fake-model (profile fake) takes no images (images = false in [models.fake]); nothing was sent",
    );
    assert_eq!(p.request_count(), 0, "nothing was sent");
}
