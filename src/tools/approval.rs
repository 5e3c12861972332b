//! The approval seam between tools and whoever can say yes: a tool that needs
//! consent asks an `Approver` and waits. Policy (ask, auto-approve, deny when no
//! terminal) belongs to the front end that implements it, not to the tools.

use async_trait::async_trait;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// Tool asking, e.g. `run_shell`.
    pub tool: String,
    /// Who would run it, `user@host`.
    pub actor: String,
    /// What would run, shown verbatim to the user.
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    Approved,
    /// Refused; `reason` is told to the model so it can adapt.
    Denied {
        reason: String,
    },
}

#[async_trait]
pub trait Approver: Send + Sync {
    async fn approve(&self, request: ApprovalRequest) -> Approval;
}

/// Approves everything; for tests and for callers that already decided.
pub struct AlwaysApprove;

#[async_trait]
impl Approver for AlwaysApprove {
    async fn approve(&self, _request: ApprovalRequest) -> Approval {
        Approval::Approved
    }
}

/// The local `user@host` string shown in approval prompts.
pub fn local_actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(user_from_passwd)
        .unwrap_or_else(|| "user".to_string());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    format!("{user}@{host}")
}

extern "C" {
    fn getuid() -> u32;
}

/// The name of the current uid in /etc/passwd, for environments without $USER
/// (cron, tmux started by a service, containers).
fn user_from_passwd() -> Option<String> {
    // SAFETY: getuid(2) cannot fail and touches no memory.
    let uid = unsafe { getuid() };
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (id == uid).then(|| name.to_string())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwd_lookup_finds_the_current_user() {
        let name = super::user_from_passwd().expect("uid in /etc/passwd");
        assert!(!name.is_empty());
    }
}
