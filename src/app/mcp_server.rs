//! `buddy mcp-server`: the MCP server front end (`crate::mcp_server`) wired
//! to agents built like exec's, one per tool call: the settings of the
//! call's directory and model, the caller's approval turned into rules
//! (nobody is ever asked), one HTTP client shared by every call.

use super::hosted::{confined, setup_for};
use super::{approval_rules, load_settings, workdir, Resolved};
use super::{AppError, Exit};
use crate::agent::allowlist::SharedAllowList;
use crate::agent::protocol::ApprovalPolicy;
use crate::agent::{self, AgentHandle};
use crate::cli::{McpServerArgs, TargetArgs};
use crate::config::CliOverrides;
use crate::mcp_server::http::{HttpError, HttpOptions};
use crate::mcp_server::{AgentFactory, Approval, CallError, CallSpec, READ_ONLY_REASON};
use crate::provider::http::Transports;
use std::future::Future;
use std::pin::Pin;

pub(crate) async fn run(
    overrides: &CliOverrides,
    target: &TargetArgs,
    args: &McpServerArgs,
) -> Result<Exit, AppError> {
    let factory = Factory {
        overrides: overrides.clone(),
        target: target.clone(),
        transports: Transports::default(),
        allow_any_cwd: args.allow_any_cwd,
    };
    let Some(listen) = args.listen else {
        crate::mcp_server::serve(factory, workdir())
            .await
            .map_err(|e| AppError::Failed(e.to_string()))?;
        return Ok(Exit::Ok);
    };
    let token = args
        .token
        .clone()
        .or_else(|| crate::process::var(crate::config::MCP_SERVER_TOKEN_ENV))
        .filter(|t| !t.is_empty());
    crate::redact::remember(token.iter());
    let opts = HttpOptions { listen, token };
    let ready = |addr: std::net::SocketAddr| {
        // The URL alone on stdout, for scripts; the rest for people.
        println!("http://{addr}{}", crate::mcp_server::http::PATH);
        eprintln!(
            "buddy: serving MCP on http://{addr}{} — Ctrl-C to stop",
            crate::mcp_server::http::PATH
        );
    };
    crate::mcp_server::http::serve(
        factory,
        workdir(),
        opts,
        ready,
        crate::serve::shutdown_signal(),
    )
    .await
    .map_err(|e| match e {
        HttpError::TokenRequired(_) => AppError::Usage(e.to_string()),
        HttpError::Bind(..) => AppError::Failed(e.to_string()),
    })?;
    Ok(Exit::Ok)
}

struct Factory {
    overrides: CliOverrides,
    target: TargetArgs,
    /// One HTTP client (and its connections) for every call's requests.
    transports: Transports,
    /// `--allow-any-cwd`: a `full` call may work in `/` or the user's home.
    allow_any_cwd: bool,
}

impl AgentFactory for Factory {
    fn start<'a>(
        &'a mut self,
        spec: &'a CallSpec,
    ) -> Pin<Box<dyn Future<Output = Result<AgentHandle, CallError>> + 'a>> {
        Box::pin(async move {
            self.build(spec)
                .await
                .map_err(|e| CallError::Setup(e.to_string()))
        })
    }
}

/// Refuses a directory that a `full` call must not take as its workspace:
/// the sandbox lets a task write its workspace, so a filesystem root or a
/// directory holding buddy's config (the user's home, say) would let it
/// rewrite the user's dotfiles and buddy's own settings.
fn too_wide(cwd: &std::path::Path) -> Result<(), AppError> {
    let shown = crate::text::one_line(&cwd.display().to_string(), 200);
    let reason = if cwd.parent().is_none() {
        "is a filesystem root".to_string()
    } else if let Some(what) = super::setup::user_own_files().inside(cwd) {
        format!("holds buddy's {what}")
    } else {
        return Ok(());
    };
    Err(AppError::Usage(format!(
        "cwd `{shown}` {reason}: approval \"full\" works only in a project directory (start the server with --allow-any-cwd to allow it)"
    )))
}

impl Factory {
    async fn build(&mut self, spec: &CallSpec) -> Result<AgentHandle, AppError> {
        if spec.approval == Approval::Full && !self.allow_any_cwd {
            too_wide(&spec.cwd)?;
        }
        // Settings, the project's files, the tools' directory and the session
        // store are the call's `cwd`'s (checked to be a directory), passed
        // down as data: the process's directory never changes.
        let mut overrides = self.overrides.clone();
        if let Some(m) = &spec.model {
            overrides.model = Some(m.clone());
        }
        let Resolved {
            settings, style, ..
        } = load_settings(&overrides, &spec.cwd).await?;
        let full = spec.approval == Approval::Full;
        // `full` is --dangerously-auto-approve: confined by default.
        let execution = confined(&self.target, &settings, style, full, &spec.cwd).await?;
        let mut rules = approval_rules(&settings);
        match spec.approval {
            Approval::Full => rules.policy = ApprovalPolicy::All,
            Approval::ReadOnly => {
                // The caller's word, whatever the config says: nothing that
                // needs approval runs (`shell_confirm = false` included).
                rules.confirm = true;
                rules.no_approver_reason = Some(READ_ONLY_REASON.into());
            }
        }
        let mut setup = setup_for(&settings, &execution, rules, &self.transports)?;
        if let Some(sessions) = setup.sessions.as_mut() {
            sessions.set_origin("mcp");
        }
        if spec.approval == Approval::ReadOnly {
            // Nor do the user's remembered "always" rules widen it.
            setup.allowed = SharedAllowList::default();
        }
        // Like exec, a call offers the tools once: the configured MCP
        // servers (started by the first call's set-up) are waited for.
        super::mcp::ready(style).await;
        Ok(agent::spawn(setup))
    }
}
