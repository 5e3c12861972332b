//! TLS and proxies as users have them, end to end through the real binary: a CA
//! made in the test signs the certificate of an HTTPS front on 127.0.0.1 that
//! relays to the fake provider, and a CONNECT/forwarding proxy written here
//! records every connection it carried.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use support::fake_provider::{FakeProvider, Reply};
use support::{BuddyCmd, TempDir};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::rustls;

// ---------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------

/// A throwaway CA and a server certificate it signed for 127.0.0.1 and localhost.
struct Pki {
    ca_pem: String,
    server_chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    server_key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "buddy test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");

        let server_key = KeyPair::generate().expect("server key");
        let mut params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, "buddy test server");
        let issuer = Issuer::from_params(&ca_params, &ca_key);
        let server_cert = params
            .signed_by(&server_key, &issuer)
            .expect("server certificate");
        Pki {
            ca_pem: ca_cert.pem(),
            server_chain: vec![server_cert.der().clone()],
            server_key: rustls::pki_types::PrivatePkcs8KeyDer::from(server_key.serialize_der())
                .into(),
        }
    }

    /// Writes the CA certificate as PEM to `path`.
    fn write_ca(&self, path: &Path) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create CA dir");
        }
        std::fs::write(path, &self.ca_pem).expect("write CA file");
    }
}

// ---------------------------------------------------------------------------
// Servers: a tokio runtime on a thread of its own, stopped on drop
// ---------------------------------------------------------------------------

struct Runtime {
    handle: tokio::runtime::Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Runtime {
    fn start() -> Runtime {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let handle = rt.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        // Spawned tasks run while this thread blocks on the stop signal;
        // dropping the runtime afterwards cancels them.
        let thread = std::thread::spawn(move || {
            let _ = rt.block_on(stopped);
        });
        Runtime {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// A listener on 127.0.0.1 (bound now, so it accepts once this returns)
    /// whose connections are handed to `serve`.
    fn listen<F, Fut>(&self, serve: F) -> SocketAddr
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("local addr");
        self.handle.spawn(async move {
            let listener = TcpListener::from_std(std_listener).expect("tokio listener");
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream));
            }
        });
        addr
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Terminates TLS with the test CA's server certificate and relays the plain
/// bytes to `backend` (the fake provider). Counts the TCP connections accepted,
/// before any handshake, so a refused handshake still counts.
struct TlsFront {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    _rt: Runtime,
}

impl TlsFront {
    fn start(pki: &Pki, backend: SocketAddr) -> TlsFront {
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(pki.server_chain.clone(), pki.server_key.clone_key())
            .expect("server TLS config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let rt = Runtime::start();
        let addr = rt.listen(move |tcp| {
            count.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            }
        });
        TlsFront {
            addr,
            accepted,
            _rt: rt,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// An HTTP proxy: `CONNECT host:port` opens a tunnel; a request in absolute
/// form (`POST http://host:port/path`) is forwarded in origin form. Each
/// connection's first line is recorded before anything is answered.
struct Proxy {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    _rt: Runtime,
}

impl Proxy {
    fn start() -> Proxy {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let rt = Runtime::start();
        let addr = rt.listen(move |tcp| proxy_connection(tcp, Arc::clone(&log)));
        Proxy {
            addr,
            seen,
            _rt: rt,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The first line of every connection so far (`CONNECT 127.0.0.1:443 HTTP/1.1`).
    fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("proxy log").clone()
    }
}

async fn proxy_connection(tcp: TcpStream, log: Arc<Mutex<Vec<String>>>) {
    let mut client = BufReader::new(tcp);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        match client.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => head.push(line),
        }
    }
    let Some(first) = head.first().map(|l| l.trim_end().to_string()) else {
        return;
    };
    log.lock().expect("proxy log").push(first.clone());
    let mut parts = first.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return;
    };
    if method == "CONNECT" {
        if !loopback_only(target) {
            let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n").await;
            return;
        }
        let Ok(mut upstream) = TcpStream::connect(target).await else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
            return;
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        return;
    }
    // Absolute form: connect to the URL's authority and send the request on
    // with its path only. The rest of the connection is relayed as it comes;
    // the tests make one request per connection.
    let Some(rest) = target.strip_prefix("http://") else {
        return;
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if !loopback_only(authority) {
        let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n").await;
        return;
    }
    let Ok(mut upstream) = TcpStream::connect(authority).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    let mut out = format!("{method} {path} HTTP/1.1\r\n");
    for line in &head[1..] {
        out.push_str(line);
    }
    out.push_str("\r\n");
    if upstream.write_all(out.as_bytes()).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// Whether `authority` (`host:port`) names this machine only: the proxy
/// never opens a connection anywhere else, whatever it is asked, and never
/// looks a name up (`localhost` is the one name it knows).
fn loopback_only(authority: &str) -> bool {
    if let Ok(addr) = authority.parse::<SocketAddr>() {
        return addr.ip().is_loopback();
    }
    authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| host == "localhost" && port.parse::<u16>().is_ok())
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A profile for `base_url` (plus extra profile lines) with no retries beyond
/// the default, so a retry storm would show in the counts.
fn config(base_url: &str, extra: &str) -> String {
    format!(
        "[agent]\nmodel = \"fake\"\n\n\
         [models.fake]\napi_base_url = \"{base_url}\"\nmodel = \"fake-model\"\napi_key = \"sk-fake\"\n{extra}\n"
    )
}

fn https_base(front: &TlsFront) -> String {
    format!("https://{}/v1", front.addr)
}

/// Asserts stderr is exactly one line, starting with `error: `, and returns it.
/// The first run in a fresh home also says it wrote a default config; that
/// notice is not part of the error.
fn one_error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("created a default config at "))
        .collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0].to_string()
}

// ---------------------------------------------------------------------------
// Trust
// ---------------------------------------------------------------------------

#[test]
fn an_untrusted_certificate_fails_at_once_in_one_line() {
    let pki = Pki::new();
    let provider = FakeProvider::start(vec![Reply::text("never sent")]);
    let front = TlsFront::start(&pki, provider.addr());
    let out = BuddyCmd::new()
        .config(config(&https_base(&front), ""))
        .args(["exec", "hello"])
        .run();
    out.assert_code(1);
    let line = one_error_line(&out.stderr);
    assert!(
        line.contains(&front.addr.to_string()) && line.contains("certificate"),
        "{line}"
    );
    assert!(
        line.contains("UnknownIssuer") && line.contains("ca_file"),
        "{line}"
    );
    // The default allows 3 retries; a refused certificate must use none.
    assert_eq!(
        front.accepted(),
        1,
        "connections made: {}",
        front.accepted()
    );
    assert_eq!(provider.request_count(), 0);
}

#[test]
fn the_profile_ca_file_is_trusted() {
    let pki = Pki::new();
    let provider = FakeProvider::start(vec![Reply::text("over TLS")]);
    let front = TlsFront::start(&pki, provider.addr());
    // The config lives apart from the working directory: a relative ca_file
    // is found next to the config, not in the directory buddy starts in.
    let conf = TempDir::new("tls-conf");
    pki.write_ca(&conf.join("certs/ca.pem"));
    let config_path = conf.join("buddy.toml");
    std::fs::write(
        &config_path,
        config(&https_base(&front), "ca_file = \"certs/ca.pem\""),
    )
    .expect("write config");
    let out = BuddyCmd::new()
        .arg("--config")
        .arg(&config_path)
        .args(["exec", "hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "over TLS\n");
    assert_eq!(provider.chat_requests().len(), 1);
}

#[test]
fn ssl_cert_file_is_trusted() {
    let pki = Pki::new();
    let provider = FakeProvider::start(vec![Reply::text("trusted by env")]);
    let front = TlsFront::start(&pki, provider.addr());
    let dir = TempDir::new("tls-env");
    let ca = dir.join("ca.pem");
    pki.write_ca(&ca);
    let out = BuddyCmd::new()
        .config(config(&https_base(&front), ""))
        .env("SSL_CERT_FILE", &ca)
        .args(["exec", "hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "trusted by env\n");
}

#[test]
fn an_unusable_ca_file_is_a_config_error_naming_it() {
    let pki = Pki::new();
    let provider = FakeProvider::start(vec![]);
    let front = TlsFront::start(&pki, provider.addr());
    let dir = TempDir::new("tls-bad-ca");
    let missing = dir.join("missing.pem");
    let junk = dir.join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").expect("write junk");
    for (path, says) in [(&missing, "cannot read"), (&junk, "no PEM certificate")] {
        let out = BuddyCmd::new()
            .config(config(
                &https_base(&front),
                &format!("ca_file = \"{}\"", path.display()),
            ))
            .args(["exec", "hello"])
            .run();
        out.assert_code(2);
        let line = one_error_line(&out.stderr);
        assert!(
            line.contains(&path.display().to_string()) && line.contains(says),
            "{line}"
        );
    }
    assert_eq!(front.accepted(), 0);
}

// ---------------------------------------------------------------------------
// Proxies
// ---------------------------------------------------------------------------

#[test]
fn https_proxy_carries_the_request_in_a_tunnel() {
    let pki = Pki::new();
    let provider = FakeProvider::start(vec![Reply::text("through the proxy")]);
    let front = TlsFront::start(&pki, provider.addr());
    let proxy = Proxy::start();
    let dir = TempDir::new("tls-proxy");
    let ca = dir.join("ca.pem");
    pki.write_ca(&ca);
    let out = BuddyCmd::new()
        .config(config(
            &https_base(&front),
            &format!("ca_file = \"{}\"", ca.display()),
        ))
        .env("HTTPS_PROXY", proxy.url())
        .args(["exec", "hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "through the proxy\n");
    assert_eq!(
        proxy.seen(),
        vec![format!("CONNECT {} HTTP/1.1", front.addr)]
    );
    assert_eq!(front.accepted(), 1);
}

#[test]
fn no_proxy_goes_direct() {
    let pki = Pki::new();
    let provider = FakeProvider::start(vec![Reply::text("direct"), Reply::text("direct again")]);
    let front = TlsFront::start(&pki, provider.addr());
    let proxy = Proxy::start();
    let dir = TempDir::new("tls-noproxy");
    let ca = dir.join("ca.pem");
    pki.write_ca(&ca);
    let ca_line = format!("ca_file = \"{}\"", ca.display());
    // By address, and by name within a list.
    let by_name = format!("https://localhost:{}/v1", front.addr.port());
    for (base, no_proxy, answer) in [
        (https_base(&front), "127.0.0.1", "direct"),
        (by_name, "example.com, localhost", "direct again"),
    ] {
        let out = BuddyCmd::new()
            .config(config(&base, &ca_line))
            .env("HTTPS_PROXY", proxy.url())
            .env("HTTP_PROXY", proxy.url())
            .env("NO_PROXY", no_proxy)
            .args(["exec", "hello"])
            .run();
        out.assert_success();
        assert_eq!(out.stdout, format!("{answer}\n"));
    }
    assert_eq!(proxy.seen(), Vec::<String>::new());
    assert_eq!(front.accepted(), 2);
}

#[test]
fn http_proxy_forwards_plain_http() {
    let provider = FakeProvider::start(vec![Reply::text("forwarded")]);
    let proxy = Proxy::start();
    let out = BuddyCmd::new()
        .config(config(&provider.base_url(), ""))
        .env("HTTP_PROXY", proxy.url())
        .args(["exec", "hello"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout, "forwarded\n");
    assert_eq!(
        proxy.seen(),
        vec![format!(
            "POST http://{}/v1/chat/completions HTTP/1.1",
            provider.addr()
        )]
    );
    let reqs = provider.chat_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
}

// ---------------------------------------------------------------------------
// The trust store is read only for https
// ---------------------------------------------------------------------------

/// Runs `cmd` with `SSL_CERT_FILE` naming a FIFO and says whether buddy
/// opened it while it ran. A reader blocks in open() until a writer comes,
/// and the writer here is already waiting: if buddy reads the store, the
/// writer's open returns while buddy still runs. If not, the writer is let
/// go only after buddy has exited. Either way the answer is certain, not a
/// matter of timing. What the writer sends is `pem` (the test CA, so an
/// https run that reads the store can also succeed).
fn trust_store_read_by(cmd: BuddyCmd, args: &[&str], pem: &str) -> (support::Output, bool) {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::AtomicBool;
    let dir = TempDir::new("trust-fifo");
    let fifo = dir.join("ca-bundle.pem");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let exited = Arc::new(AtomicBool::new(false));
    let writer = {
        let (fifo, exited, pem) = (fifo.clone(), exited.clone(), pem.to_string());
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .expect("open the FIFO to write");
            let read_while_running = !exited.load(Ordering::SeqCst);
            use std::io::Write;
            let _ = f.write_all(pem.as_bytes());
            read_while_running
        })
    };
    let out = cmd.env("SSL_CERT_FILE", &fifo).args(args).run();
    exited.store(true, Ordering::SeqCst);
    // O_NONBLOCK: a reader that does not wait, so a writer still waiting
    // for one is released.
    let _release = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(0o4000)
        .open(&fifo)
        .expect("open the FIFO to read");
    let read = writer.join().expect("writer thread");
    (out, read)
}

#[test]
fn plain_http_never_reads_the_trust_store() {
    let provider = FakeProvider::start(vec![Reply::text("plain"), Reply::text("keyless")]);
    let (out, read) = trust_store_read_by(
        BuddyCmd::new().config(config(&provider.base_url(), "")),
        &["exec", "hello"],
        "",
    );
    out.assert_success();
    assert_eq!(out.stdout, "plain\n");
    assert!(!read, "a plain-HTTP exec read the trust store");
    // The keyless --base-url path of a first run (no config file) likewise.
    let (out, read) = trust_store_read_by(
        BuddyCmd::new(),
        &["--base-url", &provider.base_url(), "exec", "hello"],
        "",
    );
    out.assert_success();
    assert_eq!(out.stdout, "keyless\n");
    assert!(!read, "a plain-HTTP exec read the trust store");
}

#[test]
fn https_reads_the_trust_store_when_first_used() {
    // The guard above can fail: the same probe sees an https run read it.
    let pki = Pki::new();
    let provider = FakeProvider::start(vec![Reply::text("over TLS")]);
    let front = TlsFront::start(&pki, provider.addr());
    let (out, read) = trust_store_read_by(
        BuddyCmd::new().config(config(&https_base(&front), "")),
        &["exec", "hello"],
        &pki.ca_pem,
    );
    out.assert_success();
    assert_eq!(out.stdout, "over TLS\n");
    assert!(read, "an https exec did not read the trust store");
}
