//! Wires the interactive REPL (`ui::repl`) to the rest of buddy: the
//! `ReplServices` it asks for logins, model lists, saved approval rules and
//! MCP servers (typed answers; the REPL words them), and the agent's
//! `ModelSwitcher` for `/model` (the one place a `/model` choice is
//! resolved). Each resolves the config file start-up parsed (`Parsed`)
//! with other overrides; none reads or parses it again.

use super::client_for;
use super::setup::Parsed;
use crate::agent::allowlist::AllowRule;
use crate::agent::service::{ModelSwitcher, Switched};
use crate::agent::{tokens, HostedError};
use crate::config::{self, CliOverrides, Settings};
use crate::mcp::McpError;
use crate::ui::repl::{ModelsError, ReplServices, RuleError};
use std::path::PathBuf;
use std::sync::Arc;

/// The REPL's services: the config file as start-up parsed it and the
/// overrides the settings were resolved with, for the login and other
/// profiles' model lists (resolved again, never read again); the agent's
/// allow list, for remembered rules.
pub(crate) struct Services {
    pub parsed: Arc<Parsed>,
    pub overrides: CliOverrides,
    pub allowed: crate::agent::allowlist::SharedAllowList,
    /// The working directory read at start-up: where `/export` writes.
    pub cwd: PathBuf,
}

impl ReplServices for Services {
    fn remember(&self, prefix: &str) -> Result<PathBuf, RuleError> {
        super::approvals::remember(&self.allowed, prefix)
    }

    fn forget(&self, n: usize) -> Result<AllowRule, RuleError> {
        super::approvals::forget(&self.allowed, n)
    }

    fn export(&self, id: &str, file: Option<&str>) -> Result<PathBuf, String> {
        let dir = &self.cwd;
        let path = match file {
            Some(f) => dir.join(f),
            None => dir.join(format!("buddy-{id}.md")),
        };
        let store = crate::session::Store::for_workdir(dir);
        let bytes = super::export::render(&store, id, crate::cli::ExportFormat::Markdown)
            .map_err(|e| e.to_string())?;
        super::export::write_private(&path, &bytes).map_err(|e| e.to_string())?;
        Ok(path)
    }

    fn mcp(&self) -> Option<Vec<crate::mcp::ServerReport>> {
        super::mcp::running().map(|servers| servers.report())
    }

    fn mcp_resource(&self, mention: &str) -> Option<Result<String, McpError>> {
        super::mcp::resource(mention)
    }

    fn mcp_prompt(&self, name: &str, args: &str) -> Option<Result<String, McpError>> {
        super::mcp::prompt(name, args)
    }

    fn uses_login(&self, profile: &str) -> bool {
        self.parsed
            .file
            .models
            .get(profile)
            .is_some_and(|p| p.auth == config::AuthMode::Login)
    }

    fn server_models(&self, profile: &str) -> crate::ui::repl::ModelList {
        let overrides = CliOverrides {
            profile: Some(profile.to_string()),
            ..self.overrides.clone()
        };
        let client = self
            .parsed
            .resolve(&overrides)
            .map_err(ModelsError::Config)
            .and_then(|s| client_for(&s, None).map_err(|e| ModelsError::Client(e.to_string())));
        Box::pin(async move {
            let models = client?.list_models().await?;
            Ok(models.into_iter().map(|m| m.id).collect())
        })
    }

    fn login(
        &self,
        target: Option<&str>,
        say: crate::ui::repl::LoginLines,
    ) -> crate::ui::repl::LoginRunning {
        let target = target.map(String::from);
        let overrides = self.overrides.clone();
        let parsed = self.parsed.clone();
        Box::pin(async move {
            super::login::sign_in(target.as_deref(), &parsed.file, &overrides, &*say).await
        })
    }
}

/// Builds the client for another profile when the agent is asked to switch.
pub(crate) struct Switcher {
    pub settings: Settings,
    pub overrides: CliOverrides,
    /// The config file start-up parsed: a switch resolves it again.
    pub parsed: Arc<Parsed>,
}

impl ModelSwitcher for Switcher {
    fn switch(
        &mut self,
        choice: &str,
        history: &[crate::wire::Message],
    ) -> Result<Switched, HostedError> {
        let profiles = &self.settings.profiles;
        let usage = |m: String| Box::new(super::AppError::Usage(m));
        let overrides = match choice.parse::<usize>() {
            Ok(i) if (1..=profiles.len()).contains(&i) => CliOverrides {
                model: Some(profiles[i - 1].clone()),
                ..self.overrides.clone()
            },
            Ok(i) => return Err(usage(format!("no profile number {i}; /model lists them"))),
            Err(_) if profiles.iter().any(|p| p == choice) => CliOverrides {
                model: Some(choice.to_string()),
                ..self.overrides.clone()
            },
            // Anything else is a model id for the profile in use, as with `-m`.
            Err(_) => CliOverrides {
                profile: Some(self.settings.api.profile.clone()),
                model: Some(choice.to_string()),
                ..self.overrides.clone()
            },
        };
        let settings = self.parsed.resolve(&overrides)?;
        let client = client_for(&settings, None)?;
        let context_limit = tokens::context_limit(settings.api.context_limit, &settings.api.model);
        let note = foreign_items_note(history, settings.api.protocol);
        let model = super::model_info(&settings);
        self.settings = settings;
        Ok(Switched {
            client: Arc::new(client),
            context_limit,
            model,
            note,
        })
    }
}

/// The one-time note for a switch of protocol: reasoning another protocol
/// keeps for its own round trips (`buddy_<protocol>_…` fields) stays in the
/// history but is not sent to this one.
fn foreign_items_note(
    messages: &[crate::wire::Message],
    now: config::ApiProtocol,
) -> Option<String> {
    let own = match now {
        config::ApiProtocol::Completions => "",
        config::ApiProtocol::Responses => "buddy_responses_",
        config::ApiProtocol::Messages => "buddy_anthropic_",
    };
    // Only the protocols' own prefixes: other `buddy_` keys (the form the
    // user typed, the turn number) are buddy's bookkeeping, not reasoning.
    const PROTOCOL_PREFIXES: [&str; 2] = ["buddy_responses_", "buddy_anthropic_"];
    let foreign = messages.iter().any(|m| {
        m.extra.keys().any(|k| {
            PROTOCOL_PREFIXES
                .iter()
                .any(|p| *p != own && k.starts_with(p))
        })
    });
    foreign.then(|| {
        "note: reasoning kept from the previous model's protocol is not sent to this one; the conversation and tool results carry over".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Message;

    #[test]
    fn a_switch_notes_foreign_reasoning_once_per_switch() {
        let mut m = Message::assistant("hi");
        m.extra
            .insert("buddy_anthropic_thinking".into(), serde_json::json!([]));
        let history = vec![Message::user("q"), m];
        assert!(foreign_items_note(&history, config::ApiProtocol::Completions).is_some());
        assert!(foreign_items_note(&history, config::ApiProtocol::Responses).is_some());
        assert!(foreign_items_note(&history, config::ApiProtocol::Messages).is_none());
        assert!(foreign_items_note(&history[..1], config::ApiProtocol::Completions).is_none());
    }

    #[test]
    fn buddys_own_bookkeeping_keys_are_not_taken_for_reasoning() {
        // What `!git status` and a numbered turn leave in the history.
        let typed = Message::user("I ran this command myself").with_shown("!git status");
        let mut answer = Message::assistant("ok");
        answer
            .extra
            .insert(crate::agent::rewind::TURN_KEY.into(), serde_json::json!(1));
        let history = vec![typed, answer];
        for protocol in [
            config::ApiProtocol::Completions,
            config::ApiProtocol::Responses,
            config::ApiProtocol::Messages,
        ] {
            assert!(foreign_items_note(&history, protocol).is_none());
        }
    }
}
