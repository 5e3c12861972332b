//! The REPL's shell-approval policy, set with `/approve`: ask each time,
//! approve everything, deny everything, or approve everything until a moment
//! and then ask again.

use super::commands::ApproveArg;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Ask,
    All,
    None,
    Until(Instant),
}

impl Policy {
    pub fn from_arg(arg: &ApproveArg, now: Instant) -> Policy {
        match arg {
            ApproveArg::Ask => Policy::Ask,
            ApproveArg::All => Policy::All,
            ApproveArg::None => Policy::None,
            ApproveArg::For(d) => Policy::Until(now + *d),
        }
    }

    /// `Some(true)` to approve without asking, `Some(false)` to deny, `None` to
    /// ask. An expired window turns back into asking.
    pub fn decide(&mut self, now: Instant) -> Option<bool> {
        match *self {
            Policy::Ask => None,
            Policy::All => Some(true),
            Policy::None => Some(false),
            Policy::Until(t) if now < t => Some(true),
            Policy::Until(_) => {
                *self = Policy::Ask;
                None
            }
        }
    }

    pub fn describe(&self, now: Instant) -> String {
        match self {
            Policy::Ask => "ask before each shell command".into(),
            Policy::All => "approve every shell command".into(),
            Policy::None => "deny every shell command".into(),
            Policy::Until(t) => {
                let left = t.saturating_duration_since(now);
                format!(
                    "approve every shell command for {} more, then ask",
                    short_duration(left)
                )
            }
        }
    }
}

/// `1h05m`, `4m10s`, `12s`.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_approves_until_it_expires_then_asks() {
        let t0 = Instant::now();
        let mut p = Policy::from_arg(&ApproveArg::For(Duration::from_secs(600)), t0);
        assert_eq!(p.decide(t0 + Duration::from_secs(599)), Some(true));
        assert_eq!(p.decide(t0 + Duration::from_secs(600)), None);
        assert_eq!(p, Policy::Ask);
    }

    #[test]
    fn fixed_policies() {
        let now = Instant::now();
        assert_eq!(Policy::All.decide(now), Some(true));
        assert_eq!(Policy::None.decide(now), Some(false));
        assert_eq!(Policy::Ask.decide(now), None);
        assert_eq!(short_duration(Duration::from_secs(3900)), "1h05m");
        assert_eq!(short_duration(Duration::from_secs(250)), "4m10s");
    }
}
