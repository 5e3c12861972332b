//! `run_shell`: runs a command with `sh -c` on the target, after the denylist
//! (`denylist/`, applied by the approval gate) and (when configured) the
//! user's approval. Output is captured with fixed-size
//! buffers; a timeout or a cancelled call kills the command's whole process group.
//! While it runs, its latest lines go to the call's progress sink (`live.rs`):
//! read from the pipes as they come when run directly (this host, SSH, a
//! container), from the pane job's output files when run in tmux.

use super::approval::{Approval, ApprovalRequest};
use super::capture::BoundedCapture;
use super::live::{self, LiveTail};
use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput, Truncation};
use crate::host::remote_job::RemoteJob;
use crate::host::sandbox::Sandbox;
use crate::host::tmux::{Job, Stream, TmuxTarget};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 16_000;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// After the command exits, how long to keep reading output that background
/// children may still be writing into the inherited pipes.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct ShellOptions {
    pub default_timeout: Duration,
    pub max_output_chars: usize,
    /// Commands go to a shared tmux pane, and the `wait` argument is offered.
    pub tmux: bool,
    /// Confines commands run directly on this host (not in the pane, not on
    /// remote targets).
    pub sandbox: Option<Arc<Sandbox>>,
}

pub struct ShellTool {
    opts: ShellOptions,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// The shell command to run.
    command: String,
    /// Time limit in seconds, or a duration such as "30s" or "10m". Default 120 s.
    #[serde(default)]
    #[schemars(schema_with = "number_or_string")]
    timeout: Option<Value>,
    /// true (default): wait until it finishes, up to the timeout, then interrupt it. false: start it and return at once (follow up with capture-pane). A duration such as "30s": wait at most that long, then return the output so far and leave it running.
    // Offered only when commands go to the tmux pane (`definition`).
    #[serde(default)]
    #[schemars(schema_with = "boolean_or_string")]
    wait: Option<Value>,
    /// true: start the command as a background job and return at once with its job id and what it printed so far. For dev servers, watchers and anything that keeps running; follow it with shell_output, send input with shell_write, stop it with shell_kill. No timeout applies; the job is stopped when the session ends.
    #[serde(default)]
    background: bool,
}

/// Seconds, or a duration such as `30s`.
pub(crate) fn number_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["number", "string"]})
}

/// `true`, `false`, or a duration.
fn boolean_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["boolean", "string"]})
}

/// How long a tmux-backed call waits for its command.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wait {
    /// Until it ends, bounded by the timeout.
    Finish,
    /// Not at all: dispatch and return.
    Dispatch,
    /// At most this long, then report what is there and leave it running.
    For(Duration),
}

fn parse_wait(value: Option<&Value>) -> Result<Wait, ToolError> {
    match value {
        None | Some(Value::Bool(true)) | Some(Value::Null) => Ok(Wait::Finish),
        Some(Value::Bool(false)) => Ok(Wait::Dispatch),
        Some(Value::String(s)) if s == "true" => Ok(Wait::Finish),
        Some(Value::String(s)) if s == "false" => Ok(Wait::Dispatch),
        Some(v) => parse_duration(v).map(Wait::For).map_err(|_| {
            ToolError::InvalidArguments(format!(
                "invalid wait {v}: use true, false or a duration such as \"30s\""
            ))
        }),
    }
}

impl ShellTool {
    pub fn new(opts: ShellOptions) -> Self {
        ShellTool { opts }
    }
}

/// Longest time limit a call may ask for; longer requests are held to it.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Parses a timeout given as seconds (number or digits) or as "500ms", "30s",
/// "10m", "1h"; at most `MAX_TIMEOUT`. Not one of those is the model's
/// mistake (invalid arguments).
pub fn parse_duration(value: &Value) -> Result<Duration, ToolError> {
    parse_duration_unbounded(value).map(|d| d.min(MAX_TIMEOUT))
}

fn parse_duration_unbounded(value: &Value) -> Result<Duration, ToolError> {
    let bad = || {
        ToolError::InvalidArguments(format!(
            "invalid timeout {value}: use seconds or a duration like \"30s\" or \"10m\""
        ))
    };
    match value {
        Value::Number(n) => n
            .as_f64()
            .filter(|s| *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s.min(MAX_TIMEOUT.as_secs_f64())).ok())
            .ok_or_else(bad),
        Value::String(s) => {
            let s = s.trim();
            let split = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            let (num, unit) = s.split_at(split);
            let n: f64 = num.parse().map_err(|_| bad())?;
            let secs = match unit.trim() {
                "" | "s" | "sec" | "secs" => n,
                "ms" => n / 1000.0,
                "m" | "min" | "mins" => n * 60.0,
                "h" => n * 3600.0,
                _ => return Err(bad()),
            };
            if secs > 0.0 {
                Duration::try_from_secs_f64(secs.min(MAX_TIMEOUT.as_secs_f64())).map_err(|_| bad())
            } else {
                Err(bad())
            }
        }
        _ => Err(bad()),
    }
}

#[async_trait]
impl Tool for ShellTool {
    fn name(&self) -> &'static str {
        "run_shell"
    }

    fn definition(&self) -> ToolDefinition {
        let mut params = crate::tools::schema::of::<Args>();
        if !self.opts.tmux {
            // `wait` means nothing without the pane: not offered.
            if let Some(props) = params.get_mut("properties").and_then(|p| p.as_object_mut()) {
                props.remove("wait");
            }
            return ToolDefinition::function(
                "run_shell",
                "Run a shell command (sh -c) in the working directory and return its exit code, stdout and stderr. Commands run non-interactively with no stdin; long output is truncated. For a dev server, a watcher or anything that keeps running, pass background: true and follow the job with shell_output, shell_write and shell_kill.",
                params,
            );
        }
        ToolDefinition::function(
            "run_shell",
            "Run a shell command in the shared tmux pane, where the user can watch, and return its exact exit code, stdout and stderr. Each command runs in a subshell of the pane's shell that starts in the working directory (cd and export do not carry over; chain with &&). One command at a time: a new one is refused while the last still runs. For full-screen or interactive programs use send-keys, and capture-pane to read the screen. Long output is truncated. A command that keeps running (a dev server, a watcher) goes with background: true: it then runs beside the pane as a job to follow with shell_output, shell_write and shell_kill.",
            params,
        )
    }

    fn max_output_chars(&self) -> usize {
        self.opts.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        if args.command.trim().is_empty() {
            return Err(ToolError::InvalidArguments("`command` is empty".into()));
        }
        let timeout = match &args.timeout {
            Some(v) => parse_duration(v)?,
            None => self.opts.default_timeout,
        };
        let wait = parse_wait(args.wait.as_ref())?;
        if args.background && wait != Wait::Finish {
            return Err(ToolError::InvalidArguments(
                "`wait` and `background` do not go together; leave `wait` out".into(),
            ));
        }
        // A background job runs beside the shared pane, on the host behind
        // it, so its output can be kept and its stdin written.
        let pane = ctx.pane.as_deref().filter(|_| !args.background);
        let target = match (&ctx.pane, args.background) {
            (Some(p), true) => p.base().clone(),
            _ => ctx.target.clone(),
        };
        if pane.is_none() && wait != Wait::Finish {
            return Err(ToolError::InvalidArguments(
                "`wait` needs tmux-backed execution, which is off; leave it out".into(),
            ));
        }
        let sandbox = match &self.opts.sandbox {
            Some(sb) if pane.is_none() && target.is_local() => Some(sb.as_ref()),
            _ => None,
        };
        // A sandbox the user asked for that cannot be enforced runs nothing:
        // nobody is asked about a command that will not run.
        if let Some(why) = sandbox.and_then(|sb| sb.unavailable()) {
            return Err(ToolError::Failed(format!(
                "command not run: the {} sandbox is configured but cannot be enforced here ({why}); set [tools] sandbox = \"off\" to run commands unconfined",
                sandbox.map_or("", |sb| sb.policy().mode.as_str())
            )));
        }
        let request = ApprovalRequest {
            call_id: ctx.call_id.clone(),
            tool: "run_shell".into(),
            actor: ctx.target.actor(),
            command: args.command.clone(),
            // The one difference a person approving it should know of.
            detail: args.background.then(|| {
                "(a background job: it keeps running until stopped or the session ends)".to_string()
            }),
            read_only: false,
        };
        match ctx.approver.approve(request).await {
            Approval::Approved => {}
            Approval::Denied { reason } => {
                return Ok(ToolOutput::text(format!("command not run: {reason}")))
            }
            Approval::Refused { reason } => {
                return Err(ToolError::Failed(format!("command refused: {reason}")))
            }
        }
        if args.background {
            return start_background(&args.command, ctx, target, sandbox).await;
        }
        // In an editor that offers terminals, this host's commands run in
        // one of them: decided and confined as above, shown where the user is.
        if let (Some(term), None, true) = (&ctx.terminal, pane, ctx.target.is_local()) {
            return run_in_editor(
                term.as_ref(),
                &args.command,
                ctx,
                sandbox,
                timeout,
                &self.opts,
            )
            .await;
        }
        match pane {
            Some(pane) => {
                run_in_pane(
                    pane,
                    &args.command,
                    wait,
                    timeout,
                    self.opts.max_output_chars,
                    LiveTail::new(ctx.progress.clone()),
                )
                .await
            }
            None => {
                run(
                    &args.command,
                    ctx,
                    sandbox,
                    timeout,
                    self.opts.max_output_chars,
                )
                .await
            }
        }
    }
}

/// How long a new background job is given to say something before
/// `run_shell` returns (less when it prints or ends sooner).
const FIRST_LOOK: Duration = Duration::from_millis(300);
/// What of a new job's first output `run_shell` shows; the rest waits for
/// `shell_output`.
const FIRST_LOOK_BYTES: usize = 2000;

/// Starts `command` (already approved) as one of the session's background
/// jobs on `target`, confined by `sandbox` as a foreground command would be.
async fn start_background(
    command: &str,
    ctx: &ToolContext,
    target: Arc<dyn crate::host::Target>,
    sandbox: Option<&Sandbox>,
) -> Result<ToolOutput, ToolError> {
    // As in `run`: a remote command outlives its local client unless stopped there.
    let remote = (!target.is_local()).then(|| RemoteJob::new(target.clone()));
    let script = match &remote {
        Some(job) => job.wrap_keeping_stdin(command),
        None => command.to_string(),
    };
    let process = match sandbox {
        Some(sb) => sb.command(&script, &ctx.cwd),
        None => target.command(&script, &ctx.cwd),
    };
    let job = ctx
        .jobs
        .start(command, process, remote)
        .map_err(ToolError::Failed)?;
    let first = super::jobs::tools::report(&job, FIRST_LOOK, FIRST_LOOK_BYTES).await;
    Ok(ToolOutput::text(format!(
        "started background job {id} (job_id \"{id}\"). Read its output with shell_output, send input with shell_write, stop it with shell_kill; it is stopped when the session ends.\n{first}",
        id = job.id
    )))
}

/// Runs `command` in the editor's terminal (`terminal.rs`) and reports its
/// exit and output as a local run does.
async fn run_in_editor(
    term: &dyn super::terminal::EditorTerminal,
    command: &str,
    ctx: &ToolContext,
    sandbox: Option<&Sandbox>,
    timeout: Duration,
    opts: &ShellOptions,
) -> Result<ToolOutput, ToolError> {
    use super::terminal::{command_line, result_text, TerminalCommand};
    let run = TerminalCommand {
        call_id: &ctx.call_id,
        argv: command_line(command, sandbox, crate::host::hidden_env()),
        cwd: &ctx.cwd,
        env: Vec::new(),
        // Characters are at most four bytes: room for the whole limit.
        output_bytes: (opts.max_output_chars as u64).saturating_mul(4),
        timeout,
    };
    let done = term
        .run(run)
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    Ok(ToolOutput::text(result_text(&done, timeout)))
}

/// Runs `command` in the shared tmux pane and reports its exact output and exit
/// code, or what there is so far when the wait ends first.
async fn run_in_pane(
    pane: &TmuxTarget,
    command: &str,
    wait: Wait,
    timeout: Duration,
    limit: usize,
    mut live: LiveTail,
) -> Result<ToolOutput, ToolError> {
    let job = pane
        .start(command)
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    // A cancelled call (Ctrl-C, /kill) interrupts what it typed.
    let mut guard = pane.interrupt_on_drop();
    let where_ = format!("tmux pane {} (session {})", pane.pane(), pane.session());
    let limit_wait = match wait {
        Wait::Dispatch => {
            guard.disarm();
            return Ok(ToolOutput::text(format!(
                "started in {where_}; it is running in the background. Use capture-pane to see its output (with `delay` to poll), send-keys C-c to stop it. run_shell refuses new commands until it finishes."
            )));
        }
        Wait::Finish => timeout,
        Wait::For(d) => d.min(timeout),
    };
    let mut finished = wait_showing_output(pane, &job, limit_wait, &mut live).await;
    let mut header = None;
    if !finished {
        if wait == Wait::Finish || limit_wait == timeout {
            pane.interrupt().await;
            finished = pane
                .poll_done(&job, Duration::from_secs(3), Duration::from_millis(50))
                .await;
            header = Some(format!(
                "timed out after {} s; interrupted with Ctrl-C",
                fmt_secs(timeout)
            ));
        } else {
            header = Some(format!(
                "still running after {} s in {where_}; output so far is below. Check on it with capture-pane, stop it with send-keys C-c; run_shell refuses new commands until it finishes.",
                fmt_secs(limit_wait)
            ));
        }
    }
    guard.disarm();
    let mut out = BoundedCapture::new(limit);
    let mut err = BoundedCapture::new(limit);
    let code = pane
        .collect(&job, finished, &mut |stream, bytes| match stream {
            Stream::Stdout => out.push(bytes),
            Stream::Stderr => err.push(bytes),
        })
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    let header = match (header, code) {
        (Some(h), Some(c)) if finished => format!("{h}\nexit code: {c}"),
        (Some(h), _) => h,
        (None, Some(c)) => format!("exit code: {c}"),
        (None, None) => "exit code: unknown (the command's status was not recorded)".to_string(),
    };
    Ok(render_result(&header, &out, &err, limit))
}

/// Waits for the pane job like `TmuxTarget::wait`, meanwhile feeding `live`
/// what the job's output files gained (their ends only, so a flood costs a
/// small read per tick; on a remote base, one round trip a second).
async fn wait_showing_output(
    pane: &TmuxTarget,
    job: &Job,
    limit: Duration,
    live: &mut LiveTail,
) -> bool {
    if !live.is_active() {
        return pane.wait(job, limit).await;
    }
    let mut follow = pane.follow(job);
    let waiting = pane.wait(job, limit);
    tokio::pin!(waiting);
    let mut tick = live::ticker();
    loop {
        tokio::select! {
            done = &mut waiting => return done,
            _ = tick.tick() => {
                follow.read_new(&mut |bytes, skipped| {
                    if skipped {
                        live.break_line();
                    }
                    live.push(bytes);
                }).await;
                live.send_due();
            }
        }
    }
}

async fn run(
    command: &str,
    ctx: &ToolContext,
    sandbox: Option<&Sandbox>,
    timeout: Duration,
    limit: usize,
) -> Result<ToolOutput, ToolError> {
    // A remote command outlives its local client unless stopped on the far side.
    let mut remote = (!ctx.target.is_local()).then(|| RemoteJob::new(ctx.target.clone()));
    let script = match &remote {
        Some(job) => job.wrap(command),
        None => command.to_string(),
    };
    let mut command = match sandbox {
        Some(sb) => sb.command(&script, &ctx.cwd),
        None => ctx.target.command(&script, &ctx.cwd),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolError::Failed(format!("cannot start the command: {e}")))?;
    // Kills the whole group if this future is dropped (cancellation) or times out.
    let group = child.id().map(|pid| GroupKiller(pid as i32));
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    // Each stream may use the whole limit; they share it when the result is rendered.
    let mut out = BoundedCapture::new(limit);
    let mut err = BoundedCapture::new(limit);
    let mut out_buf = vec![0u8; 16 * 1024];
    let mut err_buf = vec![0u8; 8 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut live = LiveTail::new(ctx.progress.clone());
    let mut tick = live::ticker();
    let grace = tokio::time::sleep(Duration::from_secs(365 * 86_400));
    tokio::pin!(grace);
    let mut status = None;
    let mut timed_out = false;
    loop {
        if stdout.is_none() && stderr.is_none() && status.is_some() {
            break;
        }
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf), if stdout.is_some() => match n {
                Some(n) => {
                    out.push(&out_buf[..n]);
                    live.push(&out_buf[..n]);
                    live.send_due();
                }
                None => stdout = None,
            },
            n = read_some(&mut stderr, &mut err_buf), if stderr.is_some() => match n {
                Some(n) => {
                    err.push(&err_buf[..n]);
                    live.push(&err_buf[..n]);
                    live.send_due();
                }
                None => stderr = None,
            },
            _ = tick.tick(), if live.is_dirty() && status.is_none() => live.send_due(),
            s = child.wait(), if status.is_none() => {
                let s = s.map_err(|e| {
                    ToolError::Failed(format!("cannot wait for the command: {e}"))
                })?;
                status = Some(s);
                grace.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
            }
            _ = &mut grace, if status.is_some() => break,
            _ = &mut deadline => {
                timed_out = true;
                break;
            }
        }
    }
    if let Some(job) = &mut remote {
        if timed_out {
            job.stop(Duration::from_secs(3)).await;
        } else {
            job.finished();
        }
    }
    if let Some(g) = &group {
        g.kill();
    }
    let header = if timed_out {
        format!(
            "timed out after {} s; the command was killed",
            fmt_secs(timeout)
        )
    } else {
        use std::os::unix::process::ExitStatusExt;
        match (
            status.and_then(|s| s.code()),
            status.and_then(|s| s.signal()),
        ) {
            (Some(code), _) => format!("exit code: {code}"),
            (None, Some(sig)) => format!("exit code: none (killed by signal {sig})"),
            (None, None) => "exit code: none".to_string(),
        }
    };
    let mut result = render_result(&header, &out, &err, limit);
    // Landlock refusals read as EACCES, the system-call filter's as EPERM:
    // say it was the sandbox, so the model neither blames file modes nor
    // tries to work around them.
    if let Some(sb) = sandbox {
        if result.text.contains("Permission denied")
            || result.text.contains("Operation not permitted")
        {
            result.text.push('\n');
            result
                .text
                .push_str(&crate::host::sandbox::refusal_note(sb.policy()));
        }
    }
    Ok(result)
}

/// Room kept for the header, section labels and omission lines.
const FRAMING_RESERVE: usize = 200;

/// Lays out the result: header, stdout, and stderr when there was any. The two
/// streams share the character budget; stderr gets at least a quarter of it when
/// both overflow, and whatever stdout leaves unused otherwise.
fn render_result(
    header: &str,
    out: &BoundedCapture,
    err: &BoundedCapture,
    limit: usize,
) -> ToolOutput {
    let budget = limit.saturating_sub(FRAMING_RESERVE).max(limit / 2);
    let out_total = out.total_chars() as usize;
    let err_total = err.total_chars() as usize;
    let err_budget = err_total.min((budget / 4).max(budget.saturating_sub(out_total)));
    let out_budget = budget - err_budget;
    let (out_text, out_cut) = out.render_within(out_budget);
    let (err_text, err_cut) = err.render_within(err_budget);
    let mut text = format!("{header}\nstdout:\n");
    if out.is_empty() {
        text.push_str("(empty)\n");
    } else {
        text.push_str(&out_text);
        if !out_text.ends_with('\n') {
            text.push('\n');
        }
    }
    if !err.is_empty() {
        text.push_str("stderr:\n");
        text.push_str(&err_text);
    }
    let text = text.trim_end().to_string();
    let truncated = (out_cut.is_some() || err_cut.is_some()).then(|| {
        // Everything shown counts as kept; what the captures dropped is added back
        // to give the size the whole result would have had.
        let kept = text.chars().count();
        let dropped = |cut: Option<Truncation>| cut.map_or(0, |t| t.total.saturating_sub(t.kept));
        Truncation {
            kept,
            total: kept + dropped(out_cut) + dropped(err_cut),
        }
    });
    ToolOutput { text, truncated }
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s:.1}")
    }
}

/// Reads one chunk; `None` at end of stream or on error.
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let p = pipe.as_mut()?;
    match p.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// Owns a process group id and kills the group when asked or dropped.
struct GroupKiller(i32);

impl GroupKiller {
    fn kill(&self) {
        // The group we created for this command; gone already is fine.
        if let Some(group) = rustix::process::Pid::from_raw(self.0) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::Kill);
        }
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::approval::Approver;
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Instant;

    struct Deny;
    #[async_trait]
    impl Approver for Deny {
        async fn approve(&self, _r: ApprovalRequest) -> Approval {
            Approval::Denied {
                reason: "the user said no".into(),
            }
        }
    }

    fn tool(_confirm: bool, limit: usize) -> ShellTool {
        ShellTool::new(ShellOptions {
            default_timeout: Duration::from_secs(10),
            max_output_chars: limit,
            tmux: false,
            sandbox: None,
        })
    }

    fn ctx(approver: Arc<dyn Approver>) -> ToolContext {
        ToolContext::local(std::env::temp_dir(), approver)
    }

    async fn run_cmd(t: &ShellTool, args: Value) -> Result<ToolOutput, ToolError> {
        t.execute(args, &ctx(Arc::new(crate::tools::approval::AlwaysApprove)))
            .await
    }

    #[tokio::test]
    async fn reports_exit_code_stdout_and_stderr() {
        let out = run_cmd(
            &tool(false, 1000),
            json!({"command": "echo out; echo err >&2; exit 3"}),
        )
        .await
        .unwrap();
        assert_eq!(out.text, "exit code: 3\nstdout:\nout\nstderr:\nerr");
        assert_eq!(out.truncated, None);
        let out = run_cmd(&tool(false, 1000), json!({"command": "true"}))
            .await
            .unwrap();
        assert_eq!(out.text, "exit code: 0\nstdout:\n(empty)");
        let out = run_cmd(&tool(false, 1000), json!({"command": "kill -TERM $$"}))
            .await
            .unwrap();
        assert!(
            out.text
                .starts_with("exit code: none (killed by signal 15)"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group_quickly() {
        let t0 = Instant::now();
        let out = run_cmd(
            &tool(false, 1000),
            json!({"command": "echo before; sleep 30 & sleep 30", "timeout": "300ms"}),
        )
        .await
        .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(
            out.text.starts_with("timed out after 0.3 s"),
            "{}",
            out.text
        );
        assert!(out.text.contains("before"));
    }

    #[tokio::test]
    async fn an_unenforceable_sandbox_runs_nothing_and_says_why() {
        use crate::host::sandbox::{Mode, Policy};
        let dir = std::env::temp_dir().join(format!("buddy-shell-sbx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let policy = Policy::for_workdir(Mode::ReadOnly, &dir, true);
        let t = ShellTool::new(ShellOptions {
            sandbox: Some(Arc::new(Sandbox::unenforceable(policy, "no Landlock"))),
            ..tool(false, 1000).opts
        });
        let c = ToolContext::local(dir.clone(), Arc::new(crate::tools::approval::AlwaysApprove));
        let err = t
            .execute(json!({"command": "touch ran"}), &c)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("command not run: the read-only sandbox"),
            "{err}"
        );
        assert!(err.contains("no Landlock") && !err.contains('\n'), "{err}");
        assert!(!dir.join("ran").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn background_children_do_not_hold_the_result() {
        let t0 = Instant::now();
        let out = run_cmd(
            &tool(false, 1000),
            json!({"command": "sleep 20 & echo started"}),
        )
        .await
        .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(out.text.starts_with("exit code: 0"), "{}", out.text);
    }

    struct Refuse;
    #[async_trait]
    impl Approver for Refuse {
        async fn approve(&self, _r: ApprovalRequest) -> Approval {
            Approval::Refused {
                reason: "it matches the denylist pattern `rm -rf /`".into(),
            }
        }
    }

    #[tokio::test]
    async fn a_refusal_is_an_error_and_nothing_runs() {
        let err = tool(false, 1000)
            .execute(json!({"command": "rm -rf /"}), &ctx(Arc::new(Refuse)))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("refused"), "{err}");
        assert!(err.to_string().contains("denylist"), "{err}");
    }

    #[tokio::test]
    async fn denied_approval_is_reported_and_nothing_runs() {
        let dir = std::env::temp_dir().join(format!("buddy-shell-deny-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = ToolContext::local(dir.clone(), Arc::new(Deny));
        let out = tool(true, 1000)
            .execute(json!({"command": "touch x"}), &c)
            .await
            .unwrap();
        assert_eq!(out.text, "command not run: the user said no");
        assert!(!dir.join("x").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An editor's terminal that records what it is asked to run.
    #[derive(Default)]
    struct FakeTerminal {
        asked: std::sync::Mutex<Vec<Vec<String>>>,
    }

    #[async_trait]
    impl crate::tools::terminal::EditorTerminal for FakeTerminal {
        async fn run(
            &self,
            run: crate::tools::terminal::TerminalCommand<'_>,
        ) -> Result<crate::tools::terminal::TerminalRun, crate::tools::terminal::TerminalError>
        {
            self.asked.lock().unwrap().push(run.argv);
            Ok(crate::tools::terminal::TerminalRun {
                output: "from the editor\n".into(),
                truncated: false,
                exit_code: Some(0),
                signal: None,
                timed_out: false,
            })
        }
    }

    #[tokio::test]
    async fn with_an_editors_terminal_commands_run_there_only_when_approved() {
        let dir = std::env::temp_dir().join(format!("buddy-shell-term-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let term = Arc::new(FakeTerminal::default());
        let mut c = ToolContext::local(dir.clone(), Arc::new(Deny));
        c.terminal = Some(term.clone());
        let out = tool(false, 1000)
            .execute(json!({"command": "touch x"}), &c)
            .await
            .unwrap();
        assert_eq!(out.text, "command not run: the user said no");
        assert!(term.asked.lock().unwrap().is_empty());
        c.approver = Arc::new(crate::tools::approval::AlwaysApprove);
        let out = tool(false, 1000)
            .execute(json!({"command": "touch x"}), &c)
            .await
            .unwrap();
        assert_eq!(out.text, "exit code: 0\noutput:\nfrom the editor");
        let asked = term.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0][asked[0].len() - 3..], ["sh", "-c", "touch x"]);
        // It ran there, not here.
        assert!(!dir.join("x").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn huge_output_is_bounded_and_counted() {
        let out = run_cmd(
            &tool(false, 2000),
            json!({"command": "head -c 30000000 /dev/zero | tr '\\0' a"}),
        )
        .await
        .unwrap();
        let cut = out.truncated.expect("cut");
        assert_eq!(cut.kept, out.text.chars().count());
        assert!(out.text.chars().count() <= 2000, "{}", out.text.len());
        // The whole result: every captured character plus a little framing.
        assert!(
            (30_000_000..30_000_100).contains(&cut.total),
            "{}",
            cut.total
        );
        assert!(out.text.starts_with("exit code: 0\nstdout:\naaa"));
        assert!(out.text.contains("characters omitted"));
    }

    #[tokio::test]
    async fn stdout_gets_the_room_stderr_leaves_and_both_keep_their_ends() {
        let out = run_cmd(
            &tool(false, 1000),
            json!({"command": "seq 1 5000; seq 1 3000 >&2"}),
        )
        .await
        .unwrap();
        let text = &out.text;
        assert!(text.chars().count() <= 1000, "{}", text.len());
        let (stdout, stderr) = text.split_once("\nstderr:\n").expect(text);
        assert!(
            stdout.starts_with("exit code: 0\nstdout:\n1\n2\n"),
            "{text}"
        );
        assert!(stdout.ends_with("4999\n5000"), "{text}");
        assert!(
            stderr.starts_with("1\n2\n") && stderr.ends_with("2999\n3000"),
            "{text}"
        );
        // Stderr overflowed too, so it was held to a quarter of the budget.
        assert!(stderr.len() < 300, "{stderr}");

        let only_out = run_cmd(&tool(false, 1000), json!({"command": "seq 1 5000"}))
            .await
            .unwrap();
        assert!(only_out.text.chars().count() > 800, "{}", only_out.text);
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_command() {
        let dir = std::env::temp_dir().join(format!("buddy-shell-cancel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = ToolContext::local(dir.clone(), Arc::new(crate::tools::approval::AlwaysApprove));
        let t = tool(false, 1000);
        let call = t.execute(
            json!({"command": "sleep 30 & echo $! > bg.pid; sleep 30"}),
            &c,
        );
        // The call is abandoned (as a cancelled turn would) while the command runs.
        let r = tokio::time::timeout(Duration::from_millis(500), call).await;
        assert!(r.is_err());
        let pid = std::fs::read_to_string(dir.join("bg.pid")).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        let t0 = Instant::now();
        // Gone, or a zombie waiting for its new parent to reap it.
        let alive = || {
            std::fs::read_to_string(&stat)
                .map(|s| {
                    let state = s.rsplit(')').next().unwrap_or("").trim_start();
                    !state.starts_with('Z')
                })
                .unwrap_or(false)
        };
        while alive() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "background sleep {pid} survived cancellation");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn background_returns_at_once_with_a_job_id_and_its_first_output() {
        let c = ctx(Arc::new(crate::tools::approval::AlwaysApprove));
        let t0 = Instant::now();
        let out = tool(false, 1000)
            .execute(
                json!({"command": "echo up; exec sleep 30", "background": true}),
                &c,
            )
            .await
            .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(
            out.text
                .starts_with("started background job 1 (job_id \"1\")"),
            "{}",
            out.text
        );
        // What it printed within the first look (none on a machine too
        // busy to start it that soon).
        assert!(
            out.text.ends_with("job 1: running\noutput:\nup")
                || out.text.ends_with("job 1: running\n(no new output)"),
            "{}",
            out.text
        );
        assert!(c.jobs.get("1").is_some_and(|j| j.ended().is_none()));
        c.jobs.stop_all().await;
        let err = tool(false, 1000)
            .execute(
                json!({"command": "true", "background": true, "wait": false}),
                &c,
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("do not go together"), "{err}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration(&json!(5)), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration(&json!("30s")), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration(&json!("10m")), Ok(Duration::from_secs(600)));
        assert_eq!(
            parse_duration(&json!("250ms")),
            Ok(Duration::from_millis(250))
        );
        assert!(parse_duration(&json!("soon")).is_err());
        assert!(parse_duration(&json!(-1)).is_err());
        assert!(parse_duration(&json!("0s")).is_err());
        assert_eq!(parse_duration(&json!(1e30)), Ok(MAX_TIMEOUT));
        assert_eq!(parse_duration(&json!("99999h")), Ok(MAX_TIMEOUT));
    }
}
