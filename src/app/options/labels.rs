//! Label syntax (qualified names, label values) and the rule of which
//! `kubernetes.io`/`k8s.io` labels a kubelet may put on its own Node.

/// Labels in the reserved namespaces a kubelet may set itself.
pub const KUBELET_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// Reserved label namespaces a kubelet may use freely (with subdomains).
pub const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

use crate::util::validation;

/// A name or value that breaks the label syntax, with every rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.join("; "))]
pub struct LabelError {
    pub problems: Vec<String>,
}

fn joined(problems: Vec<String>) -> Result<(), LabelError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(LabelError { problems })
    }
}

/// A DNS-1123 subdomain: lower-case labels joined by dots.
pub fn is_dns1123_subdomain(s: &str) -> Result<(), LabelError> {
    joined(validation::is_dns1123_subdomain(s))
}

/// A label key or other qualified name: `[prefix/]name`.
pub fn is_qualified_name(s: &str) -> Result<(), LabelError> {
    joined(validation::is_qualified_name(s))
}

/// A label value: empty, or up to 63 name characters.
pub fn is_valid_label_value(s: &str) -> Result<(), LabelError> {
    joined(validation::is_valid_label_value(s))
}

fn namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

fn in_namespace(ns: &str, domain: &str) -> bool {
    ns == domain || ns.ends_with(&format!(".{domain}"))
}

/// Whether the key is in the `kubernetes.io` or `k8s.io` namespaces.
pub fn is_kubernetes_label(key: &str) -> bool {
    let ns = namespace(key);
    in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io")
}

/// Whether a kubelet may set this label on its own Node.
pub fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|allowed| in_namespace(namespace(key), allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in [
            "a",
            "A-b_c.d",
            "example.com/role",
            "node-role.kubernetes.io/worker",
            "x/1",
        ] {
            assert!(is_qualified_name(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "-a",
            "a-",
            "a/b/c",
            "/a",
            "Example.com/a",
            "a b",
            long.as_str(),
        ] {
            assert!(is_qualified_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn label_values() {
        for ok in ["", "v", "v1.2_3-x"] {
            assert!(is_valid_label_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-v", "v-", "a b", "a/b"] {
            assert!(is_valid_label_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kubelet_labels() {
        let cases = [
            ("kubernetes.io/hostname", true, true),
            ("node.kubernetes.io/foo", true, true),
            ("sub.node.kubernetes.io/foo", true, true),
            ("kubelet.kubernetes.io/x", true, true),
            ("node-role.kubernetes.io/worker", true, false),
            ("example.k8s.io/x", true, false),
            ("example.com/x", false, false),
            ("plain", false, false),
        ];
        for (key, kube, kubelet) in cases {
            assert_eq!(is_kubernetes_label(key), kube, "{key}");
            assert_eq!(is_kubelet_label(key), kubelet, "{key}");
        }
    }
}
