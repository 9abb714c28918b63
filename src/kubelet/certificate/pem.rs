//! PEM and X.509 helpers shared by the certificate store, the bootstrap and
//! the rotating client identity: a cert/key pair as the TLS stack uses it,
//! with the leaf's validity and subject at hand.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::CertificateError;

/// A certificate chain with its private key, ready for TLS.
#[derive(Clone)]
pub struct KeyPair {
    /// The chain, leaf first.
    pub certs: Vec<CertificateDer<'static>>,
    /// The private key as PEM (what the store writes back).
    pub key_pem: Vec<u8>,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<std::net::IpAddr>,
    pub certified: Arc<CertifiedKey>,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair")
            .field("common_name", &self.common_name)
            .field("organizations", &self.organizations)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl KeyPair {
    /// Parses certificate PEM (one or more) and key PEM.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, CertificateError> {
        let certs = parse_certs(cert_pem)?;
        let leaf = certs
            .first()
            .ok_or_else(|| CertificateError::Parse("no certificate data found".into()))?;
        let info = leaf_info(leaf)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| CertificateError::Parse(format!("private key: {e}")))?;
        let provider = rustls::crypto::ring::default_provider();
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| CertificateError::Parse(format!("private key: {e}")))?;
        let certified = Arc::new(CertifiedKey::new(certs.clone(), signing));
        Ok(KeyPair {
            certs,
            key_pem: key_pem.to_vec(),
            not_before: info.not_before,
            not_after: info.not_after,
            common_name: info.common_name,
            organizations: info.organizations,
            dns_names: info.dns_names,
            ip_addresses: info.ip_addresses,
            certified,
        })
    }

    /// A combined PEM file (certificates, then the key), as the store writes.
    pub fn from_combined_pem(pem: &[u8]) -> Result<Self, CertificateError> {
        Self::from_pem(pem, pem)
    }

    /// The chain as PEM.
    pub fn certs_pem(&self) -> String {
        self.certs
            .iter()
            .map(|c| encode_pem("CERTIFICATE", c))
            .collect()
    }

    /// Whether the leaf has expired at `now`.
    pub fn expired(&self, now: SystemTime) -> bool {
        now > self.not_after
    }
}

/// What the kubelet needs from a leaf certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafInfo {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<std::net::IpAddr>,
    /// The DER of the SubjectPublicKeyInfo.
    pub public_key_der: Vec<u8>,
    /// The X.509 version (1 to 3).
    pub version: u32,
}

fn to_system_time(t: x509_parser::time::ASN1Time) -> SystemTime {
    let secs = t.timestamp();
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// Validity, subject and key of a DER certificate.
pub fn leaf_info(der: &CertificateDer<'_>) -> Result<LeafInfo, CertificateError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| CertificateError::Parse(format!("unable to parse certificate data: {e}")))?;
    let subject = cert.subject();
    let common_name = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let organizations = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(str::to_string))
        .collect();
    let (mut dns_names, mut ip_addresses) = (Vec::new(), Vec::new());
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::DNSName(d) => dns_names.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(b) => {
                    if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                        ip_addresses.push(std::net::IpAddr::from(v4));
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                        ip_addresses.push(std::net::IpAddr::from(v6));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(LeafInfo {
        not_before: to_system_time(cert.validity().not_before),
        not_after: to_system_time(cert.validity().not_after),
        common_name,
        organizations,
        dns_names,
        ip_addresses,
        public_key_der: cert.public_key().raw.to_vec(),
        version: cert.version().0 + 1,
    })
}

/// Every CERTIFICATE block of `pem`; an error when there is none.
pub fn parse_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, CertificateError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| CertificateError::Parse(format!("invalid certificate data: {e}")))?;
    if certs.is_empty() {
        return Err(CertificateError::Parse(
            "data does not contain any valid RSA or ECDSA certificates".into(),
        ));
    }
    Ok(certs)
}

/// One PEM block.
pub fn encode_pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
pub(crate) mod testing {
    use rcgen::{CertificateParams, DnType, KeyPair as RcKey};

    /// A self-signed client certificate valid from `not_before` for `secs`.
    pub fn self_signed(cn: &str, org: &str, not_before_unix: i64, secs: i64) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params
            .distinguished_name
            .push(DnType::OrganizationName, org);
        params.not_before = time_of(not_before_unix);
        params.not_after = time_of(not_before_unix + secs);
        let key = RcKey::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn time_of(unix: i64) -> time::OffsetDateTime {
        time::OffsetDateTime::from_unix_timestamp(unix).unwrap()
    }
}
