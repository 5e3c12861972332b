//! What an https exchange costs before its first byte, for docs/PERFORMANCE.md:
//! reading the system trust store, and building a client with it plus one
//! request over a fresh TLS connection to a local HTTPS server (certificate
//! made here), next to the same request over plain HTTP. Plain-HTTP runs of
//! buddy pay none of the TLS part: the store is read when an https URL is
//! first used (src/net.rs).
//!
//! ```text
//! cargo bench --bench tls [-- --rounds N]
//! ```

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls;

const REPLY: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";

/// Answers every request on every connection with `REPLY`, over TLS when
/// `tls` is given.
async fn serve(listener: TcpListener, tls: Option<tokio_rustls::TlsAcceptor>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                Some(acceptor) => {
                    if let Ok(mut s) = acceptor.accept(tcp).await {
                        answer(&mut s).await;
                    }
                }
                None => {
                    let mut tcp = tcp;
                    answer(&mut tcp).await;
                }
            }
        });
    }
}

async fn answer<S: AsyncReadExt + AsyncWriteExt + Unpin>(s: &mut S) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut seen = Vec::new();
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let _ = s.write_all(REPLY).await;
    let _ = s.shutdown().await;
}

/// A CA and a server certificate for 127.0.0.1; the CA as PEM.
fn pki() -> (String, rustls::ServerConfig) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "bench CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca.self_signed(&ca_key).expect("CA cert");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".into()]).expect("server params");
    let cert = params
        .signed_by(&key, &Issuer::from_params(&ca, &ca_key))
        .expect("server cert");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
    )
    .expect("server config");
    (ca_cert.pem(), config)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut rounds = 30usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(rounds);
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let (ca_pem, server_config) = pki();
        let tls_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let plain_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let tls_url = format!(
            "https://{}/v1/models",
            tls_listener.local_addr().expect("addr")
        );
        let plain_url = format!(
            "http://{}/v1/models",
            plain_listener.local_addr().expect("addr")
        );
        tokio::spawn(serve(
            tls_listener,
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(server_config))),
        ));
        tokio::spawn(serve(plain_listener, None));
        let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA");

        let mut load = Vec::new();
        let mut count = 0;
        for _ in 0..rounds {
            let t = Instant::now();
            count = buddy::net::load_system_roots().len();
            load.push(t.elapsed());
        }
        // How the store was read before: the bundle and the hashed
        // directory beside it, every file of both.
        let mut both = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let _ = rustls_native_certs::load_native_certs().certs.len();
            both.push(t.elapsed());
        }
        // Each round: a client as buddy builds one (system roots + the
        // profile's CA), one request on a new TLS connection.
        let mut https = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let client = buddy::net::fresh_client_builder(std::slice::from_ref(&ca))
                .build()
                .expect("client");
            let r = client.get(&tls_url).send().await.expect("https request");
            let _ = r.bytes().await;
            https.push(t.elapsed());
        }
        let mut plain = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let client = buddy::net::plain_client().expect("client");
            let r = client.get(&plain_url).send().await.expect("http request");
            let _ = r.bytes().await;
            plain.push(t.elapsed());
        }
        println!(
            "machine: {} cores",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!(
            "system trust store load ({count} roots): median {}",
            ms(median(load))
        );
        println!(
            "the same, read as before (bundle file and hashed directory): median {}",
            ms(median(both))
        );
        println!(
            "https: client with the store + TLS handshake + one request: median {}",
            ms(median(https))
        );
        println!(
            "plain http: client + one request: median {}",
            ms(median(plain))
        );
    });
}
