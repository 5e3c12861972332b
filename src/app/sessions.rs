//! The agent's `SessionHost` over the session store of the working directory:
//! a new session at the first prompt, a saved one on resume.

use crate::agent::service::{NewSession, OpenedSession, SessionHost};
use crate::agent::{HostedError, ModelInfo};
use crate::session::{SessionInfo, Store};
use std::path::PathBuf;

pub(crate) struct Sessions {
    store: Store,
    cwd: PathBuf,
    /// Values never written to a session file.
    secrets: Vec<String>,
}

impl Sessions {
    pub fn new(cwd: PathBuf, secrets: Vec<String>) -> Sessions {
        Sessions {
            store: Store::for_workdir(&cwd),
            cwd,
            secrets,
        }
    }

    fn info(&self, model: &ModelInfo) -> SessionInfo {
        SessionInfo {
            model: model.model.clone(),
            profile: model.profile.clone(),
            cwd: self.cwd.display().to_string(),
            secrets: self.secrets.clone(),
        }
    }
}

impl SessionHost for Sessions {
    fn create(&mut self, model: &ModelInfo) -> Result<NewSession, HostedError> {
        let (session, warnings) = self.store.create(self.info(model))?;
        Ok(NewSession {
            id: session.id().to_string(),
            sink: Box::new(session),
            warnings,
        })
    }

    fn open(&mut self, query: &str, model: &ModelInfo) -> Result<OpenedSession, HostedError> {
        let info = self.info(model);
        let opened = self
            .store
            .resolve(query)
            .and_then(|id| self.store.open(&id, info))?;
        Ok(OpenedSession {
            id: opened.session.id().to_string(),
            last_model: opened
                .last_turn
                .as_ref()
                .map(|t| (t.model.clone(), t.profile.clone())),
            sink: Box::new(opened.session),
            history: opened.history,
            saved: opened.saved,
            tokens: opened.tokens,
            warnings: opened.warnings,
        })
    }
}
