//! The interactive start, shared by bare `buddy` and `buddy resume`: opens
//! the target, spawns the agent, loads a session to continue if one was
//! named, then runs the REPL on a terminal or the line session otherwise.
//! The REPL itself is `ui::repl`; the services it asks of the app are
//! `app::repl`.

use super::execution::{self, SandboxChoice};
use super::{
    agent_options, agent_setup, approval_rules, build_tools, custom_files, env, exec_options,
    has_tty, project, repl, resume_first, Continue, NO_TERMINAL_REASON,
};
use super::{AppError, Exit, Resolved, EXIT_FAILURE};
use crate::agent;
use crate::agent::protocol::Op;
use crate::cli::TargetArgs;
use crate::config;
use crate::ui::line::{LineEnd, LineOptions};
use crate::ui::resuming::{Notice, Resuming};

/// Bare `buddy` and `buddy resume`: the agent set up once, then the REPL on
/// a terminal, or the line session when input or output is redirected or
/// the terminal is dumb (it cannot take the editor's cursor movement and
/// redraws).
pub(super) async fn interactive(
    resolved: Resolved,
    resume: Option<Continue>,
    target_args: &TargetArgs,
    plan: bool,
) -> Result<Exit, AppError> {
    let editor = resolved.terminal.editor();
    let Resolved {
        settings,
        overrides,
        style,
        cwd,
        parsed,
        terminal,
    } = resolved;
    let choice = SandboxChoice::new(&settings.tools, false);
    let mut execution =
        execution::open(target_args, &settings, editor, choice.mode.is_some(), &cwd).await?;
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
            parsed: parsed.clone(),
        })
    });
    let mut setup = agent_setup(
        &settings,
        &execution,
        rules,
        agent_options(&settings),
        switcher,
        None,
        None,
    )?;
    if let Some(pg) = resume.as_ref().and_then(|r| r.store.clone()) {
        // Continued in the database, under its lease as a server would.
        setup.sessions = Some(Box::new(super::serve_pg::PgSessions {
            pg,
            cwd: cwd.display().to_string(),
            secrets: crate::redact::known().all().to_vec(),
            origin: None,
        }));
    }
    if let Some(sessions) = setup.sessions.as_mut() {
        sessions.set_origin("repl");
    }
    let allowed = setup.allowed.clone();
    let mut agent = agent::spawn(setup);
    if plan {
        // Its `PlanMode` reply reaches the front end with the first events.
        let _ = agent.ops.send(Op::SetPlanMode { on: true }).await;
    }
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
                exec: exec_options(&settings, style, terminal),
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
        parsed,
        overrides: overrides.clone(),
        allowed: allowed.clone(),
        cwd: cwd.clone(),
    };
    let opts = crate::ui::repl::ReplOptions {
        style,
        tools: build_tools(&settings, execution.tmux(), execution.sandbox.clone(), &cwd)
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
        cwd,
        notify: crate::ui::repl::notify::NotifyOptions {
            after: std::time::Duration::from_secs(settings.ui.notify_after),
            command: settings.ui.notify.clone(),
            terminal: crate::ui::repl::notify::Terminal::detect(&env),
        },
    };
    let code = crate::ui::repl::Repl::new(agent.ops.clone(), &services, opts)
        .run(agent)
        .await;
    Ok(Exit::Code(code))
}
