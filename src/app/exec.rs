//! `buddy exec`: one prompt, answered by the agent and printed (as text or
//! as `--json` events), with the limits and output files its flags ask for.
//! Settings, the target and the agent's setup come from `setup` and
//! `execution`; the rendering is `ui::exec` and `ui::json`. Resuming a saved
//! session first is the shared `resume_first`.

use super::execution::{self, SandboxChoice};
use super::{
    agent_options, agent_setup, approval_rules, custom_files, exec_options, has_tty, load_settings,
    mcp, model_info, AppError, Exit, Resolved,
};
use super::{output, prompt, resume_first, workdir, Continue, NO_TERMINAL_REASON};
use crate::agent::protocol::{ApprovalPolicy, Op};
use crate::agent::{self, AgentHandle};
use crate::cli::{ExecArgs, TargetArgs};
use crate::config::CliOverrides;
use crate::ui::exec::{ExecFrontEnd, ExecOutcome};
use crate::ui::json::JsonFrontEnd;
use crate::ui::resuming::{Notice, Resuming};
use std::time::Duration;

pub(super) async fn exec(
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
        settings,
        style,
        cwd,
        terminal,
        ..
    } = load_settings(overrides, &workdir()).await?;
    if !images.is_empty() && !settings.api.images {
        return Err(AppError::Usage(model_info(&settings).images_refused()));
    }
    if let Some(max) = args.max_cost {
        output::check_max_cost(&model_info(&settings), max)?;
    }
    let choice = SandboxChoice::new(&settings.tools, args.dangerously_auto_approve);
    let mut execution =
        execution::open(&target_args, &settings, false, choice.mode.is_some(), &cwd).await?;
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
    let found = custom_files(&settings, &cwd);
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
    if let Some(sessions) = setup.sessions.as_mut() {
        sessions.set_origin("exec");
    }
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
            store: None,
        };
        resume_first(
            &mut agent,
            &what,
            Resuming::new(style, Notice::Notes, json.as_mut()),
        )
        .await?;
    }
    if args.plan {
        let _ = agent.ops.send(Op::SetPlanMode { on: true }).await;
    }
    let asked = agent
        .ops
        .send(Op::Prompt {
            text: prompt,
            images,
        })
        .await
        .ok();
    let outcome = match json {
        Some(j) => {
            j.awaiting(asked)
                .ending_at_plan(args.plan)
                .run(&mut agent)
                .await
        }
        None => {
            let mut opts = exec_options(&settings, style, terminal);
            opts.plain_answer = output.is_some();
            ExecFrontEnd::new(opts)
                .awaiting(asked)
                .ending_at_plan(args.plan)
                .run(&mut agent)
                .await
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
