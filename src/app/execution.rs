//! Opens the execution target the command line asks for: this host, a server
//! over SSH or a container, with shell work in a shared tmux pane when that is
//! wanted and possible, and decides whether local commands run in the
//! sandbox. Every failure is one line for the user (exit 2).

use super::AppError;
use crate::cli::TargetArgs;
use crate::config::{SandboxMode, Settings, ToolsSection};
use crate::host::sandbox::{self, Policy, Sandbox};
use crate::host::tmux::default_session_name;
use crate::host::{ContainerTarget, HostError, LocalTarget, SshTarget, Target, TmuxTarget};
use crate::ui::style::Style;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) struct Execution {
    pub target: Arc<dyn Target>,
    /// The shared tmux pane shell work goes through, when there is one (the
    /// same object as `target`).
    pub pane: Option<Arc<TmuxTarget>>,
    /// How the REPL prompt names a remote target (`ssh user@host`).
    pub label: Option<String>,
    /// Where the shared pane is and how to watch it, for the start-up banner.
    pub attach: Option<String>,
    /// Confines commands run directly on this host.
    pub sandbox: Option<Arc<Sandbox>>,
    /// The directory the tools work in and the project is found from: the
    /// one buddy started in, or a session's own (ACP, `buddy mcp-server`).
    /// The process's directory is never changed to serve a session.
    pub workdir: PathBuf,
}

/// The sandbox mode in force and whether the user chose it (in the config)
/// or it is the `--dangerously-auto-approve` default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SandboxChoice {
    pub mode: Option<sandbox::Mode>,
    pub explicit: bool,
    pub network: bool,
}

impl SandboxChoice {
    pub fn new(t: &ToolsSection, auto_approved: bool) -> SandboxChoice {
        let mode = match t.sandbox {
            Some(SandboxMode::Off) => None,
            Some(SandboxMode::WorkspaceWrite) => Some(sandbox::Mode::WorkspaceWrite),
            Some(SandboxMode::ReadOnly) => Some(sandbox::Mode::ReadOnly),
            // Nobody reviews the commands: confine them unless told otherwise.
            None if auto_approved => Some(sandbox::Mode::WorkspaceWrite),
            None => None,
        };
        SandboxChoice {
            mode,
            explicit: t.sandbox.is_some(),
            network: t.sandbox_network,
        }
    }
}

/// What to do with a sandbox on this execution, given whether the kernel can
/// enforce it (`check`). Pure, so every case is tested.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SandboxPlan {
    /// No sandbox, nothing to say.
    None,
    /// Confine local commands.
    Confine,
    /// A configured sandbox the kernel cannot enforce: keep it, so that
    /// run_shell refuses commands, and warn now.
    Refuse(String),
    /// Run unconfined after this warning.
    Unconfined(String),
    /// A configured sandbox that cannot cover this execution: stop.
    Fail(String),
}

pub(crate) fn plan_sandbox<E: std::fmt::Display>(
    choice: SandboxChoice,
    local: bool,
    pane: bool,
    check: impl FnOnce() -> Result<(), E>,
) -> SandboxPlan {
    let Some(mode) = choice.mode else {
        return SandboxPlan::None;
    };
    let mode = mode.as_str();
    if !local {
        // Remote targets have their own machine to protect; the sandbox is
        // for this one.
        return match choice.explicit {
            true => SandboxPlan::Unconfined(format!(
                "the {mode} sandbox applies to commands on this machine only; commands on the remote target are not confined"
            )),
            false => SandboxPlan::None,
        };
    }
    if pane {
        // Auto-approval without its sandbox is not what the user asked for:
        // refused either way, until they say the sandbox may be off.
        return match choice.explicit {
            true => SandboxPlan::Fail(format!(
                "the {mode} sandbox does not cover commands in a tmux pane yet: leave out --tmux, or set [tools] sandbox = \"off\""
            )),
            false => SandboxPlan::Fail(format!(
                "--dangerously-auto-approve confines commands ({mode} sandbox), which a tmux pane cannot do yet: leave out --tmux, or set [tools] sandbox = \"off\" to run them unconfined"
            )),
        };
    }
    match check() {
        Ok(()) => SandboxPlan::Confine,
        Err(why) if choice.explicit => SandboxPlan::Refuse(format!(
            "the {mode} sandbox cannot be enforced ({why}); run_shell will refuse commands"
        )),
        Err(why) => SandboxPlan::Unconfined(format!(
            "cannot sandbox commands ({why}); they run unconfined"
        )),
    }
}

/// Decides the sandbox of `execution` and says on stderr what the user must
/// know (once, at start).
pub(crate) fn confine(
    execution: &mut Execution,
    choice: SandboxChoice,
    style: Style,
) -> Result<(), AppError> {
    let cwd = execution.workdir.clone();
    let mut sb = None;
    let plan = plan_sandbox(
        choice,
        execution.target.is_local(),
        execution.pane.is_some(),
        || {
            let mode = choice.mode.unwrap_or(sandbox::Mode::ReadOnly);
            let s = Sandbox::new(Policy::for_workdir(mode, &cwd, choice.network));
            let r = s.unavailable().map_or(Ok(()), |w| Err(w.to_string()));
            sb = Some(Arc::new(s));
            r
        },
    );
    let warn = |m: &str| eprintln!("{} {m}", style.warning("warning:"));
    match plan {
        SandboxPlan::None => {}
        SandboxPlan::Confine => execution.sandbox = sb,
        SandboxPlan::Refuse(m) => {
            warn(&m);
            execution.sandbox = sb;
        }
        SandboxPlan::Unconfined(m) => warn(&m),
        SandboxPlan::Fail(m) => return Err(AppError::Usage(m)),
    }
    Ok(())
}

impl Execution {
    pub fn tmux(&self) -> bool {
        self.pane.is_some()
    }
}

/// `interactive`: the REPL, where tmux-backed execution is the default; `buddy
/// exec` uses it only when `--tmux` is given, so pipelines leave no sessions.
/// `sandboxed`: local commands are to be confined, which the tmux pane
/// cannot do yet, so the REPL runs them directly instead.
pub(crate) async fn open(
    args: &TargetArgs,
    settings: &Settings,
    interactive: bool,
    sandboxed: bool,
    workdir: &Path,
) -> Result<Execution, HostError> {
    // How a person runs a command interactively on the target, for attach hints.
    let mut interactive_command: Box<dyn Fn(&str) -> String + Send> = Box::new(|c| c.to_string());
    let mut label = None;
    let base: Arc<dyn Target> = if let Some(spec) = &args.ssh {
        let ssh = Arc::new(SshTarget::connect(spec, args.ssh_options.clone()).await?);
        label = Some(ssh.prompt_label());
        let s = ssh.clone();
        interactive_command = Box::new(move |c| s.interactive_command(c));
        ssh
    } else if let Some(name) = &args.container {
        let c = Arc::new(ContainerTarget::connect(name, args.container_engine.clone()).await?);
        label = Some(c.prompt_label());
        let k = c.clone();
        interactive_command = Box::new(move |cmd| k.interactive_command(cmd));
        c
    } else {
        Arc::new(LocalTarget)
    };
    let direct = |base: Arc<dyn Target>, label: Option<String>| Execution {
        target: base,
        pane: None,
        label,
        attach: None,
        sandbox: None,
        workdir: workdir.to_path_buf(),
    };
    let explicit = args.tmux.is_some();
    let wanted = explicit
        || (interactive
            && !args.no_tmux
            && !(sandboxed && base.is_local())
            && settings.execution.tmux
            && settings.tools.shell_enabled);
    if !wanted {
        return Ok(direct(base, label));
    }
    // Commands in the pane start in the working directory, as the file
    // tools' relative paths do.
    let workdir = workdir.to_path_buf();
    let session = match args.tmux.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => s.to_string(),
        None => match &settings.execution.tmux_session {
            Some(s) => s.clone(),
            // Canonical, so every spelling of the directory finds one session.
            None => default_session_name(&workdir.canonicalize().unwrap_or(workdir.clone())),
        },
    };
    match TmuxTarget::open(base.clone(), &session, &workdir).await {
        Ok(t) => {
            let attach = format!(
                "shell commands run in tmux session {} (window {}) in {}; watch with: {}",
                t.session(),
                crate::host::tmux::WINDOW,
                crate::text::visible(t.workdir()),
                interactive_command(&t.attach_command())
            );
            let pane = Arc::new(t);
            Ok(Execution {
                target: pane.clone(),
                pane: Some(pane),
                label,
                attach: Some(attach),
                sandbox: None,
                workdir,
            })
        }
        // Without tmux the REPL runs commands directly, as exec does.
        Err(HostError::TmuxNotInstalled { .. }) if !explicit => Ok(direct(base, label)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(explicit: bool) -> SandboxChoice {
        SandboxChoice {
            mode: Some(sandbox::Mode::WorkspaceWrite),
            explicit,
            network: true,
        }
    }

    #[test]
    fn the_auto_approve_default_is_workspace_write_and_config_wins() {
        let mut t = ToolsSection::default();
        assert_eq!(SandboxChoice::new(&t, false).mode, None);
        let auto = SandboxChoice::new(&t, true);
        assert_eq!(auto.mode, Some(sandbox::Mode::WorkspaceWrite));
        assert!(!auto.explicit);
        t.sandbox = Some(SandboxMode::Off);
        assert_eq!(SandboxChoice::new(&t, true).mode, None);
        t.sandbox = Some(SandboxMode::ReadOnly);
        let ro = SandboxChoice::new(&t, false);
        assert_eq!(ro.mode, Some(sandbox::Mode::ReadOnly));
        assert!(ro.explicit);
    }

    #[test]
    fn an_unenforceable_sandbox_fails_closed_only_when_configured() {
        let no = || Err("no Landlock".to_string());
        assert!(
            matches!(plan_sandbox(choice(true), true, false, no), SandboxPlan::Refuse(m) if m.contains("no Landlock"))
        );
        assert!(
            matches!(plan_sandbox(choice(false), true, false, no), SandboxPlan::Unconfined(m) if m.contains("unconfined"))
        );
        assert_eq!(
            plan_sandbox(choice(true), true, false, || Ok::<(), String>(())),
            SandboxPlan::Confine
        );
        let off = SandboxChoice {
            mode: None,
            explicit: true,
            network: true,
        };
        assert_eq!(plan_sandbox(off, true, false, no), SandboxPlan::None);
    }

    #[test]
    fn panes_and_remote_targets_are_not_confined_silently() {
        let unreachable = || -> Result<(), &'static str> { panic!("not checked") };
        assert!(matches!(
            plan_sandbox(choice(true), true, true, unreachable),
            SandboxPlan::Fail(_)
        ));
        // Auto-approve's default sandbox is not silently dropped in a pane.
        assert!(matches!(
            plan_sandbox(choice(false), true, true, unreachable),
            SandboxPlan::Fail(m) if m.contains("--dangerously-auto-approve")
        ));
        assert!(
            matches!(plan_sandbox(choice(true), false, false, unreachable), SandboxPlan::Unconfined(m) if m.contains("remote"))
        );
        assert_eq!(
            plan_sandbox(choice(false), false, false, unreachable),
            SandboxPlan::None
        );
    }
}
