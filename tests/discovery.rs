//! Zero-config start: with no key and nothing chosen, buddy finds a model
//! server on loopback and answers through it; `buddy models` lists what a
//! server offers. Against the fake provider and against the real llama.cpp
//! server (see `support::real_server`).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use support::fake_provider::{FakeProvider, Reply};
use support::real_server::{self, free_port, free_ports, RealServer, MODEL};
use support::BuddyCmd;

/// A config that says nothing but where to look: every profile and the
/// active one come from the built-in template, as on a first run.
fn probe_list(entries: &[String]) -> String {
    let list: Vec<String> = entries.iter().map(|e| format!("\"{e}\"")).collect();
    format!("[discovery]\nlocal_servers = [{}]\n", list.join(", "))
}

fn host_port(provider: &FakeProvider) -> String {
    provider.addr().to_string()
}

#[test]
fn exec_without_a_key_answers_through_the_first_local_server_that_answers() {
    let p = FakeProvider::start(vec![Reply::text("hello from the local server")]);
    let closed = format!("127.0.0.1:{}", free_port());
    let out = BuddyCmd::new()
        .config(probe_list(&[closed, host_port(&p)]))
        .args(["exec", "hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "hello from the local server\n");
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("using"))
        .unwrap_or_else(|| panic!("no line saying what was picked:\n{}", out.stderr));
    assert!(line.contains("no API key for profile `openai`"), "{line}");
    assert!(line.contains(&p.base_url()), "{line}");
    assert!(line.contains("model fake-model"), "{line}");
    assert!(line.contains("[models.local]"), "how to keep it: {line}");
    let chat = p.chat_requests();
    assert_eq!(chat.len(), 1);
    assert_eq!(chat[0].model(), Some("fake-model"));
    assert_eq!(chat[0].header("authorization"), None, "no key is sent");
    assert_eq!(p.requests()[0].path, "/v1/models");
}

#[test]
fn the_zero_config_notice_is_shown_in_full_once_per_server_and_model_then_short() {
    let p = FakeProvider::start(vec![Reply::text("one"), Reply::text("two")]);
    let cmd = BuddyCmd::new()
        .config(probe_list(&[host_port(&p)]))
        .args(["exec", "hello"]);
    let full = cmd.run();
    full.assert_success();
    assert!(
        full.stderr.contains("to make it permanent"),
        "{}",
        full.stderr
    );
    let short = cmd.rerun(["exec", "again"]);
    short.assert_success();
    assert_eq!(short.stdout, "two\n");
    let notice: Vec<&str> = short
        .stderr
        .lines()
        .filter(|l| l.contains(&p.base_url()))
        .collect();
    assert_eq!(
        notice,
        [format!(
            "buddy: using a local model server at {} (model fake-model)",
            p.base_url()
        )],
        "{}",
        short.stderr
    );
    assert!(!short.stderr.contains("permanent"), "{}", short.stderr);
}

#[test]
fn the_configured_discovery_model_is_used_when_the_server_lists_it() {
    let p = FakeProvider::start(vec![Reply::text("from b"), Reply::text("from a")])
        .with_models(&["model-a", "model-b"]);
    let config = format!("{}model = \"model-b\"\n", probe_list(&[host_port(&p)]));
    let cmd = BuddyCmd::new().config(config).args(["exec", "hi"]);
    cmd.run().assert_success();
    assert_eq!(p.chat_requests()[0].model(), Some("model-b"));
    // Not listed: the server's first model.
    let config = format!("{}model = \"model-z\"\n", probe_list(&[host_port(&p)]));
    BuddyCmd::new()
        .config(config)
        .args(["exec", "hi"])
        .run()
        .assert_success();
    assert_eq!(p.chat_requests()[1].model(), Some("model-a"));
}

#[test]
fn with_nothing_listening_the_missing_key_error_names_the_ports_tried() {
    let [a, b] = free_ports::<2>();
    let out = BuddyCmd::new()
        .config(probe_list(&[
            format!("127.0.0.1:{a}"),
            format!("http://127.0.0.1:{b}/v1"),
        ]))
        .args(["exec", "hello"])
        .run();
    out.assert_code(2);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("error: no API key for model profile `openai`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "no local model server answered at 127.0.0.1:{a}, 127.0.0.1:{b}"
        )),
        "{}",
        out.stderr
    );
}

/// What llama.cpp answers every request with while it loads its model.
fn loading() -> Reply {
    Reply::json(
        503,
        serde_json::json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}),
    )
}

#[test]
fn a_local_server_loading_its_model_is_named_as_loading_not_absent() {
    let p = FakeProvider::start(vec![Reply::text("never")]).with_models_reply(loading());
    let out = BuddyCmd::new()
        .config(probe_list(&[host_port(&p)]))
        .args(["exec", "hello"])
        .run();
    // A transient failure (exit 1), headlined by what is going on.
    out.assert_code(1);
    let first = out
        .stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "error: a local model server at {} is still loading its model (HTTP 503); run buddy again in a moment",
            p.base_url()
        ),
        "{}",
        out.stderr
    );
    for absent in [
        "no local model server answered",
        "no API key",
        "OPENAI_API_KEY",
    ] {
        assert!(!out.stderr.contains(absent), "{}", out.stderr);
    }
    assert!(p.chat_requests().is_empty());
}

/// A local server that is there and fails its listing with a server
/// error is a failure of that server (exit 1, its own words), not a missing
/// key (exit 2).
#[test]
fn a_local_server_failing_its_listing_is_a_failure_not_a_missing_key() {
    let p = FakeProvider::start(vec![Reply::text("never")]).with_models_reply(Reply::json(
        500,
        serde_json::json!({"error": {"message": "model store \u{1b}[31mbroken"}}),
    ));
    let out = BuddyCmd::new()
        .config(probe_list(&[host_port(&p)]))
        .args(["exec", "hello"])
        .run();
    out.assert_code(1);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains(&format!(
            "at {} failed to list its models (HTTP 500: model store",
            p.base_url()
        )),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains('\u{1b}'),
        "the server's text made visible: {}",
        out.stderr
    );
    for absent in ["no API key", "OPENAI_API_KEY"] {
        assert!(!out.stderr.contains(absent), "{}", out.stderr);
    }
    assert!(p.chat_requests().is_empty());
}

#[test]
fn a_configured_server_loading_its_model_is_retried_and_then_answers() {
    let p = FakeProvider::start(vec![loading(), Reply::text("ready now")]);
    let out = BuddyCmd::new().config_for(&p).args(["exec", "hello"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "ready now\n");
    assert!(
        out.stderr
            .contains("the model server is still loading its model"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("retrying in"), "{}", out.stderr);
    assert_eq!(p.chat_requests().len(), 2);
    // Still loading when the retries are spent: said in those words.
    let p = FakeProvider::start(vec![loading()]);
    let config = format!("{}\n[network]\nmax_retries = 0\n", support::fake_config(&p));
    let out = BuddyCmd::new().config(config).args(["exec", "hello"]).run();
    out.assert_code(1);
    assert!(
        out.stderr.contains("still loading its model (HTTP 503 Service Unavailable: Loading model); try again in a moment"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_empty_probe_list_turns_discovery_off() {
    let p = FakeProvider::start(vec![Reply::text("never")]);
    let out = BuddyCmd::new()
        .config("[discovery]\nlocal_servers = []\n")
        .args(["exec", "hello"])
        .run();
    out.assert_code(2);
    assert!(
        !out.stderr.contains("no local model server"),
        "{}",
        out.stderr
    );
    assert_eq!(p.request_count(), 0);
}

#[test]
fn a_probe_list_entry_off_loopback_is_a_config_error() {
    let out = BuddyCmd::new()
        .config(probe_list(&["192.0.2.1:11434".to_string()]))
        .args(["exec", "hello"])
        .run();
    out.assert_code(2);
    assert!(
        out.stderr.contains("`192.0.2.1:11434` is not on loopback"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_explicit_choice_never_probes() {
    let local = FakeProvider::start(vec![Reply::text("should not answer")]);
    let list = probe_list(&[host_port(&local)]);
    // A profile or model by flag or environment: the missing key is an
    // error as before.
    for (args, env) in [
        (vec!["-m", "openai"], None),
        (vec!["-m", "gpt-4o"], None),
        (vec!["-m", "anthropic"], None),
        (vec![], Some(("BUDDY_MODEL", "openai"))),
    ] {
        let mut cmd = BuddyCmd::new().config(list.clone()).args(&args);
        if let Some((k, v)) = env {
            cmd = cmd.env(k, v);
        }
        let out = cmd.args(["exec", "hello"]).run();
        out.assert_code(2);
        assert!(
            out.stderr.contains("no API key"),
            "{args:?} {env:?}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("no local model server"),
            "{}",
            out.stderr
        );
    }
    // A base URL by flag or environment is tried as it is, keyless (nothing
    // listens on port 9 here), and never replaced by a probed server.
    for (args, env) in [
        (vec!["--base-url", "http://127.0.0.1:9/v1"], None),
        (vec![], Some(("BUDDY_BASE_URL", "http://127.0.0.1:9/v1"))),
    ] {
        let mut cmd = BuddyCmd::new().config(list.clone()).args(&args);
        if let Some((k, v)) = env {
            cmd = cmd.env(k, v);
        }
        let out = cmd.args(["exec", "hello"]).run();
        out.assert_code(1);
        assert!(
            out.stderr
                .contains("cannot reach model server at http://127.0.0.1:9/v1"),
            "{args:?} {env:?}: {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("no local model server"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(local.request_count(), 0, "the local server was probed");
    // A profile picked in the config file and given its key.
    let keyed = FakeProvider::start_repeating(vec![Reply::text("from the keyed profile")]);
    let config = format!("{}\n{list}", support::fake_config(&keyed));
    let out = BuddyCmd::new().config(config).args(["exec", "hello"]).run();
    out.assert_success();
    assert_eq!(out.stdout, "from the keyed profile\n");
    // The default profile with its key in the environment.
    let out = BuddyCmd::new()
        .config(list.clone())
        .env("OPENAI_API_KEY", "sk-test")
        .env("BUDDY_BASE_URL", keyed.base_url())
        .args(["exec", "hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "from the keyed profile\n");
    assert!(!out.stderr.contains("so using"), "{}", out.stderr);
    // A profile the user chose in the file, without its key.
    let out = BuddyCmd::new()
        .config(format!("[agent]\nmodel = \"anthropic\"\n{list}"))
        .args(["exec", "hello"])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    assert_eq!(local.request_count(), 0, "the local server was probed");
}

#[test]
fn models_lists_the_profiles_server_and_marks_the_one_in_use() {
    let p = FakeProvider::start(vec![]).with_models(&["other-model", "fake-model"]);
    let out = BuddyCmd::new().config_for(&p).arg("models").run();
    out.assert_success();
    assert_eq!(out.stdout, "  other-model\n* fake-model\n");
    let req = &p.requests()[0];
    assert_eq!(req.method, "GET");
    assert_eq!(req.path, "/v1/models");
    assert_eq!(
        req.header("authorization").as_deref(),
        Some("Bearer sk-fake")
    );
}

#[test]
fn models_speaks_the_profiles_protocol() {
    let p = FakeProvider::start(vec![]).with_models(&["claude-x"]);
    let config = format!(
        "[agent]\nmodel = \"c\"\n[models.c]\napi_base_url = \"{}\"\napi = \"messages\"\napi_key = \"sk-ant\"\nmodel = \"claude-x\"\n",
        p.base_url()
    );
    let out = BuddyCmd::new().config(config).arg("models").run();
    out.assert_success();
    assert_eq!(out.stdout, "* claude-x\n");
    let req = &p.requests()[0];
    assert_eq!(req.path, "/v1/models?limit=1000");
    assert_eq!(req.header("x-api-key").as_deref(), Some("sk-ant"));
    assert_eq!(
        req.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
}

#[test]
fn models_failure_is_one_line() {
    let port = free_port();
    let config = format!(
        "[agent]\nmodel = \"x\"\n[models.x]\napi_base_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n"
    );
    let out = BuddyCmd::new().config(config).arg("models").run();
    out.assert_code(1);
    assert!(out.stdout.is_empty());
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("cannot list the models"),
        "{}",
        out.stderr
    );
    assert!(errors[0].contains(&port.to_string()), "{}", out.stderr);
}

#[test]
fn models_without_a_key_lists_the_local_servers_models() {
    let p = FakeProvider::start(vec![]).with_models(&["a", "b"]);
    let out = BuddyCmd::new()
        .config(probe_list(&[host_port(&p)]))
        .arg("models")
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "* a\n  b\n");
}

#[test]
fn real_llama_server_is_found_and_answers_exec_with_no_key() {
    let Some(server) = RealServer::start_with(
        "real_llama_server_is_found_and_answers_exec_with_no_key",
        &["-n", "64"],
    ) else {
        return;
    };
    let out = BuddyCmd::new()
        .config(probe_list(&[format!("127.0.0.1:{}", server.port())]))
        .args(["exec", "Say hello in one short sentence."])
        .run();
    out.assert_success();
    assert!(!out.stdout.trim().is_empty(), "no answer: {}", out.stderr);
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("so using"))
        .unwrap_or_else(|| panic!("no line saying what was picked:\n{}", out.stderr));
    assert!(
        line.contains(&format!("using llama.cpp at {}", server.base_url())),
        "{line}"
    );
    assert!(line.contains(&format!("model {MODEL}")), "{line}");
}

#[test]
fn models_lists_the_real_servers_model() {
    let Some(server) = RealServer::start_with("models_lists_the_real_servers_model", &["-n", "64"])
    else {
        return;
    };
    let config = format!(
        "[agent]\nmodel = \"llama\"\n[models.llama]\napi_base_url = \"{}\"\nmodel = \"{MODEL}\"\n",
        server.base_url()
    );
    let out = BuddyCmd::new().config(config).arg("models").run();
    out.assert_success();
    assert_eq!(out.stdout, format!("* {MODEL}\n"));
}

/// `scripts/real-server` with `args` for the server on `port`, built in `dir`.
fn real_server_script(dir: &Path, port: u16, args: &[&str]) -> Output {
    Command::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/real-server"))
        .args(args)
        .args(["--port", &port.to_string()])
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run scripts/real-server")
}

/// Whether `pid` is a live process (a zombie nobody reaped is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

/// Stops the server a test started with `--start`, even when it fails, and
/// removes its log from the shared build directory.
struct StopOnDrop<'a>(&'a Path, u16);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        real_server_script(self.0, self.1, &["--stop"]);
        let _ = std::fs::remove_file(self.0.join(format!("server.{}.log", self.1)));
    }
}

#[test]
fn real_server_start_runs_once_and_zero_config_exec_answers_through_it() {
    let test = "real_server_start_runs_once_and_zero_config_exec_answers_through_it";
    let Some(dir) = real_server::built(test) else {
        return;
    };
    let port = free_port();
    let _stop = StopOnDrop(&dir, port);
    let pid_file = dir.join(format!("server.{port}.pid"));
    let first = real_server_script(&dir, port, &["--start"]);
    let first_err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "--start failed: {first_err}");
    assert!(
        first_err.contains(&format!("runs on http://127.0.0.1:{port}/v1")),
        "{first_err}"
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("a pid file")
        .trim()
        .parse()
        .expect("a pid");
    assert!(alive(pid), "the server is not running");

    let second = real_server_script(&dir, port, &["--start"]);
    let second_err = String::from_utf8_lossy(&second.stderr);
    assert!(
        second.status.success(),
        "second --start failed: {second_err}"
    );
    assert!(
        second_err.contains(&format!(
            "already runs on http://127.0.0.1:{port}/v1 (pid {pid}"
        )),
        "{second_err}"
    );

    // What the README's first command does, with the port in the probe list.
    let out = BuddyCmd::new()
        .config(probe_list(&[format!("127.0.0.1:{port}")]))
        .args(["exec", "hello"])
        // The tiny model takes seconds per answer, more on a busy machine.
        .timeout(Duration::from_secs(300))
        .run();
    out.assert_success();
    assert!(!out.stdout.trim().is_empty(), "no answer: {}", out.stderr);

    let stop = real_server_script(&dir, port, &["--stop"]);
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    support::wait::wait_for(
        format!("--stop to end pid {pid}"),
        Duration::from_secs(30),
        || !alive(pid),
    );
    assert!(!pid_file.exists(), "--stop left the pid file");
}
