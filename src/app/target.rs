//! Opens the execution target the command line asks for: this host, a server
//! over SSH or a container, with shell work in a shared tmux pane when that is
//! wanted and possible. Every failure is one line for the user (exit 2).

use crate::cli::TargetArgs;
use crate::config::Settings;
use crate::target::tmux::{default_session_name, OpenError};
use crate::target::{ContainerTarget, LocalTarget, SshTarget, Target, TmuxTarget};
use std::sync::Arc;

pub(crate) struct Execution {
    pub target: Arc<dyn Target>,
    /// Where the shared pane is and how to watch it, for the start-up banner.
    pub attach: Option<String>,
}

impl Execution {
    pub fn tmux(&self) -> bool {
        self.target.tmux().is_some()
    }
}

/// `interactive`: the REPL, where tmux-backed execution is the default; `buddy
/// exec` uses it only when `--tmux` is given, so pipelines leave no sessions.
pub(crate) async fn open(
    args: &TargetArgs,
    settings: &Settings,
    interactive: bool,
) -> Result<Execution, String> {
    let base: Arc<dyn Target> = if let Some(spec) = &args.ssh {
        Arc::new(SshTarget::connect(spec, args.ssh_options.clone()).await?)
    } else if let Some(name) = &args.container {
        Arc::new(ContainerTarget::connect(name, args.container_engine.clone()).await?)
    } else {
        Arc::new(LocalTarget)
    };
    let explicit = args.tmux.is_some();
    let wanted = explicit
        || (interactive
            && !args.no_tmux
            && settings.execution.tmux
            && settings.tools.shell_enabled);
    if !wanted {
        return Ok(Execution {
            target: base,
            attach: None,
        });
    }
    let session = match args.tmux.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => s.to_string(),
        None => match &settings.execution.tmux_session {
            Some(s) => s.clone(),
            None => default_session_name(&std::env::current_dir().unwrap_or_default()),
        },
    };
    match TmuxTarget::open(base.clone(), &session).await {
        Ok(t) => {
            let attach = format!(
                "shell commands run in tmux session {} (window {}); watch with: {}",
                t.session(),
                crate::target::tmux::WINDOW,
                t.attach_hint()
            );
            Ok(Execution {
                target: Arc::new(t),
                attach: Some(attach),
            })
        }
        // Without tmux the REPL runs commands directly, as exec does.
        Err(OpenError::NotInstalled(_)) if !explicit => Ok(Execution {
            target: base,
            attach: None,
        }),
        Err(e) => Err(e.to_string()),
    }
}
