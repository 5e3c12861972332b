//! The composition root: turns parsed arguments into the command they name.
//! Settings are resolved once (`setup::load_settings`) into the value the
//! rest reads; `setup` turns them into an agent setup; each subcommand that
//! is not a conversation has a file of its own (login, models, sessions_cmd,
//! trust, mcp_cmd, shell_help); serve.rs and mcp_server.rs wire the two
//! servers; the conversation front ends (exec, the REPL, the line session,
//! resume) are driven from here. Every command returns an
//! `Exit` or an `AppError` (error.rs); `main` alone turns those into exit
//! codes. The only module that knows all the others; none of them knows it.

use crate::agent::protocol::{ApprovalPolicy, Event, Op};
use crate::agent::{self, AgentHandle};
use crate::cli::{Cli, Command, ExecArgs, ResumeArgs, TargetArgs};
use crate::config::{self, CliOverrides};
use crate::ui::exec::{ExecFrontEnd, ExecOutcome};
use crate::ui::json::JsonFrontEnd;
use crate::ui::line::{LineEnd, LineOptions};
use crate::ui::resuming::{Notice, ResumeError, Resuming};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

mod acp;
mod approvals;
mod custom;
mod discovery;
mod error;
mod execution;
mod hosted;
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
mod serve;
mod sessions;
mod sessions_cmd;
mod setup;
mod shell_help;
mod trust;

pub use error::{AppError, Exit, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE};
use execution::SandboxChoice;
// What the front ends below and their hosts (repl.rs, serve.rs) build with.
use setup::{
    agent_options, agent_setup, approval_rules, build_tools, custom_files, exec_options, has_tty,
    load_settings, model_info, Resolved,
};
use setup::{client_for, remember_secrets};

/// Told to the model when a command needs approval and nobody can be asked.
const NO_TERMINAL_REASON: &str = "approval is required and there is no terminal to ask; the user can rerun `buddy exec` with --dangerously-auto-approve to allow commands";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
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
        Some(Command::Exec(args)) => exec(args, &overrides, cli.global.target).await,
        Some(Command::Resume(args)) => resume(args, &overrides, &cli.global.target).await,
        Some(Command::Sessions) => sessions_cmd::list_sessions(overrides.no_color),
        Some(Command::Login(args)) => login::login(args.target.as_deref(), &overrides).await,
        Some(Command::Logout(args)) => login::logout(args.provider.as_deref()),
        Some(Command::Serve(args)) => serve::serve(args, &overrides, &cli.global.target).await,
        Some(Command::Models) => models::list_models(&overrides).await,
        Some(Command::Completions(args)) => shell_help::completions(args.shell),
        Some(Command::Man(args)) => shell_help::man_page(&args),
        Some(Command::Trust(args)) => trust::trust(args.path),
        Some(Command::Mcp(cmd)) => mcp_cmd::run(cmd, &overrides).await,
        Some(Command::McpServer(args)) => {
            mcp_server::run(&overrides, &cli.global.target, args.allow_any_cwd).await
        }
        Some(Command::Acp) => acp::acp(&overrides, &cli.global.target).await,
        None => match load_settings(&overrides).await {
            Ok(resolved) => interactive(resolved, None, &cli.global.target).await,
            Err(e) => Err(e),
        },
    };
    // The servers' processes end with buddy, even one that ignores EOF.
    if let Some(servers) = mcp::running() {
        servers.stop();
    }
    outcome
}

async fn exec(
    args: ExecArgs,
    overrides: &CliOverrides,
    target_args: TargetArgs,
) -> Result<Exit, AppError> {
    // One conversation per process: the turn-end save runs on this thread.
    crate::background::run_inline();
    let prompt = prompt::read(&args.prompt)?;
    let images = prompt::images(&args.images)?;
    // Read only when asked for; a bad file is a usage error before any request.
    let output = match &args.output_schema {
        Some(path) => Some(std::sync::Arc::new(output::load_schema(path)?)),
        None => None,
    };
    let Resolved {
        settings, style, ..
    } = load_settings(overrides).await?;
    if !images.is_empty() && !settings.api.images {
        return Err(AppError::Usage(model_info(&settings).images_refused()));
    }
    if let Some(max) = args.max_cost {
        output::check_max_cost(&model_info(&settings), max)?;
    }
    let choice = SandboxChoice::new(&settings.tools, args.dangerously_auto_approve);
    let mut execution =
        execution::open(&target_args, &settings, false, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    if let Some(a) = &execution.attach {
        eprintln!("{}", style.dim(a));
    }
    let mut rules = approval_rules(&settings);
    if args.dangerously_auto_approve {
        rules.policy = ApprovalPolicy::All;
    } else if !has_tty() {
        rules.no_approver_reason = Some(NO_TERMINAL_REASON.into());
    }
    let mut options = agent_options(&settings);
    if let Some(n) = args.max_turns {
        options.limits.max_turns = n;
    }
    if let Some(n) = args.max_tokens {
        options.limits.max_total_tokens = Some(n);
    }
    if let Some(d) = args.timeout {
        options.limits.max_duration = Some(d);
    }
    options.limits.max_cost_usd = args.max_cost;
    let found = custom_files(&settings, &workdir());
    for note in &found.notes {
        eprintln!("{} {note}", style.dim("note:"));
    }
    // `buddy exec "/name args"` runs a custom command as the REPL would.
    let prompt =
        crate::ui::repl::commands::expand_custom(&prompt, &found.commands).unwrap_or(prompt);
    let mut setup = agent_setup(
        &settings,
        &execution,
        rules,
        options,
        None,
        None,
        Some(&found),
    )?;
    setup.output = output.clone();
    let mut agent = agent::spawn(setup);
    // exec has one chance to offer the tools: the servers' start (each
    // bounded by its startup_timeout_secs) is awaited before the request.
    mcp::ready(style).await;
    let mut json = args.json.then(|| JsonFrontEnd::new(style));
    if let Some(j) = json.as_mut() {
        j.hello();
    }
    if let Some(query) = &args.resume {
        let what = Continue {
            query: query.clone(),
            fork: false,
        };
        resume_first(
            &mut agent,
            &what,
            Resuming::new(style, Notice::Notes, json.as_mut()),
        )
        .await?;
    }
    let _ = agent
        .ops
        .send(Op::Prompt {
            text: prompt,
            images,
        })
        .await;
    let outcome = match json {
        Some(j) => j.run(&mut agent).await,
        None => {
            let mut opts = exec_options(&settings, style);
            opts.plain_answer = output.is_some();
            ExecFrontEnd::new(opts).run(&mut agent).await
        }
    };
    finish(agent, &outcome).await;
    match outcome {
        ExecOutcome::Answered(answer) => match &args.output_last_message {
            // The answer is on stdout already; a file that cannot be
            // written is still a failure of the run.
            Some(path) => output::write_last_message(path, &answer).map(|()| Exit::Ok),
            None => Ok(Exit::Ok),
        },
        ExecOutcome::Interrupted => Ok(Exit::Interrupted),
        ExecOutcome::Failed(m) | ExecOutcome::LimitReached(m) => Err(AppError::Failed(m)),
    }
}

/// Stops the agent, saving the session. After a second Ctrl-C the user has
/// stopped waiting, so the wait is short.
async fn finish(agent: AgentHandle, outcome: &ExecOutcome) {
    let wait = match outcome {
        ExecOutcome::Interrupted => Duration::from_secs(2),
        _ => Duration::from_secs(30),
    };
    let _ = tokio::time::timeout(wait, agent.shutdown()).await;
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
    let _ = agent.ops.send(op).await;
    crate::drive::drive(agent, &mut shown).await;
    shown.answer().map_err(|e| match e {
        // The session named cannot be loaded: a usage error (exit 2).
        ResumeError::Refused(_) => AppError::Usage(e.to_string()),
        ResumeError::Stopped => AppError::Failed(e.to_string()),
    })
}

fn workdir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// `buddy resume`: the session's history, then the conversation on it.
/// Without an id on a terminal, a picker asks which session: Esc cancels
/// (exit 0, nothing was wrong), Ctrl-C interrupts (130). The settings are
/// resolved before the picker, so it draws with the one colour choice.
async fn resume(
    args: ResumeArgs,
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let on_terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.last && args.id.is_none() && !on_terminal {
        return Err(AppError::Usage(
            "name the session to continue: `buddy resume ID` or `buddy resume --last` (`buddy sessions` lists them)".into(),
        ));
    }
    let resolved = load_settings(overrides).await?;
    let query = match (args.last, args.id) {
        (true, _) => "last".to_string(),
        (false, Some(id)) => id,
        (false, None) => match pick::choose(resolved.style).await? {
            crate::ui::session_picker::Picked::Session(id) => id,
            crate::ui::session_picker::Picked::Cancelled => {
                eprintln!("no session resumed");
                return Ok(Exit::Ok);
            }
            crate::ui::session_picker::Picked::Interrupted => return Ok(Exit::Interrupted),
            crate::ui::session_picker::Picked::Signalled(code) => return Ok(Exit::Code(code)),
        },
    };
    let what = Continue {
        query,
        fork: args.fork,
    };
    interactive(resolved, Some(what), target_args).await
}

/// The saved session a conversation starts from: resumed, or forked first.
pub(crate) struct Continue {
    query: String,
    fork: bool,
}

/// Bare `buddy` and `buddy resume`: the agent set up once, then the REPL on
/// a terminal, or the line session when input or output is redirected or
/// the terminal is dumb (it cannot take the editor's cursor movement and
/// redraws).
async fn interactive(
    resolved: Resolved,
    resume: Option<Continue>,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let editor = std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal()
        && !crate::ui::style::dumb_terminal();
    let Resolved {
        settings,
        overrides,
        style,
    } = resolved;
    let choice = SandboxChoice::new(&settings.tools, false);
    let mut execution =
        execution::open(target_args, &settings, editor, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    let mut rules = approval_rules(&settings);
    // The line session asks on the controlling terminal, as exec does.
    if !editor && !has_tty() {
        rules.no_approver_reason = Some(NO_TERMINAL_REASON.into());
    }
    // `/model` is the REPL's.
    let switcher = editor.then(|| -> Box<dyn crate::agent::service::ModelSwitcher> {
        Box::new(repl::Switcher {
            settings: settings.clone(),
            overrides: overrides.clone(),
        })
    });
    let setup = agent_setup(
        &settings,
        &execution,
        rules,
        agent_options(&settings),
        switcher,
        None,
        None,
    )?;
    let allowed = setup.allowed.clone();
    let mut agent = agent::spawn(setup);
    if !editor {
        if let Some(a) = &execution.attach {
            eprintln!("{}", style.dim(a));
        }
    }
    let mut resumed = None;
    if let Some(what) = &resume {
        let notice = if editor {
            Notice::Quiet
        } else {
            Notice::LastExchange
        };
        match resume_first(&mut agent, what, Resuming::new(style, notice, None)).await {
            Ok(ev) => resumed = Some(ev),
            Err(e) => {
                agent.shutdown().await;
                return Err(e);
            }
        }
    }
    if !editor {
        let end = crate::ui::line::run(
            &mut agent,
            LineOptions {
                exec: exec_options(&settings, style),
                model: settings.api.model.clone(),
                base_url: settings.api.base_url.clone(),
            },
        )
        .await;
        agent.shutdown().await;
        return match end {
            LineEnd::Ok => Ok(Exit::Ok),
            LineEnd::LastFailed => Ok(Exit::Code(EXIT_FAILURE)),
            LineEnd::Unreadable(e) => Err(AppError::Failed(e)),
        };
    }
    let cwd = workdir();
    let found = custom_files(&settings, &cwd);
    let banner = crate::ui::repl::Banner {
        model: &settings.api.model,
        base_url: &settings.api.base_url,
        remote: (!execution.target.is_local()).then(|| execution.target.actor()),
        attach: execution.attach.as_deref(),
        instructions: project::find(&cwd)
            .map(|found| {
                found
                    .files
                    .iter()
                    .map(|f| f.strip_prefix(&cwd).unwrap_or(f).display().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        notes: &found.notes,
    }
    .render(style);
    let services = repl::Services {
        overrides: overrides.clone(),
        allowed: allowed.clone(),
    };
    let opts = crate::ui::repl::ReplOptions {
        style,
        tools: build_tools(&settings, execution.tmux(), execution.sandbox.clone())
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
        profiles: settings.profiles.clone(),
        allowed,
        prompt: match &execution.label {
            Some(label) => format!("({label})> "),
            None => "> ".into(),
        },
        show_tool_calls: settings.display.show_tool_calls,
        show_tokens: settings.display.show_tokens,
        history_file: config::global_dir(&env).map(|d| d.join("history")),
        banner,
        resumed,
        profile: settings.api.profile.clone(),
        model: settings.api.model.clone(),
        custom: found.commands,
        skills: found
            .skills
            .into_iter()
            .map(|s| (s.name, s.description))
            .collect(),
    };
    let code = crate::ui::repl::Repl::new(agent.ops.clone(), &services, opts)
        .run(agent)
        .await;
    Ok(Exit::Code(code))
}
