//! Rewinding a served session: `GET /api/sessions/{id}/turns` lists its
//! turns, each with what putting the files back to before it would do (and
//! the last rewind's undo point after them), and `POST
//! /api/sessions/{id}/rewind` takes the files, the conversation or both
//! back to before one. Both are the agent's own `Turns` and `Rewind` ops,
//! asked of the session's agent between runs ([`Live::ask`]): refused (409)
//! while a run is going or another instance holds the session, as a prompt
//! is. A rewind is published to the session's followers and audited.
//!
//! This module does not restore anything itself (`agent::rewind` and the
//! session's checkpoint store do); it carries the ops over HTTP.

use super::audit::Entry;
use super::forwarded::Client;
use super::guard::error;
use super::http::{in_progress, resume_status, unknown, State};
use super::live::StartError;
use super::team::Caller;
use crate::agent::protocol::{EventKind, Op};
use axum::extract::{Path, State as Ext};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;

/// The two routes, for `http::router`.
pub(super) fn routes() -> axum::Router<State> {
    axum::Router::new()
        .route("/api/sessions/{id}/turns", axum::routing::get(turns))
        .route("/api/sessions/{id}/rewind", axum::routing::post(rewind))
}

/// What to take back, as `Op::Rewind` says it.
#[derive(Deserialize)]
pub(super) struct RewindBody {
    /// A turn id from the listing (or its undo point's).
    turn: String,
    #[serde(default)]
    code: bool,
    #[serde(default)]
    conversation: bool,
}

/// `GET /api/sessions/{id}/turns`: `{"turns": [...], "note": ...}`, the
/// agent's `Turns` reply.
async fn turns(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    match ask(&state, &caller, &id, Op::Turns, false).await {
        Ok(EventKind::Turns { turns, note }) => {
            Json(json!({ "turns": turns, "note": note })).into_response()
        }
        Ok(other) => refused(other),
        Err(r) => r,
    }
}

/// `POST /api/sessions/{id}/rewind`: the agent's `Rewound` reply (what
/// happened to each file, the messages taken out), or 400 with the reason
/// it refused.
async fn rewind(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Extension(client): Extension<Client>,
    Path(id): Path<String>,
    Json(body): Json<RewindBody>,
) -> Response {
    let op = Op::Rewind {
        turn: body.turn.clone(),
        code: body.code,
        conversation: body.conversation,
    };
    let answer = match ask(&state, &caller, &id, op, true).await {
        Ok(EventKind::Rewound {
            turn,
            files,
            removed,
            prompt,
            commands,
        }) => Json(json!({
            "turn": turn,
            "files": files,
            "removed": removed,
            "prompt": prompt,
            "commands": commands,
        }))
        .into_response(),
        Ok(other) => refused(other),
        Err(r) => r,
    };
    state.audit(Entry {
        action: "rewind",
        user: Some(caller.audit_name()),
        client: Some(client),
        session: Some(&id),
        status: answer.status().as_u16(),
        detail: json!({
            "turn": body.turn,
            "code": body.code,
            "conversation": body.conversation,
        }),
        text: None,
    });
    answer
}

/// The agent's refusal as a 400 (any other reply is not one of ours).
fn refused(reply: EventKind) -> Response {
    match reply {
        EventKind::Error { message, .. } => error(StatusCode::BAD_REQUEST, message),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the agent answered with something else",
        ),
    }
}

/// Asks session `id`'s agent `op` between runs: the session claimed as a
/// run claims it, its kept agent used or one built.
async fn ask(
    state: &State,
    caller: &Caller,
    id: &str,
    op: Op,
    publish: bool,
) -> Result<EventKind, Response> {
    if let Some(refused) = unknown(state, caller, id) {
        return Err(refused);
    }
    if state.stopping() {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        ));
    }
    let live = state.live(id);
    let Some(kept) = live.claim() else {
        return Err(in_progress());
    };
    let pooled = match kept {
        Some(agent) => agent,
        None => match state.build(&live).await {
            Ok(agent) => agent,
            Err(refusal) => {
                live.unclaim();
                return Err(refusal);
            }
        },
    };
    live.ask(pooled, op, publish)
        .await
        .map_err(|StartError::Resume { message, code }| error(resume_status(code), message))
}
