//! The composition root: turns parsed arguments into the command they name.
//! Settings are resolved once (`setup::load_settings`) into the value the
//! rest reads; `setup` turns them into an agent setup; each subcommand has
//! a file of its own (exec, resume, login, models, sessions_cmd, trust,
//! mcp_cmd, shell_help, acp); interactive.rs starts bare `buddy` and the
//! conversation `buddy resume` continues; serve.rs and mcp_server.rs wire
//! the two servers. This file keeps the dispatch and the glue the
//! conversations share (continuing a saved session first, the working
//! directory, the no-terminal reason). Every command returns an
//! `Exit` or an `AppError` (error.rs); `main` alone turns those into exit
//! codes. The only module that knows all the others; none of them knows it.

use crate::agent::protocol::{Event, Op};
use crate::agent::AgentHandle;
use crate::cli::{Cli, Command};
use crate::config::CliOverrides;
use crate::ui::resuming::{ResumeError, Resuming};
use std::path::PathBuf;

mod acp;
mod approvals;
mod custom;
mod database;
mod discovery;
mod error;
mod exec;
mod execution;
mod export;
mod hosted;
mod interactive;
mod login;
mod mcp;
mod mcp_cmd;
mod mcp_server;
mod models;
mod output;
mod pick;
mod project;
mod prompt;
mod repl;
mod resume;
mod serve;
mod serve_pg;
mod sessions;
mod sessions_cmd;
mod setup;
mod shell_help;
mod trust;

pub use error::{
    AppError, Exit, InputError, Unknown, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE,
};
// What the front ends below and their hosts (repl.rs, serve.rs) build with.
use setup::{
    agent_options, agent_setup, approval_rules, build_tools, custom_files, exec_options, has_tty,
    load_settings, model_info, Resolved,
};
use setup::{client_for, remember_secrets};

/// Told to the model when a command needs approval and nobody can be asked.
const NO_TERMINAL_REASON: &str = "approval is required and there is no terminal to ask; the user can rerun `buddy exec` with --dangerously-auto-approve to allow commands";

fn env(name: &str) -> Option<String> {
    crate::process::var(name)
}

pub async fn run(cli: Cli) -> Result<Exit, AppError> {
    let overrides = CliOverrides {
        config: cli.global.config.clone(),
        model: cli.global.model.clone(),
        base_url: cli.global.base_url.clone(),
        no_color: cli.global.no_color,
        ..CliOverrides::default()
    };
    let outcome = match cli.command {
        Some(Command::Exec(mut args)) => {
            args.plan |= cli.global.plan;
            exec::exec(args, &overrides, cli.global.target).await
        }
        Some(Command::Resume(args)) => resume::resume(args, &overrides, &cli.global.target).await,
        Some(Command::Sessions(args)) => {
            sessions_cmd::list_sessions(args, overrides.no_color).await
        }
        Some(Command::Export(args)) => export::export(args).await,
        Some(Command::Login(args)) => login::login(args.target.as_deref(), &overrides).await,
        Some(Command::Logout(args)) => login::logout(args.provider.as_deref()),
        Some(Command::Serve(args)) => serve::serve(args, &overrides, &cli.global.target).await,
        Some(Command::Models) => models::list_models(&overrides).await,
        Some(Command::Completions(args)) => shell_help::completions(args.shell),
        Some(Command::Man(args)) => shell_help::man_page(&args),
        Some(Command::Trust(args)) => trust::trust(args.path),
        Some(Command::Mcp(cmd)) => mcp_cmd::run(cmd, &overrides).await,
        Some(Command::McpServer(args)) => {
            mcp_server::run(&overrides, &cli.global.target, &args).await
        }
        Some(Command::Acp) => acp::acp(&overrides, &cli.global.target).await,
        None => match load_settings(&overrides, &workdir()).await {
            Ok(resolved) => {
                interactive::interactive(resolved, None, &cli.global.target, cli.global.plan).await
            }
            Err(e) => Err(e),
        },
    };
    // The servers' processes end with buddy, even one that ignores EOF.
    if let Some(servers) = mcp::running() {
        servers.stop();
    }
    outcome
}

/// Loads session `what` into the agent before anything else, shown
/// through `shown`; returns the `SessionResumed` event.
async fn resume_first(
    agent: &mut AgentHandle,
    what: &Continue,
    mut shown: Resuming<'_>,
) -> Result<Event, AppError> {
    let query = what.query.clone();
    let op = if what.fork {
        Op::Fork { query: Some(query) }
    } else {
        Op::Resume { query }
    };
    shown.awaiting(agent.ops.send(op).await.ok());
    crate::drive::drive(agent, &mut shown).await;
    shown.answer().map_err(|e| match e {
        // The session named cannot be loaded: a usage error (exit 2).
        ResumeError::Refused(_) => AppError::Usage(e.to_string()),
        ResumeError::Stopped => AppError::Failed(e.to_string()),
    })
}

/// The directory the command started in, as read once (`process`).
fn workdir() -> PathBuf {
    crate::process::cwd()
}

/// The saved session a conversation starts from: resumed, or forked first.
pub(crate) struct Continue {
    query: String,
    fork: bool,
    /// The session database it is in (`buddy resume --store`), instead of
    /// this directory's files.
    store: Option<std::sync::Arc<crate::session::postgres::Pg>>,
}
