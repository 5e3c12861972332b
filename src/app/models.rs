//! `buddy models`: the models the active profile's server lists.

use super::setup::{client_for, load_settings, Resolved};
use super::{AppError, Exit};
use crate::config::CliOverrides;

/// `buddy models`: the models the active profile's server offers, one per
/// line on stdout, the one in use marked with `*`.
pub(super) async fn list_models(overrides: &CliOverrides) -> Result<Exit, AppError> {
    let Resolved {
        settings, style, ..
    } = load_settings(overrides, &super::workdir()).await?;
    let client = client_for(&settings, None)?;
    let models = client
        .list_models()
        .await
        .map_err(|e| AppError::Failed(format!("cannot list the models: {e}")))?;
    let current = &settings.api.model;
    eprintln!(
        "{}",
        style.dim(&format!(
            "models at {} (profile {}); * is in use",
            settings.api.base_url, settings.api.profile
        ))
    );
    let mut out = String::new();
    for m in &models {
        let mark = if &m.id == current { "*" } else { " " };
        out.push_str(&format!("{mark} {}\n", m.id));
    }
    use std::io::Write;
    // A closed pipe (`buddy models | head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    if models.is_empty() {
        eprintln!("the server lists no models");
    } else if !models.iter().any(|m| &m.id == current) {
        eprintln!(
            "{} the model in use, {current}, is not in the server's list",
            style.warning("note:")
        );
    }
    Ok(Exit::Ok)
}
