//! Logging in to a provider instead of using an API key: the OAuth device
//! authorization flow (RFC 8628) against the provider's issuer, tokens kept in
//! `auth.json`, refreshed shortly before they expire and once after a 401.

pub mod store;

use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{AuthStore, Tokens};
use tokio::sync::Mutex;

/// OpenAI's issuer and the public client id its command-line tools use.
pub const OPENAI_ISSUER: &str = "https://auth.openai.com";
pub const OPENAI_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// Refresh this long before the recorded expiry.
const REFRESH_MARGIN: u64 = 60;

/// Where a provider's logins happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuer {
    pub provider: String,
    pub base_url: String,
    pub client_id: String,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Deserialize)]
struct DeviceCode {
    device_code: String,
    user_code: String,
    verification_uri: String,
    #[serde(default)]
    verification_uri_complete: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    interval: Option<u64>,
}

#[derive(Deserialize)]
struct TokenReply {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct OAuthError {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

fn http() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build HTTP client: {e}"))
}

fn tokens_from(reply: TokenReply, old_refresh: Option<String>) -> Tokens {
    Tokens {
        access_token: reply.access_token,
        refresh_token: reply.refresh_token.or(old_refresh),
        expires_at: reply.expires_in.map(|s| now() + s),
    }
}

/// POSTs a form to the issuer's token endpoint: the tokens, or the OAuth
/// error code and description.
async fn token_request(
    client: &reqwest::Client,
    issuer: &Issuer,
    form: &[(&str, &str)],
) -> Result<Result<TokenReply, (String, String)>, String> {
    let url = format!("{}/oauth/token", issuer.base_url.trim_end_matches('/'));
    let response = client
        .post(&url)
        .form(form)
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("cannot read the answer of {url}: {e}"))?;
    if status.is_success() {
        return serde_json::from_slice::<TokenReply>(&body)
            .map(Ok)
            .map_err(|e| format!("{url} sent no usable tokens ({e})"));
    }
    match serde_json::from_slice::<OAuthError>(&body) {
        Ok(e) => Ok(Err((e.error, e.error_description.unwrap_or_default()))),
        Err(_) => Err(format!("{url} answered HTTP {}", status.as_u16())),
    }
}

/// Runs the device flow: asks for a code, tells the user (through `say`)
/// where to enter it, polls at the issuer's interval, stores the tokens.
pub async fn login(
    issuer: &Issuer,
    store: &AuthStore,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), String> {
    let client = http()?;
    let url = format!(
        "{}/oauth/device/code",
        issuer.base_url.trim_end_matches('/')
    );
    let response = client
        .post(&url)
        .form(&[
            ("client_id", issuer.client_id.as_str()),
            ("scope", "openid profile email offline_access"),
        ])
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!(
            "{url} refused to start a login (HTTP {})",
            response.status().as_u16()
        ));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("cannot read the answer of {url}: {e}"))?;
    let code: DeviceCode = serde_json::from_slice(&body)
        .map_err(|e| format!("{url} sent no usable device code ({e})"))?;
    let link = code
        .verification_uri_complete
        .clone()
        .unwrap_or_else(|| code.verification_uri.clone());
    say(&format!(
        "To log in to {}, open {link} and enter the code {}",
        issuer.provider, code.user_code
    ));
    let mut interval = code.interval.unwrap_or(5).max(1);
    let deadline = now() + code.expires_in.unwrap_or(900);
    loop {
        tokio::time::sleep(Duration::from_secs(interval)).await;
        let reply = token_request(
            &client,
            issuer,
            &[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", code.device_code.as_str()),
                ("client_id", issuer.client_id.as_str()),
            ],
        )
        .await?;
        match reply {
            Ok(tokens) => {
                store.put(&issuer.provider, tokens_from(tokens, None))?;
                return Ok(());
            }
            Err((error, _)) if error == "authorization_pending" => {}
            Err((error, _)) if error == "slow_down" => interval += 5,
            Err((error, _)) if error == "expired_token" => {
                return Err("the login code expired before it was used; run the login again".into())
            }
            Err((error, _)) if error == "access_denied" => {
                return Err("the login was declined".into())
            }
            Err((error, detail)) => {
                return Err(format!("login failed: {error} {detail}").trim().to_string())
            }
        }
        if now() > deadline {
            return Err("the login code expired before it was used; run the login again".into());
        }
    }
}

/// Supplies a bearer token for each request of a login-backed profile.
pub struct LoginCredentials {
    issuer: Issuer,
    store: AuthStore,
    /// Serialises refreshes; holds the tokens last read or refreshed.
    current: Mutex<Option<Tokens>>,
}

impl LoginCredentials {
    /// Fails, with the command to run, when no login is stored.
    pub fn open(issuer: Issuer, store: AuthStore) -> Result<Arc<LoginCredentials>, String> {
        let tokens = store.get(&issuer.provider)?.ok_or_else(|| {
            format!(
                "not logged in to {p}: run `buddy login {p}`",
                p = issuer.provider
            )
        })?;
        Ok(Arc::new(LoginCredentials {
            issuer,
            store,
            current: Mutex::new(Some(tokens)),
        }))
    }

    /// The access token, refreshed first when it is about to expire.
    pub async fn token(&self) -> Result<String, String> {
        let mut current = self.current.lock().await;
        let tokens = current.clone().ok_or("not logged in")?;
        if tokens
            .expires_at
            .is_some_and(|t| t <= now() + REFRESH_MARGIN)
        {
            let fresh = self.refresh_locked(&tokens).await?;
            let token = fresh.access_token.clone();
            *current = Some(fresh);
            return Ok(token);
        }
        Ok(tokens.access_token)
    }

    /// After a 401: refresh unless another request already did since `stale`
    /// was handed out.
    pub async fn refresh_after_unauthorized(&self, stale: &str) -> Result<String, String> {
        let mut current = self.current.lock().await;
        let tokens = current.clone().ok_or("not logged in")?;
        if tokens.access_token != stale {
            return Ok(tokens.access_token);
        }
        let fresh = self.refresh_locked(&tokens).await?;
        let token = fresh.access_token.clone();
        *current = Some(fresh);
        Ok(token)
    }

    async fn refresh_locked(&self, tokens: &Tokens) -> Result<Tokens, String> {
        let relogin = || {
            format!(
                "the {p} login has expired: run `buddy login {p}`",
                p = self.issuer.provider
            )
        };
        let refresh = tokens.refresh_token.clone().ok_or_else(relogin)?;
        let client = http()?;
        let reply = token_request(
            &client,
            &self.issuer,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh.as_str()),
                ("client_id", self.issuer.client_id.as_str()),
            ],
        )
        .await?;
        match reply {
            Ok(t) => {
                let fresh = tokens_from(t, Some(refresh));
                self.store.put(&self.issuer.provider, fresh.clone())?;
                Ok(fresh)
            }
            Err(_) => Err(relogin()),
        }
    }
}
