//! `--store postgres://…`: which session database a command uses (the flag,
//! else `BUDDY_STORE`) and connecting to it, for `buddy serve` and for the
//! commands an administrator reads the database with (`buddy sessions`,
//! `export`, `resume`). The password in a URL is kept out of every message,
//! log and session.

use super::AppError;
use crate::session::postgres::{redacted, Pg};
use std::sync::Arc;
use std::time::Duration;

/// The database URL a command was given: `--store`, else `BUDDY_STORE`;
/// `None` for the session files (an empty value means them too).
pub(super) fn store_url(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_string)
        .or_else(|| crate::process::var(crate::config::STORE_ENV))
        .filter(|u| !u.is_empty())
}

/// Connects to the session database at `url`, its tables made if missing;
/// sessions continued through it hold their lease for `lease`.
pub(super) async fn connect(url: &str, lease: Duration) -> Result<Arc<Pg>, AppError> {
    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
        return Err(AppError::Usage(format!(
            "--store takes a postgres:// URL, not {}",
            redacted(url)
        )));
    }
    if let Ok(parsed) = url.parse::<tokio_postgres::Config>() {
        if let Some(p) = parsed.get_password() {
            crate::redact::remember(std::iter::once(&String::from_utf8_lossy(p).into_owned()));
        }
    }
    Pg::connect(url, lease).await.map_err(|e| {
        AppError::Usage(format!(
            "cannot use the session database {}: {e}",
            redacted(url)
        ))
    })
}
