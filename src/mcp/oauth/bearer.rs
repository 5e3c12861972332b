//! The token one HTTP server's connection sends, shared by its requests:
//! read from the logins kept (refreshed first when it is about to expire),
//! refreshed once when the server refuses it with a 401 (so an access token
//! that expires mid-session is renewed without a new login), and the
//! server's last refusal kept, for a login to answer (`app::mcp_cmd`).
//! Does not send requests (`mcp::http`) nor start logins.

use super::{OAuthError, Refusal};
use crate::config::McpServer;
use std::sync::Mutex;

pub struct Bearer {
    name: String,
    url: String,
    spec: McpServer,
    /// The token sent; a refresh replaces it under this lock, so requests
    /// refused together refresh once.
    token: tokio::sync::Mutex<Option<String>>,
    refusal: Mutex<Option<Refusal>>,
}

impl Bearer {
    /// The kept login of server `name` at `url`, if any, refreshed first
    /// when it expires within a minute.
    pub async fn load(name: &str, url: &str, spec: &McpServer) -> Result<Bearer, OAuthError> {
        let token = super::access_token(name, url, spec, false).await?;
        Ok(Bearer {
            name: name.to_string(),
            url: url.to_string(),
            spec: spec.clone(),
            token: tokio::sync::Mutex::new(token),
            refusal: Mutex::new(None),
        })
    }

    /// The token to send now, if there is a login.
    pub async fn token(&self) -> Option<String> {
        self.token.lock().await.clone()
    }

    /// The server refused a request sent with `sent`. The refusal is kept;
    /// and when `may_renew` and it was a 401 to a kept token, the token is
    /// refreshed: the one to send again, or None when there is none (a
    /// login is needed). A token another request renewed meanwhile is
    /// given as it is.
    pub async fn refused(
        &self,
        sent: Option<&str>,
        refusal: Refusal,
        may_renew: bool,
    ) -> Option<String> {
        let forbidden = refusal.forbidden;
        *self.refusal.lock().unwrap_or_else(|p| p.into_inner()) = Some(refusal);
        if !may_renew || forbidden {
            return None;
        }
        let mut current = self.token.lock().await;
        if current.is_some() && current.as_deref() != sent {
            return current.clone();
        }
        sent?;
        let fresh = super::access_token(&self.name, &self.url, &self.spec, true)
            .await
            .ok()
            .flatten()
            .filter(|t| Some(t.as_str()) != sent)?;
        *current = Some(fresh.clone());
        Some(fresh)
    }

    /// How the server last refused buddy, if it did.
    pub fn last_refusal(&self) -> Option<Refusal> {
        self.refusal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
