//! End-to-end tests of `buddy serve` behind a load balancer: the public
//! host names it is told to answer to (Host and Origin) while every other
//! name stays refused, the client's address taken from `X-Forwarded-For`
//! only when the peer is a trusted proxy, `/healthz` for probes, and all of
//! it through a real HAProxy in front of one server.

use crate::support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use support::fake_provider::FakeProvider;
use support::haproxy;
use support::http::Client;
use support::serve::Server;
use support::BuddyCmd;

const TOKEN: &str = "edge-test-token";

/// A served directory whose changes are written to `audit.log` there.
fn audited() -> BuddyCmd {
    let p = FakeProvider::start(vec![]);
    let config = support::fake_config(&p);
    // The provider is never asked: these tests create sessions only.
    drop(p);
    BuddyCmd::new().config(format!("{config}\n[serve]\naudit_log = \"audit.log\"\n"))
}

fn with_token(server: &Server) -> Client {
    let mut c = server.client();
    c.token = Some(TOKEN.to_string());
    c
}

fn audit_lines(cmd: &BuddyCmd) -> Vec<Value> {
    let text = std::fs::read_to_string(cmd.work_dir().join("audit.log")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn configured_public_names_are_answered_and_every_other_name_refused_as_before() {
    let cmd = audited();
    let server = Server::start(
        &cmd,
        &[
            "--token",
            TOKEN,
            "--public-host",
            "buddy.example.com",
            "--public-host",
            "team.example.com:8443",
        ],
    );
    let c = with_token(&server);
    for host in [
        "buddy.example.com",
        "Buddy.Example.com:443",
        "team.example.com:8443",
    ] {
        let r = c.request("GET", "/api/sessions", &[("Host", host)], None);
        assert_eq!(r.status, 200, "{host}: {}", r.body);
    }
    // Another name, or a public name on a port it was not given with: the
    // refusal a rebound DNS name always got.
    for host in [
        "evil.example",
        "team.example.com:443",
        "buddy.example.com.evil.example",
    ] {
        let r = c.request("GET", "/api/sessions", &[("Host", host)], None);
        assert_eq!(r.status, 403, "{host}: {}", r.body);
        assert_eq!(
            r.json()["error"],
            format!("this server does not answer to host {host:?}"),
            "{host}"
        );
    }
    // A public name still needs the token.
    let anon = server.client();
    let r = anon.request(
        "GET",
        "/api/sessions",
        &[("Host", "buddy.example.com")],
        None,
    );
    assert_eq!(r.status, 401, "{}", r.body);

    // A page served under a public name (TLS at the balancer or not) may
    // post; any other origin may not, whatever Host says.
    for origin in [
        "https://buddy.example.com",
        "http://buddy.example.com",
        "https://team.example.com:8443",
    ] {
        let r = c.request(
            "POST",
            "/api/sessions",
            &[("Host", "buddy.example.com"), ("Origin", origin)],
            Some("{}"),
        );
        assert_eq!(r.status, 201, "{origin}: {}", r.body);
    }
    for origin in [
        "https://evil.example",
        "https://team.example.com",
        "https://buddy.example.com.evil.example",
        "null",
    ] {
        let r = c.request(
            "POST",
            "/api/sessions",
            &[("Host", "buddy.example.com"), ("Origin", origin)],
            Some("{}"),
        );
        assert_eq!(r.status, 403, "{origin}: {}", r.body);
        assert_eq!(r.json()["error"], "cross-origin requests are refused");
    }
}

#[test]
fn a_public_name_needs_a_token_and_a_well_formed_name() {
    let cmd = audited();
    let out = cmd.rerun([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--public-host",
        "buddy.example.com",
    ]);
    out.assert_code(2);
    assert!(out.stderr.contains("token"), "{}", out.stderr);
    let out = cmd.rerun([
        "serve",
        "--token",
        TOKEN,
        "--public-host",
        "https://buddy.example.com",
    ]);
    out.assert_code(2);
    assert!(out.stderr.contains("public_hosts"), "{}", out.stderr);
    let out = cmd.rerun(["serve", "--token", TOKEN, "--trusted-proxy", "10.0.0.0/40"]);
    out.assert_code(2);
    assert!(out.stderr.contains("trusted_proxies"), "{}", out.stderr);
}

#[test]
fn the_health_endpoint_answers_ok_without_a_token_and_nothing_else_does() {
    let cmd = audited();
    let server = Server::start(&cmd, &["--token", TOKEN]);
    let anon = server.client();
    let r = anon.get("/healthz");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, "ok");
    // A probe sends the pod's address, not a name the server knows.
    let r = anon.request("GET", "/healthz", &[("Host", "10.1.2.3:8421")], None);
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    assert_eq!(anon.get("/api/sessions").status, 401);
    assert_eq!(anon.get("/metrics").status, 401);
}

#[test]
fn a_forged_forwarded_for_from_an_untrusted_peer_is_logged_with_the_real_peer() {
    let cmd = audited();
    // Trusts a range the test's own connections do not come from.
    let server = Server::start(&cmd, &["--token", TOKEN, "--trusted-proxy", "10.0.0.0/8"]);
    let c = with_token(&server);
    let r = c.request(
        "POST",
        "/api/sessions",
        &[("X-Forwarded-For", "203.0.113.9")],
        Some("{}"),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let lines = audit_lines(&cmd);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["action"], "create");
    assert_eq!(lines[0]["client"], "127.0.0.1", "{}", lines[0]);
    assert!(lines[0].get("proxy").is_none(), "{}", lines[0]);
}

#[test]
fn a_trusted_peer_names_the_client_by_the_right_most_untrusted_hop() {
    let cmd = audited();
    let server = Server::start(&cmd, &["--token", TOKEN, "--trusted-proxy", "127.0.0.1"]);
    let c = with_token(&server);
    // The client wrote the first hop itself; its balancer appended the
    // address it saw.
    let r = c.request(
        "POST",
        "/api/sessions",
        &[("X-Forwarded-For", "6.6.6.6, 203.0.113.9")],
        Some("{}"),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let lines = audit_lines(&cmd);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["client"], "203.0.113.9", "{}", lines[0]);
    assert_eq!(lines[0]["proxy"], "127.0.0.1", "{}", lines[0]);
}

/// One request from `source` (a loopback address of its own, so the
/// balancer's peer and the client differ) to `to`; the status and body.
fn request_from(source: IpAddr, to: SocketAddr, head: &str) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tcp = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(source, 0)).unwrap();
        socket.connect(to).await.unwrap()
    });
    let mut tcp = tcp.into_std().unwrap();
    tcp.set_nonblocking(false).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    tcp.write_all(head.as_bytes()).unwrap();
    let mut got = String::new();
    tcp.read_to_string(&mut got).unwrap();
    let status = got
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {got:?}"));
    let body = got
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

#[test]
fn through_haproxy_the_public_name_is_served_and_the_audit_names_the_client() {
    if !haproxy::available(
        "through_haproxy_the_public_name_is_served_and_the_audit_names_the_client",
    ) {
        return;
    }
    let cmd = audited();
    let server = Server::start(
        &cmd,
        &[
            "--token",
            TOKEN,
            "--public-host",
            "buddy.example.com",
            "--trusted-proxy",
            "127.0.0.1",
        ],
    );
    let port = haproxy::free_port();
    let config = format!(
        "{}frontend web\n    bind 127.0.0.1:{port}\n    option forwardfor\n    default_backend buddy\n\n\
         backend buddy\n    server one {}\n",
        haproxy::DEFAULTS,
        server.addr
    );
    let proxy = haproxy::start(&config);
    // The client comes from 127.0.0.2; HAProxy reaches buddy from 127.0.0.1.
    let client: IpAddr = "127.0.0.2".parse().unwrap();
    let create = |host: &str| {
        request_from(
            client,
            proxy.addr(),
            &format!(
                "POST /api/sessions HTTP/1.1\r\nHost: {host}\r\nOrigin: https://buddy.example.com\r\n\
                 Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
                 Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
            ),
        )
    };
    let (status, body) = create("buddy.example.com");
    assert_eq!(status, 201, "{body}");
    // Through the balancer, another name is refused as it is directly.
    let (status, body) = create("evil.example");
    assert_eq!(status, 403, "{body}");
    let (status, body) = request_from(
        client,
        proxy.addr(),
        "GET /healthz HTTP/1.1\r\nHost: buddy.example.com\r\nConnection: close\r\n\r\n",
    );
    assert_eq!((status, body.as_str()), (200, "ok"));

    let lines = audit_lines(&cmd);
    assert_eq!(
        lines.len(),
        1,
        "only the session created is a change: {lines:?}"
    );
    assert_eq!(lines[0]["action"], "create");
    assert_eq!(lines[0]["status"], 201);
    assert_eq!(lines[0]["client"], "127.0.0.2", "{}", lines[0]);
    assert_eq!(lines[0]["proxy"], "127.0.0.1", "{}", lines[0]);
}
