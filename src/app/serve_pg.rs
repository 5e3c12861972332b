//! `buddy serve --store postgres://…`: the agent's `SessionHost` and the
//! server's event relay over the PostgreSQL session store
//! (`session::postgres`), for several instances sharing sessions.

use super::sessions::code_of;
use crate::agent::service::{NewSession, OpenError, OpenedSession, SessionHost, SessionListing};
use crate::agent::{HostedError, ModelInfo};
use crate::serve::relay::{Relay, MAX_CATCH_UP};
use crate::session::postgres::Pg;
use crate::session::SessionInfo;
use std::sync::Arc;
use tokio::sync::{broadcast, watch};

/// The sessions of the database, as the agent asks for them.
pub(crate) struct PgSessions {
    pub pg: Arc<Pg>,
    pub cwd: String,
    /// Values never written to a session.
    pub secrets: Vec<String>,
    pub origin: Option<&'static str>,
}

impl PgSessions {
    fn info(&self, model: &ModelInfo) -> SessionInfo {
        SessionInfo {
            model: model.model.clone(),
            profile: model.profile.clone(),
            cwd: self.cwd.clone(),
            secrets: self.secrets.clone(),
            origin: self.origin.map(String::from),
        }
    }
}

impl SessionHost for PgSessions {
    fn set_origin(&mut self, origin: &'static str) {
        self.origin = Some(origin);
    }

    fn create(&mut self, model: &ModelInfo) -> Result<NewSession, HostedError> {
        let session = self.pg.create(self.info(model))?;
        Ok(NewSession {
            id: session.id().to_string(),
            sink: Box::new(session),
            warnings: Vec::new(),
        })
    }

    fn open(&mut self, query: &str, model: &ModelInfo) -> Result<OpenedSession, OpenError> {
        let info = self.info(model);
        let opened = self
            .pg
            .resolve(query)
            .and_then(|id| self.pg.open(&id, info))
            .map_err(|e| OpenError {
                code: code_of(&e),
                message: e.to_string(),
            })?;
        Ok(super::sessions::opened_session(opened))
    }

    fn list(&self) -> Result<SessionListing, HostedError> {
        Ok(super::sessions::list_database(&self.pg)?)
    }
}

/// The server's events through the database: rows and NOTIFY.
pub(crate) struct PgRelay(pub Arc<Pg>);

#[async_trait::async_trait]
impl Relay for PgRelay {
    fn append(&self, session: &str, data: String) {
        self.0.append_event(session, data);
    }

    fn last_id(&self, session: &str) -> Result<u64, HostedError> {
        Ok(self.0.last_event(session)?)
    }

    async fn between(
        &self,
        session: &str,
        after: u64,
        before: u64,
    ) -> Result<Vec<(u64, String)>, HostedError> {
        Ok(self
            .0
            .events_between(session, after, before, MAX_CATCH_UP)
            .await?)
    }

    fn announced(&self) -> broadcast::Receiver<(String, u64)> {
        self.0.announced()
    }

    fn reconnected(&self) -> watch::Receiver<u64> {
        self.0.reconnected()
    }

    fn failures(&self) -> u64 {
        self.0.failed_events()
    }
}
