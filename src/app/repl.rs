//! Wires the interactive REPL (`ui::repl`) to the rest of buddy: the
//! `ReplHost` it asks for status, sessions and model switches.

use super::{attach_new_session, client_for, resume_into, session_table, workdir};
use crate::agent::{tokens, Agent};
use crate::config::{self, CliOverrides, Settings};
use crate::session::Store;
use crate::ui::repl::ReplHost;
use crate::ui::style::Style;
use std::sync::Arc;

pub(crate) struct Host {
    pub settings: Settings,
    pub overrides: CliOverrides,
    pub style: Style,
    pub tools: Vec<String>,
    /// The session being written, once the first prompt started one.
    pub session: Option<String>,
    /// Saving failed once; not retried for every prompt.
    pub unsaved: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl ReplHost for Host {
    fn status(&self, agent: &Agent) -> String {
        let t = agent.tracker();
        let api = &self.settings.api;
        format!(
            "model      {} (profile {})\nendpoint   {}\ntools      {}\nsession    {}\ntokens     {} prompt + {} completion = {} this session; last request {} + {}{}",
            api.model,
            api.profile,
            api.base_url,
            if self.tools.is_empty() { "none".to_string() } else { self.tools.join(", ") },
            self.session.as_deref().unwrap_or("(not saved yet)"),
            t.total_prompt_tokens,
            t.total_completion_tokens,
            t.session_total(),
            t.last_prompt_tokens,
            t.last_completion_tokens,
            t.cache_note()
        )
    }

    fn context(&self, agent: &Agent) -> String {
        let t = agent.tracker();
        let estimate = tokens::estimate_messages(agent.messages());
        let used = estimate.max(t.last_prompt_tokens + t.last_completion_tokens);
        format!(
            "context    ~{used} of {} tokens ({:.0}%) in {} messages\ntotals     {} prompt + {} completion tokens this session{}",
            t.context_limit,
            t.fill(used) * 100.0,
            agent.messages().len(),
            t.total_prompt_tokens,
            t.total_completion_tokens,
            t.cache_note()
        )
    }

    fn sessions(&self) -> String {
        let store = Store::for_workdir(&workdir());
        match store.list() {
            Ok((list, errors)) => {
                let mut out = if list.is_empty() {
                    format!("no saved sessions in {}", store.dir().display())
                } else {
                    session_table(&list).trim_end().to_string()
                };
                for e in errors {
                    out.push_str(&format!("\nwarning: {e}"));
                }
                out
            }
            Err(e) => e.to_string(),
        }
    }

    fn ensure_session(&mut self, agent: &mut Agent) -> Option<String> {
        if self.session.is_some() || self.unsaved {
            return None;
        }
        match attach_new_session(agent, &self.settings) {
            Ok((id, warnings)) => {
                self.session = Some(id);
                (!warnings.is_empty()).then(|| warnings.join("; "))
            }
            Err(e) => {
                self.unsaved = true;
                Some(e)
            }
        }
    }

    fn resume_session(&mut self, agent: &mut Agent, query: &str) -> Result<String, String> {
        let resumed =
            resume_into(agent, &self.settings, query, self.style).map_err(|e| e.to_string())?;
        self.session = Some(resumed.id);
        let mut out: Vec<String> = resumed
            .warnings
            .iter()
            .map(|w| format!("warning: {w}"))
            .collect();
        out.extend(resumed.note);
        out.push(resumed.summary);
        Ok(out.join("\n"))
    }

    fn new_session(&mut self, agent: &mut Agent) -> String {
        agent.reset();
        self.session = None;
        self.unsaved = false;
        "new session: the conversation starts over and is saved from its first prompt".into()
    }

    fn profiles(&self) -> Vec<String> {
        self.settings.profiles.clone()
    }

    fn current_profile(&self) -> Option<String> {
        Some(self.settings.api.profile.clone())
    }

    fn login_target(
        &self,
        target: Option<&str>,
    ) -> Result<(crate::auth::Issuer, crate::auth::store::AuthStore), String> {
        let issuer = super::login_issuer(target, &self.overrides)?;
        Ok((issuer, super::auth_store()?))
    }

    fn after_login(&mut self, agent: &mut Agent) -> Option<String> {
        self.settings.api.login.as_ref()?;
        let current = self.settings.api.profile.clone();
        match self.switch_model(agent, &current) {
            Ok(_) => Some(format!("profile {current} now uses the new login")),
            Err(e) => Some(e),
        }
    }

    fn switch_model(&mut self, agent: &mut Agent, choice: &str) -> Result<String, String> {
        let profiles = self.profiles();
        let name = match choice.parse::<usize>() {
            Ok(i) if (1..=profiles.len()).contains(&i) => profiles[i - 1].clone(),
            Ok(i) => return Err(format!("no profile number {i}; /model lists them")),
            Err(_) if profiles.iter().any(|p| p == choice) => choice.to_string(),
            Err(_) => return Err(format!("no profile named \"{choice}\"; /model lists them")),
        };
        let overrides = CliOverrides {
            model: Some(name),
            ..self.overrides.clone()
        };
        let settings = config::load(&workdir(), &env, &overrides).map_err(|e| e.to_string())?;
        let client = client_for(&settings)?;
        let limit = tokens::context_limit(settings.api.context_limit, &settings.api.model);
        agent.set_client(Arc::new(client), limit);
        agent.note_model(&settings.api.model, &settings.api.profile);
        let mut text = format!(
            "now using {} (profile {}) at {}",
            settings.api.model, settings.api.profile, settings.api.base_url
        );
        if let Some(note) = foreign_items_note(agent.messages(), settings.api.protocol) {
            text.push('\n');
            text.push_str(&note);
        }
        self.settings = settings;
        Ok(text)
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
    let foreign = messages.iter().any(|m| {
        m.extra
            .keys()
            .any(|k| k.starts_with("buddy_") && (own.is_empty() || !k.starts_with(own)))
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
}
