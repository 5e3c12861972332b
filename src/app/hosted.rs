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
use crate::provider::http::Transports;
use crate::ui::style::Style;

/// What every agent of a long-running front end is built from.
pub(crate) struct Hosted {
    pub settings: Settings,
    pub execution: Execution,
    /// One HTTP client for every agent's model requests.
    pub transports: Transports,
}

impl Hosted {
    /// The settings of this directory, and the target the tools run on,
    /// confined as the settings say (nobody auto-approves here).
    pub async fn load(
        overrides: &CliOverrides,
        target: &TargetArgs,
    ) -> Result<(Hosted, Style), AppError> {
        let Resolved {
            settings, style, ..
        } = load_settings(overrides).await?;
        let execution = confined(target, &settings, style, false).await?;
        let hosted = Hosted {
            settings,
            execution,
            transports: Transports::default(),
        };
        Ok((hosted, style))
    }

    /// A new agent's set-up, with the settings' approval rules.
    pub fn setup(&self) -> Result<AgentSetup, AppError> {
        setup_for(
            &self.settings,
            &self.execution,
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
) -> Result<Execution, AppError> {
    let choice = SandboxChoice::new(&settings.tools, auto_approved);
    let mut execution = execution::open(target, settings, false, choice.mode.is_some()).await?;
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
