//! `session/request_permission`: the agent's approval question put to the
//! client, and its answer turned into the agent's `Decision`. There is no
//! terminal behind `buddy acp`, so the client is the only one asked and
//! nothing that needs consent runs without its answer: a cancelled
//! question, an unknown option or a failed request all deny.

use crate::agent::protocol::Decision;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallUpdate,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error as RpcError};

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";

/// The options offered: "always" only where the agent offers a prefix to
/// remember (a shell command's words), since elsewhere it would mean once.
pub fn options(always: Option<&str>) -> Vec<PermissionOption> {
    let mut out = vec![PermissionOption::new(
        ALLOW_ONCE,
        "Allow",
        PermissionOptionKind::AllowOnce,
    )];
    if let Some(prefix) = always {
        out.push(PermissionOption::new(
            ALLOW_ALWAYS,
            format!("Always allow `{}`", crate::text::one_line(prefix, 60)),
            PermissionOptionKind::AllowAlways,
        ));
    }
    out.push(PermissionOption::new(
        REJECT_ONCE,
        "Reject",
        PermissionOptionKind::RejectOnce,
    ));
    out
}

/// The agent's decision for the client's answer.
pub fn decision(outcome: Result<RequestPermissionOutcome, RpcError>) -> Decision {
    let deny = |reason: &str| Decision::Deny {
        reason: Some(reason.to_string()),
    };
    match outcome {
        Ok(RequestPermissionOutcome::Selected(s)) => match s.option_id.0.as_ref() {
            ALLOW_ONCE => Decision::Approve,
            ALLOW_ALWAYS => Decision::ApproveAlways,
            REJECT_ONCE => deny("the user rejected this in the editor"),
            _ => deny("the editor answered with an option buddy did not offer"),
        },
        Ok(RequestPermissionOutcome::Cancelled) => deny("the user cancelled the turn"),
        Ok(_) => deny("the editor's answer was not understood"),
        Err(e) => deny(&format!("the editor could not be asked: {e}")),
    }
}

/// Asks the client; the decision is its answer (the session's drive loop
/// waits for it and hands it to the agent).
pub async fn ask(
    cx: ConnectionTo<Client>,
    session: String,
    tool_call: ToolCallUpdate,
    always: Option<String>,
) -> Decision {
    let request = RequestPermissionRequest::new(session, tool_call, options(always.as_deref()));
    let answer = cx
        .send_request(request)
        .block_task()
        .await
        .map(|r| r.outcome);
    decision(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;

    fn picked(id: &str) -> Result<RequestPermissionOutcome, RpcError> {
        Ok(RequestPermissionOutcome::Selected(
            SelectedPermissionOutcome::new(id.to_string()),
        ))
    }

    #[test]
    fn answers_map_to_decisions_and_anything_else_denies() {
        assert_eq!(decision(picked(ALLOW_ONCE)), Decision::Approve);
        assert_eq!(decision(picked(ALLOW_ALWAYS)), Decision::ApproveAlways);
        assert!(matches!(
            decision(picked(REJECT_ONCE)),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decision(picked("yes please")),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decision(Ok(RequestPermissionOutcome::Cancelled)),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decision(Err(RpcError::internal_error())),
            Decision::Deny { .. }
        ));
    }

    #[test]
    fn always_is_offered_only_with_a_prefix() {
        assert_eq!(options(None).len(), 2);
        let with = options(Some("cargo test"));
        assert_eq!(with.len(), 3);
        assert_eq!(with[1].kind, PermissionOptionKind::AllowAlways);
    }
}
