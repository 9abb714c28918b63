//! The pod's hostname and domain: `spec.hostname` or the pod name, capped at
//! 63 characters; `<subdomain>.<ns>.svc.<clusterDomain>` when a subdomain is
//! set; and the FQDN as the kernel hostname with setHostnameAsFQDN.

use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::container::validation::is_dns1123_label;

/// Longest hostname.
pub const HOSTNAME_MAX_LEN: usize = 63;
/// Longest FQDN the kernel nodename field holds.
pub const FQDN_MAX_LEN: usize = 64;

/// Errors forming the hostname.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostnameError {
    #[error("pod Hostname {hostname:?} is not a valid DNS label: {reason}")]
    InvalidHostname { hostname: String, reason: String },
    #[error("pod Subdomain {subdomain:?} is not a valid DNS label: {reason}")]
    InvalidSubdomain { subdomain: String, reason: String },
    #[error("hostname for pod {pod:?} was invalid: {hostname:?}")]
    Truncated { pod: String, hostname: String },
    #[error(
        "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({FQDN_MAX_LEN} characters is the max, {len} characters requested)"
    )]
    FqdnTooLong { fqdn: String, len: usize },
}

fn truncate_hostname(pod_name: &str, hostname: &str) -> Result<String, HostnameError> {
    if hostname.len() <= HOSTNAME_MAX_LEN {
        return Ok(hostname.to_string());
    }
    let cut = hostname.get(..HOSTNAME_MAX_LEN).unwrap_or(hostname);
    tracing::error!(
        pod = pod_name,
        max = HOSTNAME_MAX_LEN,
        truncated = cut,
        "hostname for pod was too long, truncated it"
    );
    let trimmed = cut.trim_end_matches(['-', '.']);
    if trimmed.is_empty() {
        return Err(HostnameError::Truncated {
            pod: pod_name.to_string(),
            hostname: hostname.to_string(),
        });
    }
    Ok(trimmed.to_string())
}

/// (hostname, domain) for `pod`; the domain is empty without a subdomain.
pub fn generate_pod_hostname_and_domain(
    pod: &Pod,
    cluster_domain: &str,
) -> Result<(String, String), HostnameError> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let spec = pod.spec.as_ref();
    let mut hostname = name.to_string();
    if let Some(h) = spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
    {
        let errs = is_dns1123_label(h);
        if !errs.is_empty() {
            return Err(HostnameError::InvalidHostname {
                hostname: h.to_string(),
                reason: errs.join(";"),
            });
        }
        hostname = h.to_string();
    }
    let hostname = truncate_hostname(name, &hostname)?;
    let mut domain = String::new();
    if let Some(sub) = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
    {
        let errs = is_dns1123_label(sub);
        if !errs.is_empty() {
            return Err(HostnameError::InvalidSubdomain {
                subdomain: sub.to_string(),
                reason: errs.join(";"),
            });
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        domain = format!("{sub}.{ns}.svc.{cluster_domain}");
    }
    Ok((hostname, domain))
}

/// The name the container's kernel gets: the FQDN with setHostnameAsFQDN
/// and a domain, else the hostname.
pub fn nodename_for_kernel(
    hostname: &str,
    domain: &str,
    set_hostname_as_fqdn: Option<bool>,
) -> Result<String, HostnameError> {
    if !domain.is_empty() && set_hostname_as_fqdn == Some(true) {
        let fqdn = format!("{hostname}.{domain}");
        if fqdn.len() > FQDN_MAX_LEN {
            let len = fqdn.len();
            return Err(HostnameError::FqdnTooLong { fqdn, len });
        }
        return Ok(fqdn);
    }
    Ok(hostname.to_string())
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    fn pod(name: &str, hostname: Option<&str>, subdomain: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [], "hostname": hostname, "subdomain": subdomain}
        }))
        .expect("pod")
    }

    #[test]
    fn hostname_table() {
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(5));
        let cases: Vec<(&str, Pod, Result<(&str, &str), ()>)> = vec![
            ("pod name", pod("web", None, None), Ok(("web", ""))),
            (
                "spec.hostname",
                pod("web", Some("host1"), None),
                Ok(("host1", "")),
            ),
            (
                "subdomain",
                pod("web", Some("h"), Some("sub")),
                Ok(("h", "sub.ns.svc.cluster.local")),
            ),
            (
                "invalid hostname",
                pod("web", Some("Bad_Host"), None),
                Err(()),
            ),
            ("invalid subdomain", pod("web", None, Some("a.b")), Err(())),
            (
                "long name truncated and trailing dash trimmed",
                pod(&long, None, None),
                Ok(("a".repeat(62).leak(), "")),
            ),
        ];
        for (name, p, want) in cases {
            let got = generate_pod_hostname_and_domain(&p, "cluster.local").map_err(|_| ());
            let want = want.map(|(h, d)| (h.to_string(), d.to_string()));
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn nodename_table() {
        let cases: &[(&str, &str, Option<bool>, Result<&str, ()>)] = &[
            ("h", "", Some(true), Ok("h")),
            ("h", "sub.ns.svc.cluster.local", None, Ok("h")),
            ("h", "sub.ns.svc.cluster.local", Some(false), Ok("h")),
            (
                "h",
                "sub.ns.svc.cluster.local",
                Some(true),
                Ok("h.sub.ns.svc.cluster.local"),
            ),
            (
                "a-very-long-hostname-for-testing",
                "subdomain.namespace.svc.cluster.local",
                Some(true),
                Err(()),
            ),
        ];
        for (h, d, fqdn, want) in cases {
            let got = nodename_for_kernel(h, d, *fqdn).map_err(|_| ());
            assert_eq!(got, want.map(str::to_string), "{h} {d} {fqdn:?}");
        }
    }
}
