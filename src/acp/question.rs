//! `elicitation/create`: a server's question for the user (an MCP
//! server's elicitation, `ElicitationRequested`) put to the editor as a
//! form it draws itself, tied to the session and the tool call that asked.
//! Only when the client said in `initialize` that it draws forms; otherwise
//! the question is declined with that reason. The editor's answer must fit
//! the form (`tools::elicitation`): one that does not, a failed request or
//! an answer of another kind declines, since nobody else can be asked.

use crate::agent::protocol::{ElicitationAction, ElicitationQuestion};
use crate::tools::elicitation::Mode;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, CreateElicitationRequest, CreateElicitationResponse,
    ElicitationAction as AcpAction, ElicitationFormMode, ElicitationSchema,
    ElicitationSessionScope,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error as RpcError};
use serde_json::{Map, Value};

/// Whether the client draws forms (`clientCapabilities.elicitation.form`).
pub fn offered(caps: &ClientCapabilities) -> bool {
    caps.elicitation.as_ref().is_some_and(|e| e.supports_form())
}

/// Why a question is not put to this client, if it is not.
pub fn refusal(caps: &ClientCapabilities, question: &ElicitationQuestion) -> Option<String> {
    match (&question.mode, offered(caps)) {
        (Mode::Form { .. }, true) => None,
        (Mode::Form { .. }, false) => Some("the editor does not show a server's forms".into()),
        (Mode::Url { .. }, _) => Some("buddy does not send the editor to a server's page".into()),
    }
}

/// The request for `question` in session `session`.
fn request(
    session: &str,
    question: &ElicitationQuestion,
) -> Result<CreateElicitationRequest, String> {
    let schema: ElicitationSchema =
        serde_json::from_value(question.schema()).map_err(|e| e.to_string())?;
    let scope = ElicitationSessionScope::new(session.to_string()).tool_call_id(
        agent_client_protocol::v1::schema::ToolCallId::new(question.call_id.clone()),
    );
    let mode = ElicitationFormMode::new(scope, schema);
    Ok(CreateElicitationRequest::new(
        mode,
        question.message.clone(),
    ))
}

/// The agent's answer for the client's.
fn answer(
    question: &ElicitationQuestion,
    got: Result<CreateElicitationResponse, RpcError>,
) -> (ElicitationAction, Option<String>) {
    let decline = |why: String| (ElicitationAction::Decline, Some(why));
    match got.map(|r| r.action) {
        Ok(AcpAction::Accept(accepted)) => {
            let content: Map<String, Value> = match serde_json::to_value(&accepted.content) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            match question.check(&content) {
                Ok(()) => (ElicitationAction::Accept { content }, None),
                Err(e) => decline(format!("the editor's answer did not fit the form: {e}")),
            }
        }
        Ok(AcpAction::Decline) => (ElicitationAction::Decline, None),
        Ok(AcpAction::Cancel) => (ElicitationAction::Cancel, None),
        Ok(_) => decline("the editor's answer was not understood".into()),
        Err(e) => decline(format!("the editor could not be asked: {e}")),
    }
}

/// Asks the client; the answer goes to the agent (the drive loop sends it).
pub async fn ask(
    cx: ConnectionTo<Client>,
    session: String,
    question: ElicitationQuestion,
) -> (ElicitationAction, Option<String>) {
    let request = match request(&session, &question) {
        Ok(r) => r,
        Err(e) => {
            return (
                ElicitationAction::Decline,
                Some(format!("the form could not be put to the editor: {e}")),
            )
        }
    };
    let got = cx.send_request(request).block_task().await;
    answer(&question, got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question() -> ElicitationQuestion {
        ElicitationQuestion::form(
            "q1".into(),
            "srv",
            "call-1",
            "Name?",
            &json!({"properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["name"]}),
        )
        .expect("a form")
    }

    #[test]
    fn the_request_carries_the_form_the_session_and_the_call() {
        let r = serde_json::to_value(request("s1", &question()).expect("a request")).unwrap();
        assert_eq!(r["mode"], "form");
        assert_eq!(r["sessionId"], "s1");
        assert_eq!(r["toolCallId"], "call-1");
        assert_eq!(r["requestedSchema"]["required"], json!(["name"]));
        assert_eq!(r["requestedSchema"]["properties"]["n"]["type"], "integer");
    }

    #[test]
    fn an_answer_that_does_not_fit_declines_with_the_reason() {
        let q = question();
        let accept = |content: Value| {
            serde_json::from_value::<CreateElicitationResponse>(
                json!({"action": "accept", "content": content}),
            )
        };
        let ok = answer(&q, Ok(accept(json!({"name": "Ann", "n": 2})).unwrap()));
        assert!(
            matches!(ok, (ElicitationAction::Accept { .. }, None)),
            "{ok:?}"
        );
        let bad = answer(&q, Ok(accept(json!({"n": 2})).unwrap()));
        assert_eq!(bad.0, ElicitationAction::Decline);
        assert!(bad.1.is_some_and(|r| r.contains("name is required")));
        let failed = answer(&q, Err(RpcError::internal_error()));
        assert_eq!(failed.0, ElicitationAction::Decline);
    }
}
