//! How the REPL shows and sets the agent's approval policy (`/approve`): ask
//! each time, approve everything, deny everything, or approve everything
//! until a moment and then ask again; and how it lists the "always" rules,
//! numbered for `/approve remove N`. The policy and the rules live in the
//! agent; saving remembered ones is the host's.

use super::commands::ApproveArg;
use crate::agent::allowlist::{scope_note, AllowRule};
use crate::agent::protocol::ApprovalPolicy;
use std::time::Duration;

/// The policy an argument sets; `None` for one that sets none (`remove`).
pub fn policy_from_arg(arg: &ApproveArg, now_unix_ms: u64) -> Option<ApprovalPolicy> {
    Some(match arg {
        ApproveArg::Ask => ApprovalPolicy::Ask,
        ApproveArg::All => ApprovalPolicy::All,
        ApproveArg::None => ApprovalPolicy::None,
        ApproveArg::For(d) => ApprovalPolicy::Until {
            unix_ms: now_unix_ms + d.as_millis() as u64,
        },
        ApproveArg::Remove(_) => return None,
    })
}

/// The "always" rules as `/approve` lists them, one numbered line each,
/// with what each covers; `session` are the prefixes this REPL saw allowed,
/// for a host that keeps no list.
pub fn rules_listing(rules: &[AllowRule], session: &[String]) -> String {
    let fallback: Vec<AllowRule> = session
        .iter()
        .map(|s| AllowRule {
            shown: s.clone(),
            remembered: false,
        })
        .collect();
    let rules = if rules.is_empty() { &fallback } else { rules };
    if rules.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nalways allowed (/approve remove N drops one):");
    for (i, r) in rules.iter().enumerate() {
        out.push_str(&format!(
            "\n  {}. `{}`{}{}",
            i + 1,
            crate::text::visible(&r.shown),
            scope_note(&r.shown)
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            if r.remembered {
                ", remembered"
            } else {
                ", this session"
            }
        ));
    }
    out
}

pub fn describe(policy: &ApprovalPolicy) -> String {
    describe_at(policy, crate::clock::now_unix_ms())
}

fn describe_at(policy: &ApprovalPolicy, now_unix_ms: u64) -> String {
    match policy {
        ApprovalPolicy::Ask => "ask before each shell command".into(),
        ApprovalPolicy::All => "approve every shell command".into(),
        ApprovalPolicy::None => "deny every shell command".into(),
        ApprovalPolicy::Edits => "approve file edits, ask before each shell command".into(),
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
        let p =
            policy_from_arg(&ApproveArg::For(Duration::from_secs(600)), 1_000).expect("a policy");
        assert_eq!(p, ApprovalPolicy::Until { unix_ms: 601_000 });
        assert_eq!(
            describe_at(&p, 1_000),
            "approve every shell command for 10m00s more, then ask"
        );
        assert_eq!(describe_at(&p, 601_000), "ask before each shell command");
    }

    #[test]
    fn rules_are_listed_numbered_with_what_they_cover() {
        let rules = [
            AllowRule {
                shown: "git log".into(),
                remembered: true,
            },
            AllowRule {
                shown: "cargo test".into(),
                remembered: false,
            },
        ];
        assert_eq!(
            rules_listing(&rules, &[]),
            "\nalways allowed (/approve remove N drops one):\n  1. `git log` (without options that write files or run programs), remembered\n  2. `cargo test`, this session"
        );
        assert_eq!(rules_listing(&[], &[]), "");
    }

    #[test]
    fn durations_read_shortly() {
        assert_eq!(short_duration(Duration::from_secs(3900)), "1h05m");
        assert_eq!(short_duration(Duration::from_secs(250)), "4m10s");
        assert_eq!(short_duration(Duration::from_secs(12)), "12s");
    }
}
