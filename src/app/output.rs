//! What `buddy exec` does with its answer for scripts beyond printing it:
//! the output schema read from its file (`--output-schema`, before anything
//! is sent), the answer also written to a file (`-o FILE`), and the check
//! that a spending limit (`--max-cost`) can be kept at all.

use super::{AppError, InputError};
use crate::agent::tokens::Pricing;
use crate::agent::ModelInfo;
use crate::wire::OutputSchema;
use std::path::Path;

/// The most a schema file may hold; schemas are a few KiB.
const MAX_SCHEMA_BYTES: u64 = 1024 * 1024;

/// Reads and compiles the schema at `path`; any problem is one usage line.
pub fn load_schema(path: &Path) -> Result<OutputSchema, AppError> {
    let shown = crate::text::visible(&path.display().to_string()).into_owned();
    let bytes = crate::localfile::read_regular(path, MAX_SCHEMA_BYTES)
        .map_err(|e| invalid(&shown, e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| invalid(&shown, "not UTF-8 text".into()))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    OutputSchema::parse(&text, &stem).map_err(|e| invalid(&shown, e.to_string()))
}

fn invalid(shown: &str, problem: String) -> AppError {
    AppError::Input(InputError::Invalid {
        what: format!("--output-schema {shown}"),
        problem,
    })
}

/// Writes the final answer to `path` as well as stdout: replaced
/// atomically, and private to the user (0600) like the session files, since
/// an answer can quote whatever the tools read.
pub fn write_last_message(path: &Path, answer: &str) -> Result<(), AppError> {
    let mut text = answer.trim_end_matches(['\n', '\r']).to_string();
    text.push('\n');
    crate::atomic_file::replace(path, text.as_bytes(), crate::atomic_file::PRIVATE).map_err(|e| {
        AppError::Failed(format!(
            "cannot write the answer to {}: {e}",
            crate::text::visible(&path.display().to_string())
        ))
    })
}

/// `--max-cost` needs a price to count against: a model without one is a
/// usage error, said before anything is spent.
pub fn check_max_cost(model: &ModelInfo, max: f64) -> Result<(), AppError> {
    match model.pricing {
        Pricing::Unknown => Err(AppError::Usage(format!(
            "--max-cost {}: buddy knows no price for model {}; set one in its profile, [models.{}] price = {{ input = …, output = … }} (US dollars per million tokens)",
            crate::agent::tokens::format_usd(max),
            crate::text::visible(&model.model),
            crate::text::visible(&model.profile),
        ))),
        Pricing::Priced(_) | Pricing::Local => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_cost_needs_a_known_price_or_a_free_server() {
        let mut model = ModelInfo {
            model: "mystery-1".into(),
            profile: "work".into(),
            ..ModelInfo::default()
        };
        let e = check_max_cost(&model, 0.5).unwrap_err();
        assert!(matches!(e, AppError::Usage(_)));
        assert!(e.to_string().contains("[models.work] price"), "{e}");
        model.pricing = Pricing::Local;
        assert!(check_max_cost(&model, 0.5).is_ok());
    }
}
