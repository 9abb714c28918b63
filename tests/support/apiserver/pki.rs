//! The double's certificate authority: the serving certificate, client
//! certificates for tests, signing of CSRs, and reading a certificate's
//! user (CN) and groups (O).

use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509Certificate};

/// A certificate with its private key, both PEM.
#[derive(Debug, Clone)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

pub struct Pki {
    issuer: Issuer<'static, KeyPair>,
    pub ca_pem: String,
    ca_der: CertificateDer<'static>,
    serving: IssuedCert,
}

fn random_serial() -> SerialNumber {
    let mut b: [u8; 16] = rand::random();
    b[0] &= 0x7f;
    SerialNumber::from_slice(&b)
}

fn offset(secs: i64) -> time::OffsetDateTime {
    let now = time::OffsetDateTime::now_utc();
    now + time::Duration::seconds(secs)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Pki {
    pub fn new() -> Result<Pki, String> {
        let ca_key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "kubernetes");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.not_before = offset(-3600);
        params.not_after = offset(10 * 365 * 24 * 3600);
        params.serial_number = Some(random_serial());
        let ca = params.self_signed(&ca_key).map_err(err)?;
        let ca_pem = ca.pem();
        let ca_der = ca.der().clone();
        let issuer = Issuer::new(params, ca_key);
        let mut pki = Pki {
            issuer,
            ca_pem,
            ca_der,
            serving: IssuedCert {
                cert_pem: String::new(),
                key_pem: String::new(),
            },
        };
        pki.serving = pki.issue(
            "kube-apiserver",
            &[],
            &[
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        Ok(pki)
    }

    fn issue(
        &self,
        cn: &str,
        orgs: &[&str],
        sans: &[&str],
        eku: ExtendedKeyUsagePurpose,
    ) -> Result<IssuedCert, String> {
        let key = KeyPair::generate().map_err(err)?;
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).map_err(err)?;
        let mut dn = DistinguishedName::new();
        for o in orgs {
            dn.push(DnType::OrganizationName, *o);
        }
        dn.push(DnType::CommonName, cn);
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![eku];
        params.not_before = offset(-300);
        params.not_after = offset(365 * 24 * 3600);
        params.serial_number = Some(random_serial());
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).map_err(err)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A client certificate for user `cn` in groups `orgs`.
    pub fn issue_client(&self, cn: &str, orgs: &[&str]) -> Result<IssuedCert, String> {
        self.issue(cn, orgs, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// Signs a PEM CSR for `lifetime`, with the key usages the CSR's
    /// `spec.usages` name; returns the certificate PEM.
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        usages: &[String],
        lifetime: Duration,
    ) -> Result<String, String> {
        let mut req = CertificateSigningRequestParams::from_pem(csr_pem).map_err(err)?;
        let p = &mut req.params;
        // Backdated as the Go signer does, to tolerate clock skew.
        p.not_before = offset(-300);
        p.not_after = offset(lifetime.as_secs() as i64);
        p.serial_number = Some(random_serial());
        p.is_ca = IsCa::NoCa;
        p.use_authority_key_identifier_extension = true;
        p.key_usages.clear();
        p.extended_key_usages.clear();
        for u in usages {
            match u.as_str() {
                "digital signature" => p.key_usages.push(KeyUsagePurpose::DigitalSignature),
                "key encipherment" => p.key_usages.push(KeyUsagePurpose::KeyEncipherment),
                "client auth" => p
                    .extended_key_usages
                    .push(ExtendedKeyUsagePurpose::ClientAuth),
                "server auth" => p
                    .extended_key_usages
                    .push(ExtendedKeyUsagePurpose::ServerAuth),
                _ => {}
            }
        }
        let cert = req.signed_by(&self.issuer).map_err(err)?;
        Ok(cert.pem())
    }

    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca_der.clone()
    }

    fn roots(&self) -> Result<Arc<RootCertStore>, String> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).map_err(err)?;
        Ok(Arc::new(roots))
    }

    /// TLS for the server: its certificate, client certificates optional
    /// but verified against the CA when given, h2 and http/1.1.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots()?, provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(err)?;
        let certs = pem_certs(&self.serving.cert_pem)?;
        let key = pem_key(&self.serving.key_pem)?;
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(err)?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }

    /// Checks `cert_pem` chains to this CA and is valid now for client
    /// authentication.
    pub fn verify_client_cert(&self, cert_pem: &str) -> Result<(), String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots()?, provider)
            .build()
            .map_err(err)?;
        let certs = pem_certs(cert_pem)?;
        let (leaf, rest) = certs.split_first().ok_or("no certificate in PEM")?;
        verifier
            .verify_client_cert(leaf, rest, UnixTime::now())
            .map(|_| ())
            .map_err(err)
    }
}

pub fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)
}

fn pem_key(pem: &str) -> Result<PrivateKeyDer<'static>, String> {
    use rustls::pki_types::pem::PemObject;
    PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
        .map(PrivateKeyDer::Pkcs8)
        .map_err(err)
}

/// Checks `cert_pem` chains to `ca_pem` and is valid now for client
/// authentication (for tests that hold only the CA, as against a real server).
pub fn verify_client_cert_with_ca(ca_pem: &str, cert_pem: &str) -> Result<(), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in pem_certs(ca_pem)? {
        roots.add(c).map_err(err)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(err)?;
    let certs = pem_certs(cert_pem)?;
    let (leaf, rest) = certs.split_first().ok_or("no certificate in PEM")?;
    verifier
        .verify_client_cert(leaf, rest, UnixTime::now())
        .map(|_| ())
        .map_err(err)
}

/// The subject of the first certificate in a PEM bundle.
pub fn cert_pem_subject(cert_pem: &str) -> Option<Subject> {
    let der = pem_certs(cert_pem).ok()?.into_iter().next()?;
    cert_subject(&der)
}

/// Subject and extensions of a certificate or CSR, as the signers check them.
#[derive(Debug, Clone, Default)]
pub struct Subject {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<String>,
    pub emails: Vec<String>,
    pub uris: Vec<String>,
}

fn subject_of(name: &x509_parser::x509::X509Name<'_>) -> Subject {
    Subject {
        common_name: name
            .iter_common_name()
            .next()
            .and_then(|c| c.as_str().ok())
            .unwrap_or("")
            .to_string(),
        organizations: name
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect(),
        ..Subject::default()
    }
}

fn add_sans(s: &mut Subject, names: &[GeneralName<'_>]) {
    for n in names {
        match n {
            GeneralName::DNSName(d) => s.dns_names.push(d.to_string()),
            GeneralName::RFC822Name(e) => s.emails.push(e.to_string()),
            GeneralName::URI(u) => s.uris.push(u.to_string()),
            GeneralName::IPAddress(b) => {
                let ip = match b.len() {
                    4 => <[u8; 4]>::try_from(*b).ok().map(std::net::IpAddr::from),
                    16 => <[u8; 16]>::try_from(*b).ok().map(std::net::IpAddr::from),
                    _ => None,
                };
                if let Some(ip) = ip {
                    s.ip_addresses.push(ip.to_string());
                }
            }
            _ => {}
        }
    }
}

/// The user and groups a client certificate (DER) names.
pub fn cert_subject(der: &[u8]) -> Option<Subject> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let mut s = subject_of(cert.subject());
    for ext in cert.extensions() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() {
            add_sans(&mut s, &san.general_names);
        }
    }
    Some(s)
}

/// Validity window of a certificate PEM, as Unix seconds (not before, not after).
pub fn cert_validity(cert_pem: &str) -> Option<(i64, i64)> {
    let der = pem_certs(cert_pem).ok()?.into_iter().next()?;
    let (_, cert) = X509Certificate::from_der(&der).ok()?;
    Some((
        cert.validity().not_before.timestamp(),
        cert.validity().not_after.timestamp(),
    ))
}

/// The subject and requested SANs of a PEM certificate request.
pub fn csr_subject(csr_pem: &str) -> Result<Subject, String> {
    use rustls::pki_types::CertificateSigningRequestDer;
    use rustls::pki_types::pem::PemObject;
    use x509_parser::certification_request::X509CertificationRequest;
    let der = CertificateSigningRequestDer::from_pem_slice(csr_pem.as_bytes())
        .map_err(|e| format!("PEM block type must be CERTIFICATE REQUEST: {e}"))?;
    let (_, req) = X509CertificationRequest::from_der(der.as_ref()).map_err(err)?;
    let mut s = subject_of(&req.certification_request_info.subject);
    if let Some(exts) = req.requested_extensions() {
        for e in exts {
            if let ParsedExtension::SubjectAlternativeName(san) = e {
                add_sans(&mut s, &san.general_names);
            }
        }
    }
    Ok(s)
}
