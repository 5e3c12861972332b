//! Wall-clock helpers shared by the layers that stamp or show times (the `time`
//! tool, session ids and listings): calendar maths and compact formats, kept
//! here so none of them depends on another for it and no date crate is needed.
//! HTTP dates are not here: `httpdate` reads those (provider/retry.rs).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (0 if the clock is set before it).
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Milliseconds since the Unix epoch (0 if the clock is set before it).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

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

/// `YYYYMMDD-HHMMSS` in UTC: sorts as text in time order.
pub fn compact_utc(unix: u64) -> String {
    let secs = unix as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}{mo:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` (ISO 8601 / RFC 3339, UTC), for protocols that
/// carry a timestamp as text.
pub fn rfc3339_utc(unix: u64) -> String {
    let secs = unix as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A short age such as `just now`, `42s ago`, `5m ago`, `3h ago`, `12d ago`.
pub fn age(then: u64, now: u64) -> String {
    let s = now.saturating_sub(then);
    match s {
        0..=1 => "just now".to_string(),
        2..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// Text that is not a duration (the text, as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a duration (try 30s, 10m or 1h)")]
pub struct BadDuration(pub String);

/// `90`, `90s`, `500ms`, `10m`, `1h`, `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, BadDuration> {
    let bad = || BadDuration(s.to_string());
    if let Ok(secs) = s.parse::<u64>() {
        return (secs > 0)
            .then(|| Duration::from_secs(secs))
            .ok_or_else(bad);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let part = match &rest[..unit] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => return Err(bad()),
        };
        total += part;
        rest = &rest[unit..];
    }
    if total.is_zero() {
        return Err(bad());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_the_utc_moment() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_763_905_509), "2025-11-23T13:45:09Z");
    }

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
    fn compact_form_sorts_and_reads() {
        assert_eq!(compact_utc(1_763_905_509), "20251123-134509");
        assert_eq!(compact_utc(0), "19700101-000000");
        assert!(compact_utc(1_763_905_509) < compact_utc(1_763_905_510));
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(age(100, 100), "just now");
        assert_eq!(age(100, 142), "42s ago");
        assert_eq!(age(0, 300), "5m ago");
        assert_eq!(age(0, 3 * 3600 + 5), "3h ago");
        assert_eq!(age(0, 12 * 86_400), "12d ago");
        assert_eq!(age(500, 100), "just now");
    }
}
