//! The composition root: turns parsed arguments into the command they name.
//! Settings are resolved once (`setup::load_settings`) into the value the
//! rest reads; `setup` turns them into an agent setup; each subcommand that
//! is not a conversation has a file of its own (login, models, sessions_cmd,
//! trust, mcp_cmd, shell_help); the conversation front ends (exec, the REPL,
//! the line session, resume) are driven from here. Every command returns an
//! `Exit` or an `AppError` (error.rs); `main` alone turns those into exit
//! codes. The only module that knows all the others; none of them knows it.

use crate::agent::protocol::{ApprovalPolicy, Event, EventKind, Op};
use crate::agent::{self, AgentHandle};
use crate::cli::{Cli, Command, ExecArgs, ResumeArgs, TargetArgs};
use crate::config::{self, CliOverrides};
use crate::ui::exec::{ExecFrontEnd, ExecOutcome};
use crate::ui::json::JsonFrontEnd;
use crate::ui::style::Style;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

mod approvals;
mod custom;
mod discovery;
mod error;
mod execution;
mod login;
mod mcp;
mod mcp_cmd;
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
        None => interactive(&overrides, None, &cli.global.target).await,
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
    let mut setup = agent_setup(&settings, &execution, rules, options, None, None)?;
    setup.output = output.clone();
    let mut agent = agent::spawn(setup);
    // exec has one chance to offer the tools: the servers' start (each
    // bounded by its startup_timeout_secs) is awaited before the request.
    if let Some(servers) = mcp::running() {
        servers.wait_ready().await;
    }
    let mut json = args.json.then(|| JsonFrontEnd::new(style));
    if let Some(j) = json.as_mut() {
        j.hello();
    }
    if let Some(query) = &args.resume {
        let mut seen = |ev: &Event| {
            if let Some(j) = json.as_mut() {
                j.event(ev);
            }
        };
        let what = Continue {
            query: query.clone(),
            fork: false,
        };
        resume_first(&mut agent, &what, style, Notice::Notes, &mut seen).await?;
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

/// What `resume_first` prints of the resumed session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Notice {
    /// Nothing: the caller shows the event (the REPL replays it).
    Quiet,
    /// Warnings and the model note.
    Notes,
    /// Those and the last exchange.
    LastExchange,
}

/// Loads session `query` into the agent before anything else, telling the
/// user what `notice` says; returns the `SessionResumed` event.
async fn resume_first(
    agent: &mut AgentHandle,
    what: &Continue,
    style: Style,
    notice: Notice,
    seen: &mut dyn FnMut(&Event),
) -> Result<Event, AppError> {
    let query = what.query.clone();
    let op = if what.fork {
        Op::Fork { query: Some(query) }
    } else {
        Op::Resume { query }
    };
    let _ = agent.ops.send(op).await;
    while let Some(ev) = agent.events.recv().await {
        seen(&ev);
        match &ev.kind {
            EventKind::SessionForked { id, from, .. } => eprintln!(
                "{}",
                style.dim(&format!(
                    "forked session {from}: this conversation goes on as session {id}; {from} stays as it was"
                ))
            ),
            EventKind::SessionResumed { warnings, note, .. } => {
                if notice == Notice::LastExchange {
                    let text = crate::ui::resumed_text(&ev.kind, style).unwrap_or_default();
                    eprintln!("{text}");
                } else if notice == Notice::Notes {
                    for w in warnings {
                        eprintln!("{} {w}", style.warning("warning:"));
                    }
                    if let Some(n) = note {
                        eprintln!("{}", style.dim(n));
                    }
                }
                return Ok(ev);
            }
            EventKind::Error { message, .. } => return Err(AppError::Usage(message.clone())),
            _ => {}
        }
    }
    Err(AppError::Failed("the agent stopped unexpectedly".into()))
}

fn workdir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// `buddy resume`: the session's history, then the conversation on it.
/// Without an id on a terminal, a picker asks which session: Esc cancels
/// (exit 0, nothing was wrong), Ctrl-C interrupts (130).
async fn resume(
    args: ResumeArgs,
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let query = match (args.last, args.id) {
        (true, _) => "last".to_string(),
        (false, Some(id)) => id,
        (false, None) if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) => return Err(AppError::Usage(
            "name the session to continue: `buddy resume ID` or `buddy resume --last` (`buddy sessions` lists them)".into(),
        )),
        (false, None) => match pick::choose(Style::detect(picker_color(overrides))).await? {
            crate::ui::session_picker::Picked::Session(id) => id,
            crate::ui::session_picker::Picked::Cancelled => {
                eprintln!("no session resumed");
                return Ok(Exit::Ok);
            }
            crate::ui::session_picker::Picked::Interrupted => return Ok(Exit::Interrupted),
            crate::ui::session_picker::Picked::Signalled(code) => return Ok(Exit::Code(code)),
        },
    };
    interactive(
        overrides,
        Some(Continue {
            query,
            fork: args.fork,
        }),
        target_args,
    )
    .await
}

/// The saved session a conversation starts from: resumed, or forked first.
pub(crate) struct Continue {
    query: String,
    fork: bool,
}

/// Whether the picker may use colour: it is drawn before the settings are
/// loaded (the chosen session decides nothing about them, but loading them
/// may ask questions), so only the config file's `display.color` is read. A
/// file that cannot be read or parsed leaves the default; the error is
/// reported when the settings are loaded right after.
fn picker_color(overrides: &CliOverrides) -> bool {
    !overrides.no_color
        && config::load_file(&workdir(), &env, overrides).map_or(true, |(f, _)| f.display.color)
}

/// Bare `buddy` and `buddy resume`: the REPL on a terminal, the line session
/// when input or output is redirected or the terminal is dumb.
async fn interactive(
    overrides: &CliOverrides,
    resume: Option<Continue>,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    // A dumb terminal cannot take the editor's cursor movement and redraws:
    // it gets the plain line session, as a pipe does.
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
        || crate::ui::style::dumb_terminal()
    {
        return line_session(overrides, resume, target_args).await;
    }
    let Resolved {
        settings,
        overrides,
        style,
    } = load_settings(overrides).await?;
    let overrides = &overrides;
    let choice = SandboxChoice::new(&settings.tools, false);
    let mut execution =
        execution::open(target_args, &settings, true, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    let switcher = repl::Switcher {
        settings: settings.clone(),
        overrides: overrides.clone(),
    };
    let setup = agent_setup(
        &settings,
        &execution,
        approval_rules(&settings),
        agent_options(&settings),
        Some(Box::new(switcher)),
        None,
    )?;
    let allowed = setup.allowed.clone();
    let mut agent = agent::spawn(setup);
    let mut banner = format!(
        "{} {} via {} — /help for commands, Ctrl-D to quit",
        style.actor("buddy"),
        settings.api.model,
        settings.api.base_url
    );
    if !execution.target.is_local() {
        banner.push_str(&format!(
            "\n{}",
            style.dim(&format!("tools run on {}", execution.target.actor()))
        ));
    }
    if let Some(a) = &execution.attach {
        banner.push_str(&format!("\n{}", style.dim(a)));
    }
    if let Some(found) = std::env::current_dir()
        .ok()
        .and_then(|d| project::find(&d))
        .filter(|p| !p.files.is_empty())
    {
        let cwd = std::env::current_dir().unwrap_or_default();
        let names: Vec<String> = found
            .files
            .iter()
            .map(|f| f.strip_prefix(&cwd).unwrap_or(f).display().to_string())
            .collect();
        banner.push_str(&format!(
            "\n{}",
            style.dim(&format!(
                "project instructions from {}",
                crate::text::visible(&names.join(", "))
            ))
        ));
    }
    let found = custom_files(&settings, &workdir());
    for note in &found.notes {
        banner.push_str(&format!("\n{}", style.dim(&format!("note: {note}"))));
    }
    let mut resumed = None;
    if let Some(query) = &resume {
        match resume_first(&mut agent, query, style, Notice::Quiet, &mut |_| {}).await {
            Ok(ev) => resumed = Some(ev),
            Err(e) => {
                agent.shutdown().await;
                return Err(e);
            }
        };
    }
    let mut host = repl::Host {
        tools: build_tools(&settings, execution.tmux(), execution.sandbox.clone())
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
        settings: settings.clone(),
        overrides: overrides.clone(),
        allowed,
    };
    let opts = crate::ui::repl::ReplOptions {
        style,
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
    let code = crate::ui::repl::Repl::new(agent, &mut host, opts)
        .run()
        .await;
    Ok(Exit::Code(code))
}

/// A plain line-by-line conversation when input or output is redirected or
/// the terminal is dumb (`TERM=dumb`): one prompt per line, Ctrl-D to quit.
async fn line_session(
    overrides: &CliOverrides,
    resume: Option<Continue>,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    use tokio::io::AsyncBufReadExt;
    let Resolved {
        settings, style, ..
    } = load_settings(overrides).await?;
    let choice = SandboxChoice::new(&settings.tools, false);
    let mut execution =
        execution::open(target_args, &settings, false, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    if let Some(a) = &execution.attach {
        eprintln!("{}", style.dim(a));
    }
    let mut rules = approval_rules(&settings);
    if !has_tty() {
        rules.no_approver_reason = Some(NO_TERMINAL_REASON.into());
    }
    let mut agent = agent::spawn(agent_setup(
        &settings,
        &execution,
        rules,
        agent_options(&settings),
        None,
        None,
    )?);
    if let Some(query) = &resume {
        if let Err(e) =
            resume_first(&mut agent, query, style, Notice::LastExchange, &mut |_| {}).await
        {
            agent.shutdown().await;
            return Err(e);
        }
    }
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "{} {} via {} — one prompt per line, Ctrl-D to quit",
            style.actor("buddy"),
            settings.api.model,
            settings.api.base_url
        );
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut last = Exit::Ok;
    let mut failed = None;
    loop {
        if interactive {
            eprint!("{}", style.actor("> "));
        }
        let line = match lines.next_line().await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                failed = Some(AppError::Failed(format!("cannot read input: {e}")));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        if matches!(line.trim(), "/quit" | "/exit" | "/q") {
            break;
        }
        let _ = agent
            .ops
            .send(Op::Prompt {
                text: line,
                images: Vec::new(),
            })
            .await;
        let outcome = ExecFrontEnd::new(exec_options(&settings, style))
            .run(&mut agent)
            .await;
        last = Exit::Ok;
        match outcome {
            ExecOutcome::Answered(_) => {}
            ExecOutcome::Interrupted => {
                // The user stopped waiting; the run still ends before the next prompt.
                wait_for_run_end(&mut agent).await;
            }
            ExecOutcome::Failed(m) | ExecOutcome::LimitReached(m) => {
                eprintln!("{} {}", style.error("error:"), crate::text::visible(&m));
                last = Exit::Code(EXIT_FAILURE);
            }
        }
    }
    agent.shutdown().await;
    match failed {
        Some(e) => Err(e),
        None => Ok(last),
    }
}

/// Drops events until the current run has finished.
async fn wait_for_run_end(agent: &mut AgentHandle) {
    while let Some(ev) = agent.events.recv().await {
        if matches!(ev.kind, EventKind::RunFinished { .. }) {
            return;
        }
    }
}
