//! x509 client-certificate authentication against
//! `authentication.x509.clientCAFile`.
//!
//! The TLS layer only asks for a client certificate and checks that the
//! client holds its key; the chain is verified here, per request, against
//! the CA bundle (reloaded when the file changes). A certificate that does
//! not verify is an authentication error (401 even with anonymous access
//! on); a verified one yields the user from its CN and groups from its O.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::request::Parts;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{DistinguishedName, RootCertStore};
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{AuthError, Authenticator, UserInfo};
use crate::kubelet::server::ConnectionInfo;
use crate::kubelet::server::tls::crypto_provider;
use crate::util::clock::RealClock;
use crate::util::lifecycle::{Period, TaskSet};

/// How often the CA file is re-read (the Go kubelet's fallback resync).
pub const CA_RELOAD_PERIOD: Duration = Duration::from_secs(60);

struct CaState {
    raw: Vec<u8>,
    verifier: Arc<dyn ClientCertVerifier>,
    subjects: Vec<DistinguishedName>,
}

/// The client CA bundle read from a file, reloadable at run time.
pub struct ClientCaBundle {
    path: PathBuf,
    state: RwLock<Arc<CaState>>,
}

impl std::fmt::Debug for ClientCaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCaBundle")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn ca_error(path: &Path, reason: impl Into<String>) -> AuthError {
    AuthError::ClientCa {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn parse_bundle(path: &Path, raw: Vec<u8>) -> Result<CaState, AuthError> {
    if raw.is_empty() {
        return Err(ca_error(path, "the CA bundle is empty"));
    }
    let certs = CertificateDer::pem_slice_iter(&raw)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ca_error(path, format!("malformed PEM: {e}")))?;
    if certs.is_empty() {
        return Err(ca_error(path, "no certificates found in the CA bundle"));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| ca_error(path, format!("invalid CA certificate: {e}")))?;
    }
    let subjects = roots.subjects();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto_provider())
        .build()
        .map_err(|e| ca_error(path, e.to_string()))?;
    Ok(CaState {
        raw,
        verifier,
        subjects,
    })
}

impl ClientCaBundle {
    /// Reads the bundle (blocking; build phase).
    pub fn load(path: impl Into<PathBuf>) -> Result<Arc<Self>, AuthError> {
        let path = path.into();
        let raw = std::fs::read(&path).map_err(|e| ca_error(&path, e.to_string()))?;
        let state = parse_bundle(&path, raw)?;
        crate::vlog!(2, path = %path.display(), "Loaded a new CA Bundle and Verifier");
        Ok(Arc::new(Self {
            path,
            state: RwLock::new(Arc::new(state)),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn current(&self) -> Arc<CaState> {
        match self.state.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The CA subjects, sent to clients as acceptable issuers.
    pub fn subjects(&self) -> Vec<DistinguishedName> {
        self.current().subjects.clone()
    }

    /// Re-reads the file; a changed, valid bundle replaces the current one.
    /// Returns whether it changed. A bad file keeps the old bundle.
    pub async fn reload(&self) -> Result<bool, AuthError> {
        let raw = tokio::fs::read(&self.path)
            .await
            .map_err(|e| ca_error(&self.path, e.to_string()))?;
        if raw == self.current().raw {
            return Ok(false);
        }
        let path = self.path.clone();
        let state = tokio::task::spawn_blocking(move || parse_bundle(&path, raw))
            .await
            .map_err(|e| ca_error(&self.path, e.to_string()))??;
        match self.state.write() {
            Ok(mut g) => *g = Arc::new(state),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(state),
        }
        crate::vlog!(2, path = %self.path.display(), "Loaded a new CA Bundle and Verifier");
        Ok(true)
    }

    /// Start phase: re-reads the bundle every `period` until cancelled.
    pub fn start_reloader(self: &Arc<Self>, tasks: &TaskSet, period: Duration) {
        let this = self.clone();
        let period = Period::fixed(period).waiting_first();
        tasks.spawn_periodic("client-ca-reload", period, Arc::new(RealClock), move || {
            let this = this.clone();
            async move {
                if let Err(err) = this.reload().await {
                    tracing::error!(error = %err, "Failed to reload the client CA bundle");
                }
            }
        });
    }

    /// Verifies a client chain for client-auth use against the bundle.
    pub fn verify(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Result<(), CertificateError> {
        self.current()
            .verifier
            .verify_client_cert(end_entity, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(CertificateError::Verify)
    }
}

fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// "SN=…, SKID=…, AKID=…" for log and error messages.
fn certificate_identifier(cert: &X509Certificate<'_>) -> String {
    let mut skid = String::new();
    let mut akid = String::new();
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(k) => skid = colon_hex(k.0),
            ParsedExtension::AuthorityKeyIdentifier(a) => {
                if let Some(k) = &a.key_identifier {
                    akid = colon_hex(k.0);
                }
            }
            _ => {}
        }
    }
    format!("SN={}, SKID={skid}, AKID={akid}", cert.serial)
}

/// Why a client certificate was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("{0}")]
    Verify(#[source] rustls::Error),
    #[error("unparsable certificate: {0}")]
    Parse(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// The chain's first certificate, before its identifier is known.
    #[error("{0}")]
    Undecodable(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
}

/// The user a verified certificate names: CN as the name, each O as a
/// group; `None` when the CN is empty.
pub fn certificate_user(der: &[u8]) -> Result<Option<UserInfo>, CertificateError> {
    let (_, cert) = X509Certificate::from_der(der).map_err(CertificateError::Parse)?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Ok(None);
    }
    let groups = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_string)
        .collect();
    Ok(Some(UserInfo {
        name,
        groups,
        ..Default::default()
    }))
}

/// Authenticates requests by their TLS client certificate.
pub struct X509Authenticator {
    bundle: Arc<ClientCaBundle>,
}

impl X509Authenticator {
    pub fn new(bundle: Arc<ClientCaBundle>) -> Self {
        Self { bundle }
    }
}

#[async_trait::async_trait]
impl Authenticator for X509Authenticator {
    async fn authenticate(&self, req: &Parts) -> Result<Option<UserInfo>, AuthError> {
        let Some(chain) = req
            .extensions
            .get::<ConnectionInfo>()
            .and_then(|c| c.peer_certificates.as_ref())
            .filter(|c| !c.is_empty())
        else {
            return Ok(None);
        };
        let end_entity = &chain[0];
        let identifier = match X509Certificate::from_der(end_entity) {
            Ok((_, cert)) => certificate_identifier(&cert),
            Err(e) => {
                return Err(AuthError::CertificateVerification {
                    identifier: "(unparsable)".to_string(),
                    reason: CertificateError::Undecodable(e),
                });
            }
        };
        self.bundle
            .verify(end_entity, &chain[1..])
            .map_err(|reason| AuthError::CertificateVerification {
                identifier: identifier.clone(),
                reason,
            })?;
        certificate_user(end_entity)
            .map_err(|reason| AuthError::CertificateVerification { identifier, reason })
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };

    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca(cn: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(p, key),
        }
    }

    fn client(
        ca: &Ca,
        cn: &str,
        orgs: &[&str],
        eku: Option<ExtendedKeyUsagePurpose>,
    ) -> CertificateDer<'static> {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        if !cn.is_empty() {
            p.distinguished_name.push(DnType::CommonName, cn);
        }
        for o in orgs {
            p.distinguished_name.push(DnType::OrganizationName, *o);
        }
        if let Some(eku) = eku {
            p.extended_key_usages = vec![eku];
        }
        p.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().unwrap();
        p.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn request_with(chain: Option<Vec<CertificateDer<'static>>>) -> Parts {
        let mut parts = http::Request::get("/").body(()).unwrap().into_parts().0;
        parts.extensions.insert(ConnectionInfo {
            remote_addr: None,
            tls: true,
            peer_certificates: chain.map(Arc::from),
        });
        parts
    }

    fn bundle_file(dir: &Path, pem: &str) -> PathBuf {
        let p = dir.join("ca.pem");
        std::fs::write(&p, pem).unwrap();
        p
    }

    #[tokio::test]
    async fn authenticate_table() {
        let good = ca("good-ca");
        let other = ca("other-ca");
        let dir = tempfile::tempdir().unwrap();
        let bundle = ClientCaBundle::load(bundle_file(dir.path(), &good.pem)).unwrap();
        let auth = X509Authenticator::new(bundle);
        let client_auth = Some(ExtendedKeyUsagePurpose::ClientAuth);
        let cases: Vec<(
            &str,
            Option<Vec<CertificateDer<'static>>>,
            Result<Option<(&str, Vec<&str>)>, &str>,
        )> = vec![
            ("no connection certs", None, Ok(None)),
            ("empty chain", Some(vec![]), Ok(None)),
            (
                "node cert",
                Some(vec![client(
                    &good,
                    "system:node:n1",
                    &["system:nodes"],
                    client_auth.clone(),
                )]),
                Ok(Some(("system:node:n1", vec!["system:nodes"]))),
            ),
            (
                "no EKU",
                Some(vec![client(&good, "alice", &["a"], None)]),
                Ok(Some(("alice", vec!["a"]))),
            ),
            (
                "no O",
                Some(vec![client(&good, "bob", &[], client_auth.clone())]),
                Ok(Some(("bob", vec![]))),
            ),
            (
                "empty CN",
                Some(vec![client(&good, "", &["a"], client_auth.clone())]),
                Ok(None),
            ),
            (
                "other CA",
                Some(vec![client(&other, "mallory", &[], client_auth.clone())]),
                Err("verifying certificate SN="),
            ),
            (
                "server-only EKU",
                Some(vec![client(
                    &good,
                    "srv",
                    &[],
                    Some(ExtendedKeyUsagePurpose::ServerAuth),
                )]),
                Err("verifying certificate"),
            ),
            (
                "garbage",
                Some(vec![CertificateDer::from(vec![1u8, 2, 3])]),
                Err("verifying certificate (unparsable)"),
            ),
        ];
        for (name, chain, want) in cases {
            let got = auth.authenticate(&request_with(chain)).await;
            match (got, want) {
                (Ok(u), Ok(w)) => {
                    let u = u.map(|u| (u.name, u.groups));
                    let w =
                        w.map(|(n, g)| (n.to_string(), g.iter().map(|s| s.to_string()).collect()));
                    assert_eq!(u, w, "{name}");
                }
                (Err(e), Err(w)) => assert!(e.to_string().starts_with(w), "{name}: {e}"),
                (g, w) => panic!("{name}: got {g:?}, want {w:?}"),
            }
        }
    }

    #[tokio::test]
    async fn reloader_task_picks_up_a_new_bundle_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let first = ca("first");
        let second = ca("second");
        let path = bundle_file(dir.path(), &first.pem);
        let bundle = ClientCaBundle::load(&path).unwrap();
        let tasks = TaskSet::new();
        bundle.start_reloader(&tasks, Duration::from_millis(20));
        let from_second = client(&second, "bob", &[], None);
        std::fs::write(&path, &second.pem).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while bundle.verify(&from_second, &[]).is_err() {
            assert!(std::time::Instant::now() < deadline, "bundle not reloaded");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            bundle.verify(&client(&first, "a", &[], None), &[]).is_err(),
            "old CA dropped"
        );
        tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(1))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn bundle_load_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        for (content, want) in [("", "empty"), ("not pem", "no certificates")] {
            std::fs::write(&path, content).unwrap();
            let err = ClientCaBundle::load(&path).unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
        assert!(ClientCaBundle::load(dir.path().join("absent")).is_err());

        let first = ca("first");
        let second = ca("second");
        std::fs::write(&path, &first.pem).unwrap();
        let bundle = ClientCaBundle::load(&path).unwrap();
        let from_second = client(&second, "bob", &[], None);
        assert!(bundle.verify(&from_second, &[]).is_err());
        assert!(!bundle.reload().await.unwrap(), "unchanged file");

        // A broken file keeps the old bundle.
        std::fs::write(&path, "garbage").unwrap();
        assert!(bundle.reload().await.is_err());
        assert!(bundle.verify(&client(&first, "a", &[], None), &[]).is_ok());

        std::fs::write(&path, format!("{}{}", first.pem, second.pem)).unwrap();
        assert!(bundle.reload().await.unwrap());
        assert!(bundle.verify(&from_second, &[]).is_ok());
        assert_eq!(bundle.subjects().len(), 2);
    }
}
