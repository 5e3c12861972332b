//! Logging in with a device flow, the one way buddy does it: `buddy login`
//! and the REPL's `/login` both run `sign_in`, so the front end never calls
//! `auth` itself (the REPL gets it through its `ReplHost`).

use super::{auth_store, login_issuer, AppError};
use crate::config::CliOverrides;

/// Logs in to the provider `target` names (`login_issuer`), telling the
/// user what to do through `say`; the line that says where the tokens are.
/// No usable issuer or store is `AppError::Auth` (exit 2), a flow that fails
/// `AppError::Login` (exit 1).
pub(crate) async fn sign_in(
    target: Option<&str>,
    overrides: &CliOverrides,
    say: &(dyn Fn(&str) + Send + Sync),
) -> Result<String, AppError> {
    let issuer = login_issuer(target, overrides)?;
    let store = auth_store()?;
    crate::auth::login(&issuer, &store, say)
        .await
        .map_err(AppError::Login)?;
    Ok(format!(
        "logged in to {}; tokens saved in {}",
        issuer.provider,
        store.path().display()
    ))
}
