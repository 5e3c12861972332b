//! `time`: the current wall-clock time in the forms people and programs use.

use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::clock::civil_from_days;
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use serde_json::Value;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct TimeTool;

/// No arguments. Read for its schema only: whatever a model sends is ignored.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {}

const WEEKDAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

/// Formats epoch milliseconds in every form the tool returns.
pub fn describe(epoch_ms: i64) -> String {
    let secs = epoch_ms.div_euclid(1000);
    let millis = epoch_ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let weekday = WEEKDAYS[days.rem_euclid(7) as usize];
    format!(
        "utc_rfc3339: {y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{millis:03}Z\n\
         human: {weekday} {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC\n\
         unix_seconds: {secs}\n\
         unix_millis: {epoch_ms}"
    )
}

#[async_trait]
impl Tool for TimeTool {
    fn name(&self) -> &'static str {
        "time"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "time",
            "Get the current date and time (UTC, RFC 3339, Unix seconds and milliseconds).",
            crate::tools::schema::of::<Args>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        1000
    }

    async fn execute(&self, _args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| ToolError::Failed(format!("the system clock is before 1970: {e}")))?
            .as_millis() as i64;
        Ok(ToolOutput::text(describe(ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_is_present() {
        let text = describe(1_763_905_509_123);
        assert!(
            text.contains("utc_rfc3339: 2025-11-23T13:45:09.123Z"),
            "{text}"
        );
        assert!(
            text.contains("human: Sunday 2025-11-23 13:45:09 UTC"),
            "{text}"
        );
        assert!(text.contains("unix_seconds: 1763905509"));
        assert!(text.contains("unix_millis: 1763905509123"));
        let before_epoch = describe(-1);
        assert!(
            before_epoch.contains("utc_rfc3339: 1969-12-31T23:59:59.999Z"),
            "{before_epoch}"
        );
        assert!(before_epoch.contains("human: Wednesday 1969-12-31"));
    }
}
