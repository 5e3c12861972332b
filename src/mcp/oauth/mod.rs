//! OAuth for MCP servers over HTTP, as the MCP specification's
//! authorization section has it: on a 401 (or a 403 asking for more scope)
//! the server's protected-resource metadata names its authorization server,
//! whose metadata gives the endpoints; the user logs in in a browser (code
//! flow, PKCE S256, a loopback redirect with `state` checked) and the tokens
//! are kept in `mcp-auth.json` (`store`), refreshed before they expire.
//!
//! Built on buddy's reqwest 0.12 rather than rmcp's `auth` feature: that
//! feature brings its own reqwest 0.13 (a second HTTP stack, with its own
//! trust roots and proxies) into the binary.
//!
//! The client is one configured in the server's entry (`client_id`, with an
//! optional secret in `client_secret_env`) or, failing that, one registered
//! dynamically (RFC 7591) when the server offers it. Client ID Metadata
//! Documents are not used: the client_id would be an https URL buddy
//! serves, and a local program has none to claim.
//!
//! Does not own the HTTP transport (`mcp::http`, which sends the token and
//! reports a refusal) nor the commands (`app::mcp_cmd`).

pub mod loopback;
pub mod metadata;
pub mod pkce;
pub mod store;

use crate::config::McpServer;
use metadata::Challenge;
use reqwest::Url;
use serde::Deserialize;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{Login, Store};

/// Metadata and token answers, at most: they are small JSON documents.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Refresh this long before the recorded expiry.
const REFRESH_MARGIN_SECS: u64 = 60;
/// How long a login waits for the browser's redirect.
const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// Why a login or a refresh did not work, as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    Metadata(String),
    #[error("{0}")]
    Flow(String),
    #[error("{0}")]
    Store(String),
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn http(url: &str) -> Result<reqwest::Client, OAuthError> {
    let builder = if url.starts_with("https://") {
        crate::net::client_builder(&[])
    } else {
        reqwest::Client::builder().tls_built_in_root_certs(false)
    };
    builder
        .connect_timeout(Duration::from_secs(15))
        .timeout(Duration::from_secs(30))
        // A redirect could carry a token endpoint's answer elsewhere.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| OAuthError::Flow(format!("cannot build an HTTP client: {e}")))
}

fn store() -> Result<Store, OAuthError> {
    Store::default_path()
        .map(Store::new)
        .ok_or_else(|| OAuthError::Store("no config directory (HOME is not set)".into()))
}

/// The body, at most MAX_ANSWER_BYTES.
async fn bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, OAuthError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| OAuthError::Flow(format!("reading an answer: {e}")))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(OAuthError::Flow(format!(
                "an answer from {} is over {MAX_ANSWER_BYTES} bytes",
                resp.url().origin().ascii_serialization()
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first of `urls` that answers 200, with its body.
async fn first_found(client: &reqwest::Client, urls: &[String]) -> Option<(String, Vec<u8>)> {
    for url in urls {
        let Ok(resp) = client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
        else {
            continue;
        };
        if resp.status().is_success() {
            if let Ok(body) = bounded(resp).await {
                return Some((url.clone(), body));
            }
        }
    }
    None
}

/// What the server says to a request without a token (or with `token`):
/// its Bearer challenge on a 401 or 403, if any.
async fn probe(client: &reqwest::Client, url: &str, token: Option<&str>) -> Option<Challenge> {
    let init = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "buddy", "version": env!("CARGO_PKG_VERSION")}}
    });
    let mut req = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(init.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.ok()?;
    if !matches!(resp.status().as_u16(), 401 | 403) {
        return None;
    }
    resp.headers()
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(metadata::parse_challenge)
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// POSTs a form to the token endpoint; the tokens, or the server's error.
async fn token_request(
    client: &reqwest::Client,
    endpoint: &str,
    form: &[(&str, &str)],
) -> Result<TokenAnswer, OAuthError> {
    let resp = client
        .post(endpoint)
        .header("accept", "application/json")
        .form(form)
        .send()
        .await
        .map_err(|e| OAuthError::Flow(format!("the token endpoint: {e}")))?;
    let status = resp.status();
    let body = bounded(resp).await?;
    if !status.is_success() {
        let why = serde_json::from_slice::<ErrorAnswer>(&body)
            .map(|e| format!("{} {}", e.error, e.error_description.unwrap_or_default()))
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        return Err(OAuthError::Flow(format!(
            "the token endpoint answered {status}: {}",
            crate::text::one_line(&crate::redact::text(&why), 200)
        )));
    }
    let answer: TokenAnswer = serde_json::from_slice(&body)
        .map_err(|e| OAuthError::Flow(format!("the token endpoint's answer: {e}")))?;
    crate::redact::remember(
        std::iter::once(answer.access_token.clone()).chain(answer.refresh_token.clone()),
    );
    Ok(answer)
}

fn configured_secret(spec: &McpServer) -> Result<Option<String>, OAuthError> {
    let Some(var) = &spec.client_secret_env else {
        return Ok(None);
    };
    let secret = crate::process::var(var)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| OAuthError::Flow(format!("client_secret_env: ${var} is not set")))?;
    crate::redact::remember([secret.clone()]);
    Ok(Some(secret))
}

/// Registers buddy with the authorization server (RFC 7591): a public
/// client using the code flow on `redirect_uri`.
async fn register(
    client: &reqwest::Client,
    endpoint: &str,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<(String, Option<String>), OAuthError> {
    let mut body = serde_json::json!({
        "client_name": "buddy",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let Some(s) = scope {
        body["scope"] = s.into();
    }
    let resp = client
        .post(endpoint)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| OAuthError::Flow(format!("client registration: {e}")))?;
    let status = resp.status();
    let bytes = bounded(resp).await?;
    if !status.is_success() {
        return Err(OAuthError::Flow(format!(
            "client registration answered {status}: {}",
            crate::text::one_line(&String::from_utf8_lossy(&bytes), 200)
        )));
    }
    #[derive(Deserialize)]
    struct Registered {
        client_id: String,
        #[serde(default)]
        client_secret: Option<String>,
    }
    let r: Registered = serde_json::from_slice(&bytes)
        .map_err(|e| OAuthError::Flow(format!("client registration's answer: {e}")))?;
    crate::redact::remember(r.client_secret.clone());
    Ok((r.client_id, r.client_secret))
}

/// Scopes as a set, joined again in first-seen order.
fn union(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// Logs in to server `name` at `url` in a browser and keeps the tokens.
/// A login already kept is probed first: a 403 asking for more scope
/// (step-up) makes the new login ask for both.
pub async fn login(name: &str, url: &str, spec: &McpServer) -> Result<(), OAuthError> {
    let store = store()?;
    let server = Url::parse(url).map_err(|_| OAuthError::Flow(format!("`{url}` is not a URL")))?;
    let client = http(url)?;
    let old = store.get(name, url)?;
    if let Some(old) = &old {
        crate::redact::remember(old.secrets());
    }
    let mut challenge = match &old {
        Some(o) => probe(&client, url, Some(&o.access_token)).await,
        None => None,
    };
    if challenge.is_none() {
        challenge = probe(&client, url, None).await;
    }
    let challenge = challenge.unwrap_or_default();

    // RFC 9728; without it, the older rule: the server's origin is the issuer.
    let candidates =
        metadata::resource_metadata_urls(&server, challenge.resource_metadata.as_deref());
    let resource = match first_found(&client, &candidates).await {
        Some((_, body)) => Some(metadata::protected_resource(&body, &server)?),
        None => None,
    };
    let issuer = resource
        .as_ref()
        .and_then(|r| r.authorization_servers.first().cloned())
        .unwrap_or_else(|| server.origin().ascii_serialization());
    let issuer_url = Url::parse(&issuer).map_err(|_| {
        OAuthError::Metadata(format!(
            "`{}` is not a URL",
            crate::text::one_line(&issuer, 100)
        ))
    })?;
    let (_, body) = first_found(&client, &metadata::auth_server_metadata_urls(&issuer_url))
        .await
        .ok_or_else(|| {
            OAuthError::Metadata(format!(
                "no authorization-server metadata found for {issuer_url}"
            ))
        })?;
    let auth = metadata::auth_server(&body, &issuer)?;

    let scope = union(
        old.as_ref().and_then(|o| o.scope.as_deref()),
        challenge.scope.as_deref(),
    )
    .or_else(|| {
        resource
            .as_ref()
            .and_then(|r| r.scopes_supported.as_ref())
            .map(|s| s.join(" "))
    })
    .filter(|s| !s.is_empty());

    let listener = loopback::listen().await?;
    let (client_id, client_secret) = match (&spec.client_id, &auth.registration_endpoint) {
        (Some(id), _) => (id.clone(), configured_secret(spec)?),
        (None, Some(endpoint)) => {
            register(&client, endpoint, &listener.redirect_uri, scope.as_deref()).await?
        }
        (None, None) => {
            return Err(OAuthError::Flow(format!(
                "{} offers no client registration; set `client_id` in [mcp_servers.{name}]",
                auth.issuer
            )))
        }
    };
    let verifier = pkce::random_token()?;
    let state = pkce::random_token()?;
    let mut authorize = Url::parse(&auth.authorization_endpoint)
        .map_err(|_| OAuthError::Metadata("bad authorization_endpoint".into()))?;
    {
        let mut q = authorize.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", &listener.redirect_uri)
            .append_pair("code_challenge", &pkce::challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", url);
        if let Some(s) = &scope {
            q.append_pair("scope", s);
        }
    }
    let redirect_uri = listener.redirect_uri.clone();
    loopback::open_browser(authorize.as_str());
    let code = tokio::time::timeout(LOGIN_WAIT, listener.code(&state))
        .await
        .map_err(|_| OAuthError::Flow("no redirect came back within 5 minutes".into()))??;

    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("client_id", client_id.as_str()),
        ("code_verifier", verifier.as_str()),
        ("resource", url),
    ];
    if let Some(s) = &client_secret {
        form.push(("client_secret", s));
    }
    let t = token_request(&client, &auth.token_endpoint, &form).await?;
    store.put(
        name,
        Login {
            url: url.to_string(),
            issuer: auth.issuer,
            token_endpoint: auth.token_endpoint,
            client_id,
            // A configured secret stays in its variable, read when needed.
            client_secret: client_secret.filter(|_| spec.client_id.is_none()),
            access_token: t.access_token,
            refresh_token: t.refresh_token,
            expires_at: t.expires_in.map(|s| now() + s),
            scope: t.scope.or(scope),
        },
    )
}

/// Forgets server `name`'s login; false when there was none.
pub fn logout(name: &str) -> Result<bool, OAuthError> {
    store()?.remove(name)
}

/// Whether a login is kept for server `name` at `url`.
pub fn has_login(name: &str, url: &str) -> bool {
    store()
        .and_then(|s| s.get(name, url))
        .is_ok_and(|l| l.is_some())
}

/// Trades the refresh token for new tokens and keeps them.
async fn refresh(
    name: &str,
    spec: &McpServer,
    store: &Store,
    old: Login,
) -> Result<Login, OAuthError> {
    let Some(rt) = old.refresh_token.clone() else {
        return Err(OAuthError::Flow(format!(
            "the login has expired; `buddy mcp login {name}`"
        )));
    };
    let client = http(&old.token_endpoint)?;
    let secret = match &old.client_secret {
        Some(s) => Some(s.clone()),
        None => configured_secret(spec)?,
    };
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", rt.as_str()),
        ("client_id", old.client_id.as_str()),
        ("resource", old.url.as_str()),
    ];
    if let Some(s) = &secret {
        form.push(("client_secret", s));
    }
    let t = token_request(&client, &old.token_endpoint, &form).await?;
    let new = Login {
        access_token: t.access_token,
        // A server that does not rotate refresh tokens sends none back.
        refresh_token: t.refresh_token.or(old.refresh_token.clone()),
        expires_at: t.expires_in.map(|s| now() + s),
        scope: t.scope.or(old.scope.clone()),
        ..old
    };
    store.put(name, new.clone())?;
    Ok(new)
}

/// The access token kept for server `name` at `url`, refreshed first when it
/// expires within a minute (or at once with `stale`, after a 401); None
/// when there is no login. Its secrets are registered for redaction.
pub async fn access_token(
    name: &str,
    url: &str,
    spec: &McpServer,
    stale: bool,
) -> Result<Option<String>, OAuthError> {
    let store = store()?;
    let Some(login) = store.get(name, url)? else {
        return Ok(None);
    };
    crate::redact::remember(login.secrets());
    let expiring = login
        .expires_at
        .is_some_and(|at| at <= now() + REFRESH_MARGIN_SECS);
    if !(stale || expiring) {
        return Ok(Some(login.access_token));
    }
    Ok(Some(refresh(name, spec, &store, login).await?.access_token))
}

#[cfg(test)]
mod tests {
    use super::union;

    #[test]
    fn step_up_asks_for_old_and_new_scopes_once_each() {
        assert_eq!(
            union(Some("read"), Some("read write")).as_deref(),
            Some("read write")
        );
        assert_eq!(union(None, None), None);
    }
}
