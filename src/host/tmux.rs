//! Shell work in a shared tmux pane on any base target (this host, SSH, a
//! container). A person attached to the managed session sees each command typed
//! and running; buddy still gets the exact output and exit code, because the
//! typed line tees stdout and stderr into files and records `$?` in a private
//! directory on the target, then signals a `tmux wait-for` channel. Nothing is
//! scraped from the screen except by `capture-pane`, which asks for exactly that.

use super::error::PaneOp;
use super::{shell_quote, HostError, Target};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// The one window buddy manages in its session.
pub const WINDOW: &str = "buddy-shared";

/// Interactive shells whose syntax the typed wrapper is written in.
const POSIX_SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox", "yash", "loksh", "oksh",
];
/// Shells that need the wrapper handed to `sh -c`.
const OTHER_SHELLS: &[&str] = &["fish", "tcsh", "csh", "nu", "elvish", "xonsh", "pwsh"];

pub struct TmuxTarget {
    base: Arc<dyn Target>,
    session: String,
    pane: String,
    /// Private directory on the target for command output and exit codes.
    dir: String,
    /// Where every command starts (`cd` in its subshell), whatever the pane's
    /// shell was moved to: buddy's working directory on this host, the
    /// directory remote commands start in elsewhere. File tools resolve
    /// relative paths against the same one.
    workdir: String,
    /// Makes wait-for channel names unique to this buddy process.
    tag: String,
    next: AtomicU64,
    running: Mutex<Option<Job>>,
}

/// The growing stdout and stderr files of a running pane job, and how far
/// each has been read.
pub struct OutputFollower {
    files: [(String, u64); 2],
    /// On a remote base: the target that reads the files there, and when it
    /// last did (a look is a round trip, so it is made at most every
    /// `REMOTE_EVERY`).
    remote: Option<(Arc<dyn Target>, Option<Instant>)>,
}

/// The most read from each file per look: the end of what it gained. A
/// command that printed more since the last look has its middle skipped.
const FOLLOW_WINDOW: u64 = 8 * 1024;
/// Least time between two looks at a remote job's files.
const REMOTE_EVERY: Duration = Duration::from_secs(1);

impl OutputFollower {
    /// Hands `sink` what each file gained since the last call (stdout's,
    /// then stderr's), with `true` when bytes before it were skipped; a
    /// skipped-into line is left out. Files not there yet are not an error,
    /// nor is a remote look that fails (the result does not depend on it).
    pub async fn read_new(&mut self, sink: &mut (dyn FnMut(&[u8], bool) + Send)) {
        if self.remote.is_some() {
            return self.read_remote(sink).await;
        }
        use tokio::io::AsyncSeekExt;
        for (path, offset) in &mut self.files {
            let Ok(mut f) = tokio::fs::File::open(&*path).await else {
                continue;
            };
            let Ok(len) = f.metadata().await.map(|m| m.len()) else {
                continue;
            };
            if len <= *offset {
                continue;
            }
            let from = (*offset).max(len.saturating_sub(FOLLOW_WINDOW));
            if f.seek(std::io::SeekFrom::Start(from)).await.is_err() {
                continue;
            }
            let mut buf = vec![0u8; (len - from) as usize];
            if f.read_exact(&mut buf).await.is_err() {
                continue;
            }
            deliver(&buf, from > *offset, sink);
            *offset = len;
        }
    }

    /// One round trip: both sizes on a header line, then the new end of
    /// each file.
    async fn read_remote(&mut self, sink: &mut (dyn FnMut(&[u8], bool) + Send)) {
        let Some((target, last)) = &mut self.remote else {
            return;
        };
        if last.is_some_and(|t| t.elapsed() < REMOTE_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        let mut script = String::from("set --");
        for (path, _) in &self.files {
            script.push_str(&format!(
                "; n=$(wc -c <{p} 2>/dev/null) || n=0; set -- \"$@\" $n",
                p = shell_quote(path)
            ));
        }
        script.push_str("; echo \"$1 $2\"");
        for (i, (path, offset)) in self.files.iter().enumerate() {
            script.push_str(&format!(
                "; n=${i1}; s=$(( n - {w} > {offset} ? n - {w} : {offset} )); \
                 [ \"$n\" -gt \"$s\" ] && tail -c +$((s + 1)) {p} 2>/dev/null | head -c $((n - s))",
                i1 = i + 1,
                w = FOLLOW_WINDOW,
                p = shell_quote(path),
            ));
        }
        script.push_str("; exit 0");
        let mut cmd = target.command(&script, Path::new("/"));
        cmd.stdin(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let Ok(Ok(out)) = tokio::time::timeout(Duration::from_secs(5), cmd.output()).await else {
            return;
        };
        let Some(nl) = out.stdout.iter().position(|&b| b == b'\n') else {
            return;
        };
        let header = String::from_utf8_lossy(&out.stdout[..nl]).to_string();
        let sizes: Vec<u64> = header
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        if sizes.len() != 2 {
            return;
        }
        let mut rest = &out.stdout[nl + 1..];
        for ((_, offset), len) in self.files.iter_mut().zip(sizes) {
            if len <= *offset {
                continue;
            }
            let from = (*offset).max(len.saturating_sub(FOLLOW_WINDOW));
            let take = ((len - from) as usize).min(rest.len());
            deliver(&rest[..take], from > *offset, sink);
            rest = &rest[take..];
            *offset = len;
        }
    }
}

/// Hands `buf` to `sink`, without the line it starts inside when bytes
/// before it were skipped.
fn deliver(buf: &[u8], skipped: bool, sink: &mut (dyn FnMut(&[u8], bool) + Send)) {
    let start = match buf.iter().position(|&b| b == b'\n') {
        Some(i) if skipped => i + 1,
        _ => 0,
    };
    sink(&buf[start..], skipped);
}

/// A command typed into the pane.
#[derive(Debug, Clone)]
pub struct Job {
    n: u64,
    command: String,
    started: Instant,
}

/// Which stream a chunk of captured output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What to capture from a pane.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    pub pane: Option<String>,
    /// First and last line (0 is the top of the visible screen, negative lines
    /// are scrollback, `-` means its start or end).
    pub start: Option<String>,
    pub end: Option<String>,
    pub join_wrapped: bool,
    pub alternate: bool,
    pub delay: Option<Duration>,
}

/// The default session name for a working directory: `buddy-<name>-<hash>`,
/// the directory's name (as tmux accepts it, for a readable `tmux attach`)
/// and six hex digits of a hash of the whole path, so two projects that share
/// a name never share a pane and type into each other's commands. `cwd`
/// should be canonical, so every way of spelling the path names one session.
pub fn default_session_name(cwd: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let base = cwd
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let clean = match clean.trim_matches('-') {
        "" => "root",
        c => c,
    };
    format!(
        "buddy-{clean}-{:06x}",
        path_hash(cwd.as_os_str().as_bytes())
    )
}

/// 24 bits of FNV-1a: stable across builds and platforms (std's hasher is
/// not promised to be), which a name users type and scripts keep needs.
fn path_hash(bytes: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ((h ^ (h >> 32)) & 0xff_ffff) as u32
}

/// Session names tmux would misread (`:` and `.` separate targets).
pub fn check_session_name(name: &str) -> Result<(), HostError> {
    if name.is_empty()
        || name.starts_with('-')
        || name.contains([':', '.', '\n', '\''])
        || name.chars().any(char::is_control)
    {
        return Err(HostError::InvalidSessionName(name.to_string()));
    }
    Ok(())
}

/// Pane names the tools accept: tmux target syntax, never an option.
pub fn check_pane_name(name: &str) -> Result<(), HostError> {
    let ok = !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "%@$=:._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(HostError::InvalidPane(name.to_string()))
    }
}

/// Checks a `send-keys` key name: tmux's named keys and modifier forms such as
/// `C-c`, `M-x`, `C-M-Left`, or one character.
pub fn check_key(key: &str) -> Result<(), HostError> {
    const NAMED: &[&str] = &[
        "Enter", "Escape", "Tab", "BTab", "Space", "BSpace", "Up", "Down", "Left", "Right", "Home",
        "End", "PageUp", "PageDown", "PPage", "NPage", "PgUp", "PgDn", "Insert", "Delete", "IC",
        "DC", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12", "KP0",
        "KP1", "KP2", "KP3", "KP4", "KP5", "KP6", "KP7", "KP8", "KP9", "KPEnter",
    ];
    let mut rest = key;
    while let Some(r) = ["C-", "M-", "S-"].iter().find_map(|p| rest.strip_prefix(p)) {
        if r.is_empty() {
            break;
        }
        rest = r;
    }
    let single = rest.chars().count() == 1 && !rest.chars().any(char::is_control);
    if single || NAMED.iter().any(|n| n.eq_ignore_ascii_case(rest)) {
        Ok(())
    } else {
        Err(HostError::UnknownKey(key.to_string()))
    }
}

impl TmuxTarget {
    /// Finds or creates `session` with its `buddy-shared` window on `base`, and
    /// a private directory for command results. Refuses to run from inside the
    /// managed pane itself, where typing commands would type into buddy.
    /// `workdir` is buddy's working directory, where commands start on this
    /// host; a remote base's own starting directory is used instead, the one
    /// its file operations see.
    pub async fn open(
        base: Arc<dyn Target>,
        session: &str,
        workdir: &Path,
    ) -> Result<TmuxTarget, HostError> {
        check_session_name(session)?;
        let s = shell_quote(&format!("={session}"));
        let w = shell_quote(&format!("={session}:{WINDOW}"));
        let here = if base.is_local() {
            crate::process::var("TMUX_PANE").filter(|p| !p.is_empty())
        } else {
            None
        };
        let here_check = match &here {
            Some(p) => format!(
                "here=$(tmux display-message -p -t {} '#{{session_name}}:#{{window_name}}' 2>/dev/null) || here=\n\
                 if [ \"$here\" = {} ]; then echo inside; exit 0; fi\n",
                shell_quote(p),
                shell_quote(&format!("{session}:{WINDOW}"))
            ),
            None => String::new(),
        };
        // Locally the script starts in `workdir`; a remote one starts where
        // that target's commands (and relative file paths) always do.
        let wd = if base.is_local() {
            shell_quote(&workdir.to_string_lossy())
        } else {
            "\"$(pwd)\"".to_string()
        };
        let script = format!(
            "command -v tmux >/dev/null 2>&1 || {{ echo no-tmux; exit 0; }}\n\
             {here_check}\
             wd={wd}\n\
             if ! tmux has-session -t {s} 2>/dev/null; then\n\
               tmux new-session -d -s {name} -n {WINDOW} -c \"$wd\" -x 200 -y 50 || exit 1\n\
               echo created\n\
             elif ! tmux list-windows -t {s} -F '#{{window_name}}' | grep -qx {WINDOW}; then\n\
               tmux new-window -d -t {s} -n {WINDOW} -c \"$wd\" || exit 1\n\
               echo created\n\
             fi\n\
             tmux display-message -p -t {w} 'pane #{{pane_id}}' || exit 1\n\
             d=$(mktemp -d \"${{TMPDIR:-/tmp}}/buddy-tmux.XXXXXX\") || exit 1\n\
             echo \"dir $d\"\n\
             echo \"cwd $wd\"\n",
            name = shell_quote(session),
        );
        let (code, out, err) = super::run_script(base.as_ref(), &script, workdir, None)
            .await
            .map_err(|source| HostError::TmuxStart {
                actor: base.actor(),
                source,
            })?;
        let out = String::from_utf8_lossy(&out);
        if out.lines().any(|l| l == "no-tmux") {
            return Err(HostError::TmuxNotInstalled {
                actor: base.actor(),
            });
        }
        if out.lines().any(|l| l == "inside") {
            return Err(HostError::InsideManagedPane {
                session: session.to_string(),
                window: WINDOW,
            });
        }
        let field = |key: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(key).map(str::to_string))
        };
        let workdir = if base.is_local() {
            Some(workdir.to_string_lossy().to_string())
        } else {
            field("cwd ")
        };
        let (Some(pane), Some(dir), Some(workdir), Some(0)) =
            (field("pane "), field("dir "), workdir, code)
        else {
            let err = String::from_utf8_lossy(&err);
            let why = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no reason given");
            return Err(HostError::TmuxSetup {
                session: session.to_string(),
                actor: base.actor(),
                detail: why.trim().to_string(),
            });
        };
        let target = TmuxTarget {
            base,
            session: session.to_string(),
            pane,
            dir,
            workdir,
            tag: format!(
                "buddy-{}-{:x}",
                std::process::id(),
                crate::clock::now_unix() & 0xffff
            ),
            next: AtomicU64::new(1),
            running: Mutex::new(None),
        };
        if out.lines().any(|l| l == "created") {
            target.await_prompt().await;
        }
        Ok(target)
    }

    /// Keys sent before a new shell draws its prompt can land before it; wait
    /// (briefly) until the pane shows something.
    async fn await_prompt(&self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            let out = self
                .tmux(&["capture-pane", "-p", "-t", &self.pane])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .await;
            if matches!(&out, Ok(o) if o.stdout.iter().any(|b| !b.is_ascii_whitespace())) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn pane(&self) -> &str {
        &self.pane
    }

    pub fn base(&self) -> &Arc<dyn Target> {
        &self.base
    }

    /// The directory every command starts in.
    pub fn workdir(&self) -> &str {
        &self.workdir
    }

    /// The command that attaches to the managed session, to be run the way
    /// the target runs interactive commands.
    pub fn attach_command(&self) -> String {
        format!("tmux attach -t {}", shell_quote(&self.session))
    }

    fn tmux(&self, args: &[&str]) -> Command {
        let mut argv = vec!["tmux"];
        argv.extend_from_slice(args);
        self.base.exec(&argv)
    }

    fn channel(&self, n: u64) -> String {
        format!("{}-{n}", self.tag)
    }

    fn file(&self, n: u64, ext: &str) -> String {
        format!("{}/{n}.{ext}", self.dir)
    }

    /// What runs the command file `file` inside the job's subshell, once it
    /// is in the working directory. Sourced, so the pane shell's aliases and
    /// functions apply as they would to a typed line. The one place a wrapper
    /// (a sandbox) would go: `WRAPPER sh FILE` instead.
    fn run_line(&self, file: &str) -> String {
        format!(". {}", shell_quote(file))
    }

    /// The job script the pane sources. The command lives in a file of its
    /// own, so a `#`, an unclosed quote or a syntax error in it cannot swallow
    /// the bookkeeping, and nothing in it is typed (no history expansion of
    /// `!`, no line editing of control characters, no length limit):
    ///
    /// - first, erase the short line that was typed to start it (the caller
    ///   puts `printf` of the cursor movement above this text) and show
    ///   `$ COMMAND` instead, made visible and clipped;
    /// - the command in a subshell that starts with `cd` to the working
    ///   directory, its stdout and stderr each teed to the screen and to a
    ///   file, its status written once it ends;
    /// - `[exit N]` on the screen when it failed, a done marker, then the
    ///   channel signalled (by a tmux client off the terminal: on one, it
    ///   would need terminfo, which bare containers lack).
    ///
    /// All of it runs in a subshell that survives Ctrl-C, as do the tees, so
    /// an interrupted command still reports (code 130) and nothing is left
    /// set in the user's shell.
    fn job_script(&self, n: u64, command: &str) -> String {
        let q = |ext: &str| shell_quote(&self.file(n, ext));
        format!(
            "( trap : INT; printf '%s\\n' {shown}; \
             {{ {{ trap : INT; ( cd -- {wd} || exit; {run} ); echo $? >{c}; }} 2>&1 >&3 3>&- | (trap '' INT; exec tee {e}) >&2 3>&-; }} 3>&1 | (trap '' INT; exec tee {o}); \
             read -r s <{c}; [ \"${{s:-0}}\" = 0 ] || printf '[exit %s]\\n' \"$s\"; \
             : >{d}; tmux wait-for -S {chan} </dev/null )\n",
            shown = shown_command(command),
            wd = shell_quote(&self.workdir),
            run = self.run_line(&self.file(n, "sh")),
            c = q("c"),
            d = q("d"),
            e = q("e"),
            o = q("o"),
            chan = self.channel(n),
        )
    }

    /// Starts `command` in the pane: writes it and its job script to the
    /// target, and types one short line that sources the script. Refuses,
    /// with a message for the model, when an earlier command is still
    /// running or another program holds the pane (after a second's grace:
    /// one just interrupted takes a moment to finish). One round trip.
    pub async fn start(&self, command: &str) -> Result<Job, HostError> {
        let previous = self.running_job();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let prev_check = match &previous {
            Some(job) => format!(
                "j=0\nwhile [ ! -e {} ]; do\n\
                   j=$((j+1)); [ $j -ge 20 ] && {{ echo running; exit 0; }}\n\
                   sleep 0.05 2>/dev/null || sleep 1\n\
                 done\n",
                shell_quote(&self.file(job.n, "d"))
            ),
            None => String::new(),
        };
        let posix = POSIX_SHELLS.join("|");
        let other = OTHER_SHELLS.join("|");
        let pane = shell_quote(&self.pane);
        let job_file = self.file(n, "run");
        // The typed line is short and starts with a space (kept out of the
        // history by most shells). The job script erases the rows it took
        // (the cursor is on the row after them), deleting those lines: an
        // erase from the screen's top corner would push the screen into the
        // scrollback, where tmux keeps it. A shell with another syntax gets
        // the script run by sh. The line is typed once the prompt is drawn
        // (the cursor has left column 0): typed earlier, the terminal echoes
        // it where the prompt will go and the shell shows it again after the
        // prompt, so one copy would stay on the screen. An empty prompt
        // costs a short wait.
        let direct = format!(" . {}", shell_quote(&job_file));
        let via_sh = format!(" sh {}", shell_quote(&job_file));
        let script = format!(
            "{prev_check}\
             umask 077\n\
             cat > {cmd_file} || exit 1\n\
             i=0\n\
             while :; do\n\
               info=$(tmux display-message -p -t {pane} '#{{pane_in_mode}} #{{cursor_x}} #{{pane_width}} #{{pane_current_command}}') || exit 1\n\
               set -- $info\n\
               mode=$1; x=$2; w=$3; cur=${{4:-}}; cur=${{cur#-}}; cur=${{cur##*/}}\n\
               case \"$cur\" in\n\
                 {posix}) line={direct_q}; [ \"$x\" -gt 0 ] || [ $i -ge 6 ] && break ;;\n\
                 {other}) line={via_sh_q}; [ \"$x\" -gt 0 ] || [ $i -ge 6 ] && break ;;\n\
               esac\n\
               i=$((i+1)); [ $i -ge 10 ] && {{ echo \"busy $cur\"; exit 0; }}\n\
               sleep 0.05 2>/dev/null || sleep 1\n\
             done\n\
             [ \"$mode\" = 1 ] && tmux send-keys -t {pane} -X cancel\n\
             rows=$(( (x + ${{#line}} - 1) / (w > 0 ? w : 1) + 1 ))\n\
             printf '%s\\n%s' \"printf '\\\\033[${{rows}}A\\\\r\\\\033[${{rows}}M'\" {job} > {job_q} || exit 1\n\
             tmux send-keys -t {pane} -l -- \"$line\" || exit 1\n\
             tmux send-keys -t {pane} Enter || exit 1\n\
             echo typed\n",
            cmd_file = shell_quote(&self.file(n, "sh")),
            direct_q = shell_quote(&direct),
            via_sh_q = shell_quote(&via_sh),
            job = shell_quote(&self.job_script(n, command)),
            job_q = shell_quote(&job_file),
        );
        let (code, out, err) = super::run_script(
            self.base.as_ref(),
            &script,
            Path::new("/"),
            Some(command.as_bytes()),
        )
        .await
        .map_err(|source| HostError::Io {
            context: "cannot reach tmux",
            source,
        })?;
        let out = String::from_utf8_lossy(&out);
        let out = out.trim();
        if out == "running" {
            let (what, age) = previous
                .map(|j| (one_line(&j.command), j.started.elapsed().as_secs()))
                .unwrap_or_default();
            return Err(HostError::PreviousRunning {
                command: what,
                age_secs: age,
                pane: self.pane.clone(),
            });
        }
        if let Some(program) = out.strip_prefix("busy ") {
            return Err(HostError::PaneBusy {
                pane: self.pane.clone(),
                program: program.to_string(),
            });
        }
        if code != Some(0) || out != "typed" {
            let err = String::from_utf8_lossy(&err);
            return Err(HostError::Pane {
                op: PaneOp::Type,
                pane: self.pane.clone(),
                detail: last_line(&err),
            });
        }
        let job = Job {
            n,
            command: command.to_string(),
            started: Instant::now(),
        };
        if let Ok(mut r) = self.running.lock() {
            *r = Some(job.clone());
        }
        Ok(job)
    }

    fn running_job(&self) -> Option<Job> {
        self.running.lock().ok().and_then(|r| r.clone())
    }

    /// Waits until `job` ends or `limit` passes; true when it ended.
    pub async fn wait(&self, job: &Job, limit: Duration) -> bool {
        let mut waiter = self.tmux(&["wait-for", &self.channel(job.n)]);
        waiter
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let Ok(mut child) = waiter.spawn() else {
            return self.poll_done(job, limit, Duration::from_millis(50)).await;
        };
        let deadline = Instant::now() + limit;
        // The signal is the fast path; should it never come (the tmux client
        // in the pane failed), the done marker still ends the wait, checked
        // every half second from a second after the start.
        let fallback = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let left = deadline.saturating_duration_since(Instant::now());
            // Only a seen marker ends the wait; otherwise the signal or the
            // limit still can.
            if !self.poll_done(job, left, Duration::from_millis(500)).await {
                std::future::pending::<()>().await;
            }
            true
        };
        tokio::select! {
            status = child.wait() => match status {
                Ok(s) if s.success() => true,
                // The waiter itself failed: only the marker can tell.
                _ => self.poll_done(job, deadline.saturating_duration_since(Instant::now()), Duration::from_millis(50)).await,
            },
            done = fallback => done,
            _ = tokio::time::sleep(limit) => false,
        }
    }

    /// Waits for the job's done marker. For a second wait on the same job: the
    /// channel's one signal may have gone to an earlier waiter that was killed
    /// but not yet noticed by the tmux server.
    pub async fn poll_done(&self, job: &Job, limit: Duration, every: Duration) -> bool {
        let marker = self.file(job.n, "d");
        if self.base.is_local() {
            let deadline = Instant::now() + limit;
            loop {
                if Path::new(&marker).exists() {
                    return true;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                tokio::time::sleep(every).await;
            }
        }
        // Remote: one loop on the far side rather than a process per check,
        // bounded there too, since killing our client would not stop it.
        let rounds = (limit.as_millis() / every.as_millis().max(1)).max(1);
        let script = format!(
            // Also gone once the output file is: the job was collected (or
            // the pane's directory removed), and nobody waits any more.
            "i=0; while [ ! -e {m} ]; do [ -e {o} ] || exit 1; i=$((i+1)); [ $i -gt {rounds} ] && exit 1; sleep {s} 2>/dev/null || sleep 1; done",
            m = shell_quote(&marker),
            o = shell_quote(&self.file(job.n, "o")),
            s = format_args!("{:.2}", every.as_secs_f64()),
        );
        let child = self
            .base
            .command(&script, Path::new("/"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn();
        let Ok(mut child) = child else {
            return false;
        };
        matches!(
            tokio::time::timeout(limit + every, child.wait()).await,
            Ok(Ok(status)) if status.success()
        )
    }

    /// Sends Ctrl-C to the pane.
    pub async fn interrupt(&self) {
        let _ = self
            .tmux(&["send-keys", "-t", &self.pane, "C-c"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }

    /// A guard that interrupts the pane if dropped before `disarm` (the call was
    /// cancelled while the command ran).
    pub fn interrupt_on_drop(&self) -> InterruptGuard {
        InterruptGuard {
            command: Some(self.tmux(&["send-keys", "-t", &self.pane, "C-c"])),
        }
    }

    /// Streams what `job` has written so far into `sink` (stdout, then stderr)
    /// and returns its exit code once it has one. With `finished`, the job's
    /// files are removed and the pane is free again.
    pub async fn collect(
        &self,
        job: &Job,
        finished: bool,
        sink: &mut (dyn FnMut(Stream, &[u8]) + Send),
    ) -> Result<Option<i32>, HostError> {
        let (c, o, e) = (
            shell_quote(&self.file(job.n, "c")),
            shell_quote(&self.file(job.n, "o")),
            shell_quote(&self.file(job.n, "e")),
        );
        // One round trip: a header line with the sizes, then both files.
        let cleanup = if finished {
            format!(
                "rm -f {c} {o} {e} {} {}\n",
                shell_quote(&self.file(job.n, "sh")),
                shell_quote(&self.file(job.n, "d"))
            )
        } else {
            String::new()
        };
        let script = format!(
            "code=$(cat {c} 2>/dev/null)\n\
             no=$(wc -c <{o} 2>/dev/null || echo 0); ne=$(wc -c <{e} 2>/dev/null || echo 0)\n\
             echo \"${{code:--}} $no $ne\"\n\
             head -c \"$no\" {o} 2>/dev/null; head -c \"$ne\" {e} 2>/dev/null\n\
             {cleanup}"
        );
        let mut child = self
            .base
            .command(&script, Path::new("/"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| HostError::Io {
                context: "cannot read the command's output",
                source,
            })?;
        let mut pipe = child.stdout.take().ok_or(HostError::NoOutput)?;
        let mut header = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        let mut code = None;
        let mut left: [u64; 2] = [0, 0];
        let mut pending: Vec<u8> = Vec::new();
        let mut have_header = false;
        loop {
            let n = pipe.read(&mut buf).await.map_err(|source| HostError::Io {
                context: "cannot read the command's output",
                source,
            })?;
            if n == 0 {
                break;
            }
            let mut chunk = &buf[..n];
            if !have_header {
                match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        header.extend_from_slice(&chunk[..i]);
                        chunk = &chunk[i + 1..];
                        have_header = true;
                        let text = String::from_utf8_lossy(&header).to_string();
                        let mut parts = text.split_whitespace();
                        code = parts.next().and_then(|c| c.parse::<i32>().ok());
                        left[0] = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
                        left[1] = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
                    }
                    None => {
                        header.extend_from_slice(chunk);
                        if header.len() > 200 {
                            return Err(HostError::BadOutputHeader);
                        }
                        continue;
                    }
                }
            }
            pending.clear();
            pending.extend_from_slice(chunk);
            let mut rest = &pending[..];
            for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
                let take = (left[i] as usize).min(rest.len());
                if take > 0 {
                    sink(stream, &rest[..take]);
                    left[i] -= take as u64;
                    rest = &rest[take..];
                }
            }
        }
        let _ = child.wait().await;
        if finished {
            if let Ok(mut r) = self.running.lock() {
                if r.as_ref().is_some_and(|j| j.n == job.n) {
                    *r = None;
                }
            }
        }
        Ok(code)
    }

    /// Follows the output files of `job` while it runs, for showing its
    /// latest lines: file reads on this host, a round trip a second on a
    /// remote base.
    pub fn follow(&self, job: &Job) -> OutputFollower {
        OutputFollower {
            files: [(self.file(job.n, "o"), 0), (self.file(job.n, "e"), 0)],
            remote: (!self.base.is_local()).then(|| (self.base.clone(), None)),
        }
    }

    /// The pane's contents as text, per `opts`, and a note when the alternate
    /// screen was asked for but the pane is not using one.
    pub async fn capture(
        &self,
        opts: &CaptureOptions,
    ) -> Result<(String, Option<String>), HostError> {
        if let Some(d) = opts.delay {
            tokio::time::sleep(d).await;
        }
        let pane = opts.pane.clone().unwrap_or_else(|| self.pane.clone());
        check_pane_name(&pane)?;
        let mut args: Vec<String> = vec!["capture-pane".into(), "-p".into()];
        if opts.join_wrapped {
            args.push("-J".into());
        }
        if let Some(s) = &opts.start {
            args.push("-S".into());
            args.push(s.clone());
        }
        if let Some(e) = &opts.end {
            args.push("-E".into());
            args.push(e.clone());
        }
        args.push("-t".into());
        args.push(pane.clone());
        let run = |alternate: bool| {
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            if alternate {
                a.insert(2, "-a");
            }
            let mut c = self.tmux(&a);
            c.stdin(Stdio::null()).kill_on_drop(true);
            c
        };
        let mut note = None;
        let mut out = run(opts.alternate)
            .output()
            .await
            .map_err(|source| HostError::Io {
                context: "cannot run tmux",
                source,
            })?;
        if opts.alternate && !out.status.success() {
            note = Some(
                "the pane is not showing an alternate screen; captured the normal screen instead"
                    .to_string(),
            );
            out = run(false).output().await.map_err(|source| HostError::Io {
                context: "cannot run tmux",
                source,
            })?;
        }
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(HostError::Pane {
                op: PaneOp::Capture,
                pane,
                detail: last_line(&err),
            });
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Ok((text.trim_end().to_string(), note))
    }

    /// Sends named keys (`keys`) or literal text into a pane.
    pub async fn send(&self, pane: Option<&str>, keys: &[SendItem]) -> Result<String, HostError> {
        let pane = pane.unwrap_or(&self.pane).to_string();
        check_pane_name(&pane)?;
        let mut script = String::new();
        for item in keys {
            match item {
                SendItem::Key(k) => {
                    check_key(k)?;
                    script.push_str(&format!(
                        "tmux send-keys -t {} {} || exit 1\n",
                        shell_quote(&pane),
                        shell_quote(k)
                    ));
                }
                SendItem::Text(t) => {
                    script.push_str(&format!(
                        "tmux send-keys -t {} -l -- {} || exit 1\n",
                        shell_quote(&pane),
                        shell_quote(t)
                    ));
                }
            }
        }
        let (code, _, err) = super::run_script(self.base.as_ref(), &script, Path::new("/"), None)
            .await
            .map_err(|source| HostError::Io {
                context: "cannot run tmux",
                source,
            })?;
        if code != Some(0) {
            let err = String::from_utf8_lossy(&err);
            return Err(HostError::Pane {
                op: PaneOp::SendKeys,
                pane,
                detail: last_line(&err),
            });
        }
        Ok(pane)
    }
}

/// tmux's last line on stderr, the reason it gives for a failure.
fn last_line(stderr: &str) -> String {
    stderr
        .lines()
        .last()
        .unwrap_or("tmux failed")
        .trim()
        .to_string()
}

/// Longest command text the pane shows; the command itself is not cut.
const SHOWN_MAX: usize = 2_000;

/// `command` as the pane shows it, as quoted `printf` words: `$ ` and the
/// first line, `> ` and each further one, control characters made visible
/// (a command must not be able to redraw the screen it is shown on), clipped
/// to [`SHOWN_MAX`] characters.
fn shown_command(command: &str) -> String {
    let text = crate::text::visible(command);
    let text = crate::text::clip(&text, SHOWN_MAX);
    text.trim_end_matches('\n')
        .split('\n')
        .enumerate()
        .map(|(i, line)| shell_quote(&format!("{} {line}", if i == 0 { '$' } else { '>' })))
        .collect::<Vec<_>>()
        .join(" ")
}

fn one_line(s: &str) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.chars().count() > 60 || s.lines().nth(1).is_some() {
        format!("{}…", first.chars().take(60).collect::<String>())
    } else {
        first.to_string()
    }
}

/// One thing `send-keys` types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendItem {
    Key(String),
    Text(String),
}

pub struct InterruptGuard {
    command: Option<Command>,
}

impl InterruptGuard {
    pub fn disarm(&mut self) {
        self.command = None;
    }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        if let Some(cmd) = self.command.take() {
            let mut cmd = cmd.into_std();
            let _ = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for TmuxTarget {
    fn drop(&mut self) {
        // The session stays for the person attached; only our scratch files go.
        let cmd = self.base.command(
            &format!("rm -rf {}", shell_quote(&self.dir)),
            Path::new("/"),
        );
        let _ = cmd
            .into_std()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Target for TmuxTarget {
    fn command(&self, script: &str, cwd: &Path) -> Command {
        self.base.command(script, cwd)
    }

    fn exec(&self, argv: &[&str]) -> Command {
        self.base.exec(argv)
    }

    fn actor(&self) -> String {
        self.base.actor()
    }

    fn description(&self) -> String {
        format!(
            "{}; shell commands run in the shared tmux pane {} (session {}, window {WINDOW}) where the user can watch, each starting in {}",
            self.base.description(),
            self.pane,
            self.session,
            self.workdir
        )
    }

    fn is_local(&self) -> bool {
        self.base.is_local()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_come_from_the_directory_and_differ_per_path() {
        let a = default_session_name(Path::new("/home/me/my.project"));
        assert!(a.starts_with("buddy-my-project-"), "{a}");
        assert_eq!(a.len(), "buddy-my-project-".len() + 6);
        // Stable: users attach by it and configs may name it.
        assert_eq!(a, default_session_name(Path::new("/home/me/my.project")));
        assert_eq!(path_hash(b"/home/me/work"), 0x8c2132);
        // Two projects with one name get two sessions.
        let (x, y) = (
            default_session_name(Path::new("/home/me/work")),
            default_session_name(Path::new("/srv/other/work")),
        );
        assert!(x.starts_with("buddy-work-") && y.starts_with("buddy-work-"));
        assert_ne!(x, y);
        assert!(default_session_name(Path::new("/")).starts_with("buddy-root-"));
        assert!(check_session_name(&x).is_ok());
        assert!(check_session_name("buddy-x").is_ok());
        assert!(check_session_name("a:b").is_err());
        assert!(check_session_name("-t").is_err());
    }

    #[test]
    fn the_pane_shows_the_command_visible_and_clipped() {
        assert_eq!(shown_command("ls -la"), "'$ ls -la'");
        assert_eq!(
            shown_command("echo 'a'\ncat f\n"),
            r#"'$ echo '\''a'\''' '> cat f'"#
        );
        // An escape sequence cannot reach the terminal as itself.
        let shown = shown_command("printf '\x1b[2J'; echo\rhidden");
        assert!(!shown.contains('\x1b') && !shown.contains('\r'), "{shown}");
        assert!(shown.contains('\u{241b}'), "{shown}");
        assert!(shown_command(&"x".repeat(100_000)).len() < SHOWN_MAX + 100);
    }

    #[test]
    fn keys_and_panes_are_checked() {
        for k in ["Enter", "C-c", "C-M-Left", "M-x", "q", "F5", "escape"] {
            assert!(check_key(k).is_ok(), "{k}");
        }
        for k in ["-t", "Ctrl-C", "hello", ""] {
            assert!(check_key(k).is_err(), "{k}");
        }
        assert!(check_pane_name("%3").is_ok());
        assert!(check_pane_name("buddy-x:buddy-shared.0").is_ok());
        assert!(check_pane_name("-t").is_err());
        assert!(check_pane_name("a;b").is_err());
    }
}
