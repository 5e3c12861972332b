//! The page of `buddy serve` in a real browser: Debian's headless Chromium,
//! driven over the W3C WebDriver protocol (chromedriver on loopback, spoken to
//! with the plain HTTP client of the serve tests), against `buddy serve` and
//! the fake provider. It clicks and types like a user and reads the DOM.
//!
//! Needs `chromium` and `chromedriver` (Debian: `chromium chromium-driver`;
//! `.ci/run` installs them). Without them the test fails under CI or as
//! root, and is skipped with a note otherwise.

mod support;

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
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            if Instant::now() > deadline {
                let log = self.try_texts("#log").unwrap_or_default().join("");
                panic!("waited {WAIT:?} for {what}; the page's log shows:\n{log}");
            }
            std::thread::sleep(POLL);
        }
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

    fn type_into(&self, el: &str, text: &str) {
        let r = self.wd.post_json(
            &self.path(&format!("/element/{el}/value")),
            &json!({ "text": text }),
        );
        self.value(r, "send keys");
    }
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

#[test]
fn a_prompt_an_approval_and_a_streamed_answer_in_chromium() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        return;
    };
    let started = Instant::now();
    let command = "expr from-the-browser-tool";
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
    let new = b.wait_element("#new");
    b.click(&new);
    // The new session is open once the input is usable.
    let text = b.wait_element("#text");
    b.wait_for("the input to be enabled", |b| {
        b.enabled(&text).then_some(())
    });
    b.wait_element(".sess.on");
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
        vec!["Always expr".to_string()]
    );
    assert_eq!(b.texts(".msg.user"), vec![PROMPT.to_string()]);
    let stop = b.wait_element("#stop");
    assert!(b.enabled(&stop), "Interrupt is offered while the run runs");
    b.click(&approve);

    // The command's output, then the whole answer, streamed into one block.
    let tools = b.wait_for("the tool's result", |b| {
        let t = b.try_texts(".tool")?;
        (t.len() >= 2).then_some(t)
    });
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(tools[0].starts_with("▶ run_shell"), "{tools:?}");
    assert!(!tools[1].starts_with('▶'), "{tools:?}");
    assert!(tools[1].contains("from-the-browser-tool"), "{tools:?}");
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

    // A fresh page lists the session; opening it shows the conversation.
    b.goto(&server.url());
    b.click(&b.wait_element(".sess"));
    let log = b.wait_for("the saved conversation", |b| {
        let log = b.try_texts("#log")?.concat();
        log.contains(ANSWER).then_some(log)
    });
    assert!(log.contains(PROMPT), "{log}");
    assert!(log.contains("from-the-browser-tool"), "{log}");
    eprintln!("the browser test took {:?}", started.elapsed());
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
    b.click(&b.wait_element("#new"));
    let text = b.wait_element("#text");
    b.wait_for("the input to be enabled", |b| {
        b.enabled(&text).then_some(())
    });
    b.wait_element(".sess.on");
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
    let tools = b.texts(".tool");
    assert_eq!(tools.len(), 3, "no result yet: {tools:?}");

    std::fs::write(&go, "").expect("create the file the command waits for");
    let tools = b.wait_for("the command's result", |b| {
        let t = b.try_texts(".tool")?;
        (t.len() == 4).then_some(t)
    });
    assert!(
        tools[3].contains("step1") && tools[3].contains("step2"),
        "{tools:?}"
    );
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
