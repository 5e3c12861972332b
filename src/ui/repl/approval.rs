//! How the REPL shows and sets the agent's approval policy (`/approve`): ask
//! each time, approve everything, deny everything, or approve everything
//! until a moment and then ask again. The policy itself lives in the agent.

use super::commands::ApproveArg;
use crate::agent::protocol::ApprovalPolicy;
use std::time::Duration;

pub fn policy_from_arg(arg: &ApproveArg, now_unix_ms: u64) -> ApprovalPolicy {
    match arg {
        ApproveArg::Ask => ApprovalPolicy::Ask,
        ApproveArg::All => ApprovalPolicy::All,
        ApproveArg::None => ApprovalPolicy::None,
        ApproveArg::For(d) => ApprovalPolicy::Until {
            unix_ms: now_unix_ms + d.as_millis() as u64,
        },
    }
}

pub fn describe(policy: &ApprovalPolicy) -> String {
    describe_at(policy, crate::clock::now_unix_ms())
}

fn describe_at(policy: &ApprovalPolicy, now_unix_ms: u64) -> String {
    match policy {
        ApprovalPolicy::Ask => "ask before each shell command".into(),
        ApprovalPolicy::All => "approve every shell command".into(),
        ApprovalPolicy::None => "deny every shell command".into(),
        ApprovalPolicy::Until { unix_ms } if *unix_ms > now_unix_ms => format!(
            "approve every shell command for {} more, then ask",
            short_duration(Duration::from_millis(unix_ms - now_unix_ms))
        ),
        ApprovalPolicy::Until { .. } => "ask before each shell command".into(),
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
    fn a_window_describes_its_remaining_time_then_asks() {
        let p = policy_from_arg(&ApproveArg::For(Duration::from_secs(600)), 1_000);
        assert_eq!(p, ApprovalPolicy::Until { unix_ms: 601_000 });
        assert_eq!(
            describe_at(&p, 1_000),
            "approve every shell command for 10m00s more, then ask"
        );
        assert_eq!(describe_at(&p, 601_000), "ask before each shell command");
    }

    #[test]
    fn durations_read_shortly() {
        assert_eq!(short_duration(Duration::from_secs(3900)), "1h05m");
        assert_eq!(short_duration(Duration::from_secs(250)), "4m10s");
        assert_eq!(short_duration(Duration::from_secs(12)), "12s");
    }
}
