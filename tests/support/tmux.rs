//! Runs `buddy` in a real tmux pane, on a tmux server of its own, so REPL tests
//! type keys (`send-keys`) and read the screen (`capture-pane`) as a person would.

use super::{BuddyCmd, TempDir};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub const WIDTH: u32 = 100;
pub const HEIGHT: u32 = 30;
/// How long a screen condition may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(15);

pub struct Tmux {
    dir: TempDir,
    socket: PathBuf,
    /// The session buddy runs in.
    session: String,
    /// The test's `$HOME`, the server's own: the shells of the panes buddy
    /// opens in it read that home's (empty) rc files, not the machine
    /// user's (whose `pyenv rehash` hung every pane once its lock was left).
    home: Option<OsString>,
}

fn quote(s: &std::ffi::OsStr) -> String {
    format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"))
}

impl Tmux {
    /// Starts `buddy ARGS` in the isolated environment of `cmd`, wrapped in a
    /// shell script that records the terminal settings before and after and
    /// buddy's exit code (in `tty-before`, `tty-after` and `exit-code` in the
    /// work dir), then keeps the pane open.
    pub fn start(cmd: &BuddyCmd, args: &[&str]) -> Tmux {
        Tmux::start_in(cmd, args, "buddy-test", None)
    }

    /// Like [`Tmux::start`], in a session and window of the given names.
    pub fn start_in(cmd: &BuddyCmd, args: &[&str], session: &str, window: Option<&str>) -> Tmux {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let command = cmd.command_with(&args);
        let dir = TempDir::new("tmux");
        let socket = dir.join("sock");
        let mut script = String::from("#!/bin/sh\n");
        if let Some(cwd) = command.get_current_dir() {
            script.push_str(&format!("cd {}\n", quote(cwd.as_os_str())));
        }
        for (key, value) in command.get_envs() {
            match value {
                Some(v) => {
                    script.push_str(&format!("export {}={}\n", key.to_string_lossy(), quote(v)))
                }
                // Inside the pane, buddy is inside this test's tmux server.
                None if key == "TMUX" || key == "TMUX_PANE" => {}
                None => script.push_str(&format!("unset {}\n", key.to_string_lossy())),
            }
        }
        script.push_str("stty -a > tty-before\n");
        script.push_str(&quote(command.get_program()));
        for a in command.get_args() {
            script.push(' ');
            script.push_str(&quote(a));
        }
        // The exit code is written last: its file appearing means all is recorded.
        script.push_str("\ncode=$?\nstty -a > tty-after\necho $code > exit-code.tmp && mv exit-code.tmp exit-code\nexec sleep 600\n");
        let path = dir.join("run.sh");
        std::fs::write(&path, script).expect("write tmux script");
        let home = command
            .get_envs()
            .find(|(k, _)| *k == "HOME")
            .and_then(|(_, v)| v.map(OsString::from));
        let t = Tmux {
            dir,
            socket,
            session: session.to_string(),
            home,
        };
        let mut new = vec!["new-session", "-d", "-s", session];
        if let Some(w) = window {
            new.extend_from_slice(&["-n", w]);
        }
        let (width, height) = (WIDTH.to_string(), HEIGHT.to_string());
        new.extend_from_slice(&[
            "-x",
            &width,
            "-y",
            &height,
            "sh",
            path.to_str().expect("utf-8 path"),
        ]);
        t.tmux(&new);
        t
    }

    /// Runs a tmux command against this test's server.
    pub fn tmux_cmd(&self, args: &[&str]) -> String {
        self.tmux(args)
    }

    fn tmux(&self, args: &[&str]) -> String {
        let mut tmux = Command::new("tmux");
        tmux.arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX");
        if let Some(home) = &self.home {
            tmux.env("HOME", home);
        }
        let out = tmux.output().expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends tmux key names (`Enter`, `C-c`, `M-Enter`, `Up`, `Tab`…).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.session.as_str()];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", &self.session, "-l", text]);
    }

    /// Types `text` and presses Enter.
    pub fn line(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    /// The visible screen.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.session])
    }

    /// Waits until the screen satisfies `check`, returning it; fails the test
    /// with the screen after `WAIT`.
    pub fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let seen = super::wait::poll_until(WAIT, || {
            let screen = self.screen();
            check(&screen).then_some(screen)
        });
        seen.unwrap_or_else(|| {
            panic!(
                "timed out waiting for {what}; the screen:\n{}",
                self.screen()
            )
        })
    }

    /// Waits until the screen contains `text`.
    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?}"), |s| s.contains(text))
    }

    /// Waits until buddy's REPL has no task running (its status line, which
    /// begins `[task N]`, is gone). The answer is on screen before the run
    /// ends (its journal is synced first), and the commands that need an
    /// idle agent (`/rewind`, `/fork`, `/model`, `/session`, `/clear`) are
    /// refused until then.
    pub fn wait_idle(&self) {
        self.wait_for("no task running", |s| !s.contains("[task "));
    }

    /// Waits until every one of `texts` is on the screen at once. A large
    /// frame reaches tmux in more than one read, so a capture can hold its
    /// first lines only: wait for each line a test reads, not the first.
    pub fn wait_texts(&self, texts: &[&str]) -> String {
        self.wait_for(&format!("{texts:?}"), |s| {
            texts.iter().all(|t| s.contains(t))
        })
    }

    /// In buddy's REPL: opens `/rewind`, checks the newest turn is `prompt`,
    /// picks it and returns the screen that says what a rewind to before it
    /// does; leaves the choice list (code, conversation, both) open.
    pub fn open_newest_turn(&self, prompt: &str) -> String {
        self.wait_idle();
        self.line("/rewind");
        self.wait_texts(&["rewind to before which turn?", prompt]);
        self.keys(&["Enter"]);
        self.wait_texts(&["restore code and conversation", "Esc to go back)"])
    }

    /// The process id of the program the pane runs (the pane's shell
    /// starts it as its one child).
    pub fn program_pid(&self) -> u32 {
        let shell = self
            .tmux(&["display-message", "-p", "-t", &self.session, "#{pane_pid}"])
            .trim()
            .to_string();
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .expect("the pane shell's children");
        children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the pane shell {shell} runs no program"))
    }

    /// Waits until the pane has left the alternate screen. tmux reads the
    /// program's last output on its own schedule, possibly after the
    /// program has exited.
    pub fn wait_main_screen(&self) {
        super::wait::wait_for("the main screen", WAIT, || {
            let on = self.tmux(&[
                "display-message",
                "-p",
                "-t",
                &self.session,
                "#{alternate_on}",
            ]);
            on.trim() == "0"
        });
    }

    /// The line the cursor is on.
    pub fn cursor_line(&self) -> String {
        let y: usize = self
            .tmux(&["display-message", "-p", "-t", &self.session, "#{cursor_y}"])
            .trim()
            .parse()
            .expect("cursor_y");
        self.screen().lines().nth(y).unwrap_or("").to_string()
    }

    /// Waits for buddy to exit; returns its exit code.
    pub fn wait_exit(&self, work_dir: &std::path::Path) -> i32 {
        let file = work_dir.join("exit-code");
        let code = super::wait::poll_until(WAIT, || std::fs::read_to_string(&file).ok());
        match code {
            Some(text) => text.trim().parse().expect("exit code"),
            None => panic!("buddy did not exit; the screen:\n{}", self.screen()),
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        let _ = &self.dir;
    }
}
