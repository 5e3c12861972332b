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

pub use crate::target::local_actor;
