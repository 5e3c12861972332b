//! The page of `buddy serve` in a real browser: Debian's headless Chromium,
//! driven over the W3C WebDriver protocol (chromedriver on loopback, spoken to
//! with the plain HTTP client of the serve tests), against `buddy serve` and
//! the fake provider. It clicks and types like a user and reads the DOM.
//!
//! Needs `chromium` and `chromedriver` (Debian: `chromium chromium-driver`;
//! `.ci/run` installs them). Without them the test fails under CI or as
//! root, and is skipped with a note otherwise.

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::fake_provider::{FakeProvider, Reply, ToolCallSpec};
use support::http::{Client, Response};
use support::serve::Server;
use support::{BuddyCmd, TempDir};

/// Longest wait for something to show in the page.
const WAIT: Duration = Duration::from_secs(30);
/// Pause between two looks at the DOM while waiting.
const POLL: Duration = Duration::from_millis(25);
/// The key WebDriver names an element reference with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// `name` on PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Chromium and chromedriver, or `None` (after a note) when they are missing
/// on a developer machine. Under CI or as root (where they can be installed)
/// their absence is a failure.
fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let chromium = which("chromium");
    let driver = which("chromedriver");
    if let (Some(c), Some(d)) = (&chromium, &driver) {
        return Some((c.clone(), d.clone()));
    }
    let missing: Vec<&str> = [("chromium", &chromium), ("chromedriver", &driver)]
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(n, _)| *n)
        .collect();
    // /proc/self belongs to the process's effective user.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let ci = std::env::var_os("CI").is_some();
    let why = format!(
        "the browser test needs {} on PATH (Debian: apt-get install chromium chromium-driver; .ci/run installs them)",
        missing.join(" and ")
    );
    assert!(!ci && !root, "{why}");
    eprintln!("note: skipping the browser test: {why}");
    None
}

/// chromedriver (in a process group of its own, with the Chromium it starts)
/// and one WebDriver session. Dropping it ends the session and kills the
/// group, so no browser outlives the test, whatever way it ends.
struct Browser {
    driver: Child,
    /// What chromedriver printed, shown when the test fails.
    driver_out: Arc<Mutex<String>>,
    wd: Client,
    session: String,
    _profile: TempDir,
}

impl Browser {
    fn start(chromium: &Path, chromedriver: &Path) -> Browser {
        let mut driver = Command::new(chromedriver)
            .args(["--port=0", "--log-level=WARNING"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()));
        let driver_out = Arc::new(Mutex::new(String::new()));
        // The port it listens on (asked for 0: a free one) is in its first lines.
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let mut out = BufReader::new(driver.stdout.take().unwrap());
        let sink = Arc::clone(&driver_out);
        std::thread::spawn(move || {
            let mut line = String::new();
            while out.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    let _ = port_tx.send(rest.trim().trim_end_matches('.').to_string());
                }
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let port = port_rx.recv_timeout(WAIT);
        let mut browser = Browser {
            driver,
            driver_out,
            wd: Client::new(([127, 0, 0, 1], 0).into()),
            session: String::new(),
            _profile: TempDir::new("chromium"),
        };
        let port: u16 = match port.ok().and_then(|p| p.parse().ok()) {
            Some(p) => p,
            None => panic!(
                "chromedriver did not say which port it listens on:\n{}",
                browser.driver_out.lock().unwrap()
            ),
        };
        browser.wd = Client::new(([127, 0, 0, 1], port).into());
        let profile = format!("--user-data-dir={}", browser._profile.path().display());
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_string_lossy(),
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1000,800",
                    // Nothing but loopback: no name resolves.
                    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                    profile,
                ],
            },
        }}});
        let r = browser.wd.post_json("/session", &caps);
        let v = browser.value(r, "new session");
        browser.session = v["sessionId"].as_str().expect("a session id").to_string();
        browser
    }

    /// The `value` of a WebDriver answer; panics on an error.
    fn value(&self, r: Response, what: &str) -> Value {
        match self.result(r) {
            Ok(v) => v,
            Err((e, m)) => panic!(
                "WebDriver {what}: {e}: {m}\nchromedriver said:\n{}",
                self.driver_out.lock().unwrap()
            ),
        }
    }

    /// The `value`, or WebDriver's error code and message.
    fn result(&self, r: Response) -> Result<Value, (String, String)> {
        let mut v = r.json();
        let value = v["value"].take();
        if r.status == 200 {
            return Ok(value);
        }
        let code = value["error"].as_str().unwrap_or("?").to_string();
        let message = value["message"].as_str().unwrap_or(&r.body).to_string();
        Err((code, message))
    }

    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    fn post(&self, rest: &str, body: Value) -> Result<Value, (String, String)> {
        self.result(self.wd.post_json(&self.path(rest), &body))
    }

    fn get(&self, rest: &str) -> Result<Value, (String, String)> {
        self.result(self.wd.get(&self.path(rest)))
    }

    fn goto(&self, url: &str) {
        let r = self
            .wd
            .post_json(&self.path("/url"), &json!({ "url": url }));
        self.value(r, "navigate");
    }

    /// References of the elements `css` matches now.
    fn find_all(&self, css: &str) -> Vec<String> {
        let body = json!({ "using": "css selector", "value": css });
        let found = self.post("/elements", body).unwrap_or_else(|(e, m)| {
            panic!("WebDriver find {css:?}: {e}: {m}");
        });
        found
            .as_array()
            .expect("a list of elements")
            .iter()
            .map(|e| {
                e[ELEMENT]
                    .as_str()
                    .expect("an element reference")
                    .to_string()
            })
            .collect()
    }

    /// The rendered text of each element `css` matches, or `None` when the
    /// page replaced one while it was being read.
    fn try_texts(&self, css: &str) -> Option<Vec<String>> {
        let mut out = Vec::new();
        for el in self.find_all(css) {
            match self.get(&format!("/element/{el}/text")) {
                Ok(v) => out.push(v.as_str().unwrap_or_default().to_string()),
                Err((e, _)) if e == "stale element reference" => return None,
                Err((e, m)) => panic!("WebDriver text of {css:?}: {e}: {m}"),
            }
        }
        Some(out)
    }

    fn texts(&self, css: &str) -> Vec<String> {
        self.wait_for(&format!("a stable read of {css:?}"), |b| b.try_texts(css))
    }

    /// Polls the DOM until `check` finds what it wants, for at most [`WAIT`].
    fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Browser) -> Option<T>) -> T {
        let found = support::wait::poll_every(POLL, WAIT, || check(self));
        found.unwrap_or_else(|| {
            let log = self.try_texts("#log").unwrap_or_default().join("");
            panic!("waited {WAIT:?} for {what}; the page's log shows:\n{log}")
        })
    }

    /// The one element `css` matches, once there is one.
    fn wait_element(&self, css: &str) -> String {
        self.wait_for(&format!("{css:?} in the page"), |b| {
            b.find_all(css).into_iter().next()
        })
    }

    fn enabled(&self, el: &str) -> bool {
        self.get(&format!("/element/{el}/enabled"))
            .is_ok_and(|v| v == json!(true))
    }

    fn click(&self, el: &str) {
        let r = self
            .wd
            .post_json(&self.path(&format!("/element/{el}/click")), &json!({}));
        self.value(r, "click");
    }

    /// Types `text` into the element as keys (WebDriver's codes: `\u{E007}`
    /// is Enter, `\u{E008}` holds Shift until the end of this call).
    fn type_into(&self, el: &str, text: &str) {
        let r = self.wd.post_json(
            &self.path(&format!("/element/{el}/value")),
            &json!({ "text": text }),
        );
        self.value(r, "send keys");
    }

    /// What `body` (a function body) returns, run in the page.
    fn script(&self, body: &str) -> Value {
        let r = self.wd.post_json(
            &self.path("/execute/sync"),
            &json!({ "script": body, "args": [] }),
        );
        self.value(r, "execute script")
    }

    fn url(&self) -> String {
        let r = self.wd.get(&self.path("/url"));
        self.value(r, "current URL")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn refresh(&self) {
        let r = self.wd.post_json(&self.path("/refresh"), &json!({}));
        self.value(r, "refresh");
    }

    /// A Chrome DevTools command, through chromedriver.
    fn cdp(&self, cmd: &str, params: Value) {
        let r = self.wd.post_json(
            &self.path("/goog/cdp/execute"),
            &json!({ "cmd": cmd, "params": params }),
        );
        self.value(r, cmd);
    }

    /// The page as a phone or a desktop `width` pixels wide would show it,
    /// with the system's colour scheme `light` or `dark`.
    fn emulate(&self, width: u32, height: u32, scheme: &str) {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500 }),
        );
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
        );
    }

    /// A PNG of the viewport, written to `path`.
    fn screenshot(&self, path: &Path) {
        use base64::Engine;
        let r = self.wd.get(&self.path("/screenshot"));
        let png = self.value(r, "screenshot");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64 PNG"))
            .expect("a screenshot in base64");
        std::fs::write(path, bytes)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    fn rect(&self, el: &str) -> Value {
        let r = self.wd.get(&self.path(&format!("/element/{el}/rect")));
        self.value(r, "rect")
    }
}

/// Where the tests leave files for people to look at: `target/test-artifacts/`.
fn artifacts_dir() -> PathBuf {
    let bin = support::buddy_bin();
    // target/<profile>/buddy
    let target = bin
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// The one session the server lists.
fn only_session(server: &Server) -> String {
    let list = server.client().get("/api/sessions").json();
    let sessions = list["sessions"].as_array().expect("a list").clone();
    assert_eq!(sessions.len(), 1, "{list}");
    sessions[0]["id"].as_str().expect("an id").to_string()
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // Quits Chromium the polite way; the kill below is for the rest.
            let _ = self.wd.delete(&self.path(""));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- chromedriver ---\n{}",
                self.driver_out.lock().unwrap_or_else(|e| e.into_inner())
            );
        }
    }
}

const PROMPT: &str = "please run the browser tool";
const ANSWER: &str = "The tool printed from-the-browser-tool, so the page works in a real browser.";

/// The first send starts a session (no "New session" click), the approval
/// box has the command and its buttons, the call reads as on the terminal
/// (`▶ $ cmd`, `← output`), the answer streams, the session is in the URL,
/// and a reload shows the whole conversation again, calls and results too.
#[test]
fn a_prompt_an_approval_and_a_streamed_answer_in_chromium() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let started = Instant::now();
    // A command that changes something, so it asks under any policy.
    let command = "mkdir -v from-the-browser-tool";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({ "command": command }).to_string(),
        )]),
        // Several content deltas, a little apart, as a model streams them.
        Reply::text(ANSWER).chunk_delay(Duration::from_millis(20)),
    ]);
    // The default config asks before running a shell command.
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;

    b.goto(&server.url());
    let text = b.wait_element("#text");
    assert!(b.enabled(&text), "the input is usable before any session");
    b.type_into(&text, PROMPT);
    b.click(&b.wait_element("#send"));

    // The tool call waits for approval: a box with the command and buttons.
    let approve = b.wait_element(".approval .approve");
    let approval = b.texts(".approval");
    assert_eq!(approval.len(), 1, "{approval:?}");
    assert!(approval[0].contains(command), "{approval:?}");
    assert_eq!(b.find_all(".approval .deny").len(), 1);
    // "Always" names the prefix the agent offered for this command.
    assert_eq!(
        b.texts(".approval .always"),
        vec!["Always mkdir".to_string()]
    );
    assert_eq!(b.texts(".msg.user"), vec![PROMPT.to_string()]);
    // The call as the terminal shows it, not its JSON.
    let call = format!("▶ $ {command}");
    b.wait_for("the call's line", |b| {
        (b.try_texts(".tool .call")? == [call.clone()]).then_some(())
    });
    let stop = b.wait_element("#stop");
    assert!(b.enabled(&stop), "Stop is offered while the run runs");
    // The session the send started is in the URL.
    let id = only_session(&server);
    assert!(
        b.url().ends_with(&format!("#s={id}")),
        "{} does not name {id}",
        b.url()
    );
    b.click(&approve);

    // The command's output under its call, then the whole answer.
    let created = "← mkdir: created directory 'from-the-browser-tool'".to_string();
    b.wait_for("the tool's result", |b| {
        let out = b.try_texts(".tool .out")?;
        (out == [created.as_str()]).then_some(())
    });
    b.wait_for("the streamed answer", |b| {
        let a = b.try_texts(".msg.answer")?;
        (a.concat() == ANSWER).then_some(())
    });
    b.wait_for("the run to end", |b| (!b.enabled(&stop)).then_some(()));
    assert_eq!(b.texts(".msg.answer"), vec![ANSWER.to_string()]);
    assert!(
        b.find_all(".approval").is_empty(),
        "the box goes once answered"
    );
    let notes = b.texts(".note");
    assert_eq!(notes, vec![format!("approved: {command}")]);

    // The model got the command's output in its second request.
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    let sent = reqs[1].json()["messages"].as_array().unwrap().clone();
    let result = sent
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .unwrap_or_else(|| panic!("no tool result in {sent:?}"));
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("from-the-browser-tool"),
        "{result}"
    );

    // A reload shows the same conversation from the session's history.
    b.refresh();
    b.wait_for("the saved conversation", |b| {
        (b.try_texts(".msg.answer")? == [ANSWER]).then_some(())
    });
    assert_eq!(b.texts(".msg.user"), vec![PROMPT.to_string()]);
    assert_eq!(b.texts(".tool .call"), vec![call.clone()]);
    assert_eq!(b.texts(".tool .out"), vec![created.clone()]);
    assert!(b.url().ends_with(&format!("#s={id}")), "{}", b.url());
    // Listed by its title (the first prompt) and when it was used; the list
    // and the title are fetched beside the conversation, so wait for them.
    let listed = vec![format!("{PROMPT}\njust now")];
    b.wait_for("the session listed by its title", |b| {
        (b.try_texts(".sess.on")? == listed).then_some(())
    });
    b.wait_for("the title", |b| {
        (b.try_texts("#title")? == [PROMPT]).then_some(())
    });

    // A fresh page starts empty; picking the session opens it.
    b.goto(&server.url());
    b.wait_element(".empty");
    b.click(&b.wait_element(".sess"));
    b.wait_for("the conversation picked", |b| {
        (b.try_texts(".msg.answer")? == [ANSWER]).then_some(())
    });
    assert!(b.url().ends_with(&format!("#s={id}")), "{}", b.url());
    eprintln!("the browser test took {:?}", started.elapsed());
}

/// A reload while a run waits for approval shows the approval again, still
/// answerable; the page follows the run from there, and once it is done the
/// conversation reads whole, nothing shown twice.
#[test]
fn a_reload_during_a_run_keeps_its_approval_and_follows_the_run() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let command = "mkdir -v made-after-a-reload";
    let answer = "Made it after the reload.";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({ "command": command }).to_string(),
        )]),
        Reply::text(answer),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;

    b.goto(&server.url());
    let text = b.wait_element("#text");
    b.type_into(&text, &format!("{PROMPT}\u{E007}"));
    b.wait_element(".approval .approve");
    let id = only_session(&server);
    assert!(b.url().ends_with(&format!("#s={id}")), "{}", b.url());

    b.refresh();
    let approve = b.wait_element(".approval .approve");
    assert!(
        b.texts(".approval code").concat().contains(command),
        "{:?}",
        b.texts(".approval")
    );
    let stop = b.wait_element("#stop");
    assert!(b.enabled(&stop), "the run is shown as running");
    b.click(&approve);
    b.wait_for("the answer", |b| {
        (b.try_texts(".msg.answer")?.concat() == answer).then_some(())
    });
    b.wait_for("the run to end", |b| (!b.enabled(&stop)).then_some(()));
    // Read again whole once done: each part once.
    b.wait_for("the whole conversation", |b| {
        let calls = b.try_texts(".tool .call")?;
        (calls == [format!("▶ $ {command}")]).then_some(())
    });
    assert_eq!(b.texts(".msg.user"), vec![PROMPT.to_string()]);
    assert_eq!(b.texts(".msg.answer"), vec![answer.to_string()]);
    assert!(b.find_all(".approval").is_empty());
    assert!(cmd.work_dir().join("made-after-a-reload").is_dir());
}

/// An answer's Markdown is rendered by the server (a table is a `<table>`,
/// code is coloured as on the terminal), while HTML a model or a tool wrote
/// is shown as text and never runs.
#[test]
fn markdown_is_rendered_and_html_from_the_model_or_a_tool_is_only_text() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let script = "<script>window.__buddyPwned = 1</script>";
    let img = "<img src=x onerror=\"window.__buddyPwned = 2\">";
    let answer = format!(
        "Here is what I found:\n\n| file | lines |\n|:-----|------:|\n| main.rs | 42 |\n| lib.rs | 7 |\n\n\
         {script}\n\nAn image: {img}\n\n```rust\nfn main() {{ println!(\"hi\"); }}\n```\n"
    );
    // Writes a file, so it asks under any policy.
    let shell = "printf '%s\\n' '<img src=y onerror=\"window.__buddyPwned = 3\">' > shown.txt; cat shown.txt";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({ "command": shell }).to_string(),
        )]),
        Reply::text(answer.clone()).chunk_delay(Duration::from_millis(5)),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    // The page comes with a policy that allows its own script only.
    let page = server.client().get("/");
    let csp = page
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-security-policy"))
        .map(|(_, v)| v.clone())
        .expect("a Content-Security-Policy header");
    assert!(csp.contains("script-src 'sha256-"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;

    b.goto(&server.url());
    let text = b.wait_element("#text");
    b.type_into(&text, "show me\u{E007}");
    b.click(&b.wait_element(".approval .approve"));
    let stop = b.wait_element("#stop");
    b.wait_for("the run to end", |b| (!b.enabled(&stop)).then_some(()));
    // The answer's last render: the code block after the table is coloured.
    b.wait_for("the whole answer rendered", |b| {
        (b.try_texts(".msg.answer pre code .hl-35")? == ["fn"]).then_some(())
    });

    let head = b.texts(".msg.answer th");
    assert_eq!(head, vec!["file", "lines"]);
    let cells = b.texts(".msg.answer td");
    assert_eq!(cells, vec!["main.rs", "42", "lib.rs", "7"]);
    // The code's keyword in the terminal's keyword colour.
    assert_eq!(b.texts(".msg.answer pre code .hl-35"), vec!["fn"]);
    // The markup is there to read, and nothing of it is an element.
    let shown = b.texts(".msg.answer").concat();
    assert!(shown.contains(script), "{shown}");
    assert!(shown.contains(img), "{shown}");
    let tool = b.texts(".tool .out").concat();
    assert!(tool.contains("<img src=y onerror="), "{tool}");
    assert!(b.find_all("#log script").is_empty());
    assert!(b.find_all("#log img").is_empty());
    assert_eq!(
        b.script("return typeof window.__buddyPwned;"),
        json!("undefined"),
        "a payload ran"
    );
}

/// Enter sends; Shift+Enter adds a line to the message instead. The page
/// works behind a token.
#[test]
fn enter_sends_and_shift_enter_adds_a_line() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let p = FakeProvider::start(vec![Reply::text("**Two** lines, got them.")]);
    let cmd = BuddyCmd::new().config_for(&p);
    // With a token, given once in the page's URL: every request the page
    // makes (the answer's rendering too) carries it.
    let server = Server::start(&cmd, &["--token", "page-token"]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;

    b.goto(&format!("{}?token=page-token", server.url()));
    let text = b.wait_element("#text");
    b.type_into(&text, "first line");
    b.type_into(&text, "\u{E008}\u{E007}");
    b.type_into(&text, "second line");
    let value = b.script("return document.getElementById('text').value;");
    assert_eq!(value, json!("first line\nsecond line"));
    assert!(b.find_all(".msg.user").is_empty(), "Shift+Enter sent");
    assert_eq!(p.request_count(), 0);

    b.type_into(&text, "\u{E007}");
    b.wait_for("the answer", |b| {
        (b.try_texts(".msg.answer strong")? == ["Two"]).then_some(())
    });
    assert_eq!(b.texts(".msg.answer"), vec!["Two lines, got them."]);
    assert_eq!(b.texts(".msg.user"), vec!["first line\nsecond line"]);
    assert_eq!(
        b.script("return document.getElementById('text').value;"),
        json!("")
    );
    let reqs = p.chat_requests();
    let messages = reqs[0].json()["messages"].clone();
    let last = messages.as_array().and_then(|m| m.last()).cloned();
    assert_eq!(
        last.map(|m| m["content"].clone()),
        Some(json!("first line\nsecond line"))
    );
}

/// Screenshots of a conversation with Markdown, a long result and a write
/// waiting for approval: desktop and 375 px wide, light and dark, in
/// `target/test-artifacts/`. On the phone the page fits the width and the
/// approval's buttons are on screen without scrolling; the dark scheme
/// follows the system's preference.
#[test]
fn the_page_on_a_phone_and_a_desktop_in_light_and_dark() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let cmd = BuddyCmd::new();
    let old: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    std::fs::write(cmd.work_dir().join("notes.txt"), &old).expect("a file to change");
    let new = old
        .replace("line 4\n", "line four, changed\n")
        .replace("line 9\n", "");
    let answer = "Disk use by directory:\n\n| dir | size |\n|:--|--:|\n| src | 1.2 MiB |\n| tests | 640 KiB |\n\n\
                  Most of it is **source**. To see it yourself:\n\n```sh\ndu -sh src tests # sizes\n```\n\n\
                  Next I will update `notes.txt`.";
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({ "command": "seq 1 10 | tee seq.txt" }).to_string(),
        )]),
        Reply::text(answer),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "w1",
            "write_file",
            json!({ "path": "notes.txt", "content": new }).to_string(),
        )]),
        Reply::text("Done."),
    ]);
    let cmd = cmd.config_for(&p);
    let server = Server::start(&cmd, &[]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;

    b.goto(&server.url());
    let text = b.wait_element("#text");
    b.type_into(&text, "how big is this project?\u{E007}");
    b.click(&b.wait_element(".approval .approve"));
    let stop = b.wait_element("#stop");
    b.wait_for("the run to end", |b| (!b.enabled(&stop)).then_some(()));
    // Ten lines of output: four shown, the rest a click away.
    let more = b.wait_element(".tool .more");
    assert_eq!(b.texts(".tool .more"), vec!["… +6 more lines"]);
    assert_eq!(b.texts(".tool .out .line").len(), 4);
    b.click(&more);
    assert_eq!(b.texts(".tool .out .line").len(), 10);
    // The conversation itself, before anything waits for approval.
    b.emulate(1280, 860, "light");
    let path = artifacts_dir().join("serve-page-desktop-light-conversation.png");
    b.screenshot(&path);
    eprintln!("screenshot: {}", path.display());

    b.type_into(&text, "now fix notes.txt\u{E007}");
    b.wait_element(".approval .approve");
    // The write shows its diff, coloured, not its whole content.
    assert_eq!(b.texts(".approval .diff .add"), vec!["+line four, changed"]);
    assert_eq!(b.texts(".approval .diff .del"), vec!["-line 4", "-line 9"]);
    let write = format!("▶ write notes.txt (11 lines, {} B)", new.len());
    b.wait_for("the write's call line", |b| {
        b.try_texts(".tool .call")?.contains(&write).then_some(())
    });

    let dir = artifacts_dir();
    let mut backgrounds = Vec::new();
    for (label, width, height) in [("desktop", 1280, 860), ("phone", 375, 740)] {
        for scheme in ["light", "dark"] {
            b.emulate(width, height, scheme);
            // Scrolled down, as the page keeps it while a run streams.
            b.script("const l = document.getElementById('log'); l.scrollTop = l.scrollHeight; return null;");
            // Approve is on screen and nothing covers it (once the layout
            // for the new size has settled): the element at its centre is
            // the button itself.
            b.wait_for(
                &format!("{label} {scheme}: the Approve button in view"),
                |b| {
                    let on_top = b.script(
                        "const a = document.querySelector('.approval .approve');\
                     const r = a.getBoundingClientRect();\
                     const x = r.left + r.width / 2, y = r.top + r.height / 2;\
                     return y < window.innerHeight && document.elementFromPoint(x, y) === a;",
                    );
                    (on_top == json!(true)).then_some(())
                },
            );
            if width < 500 {
                // The session list has slid away (it does, on a narrow screen).
                let side = b.wait_element("#side");
                b.wait_for("the session list to slide away", |b| {
                    let r = b.rect(&side);
                    (r["x"].as_f64()? + r["width"].as_f64()? <= 1.0).then_some(())
                });
            }
            let path = dir.join(format!("serve-page-{label}-{scheme}.png"));
            b.screenshot(&path);
            eprintln!("screenshot: {}", path.display());
            let overflow =
                b.script("return document.documentElement.scrollWidth - window.innerWidth;");
            assert!(
                overflow.as_f64().unwrap_or(1.0) <= 0.0,
                "{label} {scheme}: the page is wider than the window by {overflow}px"
            );
            backgrounds.push(b.script("return getComputedStyle(document.body).backgroundColor;"));
        }
    }
    assert_ne!(backgrounds[0], backgrounds[1], "dark looks like light");
    assert_eq!(backgrounds[0], backgrounds[2]);
    assert_eq!(backgrounds[1], backgrounds[3]);

    // On the phone the session list is behind the menu button.
    let side = b.wait_element("#side");
    b.click(&b.wait_element("#menu"));
    b.wait_for("the session list to slide in", |b| {
        (b.rect(&side)["x"].as_f64()? >= 0.0).then_some(())
    });
    let path = dir.join("serve-page-phone-dark-sessions.png");
    b.screenshot(&path);
    eprintln!("screenshot: {}", path.display());
}

/// A write's long diff stays a small scrolling box, its buttons still work,
/// and a running command's latest output shows under its call before the
/// result comes, then gives way to it. The command waits for a file the test
/// creates once the page shows its first line, so nothing here is timed.
#[test]
fn a_long_diff_stays_bounded_and_live_output_shows_before_the_result() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let cmd = BuddyCmd::new();
    let go = cmd.work_dir().join("go");
    // Bounded (about a minute), so a failed test leaves no shell behind.
    let command = format!(
        "echo step1; for i in $(seq 1200); do [ -e '{}' ] && break; sleep 0.05; done; echo step2",
        go.display()
    );
    let content: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "w1",
            "write_file",
            json!({ "path": "big.txt", "content": content }).to_string(),
        )]),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "s1",
            "run_shell",
            json!({ "command": command }).to_string(),
        )]),
        Reply::text("Done."),
    ]);
    let cmd = cmd.config_for(&p);
    let server = Server::start(&cmd, &[]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;

    b.goto(&server.url());
    let text = b.wait_element("#text");
    b.type_into(&text, "write and run");
    b.click(&b.wait_element("#send"));

    // Two hundred lines of diff in a box no taller than a screenful's part.
    let diff = b.wait_element(".approval pre");
    let rect = b.value(b.wd.get(&b.path(&format!("/element/{diff}/rect"))), "rect");
    let height = rect["height"].as_f64().expect("a height");
    assert!(
        height > 0.0 && height < 400.0,
        "the diff is {height}px tall"
    );
    b.click(&b.wait_element(".approval .approve"));

    // The command asks next; approved, it prints step1 and waits.
    let approve = b.wait_for("the command's approval", |b| {
        let asked = b.try_texts(".approval code")?;
        asked.iter().any(|t| t.contains("step1")).then_some(())?;
        b.find_all(".approval .approve").into_iter().next()
    });
    b.click(&approve);
    let tail = b.wait_for("the live output", |b| {
        b.try_texts(".tool .progress")?
            .into_iter()
            .find(|t| t.contains("step1"))
    });
    assert!(!tail.contains("step2"), "{tail:?}");
    let outs = b.texts(".tool .out");
    assert_eq!(outs.len(), 2, "{outs:?}");
    assert_eq!(outs[1], "", "no result yet: {outs:?}");

    std::fs::write(&go, "").expect("create the file the command waits for");
    let outs = b.wait_for("the command's result", |b| {
        let t = b.try_texts(".tool .out")?;
        (t.len() == 2 && !t[1].is_empty()).then_some(t)
    });
    assert_eq!(outs[1], "← step1\n  step2", "{outs:?}");
    assert!(
        b.find_all(".progress").is_empty(),
        "the result replaces the live output"
    );
    b.wait_for("the answer", |b| {
        (b.try_texts(".msg.answer")?.concat() == "Done.").then_some(())
    });
    let written = std::fs::read_to_string(cmd.work_dir().join("big.txt")).unwrap_or_default();
    assert_eq!(written, content, "the approved write happened");
}

/// Where the screenshots of the page's new parts go: `target/test-artifacts/`.
fn shot(b: &Browser, name: &str) {
    b.screenshot(&artifacts_dir().join(name));
}

/// The header names the model the server talks to and the directory it
/// works in, before any session.
#[test]
fn the_header_names_the_model_and_the_directory() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let about = server.client().get("/api/about").json();
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;
    b.goto(&server.url());
    let model = about["model"].as_str().expect("a model").to_string();
    let cwd = about["cwd"].as_str().expect("a directory").to_string();
    assert!(!model.is_empty() && !cwd.is_empty(), "{about}");
    b.wait_for("the model and directory in the header", |b| {
        (b.try_texts("#model")? == [model.clone()] && b.try_texts("#cwd")? == [cwd.clone()])
            .then_some(())
    });
    shot(b, "page-header-desktop.png");
}

/// Prompts `text` over the API in a new session and waits for its run to end.
fn session_with(server: &Server, text: &str) -> String {
    let c = server.client();
    let r = c.post("/api/sessions", "{}");
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_str().expect("an id").to_string();
    let body = json!({ "text": text }).to_string();
    let (r, s) = c.sse(
        "POST",
        &format!("/api/sessions/{id}/messages"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    s.expect("a stream").until("done");
    id
}

/// The find box narrows the list to the sessions whose title has the words
/// typed; a session is deleted with two clicks (the first asks), and its
/// file goes with it.
#[test]
fn sessions_are_found_by_title_and_deleted_from_the_list() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let p = FakeProvider::start(vec![Reply::text("one"), Reply::text("two")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let zebra = session_with(&server, "tell me about zebras");
    session_with(&server, "the build is broken");
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;
    b.goto(&server.url());
    b.wait_for("both sessions listed", |b| {
        (b.try_texts(".sess .t")?.len() == 2).then_some(())
    });

    let find = b.wait_element("#find");
    b.type_into(&find, "ZEBRA");
    b.wait_for("only the matching session", |b| {
        (b.try_texts(".sess .t")? == ["tell me about zebras"]).then_some(())
    });
    shot(b, "page-find.png");
    b.type_into(&find, " giraffe");
    b.wait_for("a note that nothing matches", |b| {
        (b.try_texts("#sessions")? == ["No session matches"]).then_some(())
    });
    b.script("const f = document.getElementById('find'); f.value = 'zebra'; f.dispatchEvent(new Event('input')); return null;");

    // The first click asks; only the second deletes.
    let del = b.wait_element(".row .del");
    b.click(&del);
    assert_eq!(b.texts(".row .del.sure"), vec!["Delete?".to_string()]);
    shot(b, "page-delete-asks.png");
    let file = cmd
        .work_dir()
        .join(format!(".buddyx/sessions/{zebra}.jsonl"));
    assert!(file.is_file(), "one click deletes nothing");
    b.click(&b.wait_element(".row .del.sure"));
    b.wait_for("the session gone from the list", |b| {
        (b.try_texts("#sessions")? == ["No session matches"]).then_some(())
    });
    assert!(!file.exists(), "the session's file is deleted");
    let left = server.client().get("/api/sessions").json();
    let titles: Vec<&str> = left["sessions"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|s| s["title"].as_str())
        .collect();
    assert_eq!(titles, ["the build is broken"], "{left}");
}

/// Runs of `buddy exec` in the served directory are listed together under
/// the person's conversations, folded, so they do not bury them; a search
/// opens the group.
#[test]
fn exec_runs_are_grouped_under_the_conversations_and_folded() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let p = FakeProvider::start(vec![
        Reply::text("run one"),
        Reply::text("run two"),
        Reply::text("talked"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    cmd.rerun(["exec", "nightly check one"]).assert_success();
    cmd.rerun(["exec", "nightly check two"]).assert_success();
    let server = Server::start(&cmd, &[]);
    // The newest session, yet listed above the runs.
    session_with(&server, "plan the release with me");
    let listed = server.client().get("/api/sessions").json();
    let origins: Vec<&str> = listed["sessions"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| s["origin"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(origins, ["serve", "exec", "exec"], "{listed}");
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;
    b.goto(&server.url());
    b.wait_for("the exec runs' group", |b| {
        (b.try_texts("#sessions .runs summary")? == ["exec runs (2)"]).then_some(())
    });
    // Folded: only the conversation is shown.
    let shown: Vec<bool> = b
        .script("return [...document.querySelectorAll('#sessions .sess')].map((a) => a.checkVisibility());")
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_bool().unwrap_or(false))
        .collect();
    assert_eq!(shown, [true, false, false]);
    assert_eq!(
        b.texts("#sessions > .row .sess .t"),
        ["plan the release with me"]
    );
    shot(b, "page-exec-runs-folded.png");
    let find = b.wait_element("#find");
    b.type_into(&find, "nightly");
    b.wait_for("the group open on a search", |b| {
        let open = b.script(
            "const d = document.querySelector('#sessions .runs'); return d ? d.open : false;",
        );
        (open == json!(true)).then_some(())
    });
    assert_eq!(
        b.texts("#sessions .runs .sess .t"),
        ["nightly check two", "nightly check one"]
    );
}

/// A file write asks as a write (`write PATH (…)` under "buddy wants to
/// write"), not as a command line `user@host$ write_file …`.
#[test]
fn a_file_write_asks_as_a_write_not_as_a_shell_line() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "w1",
            "write_file",
            json!({ "path": "notes.txt", "content": "one\ntwo\n" }).to_string(),
        )]),
        Reply::text("Written."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let server = Server::start(&cmd, &[]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;
    b.goto(&server.url());
    b.type_into(&b.wait_element("#text"), "write the notes\u{E007}");
    b.wait_element(".approval .approve");
    assert_eq!(
        b.texts(".approval .ask"),
        vec!["buddy wants to write".to_string()]
    );
    let code = b.texts(".approval code").concat();
    assert!(code.starts_with("write "), "{code}");
    assert!(code.contains("notes.txt"), "{code}");
    assert!(
        !code.contains("$ ") && !code.contains("write_file"),
        "{code}"
    );
    shot(b, "page-write-approval.png");
    b.click(&b.wait_element(".approval .approve"));
    b.wait_for("the answer", |b| {
        (b.try_texts(".msg.answer")?.concat() == "Written.").then_some(())
    });
    assert_eq!(
        b.texts(".tool .call"),
        vec!["▶ write notes.txt (2 lines, 8 B)".to_string()]
    );
}

/// A call a PreToolUse hook blocked shows as failed, with the hook's reason,
/// while the run streams and again when the saved session is opened.
#[test]
fn a_call_a_hook_blocked_shows_as_failed() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![ToolCallSpec::new(
            "c1",
            "run_shell",
            json!({ "command": "rm -r build" }).to_string(),
        )]),
        Reply::text("The hook said no."),
    ]);
    let toml = format!(
        "{}\n[[hooks.PreToolUse]]\nmatcher = \"run_shell\"\ncommand = \"echo no rm in this repo >&2; exit 2\"\n",
        support::fake_config(&p)
    );
    let cmd = BuddyCmd::new().config(toml);
    let server = Server::start(&cmd, &[]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;
    b.goto(&server.url());
    b.type_into(&b.wait_element("#text"), "clean up\u{E007}");
    let failed = "✗ run_shell: blocked by a hook".to_string();
    b.wait_for("the call marked failed", |b| {
        (b.try_texts(".tool.err .fail")? == [failed.clone()]).then_some(())
    });
    b.wait_for("the answer", |b| {
        (b.try_texts(".msg.answer")?.concat() == "The hook said no.").then_some(())
    });
    let out = b.texts(".tool .out").concat();
    assert!(out.contains("no rm in this repo"), "{out}");
    shot(b, "page-hook-blocked.png");
    // Read back from the saved session: still failed.
    b.refresh();
    b.wait_for("the saved call marked failed", |b| {
        (b.try_texts(".tool.err .fail")? == [failed.clone()]).then_some(())
    });
}

/// The session's plan (`todo_write`) shows above the input, each entry with
/// its status, and a sub-agent's calls fold under the `agent` call that ran
/// it: its box names the child and holds its call and result.
#[test]
fn the_plan_and_a_childs_calls_show_on_the_page() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "t1",
                "todo_write",
                json!({ "todos": [
                    { "content": "read the notes", "status": "in_progress" },
                    { "content": "sum them up", "status": "pending" },
                ] })
                .to_string(),
            ),
            ToolCallSpec::new(
                "a1",
                "agent",
                json!({
                    "description": "note reader",
                    "prompt": "Read notes.txt (CHILD-MARK).",
                })
                .to_string(),
            ),
        ]),
        Reply::tool_calls(vec![ToolCallSpec::new(
            "r1",
            "read_file",
            json!({ "path": "notes.txt" }).to_string(),
        )])
        .for_marker("CHILD-MARK"),
        Reply::text("the notes say hello").for_marker("CHILD-MARK"),
        Reply::text("Planned and read."),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(cmd.work_dir().join("notes.txt"), "hello from the notes\n").expect("write");
    let server = Server::start(&cmd, &[]);
    let browser = Browser::start(&chromium, &chromedriver);
    let b = &browser;
    b.goto(&server.url());
    b.type_into(&b.wait_element("#text"), "plan and read\u{E007}");
    b.wait_for("the answer", |b| {
        (b.try_texts(".msg.answer")?.concat() == "Planned and read.").then_some(())
    });
    assert_eq!(
        b.texts("#plan li"),
        vec!["read the notes".to_string(), "sum them up".to_string()]
    );
    let classes =
        b.script("return [...document.querySelectorAll('#plan li')].map((li) => li.className);");
    assert_eq!(classes, json!(["in_progress", "pending"]));
    // The child's box is inside the agent call's block, folded once done:
    // live, and again from the saved session once the page is reloaded.
    let child_box = |when: &str| {
        let child = b.wait_for("the child's box", |b| {
            let v = b.script(
                "const box = document.querySelector('.tool .subagent'); \
                 if (!box) return null; \
                 return { summary: box.querySelector('summary').textContent, open: box.open, \
                          calls: [...box.querySelectorAll('.tool .call')].map((c) => c.textContent), \
                          out: [...box.querySelectorAll('.tool .out')].map((c) => c.textContent).join('\\n'), \
                          under: box.parentElement.querySelector('.call').textContent };",
            );
            (!v.is_null()).then_some(v)
        });
        assert_eq!(
            child["summary"], "sub-agent \u{201c}note reader\u{201d}",
            "{when}: {child}"
        );
        assert_eq!(child["open"], false, "{when}: {child}");
        let calls = child["calls"].as_array().expect("the child's calls");
        assert_eq!(calls.len(), 1, "{when}: {child}");
        assert!(
            calls[0].as_str().unwrap().contains("notes.txt"),
            "{when}: {child}"
        );
        assert!(
            child["out"]
                .as_str()
                .unwrap()
                .contains("hello from the notes"),
            "{when}: {child}"
        );
        assert!(
            child["under"].as_str().unwrap().starts_with("▶ "),
            "{when}: {child}"
        );
    };
    child_box("live");
    b.refresh();
    b.wait_for("the saved answer", |b| {
        (b.try_texts(".msg.answer")?.concat() == "Planned and read.").then_some(())
    });
    child_box("saved");
    shot(b, "page-plan-and-child.png");
}
