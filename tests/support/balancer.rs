//! HAProxy in front of several `buddy serve` instances, round robin, on a
//! free loopback port, stopped on drop: the configuration for
//! `support::haproxy`, which runs it.

use super::haproxy::{self, Haproxy};
use std::net::SocketAddr;

pub struct Balancer {
    _proxy: Haproxy,
    pub addr: SocketAddr,
}

impl Balancer {
    /// `None` when HAProxy is not installed (outside CI).
    pub fn start(test: &str, servers: &[SocketAddr]) -> Option<Balancer> {
        if !haproxy::available(test) {
            return None;
        }
        let port = haproxy::free_port();
        // buddy serve checks the Host header: each server is named by its
        // own address and gets that name as Host. Streams stay open long.
        let mut cfg = format!(
            "global\n  maxconn 256\n\
             defaults\n  mode http\n  timeout connect 5s\n  timeout client 10m\n  timeout server 10m\n  timeout tunnel 10m\n\
             frontend front\n  bind 127.0.0.1:{port}\n  default_backend buddies\n\
             backend buddies\n  balance roundrobin\n  http-send-name-header Host\n  option redispatch\n  retries 3\n"
        );
        for s in servers {
            cfg.push_str(&format!(
                "  server {s} {s} check inter 500ms fall 1 rise 1\n"
            ));
        }
        let proxy = haproxy::start(&cfg);
        Some(Balancer {
            addr: proxy.addr(),
            _proxy: proxy,
        })
    }
}
