//! The checks every request to one of buddy's HTTP servers (`buddy serve`,
//! `buddy mcp-server --listen`) passes before any route: one Host, naming
//! this server (a rebound DNS name is refused); an Origin of this server
//! when a browser sends one; a bearer token compared in constant time; a
//! body read in full within its size and time bounds. Each answers with a
//! [`Refusal`], which each server writes in its own shape (serve's
//! `{"error": …}`, MCP's JSON-RPC error).
//!
//! Not here: who a token belongs to (serve's users and team), routes, the
//! limits on connections (`serve/accept.rs`).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use std::net::SocketAddr;
use std::time::Duration;

/// Why a request was refused before any route: its status and one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// A request body may take this long to arrive in full: a client that
/// stalls half-way through one cannot hold its connection for ever.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The request names this server: one Host (RFC 9112), an absolute-form
/// target that agrees with it, a Host of this server's own names
/// ([`host_ok`]) or of the public names a balancer reaches it by
/// ([`public_host`]), and an Origin, when there is one, of this same host
/// or of a public name (`https://` or `http://`).
pub fn same_site(addr: SocketAddr, public: &[String], req: &Request) -> Result<(), Refusal> {
    let headers = req.headers();
    // One Host, and an absolute-form target that agrees with it; anything
    // else is a malformed request, whichever of them a check reads.
    if headers.get_all(header::HOST).iter().count() > 1 {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "more than one Host header",
        ));
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if let Some(authority) = req.uri().authority() {
        if !authority.as_str().eq_ignore_ascii_case(host) {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "the request target names another host than the Host header",
            ));
        }
    }
    if !host_ok(addr, host) && !public_host(public, host) {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            format!(
                "this server does not answer to host {:?}",
                crate::text::one_line(host, 100)
            ),
        ));
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
            .is_some_and(|o| public_host(public, o));
        if !same && !public {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "cross-origin requests are refused",
            ));
        }
    }
    Ok(())
}

/// The request with its body read in full, or the refusal: 413 past `max`
/// bytes, 408 when it does not arrive within [`BODY_TIMEOUT`]. A body
/// declared too big is still read up to `max` before the answer: closing on
/// a client that is still sending resets the connection, and it would see
/// that instead of the 413.
pub async fn bounded(req: Request, max: usize) -> Result<Request, Refusal> {
    use axum::body::HttpBody;
    if req.body().size_hint().exact() == Some(0) {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Err(_)) => Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {max} bytes"),
        )),
        Err(_) => Err(Refusal::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                BODY_TIMEOUT.as_secs()
            ),
        )),
    }
}

/// The token of an `Authorization: Bearer …` header.
pub fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::to_string)
}

/// Compares two secrets in time that depends only on their lengths
/// (`subtle`'s slice compare: a length mismatch is not a secret).
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

/// Hosts this server answers to: its own address, and the loopback names
/// of its port. Anything else (a rebound DNS name) is refused.
pub fn host_ok(addr: SocketAddr, host: &str) -> bool {
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
pub fn public_host(names: &[String], host: &str) -> bool {
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

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut b = Request::builder().uri("/mcp");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Body::empty()).unwrap()
    }

    #[test]
    fn a_rebound_host_or_a_foreign_origin_is_forbidden() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(
            same_site(addr, &[], &request(&[("host", "localhost:8080")])),
            Ok(())
        );
        assert_eq!(
            same_site(
                addr,
                &[],
                &request(&[
                    ("host", "localhost:8080"),
                    ("origin", "http://localhost:8080")
                ])
            ),
            Ok(())
        );
        let status = |headers: &[(&str, &str)]| {
            same_site(addr, &[], &request(headers)).map_err(|r| r.status)
        };
        assert_eq!(
            status(&[("host", "evil.example:8080")]),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status(&[
                ("host", "localhost:8080"),
                ("origin", "http://evil.example")
            ]),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status(&[("host", "localhost:8080"), ("host", "localhost:8080")]),
            Err(StatusCode::BAD_REQUEST)
        );
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
}
