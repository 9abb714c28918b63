//! The serving certificate of the kubelet's main port with
//! `serverTLSBootstrap` (Go's NewKubeletServerCertificateManager): a
//! `kubernetes.io/kubelet-serving` CSR for `CN=system:node:<node>,
//! O=system:nodes` naming the Node's addresses, kept in the cert dir as
//! `kubelet-server-<timestamp>.pem` with `kubelet-server-current.pem`, and
//! requested anew when the addresses change. Nothing is requested until the
//! Node has an address; until a certificate is issued, TLS handshakes on the
//! main port fail.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeAddress;

use super::csr::{CsrSubject, KUBELET_SERVING_SIGNER, kubelet_serving_usages};
use super::manager::{CertificateManager, Exported, ManagerConfig, Template};
use super::store::FileStore;
use super::{CertificateError, blocking};
use crate::util::clock::Clock;

/// The file prefix of the serving pairs in the cert dir.
pub const SERVER_PAIR_PREFIX: &str = "kubelet-server";

/// The names a serving certificate must carry for `addresses`: host names
/// and DNS names as DNS names (a host name that is an IP as an IP), internal
/// and external IPs as IPs; deduplicated and sorted (IPs by their text).
pub fn names_for(addresses: &[NodeAddress]) -> (Vec<String>, Vec<IpAddr>) {
    let mut dns = std::collections::BTreeSet::new();
    let mut ips = std::collections::BTreeMap::new();
    for a in addresses.iter().filter(|a| !a.address.is_empty()) {
        let ip = a.address.parse::<IpAddr>().ok();
        match (a.type_.as_str(), ip) {
            ("Hostname", Some(ip)) | ("InternalIP" | "ExternalIP", Some(ip)) => {
                ips.insert(ip.to_string(), ip);
            }
            ("Hostname" | "InternalDNS" | "ExternalDNS", _) => {
                dns.insert(a.address.clone());
            }
            _ => {}
        }
    }
    (dns.into_iter().collect(), ips.into_values().collect())
}

/// The serving template for `node_name` at `addresses`; `None` without any
/// name to ask for.
pub fn template_for(node_name: &str, addresses: &[NodeAddress]) -> Option<CsrSubject> {
    let (dns_names, ip_addresses) = names_for(addresses);
    if dns_names.is_empty() && ip_addresses.is_empty() {
        return None;
    }
    Some(CsrSubject {
        dns_names,
        ip_addresses,
        ..CsrSubject::node(node_name)
    })
}

/// Where the serving manager keeps and finds its pairs.
pub struct ServingParams {
    pub node_name: String,
    pub cert_dir: PathBuf,
    /// tlsCertFile / tlsPrivateKeyFile: the pair used until the first
    /// issued one, when set.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// The serving certificate manager over the Node's last observed
/// addresses (not started).
pub async fn serving_manager(
    params: ServingParams,
    addresses: Arc<dyn Fn() -> Vec<NodeAddress> + Send + Sync>,
    clock: Arc<dyn Clock>,
) -> Result<Arc<CertificateManager>, CertificateError> {
    let ServingParams {
        node_name,
        cert_dir,
        cert_file,
        key_file,
    } = params;
    let store = blocking(move || {
        FileStore::open(
            SERVER_PAIR_PREFIX,
            &cert_dir,
            &cert_dir,
            cert_file,
            key_file,
        )
    })
    .await?;
    let template = Template::Dynamic(Arc::new(move || template_for(&node_name, &addresses())));
    CertificateManager::new(ManagerConfig {
        template,
        signer_name: KUBELET_SERVING_SIGNER.to_string(),
        usages: kubelet_serving_usages(),
        store,
        bootstrap_pair: None,
        clock,
        exported: Some(Exported::Server),
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ty: &str, a: &str) -> NodeAddress {
        NodeAddress {
            type_: ty.into(),
            address: a.into(),
        }
    }

    #[test]
    fn names_from_addresses() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        type Case = (
            &'static str,
            Vec<NodeAddress>,
            Vec<&'static str>,
            Vec<IpAddr>,
        );
        let cases: Vec<Case> = vec![
            ("none", vec![], vec![], vec![]),
            (
                "hostname and internal IP",
                vec![addr("InternalIP", "10.0.0.5"), addr("Hostname", "node-a")],
                vec!["node-a"],
                vec![ip("10.0.0.5")],
            ),
            (
                "a hostname that is an IP is an IP",
                vec![addr("Hostname", "192.168.1.2")],
                vec![],
                vec![ip("192.168.1.2")],
            ),
            (
                "DNS names, duplicates once, sorted",
                vec![
                    addr("ExternalDNS", "b.example.com"),
                    addr("InternalDNS", "a.example.com"),
                    addr("Hostname", "b.example.com"),
                    addr("ExternalIP", "203.0.113.9"),
                    addr("InternalIP", "10.0.0.5"),
                    addr("InternalIP", "10.0.0.5"),
                ],
                vec!["a.example.com", "b.example.com"],
                vec![ip("10.0.0.5"), ip("203.0.113.9")],
            ),
            (
                "empty and unparsable ones skipped",
                vec![
                    addr("InternalIP", ""),
                    addr("InternalIP", "not-an-ip"),
                    addr("Other", "x"),
                ],
                vec![],
                vec![],
            ),
        ];
        for (name, addrs, dns, ips) in cases {
            let (d, i) = names_for(&addrs);
            assert_eq!(d, dns, "{name}");
            assert_eq!(i, ips, "{name}");
            assert_eq!(
                template_for("n1", &addrs).is_none(),
                dns.is_empty() && ips.is_empty(),
                "{name}"
            );
        }
        let t = template_for("n1", &[addr("Hostname", "n1")]).unwrap();
        assert_eq!(t.common_name, "system:node:n1");
        assert_eq!(t.organizations, vec!["system:nodes"]);
    }

    #[test]
    fn the_request_carries_the_names() {
        use x509_parser::prelude::FromDer;
        let key = crate::kubelet::certificate::csr::generate_key_pem().unwrap();
        let t = template_for(
            "n1",
            &[addr("Hostname", "n1"), addr("InternalIP", "10.1.2.3")],
        )
        .unwrap();
        let pem = crate::kubelet::certificate::csr::make_csr(&key, &t).unwrap();
        let der = rustls::pki_types::pem::PemObject::from_pem_slice(pem.as_bytes())
            .map(|d: rustls::pki_types::CertificateSigningRequestDer<'static>| d)
            .unwrap();
        let (_, req) =
            x509_parser::certification_request::X509CertificationRequest::from_der(der.as_ref())
                .unwrap();
        let mut names = Vec::new();
        for ext in req.requested_extensions().into_iter().flatten() {
            if let x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) = ext {
                for n in &san.general_names {
                    names.push(format!("{n}"));
                }
            }
        }
        assert_eq!(names, vec!["DNSName(n1)", "IPAddress(0a:01:02:03)"]);
    }
}
