//! The set-up shared by the front ends that build their agents themselves,
//! one per session or call, from one process (`buddy serve`, `buddy acp`,
//! `buddy mcp-server`): where their tools run, confined as the settings
//! say, and the agent set-up each agent is built from.

use super::execution::{self, Execution, SandboxChoice};
use super::setup::{agent_options, agent_setup, approval_rules, load_settings, Resolved};
use super::AppError;
use crate::agent::control::ApprovalRules;
use crate::agent::service::AgentSetup;
use crate::cli::TargetArgs;
use crate::config::{CliOverrides, Settings};
use crate::host::sandbox::{Policy, Sandbox};
use crate::provider::http::Transports;
use crate::ui::style::Style;
use std::path::Path;
use std::sync::Arc;

/// What every agent of a long-running front end is built from.
pub(crate) struct Hosted {
    pub settings: Settings,
    pub execution: Execution,
    /// One HTTP client for every agent's model requests.
    pub transports: Transports,
    /// The sandbox the settings ask for, re-rooted in each session's
    /// directory.
    choice: SandboxChoice,
}

impl Hosted {
    /// The settings of this directory, and the target the tools run on,
    /// confined as the settings say (nobody auto-approves here).
    pub async fn load(
        overrides: &CliOverrides,
        target: &TargetArgs,
        cwd: &Path,
    ) -> Result<(Hosted, Style), AppError> {
        let Resolved {
            settings, style, ..
        } = load_settings(overrides, cwd).await?;
        let execution = confined(target, &settings, style, false, cwd).await?;
        let hosted = Hosted {
            choice: SandboxChoice::new(&settings.tools, false),
            settings,
            execution,
            transports: Transports::default(),
        };
        Ok((hosted, style))
    }

    /// The directory the process started in, where sessions are kept
    /// unless a session names its own.
    pub fn workdir(&self) -> &Path {
        &self.execution.workdir
    }

    /// A new agent's set-up in the start directory, with the settings'
    /// approval rules.
    pub fn setup(&self) -> Result<AgentSetup, AppError> {
        self.setup_in(self.workdir())
    }

    /// A new agent's set-up working in `cwd`: its tools, project files and
    /// session store are that directory's, and its sandbox (when there is
    /// one) lets it write there instead of the start directory.
    pub fn setup_in(&self, cwd: &Path) -> Result<AgentSetup, AppError> {
        let e = &self.execution;
        let sandbox = match (&e.sandbox, self.choice.mode) {
            (Some(_), Some(mode)) if cwd != e.workdir => Some(Arc::new(Sandbox::new(
                Policy::for_workdir(mode, cwd, self.choice.network),
            ))),
            (s, _) => s.clone(),
        };
        let here = Execution {
            target: e.target.clone(),
            pane: e.pane.clone(),
            label: e.label.clone(),
            attach: e.attach.clone(),
            sandbox,
            workdir: cwd.to_path_buf(),
        };
        setup_for(
            &self.settings,
            &here,
            approval_rules(&self.settings),
            &self.transports,
        )
    }
}

/// The target the tools run on, confined as the settings say;
/// `auto_approved` confines by default (nobody reviews the commands).
pub(crate) async fn confined(
    target: &TargetArgs,
    settings: &Settings,
    style: Style,
    auto_approved: bool,
    cwd: &Path,
) -> Result<Execution, AppError> {
    let choice = SandboxChoice::new(&settings.tools, auto_approved);
    let mut execution =
        execution::open(target, settings, false, choice.mode.is_some(), cwd).await?;
    execution::confine(&mut execution, choice, style)?;
    Ok(execution)
}

/// An agent's set-up for a front end without a terminal: no model switcher,
/// the shared HTTP client.
pub(crate) fn setup_for(
    settings: &Settings,
    execution: &Execution,
    rules: ApprovalRules,
    transports: &Transports,
) -> Result<AgentSetup, AppError> {
    agent_setup(
        settings,
        execution,
        rules,
        agent_options(settings),
        None,
        Some(transports),
        None,
    )
}
