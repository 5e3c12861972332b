//! Hooks: the user's own commands, run at points of the agent's work, with
//! the input and answers of Claude Code's hooks so existing scripts work.
//!
//! A hook gets one JSON object on stdin (`session_id`, `cwd`,
//! `hook_event_name`, and the event's own fields: `tool_name`, `tool_input`,
//! `tool_response`, `prompt`, …). Exit 0 lets things go on; its stdout may
//! hold a JSON decision (`{"decision":"block","reason":…}`, or
//! `hookSpecificOutput` with `permissionDecision: "deny"` or
//! `additionalContext`), and for `UserPromptSubmit` and `SessionStart` plain
//! stdout is context for the model. Exit 2 blocks, with stderr as the reason.
//! Any other exit, a hook that cannot start and one past its time limit are
//! a warning for the user that blocks nothing.
//!
//! This module owns running hooks (locally, `sh -c`, the environment shell
//! commands get, in a process group of their own that is killed at the time
//! limit or when the run is stopped; stdout and stderr each kept to
//! `OUTPUT_CAP`) and reading their answers. What a verdict does to a tool
//! call, a prompt or the end of a run is the loop's business (`mod.rs`; the
//! tool hooks around a call, `tool_round.rs`); the config shape is
//! `config::HooksSection`, turned into `Hooks` by `app`.

use super::emitter::Emitter;
use super::protocol::EventKind;
use crate::text::one_line;
use regex_lite::Regex;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// A hook's time limit when its entry names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes kept of each of a hook's output streams; the rest is read and
/// dropped, so a hook that floods cannot stall or grow buddy.
const OUTPUT_CAP: usize = 64 * 1024;
/// Characters of a hook's reason or added context that reach the model.
pub const TEXT_CAP: usize = 10_000;
/// Characters of a failing hook's stderr in its warning line.
const WARNING_CHARS: usize = 200;
/// After a hook exits, how long its pipes may stay open (a background child
/// it left holds them) before buddy stops reading.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// The points a hook can run at, named as in Claude Code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// Before a tool call runs; may block it.
    PreToolUse,
    /// After a tool call ran; a block's reason is added to its result.
    PostToolUse,
    /// Before a prompt goes to the model; may block it or add context.
    UserPromptSubmit,
    /// When the model answered and the run would end; a block makes it go on.
    Stop,
    /// A session's first prompt (new, resumed or after /new); adds context.
    SessionStart,
    /// An approval waits for the user.
    Notification,
}

impl HookEvent {
    pub const ALL: [HookEvent; 6] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SessionStart,
        HookEvent::Notification,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::Notification => "Notification",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Whether a block changes anything; for the others it is a warning.
    fn can_block(self) -> bool {
        !matches!(self, HookEvent::SessionStart | HookEvent::Notification)
    }

    /// Whether plain stdout (not a JSON answer) is context for the model.
    fn plain_stdout_is_context(self) -> bool {
        matches!(self, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
    }
}

/// One configured hook.
pub struct Hook {
    /// Anchored; `None` matches every tool (and every event without one).
    matcher: Option<Regex>,
    command: String,
    timeout: Duration,
}

impl Hook {
    fn matches(&self, tool: Option<&str>) -> bool {
        match (&self.matcher, tool) {
            (None, _) | (Some(_), None) => true,
            (Some(re), Some(name)) => re.is_match(name),
        }
    }
}

/// Every configured hook, by event, in config order.
#[derive(Default)]
pub struct Hooks {
    lists: [Vec<Hook>; 6],
}

/// A hook's matcher that is not a regular expression (quoted bounded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hooks.{event}: matcher `{matcher}` is not a regular expression: {detail}")]
pub struct BadMatcher {
    pub event: &'static str,
    pub matcher: String,
    pub detail: String,
}

impl Hooks {
    /// Adds a hook. `matcher` is a regular expression the whole tool name
    /// must match; empty or `*` matches all. A bad expression is an error
    /// sentence naming it.
    pub fn add(
        &mut self,
        event: HookEvent,
        matcher: &str,
        command: String,
        timeout: Option<Duration>,
    ) -> Result<(), BadMatcher> {
        let matcher = match matcher.trim() {
            "" | "*" => None,
            m => Some(Regex::new(&format!("^(?:{m})$")).map_err(|e| BadMatcher {
                event: event.name(),
                matcher: one_line(m, 60),
                detail: one_line(&e.to_string(), 200),
            })?),
        };
        self.lists[event.index()].push(Hook {
            matcher,
            command,
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
        });
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.lists.iter().all(Vec::is_empty)
    }

    pub fn count(&self, event: HookEvent) -> usize {
        self.lists[event.index()].len()
    }
}

/// What the hooks of one event decided together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on; `context` is text the hooks added for the model.
    Go { context: Option<String> },
    /// Stop what was about to happen (or, for `Stop`, go on) for `reason`.
    Block { reason: String },
}

impl Verdict {
    const GO: Verdict = Verdict::Go { context: None };
}

/// Where a hook fires: the call it is about, if any.
#[derive(Debug, Clone, Copy, Default)]
pub struct About<'a> {
    pub call_id: Option<&'a str>,
    pub tool: Option<&'a str>,
}

/// Runs the hooks for the agent: knows the session and working directory
/// every input names, and reports failures and blocks as events.
pub struct HookRunner {
    hooks: Hooks,
    cwd: PathBuf,
    session: Mutex<String>,
    emitter: Emitter,
}

impl HookRunner {
    pub fn new(hooks: Hooks, cwd: PathBuf, emitter: Emitter) -> HookRunner {
        HookRunner {
            hooks,
            cwd,
            session: Mutex::new(String::new()),
            emitter,
        }
    }

    /// Whether any hook is configured for `event`; the loop skips building
    /// an input when none is, so hooks cost nothing unless used.
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.count(event) > 0
    }

    /// The session id the next inputs carry.
    pub fn set_session(&self, id: &str) {
        let mut s = self.session.lock().unwrap_or_else(|p| p.into_inner());
        id.clone_into(&mut s);
    }

    fn session(&self) -> String {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs every hook of `event` that matches (at once), with `fields`
    /// added to the common input, and combines their answers: any block
    /// blocks (reasons joined), contexts are joined in config order.
    pub async fn fire(
        &self,
        event: HookEvent,
        about: About<'_>,
        fields: Map<String, Value>,
    ) -> Verdict {
        let list: Vec<&Hook> = self.hooks.lists[event.index()]
            .iter()
            .filter(|h| h.matches(about.tool))
            .collect();
        if list.is_empty() {
            return Verdict::GO;
        }
        let mut input = Map::new();
        input.insert("session_id".into(), Value::String(self.session()));
        input.insert("cwd".into(), Value::String(self.cwd.display().to_string()));
        input.insert("hook_event_name".into(), event.name().into());
        input.extend(fields);
        let body = Value::Object(input).to_string().into_bytes();
        let ran =
            futures_util::future::join_all(list.iter().map(|h| run(h, &body, &self.cwd))).await;
        let mut reasons = Vec::new();
        let mut contexts = Vec::new();
        for (hook, ran) in list.iter().zip(ran) {
            let answer = answer(event, ran);
            let who = || format!("{} hook `{}`", event.name(), one_line(&hook.command, 60));
            for note in answer.notes {
                self.warn(format!("{}: {note}", who())).await;
            }
            if let Some(reason) = answer.block {
                if event.can_block() {
                    reasons.push(reason);
                } else {
                    self.warn(format!("{}: {}", who(), one_line(&reason, WARNING_CHARS)))
                        .await;
                }
            }
            contexts.extend(answer.context);
        }
        if !reasons.is_empty() {
            let reason = crate::redact::text(&reasons.join("\n")).into_owned();
            self.emitter
                .emit(EventKind::HookBlocked {
                    hook_event: event.name().to_string(),
                    call_id: about.call_id.map(str::to_string),
                    tool: about.tool.map(str::to_string),
                    reason: reason.clone(),
                })
                .await;
            return Verdict::Block { reason };
        }
        let context = (!contexts.is_empty())
            .then(|| crate::redact::text(&contexts.join("\n\n")).into_owned());
        Verdict::Go { context }
    }

    async fn warn(&self, message: String) {
        self.emitter.emit(EventKind::Warning { message }).await;
    }
}

/// How one hook process ended.
#[derive(Debug)]
enum Ran {
    Exited {
        code: Option<i32>,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    TimedOut(Duration),
    NotStarted(std::io::Error),
}

/// Kills a hook's process group when dropped while armed: at the time
/// limit, and when the run that awaited the hook is stopped.
struct GroupGuard(Option<rustix::process::Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // The group is the hook's own (process_group(0) below), so this
            // reaches it and whatever it started, nothing else.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::Kill);
        }
    }
}

async fn run(hook: &Hook, input: &[u8], cwd: &Path) -> Ran {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(cwd)
        // Claude Code's name for the project directory, which hook
        // scripts written for it use; ours beside it.
        .env("CLAUDE_PROJECT_DIR", cwd)
        .env("BUDDY_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::host::scrub(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Ran::NotStarted(e),
    };
    let mut guard = GroupGuard(
        child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32)),
    );
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let status = {
        let io = async {
            let write = async {
                if let Some(mut s) = stdin {
                    // A hook that never reads its input is fine: the broken
                    // pipe is ignored, and closing it is the end of input.
                    let _ = s.write_all(input).await;
                }
            };
            tokio::join!(
                write,
                read_capped(stdout, &mut out),
                read_capped(stderr, &mut err)
            );
        };
        tokio::pin!(io);
        let deadline = tokio::time::sleep(hook.timeout);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::from_secs(365 * 86_400));
        tokio::pin!(grace);
        let mut io_done = false;
        let mut status = None;
        loop {
            tokio::select! {
                () = &mut io, if !io_done => {
                    io_done = true;
                    if status.is_some() {
                        break;
                    }
                }
                s = child.wait(), if status.is_none() => {
                    status = Some(s);
                    if io_done {
                        break;
                    }
                    grace.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
                }
                () = &mut grace, if status.is_some() => break,
                () = &mut deadline => return Ran::TimedOut(hook.timeout),
            }
        }
        status
    };
    // It ended on its own: what it left running in the background is its
    // business, as with any command the user runs.
    guard.0 = None;
    match status {
        Some(Ok(s)) => Ran::Exited {
            code: s.code(),
            stdout: out,
            stderr: err,
        },
        Some(Err(e)) => Ran::NotStarted(e),
        None => Ran::TimedOut(hook.timeout),
    }
}

/// Reads `pipe` to its end, keeping the first `OUTPUT_CAP` bytes.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, into: &mut Vec<u8>) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(into.len()).min(n);
                into.extend_from_slice(&buf[..room]);
            }
        }
    }
}

/// One hook's answer, read from how it ended.
#[derive(Debug, Default, PartialEq, Eq)]
struct Answer {
    block: Option<String>,
    context: Option<String>,
    /// Lines for the user: failures, and a JSON answer's `systemMessage`.
    notes: Vec<String>,
}

fn answer(event: HookEvent, ran: Ran) -> Answer {
    let mut a = Answer::default();
    match ran {
        Ran::NotStarted(e) => a.notes.push(format!("could not run: {e}")),
        Ran::TimedOut(t) => a.notes.push(format!(
            "timed out after {} s and was stopped (timeout_secs)",
            t.as_secs_f64()
        )),
        Ran::Exited {
            code: Some(0),
            stdout,
            ..
        } => read_stdout(event, &String::from_utf8_lossy(&stdout), &mut a),
        Ran::Exited {
            code: Some(2),
            stderr,
            ..
        } => {
            let reason = String::from_utf8_lossy(&stderr).trim().to_string();
            a.block = Some(if reason.is_empty() {
                "blocked by a hook (exit status 2, no reason given)".to_string()
            } else {
                crate::text::clip(&reason, TEXT_CAP).into_owned()
            });
        }
        Ran::Exited { code, stderr, .. } => {
            let how = match code {
                Some(c) => format!("exit status {c}"),
                None => "killed by a signal".to_string(),
            };
            let said = one_line(&String::from_utf8_lossy(&stderr), WARNING_CHARS);
            a.notes.push(if said.is_empty() {
                format!("failed ({how})")
            } else {
                format!("failed ({how}): {said}")
            });
        }
    }
    a
}

/// Exit 0: stdout is a JSON answer, or plain text.
fn read_stdout(event: HookEvent, stdout: &str, a: &mut Answer) {
    let text = stdout.trim();
    let json = text
        .starts_with('{')
        .then(|| serde_json::from_str::<Map<String, Value>>(text).ok())
        .flatten();
    let Some(o) = json else {
        if event.plain_stdout_is_context() && !text.is_empty() {
            a.context = Some(crate::text::clip(text, TEXT_CAP).into_owned());
        }
        return;
    };
    let string = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| crate::text::clip(s, TEXT_CAP).into_owned())
    };
    let specific = o.get("hookSpecificOutput").and_then(Value::as_object);
    let denied = specific
        .and_then(|s| s.get("permissionDecision"))
        .and_then(Value::as_str)
        == Some("deny");
    if o.get("decision").and_then(Value::as_str) == Some("block") {
        a.block = Some(string(o.get("reason")).unwrap_or_else(|| "blocked by a hook".into()));
    } else if denied {
        a.block = Some(
            string(specific.and_then(|s| s.get("permissionDecisionReason")))
                .unwrap_or_else(|| "denied by a hook".into()),
        );
    } else if o.get("continue").and_then(Value::as_bool) == Some(false) {
        a.block = Some(string(o.get("stopReason")).unwrap_or_else(|| "stopped by a hook".into()));
    }
    a.context = string(specific.and_then(|s| s.get("additionalContext")));
    if let Some(m) = string(o.get("systemMessage")) {
        a.notes.push(one_line(&m, WARNING_CHARS));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran::Exited {
            code: Some(code),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn exit_two_blocks_with_stderr_and_other_failures_only_warn() {
        let a = answer(HookEvent::PreToolUse, exited(2, "", "no rm here\n"));
        assert_eq!(a.block.as_deref(), Some("no rm here"));
        let a = answer(HookEvent::PreToolUse, exited(1, "", "oops\x1b[2J\nmore"));
        assert_eq!(a.block, None);
        assert_eq!(a.notes, ["failed (exit status 1): oops␛[2J more"]);
    }

    #[test]
    fn json_answers_block_deny_and_add_context() {
        let a = answer(
            HookEvent::PreToolUse,
            exited(0, r#"{"decision":"block","reason":"not today"}"#, ""),
        );
        assert_eq!(a.block.as_deref(), Some("not today"));
        let a = answer(
            HookEvent::PreToolUse,
            exited(
                0,
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"policy"}}"#,
                "",
            ),
        );
        assert_eq!(a.block.as_deref(), Some("policy"));
        let a = answer(
            HookEvent::UserPromptSubmit,
            exited(
                0,
                r#"{"hookSpecificOutput":{"additionalContext":"branch: main"},"systemMessage":"hi"}"#,
                "",
            ),
        );
        assert_eq!(a.block, None);
        assert_eq!(a.context.as_deref(), Some("branch: main"));
        assert_eq!(a.notes, ["hi"]);
    }

    #[test]
    fn plain_stdout_is_context_only_where_claude_code_makes_it_so() {
        let a = answer(
            HookEvent::UserPromptSubmit,
            exited(0, "today is Monday\n", ""),
        );
        assert_eq!(a.context.as_deref(), Some("today is Monday"));
        let a = answer(HookEvent::PreToolUse, exited(0, "chatter\n", ""));
        assert_eq!(a, Answer::default());
    }

    #[test]
    fn matchers_are_anchored_and_empty_or_star_match_all() {
        let mut hooks = Hooks::default();
        hooks
            .add(
                HookEvent::PreToolUse,
                "run_shell|write_file",
                "true".into(),
                None,
            )
            .unwrap();
        hooks
            .add(HookEvent::PreToolUse, "*", "true".into(), None)
            .unwrap();
        let [a, b] = &hooks.lists[0][..] else {
            panic!("two hooks")
        };
        assert!(a.matches(Some("run_shell")));
        assert!(!a.matches(Some("run_shell_x")));
        assert!(b.matches(Some("anything")));
        let err = hooks
            .add(HookEvent::PostToolUse, "(", "true".into(), None)
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("hooks.PostToolUse: matcher `(`"),
            "{err}"
        );
    }
}
