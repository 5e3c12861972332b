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
//! The client is, in this order: one configured in the server's entry
//! (`client_id`, with an optional secret in `client_secret_env`); the URL of
//! a Client ID Metadata Document (`client_metadata_url`) when the
//! authorization server takes those; or one registered dynamically
//! (RFC 7591) for this login. Its secret, if any, goes to the token endpoint
//! the way the authorization server's metadata says (HTTP Basic, the form,
//! or none for a public client).
//!
//! Does not own the HTTP transport (`mcp::http`, which sends the token and
//! reports a refusal, through `bearer`) nor when a login is started
//! (`app::mcp_cmd`).

pub mod bearer;
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

/// How a server refused buddy: its Bearer challenge, and whether it was a
/// 403 asking for more scope (a step-up) rather than a 401.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusal {
    pub forbidden: bool,
    pub challenge: Challenge,
}

impl Refusal {
    /// The refusal an answer with `status` and these `WWW-Authenticate`
    /// values is: a 401, or a 403 whose challenge says
    /// `insufficient_scope`; None for anything else.
    pub fn of<'a>(status: u16, headers: impl IntoIterator<Item = &'a str>) -> Option<Refusal> {
        let challenge = headers
            .into_iter()
            .find_map(metadata::parse_challenge)
            .unwrap_or_default();
        match status {
            401 => Some(Refusal {
                forbidden: false,
                challenge,
            }),
            403 if challenge.error.as_deref() == Some("insufficient_scope") => Some(Refusal {
                forbidden: true,
                challenge,
            }),
            _ => None,
        }
    }
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

/// A client as the token endpoint sees it: its id, its secret if it has
/// one, and how that secret is sent.
struct ClientAuth<'a> {
    id: &'a str,
    secret: Option<&'a str>,
    method: &'a str,
}

/// `application/x-www-form-urlencoded` of one value, as HTTP Basic client
/// authentication wants the id and secret before they are joined
/// (RFC 6749 §2.3.1).
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// POSTs a form to the token endpoint, the client authenticated as
/// `auth.method` says; the tokens, or the server's error.
async fn token_request(
    client: &reqwest::Client,
    endpoint: &str,
    form: &[(&str, &str)],
    auth: &ClientAuth<'_>,
) -> Result<TokenAnswer, OAuthError> {
    let mut form: Vec<(&str, &str)> = form.to_vec();
    let mut req = client.post(endpoint).header("accept", "application/json");
    match (auth.method, auth.secret) {
        ("client_secret_basic", Some(secret)) => {
            use base64::Engine;
            let pair = format!("{}:{}", form_encode(auth.id), form_encode(secret));
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            req = req.header("authorization", format!("Basic {encoded}"));
        }
        (_, Some(secret)) => {
            form.push(("client_id", auth.id));
            form.push(("client_secret", secret));
        }
        (_, None) => form.push(("client_id", auth.id)),
    }
    let resp = req
        .form(&form)
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

/// A client registered for one login: its id, its secret if the server
/// gave one, and how it authenticates at the token endpoint.
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    method: String,
}

/// Registers buddy with the authorization server (RFC 7591): a native
/// client using the code flow on `redirect_uri`, authenticating at the token
/// endpoint as the server's metadata allows (none, when it takes public
/// clients).
async fn register(
    client: &reqwest::Client,
    auth: &metadata::AuthServer,
    endpoint: &str,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<Registered, OAuthError> {
    let public = auth
        .token_endpoint_auth_methods_supported
        .as_ref()
        .is_none_or(|m| m.iter().any(|m| m == "none"));
    let asked = if public {
        "none"
    } else {
        auth.auth_method(true)
    };
    let mut body = serde_json::json!({
        "client_name": "buddy",
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": asked,
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
    struct Answer {
        client_id: String,
        #[serde(default)]
        client_secret: Option<String>,
        #[serde(default)]
        token_endpoint_auth_method: Option<String>,
    }
    let r: Answer = serde_json::from_slice(&bytes)
        .map_err(|e| OAuthError::Flow(format!("client registration's answer: {e}")))?;
    crate::redact::remember(r.client_secret.clone());
    // The server has the last word on the method; a secret-less client can
    // only be a public one.
    let method = match (&r.client_secret, r.token_endpoint_auth_method) {
        (None, _) => "none".to_string(),
        (Some(_), Some(m)) if m != "none" => m,
        (Some(_), _) => auth.auth_method(true).to_string(),
    };
    Ok(Registered {
        client_id: r.client_id,
        client_secret: r.client_secret,
        method,
    })
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

/// The scope to ask for: the challenge's, else the resource's
/// `scopes_supported`, else none (the parameter is left out); with the
/// scope of the login kept, if any (a step-up asks for both, not for the
/// new ones alone); and `offline_access`, for a refresh token, when the
/// authorization server lists it and some scope is asked anyway.
fn scope_to_ask(
    challenge: Option<&str>,
    resource: Option<&metadata::ProtectedResource>,
    kept: Option<&str>,
    auth: &metadata::AuthServer,
) -> Option<String> {
    let wanted = challenge.map(str::to_string).or_else(|| {
        resource
            .and_then(|r| r.scopes_supported.as_ref())
            .map(|s| s.join(" "))
    });
    let scope = union(kept, wanted.as_deref())?;
    if auth.supports_scope("offline_access") {
        return union(Some(&scope), Some("offline_access"));
    }
    Some(scope)
}

/// Checks the redirect's `iss` (RFC 9207): when present it must be the
/// issuer, character for character; when the server says it sends one, it
/// must be there. Either way a mismatch means the code may come from another
/// server, so it is never exchanged.
fn check_iss(iss: Option<&str>, auth: &metadata::AuthServer) -> Result<(), OAuthError> {
    match iss {
        Some(iss) if iss != auth.issuer => Err(OAuthError::Flow(format!(
            "the redirect names the issuer {}, not {}; login refused",
            crate::text::one_line(iss, 100),
            crate::text::one_line(&auth.issuer, 100)
        ))),
        None if auth.authorization_response_iss_parameter_supported => {
            Err(OAuthError::Flow(format!(
                "the redirect carries no `iss` though {} says it sends one; login refused",
                crate::text::one_line(&auth.issuer, 100)
            )))
        }
        _ => Ok(()),
    }
}

/// The URL buddy uses as its client_id where Client ID Metadata Documents
/// are taken: an https URL with a path, as the MCP specification requires.
fn metadata_document_url(spec: &McpServer) -> Result<Option<String>, OAuthError> {
    let Some(u) = &spec.client_metadata_url else {
        return Ok(None);
    };
    match Url::parse(u) {
        Ok(url) if url.scheme() == "https" && url.path() != "/" => Ok(Some(u.clone())),
        _ => Err(OAuthError::Flow(format!(
            "client_metadata_url: `{}` is not an https URL with a path",
            crate::text::one_line(u, 100)
        ))),
    }
}

/// Logs in to server `name` at `url` in a browser and keeps the tokens.
/// `refusal` is how the server refused buddy, when a request was refused;
/// without it (`buddy mcp login`) the server is asked for its challenge. A
/// login already kept lends its scope to the new one (step-up).
pub async fn login(
    name: &str,
    url: &str,
    spec: &McpServer,
    refusal: Option<Refusal>,
) -> Result<(), OAuthError> {
    let store = store()?;
    let server = Url::parse(url).map_err(|_| OAuthError::Flow(format!("`{url}` is not a URL")))?;
    let client = http(url)?;
    let old = store.get(name, url)?;
    if let Some(old) = &old {
        crate::redact::remember(old.secrets());
    }
    let challenge = match refusal {
        Some(r) => r.challenge,
        None => {
            let mut challenge = match &old {
                Some(o) => probe(&client, url, Some(&o.access_token)).await,
                None => None,
            };
            if challenge.is_none() {
                challenge = probe(&client, url, None).await;
            }
            challenge.unwrap_or_default()
        }
    };

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
    // The resource exactly as its metadata spells it (RFC 8707), else the
    // server's URL.
    let resource_id = resource
        .as_ref()
        .map_or_else(|| url.to_string(), |r| r.resource.clone());
    let scope = scope_to_ask(
        challenge.scope.as_deref(),
        resource.as_ref(),
        old.as_ref().and_then(|o| o.scope.as_deref()),
        &auth,
    );

    let listener = loopback::listen().await?;
    let cimd = metadata_document_url(spec)?.filter(|_| auth.client_id_metadata_document_supported);
    let (client_id, client_secret, method, registered) = match (&spec.client_id, cimd) {
        (Some(id), _) => {
            let secret = configured_secret(spec)?;
            let method = auth.auth_method(secret.is_some()).to_string();
            (id.clone(), secret, method, false)
        }
        // A public client: the document names buddy's redirect URIs.
        (None, Some(document)) => (document, None, "none".to_string(), false),
        (None, None) => {
            let Some(endpoint) = &auth.registration_endpoint else {
                return Err(OAuthError::Flow(format!(
                    "{} offers no client registration; set `client_id` (or `client_metadata_url`) in [mcp_servers.{name}]",
                    auth.issuer
                )));
            };
            let r = register(
                &client,
                &auth,
                endpoint,
                &listener.redirect_uri,
                scope.as_deref(),
            )
            .await?;
            (r.client_id, r.client_secret, r.method, true)
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
            .append_pair("resource", &resource_id);
        if let Some(s) = &scope {
            q.append_pair("scope", s);
        }
    }
    let redirect_uri = listener.redirect_uri.clone();
    loopback::open_browser(authorize.as_str());
    let redirect = tokio::time::timeout(LOGIN_WAIT, listener.redirect(&state))
        .await
        .map_err(|_| OAuthError::Flow("no redirect came back within 5 minutes".into()))??;
    check_iss(redirect.iss.as_deref(), &auth)?;

    let form = [
        ("grant_type", "authorization_code"),
        ("code", redirect.code.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("code_verifier", verifier.as_str()),
        ("resource", resource_id.as_str()),
    ];
    let client_auth = ClientAuth {
        id: &client_id,
        secret: client_secret.as_deref(),
        method: &method,
    };
    let t = token_request(&client, &auth.token_endpoint, &form, &client_auth).await?;
    store.put(
        name,
        Login {
            url: url.to_string(),
            issuer: auth.issuer,
            token_endpoint: auth.token_endpoint,
            client_id,
            // A configured secret stays in its variable, read when needed.
            client_secret: client_secret.filter(|_| registered),
            auth_method: Some(method),
            resource: Some(resource_id),
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
    // A login kept before the method was recorded sent its secret in the form.
    let method = old.auth_method.clone().unwrap_or_else(|| {
        match secret {
            Some(_) => "client_secret_post",
            None => "none",
        }
        .to_string()
    });
    let resource = old.resource.clone().unwrap_or_else(|| old.url.clone());
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", rt.as_str()),
        ("resource", resource.as_str()),
    ];
    let client_auth = ClientAuth {
        id: &old.client_id,
        secret: secret.as_deref(),
        method: &method,
    };
    let t = token_request(&client, &old.token_endpoint, &form, &client_auth).await?;
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
    if login.refresh_token.is_none() {
        // Nothing to refresh with: the server says whether it still takes
        // the token; one it refused is of no more use.
        return Ok((!stale).then_some(login.access_token));
    }
    Ok(Some(refresh(name, spec, &store, login).await?.access_token))
}

#[cfg(test)]
mod tests {
    use super::metadata::{AuthServer, ProtectedResource};
    use super::*;

    fn auth_server(scopes: Option<&[&str]>, methods: Option<&[&str]>, iss: bool) -> AuthServer {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        AuthServer {
            issuer: "https://as.example".into(),
            authorization_endpoint: "https://as.example/authorize".into(),
            token_endpoint: "https://as.example/token".into(),
            registration_endpoint: None,
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            scopes_supported: scopes.map(list),
            token_endpoint_auth_methods_supported: methods.map(list),
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: iss,
        }
    }

    #[test]
    fn step_up_asks_for_old_and_new_scopes_once_each() {
        assert_eq!(
            union(Some("read"), Some("read write")).as_deref(),
            Some("read write")
        );
        assert_eq!(union(None, None), None);
        let auth = auth_server(None, None, false);
        assert_eq!(
            scope_to_ask(Some("mcp:write"), None, Some("mcp:basic"), &auth).as_deref(),
            Some("mcp:basic mcp:write")
        );
    }

    #[test]
    fn scope_comes_from_the_challenge_else_the_resource_else_is_left_out() {
        let auth = auth_server(None, None, false);
        let resource = ProtectedResource {
            resource: "https://h/mcp".into(),
            authorization_servers: vec!["https://as.example".into()],
            scopes_supported: Some(vec!["a".into(), "b".into()]),
        };
        assert_eq!(
            scope_to_ask(Some("c"), Some(&resource), None, &auth).as_deref(),
            Some("c")
        );
        assert_eq!(
            scope_to_ask(None, Some(&resource), None, &auth).as_deref(),
            Some("a b")
        );
        assert_eq!(scope_to_ask(None, None, None, &auth), None);
    }

    #[test]
    fn offline_access_is_asked_only_where_the_authorization_server_lists_it() {
        let offers = auth_server(Some(&["mcp:basic", "offline_access"]), None, false);
        assert_eq!(
            scope_to_ask(Some("mcp:basic"), None, None, &offers).as_deref(),
            Some("mcp:basic offline_access")
        );
        let not = auth_server(Some(&["mcp:basic"]), None, false);
        assert_eq!(
            scope_to_ask(Some("mcp:basic"), None, None, &not).as_deref(),
            Some("mcp:basic")
        );
        // Never alone: no scope asked stays no scope.
        assert_eq!(scope_to_ask(None, None, None, &offers), None);
    }

    #[test]
    fn the_redirect_iss_must_be_the_issuer_exactly_and_present_when_promised() {
        let quiet = auth_server(None, None, false);
        let promised = auth_server(None, None, true);
        assert!(check_iss(None, &quiet).is_ok());
        assert!(check_iss(Some("https://as.example"), &quiet).is_ok());
        assert!(check_iss(Some("https://as.example"), &promised).is_ok());
        assert!(check_iss(None, &promised).is_err());
        assert!(check_iss(Some("https://evil.example"), &quiet).is_err());
        // The same issuer after URL normalisation is still another string.
        assert!(check_iss(Some("https://as.example/"), &promised).is_err());
    }

    #[test]
    fn a_secret_goes_the_way_the_token_endpoint_takes_it() {
        assert_eq!(auth_server(None, None, false).auth_method(false), "none");
        assert_eq!(
            auth_server(None, None, false).auth_method(true),
            "client_secret_basic"
        );
        let post = auth_server(None, Some(&["client_secret_post"]), false);
        assert_eq!(post.auth_method(true), "client_secret_post");
        assert_eq!(form_encode("a b:c/é"), "a+b%3Ac%2F%C3%A9");
    }

    #[test]
    fn a_401_is_a_refusal_and_a_403_only_when_it_asks_for_scope() {
        let r = Refusal::of(401, ["Bearer scope=\"a\""]).unwrap();
        assert!(!r.forbidden);
        assert_eq!(r.challenge.scope.as_deref(), Some("a"));
        let step = Refusal::of(403, ["Bearer error=\"insufficient_scope\", scope=\"b\""]).unwrap();
        assert!(step.forbidden);
        assert_eq!(Refusal::of(403, ["Bearer error=\"invalid_token\""]), None);
        assert_eq!(Refusal::of(200, []), None);
    }

    #[test]
    fn a_client_metadata_url_must_be_https_with_a_path() {
        let mut spec = McpServer::http("https://h/mcp".into());
        assert_eq!(metadata_document_url(&spec).unwrap(), None);
        spec.client_metadata_url = Some("https://buddy.example/client.json".into());
        assert!(metadata_document_url(&spec).unwrap().is_some());
        spec.client_metadata_url = Some("http://buddy.example/client.json".into());
        assert!(metadata_document_url(&spec).is_err());
        spec.client_metadata_url = Some("https://buddy.example".into());
        assert!(metadata_document_url(&spec).is_err());
    }
}
