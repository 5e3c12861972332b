//! `buddy login` and `buddy logout`: which issuer a login means, the device
//! flow's prompts on stderr, and the user's `auth.json`. Logging in is a
//! device flow, the one way buddy does it: `buddy login` and the REPL's
//! `/login` both run `sign_in`, so the front end never calls `auth` itself
//! (the REPL gets it through its `ReplServices`).

use super::setup::auth_store;
use super::{env, workdir, AppError, Exit};
use crate::auth::AuthError;
use crate::config::{self, CliOverrides, ConfigFile};
use crate::ui::repl::{LoggedIn, LoginError};

pub(super) async fn login(
    target: Option<&str>,
    overrides: &CliOverrides,
) -> Result<Exit, AppError> {
    let say = |line: &str| eprintln!("{line}");
    let trust = config::trust::TrustStore::of_user(&env);
    let (file, _) = config::load_file(&workdir(), &env, overrides, trust.as_deref())
        .map_err(|e| AppError::Auth(AuthError::Config(Box::new(e))))?;
    let cancelled = tokio::signal::ctrl_c();
    tokio::select! {
        r = sign_in(target, &file, overrides, &say) => {
            let done = r.map_err(|e| match e {
                LoginError::Setup(e) => AppError::Auth(e),
                LoginError::Failed(e) => AppError::Login(e),
            })?;
            eprintln!("{}", done.line());
            Ok(Exit::Ok)
        }
        _ = cancelled => {
            eprintln!("login cancelled");
            Ok(Exit::Interrupted)
        }
    }
}

/// Logs in to the provider `target` names (`login_issuer`) in config
/// `file` (as parsed already), telling the user what to do through `say`;
/// the provider and where its tokens are.
/// No usable issuer or store is `LoginError::Setup` (`AppError::Auth`, exit
/// 2), a flow that fails `LoginError::Failed` (`AppError::Login`, exit 1).
pub(crate) async fn sign_in(
    target: Option<&str>,
    file: &ConfigFile,
    overrides: &CliOverrides,
    say: &(dyn Fn(&str) + Send + Sync),
) -> Result<LoggedIn, LoginError> {
    let issuer = login_issuer(target, file, overrides);
    let store = auth_store().map_err(LoginError::Setup)?;
    crate::auth::login(&issuer, &store, say)
        .await
        .map_err(LoginError::Failed)?;
    Ok(LoggedIn {
        provider: issuer.provider.to_string(),
        file: store.path().to_path_buf(),
    })
}

pub(super) fn logout(provider: Option<&str>) -> Result<Exit, AppError> {
    let provider = provider.unwrap_or("openai");
    let store = auth_store()?;
    if store.remove(provider)? {
        eprintln!("logged out of {provider}");
    } else {
        eprintln!("not logged in to {provider}");
    }
    Ok(Exit::Ok)
}

/// Which provider `buddy login [provider|profile]` means, and its issuer: a
/// profile name picks its provider; anything else names a provider; nothing
/// means the active profile's provider, or `openai`.
pub(super) fn login_issuer(
    target: Option<&str>,
    file: &ConfigFile,
    overrides: &CliOverrides,
) -> crate::auth::Issuer {
    let provider = match target {
        Some(name) => match file.models.get(name) {
            Some(profile) => profile.provider.clone().unwrap_or_else(|| "openai".into()),
            None => name.to_string(),
        },
        None => {
            let active = overrides
                .model
                .clone()
                .or_else(|| file.agent.model.clone())
                .unwrap_or_default();
            file.models
                .get(&active)
                .filter(|p| p.auth == config::AuthMode::Login)
                .and_then(|p| p.provider.clone())
                .unwrap_or_else(|| "openai".into())
        }
    };
    config::issuer_for(&file.auth, &provider)
}
