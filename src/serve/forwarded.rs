//! Who is at the other end of a request to `buddy serve`: the TCP peer, or,
//! when that peer is a load balancer the server was told to trust
//! (`[serve] trusted_proxies`, `--trusted-proxy`), the address its
//! `X-Forwarded-For` header reports. The header is read right to left and
//! the first hop that is not itself a trusted proxy is the client: every
//! hop to the left of it was written by someone we have no reason to
//! believe. From any other peer the header is ignored, so a client cannot
//! name itself someone else by sending one.
//!
//! Not here: what the address is used for (the audit log, `audit.rs`), the
//! Host and Origin checks (`guard.rs`).

use axum::http::HeaderMap;
use std::net::IpAddr;

/// Hops of `X-Forwarded-For` read at most: a chain of balancers is a few
/// deep; a header of thousands of entries is not walked for ever.
const MAX_HOPS: usize = 32;

/// An address range: an address and how many leading bits of it count
/// (`10.0.0.0/8`; a plain address is all of its bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Net {
    type Err = String;

    fn from_str(text: &str) -> Result<Net, String> {
        let text = text.trim();
        let bad =
            || format!("`{text}` is not an IP address or a CIDR range (10.0.0.0/8, fd00::/8)");
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let addr = addr.to_canonical();
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= bits)
                .ok_or_else(bad)?,
            None => bits,
        };
        Ok(Net { addr, prefix })
    }
}

impl Net {
    fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => same_prefix(
                u128::from(u32::from(net)) << 96,
                u128::from(u32::from(ip)) << 96,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                same_prefix(u128::from(net), u128::from(ip), self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether `a` and `b` agree in their first `bits` bits (of 128).
fn same_prefix(a: u128, b: u128, bits: u8) -> bool {
    match bits {
        0 => true,
        n => {
            let shift = 128 - u32::from(n.min(128));
            (a >> shift) == (b >> shift)
        }
    }
}

/// The load balancers whose `X-Forwarded-For` is believed. Empty (the
/// default): the header is never read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<Net>);

impl TrustedProxies {
    /// Parses each entry (an address or a CIDR range); the first bad one is
    /// the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<TrustedProxies, String> {
        entries
            .iter()
            .map(|e| e.as_ref().parse())
            .collect::<Result<Vec<Net>, String>>()
            .map(TrustedProxies)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(ip))
    }

    /// The client of a request that came from `peer` with `headers`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> Client {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return Client {
                addr: peer,
                proxy: None,
            };
        }
        // Every X-Forwarded-For line, in order, is one list (RFC 9110's
        // rule for repeated fields); read from its right-hand end.
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect();
        // The last address a trusted hop vouched for.
        let mut addr = peer;
        for hop in hops.iter().rev().take(MAX_HOPS) {
            match hop_addr(hop) {
                Some(ip) => {
                    addr = ip;
                    if !self.trusts(ip) {
                        break;
                    }
                }
                // Not an address: nothing to its left can be believed, and
                // the hop that wrote it is the last one known.
                None => break,
            }
        }
        Client {
            addr,
            proxy: (addr != peer).then_some(peer),
        }
    }
}

/// One hop of `X-Forwarded-For`: an address, maybe with a port
/// (`1.2.3.4:5678`, `[2001:db8::1]:80`), as some balancers write it.
fn hop_addr(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    hop.parse::<std::net::SocketAddr>()
        .ok()
        .map(|s| s.ip().to_canonical())
}

/// A request's client, as the guard found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// The client's address: the TCP peer, or the one a trusted proxy named.
    pub addr: IpAddr,
    /// The trusted proxy the request came through, when the address is not
    /// the TCP peer's.
    pub proxy: Option<IpAddr>,
}

/// The TCP peer of a connection, put on each of its requests by the accept
/// loop for the guard to read.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_hold_their_addresses_only() {
        let net: Net = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains(ip("10.1.2.3")));
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(
            net.contains(ip("::ffff:10.9.9.9")),
            "a mapped address is its IPv4 one"
        );
        let one: Net = "127.0.0.1".parse().unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let v6: Net = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert!(!v6.contains(ip("10.0.0.1")));
        let all: Net = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("8.8.8.8")));
        for bad in ["10.0.0.0/33", "example.com", "10.0.0.0/", "::/129", ""] {
            assert!(bad.parse::<Net>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_header_of_an_untrusted_peer_is_ignored() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let client = proxies.client(ip("192.0.2.7"), &headers(&["203.0.113.9"]));
        assert_eq!(client.addr, ip("192.0.2.7"));
        assert_eq!(client.proxy, None);
        // No proxies configured: never read.
        let none = TrustedProxies::default();
        assert_eq!(
            none.client(ip("10.0.0.1"), &headers(&["203.0.113.9"])).addr,
            ip("10.0.0.1")
        );
    }

    #[test]
    fn a_trusted_peer_names_the_right_most_untrusted_hop() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8", "127.0.0.1"]).unwrap();
        // A forged left-most hop is passed over: the client's own balancer
        // appended the real address after it.
        let client = proxies.client(
            ip("127.0.0.1"),
            &headers(&["6.6.6.6, 203.0.113.9", "10.1.1.1"]),
        );
        assert_eq!(client.addr, ip("203.0.113.9"));
        assert_eq!(client.proxy, Some(ip("127.0.0.1")));
        // Ports and brackets as some balancers write them.
        let c = proxies.client(ip("10.0.0.2"), &headers(&["[2001:db8::1]:443"]));
        assert_eq!(c.addr, ip("2001:db8::1"));
        let c = proxies.client(ip("10.0.0.2"), &headers(&["198.51.100.4:5000"]));
        assert_eq!(c.addr, ip("198.51.100.4"));
        // Junk stops the walk at the last hop a trusted proxy vouched for.
        let c = proxies.client(ip("10.0.0.2"), &headers(&["203.0.113.9, junk, 10.0.0.3"]));
        assert_eq!(c.addr, ip("10.0.0.3"));
        // No header: the peer itself.
        let c = proxies.client(ip("10.0.0.2"), &HeaderMap::new());
        assert_eq!(
            c,
            Client {
                addr: ip("10.0.0.2"),
                proxy: None
            }
        );
    }

    #[test]
    fn a_long_header_is_read_only_so_far() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let mut chain = vec!["203.0.113.9".to_string()];
        chain.extend((0..100).map(|i| format!("10.0.0.{}", i % 250)));
        let c = proxies.client(ip("10.0.0.1"), &headers(&[&chain.join(",")]));
        assert!(proxies.trusts(c.addr), "stopped inside the chain: {c:?}");
    }
}
