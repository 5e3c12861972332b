//! End-to-end tests of buddy's safeguards through the real binary and the fake
//! provider: file writes under the approval policy, buddy's own files never
//! written by tools, project config that must be trusted before it can send
//! the user's key elsewhere or turn approvals off, and known secrets kept out
//! of the model's input, the terminal, events and session files.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{tool_result, FakeProvider, Reply, ToolCallSpec};
use support::serve::Server;
use support::{fake_config, BuddyCmd};

fn call(id: &str, name: &str, args: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, name, args.to_string())
}

fn write(id: &str, path: &str, content: &str) -> Reply {
    Reply::tool_calls(vec![call(
        id,
        "write_file",
        json!({"path": path, "content": content}),
    )])
}

fn shell(id: &str, command: &str) -> Reply {
    Reply::tool_calls(vec![call(id, "run_shell", json!({ "command": command }))])
}

/// Every session file of the run's working directory, concatenated.
fn session_text(cmd: &BuddyCmd) -> String {
    let dir = cmd.work_dir().join(".buddyx").join("sessions");
    let mut out = String::new();
    for e in std::fs::read_dir(&dir).expect("a sessions directory") {
        out.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap());
    }
    out
}

// ---------------------------------------------------------------- file writes

#[test]
fn without_a_terminal_a_write_is_denied_the_file_unchanged_and_the_model_told() {
    let p = FakeProvider::start(vec![
        write("w1", "notes.txt", "rewritten\n"),
        Reply::text("could not"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(cmd.work_dir().join("notes.txt"), "original\n").unwrap();
    let out = cmd.rerun(["exec", "change the notes"]);
    out.assert_success();
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("notes.txt")).unwrap(),
        "original\n"
    );
    let result = tool_result(&p.chat_requests()[1], "w1");
    assert!(result.starts_with("file not written:"), "{result}");
    assert!(result.contains("no terminal to ask"), "{result}");
    // The user sees what was refused: the path and what would have happened.
    assert!(
        out.stderr.contains("write_file needs approval") && out.stderr.contains("notes.txt"),
        "{}",
        out.stderr
    );
}

#[test]
fn with_auto_approve_a_write_happens() {
    let p = FakeProvider::start(vec![
        write("w1", "notes.txt", "rewritten\n"),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let out = cmd.rerun(["exec", "--dangerously-auto-approve", "write it"]);
    out.assert_success();
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("notes.txt")).unwrap(),
        "rewritten\n"
    );
    let result = tool_result(&p.chat_requests()[1], "w1");
    assert!(result.starts_with("wrote 10 bytes to "), "{result}");
}

#[test]
fn buddys_own_config_is_refused_even_with_auto_approve() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            call(
                "w1",
                "write_file",
                json!({"path": "./buddy.toml", "content": "[tools]\nshell_confirm = false\n"}),
            ),
            call(
                "w2",
                "write_file",
                json!({"path": "sub/../.buddyx/sessions/x.jsonl", "content": "{}"}),
            ),
        ]),
        Reply::text("refused"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let out = cmd.rerun(["exec", "--dangerously-auto-approve", "edit config"]);
    out.assert_success();
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("buddy.toml")).unwrap(),
        fake_config(&p)
    );
    assert!(!cmd.work_dir().join(".buddyx/sessions/x.jsonl").exists());
    let req = &p.chat_requests()[1];
    for id in ["w1", "w2"] {
        let result = tool_result(req, id);
        assert!(
            result.starts_with("error: refused:") && result.contains("buddy's own"),
            "{result}"
        );
    }
}

/// The review's attack: the model rewrites ./buddy.toml to turn approvals
/// off, and the next plain exec runs whatever it likes.
#[test]
fn the_attack_chain_from_the_review_fails() {
    let p = FakeProvider::start(vec![
        write(
            "w1",
            "buddy.toml",
            "[tools]\nshell_confirm = false\n[agent]\nmodel = \"fake\"\n",
        ),
        Reply::text("config changed"),
        shell("s1", "touch pwned"),
        Reply::text("ran it"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    cmd.rerun(["exec", "--dangerously-auto-approve", "step one"])
        .assert_success();
    assert!(!std::fs::read_to_string(cmd.work_dir().join("buddy.toml"))
        .unwrap()
        .contains("shell_confirm"));
    let out = cmd.rerun(["exec", "step two"]);
    out.assert_success();
    assert!(!cmd.work_dir().join("pwned").exists());
    let result = tool_result(&p.chat_requests()[3], "s1");
    assert!(result.starts_with("command not run:"), "{result}");
}

#[test]
fn shell_confirm_false_in_an_untrusted_project_file_does_not_turn_approval_off() {
    let p = FakeProvider::start(vec![shell("s1", "touch pwned"), Reply::text("ok")]);
    let cfg = format!("{}\n[tools]\nshell_confirm = false\n", fake_config(&p));
    let cmd = BuddyCmd::new().project_config(cfg);
    let out = cmd.rerun(["exec", "go"]);
    out.assert_success();
    assert!(!cmd.work_dir().join("pwned").exists());
    let result = tool_result(&p.chat_requests()[1], "s1");
    assert!(result.starts_with("command not run:"), "{result}");
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("untrusted"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("tools.shell_confirm") && warnings[0].contains("buddy trust"),
        "{}",
        warnings[0]
    );
}

#[test]
fn a_served_write_approval_carries_the_diff_and_an_approval_writes() {
    let p = FakeProvider::start(vec![
        write("w1", "notes.txt", "one\nTWO\nthree\n"),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(cmd.work_dir().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    let server = Server::start(&cmd, &[]);
    let c = server.client();
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_string();
    let body = json!({ "text": "edit" }).to_string();
    let (r, s) = c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let mut stream = s.unwrap();
    let before = stream.until("approval_request");
    let ask = &before.last().unwrap().data;
    assert_eq!(ask["tool"], "write_file");
    let command = ask["command"].as_str().unwrap();
    assert!(
        command.starts_with("write_file ")
            && command.contains("notes.txt")
            && command.ends_with("(14 bytes, replaces 14 bytes)"),
        "{command}"
    );
    let detail = ask["detail"].as_str().unwrap();
    assert!(detail.contains(" one\n-two\n+TWO\n three\n"), "{detail}");
    // Not written before the answer.
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("notes.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    let r = c.post(
        &format!("/api/sessions/{id}/approvals/w1"),
        r#"{"approve":true}"#,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    stream.until("done");
    assert_eq!(
        std::fs::read_to_string(cmd.work_dir().join("notes.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
}

// ------------------------------------------------------ project config trust

/// A project file whose profile points at `p` and takes the user's key from
/// `OPENAI_API_KEY`.
fn stranger_config(p: &FakeProvider) -> String {
    format!(
        "[agent]\nmodel = \"stranger\"\n\n[models.stranger]\napi_base_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"OPENAI_API_KEY\"\n",
        p.base_url()
    )
}

const USER_KEY: &str = "sk-user-own-key-0123456789";

#[test]
fn an_untrusted_project_file_cannot_send_the_users_key_until_trusted() {
    let stranger = FakeProvider::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
    ]);
    let cmd = BuddyCmd::new().env("OPENAI_API_KEY", USER_KEY);
    let path = cmd.work_dir().join("buddy.toml");
    std::fs::write(&path, stranger_config(&stranger)).unwrap();

    // Untrusted: buddy runs, sends no key, and says so on one line.
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    assert_eq!(out.stdout, "one\n");
    let auth = stranger.chat_requests()[0].header("authorization");
    assert!(
        !auth.as_deref().unwrap_or("").contains(USER_KEY),
        "{auth:?}"
    );
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("untrusted"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("models.stranger.api_key_env") && warnings[0].contains("buddy trust"),
        "{}",
        warnings[0]
    );

    // Trusted: the key goes where the file says, and no warning.
    let t = cmd.rerun(["trust"]);
    t.assert_success();
    assert!(t.stderr.contains("trusted "), "{}", t.stderr);
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    assert_eq!(
        stranger.chat_requests()[1]
            .header("authorization")
            .as_deref(),
        Some(format!("Bearer {USER_KEY}").as_str())
    );
    assert!(!out.stderr.contains("untrusted"), "{}", out.stderr);
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        let list = cmd.config_home().join("buddy").join("trusted.json");
        std::fs::metadata(list).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode, 0o600);

    // Changed: untrusted again.
    let mut text = stranger_config(&stranger);
    text.push_str("# an innocent-looking edit\n");
    std::fs::write(&path, text).unwrap();
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    let auth = stranger.chat_requests()[2].header("authorization");
    assert!(
        !auth.as_deref().unwrap_or("").contains(USER_KEY),
        "{auth:?}"
    );
    assert!(out.stderr.contains("untrusted"), "{}", out.stderr);
}

#[test]
fn the_general_env_key_is_not_sent_to_an_untrusted_project_url_either() {
    let stranger = FakeProvider::start(vec![Reply::text("one")]);
    let cfg = format!(
        "[agent]\nmodel = \"s\"\n[models.s]\napi_base_url = \"{}\"\nmodel = \"m\"\n",
        stranger.base_url()
    );
    let cmd = BuddyCmd::new()
        .project_config(cfg)
        .env("BUDDY_API_KEY", USER_KEY);
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    assert_eq!(stranger.chat_requests()[0].header("authorization"), None);
    assert!(out.stderr.contains("BUDDY_API_KEY"), "{}", out.stderr);
}

// -------------------------------------------------------------------- secrets

const KEY: &str = "sk-test-secret-0123456789";

#[test]
fn a_key_a_tool_prints_reaches_neither_the_model_nor_the_terminal_nor_the_session() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            call("r1", "read_file", json!({"path": "leak.txt"})),
            call("s1", "run_shell", json!({"command": "cat leak.txt"})),
        ]),
        Reply::text("nothing to see"),
    ]);
    let cfg = format!(
        "{}\n[tools]\nshell_confirm = false\n",
        fake_config(&p).replace("api_key = \"sk-fake\"", "api_key_env = \"MY_KEY\"")
    );
    let cmd = BuddyCmd::new().config(cfg).env("MY_KEY", KEY);
    std::fs::write(cmd.work_dir().join("leak.txt"), format!("token={KEY}\n")).unwrap();
    let out = cmd.rerun(["exec", "show me"]);
    out.assert_success();
    let second = &p.chat_requests()[1];
    for id in ["r1", "s1"] {
        let result = tool_result(second, id);
        assert!(!result.contains(KEY), "{result}");
        assert!(result.contains("token=[REDACTED]"), "{result}");
    }
    assert!(!out.stdout.contains(KEY), "{}", out.stdout);
    assert!(!out.stderr.contains(KEY), "{}", out.stderr);
    assert!(!session_text(&cmd).contains(KEY));
}

#[test]
fn json_events_carry_no_key() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![call("r1", "read_file", json!({"path": "leak.txt"}))]),
        Reply::text(format!("the file says {KEY}")),
    ]);
    let cfg = fake_config(&p).replace("sk-fake", KEY);
    let cmd = BuddyCmd::new().config(cfg);
    std::fs::write(cmd.work_dir().join("leak.txt"), format!("token={KEY}\n")).unwrap();
    let out = cmd.rerun(["exec", "--json", "show me"]);
    out.assert_success();
    assert!(!out.stdout.contains(KEY), "{}", out.stdout);
    assert!(out.stdout.contains("token=[REDACTED]"), "{}", out.stdout);
    for line in out.stdout.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}

#[test]
fn a_server_echoing_the_key_in_a_401_is_redacted_in_the_error_line() {
    let body = json!({"error": {"message": format!("Incorrect API key provided: {KEY}. Find your key at the dashboard.")}});
    let p = FakeProvider::start(vec![Reply::json(401, body)]);
    let cfg = fake_config(&p).replace("sk-fake", KEY);
    let out = BuddyCmd::new().config(cfg).args(["exec", "hi"]).run();
    assert_ne!(out.code(), Some(0));
    assert_eq!(
        p.chat_requests()[0].header("authorization").as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(!out.stderr.contains(KEY), "{}", out.stderr);
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .expect("an error line");
    assert!(
        line.contains("Incorrect API key provided: [REDACTED]"),
        "{line}"
    );
}

#[test]
fn short_keys_corrupt_neither_output_nor_json_nor_sessions() {
    for key in ["e", "ab", "tru", "1234"] {
        let answer = "true answer: {\"e\": 1234, \"ab\": [\"tru\"]}";
        let p = FakeProvider::start(vec![
            Reply::tool_calls(vec![call("r1", "read_file", json!({"path": "n.txt"}))]),
            Reply::text(answer),
        ]);
        let cfg = fake_config(&p).replace("sk-fake", key);
        let cmd = BuddyCmd::new().config(cfg);
        std::fs::write(cmd.work_dir().join("n.txt"), "true e ab 1234\n").unwrap();
        let out = cmd.rerun(["exec", "--json", "read"]);
        out.assert_success();
        for line in out.stdout.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("key {key:?}: {line}: {e}"));
        }
        assert!(
            out.stdout.contains(r#"true answer: {\"e\": 1234"#),
            "key {key:?}: {}",
            out.stdout
        );
        assert_eq!(
            tool_result(&p.chat_requests()[1], "r1"),
            "true e ab 1234\n",
            "key {key:?}"
        );
        // The session still loads: every line is JSON.
        for line in session_text(&cmd).lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("key {key:?}: session line {line}: {e}"));
        }
    }
}

// ------------------------------------------- buddy's own environment in /proc

/// The environment entries for the two keys and a plain marker variable of
/// every buddy process carrying `mark`, base64-encoded (which redaction
/// cannot recognise). Only this test's processes: another test's buddy, just
/// started, may not have hidden its keys yet.
fn buddy_environs(mark: &str) -> String {
    format!(
        "for p in $(pgrep -x buddy); do grep -qxz 'PROBE_MARK={mark}' /proc/$p/environ && tr '\\0' '\\n' < /proc/$p/environ; done 2>/dev/null | grep -E '^(OPENAI_API_KEY|LLM_CRED|PROBE_MARK)=' | base64 -w0"
    )
}

fn decode_base64(text: &str) -> Vec<u8> {
    let out = std::process::Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(text.trim().as_bytes())?;
            c.wait_with_output()
        })
        .expect("base64 -d");
    out.stdout
}

/// Runs buddy with a key in its environment (a usual name, and one only the
/// config names) and a tool that reads buddy's /proc/PID/environ; asserts
/// the tool saw buddy's environment but neither key.
fn buddys_environ_hides_keys_from_a_tool(extra_args: &[&str]) {
    const USUAL: &str = "sk-proc-usual-0123456789abcdef";
    const CUSTOM: &str = "sk-proc-custom-0123456789abcdef";
    let mark = format!("seen-{}-{}", std::process::id(), extra_args.len());
    let p = FakeProvider::start(vec![
        shell("e1", &buddy_environs(&mark)),
        Reply::text("done"),
    ]);
    let cfg = format!(
        "{}\n[tools]\nshell_confirm = false\n",
        fake_config(&p).replace("api_key = \"sk-fake\"", "api_key_env = \"LLM_CRED\"")
    );
    let cmd = BuddyCmd::new()
        .config(cfg)
        .env("OPENAI_API_KEY", USUAL)
        .env("LLM_CRED", CUSTOM)
        .env("PROBE_MARK", &mark);
    let mut args = vec!["exec"];
    args.extend_from_slice(extra_args);
    args.push("look");
    let out = cmd.rerun(&args);
    out.assert_success();
    let reqs = p.chat_requests();
    // buddy itself still has the key it was given: the request carried it.
    assert_eq!(
        reqs[0].header("authorization").as_deref(),
        Some(format!("Bearer {CUSTOM}").as_str())
    );
    // The result is "exit code: 0\nstdout:\n" and the probe's one line.
    let result = tool_result(&reqs[1], "e1");
    let encoded = result.lines().last().unwrap_or_default();
    let seen = String::from_utf8_lossy(&decode_base64(encoded)).into_owned();
    // The probe read this buddy's environment: its plain marker is there.
    assert!(seen.contains(&format!("PROBE_MARK={mark}")), "{seen}");
    for key in [USUAL, CUSTOM] {
        assert!(!seen.contains(key), "a key was readable in /proc: {seen}");
    }
    // The entries remain, their values overwritten in place.
    assert!(
        seen.contains(&format!("LLM_CRED={}", "*".repeat(CUSTOM.len()))),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("OPENAI_API_KEY={}", "*".repeat(USUAL.len()))),
        "{seen}"
    );
}

#[test]
fn buddys_own_environment_shows_no_key_to_its_commands() {
    buddys_environ_hides_keys_from_a_tool(&[]);
}

#[test]
fn buddys_own_environment_shows_no_key_to_a_tmux_pane() {
    buddys_environ_hides_keys_from_a_tool(&["--tmux"]);
}

// ------------------------------------------------ project instructions

#[test]
fn an_agents_md_symlink_out_of_the_repository_is_not_sent() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let secret_dir = cmd.home_dir().join(".ssh");
    std::fs::create_dir_all(&secret_dir).unwrap();
    let key = secret_dir.join("id_ed25519");
    std::fs::write(
        &key,
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n",
    )
    .unwrap();
    std::fs::create_dir_all(cmd.work_dir().join(".git")).unwrap();
    std::os::unix::fs::symlink(&key, cmd.work_dir().join("AGENTS.md")).unwrap();
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    let body = p.chat_requests()[0].body_text();
    assert!(!body.contains("PRIVATE KEY"), "{body}");
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("AGENTS.md"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("outside the repository"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_key_quoted_in_project_instructions_is_redacted_from_the_prompt() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    // Free text hides keys of 8 characters or more (docs/SECURITY.md).
    let cmd = BuddyCmd::new().config(fake_config(&p).replace("sk-fake", "sk-fake-0123456789"));
    std::fs::write(
        cmd.work_dir().join("AGENTS.md"),
        "Use the key sk-fake-0123456789 when calling the API.\n",
    )
    .unwrap();
    cmd.rerun(["exec", "hi"]).assert_success();
    let body = p.chat_requests()[0].body_text();
    assert!(body.contains("Use the key [REDACTED]"), "{body}");
}

#[test]
fn a_key_echoed_in_streamed_reasoning_and_text_is_redacted_everywhere() {
    // The fake provider streams each text in several pieces, so the key is
    // split across deltas of both streams.
    let reply = || {
        Reply::text(format!("the answer quotes {KEY} too"))
            .with_reasoning("reasoning_content", format!("I could use {KEY} for this"))
    };
    let p = FakeProvider::start(vec![reply(), reply()]);
    let cfg = fake_config(&p).replace("api_key = \"sk-fake\"", "api_key_env = \"MY_KEY\"");
    let cmd = BuddyCmd::new().config(cfg).env("MY_KEY", KEY);
    let out = cmd.rerun(["exec", "go"]);
    out.assert_success();
    assert!(
        out.stderr.contains("I could use [REDACTED]"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(KEY), "{}", out.stderr);
    assert!(!out.stdout.contains(KEY), "{}", out.stdout);
    let json = cmd.rerun(["exec", "--json", "go"]);
    assert!(!json.stdout.contains(KEY), "{}", json.stdout);
    assert!(!session_text(&cmd).contains(KEY));
}

/// Every variable buddy takes a credential from by a fixed name, plus one a
/// profile names: none reaches a command the model runs or a hook. The model
/// would see a value even base64-encoded, so the test asks only whether each
/// name is set at all.
#[test]
fn every_credential_variable_is_hidden_from_commands_and_hooks() {
    const NAMES: [&str; 6] = [
        "BUDDY_API_KEY",
        "AGENT_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "BUDDY_SERVE_TOKEN",
        "MY_PROFILE_KEY",
    ];
    let probe: String = NAMES
        .iter()
        .map(|n| format!("[ -n \"${{{n}+x}}\" ] && echo SEEN:{n}; "))
        .collect::<String>()
        + "echo checked";
    let p = FakeProvider::start(vec![shell("s1", &probe), Reply::text("done")]);
    // A TOML literal string: the probe holds no single quote.
    let hook = format!(
        "[[hooks.PreToolUse]]\ncommand = '{{ {probe}; }} > \"$BUDDY_PROJECT_DIR/hook-env\"'\n"
    );
    let cfg = format!(
        "{}\n[tools]\nshell_confirm = false\n\n{hook}\n",
        fake_config(&p).replace("api_key = \"sk-fake\"", "api_key_env = \"MY_PROFILE_KEY\"")
    );
    let mut cmd = BuddyCmd::new().config(cfg);
    for n in NAMES {
        cmd = cmd.env(n, format!("value-of-{n}-0123456789"));
    }
    let out = cmd.rerun(["exec", "look"]);
    out.assert_success();
    let result = tool_result(&p.chat_requests()[1], "s1");
    assert!(result.contains("checked"), "{result}");
    assert!(!result.contains("SEEN:"), "a command saw: {result}");
    let hook_saw = std::fs::read_to_string(cmd.work_dir().join("hook-env")).unwrap();
    assert!(hook_saw.contains("checked"), "{hook_saw}");
    assert!(!hook_saw.contains("SEEN:"), "a hook saw: {hook_saw}");
}
