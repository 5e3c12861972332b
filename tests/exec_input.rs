//! What `buddy exec` takes in, end to end with the real binary and the fake
//! provider: prompt words and flags, input piped beside a prompt, and which
//! key (if any) goes to which server.

use crate::support;

use serde_json::Value;
use support::fake_provider::{FakeProvider, Reply};
use support::{fake_config, BuddyCmd};

/// The text of the last user message of a Chat Completions request.
fn last_user(req: &support::fake_provider::RecordedRequest) -> String {
    req.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no user message in {}", req.body_text()))
        .to_string()
}

const DIFF: &str = "diff --git a/greet.txt b/greet.txt\n--- a/greet.txt\n+++ b/greet.txt\n@@ -1 +1 @@\n-hello\n+hello, world\n";

#[test]
fn piped_input_follows_the_prompt_in_a_stdin_block() {
    let p = FakeProvider::start(vec![Reply::text("Greet the world")]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "write a commit message for this diff"])
        .stdin(DIFF)
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "Greet the world\n");
    let reqs = p.chat_requests();
    assert_eq!(
        last_user(&reqs[0]),
        format!("write a commit message for this diff\n\n<stdin>\n{DIFF}</stdin>")
    );
}

#[test]
fn readme_pipe_example_runs_as_written() {
    // The README's first example, taken from the README itself, in a real
    // repository with a real change: the diff reaches the model and its
    // answer becomes the commit message.
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("git diff") && l.contains("| buddy exec "))
        .expect("the README shows `git diff … | buddy exec …`")
        .trim()
        .to_string();
    let p = FakeProvider::start(vec![Reply::text("Greet the whole world")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(cmd.work_dir())
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    std::fs::write(cmd.work_dir().join("greet.txt"), "hello\n").unwrap();
    git(&["add", "greet.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(cmd.work_dir().join("greet.txt"), "hello, world\n").unwrap();
    // The user's own identity and staged change, then the line verbatim.
    let script = format!(
        "git config user.name t && git config user.email t@example.com && git add -u && {line}"
    );
    let out = cmd.shell(&script);
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = last_user(&p.chat_requests()[0]);
    assert!(
        sent.starts_with("write a commit message for this diff\n\n<stdin>\ndiff --git a/greet.txt"),
        "{sent}"
    );
    assert!(sent.contains("+hello, world\n"), "{sent}");
    if line.contains("git commit -F -") {
        assert_eq!(
            git(&["log", "-1", "--format=%s"]).trim(),
            "Greet the whole world"
        );
    }
}

#[test]
fn piped_input_works_with_resume_and_json() {
    let p = FakeProvider::start(vec![Reply::text("first"), Reply::text("second")]);
    let cmd = BuddyCmd::new().config_for(&p);
    cmd.rerun(["exec", "hello"]).assert_success();
    let cmd = cmd.stdin("line one\nline two\n");
    let out = cmd.rerun(["exec", "--resume", "last", "--json", "count the lines"]);
    out.assert_success();
    let reqs = p.chat_requests();
    let expected = "count the lines\n\n<stdin>\nline one\nline two\n</stdin>";
    assert_eq!(last_user(&reqs[1]), expected);
    // The resumed history came along.
    assert!(reqs[1].body_text().contains("\"first\""));
    let user_event = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "user_message")
        .expect("a user_message event");
    assert_eq!(user_event["text"], expected);
}

#[test]
fn piped_input_reaches_every_protocol() {
    for api in ["responses", "messages"] {
        let p = FakeProvider::start(vec![Reply::text("ok")]);
        let toml = format!(
            "[agent]\nmodel = \"fake\"\n[models.fake]\napi = \"{api}\"\napi_base_url = \"{}\"\nmodel = \"fake-model\"\napi_key = \"sk-fake\"\n",
            p.base_url()
        );
        BuddyCmd::new()
            .config(toml)
            .args(["exec", "summarise"])
            .stdin("piped words\n")
            .run()
            .assert_success();
        let body = p.requests()[0].body_text();
        assert!(
            body.contains("summarise\\n\\n<stdin>\\npiped words\\n</stdin>"),
            "{api}: {body}"
        );
    }
}

#[test]
fn an_empty_pipe_adds_nothing() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "just this"])
        .stdin("")
        .run()
        .assert_success();
    assert_eq!(last_user(&p.chat_requests()[0]), "just this");
}

#[test]
fn piped_input_past_the_cap_is_refused_before_any_request() {
    let p = FakeProvider::start_repeating(vec![Reply::text("never")]);
    let big = vec![b'x'; 8 * 1024 * 1024 + 1];
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "summarise"])
        .stdin(big)
        .run();
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("the input piped to buddy exec is larger than 8 MiB"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    assert_eq!(p.request_count(), 0);
}

#[test]
fn binary_piped_input_is_refused_with_a_clear_line() {
    let p = FakeProvider::start_repeating(vec![Reply::text("never")]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "what is this"])
        .stdin(vec![0xff, 0xfe, 0x00, 0x01])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("is not UTF-8 text"), "{}", out.stderr);
    assert_eq!(p.request_count(), 0);
}

#[test]
fn a_mistyped_flag_is_an_error_not_the_prompt() {
    let p = FakeProvider::start_repeating(vec![Reply::text("never")]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--max-turn", "3", "hi"])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("--max-turn"), "{}", out.stderr);
    assert!(out.stderr.contains("--max-turns"), "{}", out.stderr);
    // A flag after the prompt is a flag too.
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "hi", "--jsonn"])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("--json"), "{}", out.stderr);
    assert_eq!(p.request_count(), 0);
}

#[test]
fn flags_after_the_prompt_still_count() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let out = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "say", "ok", "--json"])
        .run();
    out.assert_success();
    assert!(
        out.stdout.contains("\"type\":\"run_finished\""),
        "{}",
        out.stdout
    );
    assert_eq!(last_user(&p.chat_requests()[0]), "say ok");
}

#[test]
fn a_prompt_starting_with_a_dash_follows_double_dash() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "--", "--weird prompt"])
        .run()
        .assert_success();
    assert_eq!(last_user(&p.chat_requests()[0]), "--weird prompt");
}

#[test]
fn a_near_miss_of_a_profile_name_is_named() {
    // The built-in profiles (no config file): `openai` is active and has no
    // key here, `ollama` is one of the others.
    let out = BuddyCmd::new().args(["exec", "-m", "olama", "hi"]).run();
    out.assert_code(2);
    assert!(
        out.stderr.contains("did you mean `ollama`?"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("OPENAI_API_KEY"), "{}", out.stderr);
}

#[test]
fn a_base_url_without_a_key_is_tried_without_one() {
    let p = FakeProvider::start(vec![Reply::text("local answer")]);
    // No config file: the built-in `openai` profile, whose key is unset.
    let out = BuddyCmd::new()
        .args(["--base-url", &p.base_url(), "exec", "hi"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "local answer\n");
    assert_eq!(p.chat_requests()[0].header("authorization"), None);
    // The same through the environment.
    let p = FakeProvider::start(vec![Reply::text("env answer")]);
    let out = BuddyCmd::new()
        .env("BUDDY_BASE_URL", p.base_url())
        .args(["exec", "hi"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "env answer\n");
    assert_eq!(p.chat_requests()[0].header("authorization"), None);
}

#[test]
fn a_401_to_a_keyless_request_says_the_key_is_missing() {
    let p = FakeProvider::start(vec![Reply::status(
        401,
        r#"{"error":{"message":"Invalid API Key"}}"#,
    )]);
    let out = BuddyCmd::new()
        .args(["--base-url", &p.base_url(), "exec", "hi"])
        .run();
    assert_ne!(out.status.code(), Some(0));
    // The request was made, keyless, and the refusal names the server.
    assert_eq!(p.chat_requests()[0].header("authorization"), None);
    assert!(
        out.stderr
            .contains(&format!("no API key for {}", p.base_url())),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("BUDDY_API_KEY"), "{}", out.stderr);
    assert!(out.stdout.is_empty());
}

#[test]
fn a_profile_key_never_goes_to_another_server() {
    let own = FakeProvider::start(vec![Reply::text("never")]);
    let other = FakeProvider::start(vec![Reply::text("elsewhere"), Reply::text("with env")]);
    let cmd = BuddyCmd::new().config(fake_config(&own));
    let out = cmd.rerun(["--base-url", &other.base_url(), "exec", "hi"]);
    out.assert_success();
    assert_eq!(other.chat_requests()[0].header("authorization"), None);
    assert!(!other.chat_requests()[0].body_text().contains("sk-fake"));
    // BUDDY_API_KEY is the user's key for whatever URL is in use.
    let cmd = cmd.env("BUDDY_API_KEY", "sk-chosen");
    cmd.rerun(["--base-url", &other.base_url(), "exec", "hi"])
        .assert_success();
    assert_eq!(
        other.chat_requests()[1].header("authorization").as_deref(),
        Some("Bearer sk-chosen")
    );
    assert_eq!(own.request_count(), 0);
    // The profile's own server, named again by URL, still gets its key.
    let own2 = FakeProvider::start(vec![Reply::text("own")]);
    let cmd = BuddyCmd::new().config(fake_config(&own2));
    cmd.rerun(["--base-url", &own2.base_url(), "exec", "hi"])
        .assert_success();
    assert_eq!(
        own2.chat_requests()[0].header("authorization").as_deref(),
        Some("Bearer sk-fake")
    );
}
