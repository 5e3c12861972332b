//! The approval seam between tools and whoever can say yes: a tool that may
//! change the system asks an `Approver` and waits. The policy (the denylist,
//! ask, approve all, deny when nobody can be asked) belongs to the agent that
//! implements it, not to the tools.

use super::elicitation::{Outcome, Question};
use async_trait::async_trait;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The model's tool call this is for.
    pub call_id: String,
    /// Tool asking, e.g. `run_shell`.
    pub tool: String,
    /// Who would run it, `user@host`.
    pub actor: String,
    /// What would run or change, shown verbatim to the user: a command, or
    /// for a file write the path and what happens to it.
    pub command: String,
    /// What a front end should show beside `command` before asking: for a
    /// file write, a unified diff of the change (bounded; see `files::diff`).
    pub detail: Option<String>,
    /// The tool says this call only reads and the user chose to believe it
    /// (an MCP tool annotated `readOnlyHint` on a server with
    /// `trust_read_only`): the gate approves it as it does a read-only shell
    /// line, after the denylist and the policy.
    pub read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    Approved,
    /// Refused; `reason` is told to the model so it can adapt.
    Denied {
        reason: String,
    },
    /// Never allowed (the denylist); the tool reports it as an error.
    Refused {
        reason: String,
    },
}

#[async_trait]
pub trait Approver: Send + Sync {
    async fn approve(&self, request: ApprovalRequest) -> Approval;

    /// `approve` for a sub-agent's tool (`subagent` is the child's name, for
    /// the question a front end shows). An approver that asks nobody may
    /// ignore the name.
    async fn approve_for(&self, request: ApprovalRequest, subagent: Option<&str>) -> Approval {
        let _ = subagent;
        self.approve(request).await
    }

    /// Puts a server's question to the user and waits, at most `wait`,
    /// for how it ended (`elicitation::Outcome`). An approver that asks
    /// nobody declines it, saying so.
    async fn elicit(&self, question: Question, wait: std::time::Duration) -> Outcome {
        let _ = (question, wait);
        Outcome::Refused("nobody can be asked here".into())
    }
}

/// Approves everything; for tests and for callers that already decided.
pub struct AlwaysApprove;

#[async_trait]
impl Approver for AlwaysApprove {
    async fn approve(&self, _request: ApprovalRequest) -> Approval {
        Approval::Approved
    }
}

pub use crate::host::local_actor;
