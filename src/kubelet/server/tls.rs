//! TLS for the main server: the serving certificate (configured files, the
//! self-signed pair in the cert directory, or a resolver supplied by
//! certificate rotation), `tlsMinVersion`, `tlsCipherSuites`, and the request
//! for client certificates when a client CA is configured.
//!
//! rustls implements TLS 1.2 and 1.3 with ECDHE AEAD suites only: a minimum
//! of TLS 1.0/1.1 behaves as 1.2, and Go cipher names rustls lacks (CBC,
//! static RSA, 3DES, RC4) are accepted and skipped with a warning. TLS 1.3
//! suites are not configurable, as in Go.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::ResolvesServerCert;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{
    CipherSuite, DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme,
    SupportedProtocolVersion,
};

use super::cert::ensure_self_signed;

/// Errors in setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path:?}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("error reading {0}, certificate and key must be supplied as a pair")]
    Pair(PathBuf),
    #[error("unable to generate self signed cert: {0}")]
    Generate(String),
    #[error("unable to load certificate or key from {path:?}: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("unknown tls version {0:?}")]
    UnknownVersion(String),
    #[error("Cipher suite {0} not supported or doesn't exist")]
    UnknownCipher(String),
    #[error("unable to load client CA file {path}: {reason}")]
    ClientCa { path: String, reason: String },
    #[error(
        "no serving certificate: neither certificate files nor a certificate resolver were given"
    )]
    NoServingCertificate,
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The crypto provider installed for the process (main installs ring), or
/// ring's when none is installed.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    match CryptoProvider::get_default() {
        Some(p) => p.clone(),
        None => Arc::new(rustls::crypto::ring::default_provider()),
    }
}

/// A Go cipher-suite name and what rustls can do with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GoCipher {
    Tls12(CipherSuite),
    Tls13,
    Unsupported,
}

/// Every name the Go kubelet accepts in `tlsCipherSuites`.
const GO_CIPHERS: &[(&str, GoCipher, bool)] = {
    use CipherSuite as C;
    use GoCipher::*;
    &[
        ("TLS_RSA_WITH_AES_128_CBC_SHA", Unsupported, false),
        ("TLS_RSA_WITH_AES_256_CBC_SHA", Unsupported, false),
        ("TLS_RSA_WITH_AES_128_GCM_SHA256", Unsupported, false),
        ("TLS_RSA_WITH_AES_256_GCM_SHA384", Unsupported, false),
        ("TLS_AES_128_GCM_SHA256", Tls13, false),
        ("TLS_AES_256_GCM_SHA384", Tls13, false),
        ("TLS_CHACHA20_POLY1305_SHA256", Tls13, false),
        ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", Unsupported, false),
        ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", Unsupported, false),
        ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", Unsupported, false),
        ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", Unsupported, false),
        (
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            Tls12(C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
            false,
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            Tls12(C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
            false,
        ),
        (
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            Tls12(C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
            false,
        ),
        (
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            Tls12(C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
            false,
        ),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            Tls12(C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
            false,
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            Tls12(C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
            false,
        ),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
            Tls12(C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
            false,
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
            Tls12(C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
            false,
        ),
        ("TLS_RSA_WITH_RC4_128_SHA", Unsupported, true),
        ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", Unsupported, true),
        ("TLS_RSA_WITH_AES_128_CBC_SHA256", Unsupported, true),
        ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", Unsupported, true),
        ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", Unsupported, true),
        ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", Unsupported, true),
        ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", Unsupported, true),
        ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", Unsupported, true),
    ]
};

/// Go's TLS version numbers.
pub const VERSION_TLS10: u16 = 0x0301;
pub const VERSION_TLS11: u16 = 0x0302;
pub const VERSION_TLS12: u16 = 0x0303;
pub const VERSION_TLS13: u16 = 0x0304;

/// Parses `tlsMinVersion` (empty: TLS 1.2).
pub fn parse_tls_version(name: &str) -> Result<u16, TlsError> {
    match name {
        "" | "VersionTLS12" => Ok(VERSION_TLS12),
        "VersionTLS10" => Ok(VERSION_TLS10),
        "VersionTLS11" => Ok(VERSION_TLS11),
        "VersionTLS13" => Ok(VERSION_TLS13),
        other => Err(TlsError::UnknownVersion(other.to_string())),
    }
}

/// Checks `tlsCipherSuites` against the names Go knows.
pub fn validate_cipher_suites(names: &[String]) -> Result<(), TlsError> {
    names.iter().try_for_each(|n| lookup_cipher(n).map(|_| ()))
}

fn lookup_cipher(name: &str) -> Result<(GoCipher, bool), TlsError> {
    GO_CIPHERS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, c, insecure)| (*c, *insecure))
        .ok_or_else(|| TlsError::UnknownCipher(name.to_string()))
}

/// What the main server's TLS is built from.
#[derive(Clone, Debug, Default)]
pub struct TlsParams {
    /// `tlsCertFile` (empty: none).
    pub cert_file: Option<PathBuf>,
    /// `tlsPrivateKeyFile`.
    pub private_key_file: Option<PathBuf>,
    /// `--cert-dir`, where the self-signed pair lives.
    pub cert_dir: PathBuf,
    /// The hostname the self-signed certificate is for (`get_hostname`).
    pub hostname: String,
    /// `serverTLSBootstrap`: the certificate comes from rotation (issue 6).
    pub server_tls_bootstrap: bool,
    /// `tlsMinVersion`.
    pub min_version: String,
    /// `tlsCipherSuites`.
    pub cipher_suites: Vec<String>,
    /// `authentication.x509.clientCAFile` (empty: none).
    pub client_ca_file: Option<PathBuf>,
}

/// The settled TLS options: certificate files (unless a resolver will
/// supply certificates), protocol versions, suites, client-CA hints.
#[derive(Clone, Debug)]
pub struct TlsOptions {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    provider: Arc<CryptoProvider>,
    versions: Vec<&'static SupportedProtocolVersion>,
    client_ca_subjects: Option<Vec<DistinguishedName>>,
}

fn nonempty(p: &Option<PathBuf>) -> Option<PathBuf> {
    p.clone().filter(|p| !p.as_os_str().is_empty())
}

/// Settles the TLS options as the kubelet does at start-up: without
/// configured files and without serverTLSBootstrap, the self-signed pair in
/// the cert directory is used (generated on first use). Blocking (file I/O,
/// key generation): call it in the build phase or on the blocking pool.
pub fn initialize_tls(params: &TlsParams) -> Result<TlsOptions, TlsError> {
    let mut cert_file = nonempty(&params.cert_file);
    let mut key_file = nonempty(&params.private_key_file);
    if !params.server_tls_bootstrap && cert_file.is_none() && key_file.is_none() {
        let (c, k) = ensure_self_signed(&params.cert_dir, &params.hostname)?;
        cert_file = Some(c);
        key_file = Some(k);
    }

    let mut wanted12 = Vec::new();
    let mut unsupported = Vec::new();
    for name in &params.cipher_suites {
        let (cipher, insecure) = lookup_cipher(name)?;
        if insecure {
            tracing::info!(cipher = %name, "Use of insecure cipher detected.");
        }
        match cipher {
            GoCipher::Tls12(s) => wanted12.push(s),
            GoCipher::Tls13 => {}
            GoCipher::Unsupported => unsupported.push(name.clone()),
        }
    }
    if !unsupported.is_empty() {
        tracing::warn!(ciphers = ?unsupported, "Cipher suites not implemented by this kubelet's TLS stack are ignored");
    }

    let min = parse_tls_version(&params.min_version)?;
    if min < VERSION_TLS12 {
        tracing::warn!(min_version = %params.min_version, "TLS versions below 1.2 are not implemented; the minimum is TLS 1.2");
    }
    if min == VERSION_TLS13 && !params.cipher_suites.is_empty() {
        tracing::info!(
            "Warning: TLS 1.3 cipher suites are not configurable, ignoring --tls-cipher-suites"
        );
    }

    let mut provider = (*crypto_provider()).clone();
    if !params.cipher_suites.is_empty() {
        provider.cipher_suites.retain(|s| match s {
            rustls::SupportedCipherSuite::Tls13(_) => true,
            rustls::SupportedCipherSuite::Tls12(_) => wanted12.contains(&s.suite()),
        });
    }
    let has12 = provider
        .cipher_suites
        .iter()
        .any(|s| matches!(s, rustls::SupportedCipherSuite::Tls12(_)));
    let mut versions = vec![&rustls::version::TLS13];
    if min < VERSION_TLS13 && has12 {
        versions.push(&rustls::version::TLS12);
    }

    let client_ca_subjects = match nonempty(&params.client_ca_file) {
        Some(path) => Some(client_ca_subjects(&path)?),
        None => None,
    };

    Ok(TlsOptions {
        cert_file,
        key_file,
        provider: Arc::new(provider),
        versions,
        client_ca_subjects,
    })
}

fn client_ca_subjects(path: &Path) -> Result<Vec<DistinguishedName>, TlsError> {
    let err = |reason: String| TlsError::ClientCa {
        path: path.display().to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificates found".to_string()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| err(e.to_string()))?;
    }
    Ok(roots.subjects())
}

/// Loads a PEM certificate chain and key as a rustls certified key.
pub fn load_certified_key(
    cert_file: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let pem_err = |path: &Path, reason: String| TlsError::Pem {
        path: path.to_path_buf(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| pem_err(cert_file, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(cert_file, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_err(cert_file, "no certificate found".to_string()));
    }
    let key =
        PrivateKeyDer::from_pem_file(key_file).map_err(|e| pem_err(key_file, e.to_string()))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| pem_err(key_file, e.to_string()))
}

impl TlsOptions {
    /// The serving certificate file, if certificates come from files.
    pub fn cert_file(&self) -> Option<&Path> {
        self.cert_file.as_deref()
    }

    /// The serving key file.
    pub fn key_file(&self) -> Option<&Path> {
        self.key_file.as_deref()
    }

    /// The rustls configuration serving the certificate files. Blocking.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let (Some(cert), Some(key)) = (&self.cert_file, &self.key_file) else {
            return Err(TlsError::NoServingCertificate);
        };
        let certified = load_certified_key(cert, key, &self.provider)?;
        self.server_config_with_resolver(Arc::new(SingleCertAndKey::from(certified)))
    }

    /// The rustls configuration with certificates from `resolver` (rotation).
    pub fn server_config_with_resolver(
        &self,
        resolver: Arc<dyn ResolvesServerCert>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&self.versions)?;
        let builder = match &self.client_ca_subjects {
            Some(subjects) => builder.with_client_cert_verifier(Arc::new(RequestClientCert {
                subjects: subjects.clone(),
                algorithms: self.provider.signature_verification_algorithms,
            })),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Asks for a client certificate without requiring one and without judging
/// its chain (that is the x509 authenticator's job, per request); only the
/// client's possession of the certificate's key is checked here.
#[derive(Debug)]
struct RequestClientCert {
    subjects: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.subjects
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    fn params(dir: &Path) -> TlsParams {
        TlsParams {
            cert_dir: dir.join("pki"),
            hostname: "node-a".into(),
            ..Default::default()
        }
    }

    #[test]
    fn version_table() {
        let cases = [
            ("", Ok(VERSION_TLS12)),
            ("VersionTLS10", Ok(VERSION_TLS10)),
            ("VersionTLS11", Ok(VERSION_TLS11)),
            ("VersionTLS12", Ok(VERSION_TLS12)),
            ("VersionTLS13", Ok(VERSION_TLS13)),
            ("TLS13", Err("unknown tls version \"TLS13\"")),
        ];
        for (name, want) in cases {
            match (parse_tls_version(name), want) {
                (Ok(v), Ok(w)) => assert_eq!(v, w, "{name}"),
                (Err(e), Err(w)) => assert_eq!(e.to_string(), w),
                (g, w) => panic!("{name}: {g:?} vs {w:?}"),
            }
        }
    }

    #[test]
    fn options_table() {
        let dir = tempfile::tempdir().unwrap();
        // (min version, suites, want TLS1.2 enabled, want TLS1.2 suite count or error)
        let cases: Vec<(&str, Vec<&str>, Result<(bool, usize), &str>)> = vec![
            ("", vec![], Ok((true, 6))),
            ("VersionTLS10", vec![], Ok((true, 6))),
            ("VersionTLS13", vec![], Ok((false, 6))),
            (
                "",
                vec!["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"],
                Ok((true, 1)),
            ),
            (
                "",
                vec![
                    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
                    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
                ],
                Ok((true, 1)),
            ),
            ("", vec!["TLS_RSA_WITH_AES_128_CBC_SHA"], Ok((false, 0))),
            ("", vec!["TLS_AES_128_GCM_SHA256"], Ok((false, 0))),
            (
                "",
                vec!["TLS_NOPE"],
                Err("Cipher suite TLS_NOPE not supported or doesn't exist"),
            ),
            (
                "VersionTLS9",
                vec![],
                Err("unknown tls version \"VersionTLS9\""),
            ),
        ];
        for (min, suites, want) in cases {
            let mut p = params(dir.path());
            p.min_version = min.into();
            p.cipher_suites = suites.iter().map(|s| s.to_string()).collect();
            match (initialize_tls(&p), want) {
                (Ok(o), Ok((tls12, n12))) => {
                    assert_eq!(
                        o.versions.contains(&&rustls::version::TLS12),
                        tls12,
                        "{min} {suites:?}"
                    );
                    assert!(o.versions.contains(&&rustls::version::TLS13));
                    let got12 = o
                        .provider
                        .cipher_suites
                        .iter()
                        .filter(|s| matches!(s, rustls::SupportedCipherSuite::Tls12(_)))
                        .count();
                    assert_eq!(got12, n12, "{min} {suites:?}");
                    o.server_config().unwrap();
                }
                (Err(e), Err(w)) => assert_eq!(e.to_string(), w),
                (g, w) => panic!("{min} {suites:?}: got {g:?}, want {w:?}"),
            }
        }
        assert!(validate_cipher_suites(&["TLS_RSA_WITH_RC4_128_SHA".to_string()]).is_ok());
        assert!(validate_cipher_suites(&["bogus".to_string()]).is_err());
    }

    #[test]
    fn certificate_sources() {
        let dir = tempfile::tempdir().unwrap();
        // Self-signed by default.
        let o = initialize_tls(&params(dir.path())).unwrap();
        assert_eq!(
            o.cert_file(),
            Some(dir.path().join("pki/kubelet.crt").as_path())
        );
        o.server_config().unwrap();

        // Configured files win and nothing is generated.
        let other = tempfile::tempdir().unwrap();
        let pair = super::super::cert::generate_self_signed_cert_key("x").unwrap();
        let (c, k) = (other.path().join("c.pem"), other.path().join("k.pem"));
        std::fs::write(&c, &pair.cert).unwrap();
        std::fs::write(&k, &pair.key).unwrap();
        let mut p = params(other.path());
        p.cert_file = Some(c.clone());
        p.private_key_file = Some(k.clone());
        let o = initialize_tls(&p).unwrap();
        assert_eq!(o.cert_file(), Some(c.as_path()));
        assert!(!other.path().join("pki").exists());
        o.server_config().unwrap();

        // A key that does not match the certificate is refused.
        let stranger = super::super::cert::generate_self_signed_cert_key("y").unwrap();
        std::fs::write(&k, &stranger.key).unwrap();
        assert!(o.server_config().is_err());

        // Bootstrap without files: no certificate until a resolver is given.
        let boot = tempfile::tempdir().unwrap();
        let mut p = params(boot.path());
        p.server_tls_bootstrap = true;
        let o = initialize_tls(&p).unwrap();
        assert!(o.cert_file().is_none());
        assert!(matches!(
            o.server_config(),
            Err(TlsError::NoServingCertificate)
        ));
        assert!(!boot.path().join("pki").exists());

        // Client CA problems are reported with the file.
        let mut p = params(dir.path());
        p.client_ca_file = Some(dir.path().join("absent-ca.pem"));
        let err = initialize_tls(&p).unwrap_err();
        assert!(
            err.to_string().starts_with("unable to load client CA file"),
            "{err}"
        );
    }
}
