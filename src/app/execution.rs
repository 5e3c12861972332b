//! Opens the execution target the command line asks for: this host, a server
//! over SSH or a container, with shell work in a shared tmux pane when that is
//! wanted and possible. Every failure is one line for the user (exit 2).

use crate::cli::TargetArgs;
use crate::config::Settings;
use crate::host::tmux::default_session_name;
use crate::host::{ContainerTarget, HostError, LocalTarget, SshTarget, Target, TmuxTarget};
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
}

impl Execution {
    pub fn tmux(&self) -> bool {
        self.pane.is_some()
    }
}

/// `interactive`: the REPL, where tmux-backed execution is the default; `buddy
/// exec` uses it only when `--tmux` is given, so pipelines leave no sessions.
pub(crate) async fn open(
    args: &TargetArgs,
    settings: &Settings,
    interactive: bool,
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
    };
    let explicit = args.tmux.is_some();
    let wanted = explicit
        || (interactive
            && !args.no_tmux
            && settings.execution.tmux
            && settings.tools.shell_enabled);
    if !wanted {
        return Ok(direct(base, label));
    }
    // Commands in the pane start where buddy was started, as the file tools'
    // relative paths do.
    let workdir = std::env::current_dir().map_err(|source| HostError::Io {
        context: "cannot read the working directory",
        source,
    })?;
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
            })
        }
        // Without tmux the REPL runs commands directly, as exec does.
        Err(HostError::TmuxNotInstalled { .. }) if !explicit => Ok(direct(base, label)),
        Err(e) => Err(e),
    }
}
