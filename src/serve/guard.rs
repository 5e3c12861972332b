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
use axum::body::Body;
use axum::extract::{Request, State as Ext};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;

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
/// in full within `max_body` bytes and `BODY_TIMEOUT`.
pub(super) async fn guard(Ext(guard): Ext<Guard>, mut req: Request, next: Next) -> Response {
    let headers = req.headers();
    // RFC 9112: one Host, and an absolute-form target that agrees with it;
    // anything else is a malformed request, whichever of them a check reads.
    if headers.get_all(header::HOST).iter().count() > 1 {
        return error(StatusCode::BAD_REQUEST, "more than one Host header");
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if let Some(authority) = req.uri().authority() {
        if !authority.as_str().eq_ignore_ascii_case(host) {
            return error(
                StatusCode::BAD_REQUEST,
                "the request target names another host than the Host header",
            );
        }
    }
    if !host_ok(guard.addr, host) && !public_host(&guard.public_hosts, host) {
        return error(
            StatusCode::FORBIDDEN,
            format!("this server does not answer to host {host:?}"),
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let same = origin
            .strip_prefix("http://")
            .is_some_and(|o| o.eq_ignore_ascii_case(host));
        // A page the balancer served under a public name, over TLS or not.
        let public = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
            .is_some_and(|o| public_host(&guard.public_hosts, o));
        if !same && !public {
            return error(StatusCode::FORBIDDEN, "cross-origin requests are refused");
        }
    }
    let caller = match caller(&guard, headers, req.uri().query()) {
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
    match bounded(req, guard.max_body).await {
        Ok(req) => next.run(req).await,
        Err(refusal) => refusal,
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
    let given = bearer(headers).or_else(|| query_token(query))?;
    let admin = guard
        .token
        .as_ref()
        .is_some_and(|t| same_secret(given.as_bytes(), t.as_bytes()));
    let user = users.who(&given);
    match (admin, user) {
        (true, _) => Some(Caller::Admin),
        (false, Some(name)) => Some(Caller::User(name.to_string())),
        (false, None) => None,
    }
}

/// A request body may take this long to arrive in full: a client that
/// stalls half-way through one cannot hold its connection for ever.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The request with its body read in full, on every endpoint (those that
/// ignore bodies too), or the refusal: 413 past `max` bytes, 408 when it
/// does not arrive in time. A body declared too big is still read up to
/// `max` before the answer: closing on a client that is still sending
/// resets the connection, and it would see that instead of the 413.
async fn bounded(req: Request, max: usize) -> Result<Request, Response> {
    use axum::body::HttpBody;
    if req.body().size_hint().exact() == Some(0) {
        return Ok(req);
    }
    let too_big = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {max} bytes"),
        )
    };
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Err(_)) => Err(too_big()),
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                BODY_TIMEOUT.as_secs()
            ),
        )),
    }
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::to_string)
}

/// `token=…` from a query string (for the page's first load), decoded as a
/// form sends it: `+` is a space, then `%XX` escapes (so `%2B` stays a plus).
fn query_token(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.into_owned())
}

/// Compares two secrets in time that depends only on their lengths
/// (`subtle`'s slice compare: a length mismatch is not a secret).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

/// Hosts this server answers to: its own address, and the loopback names
/// of its port. Anything else (a rebound DNS name) is refused.
fn host_ok(addr: SocketAddr, host: &str) -> bool {
    let port = addr.port();
    let ip = addr.ip();
    if ip.is_unspecified() {
        // Bound to every interface (a token is required then): any name
        // of this host will do, on this port.
        return host
            .rsplit_once(':')
            .is_some_and(|(_, p)| p == port.to_string());
    }
    let mut names = vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    names.push(match ip {
        std::net::IpAddr::V4(v4) => format!("{v4}:{port}"),
        std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    });
    names.iter().any(|n| n.eq_ignore_ascii_case(host))
}

/// Whether `host` (a Host header, or an Origin's host and port) is one of
/// the configured public names: the same name, any case, and the same port
/// when the name gives one, any port (or none) when it does not.
fn public_host(names: &[String], host: &str) -> bool {
    let (name, port) = split_port(host);
    names.iter().any(|n| {
        let (n_name, n_port) = split_port(n);
        n_name.eq_ignore_ascii_case(name) && (n_port.is_none() || n_port == port)
    })
}

/// `name:port` as the name and the port; `[v6]:port` keeps its brackets.
fn split_port(host: &str) -> (&str, Option<&str>) {
    let end = host.rfind(']').map_or(0, |i| i + 1);
    match host[end..].rfind(':') {
        Some(i) => {
            let at = end + i;
            let port = &host[at + 1..];
            if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
                (&host[..at], Some(port))
            } else {
                (host, None)
            }
        }
        None => (host, None),
    }
}

/// A public name as the config gives it, checked: a DNS name or an IP
/// address (IPv6 in brackets), maybe with a port; no scheme, path or
/// wildcard. Lowercased.
pub fn public_name(text: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "`{text}` is not a host name (buddy.example.com, or with a port: buddy.example.com:8443)"
        )
    };
    let (name, port) = split_port(text.trim());
    if let Some(p) = port {
        p.parse::<u16>().map_err(|_| bad())?;
    }
    let ok = if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
    };
    if ok {
        Ok(text.trim().to_ascii_lowercase())
    } else {
        Err(bad())
    }
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
    fn secrets_compare_by_content() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }

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
    fn only_this_servers_own_names_are_answered() {
        let loopback: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
        ] {
            assert!(host_ok(loopback, host), "{host}");
        }
        // A name rebound to 127.0.0.1 by its DNS, another port, no port.
        for host in ["evil.example:8080", "127.0.0.1:8081", "localhost", ""] {
            assert!(!host_ok(loopback, host), "{host}");
        }
        // Bound to every interface: any name, on this port only.
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        assert!(host_ok(any, "buddy.lan:9000"));
        assert!(!host_ok(any, "buddy.lan:9001"));
    }

    #[test]
    fn public_names_match_by_name_and_their_port_if_given() {
        let names: Vec<String> = [
            "buddy.example.com",
            "team.example.com:8443",
            "[2001:db8::1]",
        ]
        .iter()
        .map(|n| public_name(n).unwrap())
        .collect();
        for host in [
            "buddy.example.com",
            "BUDDY.example.com",
            "buddy.example.com:443",
            "team.example.com:8443",
            "[2001:db8::1]",
            "[2001:db8::1]:8421",
        ] {
            assert!(public_host(&names, host), "{host}");
        }
        for host in [
            "evil.example",
            "buddy.example.com.evil.example",
            "team.example.com",
            "team.example.com:443",
            "xbuddy.example.com",
            "",
        ] {
            assert!(!public_host(&names, host), "{host}");
        }
        assert_eq!(
            public_name(" Buddy.Example.COM ").unwrap(),
            "buddy.example.com"
        );
        for bad in [
            "https://buddy.example.com",
            "*.example.com",
            "a/b",
            "",
            "x:99999",
            "[::zz]",
        ] {
            assert!(public_name(bad).is_err(), "{bad}");
        }
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
