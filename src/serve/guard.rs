//! The guard every request to `buddy serve` passes before any route:
//! a Host that names this server or one of its configured public names
//! (a rebound DNS name is refused), an Origin of this server or of a public
//! name when a browser sends one, the token when one is set, and a body
//! read in full within its size and time bounds. It finds who is calling
//! (`team::Caller`: a user by their token, the admin by `--token`, anyone
//! on a server with no token) and from where (`forwarded::Client`: the TCP
//! peer, or what a trusted balancer says) and hands both to the routes. Also the page's
//! security headers: its Content-Security-Policy (its own inline script and
//! style by hash, nothing else) and the headers beside it.
//!
//! Not here: the routes and what they answer (`http.rs`), the limits on
//! connections (`accept.rs`, `admission.rs`).

use super::forwarded::{Client, Peer, TrustedProxies};
use super::team::Caller;
use crate::http_guard;
use axum::extract::{Request, State as Ext};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::net::SocketAddr;

/// What the guard checks against: the server's address, its token, its
/// users, the largest body.
#[derive(Clone)]
pub(super) struct Guard {
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub team: std::sync::Arc<super::team::Team>,
    pub max_body: usize,
    /// Names a load balancer reaches this server by (lowercase, each maybe
    /// with a port): answered as its own, in Host and in Origin.
    pub public_hosts: std::sync::Arc<[String]>,
    /// Peers whose `X-Forwarded-For` names the client.
    pub proxies: std::sync::Arc<TrustedProxies>,
}

/// An API error: the status and `{"error": message}`, the shape of every
/// refusal here and of every route's failure.
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// Every request: a Host that names this server, an Origin (when a browser
/// sends one) of this server, the token when one is set, then its body read
/// in full within `max_body` bytes and `http_guard::BODY_TIMEOUT` (the
/// checks are shared with `buddy mcp-server --listen`: `crate::http_guard`).
pub(super) async fn guard(Ext(guard): Ext<Guard>, mut req: Request, next: Next) -> Response {
    if let Err(refusal) = http_guard::same_site(guard.addr, &guard.public_hosts, &req) {
        return error(refusal.status, refusal.message);
    }
    let caller = match caller(&guard, req.headers(), req.uri().query()) {
        Some(c) => c,
        None => return error(StatusCode::UNAUTHORIZED, "a valid token is required"),
    };
    // Set by the accept loop on every request; a router served some other
    // way (none is) would log the unspecified address.
    let peer = req
        .extensions()
        .get::<Peer>()
        .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |p| p.0.ip());
    let client: Client = guard.proxies.client(peer, req.headers());
    req.extensions_mut().insert(caller);
    req.extensions_mut().insert(client);
    match http_guard::bounded(req, guard.max_body).await {
        Ok(req) => next.run(req).await,
        Err(refusal) => error(refusal.status, refusal.message),
    }
}

/// Who sent the request: the admin (the server's token), a user (theirs),
/// or anyone when the server has neither; `None` when a token is needed and
/// the one given (if any) is nobody's. Every user's hash is compared even
/// after the admin's token matched, so the time taken says nothing.
fn caller(guard: &Guard, headers: &HeaderMap, query: Option<&str>) -> Option<Caller> {
    let users = guard.team.users();
    if guard.token.is_none() && users.is_empty() {
        return Some(Caller::Anyone);
    }
    let given = http_guard::bearer(headers).or_else(|| query_token(query))?;
    let admin = guard
        .token
        .as_ref()
        .is_some_and(|t| http_guard::same_secret(given.as_bytes(), t.as_bytes()));
    let user = users.who(&given);
    match (admin, user) {
        (true, _) => Some(Caller::Admin),
        (false, Some(name)) => Some(Caller::User(name.to_string())),
        (false, None) => None,
    }
}

/// `token=…` from a query string (for the page's first load), decoded as a
/// form sends it: `+` is a space, then `%XX` escapes (so `%2B` stays a plus).
fn query_token(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.into_owned())
}

/// The policy the page is served with: its own inline style and script
/// (by hash) and requests to this server; no other script, style, frame,
/// form target or image source, so even markup that slipped into the page
/// could neither run nor load anything.
pub(super) fn content_security_policy(script: &str, style: &str) -> String {
    use base64::Engine;
    let hash = |text: &str| {
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        format!(
            "'sha256-{}'",
            base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
        )
    };
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hash(script),
        hash(style)
    )
}

/// The headers the page goes out with beside its policy.
pub(super) const PAGE_HEADERS: [(header::HeaderName, &str); 3] = [
    // The token may be in the page's URL: never sent on to a link.
    (header::REFERRER_POLICY, "no-referrer"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    // Never framed (the CSP's frame-ancestors says the same to browsers
    // that read it): no site can overlay the Approve button.
    (header::X_FRAME_OPTIONS, "DENY"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_from_the_query_decoded() {
        assert_eq!(query_token(Some("a=1&token=x%2By")), Some("x+y".into()));
        assert_eq!(query_token(Some("token=a+b")), Some("a b".into()));
        assert_eq!(
            query_token(Some("token=%C3%BC%20%zz%2")),
            Some("ü %zz%2".into())
        );
        assert_eq!(query_token(None), None);
    }

    #[test]
    fn the_policy_allows_the_pages_own_script_and_style_by_hash_only() {
        // SHA-256 of the empty text, base64: a figure known outside this code.
        let empty = "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='";
        let csp = content_security_policy("", "p { }");
        assert!(csp.starts_with("default-src 'none'; "), "{csp}");
        assert!(csp.contains(&format!("script-src {empty};")), "{csp}");
        assert!(!csp.contains(&format!("style-src {empty}")), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    }
}
