//! The Landlock sandbox for commands run on this host. Two halves of one job:
//! building the command line that starts a command inside the sandbox (a
//! re-exec of buddy's own binary through the hidden `__sandbox` entry point),
//! and, in that re-exec'd process, restricting itself and `exec`ing the
//! command, so the command and everything it starts inherit the rules. The
//! system-call filter installed beside the rules lives in `syscall_filter.rs`.
//!
//! Why a re-exec and not `pre_exec`: building a Landlock ruleset allocates and
//! opens files, which is not async-signal-safe between `fork` and `exec` of a
//! multithreaded process. The wrapper runs before any runtime or thread exists.

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// The hidden first argument that makes the buddy binary act as the wrapper.
pub const ENTRY: &str = "__sandbox";

/// Exit status of the wrapper when it cannot confine or start the command
/// (the shell's "found but cannot execute").
pub const EXIT_SANDBOX_FAILED: i32 = 126;

/// The oldest Landlock ABI whose write controls mean something: ABI 3 added
/// `truncate(2)`, without which a confined command could still empty any file.
const FS_ABI: ABI = ABI::V3;
/// TCP bind/connect control (ABI 4), needed only when the network is off.
const NET_ABI: ABI = ABI::V4;
/// The newest rights buddy asks for where the kernel has them (best effort):
/// device ioctls (5), signal and abstract-socket scoping (6), UDP (newer).
const BEST_ABI: ABI = ABI::V10;

/// Files a shell needs to write even when nothing else may be written.
/// `/dev/fd/N` and `/dev/stdout` need no rule: they lead to the file behind the
/// descriptor, and pipes (what buddy gives a command) are never path-checked.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read anywhere; write in the working directory and temp directories.
    WorkspaceWrite,
    /// Read anywhere; write nowhere but the devices in [`DEVICES`].
    ReadOnly,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::WorkspaceWrite => "workspace-write",
            Mode::ReadOnly => "read-only",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        match s {
            "workspace-write" => Some(Mode::WorkspaceWrite),
            "read-only" => Some(Mode::ReadOnly),
            _ => None,
        }
    }
}

/// What a sandboxed command may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub mode: Mode,
    /// Directories (and everything beneath them) the command may change.
    pub writable: Vec<PathBuf>,
    /// TCP connect and bind allowed.
    pub network: bool,
}

impl Policy {
    /// The policy for commands that run in `workdir`: in workspace-write mode
    /// that directory and the temp directories are writable.
    pub fn for_workdir(mode: Mode, workdir: &Path, network: bool) -> Policy {
        let writable = match mode {
            Mode::ReadOnly => Vec::new(),
            Mode::WorkspaceWrite => {
                let mut dirs = vec![workdir.to_path_buf()];
                for d in temp_dirs(crate::process::var_os("TMPDIR").as_deref()) {
                    if !dirs.contains(&d) {
                        dirs.push(d);
                    }
                }
                dirs
            }
        };
        Policy {
            mode,
            writable,
            network,
        }
    }

    /// The wrapper's arguments after the program name, up to and including `--`.
    pub fn wrapper_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec![ENTRY.into(), "--mode".into(), self.mode.as_str().into()];
        for dir in &self.writable {
            args.push("--write".into());
            args.push(dir.clone().into_os_string());
        }
        if !self.network {
            args.push("--no-network".into());
        }
        args.push("--".into());
        args
    }

    /// Checks, without restricting anything, that this kernel can enforce the
    /// policy: the same ruleset and system-call filter are built as the
    /// wrapper would build them, then dropped. Costs a few system calls.
    pub fn check(&self) -> Result<(), SandboxError> {
        build(self).map(drop)?;
        super::syscall_filter::program().map(drop)?;
        Ok(())
    }
}

/// `/tmp`, `/var/tmp`, `/dev/shm` and `$TMPDIR` (when absolute), in that order.
fn temp_dirs(tmpdir: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(t) = tmpdir.map(PathBuf::from).filter(|p| p.is_absolute()) {
        if !dirs.contains(&t) {
            dirs.push(t);
        }
    }
    dirs
}

/// A checked policy and the binary that enforces it, as the shell tool holds it.
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: Policy,
    exe: PathBuf,
    /// Why the kernel cannot enforce the policy; commands are then refused.
    unavailable: Option<String>,
}

impl Sandbox {
    /// Checks `policy` against this kernel and finds buddy's own binary.
    pub fn new(policy: Policy) -> Sandbox {
        let exe = std::env::current_exe();
        let unavailable = match (&exe, policy.check()) {
            (Err(e), _) => Some(format!("cannot find buddy's own binary: {e}")),
            (_, Err(why)) => Some(why.to_string()),
            (Ok(_), Ok(())) => None,
        };
        // Paths in the reason come from outside; it is shown as one line.
        let unavailable = unavailable.map(|w| crate::text::one_line(&w, 300));
        Sandbox {
            policy,
            exe: exe.unwrap_or_default(),
            unavailable,
        }
    }

    /// A sandbox this kernel cannot enforce, for tests of the refusal.
    #[cfg(test)]
    pub(crate) fn unenforceable(policy: Policy, why: &str) -> Sandbox {
        Sandbox {
            policy,
            exe: PathBuf::from("/nonexistent/buddy"),
            unavailable: Some(why.to_string()),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Why commands cannot be confined here, if they cannot.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// A process that runs `script` with `sh -c` in `cwd` inside the sandbox:
    /// same pid, stdio, environment and exit status as the plain `sh -c`,
    /// since the wrapper `exec`s the shell.
    pub fn command(&self, script: &str, cwd: &Path) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(self.policy.wrapper_args())
            .arg("sh")
            .arg("-c")
            .arg(script)
            .current_dir(cwd);
        super::scrub(&mut c);
        c
    }

    /// The program and arguments that run `script` with `sh -c` inside the
    /// sandbox, for a process someone else starts (an editor's terminal).
    pub fn argv(&self, script: &str) -> Vec<String> {
        let mut argv = vec![self.exe.to_string_lossy().into_owned()];
        argv.extend(
            self.policy
                .wrapper_args()
                .iter()
                .map(|a| a.to_string_lossy().into_owned()),
        );
        argv.extend(["sh".to_string(), "-c".to_string(), script.to_string()]);
        argv
    }

    /// `command` as one shell command line that runs it inside the sandbox,
    /// every word quoted: for paths that type or source a command line (the
    /// tmux pane) rather than spawn a process.
    pub fn shell_line(&self, command: &str) -> String {
        let mut words = vec![quote_os(self.exe.as_os_str())];
        words.extend(self.policy.wrapper_args().iter().map(|a| quote_os(a)));
        words.extend([
            "sh".to_string(),
            "-c".to_string(),
            super::shell_quote(command),
        ]);
        words.join(" ")
    }
}

fn quote_os(s: &OsStr) -> String {
    super::shell_quote(&s.to_string_lossy())
}

/// Why the sandbox cannot be built or entered, or why the wrapper was
/// started wrong. The libraries' own errors are kept as their text: the
/// line is what a user acts on, and `Sandbox` keeps it as its reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks a Landlock feature the policy needs.
    #[error("the kernel cannot enforce {what}: {detail}")]
    Unsupported { what: &'static str, detail: String },
    #[error("cannot build the sandbox: {0}")]
    Build(String),
    #[error("cannot open {} for the sandbox: {detail}", .path.display())]
    Open { path: PathBuf, detail: String },
    #[error("cannot add {} to the sandbox: {detail}", .path.display())]
    AddRule { path: PathBuf, detail: String },
    #[error("cannot enter the sandbox: {0}")]
    Enter(String),
    /// Unreachable with the hard requirements, kept as a last guard.
    #[error("the kernel did not enforce the sandbox")]
    NotEnforced,
    #[error(transparent)]
    Filter(#[from] super::syscall_filter::FilterError),
    /// The wrapper's own arguments are wrong (buddy built them, so a bug).
    #[error("{0}")]
    Invocation(String),
}

/// The ruleset for `policy`, created but not yet applied. Filesystem write
/// control (and TCP control when the network is off) are hard requirements;
/// newer rights are added where the kernel has them.
fn build(policy: &Policy) -> Result<RulesetCreated, SandboxError> {
    let need = |what: &'static str| {
        move |e: landlock::RulesetError| SandboxError::Unsupported {
            what,
            detail: e.to_string(),
        }
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(FS_ABI))
        .map_err(need(
            "Landlock file-system rules (Linux 6.2 or newer, ABI 3)",
        ))?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(NET_ABI))
            .map_err(need("Landlock network rules (Linux 6.7 or newer, ABI 4)"))?;
    }
    let extra = |e: landlock::RulesetError| SandboxError::Build(e.to_string());
    ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(BEST_ABI))
        .map_err(extra)?
        // A confined command may not signal processes outside its sandbox
        // (buddy itself, the user's other programs).
        .scope(Scope::Signal)
        .map_err(extra)?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(BEST_ABI))
            .map_err(extra)?
            .scope(Scope::AbstractUnixSocket)
            .map_err(extra)?;
    }
    let mut created = ruleset.create().map_err(extra)?;
    created = add_path(created, Path::new("/"), AccessFs::from_read(BEST_ABI))?;
    for dir in &policy.writable {
        created = add_path(created, dir, AccessFs::from_all(BEST_ABI))?;
    }
    for dev in DEVICES {
        created = add_path(created, Path::new(dev), AccessFs::from_file(BEST_ABI))?;
    }
    Ok(created)
}

/// Allows `access` beneath `path`; a path that does not exist is skipped (a
/// machine without `/var/tmp` or a terminal is not an error). Rights that make
/// no sense for a file (it is not a directory) are dropped from its rule.
fn add_path(
    ruleset: RulesetCreated,
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
) -> Result<RulesetCreated, SandboxError> {
    let fd = match PathFd::new(path) {
        Ok(fd) => fd,
        Err(_) if std::fs::symlink_metadata(path).is_err() => return Ok(ruleset),
        Err(e) => {
            return Err(SandboxError::Open {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })
        }
    };
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(BEST_ABI)
    };
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| SandboxError::AddRule {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
}

/// Restricts the calling process (and every process it starts) to `policy`:
/// the Landlock rules, then the system-call filter for what they cannot
/// refuse (owners and extended attributes, `host::syscall_filter`).
/// Irreversible; meant for the wrapper, which is single-threaded.
pub fn apply(policy: &Policy) -> Result<(), SandboxError> {
    let status = build(policy)?
        .restrict_self()
        .map_err(|e| SandboxError::Enter(e.to_string()))?;
    // Unreachable with the hard requirements above, kept as a last guard.
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SandboxError::NotEnforced);
    }
    super::syscall_filter::install()?;
    Ok(())
}

/// The wrapper's command line, parsed.
#[derive(Debug, PartialEq, Eq)]
struct Invocation {
    policy: Policy,
    argv: Vec<OsString>,
}

fn parse(args: &[OsString]) -> Result<Invocation, SandboxError> {
    let bad = |m: &str| SandboxError::Invocation(m.to_string());
    let mut mode = None;
    let mut writable = Vec::new();
    let mut network = true;
    let mut it = args.iter();
    loop {
        let Some(arg) = it.next() else {
            return Err(bad("no `--` before the command"));
        };
        match arg.to_str() {
            Some("--") => break,
            Some("--mode") => {
                let m = it.next().and_then(|m| m.to_str()).unwrap_or_default();
                mode = Some(Mode::parse(m).ok_or_else(|| bad(&format!("unknown mode `{m}`")))?);
            }
            Some("--write") => {
                let dir = it
                    .next()
                    .ok_or_else(|| bad("`--write` needs a directory"))?;
                writable.push(PathBuf::from(dir));
            }
            Some("--no-network") => network = false,
            _ => {
                return Err(bad(&format!(
                    "unknown argument `{}`",
                    crate::text::one_line(&arg.to_string_lossy(), 100)
                )))
            }
        }
    }
    let argv: Vec<OsString> = it.cloned().collect();
    if argv.is_empty() {
        return Err(bad("no command after `--`"));
    }
    let mode = mode.ok_or_else(|| bad("no `--mode`"))?;
    Ok(Invocation {
        policy: Policy {
            mode,
            writable,
            network,
        },
        argv,
    })
}

/// The wrapper: `buddy __sandbox --mode M [--write DIR]… [--no-network] --
/// PROGRAM ARGS…` (the arguments after `__sandbox` are given). Confines this
/// process and becomes PROGRAM; returns only on failure, with the exit status
/// to use after the one-line reason was printed on stderr.
pub fn wrapper_main(args: &[OsString]) -> i32 {
    use std::os::unix::process::CommandExt;
    let inv = match parse(args) {
        Ok(inv) => inv,
        Err(e) => {
            eprintln!("buddy: sandbox: {e}");
            return EXIT_SANDBOX_FAILED;
        }
    };
    if let Err(e) = apply(&inv.policy) {
        eprintln!("buddy: sandbox: {e}; the command was not run");
        return EXIT_SANDBOX_FAILED;
    }
    let err = std::process::Command::new(&inv.argv[0])
        .args(&inv.argv[1..])
        .exec();
    eprintln!(
        "buddy: sandbox: cannot run {}: {err}",
        crate::text::one_line(&inv.argv[0].to_string_lossy(), 200)
    );
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        EXIT_SANDBOX_FAILED
    }
}

/// One line appended to a sandboxed command's result when it was refused
/// something, so the model knows why and does not retry around it.
pub fn refusal_note(policy: &Policy) -> String {
    let net = if policy.network {
        ""
    } else {
        " and no network connections"
    };
    // The system-call filter's refusals read as EPERM, anywhere.
    let owners = "; changing a file's owner or extended attributes is refused everywhere (\"Operation not permitted\")";
    match policy.mode {
        Mode::WorkspaceWrite => format!(
            "note: commands run in a sandbox (workspace-write): they may write only in the working directory and temp directories{net}; \"Permission denied\" outside them is the sandbox, not file permissions{owners}"
        ),
        Mode::ReadOnly => format!(
            "note: commands run in a read-only sandbox: they may not write files{net}; \"Permission denied\" is the sandbox, not file permissions{owners}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn workspace_write_allows_the_workdir_and_temp_dirs() {
        let p = Policy::for_workdir(Mode::WorkspaceWrite, Path::new("/home/u/proj"), true);
        assert_eq!(p.writable[0], PathBuf::from("/home/u/proj"));
        for t in ["/tmp", "/var/tmp"] {
            assert!(p.writable.contains(&PathBuf::from(t)), "{t}: {p:?}");
        }
        let ro = Policy::for_workdir(Mode::ReadOnly, Path::new("/home/u/proj"), false);
        assert!(ro.writable.is_empty());
        assert!(!ro.network);
    }

    #[test]
    fn tmpdir_is_added_once_and_only_when_absolute() {
        let base = temp_dirs(None);
        assert_eq!(temp_dirs(Some(OsStr::new("/tmp"))), base);
        assert_eq!(temp_dirs(Some(OsStr::new("relative"))), base);
        let with = temp_dirs(Some(OsStr::new("/scratch/me")));
        assert_eq!(with.last(), Some(&PathBuf::from("/scratch/me")));
        assert_eq!(with.len(), base.len() + 1);
    }

    #[test]
    fn wrapper_args_round_trip_through_the_parser() {
        let policy = Policy {
            mode: Mode::WorkspaceWrite,
            writable: vec!["/w d".into(), "/tmp".into()],
            network: false,
        };
        let args = policy.wrapper_args();
        assert_eq!(
            args,
            os(&[
                ENTRY,
                "--mode",
                "workspace-write",
                "--write",
                "/w d",
                "--write",
                "/tmp",
                "--no-network",
                "--"
            ])
        );
        let mut full = args[1..].to_vec();
        full.extend(os(&["sh", "-c", "echo --mode"]));
        let inv = parse(&full).unwrap();
        assert_eq!(inv.policy, policy);
        assert_eq!(inv.argv, os(&["sh", "-c", "echo --mode"]));
    }

    #[test]
    fn the_parser_rejects_what_it_does_not_know() {
        for (args, why) in [
            (vec!["--mode", "workspace-write"], "no `--`"),
            (vec!["--mode", "wide-open", "--", "sh"], "unknown mode"),
            (vec!["--mode", "read-only", "--"], "no command"),
            (vec!["--", "sh"], "no `--mode`"),
            (vec!["--net", "--", "sh"], "unknown argument"),
            (vec!["--write"], "needs a directory"),
        ] {
            let err = parse(&os(&args)).unwrap_err();
            assert!(err.to_string().contains(why), "{args:?}: {err}");
        }
    }

    #[test]
    fn shell_line_quotes_every_word() {
        let sb = Sandbox {
            policy: Policy {
                mode: Mode::ReadOnly,
                writable: vec!["/it's here".into()],
                network: true,
            },
            exe: PathBuf::from("/opt/my buddy/buddy"),
            unavailable: None,
        };
        assert_eq!(
            sb.shell_line("echo 'hi' > $HOME/x"),
            "'/opt/my buddy/buddy' __sandbox --mode read-only --write '/it'\\''s here' -- sh -c 'echo '\\''hi'\\'' > $HOME/x'"
        );
    }

    #[test]
    fn the_wrapper_command_keeps_sh_c_and_the_workdir() {
        let sb = Sandbox {
            policy: Policy::for_workdir(Mode::ReadOnly, Path::new("/w"), true),
            exe: PathBuf::from("/bin/buddy"),
            unavailable: None,
        };
        let c = sb.command("true", Path::new("/w"));
        let std = c.as_std();
        assert_eq!(std.get_program(), "/bin/buddy");
        let args: Vec<&OsStr> = std.get_args().collect();
        assert_eq!(args[0], ENTRY);
        assert_eq!(&args[args.len() - 4..], ["--", "sh", "-c", "true"]);
        assert_eq!(std.get_current_dir(), Some(Path::new("/w")));
    }

    #[test]
    fn this_kernel_can_enforce_both_modes() {
        // The machines buddy is built and tested on run Linux 6.7 or newer.
        for mode in [Mode::WorkspaceWrite, Mode::ReadOnly] {
            for network in [true, false] {
                let p = Policy::for_workdir(mode, Path::new("/"), network);
                assert_eq!(p.check(), Ok(()), "{mode:?} network={network}");
            }
        }
    }
}
