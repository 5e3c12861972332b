//! The agent's `SessionHost` over the session store of the working directory:
//! a new session at the first prompt, a saved one on resume; and `list`, the
//! one way buddy lists saved sessions (`buddy sessions`, the REPL's
//! `Op::ListSessions`, `buddy serve`'s `GET /api/sessions`), of this
//! directory's files or of a session database (`list_database`).

use crate::agent::protocol::{ErrorCode, SessionSummary};
use crate::agent::service::{
    ForkSource, Forked, NewSession, OpenError, OpenedSession, SessionHost, SessionListing,
};
use crate::agent::{HostedError, ModelInfo};
use crate::session::postgres::Pg;
use crate::session::{out_of_resources, SessionError, SessionInfo, Store, Summary};
use std::path::{Path, PathBuf};

/// The saved sessions of `workdir`, most recently used first; files that
/// cannot be read are named in `warnings` and do not hide the others.
pub(crate) fn list(workdir: &Path) -> Result<SessionListing, SessionError> {
    let store = Store::for_workdir(workdir);
    let (list, errors) = store.list()?;
    Ok(SessionListing {
        sessions: list.into_iter().map(summary).collect(),
        dir: store.dir().display().to_string(),
        warnings: errors.iter().map(ToString::to_string).collect(),
    })
}

/// Every session of the database, most recently used first.
pub(crate) fn list_database(pg: &Pg) -> Result<SessionListing, SessionError> {
    Ok(SessionListing {
        sessions: pg.list()?.into_iter().map(summary).collect(),
        dir: "postgres".into(),
        warnings: Vec::new(),
    })
}

/// A stored session's summary as the agent's listings carry it.
fn summary(s: Summary) -> SessionSummary {
    SessionSummary {
        id: s.id,
        used: s.used,
        messages: s.messages,
        model: s.model,
        title: s.title,
        origin: s.origin,
    }
}

pub(crate) struct Sessions {
    store: Store,
    cwd: PathBuf,
    /// Values never written to a session file.
    secrets: Vec<String>,
    origin: Option<&'static str>,
}

impl Sessions {
    pub fn new(cwd: PathBuf, secrets: Vec<String>) -> Sessions {
        Sessions {
            store: Store::for_workdir(&cwd),
            cwd,
            secrets,
            origin: None,
        }
    }

    fn info(&self, model: &ModelInfo) -> SessionInfo {
        SessionInfo {
            model: model.model.clone(),
            profile: model.profile.clone(),
            cwd: self.cwd.display().to_string(),
            secrets: self.secrets.clone(),
            origin: self.origin.map(String::from),
        }
    }
}

impl SessionHost for Sessions {
    fn set_origin(&mut self, origin: &'static str) {
        self.origin = Some(origin);
    }

    fn create(&mut self, model: &ModelInfo) -> Result<NewSession, HostedError> {
        let (session, warnings) = self.store.create(self.info(model))?;
        Ok(NewSession {
            id: session.id().to_string(),
            sink: Box::new(session),
            warnings,
        })
    }

    fn open(&mut self, query: &str, model: &ModelInfo) -> Result<OpenedSession, OpenError> {
        let info = self.info(model);
        let opened = self
            .store
            .resolve(query)
            .and_then(|id| self.store.open(&id, info))
            .map_err(|e| OpenError {
                code: code_of(&e),
                message: e.to_string(),
            })?;
        Ok(opened_session(opened))
    }

    fn fork(&mut self, source: ForkSource<'_>, model: &ModelInfo) -> Result<Forked, OpenError> {
        let open_error = |e: SessionError| OpenError {
            code: code_of(&e),
            message: e.to_string(),
        };
        let (from, history, tokens, mut warnings) = match source {
            ForkSource::Current {
                id,
                history,
                tokens,
            } => (id.to_string(), history.to_vec(), tokens.clone(), Vec::new()),
            ForkSource::Saved { query } => {
                let id = self.store.resolve(query).map_err(open_error)?;
                // Read, not opened: the original may be in use elsewhere.
                self.store
                    .read_saved(&id)
                    .map(|(h, t, w)| (id, h, t, w))
                    .map_err(open_error)?
            }
        };
        let (session, created) = self
            .store
            .fork(&from, &history, &tokens, self.info(model))
            .map_err(open_error)?;
        warnings.extend(created);
        Ok(Forked {
            id: session.id().to_string(),
            from,
            sink: Box::new(session),
            history,
            tokens,
            warnings,
        })
    }

    fn list(&self) -> Result<SessionListing, HostedError> {
        Ok(list(&self.cwd)?)
    }
}

/// The kind of a session store failure, as front ends tell them apart.
pub(crate) fn code_of(e: &SessionError) -> Option<ErrorCode> {
    match e {
        SessionError::Locked { .. } | SessionError::Leased { .. } => Some(ErrorCode::SessionInUse),
        // The database's moment, as running out of descriptors is a file's.
        SessionError::Database { .. } => Some(ErrorCode::SessionUnreadable),
        SessionError::NotFound { .. } | SessionError::NoSessions { .. } => {
            Some(ErrorCode::SessionNotFound)
        }
        // Our own refusals (too large, not a regular file) come as
        // `InvalidInput`: the file is at fault, not the moment. Other I/O
        // failures (permissions, the disk) are left without a kind.
        SessionError::Io { source, .. } => match source.kind() {
            _ if out_of_resources(source) => Some(ErrorCode::SessionUnreadable),
            std::io::ErrorKind::InvalidInput => Some(ErrorCode::SessionDamaged),
            std::io::ErrorKind::NotFound => Some(ErrorCode::SessionNotFound),
            _ => None,
        },
        SessionError::Corrupt { .. } | SessionError::Newer { .. } => {
            Some(ErrorCode::SessionDamaged)
        }
        SessionError::Ambiguous { .. } => None,
    }
}

/// A session the store opened, as the agent takes it (either store).
pub(super) fn opened_session(opened: crate::session::Opened) -> OpenedSession {
    OpenedSession {
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
        subagents: opened.subagents,
        plan: opened.plan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn io_error(kind: io::Error) -> SessionError {
        SessionError::io("read session file", "/s/x.jsonl", kind)
    }

    /// Running out of descriptors is the server's moment, not the file's;
    /// a file the store refuses to read is the file's; other I/O failures
    /// have no kind.
    #[test]
    fn store_failures_map_to_the_kinds_front_ends_tell_apart() {
        let emfile = io::Error::from_raw_os_error(24);
        assert_eq!(
            code_of(&io_error(emfile)),
            Some(ErrorCode::SessionUnreadable)
        );
        let enfile = io::Error::from_raw_os_error(23);
        assert_eq!(
            code_of(&io_error(enfile)),
            Some(ErrorCode::SessionUnreadable)
        );
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert_eq!(code_of(&io_error(denied)), None);
        let too_big = io::Error::new(io::ErrorKind::InvalidInput, "larger than 64 MiB");
        assert_eq!(code_of(&io_error(too_big)), Some(ErrorCode::SessionDamaged));
        let gone = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(code_of(&io_error(gone)), Some(ErrorCode::SessionNotFound));
        let locked = SessionError::Locked {
            id: "x".into(),
            path: "/s/x.jsonl".into(),
        };
        assert_eq!(code_of(&locked), Some(ErrorCode::SessionInUse));
        let corrupt = SessionError::Corrupt {
            path: "/s/x.jsonl".into(),
            line: 3,
            reason: "not JSON".into(),
        };
        assert_eq!(code_of(&corrupt), Some(ErrorCode::SessionDamaged));
        let ambiguous = SessionError::Ambiguous {
            query: "2025".into(),
            matches: vec!["a".into(), "b".into()],
        };
        assert_eq!(code_of(&ambiguous), None);
    }
}
