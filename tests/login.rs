//! `buddy login` / `logout` and login-backed profiles, against a fake OAuth
//! issuer and the fake model server, both on loopback.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use support::fake_issuer::{FakeIssuer, USER_CODE};
use support::fake_provider::{FakeProvider, Reply};
use support::BuddyCmd;

fn login_config(p: &FakeProvider, issuer: &FakeIssuer) -> String {
    format!(
        "[agent]\nmodel = \"chat\"\n\n[models.chat]\napi_base_url = \"{}\"\nmodel = \"fake-model\"\nauth = \"login\"\nstream = false\n\n{}",
        p.base_url(),
        issuer.config()
    )
}

fn auth_path(cmd: &BuddyCmd) -> std::path::PathBuf {
    cmd.config_home().join("buddy/auth.json")
}

fn write_auth(cmd: &BuddyCmd, json: &str) {
    let path = auth_path(cmd);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, json).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn assert_no_tokens(what: &str, text: &str) {
    for t in ["at-1", "at-2", "rt-1", "rt-2", "auth-code-1", "verifier-1"] {
        assert!(!text.contains(t), "{what} shows a token ({t}):\n{text}");
    }
}

#[test]
fn the_device_flow_logs_in_and_stores_tokens_privately() {
    let issuer = FakeIssuer::start(1);
    let p = FakeProvider::start(vec![Reply::text("hello via login")]);
    let cmd = BuddyCmd::new().config(login_config(&p, &issuer));
    let out = cmd.rerun(["login", "openai"]);
    out.assert_success();
    // Where to go and what to type, on stderr.
    assert!(
        out.stderr
            .contains(&format!("{}/codex/device", issuer.url())),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(USER_CODE), "{}", out.stderr);
    assert!(out.stderr.contains("logged in to openai"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert_no_tokens("login output", &out.stderr);
    // One code request, polls until the user approved (one pending), then
    // the exchange of the grant for tokens.
    let forms = issuer.forms();
    assert_eq!(forms[0].0, "/api/accounts/deviceauth/usercode");
    assert_eq!(forms[0].1["client_id"], "buddy-test-client");
    let polls = forms
        .iter()
        .filter(|(p, _)| p == "/api/accounts/deviceauth/token")
        .count();
    assert_eq!(polls, issuer.pending_polls() + 1);
    let exchange = forms.last().unwrap();
    assert_eq!(exchange.0, "/oauth/token");
    assert_eq!(exchange.1["grant_type"], "authorization_code");
    assert_eq!(exchange.1["client_id"], "buddy-test-client");
    // Stored 0600, for the provider.
    let path = auth_path(&cmd);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stored = std::fs::read_to_string(&path).unwrap();
    assert!(
        stored.contains("\"openai\"") && stored.contains("at-1"),
        "{stored}"
    );

    // The login serves the profile: a bearer token, no key needed.
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    assert_eq!(out.stdout, "hello via login\n");
    assert_no_tokens("exec stderr", &out.stderr);
    let req = &p.chat_requests()[0];
    assert_eq!(req.header("authorization").as_deref(), Some("Bearer at-1"));
    // The account named in the ID token goes along.
    assert_eq!(req.header("chatgpt-account-id").as_deref(), Some("acct-42"));
    // Login-backed requests stream, whatever the profile says.
    assert_eq!(req.json()["stream"], true);
    // Never in the session files.
    let sessions = cmd.work_dir().join(".buddyx/sessions");
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        assert_no_tokens("a session file", &text);
    }
}

#[test]
fn an_expiring_token_is_refreshed_before_the_request() {
    let issuer = FakeIssuer::start(0);
    let p = FakeProvider::start(vec![Reply::text("fresh")]);
    let cmd = BuddyCmd::new().config(login_config(&p, &issuer));
    write_auth(
        &cmd,
        &format!(
            r#"{{"providers":{{"openai":{{"access_token":"at-1","refresh_token":"rt-1","expires_at":{}}}}}}}"#,
            now() + 10
        ),
    );
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    assert_eq!(issuer.refreshes(), 1);
    assert_eq!(
        p.chat_requests()[0].header("authorization").as_deref(),
        Some("Bearer at-2")
    );
    let stored = std::fs::read_to_string(auth_path(&cmd)).unwrap();
    assert!(
        stored.contains("at-2") && stored.contains("rt-2"),
        "{stored}"
    );
    let mode = std::fs::metadata(auth_path(&cmd))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_401_refreshes_once_and_retries() {
    let issuer = FakeIssuer::start(0);
    let p = FakeProvider::start(vec![
        Reply::json(
            401,
            serde_json::json!({"error": {"message": "token expired"}}),
        ),
        Reply::text("after refresh"),
    ]);
    let cmd = BuddyCmd::new().config(login_config(&p, &issuer));
    write_auth(
        &cmd,
        &format!(
            r#"{{"providers":{{"openai":{{"access_token":"at-1","refresh_token":"rt-1","expires_at":{}}}}}}}"#,
            now() + 3600
        ),
    );
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    assert_eq!(out.stdout, "after refresh\n");
    let reqs = p.chat_requests();
    assert_eq!(
        reqs[0].header("authorization").as_deref(),
        Some("Bearer at-1")
    );
    assert_eq!(
        reqs[1].header("authorization").as_deref(),
        Some("Bearer at-2")
    );
    assert_eq!(issuer.refreshes(), 1);

    // A second 401 right after a refresh is an error, not a loop.
    let p = FakeProvider::start(vec![
        Reply::json(401, serde_json::json!({"error": {"message": "nope"}})),
        Reply::json(401, serde_json::json!({"error": {"message": "still nope"}})),
        Reply::text("never"),
    ]);
    let cmd2 = BuddyCmd::new().config(login_config(&p, &issuer));
    write_auth(
        &cmd2,
        &format!(
            r#"{{"providers":{{"openai":{{"access_token":"at-5","refresh_token":"rt-5","expires_at":{}}}}}}}"#,
            now() + 3600
        ),
    );
    let out = cmd2.rerun(["exec", "hi"]);
    out.assert_code(1);
    assert!(out.stderr.contains("401"), "{}", out.stderr);
    assert_eq!(p.chat_requests().len(), 2);
}

#[test]
fn logout_removes_the_login_and_a_missing_login_is_one_line() {
    let issuer = FakeIssuer::start(0);
    let p = FakeProvider::start(vec![Reply::text("never")]);
    let cmd = BuddyCmd::new().config(login_config(&p, &issuer));
    write_auth(
        &cmd,
        r#"{"providers":{"openai":{"access_token":"at-1","refresh_token":"rt-1"}}}"#,
    );
    let out = cmd.rerun(["logout", "openai"]);
    out.assert_success();
    assert!(
        out.stderr.contains("logged out of openai"),
        "{}",
        out.stderr
    );
    assert!(!auth_path(&cmd).exists());
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_code(2);
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !l.starts_with("created a default config"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("run `buddy login openai`"),
        "{}",
        lines[0]
    );
    assert_eq!(p.request_count(), 0);
}

#[test]
fn a_login_backed_responses_request_streams_and_stores_nothing() {
    let issuer = FakeIssuer::start(0);
    let p = FakeProvider::start(vec![Reply::text("codex says hi")]);
    let cmd = BuddyCmd::new().config(format!(
        "[agent]\nmodel = \"codex\"\n\n[models.codex]\napi_base_url = \"{}\"\napi = \"responses\"\nauth = \"login\"\nmodel = \"fake-codex\"\nstream = false\n\n{}",
        p.base_url(),
        issuer.config()
    ));
    write_auth(
        &cmd,
        r#"{"providers":{"openai":{"access_token":"at-1","refresh_token":"rt-1"}}}"#,
    );
    let out = cmd.rerun(["exec", "hi"]);
    out.assert_success();
    assert_eq!(out.stdout, "codex says hi\n");
    let req = &p.requests()[0];
    assert!(req.path.ends_with("/responses"), "{}", req.path);
    assert_eq!(req.header("authorization").as_deref(), Some("Bearer at-1"));
    assert_eq!(req.json()["store"], false);
    assert_eq!(req.json()["stream"], true);
}

// ------------------------------------------------ a credential's one host

/// A listener on loopback that keeps every byte any client sends it and
/// answers each connection with a 401: where a key must never arrive.
struct Catcher {
    addr: std::net::SocketAddr,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Catcher {
    fn start() -> Catcher {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let keep = keep.clone();
                std::thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(500)));
                    let mut buf = [0u8; 65536];
                    // The head and whatever body came with it.
                    while let Ok(n @ 1..) = s.read(&mut buf) {
                        keep.lock().unwrap().extend_from_slice(&buf[..n]);
                        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                    let _ = s.write_all(
                        b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                });
            }
        });
        Catcher { addr, seen }
    }

    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }
}

/// Every spelling the third attack campaign tried (issue 44) of "the
/// catcher's address in front of the profile's own host", by flag, by
/// environment and through a proxy, for each kind of credential a profile
/// holds: none reaches the catcher, and each refused spelling is one line.
#[test]
fn no_spelling_of_a_base_url_sends_a_profiles_credential_to_another_host() {
    const OPENAI: &str = "sk-openai-must-stay-home-1234";
    const ANTHROPIC: &str = "sk-ant-must-stay-home-5678";
    const LITERAL: &str = "sk-literal-must-stay-home-9012";
    const TOKEN: &str = "at-login-must-stay-home-3456";
    let own = FakeProvider::start_repeating(vec![Reply::text("home")]);
    let own_host = own.addr().to_string();
    let catcher = Catcher::start();
    let evil = catcher.addr.to_string();
    let spellings: Vec<String> = [
        "http://{evil}\\@{own}/v1",
        "HTTP://{evil}\\@{own}/v1",
        "http:\\\\{evil}\\@{own}/v1",
        "\\http://{evil}\\@{own}/v1",
        "http://{evil}\\\\@{own}/v1",
        "http://{evil}\t@{own}/v1",
        "http://{evil}\n@{own}/v1",
        "http://{evil}/\r\n@{own}/v1",
        "http://x:y@{own}/v1",
        "http://{evil}/@{own}/v1",
        "http://{evil}%40{own}/v1",
        "http://{evil}#@{own}/v1",
        "http://{evil}?@{own}/v1",
    ]
    .iter()
    .map(|s| s.replace("{evil}", &evil).replace("{own}", &own_host))
    .collect();
    let profiles = [
        "api_key_env = \"OPENAI_API_KEY\"".to_string(),
        "api_key_env = \"ANTHROPIC_API_KEY\"\napi = \"messages\"".to_string(),
        format!("api_key = \"{LITERAL}\""),
        "auth = \"login\"".to_string(),
    ];
    let mut runs = 0;
    for profile in &profiles {
        let cfg = format!(
            "[agent]\nmodel = \"p\"\n[models.p]\napi_base_url = \"{}\"\nmodel = \"m\"\nstream = false\n{profile}\n",
            own.base_url()
        );
        let cmd = BuddyCmd::new()
            .config(cfg)
            .env("OPENAI_API_KEY", OPENAI)
            .env("ANTHROPIC_API_KEY", ANTHROPIC);
        write_auth(
            &cmd,
            &format!(
                r#"{{"providers":{{"openai":{{"access_token":"{TOKEN}","refresh_token":"rt-x","expires_at":{}}}}}}}"#,
                now() + 3600
            ),
        );
        for url in &spellings {
            for by in ["flag", "env", "proxy"] {
                runs += 1;
                let (url, extra): (String, Vec<(&str, String)>) = match by {
                    "flag" => (url.clone(), vec![]),
                    "env" => (String::new(), vec![("BUDDY_BASE_URL", url.clone())]),
                    // Through a proxy, the catcher is the proxy: a request
                    // for a host that does not exist reaches it all the same.
                    _ => (
                        url.replace(&evil, "evil.invalid"),
                        vec![
                            ("HTTP_PROXY", format!("http://{evil}")),
                            ("NO_PROXY", String::new()),
                        ],
                    ),
                };
                let mut args: Vec<std::ffi::OsString> = vec!["exec".into()];
                if !url.is_empty() {
                    args.extend(["--base-url".into(), url.clone().into()]);
                }
                args.push("hi".into());
                let mut c = cmd.command_with(&args);
                c.envs(extra).stdin(std::process::Stdio::null());
                let out = c.output().unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                if stderr.contains("--base-url `") || stderr.contains("BUDDY_BASE_URL `") {
                    assert_eq!(out.status.code(), Some(2), "{by} {url:?}: {stderr}");
                    let errors = stderr.lines().filter(|l| l.contains("error")).count();
                    assert_eq!(errors, 1, "{stderr}");
                }
            }
        }
    }
    assert_eq!(runs, profiles.len() * spellings.len() * 3);
    let seen = catcher.seen();
    for secret in [OPENAI, ANTHROPIC, LITERAL, TOKEN] {
        assert!(
            !seen.contains(secret),
            "{secret} reached another host:\n{seen}"
        );
    }
    // The listener was reachable: spellings that really name it got there,
    // without a key.
    assert!(seen.contains("POST "), "nothing reached the catcher");
}
