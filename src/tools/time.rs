//! `time`: the current wall-clock time in the forms people and programs use.

use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct TimeTool;

/// (year, month, day) of a count of days since 1970-01-01, proleptic Gregorian.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01 so leap days fall at the end of a 400-year era.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

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
            json!({
                "type": "object",
                "properties": {},
                "required": [],
                "additionalProperties": false
            }),
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
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(20_415), (2025, 11, 23));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
        assert_eq!(civil_from_days(10_957), (2000, 1, 1));
        assert_eq!(civil_from_days(2_932_896), (9999, 12, 31));
        // 2100 is not a leap year: 28 February is followed by 1 March.
        assert_eq!(civil_from_days(47_540), (2100, 2, 28));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
    }

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
