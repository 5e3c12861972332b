//! How buddy's HTTP clients (the model client, the fetch tool, logins) reach
//! the network, decided in one place so all three agree.
//!
//! Trust: the system's certificate store — its bundle file where it has one —
//! or the files named by `SSL_CERT_FILE`/`SSL_CERT_DIR` when set (as OpenSSL
//! does), read when the first https client is built, never for plain HTTP to
//! a local server; the roots bundled
//! in the binary only when that yields nothing, so a minimal container without
//! a CA bundle still reaches public servers. A profile's `ca_file` adds its
//! certificates on top, for one private server. The store is read here rather
//! than through reqwest's `rustls-tls-native-roots`, which would read it again
//! for every client, always add the bundled roots as well, and refuse to build
//! a client over a single root rustls cannot parse.
//!
//! Proxies: `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (or their
//! lower-case forms) are read by reqwest itself as long as no client calls
//! `.no_proxy()`; nothing here turns that off. The model client leaves reqwest
//! for its own plain-HTTP exchanges (`provider/direct.rs`) only when none of
//! the proxy variables that could apply is set.

use reqwest::Certificate;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::Path;
use std::sync::OnceLock;

/// A client builder with buddy's trust roots; callers add timeouts and the like.
pub fn client_builder(extra_roots: &[Certificate]) -> reqwest::ClientBuilder {
    builder_with(system_roots(), extra_roots)
}

/// Like [`client_builder`], reading the system store again rather than
/// using the copy read earlier: for measuring what the first https client
/// of a run costs (benches/tls.rs).
pub fn fresh_client_builder(extra_roots: &[Certificate]) -> reqwest::ClientBuilder {
    builder_with(&usable(load_system_roots()), extra_roots)
}

fn builder_with(system: &[Certificate], extra_roots: &[Certificate]) -> reqwest::ClientBuilder {
    // reqwest would add its bundled roots on top of ours; only when the system
    // gave none are they wanted, so a deliberately pruned store stays pruned.
    let mut builder = reqwest::Client::builder().tls_built_in_root_certs(system.is_empty());
    for cert in system.iter().chain(extra_roots) {
        builder = builder.add_root_certificate(cert.clone());
    }
    builder
}

/// A client for plain-HTTP requests only: no trust roots at all, so building
/// it reads no certificate file. It must never be handed an https URL.
pub fn plain_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .build()
}

/// The system store, read once per process: three clients share it, and
/// reading a distribution's bundle parses a few hundred certificates.
fn system_roots() -> &'static [Certificate] {
    static ROOTS: OnceLock<Vec<Certificate>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        // An unreadable file among several is skipped; what did load still counts.
        usable(load_system_roots())
    })
}

fn usable(roots: Vec<CertificateDer<'static>>) -> Vec<Certificate> {
    roots
        .into_iter()
        .filter(|der| usable_root(der).is_ok())
        .filter_map(|der| Certificate::from_der(der.as_ref()).ok())
        .collect()
}

/// The system's roots, from its single bundle file where it has one: one
/// read, where the hashed directory beside it (/etc/ssl/certs) is a file per
/// certificate, over a hundred opens for the same roots. `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` are honoured as they are; without a bundle, the directories.
pub fn load_system_roots() -> Vec<CertificateDer<'static>> {
    let dir_chosen = crate::process::var_os("SSL_CERT_DIR").is_some_and(|v| !v.is_empty());
    if !dir_chosen {
        if let Some(bundle) = openssl_probe::probe().cert_file {
            let certs = rustls_native_certs::load_certs_from_paths(Some(&bundle), None).certs;
            if !certs.is_empty() {
                return certs;
            }
        }
    }
    rustls_native_certs::load_native_certs().certs
}

/// Whether rustls accepts `der` as a trust anchor. reqwest fails the whole
/// client on one bad root, and system stores do hold ancient oddities.
fn usable_root(der: &CertificateDer<'_>) -> Result<(), rustls::Error> {
    rustls::RootCertStore::empty().add(der.clone().into_owned())
}

/// Why a `ca_file` gave no usable roots; each one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error("cannot read ca_file {}: {error}", .path.display())]
    Read {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("ca_file {} is not valid PEM: {error}", .path.display())]
    Pem {
        path: std::path::PathBuf,
        error: String,
    },
    #[error("ca_file {}: certificate {index} is not usable: {error}", .path.display())]
    Unusable {
        path: std::path::PathBuf,
        index: usize,
        error: String,
    },
    #[error("ca_file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", .path.display())]
    Empty { path: std::path::PathBuf },
}

/// The certificates of a `ca_file`: every PEM `CERTIFICATE` block in it.
pub fn load_ca_file(path: &Path) -> Result<Vec<Certificate>, CaFileError> {
    let owned = || path.to_path_buf();
    let pem = std::fs::read(path).map_err(|error| CaFileError::Read {
        path: owned(),
        error,
    })?;
    let mut out = Vec::new();
    for (n, item) in CertificateDer::pem_slice_iter(&pem).enumerate() {
        let der = item.map_err(|e| CaFileError::Pem {
            path: owned(),
            error: e.to_string(),
        })?;
        let unusable = |error: String| CaFileError::Unusable {
            path: owned(),
            index: n + 1,
            error,
        };
        usable_root(&der).map_err(|e| unusable(e.to_string()))?;
        let cert = Certificate::from_der(der.as_ref()).map_err(|e| unusable(e.to_string()))?;
        out.push(cert);
    }
    if out.is_empty() {
        return Err(CaFileError::Empty { path: owned() });
    }
    Ok(out)
}

/// The reason, when `e` failed because the server's certificate was refused:
/// no retry can change that, and the user needs to hear it plainly.
pub fn certificate_failure(e: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(rustls::Error::InvalidCertificate(cert)) = find_rustls_error(s) {
            let mut reason = format!("the server's certificate was refused ({cert})");
            if matches!(cert, rustls::CertificateError::UnknownIssuer) {
                reason.push_str(
                    "; if a private CA issued it, name that CA's PEM file in the profile's ca_file or in SSL_CERT_FILE",
                );
            }
            return Some(reason);
        }
        source = s.source();
    }
    None
}

/// rustls's error as the connector reports it: inside an io::Error, itself
/// sometimes inside another, whose source() skips the wrapped error.
fn find_rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(r) = e.downcast_ref::<rustls::Error>() {
        return Some(r);
    }
    let mut io = e.downcast_ref::<std::io::Error>();
    while let Some(inner) = io.and_then(|io| io.get_ref()) {
        if let Some(r) = inner.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        io = inner.downcast_ref::<std::io::Error>();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_file_is_named() {
        let err = load_ca_file(Path::new("/nonexistent/buddy-ca.pem")).err();
        let err = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err.starts_with("cannot read ca_file /nonexistent/buddy-ca.pem: "),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_certificates_is_refused() {
        let dir = std::env::temp_dir().join(format!("buddy-net-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("not-a-ca.pem");
        std::fs::write(&path, "hello\n").unwrap();
        let err = load_ca_file(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("holds no PEM certificate"), "{err}");
        // A CERTIFICATE block whose contents are not a certificate.
        std::fs::write(
            &path,
            "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = load_ca_file(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("certificate 1 is not usable"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
