//! Logging in to a provider instead of using an API key: OpenAI's device
//! authorization flow against the provider's issuer (a code the user enters in
//! a browser, polled until approved, then exchanged for tokens), tokens kept
//! in `auth.json`, refreshed shortly before they expire and once after a 401.

pub mod error;
pub mod store;

pub use error::AuthError;
use error::Expected;

use serde::Deserialize;
use serde_json::Value;
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

/// The issuer's answer to a device-code request.
#[derive(Deserialize)]
struct UserCode {
    device_auth_id: String,
    #[serde(alias = "usercode")]
    user_code: String,
    /// Seconds between polls; some issuers send it as a string.
    #[serde(default)]
    interval: Option<Value>,
}

/// What a successful poll hands over: a code to exchange for tokens.
#[derive(Deserialize)]
struct Grant {
    authorization_code: String,
    code_verifier: String,
}

#[derive(Deserialize)]
struct TokenReply {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    id_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct OAuthError {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

fn http() -> Result<reqwest::Client, AuthError> {
    crate::net::client_builder(&[])
        .connect_timeout(Duration::from_secs(15))
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(AuthError::Client)
}

fn tokens_from(reply: TokenReply, old: Option<&Tokens>) -> Tokens {
    // Without a stated lifetime, the access token's own `exp` claim says it.
    let expires_at = reply
        .expires_in
        .map(|s| now() + s)
        .or_else(|| jwt_claims(&reply.access_token)?.get("exp")?.as_u64());
    let account_id = reply
        .id_token
        .as_deref()
        .and_then(account_id_of)
        .or_else(|| old.and_then(|t| t.account_id.clone()));
    Tokens {
        access_token: reply.access_token,
        refresh_token: reply
            .refresh_token
            .or_else(|| old.and_then(|t| t.refresh_token.clone())),
        expires_at,
        account_id,
    }
}

/// The claims of a JWT, unverified: only read to learn an expiry and the
/// ChatGPT account a token belongs to, never to trust anything.
fn jwt_claims(token: &str) -> Option<serde_json::Map<String, Value>> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64url_decode(payload)?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

fn account_id_of(id_token: &str) -> Option<String> {
    let claims = jwt_claims(id_token)?;
    claims
        .get("https://api.openai.com/auth")?
        .get("chatgpt_account_id")?
        .as_str()
        .map(str::to_string)
}

/// Base64url without padding (as in JWTs).
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// POSTs a form to the issuer's token endpoint: the tokens, or the OAuth
/// error code and description.
async fn token_request(
    client: &reqwest::Client,
    issuer: &Issuer,
    form: &[(&str, &str)],
) -> Result<Result<TokenReply, (String, String)>, AuthError> {
    let url = format!("{}/oauth/token", issuer.base_url.trim_end_matches('/'));
    let response = client
        .post(&url)
        .form(form)
        .send()
        .await
        .map_err(|source| AuthError::Unreachable {
            url: url.clone(),
            source,
        })?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|source| AuthError::UnreadableAnswer {
            url: url.clone(),
            source,
        })?;
    if status.is_success() {
        return serde_json::from_slice::<TokenReply>(&body)
            .map(Ok)
            .map_err(|source| AuthError::BadAnswer {
                url,
                expected: Expected::Tokens,
                source,
            });
    }
    match serde_json::from_slice::<OAuthError>(&body) {
        Ok(e) => Ok(Err((e.error, e.error_description.unwrap_or_default()))),
        Err(_) => Err(AuthError::Status {
            url,
            status: status.as_u16(),
        }),
    }
}

/// Runs the device flow: asks the issuer for a code, tells the user (through
/// `say`) where to enter it, polls at the interval the issuer gives until the
/// user approved, exchanges the grant for tokens and stores them.
pub async fn login(
    issuer: &Issuer,
    store: &AuthStore,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), AuthError> {
    let client = http()?;
    let base = issuer.base_url.trim_end_matches('/');
    let url = format!("{base}/api/accounts/deviceauth/usercode");
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .body(serde_json::json!({ "client_id": issuer.client_id }).to_string())
        .send()
        .await
        .map_err(|source| AuthError::Unreachable {
            url: url.clone(),
            source,
        })?;
    if !response.status().is_success() {
        return Err(AuthError::Refused {
            status: response.status().as_u16(),
            url,
        });
    }
    let body = response
        .bytes()
        .await
        .map_err(|source| AuthError::UnreadableAnswer {
            url: url.clone(),
            source,
        })?;
    let code: UserCode = serde_json::from_slice(&body).map_err(|source| AuthError::BadAnswer {
        url: url.clone(),
        expected: Expected::DeviceCode,
        source,
    })?;
    say(&format!(
        "To log in to {}, open {base}/codex/device and enter the code {}",
        issuer.provider, code.user_code
    ));
    let interval = code
        .interval
        .as_ref()
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()))
        .unwrap_or(5)
        .max(1);
    let poll_url = format!("{base}/api/accounts/deviceauth/token");
    let deadline = now() + 15 * 60;
    let grant = loop {
        tokio::time::sleep(Duration::from_secs(interval)).await;
        let response = client
            .post(&poll_url)
            .header("content-type", "application/json")
            .body(
                serde_json::json!({
                    "device_auth_id": code.device_auth_id,
                    "user_code": code.user_code,
                })
                .to_string(),
            )
            .send()
            .await
            .map_err(|source| AuthError::Unreachable {
                url: poll_url.clone(),
                source,
            })?;
        let status = response.status().as_u16();
        if status == 200 {
            let body = response
                .bytes()
                .await
                .map_err(|source| AuthError::UnreadableAnswer {
                    url: poll_url.clone(),
                    source,
                })?;
            break serde_json::from_slice::<Grant>(&body).map_err(|source| {
                AuthError::BadAnswer {
                    url: poll_url.clone(),
                    expected: Expected::Grant,
                    source,
                }
            })?;
        }
        // 403 and 404 mean the code has not been entered yet.
        if status != 403 && status != 404 {
            return Err(AuthError::PollFailed {
                url: poll_url,
                status,
            });
        }
        if now() > deadline {
            return Err(AuthError::CodeExpired);
        }
    };
    let redirect = format!("{base}/deviceauth/callback");
    let reply = token_request(
        &client,
        issuer,
        &[
            ("grant_type", "authorization_code"),
            ("code", grant.authorization_code.as_str()),
            ("redirect_uri", redirect.as_str()),
            ("client_id", issuer.client_id.as_str()),
            ("code_verifier", grant.code_verifier.as_str()),
        ],
    )
    .await?;
    match reply {
        Ok(tokens) => store.put(&issuer.provider, tokens_from(tokens, None)),
        Err((error, detail)) => Err(AuthError::Denied { error, detail }),
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
    pub fn open(issuer: Issuer, store: AuthStore) -> Result<Arc<LoginCredentials>, AuthError> {
        let tokens = store
            .get(&issuer.provider)?
            .ok_or_else(|| AuthError::NotLoggedIn {
                provider: Some(issuer.provider.clone()),
            })?;
        Ok(Arc::new(LoginCredentials {
            issuer,
            store,
            current: Mutex::new(Some(tokens)),
        }))
    }

    /// The access token, refreshed first when it is about to expire.
    pub async fn token(&self) -> Result<String, AuthError> {
        let mut current = self.current.lock().await;
        let tokens = current
            .clone()
            .ok_or(AuthError::NotLoggedIn { provider: None })?;
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

    /// The ChatGPT account the login belongs to, when the issuer said.
    pub async fn account_id(&self) -> Option<String> {
        self.current.lock().await.as_ref()?.account_id.clone()
    }

    /// After a 401: refresh unless another request already did since `stale`
    /// was handed out.
    pub async fn refresh_after_unauthorized(&self, stale: &str) -> Result<String, AuthError> {
        let mut current = self.current.lock().await;
        let tokens = current
            .clone()
            .ok_or(AuthError::NotLoggedIn { provider: None })?;
        if tokens.access_token != stale {
            return Ok(tokens.access_token);
        }
        let fresh = self.refresh_locked(&tokens).await?;
        let token = fresh.access_token.clone();
        *current = Some(fresh);
        Ok(token)
    }

    async fn refresh_locked(&self, tokens: &Tokens) -> Result<Tokens, AuthError> {
        let relogin = || AuthError::Expired {
            provider: self.issuer.provider.clone(),
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
                let fresh = tokens_from(t, Some(tokens));
                // New tokens are secrets like the old ones: never shown.
                crate::redact::remember(fresh.secrets());
                self.store.put(&self.issuer.provider, fresh.clone())?;
                Ok(fresh)
            }
            Err(_) => Err(relogin()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_claims_give_expiry_and_account() {
        // {"exp":1700000000,"https://api.openai.com/auth":{"chatgpt_account_id":"a-1"}}
        let payload = "eyJleHAiOjE3MDAwMDAwMDAsImh0dHBzOi8vYXBpLm9wZW5haS5jb20vYXV0aCI6eyJjaGF0Z3B0X2FjY291bnRfaWQiOiJhLTEifX0";
        let token = format!("e30.{payload}.sig");
        let claims = jwt_claims(&token).expect("claims");
        assert_eq!(claims["exp"], 1_700_000_000);
        assert_eq!(account_id_of(&token).as_deref(), Some("a-1"));
        assert!(jwt_claims("not-a-jwt").is_none());
        assert!(jwt_claims("a.!!!.b").is_none());
        assert_eq!(base64url_decode("aGk").unwrap(), b"hi");
    }
}
