//! When and how long to wait before trying a failed request again: exponential
//! backoff with jitter, overridden by the server's `Retry-After` when it gives one.

use std::time::Duration;

const BASE: Duration = Duration::from_millis(500);
const CAP: Duration = Duration::from_secs(30);
/// A server asking for more than this is not worth blocking a terminal on.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

/// Delay before retry number `attempt` (1-based).
pub fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(d) = retry_after {
        return d.min(MAX_RETRY_AFTER);
    }
    let exp = BASE.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let capped = exp.min(CAP);
    // Jitter in [0.75, 1.25) keeps many clients from retrying in lockstep.
    let factor = 0.75 + 0.5 * unit_random();
    capped.mul_f64(factor)
}

/// Parses `Retry-After`: seconds (the form API servers mostly use) or an HTTP
/// date, which becomes the time left until then (zero if it has passed).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    parse_retry_after_at(value, crate::clock::now_unix())
}

fn parse_retry_after_at(value: &str, now_unix: u64) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(when) = httpdate::parse_http_date(v) {
        let when = when
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        return Some(Duration::from_secs(when.saturating_sub(now_unix)));
    }
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// A number in [0, 1) that differs between calls and processes; good enough for
/// jitter without a random-number crate.
fn unit_random() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_wins_and_is_capped() {
        assert_eq!(
            backoff(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(backoff(1, Some(Duration::from_secs(9999))), MAX_RETRY_AFTER);
    }

    #[test]
    fn backoff_grows_and_stays_bounded() {
        let first = backoff(1, None);
        assert!(first >= Duration::from_millis(375) && first < Duration::from_millis(625));
        let third = backoff(3, None);
        assert!(third >= Duration::from_millis(1500) && third < Duration::from_millis(2500));
        assert!(backoff(40, None) <= CAP.mul_f64(1.25));
    }

    #[test]
    fn parses_retry_after_seconds() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        // 2015-10-21 07:28:00 UTC is 1445412480.
        let date = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(
            parse_retry_after_at(date, 1_445_412_480 - 7),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after_at(date, 1_445_412_480 + 60),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        // The two obsolete forms a recipient must still read (RFC 9110 5.6.7).
        for old in [
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(
                parse_retry_after_at(old, 1_445_412_480 - 7),
                Some(Duration::from_secs(7)),
                "{old}"
            );
        }
        assert_eq!(parse_retry_after_at("Wed, 21 Oct 2015 07:28 GMT", 0), None);
        assert_eq!(
            parse_retry_after_at("Wed, 21 Oct 2015 07:28:00 PST", 0),
            None
        );
        assert_eq!(
            parse_retry_after_at("Wed, 32 Oct 2015 07:28:00 GMT", 0),
            None
        );
        assert_eq!(parse_retry_after_at("soon", 0), None);
    }
}
