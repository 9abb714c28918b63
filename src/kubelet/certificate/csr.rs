//! Certificate signing requests as client-go makes them: an ECDSA P-256 key,
//! a CSR with the node's subject, a CertificateSigningRequest object
//! (certificates.k8s.io/v1) with the kubelet client signer and usages, and
//! the wait for it to be approved and issued.

use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use sha2::Digest;
use x509_parser::prelude::FromDer;

use super::CertificateError;

/// The signer of kubelet client certificates.
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The usages the kubelet asks for its client certificate.
pub fn kubelet_client_usages() -> Vec<String> {
    ["digital signature", "key encipherment", "client auth"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// A fresh ECDSA P-256 private key as PEM.
pub fn generate_key_pem() -> Result<String, CertificateError> {
    rcgen::KeyPair::generate()
        .map(|k| k.serialize_pem())
        .map_err(|e| {
            CertificateError::Generate(format!("unable to generate a new private key: {e}"))
        })
}

fn load_key(key_pem: &str) -> Result<rcgen::KeyPair, CertificateError> {
    rcgen::KeyPair::from_pem(key_pem).map_err(|e| {
        CertificateError::Parse(format!("invalid private key for certificate request: {e}"))
    })
}

/// Whether `key_pem` holds a usable private key.
pub fn verify_key_data(key_pem: &[u8]) -> bool {
    std::str::from_utf8(key_pem)
        .ok()
        .is_some_and(|s| load_key(s).is_ok())
}

/// The signer of kubelet serving certificates (`serverTLSBootstrap`).
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// The usages the kubelet asks for its serving certificate.
pub fn kubelet_serving_usages() -> Vec<String> {
    ["digital signature", "key encipherment", "server auth"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The subject of a request, with its subject alternative names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsrSubject {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<std::net::IpAddr>,
}

impl CsrSubject {
    /// `CN=system:node:<name>, O=system:nodes`.
    pub fn node(node_name: &str) -> Self {
        CsrSubject {
            common_name: format!("system:node:{node_name}"),
            organizations: vec!["system:nodes".to_string()],
            ..Default::default()
        }
    }
}

/// A CSR in PEM for `subject`, signed by `key_pem`, with its DNS and IP
/// subject alternative names as the only extension.
pub fn make_csr(key_pem: &str, subject: &CsrSubject) -> Result<String, CertificateError> {
    let key = load_key(key_pem)?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())
        .map_err(|e| CertificateError::Generate(e.to_string()))?;
    // Organization before common name, the order Go's pkix.Name emits.
    params.distinguished_name = rcgen::DistinguishedName::new();
    for o in &subject.organizations {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, o.as_str());
    }
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, subject.common_name.as_str());
    for name in &subject.dns_names {
        let dns = rcgen::string::Ia5String::try_from(name.as_str())
            .map_err(|e| CertificateError::Generate(format!("DNS name {name:?}: {e}")))?;
        params.subject_alt_names.push(rcgen::SanType::DnsName(dns));
    }
    for ip in &subject.ip_addresses {
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(*ip));
    }
    params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(|e| CertificateError::Generate(e.to_string()))
}

/// The bootstrap's deterministic CSR name: `node-csr-` and a SHA-512/256
/// digest over the public key, subject and usages, so a restarted kubelet
/// with the same key finds its earlier request.
pub fn digested_name(
    key_pem: &str,
    subject: &CsrSubject,
    usages: &[String],
) -> Result<String, CertificateError> {
    let key = load_key(key_pem)?;
    let encode = |d: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(d);
    let mut hash = sha2::Sha512_256::new();
    let mut write = |d: &[u8]| {
        hash.update(encode(d).as_bytes());
        hash.update(b"|");
    };
    write(&rcgen::PublicKeyData::subject_public_key_info(&key));
    write(subject.common_name.as_bytes());
    for o in &subject.organizations {
        write(o.as_bytes());
    }
    for u in usages {
        write(u.as_bytes());
    }
    Ok(format!("node-csr-{}", encode(&hash.finalize())))
}

/// One request to make.
#[derive(Debug, Clone)]
pub struct CsrRequest {
    /// Empty: the server generates a `csr-` name.
    pub name: String,
    pub csr_pem: String,
    pub key_pem: String,
    pub signer_name: String,
    pub usages: Vec<String>,
    pub expiration_seconds: Option<i32>,
}

/// Creates the CertificateSigningRequest (reusing an existing one of the
/// same name when it is compatible) and returns its name and UID.
pub async fn request_certificate(
    client: &kube::Client,
    req: &CsrRequest,
) -> Result<(String, String), CertificateError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            name: (!req.name.is_empty()).then(|| req.name.clone()),
            generate_name: req.name.is_empty().then(|| "csr-".to_string()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(req.csr_pem.clone().into_bytes()),
            signer_name: req.signer_name.clone(),
            usages: Some(req.usages.clone()),
            expiration_seconds: req.expiration_seconds,
            ..Default::default()
        },
        status: None,
    };
    match api.create(&PostParams::default(), &csr).await {
        Ok(created) => Ok((
            created.metadata.name.unwrap_or_default(),
            created.metadata.uid.unwrap_or_default(),
        )),
        Err(kube::Error::Api(s)) if s.code == 409 && !req.name.is_empty() => {
            tracing::info!("csr for this node already exists, reusing");
            let existing = api.get(&req.name).await.map_err(|e| {
                CertificateError::Create(format!(
                    "cannot retrieve certificate signing request: {e}"
                ))
            })?;
            ensure_compatible(&existing, req)?;
            tracing::info!("csr for this node is still valid");
            Ok((
                existing.metadata.name.unwrap_or_default(),
                existing.metadata.uid.unwrap_or_default(),
            ))
        }
        Err(kube::Error::Api(s)) => Err(CertificateError::CreateStatus {
            code: s.code,
            message: s.message.clone(),
        }),
        Err(e) => Err(CertificateError::Create(e.to_string())),
    }
}

fn csr_public_key_and_subject(pem: &str) -> Result<(Vec<u8>, String), CertificateError> {
    let der = rustls_pki_types::pem::PemObject::from_pem_slice(pem.as_bytes())
        .map(|d: rustls_pki_types::CertificateSigningRequestDer<'static>| d)
        .map_err(|e| CertificateError::Parse(format!("unable to parse csr: {e}")))?;
    let (_, parsed) =
        x509_parser::certification_request::X509CertificationRequest::from_der(der.as_ref())
            .map_err(|e| CertificateError::Parse(format!("unable to parse csr: {e}")))?;
    let info = &parsed.certification_request_info;
    Ok((info.subject_pki.raw.to_vec(), info.subject.to_string()))
}

/// An existing request can be reused when it asks for the same subject with
/// our key, for the same signer, and any issued certificate is unexpired.
fn ensure_compatible(
    existing: &CertificateSigningRequest,
    req: &CsrRequest,
) -> Result<(), CertificateError> {
    let existing_pem = String::from_utf8_lossy(&existing.spec.request.0).to_string();
    let (old_key, old_subject) = csr_public_key_and_subject(&existing_pem)
        .map_err(|e| CertificateError::Incompatible(format!("unable to parse new csr: {e}")))?;
    let (new_key, new_subject) = csr_public_key_and_subject(&req.csr_pem).map_err(|e| {
        CertificateError::Incompatible(format!("unable to parse original csr: {e}"))
    })?;
    if old_subject != new_subject {
        return Err(CertificateError::Incompatible(format!(
            "csr subjects differ: new: {old_subject}, orig: {new_subject}"
        )));
    }
    let signer = &existing.spec.signer_name;
    if !signer.is_empty() && !req.signer_name.is_empty() && *signer != req.signer_name {
        return Err(CertificateError::Incompatible(format!(
            "csr signerNames differ: new {signer:?}, orig: {:?}",
            req.signer_name
        )));
    }
    if old_key != new_key {
        return Err(CertificateError::Incompatible(
            "error validating signature new CSR against old key".into(),
        ));
    }
    if let Some(cert) = existing
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .filter(|c| !c.0.is_empty())
    {
        let now = std::time::SystemTime::now();
        for c in super::pem::parse_certs(&cert.0)? {
            let info = super::pem::leaf_info(&c)?;
            if now > info.not_after {
                return Err(CertificateError::Incompatible(
                    "one of the certificates for the CSR has expired".into(),
                ));
            }
        }
    }
    Ok(())
}

/// What a CSR's status says.
fn issued(csr: &CertificateSigningRequest) -> Result<Option<Vec<u8>>, CertificateError> {
    let Some(status) = &csr.status else {
        return Ok(None);
    };
    let mut approved = false;
    for c in status.conditions.iter().flatten() {
        let reason = c.reason.clone().unwrap_or_default();
        let message = c.message.clone().unwrap_or_default();
        match c.type_.as_str() {
            "Denied" => return Err(CertificateError::Denied { reason, message }),
            "Failed" => return Err(CertificateError::Failed { reason, message }),
            "Approved" => approved = true,
            _ => {}
        }
    }
    if !approved {
        return Ok(None);
    }
    match status.certificate.as_ref().filter(|c| !c.0.is_empty()) {
        Some(c) => {
            crate::vlog!(
                2,
                csr = csr.metadata.name.as_deref().unwrap_or(""),
                "Certificate signing request is issued"
            );
            Ok(Some(c.0.clone()))
        }
        None => {
            crate::vlog!(
                2,
                csr = csr.metadata.name.as_deref().unwrap_or(""),
                "Certificate signing request is approved, waiting to be issued"
            );
            Ok(None)
        }
    }
}

/// Watches the request until it is approved and a certificate issued (its
/// PEM is returned), denied, failed or deleted, or `timeout` passes.
pub async fn wait_for_certificate(
    client: &kube::Client,
    name: &str,
    uid: &str,
    timeout: Duration,
) -> Result<Vec<u8>, CertificateError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let wait = async {
        let mut stream = std::pin::pin!(watcher::watcher(api, cfg).default_backoff());
        while let Some(ev) = stream.next().await {
            let csr = match ev {
                Ok(Event::Apply(c)) | Ok(Event::InitApply(c)) => c,
                Ok(Event::Delete(_)) => {
                    return Err(CertificateError::Deleted {
                        name: name.to_string(),
                    });
                }
                Ok(Event::Init) | Ok(Event::InitDone) => continue,
                Err(e) => {
                    crate::vlog!(2, error = %e, csr = name, "Error watching the certificate signing request");
                    continue;
                }
            };
            if csr.metadata.uid.as_deref().unwrap_or("") != uid {
                return Err(CertificateError::UidChanged {
                    name: name.to_string(),
                });
            }
            if let Some(pem) = issued(&csr)? {
                return Ok(pem);
            }
        }
        Err(CertificateError::Watch("watch ended".into()))
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(r) => r,
        Err(_) => Err(CertificateError::Timeout),
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    #[test]
    fn csr_carries_the_node_subject_and_no_extensions() {
        let key = generate_key_pem().unwrap();
        let pem = make_csr(&key, &CsrSubject::node("n1")).unwrap();
        let (pk, subject) = csr_public_key_and_subject(&pem).unwrap();
        assert_eq!(subject, "O=system:nodes, CN=system:node:n1");
        assert_eq!(
            pk,
            rcgen::PublicKeyData::subject_public_key_info(&load_key(&key).unwrap())
        );
        let der = rustls_pki_types::pem::PemObject::from_pem_slice(pem.as_bytes())
            .map(|d: rustls_pki_types::CertificateSigningRequestDer<'static>| d)
            .unwrap();
        let (_, parsed) =
            x509_parser::certification_request::X509CertificationRequest::from_der(der.as_ref())
                .unwrap();
        assert!(
            parsed
                .requested_extensions()
                .is_none_or(|mut e| e.next().is_none())
        );
    }

    #[test]
    fn digested_name_is_stable_per_key_subject_and_usages() {
        let k1 = generate_key_pem().unwrap();
        let k2 = generate_key_pem().unwrap();
        let s = CsrSubject::node("n1");
        let u = kubelet_client_usages();
        let a = digested_name(&k1, &s, &u).unwrap();
        assert_eq!(a, digested_name(&k1, &s, &u).unwrap());
        assert!(a.starts_with("node-csr-"));
        // 32-byte digest, unpadded base64url.
        assert_eq!(a.len(), "node-csr-".len() + 43);
        assert_ne!(a, digested_name(&k2, &s, &u).unwrap());
        assert_ne!(a, digested_name(&k1, &CsrSubject::node("n2"), &u).unwrap());
        assert_ne!(a, digested_name(&k1, &s, &u[..2]).unwrap());
    }

    fn cond(t: &str) -> CertificateSigningRequestCondition {
        CertificateSigningRequestCondition {
            type_: t.to_string(),
            status: "True".into(),
            reason: Some("R".into()),
            message: Some("M".into()),
            ..Default::default()
        }
    }

    #[test]
    fn status_table() {
        let cases: Vec<(Vec<&str>, Option<&str>, Result<Option<&str>, &str>)> = vec![
            (vec![], None, Ok(None)),
            (vec!["Approved"], None, Ok(None)),
            (vec!["Approved"], Some("PEM"), Ok(Some("PEM"))),
            (vec![], Some("PEM"), Ok(None)),
            (
                vec!["Denied"],
                None,
                Err("certificate signing request is denied, reason: R, message: M"),
            ),
            (
                vec!["Approved", "Failed"],
                Some("PEM"),
                Err("certificate signing request failed, reason: R, message: M"),
            ),
        ];
        for (conds, cert, want) in cases {
            let csr = CertificateSigningRequest {
                status: Some(CertificateSigningRequestStatus {
                    conditions: Some(conds.iter().map(|c| cond(c)).collect()),
                    certificate: cert.map(|c| ByteString(c.as_bytes().to_vec())),
                }),
                ..Default::default()
            };
            let got = issued(&csr)
                .map(|o| o.map(|b| String::from_utf8(b).unwrap()))
                .map_err(|e| e.to_string());
            let want = want.map(|o| o.map(str::to_string)).map_err(str::to_string);
            assert_eq!(got, want, "{conds:?}");
        }
    }
}
