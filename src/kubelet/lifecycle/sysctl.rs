//! The sysctls allowlist (pkg/kubelet/sysctl): a pod may set only the safe
//! sysctls and those the node admin allowed (`allowedUnsafeSysctls`), and
//! none of its network or IPC namespace when it shares the host's.

use std::fmt;

use super::error::LifecycleError;
use super::interfaces::{PodAdmitAttributes, PodAdmitHandler, PodAdmitResult};

/// The reason of a pod refused for its sysctls.
pub const FORBIDDEN_REASON: &str = "SysctlForbidden";

const SYSCTL_MAX_LENGTH: usize = 253;
const SYSCTL_PATTERN_REGEX: &str =
    r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]";

/// The sysctls that are namespaced and isolated from other pods (v1.25).
pub fn safe_sysctl_allowlist() -> Vec<String> {
    [
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The kernel namespace a sysctl belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlNamespace {
    Ipc,
    Net,
}

impl fmt::Display for SysctlNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SysctlNamespace::Ipc => "ipc",
            SysctlNamespace::Net => "net",
        })
    }
}

/// The namespace of a sysctl (or sysctl prefix) in dotted form, if it is one
/// the kubelet knows to be namespaced.
pub fn namespaced_by(name: &str) -> Option<SysctlNamespace> {
    if name == "kernel.sem" {
        return Some(SysctlNamespace::Ipc);
    }
    const PREFIXES: [(&str, SysctlNamespace); 4] = [
        ("kernel.shm", SysctlNamespace::Ipc),
        ("kernel.msg", SysctlNamespace::Ipc),
        ("fs.mqueue.", SysctlNamespace::Ipc),
        ("net.", SysctlNamespace::Net),
    ];
    PREFIXES
        .iter()
        .find(|(p, _)| name.starts_with(p))
        .map(|(_, ns)| *ns)
}

/// Sysctl names may use `/` as separator (`net/ipv4/conf/eno2.100/rp_filter`);
/// when the first separator is a slash, dots and slashes swap.
fn to_dotted(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_inner(c: u8) -> bool {
    is_lower_alnum(c) || c == b'-' || c == b'_'
}

/// Whether `name` is a sysctl name or a pattern ending in `*`, with `.` or
/// `/` separators.
fn is_valid_sysctl_pattern(name: &str) -> bool {
    if name.len() > SYSCTL_MAX_LENGTH {
        return false;
    }
    let segments: Vec<&[u8]> = name
        .as_bytes()
        .split(|c| *c == b'.' || *c == b'/')
        .collect();
    let Some((last, init)) = segments.split_last() else {
        return false;
    };
    let segment_ok = |s: &[u8]| {
        !s.is_empty()
            && is_lower_alnum(s[0])
            && is_lower_alnum(s[s.len() - 1])
            && s.iter().all(|c| is_inner(*c))
    };
    let last_ok = match last.split_last() {
        None => false,
        Some((end, body)) => {
            (is_lower_alnum(*end) || *end == b'*')
                && (body.is_empty()
                    || (is_lower_alnum(body[0]) && body.iter().all(|c| is_inner(*c))))
        }
    };
    init.iter().all(|s| segment_ok(s)) && last_ok
}

/// Admits pods whose sysctls are all allowed.
#[derive(Debug, Clone)]
pub struct SysctlAllowlist {
    sysctls: Vec<(String, SysctlNamespace)>,
    prefixes: Vec<(String, SysctlNamespace)>,
}

impl SysctlAllowlist {
    /// An allowlist of exact names and `prefix*` patterns, each of which must
    /// be namespaced.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, LifecycleError> {
        let mut list = SysctlAllowlist {
            sysctls: Vec::new(),
            prefixes: Vec::new(),
        };
        for pattern in patterns {
            let pattern = pattern.as_ref();
            if !is_valid_sysctl_pattern(pattern) {
                return Err(LifecycleError::InvalidSysctlPattern {
                    pattern: pattern.to_string(),
                    max_len: SYSCTL_MAX_LENGTH,
                    regex: SYSCTL_PATTERN_REGEX,
                });
            }
            let dotted = to_dotted(pattern);
            if let Some(prefix) = dotted.strip_suffix('*') {
                let ns = namespaced_by(prefix).ok_or_else(|| {
                    LifecycleError::SysctlPatternNotNamespaced {
                        pattern: dotted.clone(),
                    }
                })?;
                list.prefixes.push((prefix.to_string(), ns));
            } else {
                let ns =
                    namespaced_by(&dotted).ok_or_else(|| LifecycleError::SysctlNotNamespaced {
                        sysctl: dotted.clone(),
                    })?;
                list.sysctls.push((dotted, ns));
            }
        }
        Ok(list)
    }

    /// The safe sysctls plus `allowed_unsafe` (Go's NewMainKubelet wiring).
    pub fn with_unsafe<S: AsRef<str>>(allowed_unsafe: &[S]) -> Result<Self, LifecycleError> {
        let mut all = safe_sysctl_allowlist();
        all.extend(allowed_unsafe.iter().map(|s| s.as_ref().to_string()));
        Self::new(&all)
    }

    fn validate(&self, sysctl: &str, host_net: bool, host_ipc: bool) -> Result<(), String> {
        let sysctl = to_dotted(sysctl);
        let check = |ns: SysctlNamespace| -> Result<(), String> {
            if (ns == SysctlNamespace::Ipc && host_ipc) || (ns == SysctlNamespace::Net && host_net)
            {
                return Err(format!("{sysctl:?} not allowed with host {ns} enabled"));
            }
            Ok(())
        };
        if let Some((_, ns)) = self.sysctls.iter().find(|(s, _)| *s == sysctl) {
            return check(*ns);
        }
        if let Some((_, ns)) = self.prefixes.iter().find(|(p, _)| sysctl.starts_with(p)) {
            return check(*ns);
        }
        Err(format!("{sysctl:?} not allowlisted"))
    }
}

impl PodAdmitHandler for SysctlAllowlist {
    fn admit(&self, attrs: &PodAdmitAttributes<'_>) -> PodAdmitResult {
        let Some(spec) = attrs.pod.spec.as_ref() else {
            return PodAdmitResult::admitted();
        };
        let sysctls = spec
            .security_context
            .as_ref()
            .and_then(|sc| sc.sysctls.as_deref())
            .unwrap_or_default();
        let host_net = spec.host_network.unwrap_or(false);
        let host_ipc = spec.host_ipc.unwrap_or(false);
        for s in sysctls {
            if let Err(e) = self.validate(&s.name, host_net, host_ipc) {
                return PodAdmitResult::rejected(
                    FORBIDDEN_REASON,
                    format!("forbidden sysctl: {e}"),
                );
            }
        }
        PodAdmitResult::admitted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn patterns_are_validated_and_must_be_namespaced() {
        let cases: &[(&str, Option<&str>)] = &[
            ("net.core.somaxconn", None),
            ("kernel.msg*", None),
            ("net/ipv4/conf/eno2.100/rp_filter", None),
            ("net.*", None),
            ("kernel.sem", None),
            ("fs.mqueue.*", None),
            (
                "kernel.panic",
                Some("the sysctl \"kernel.panic\" are not known to be namespaced"),
            ),
            (
                "vm.*",
                Some("the sysctls \"vm.*\" are not known to be namespaced"),
            ),
            ("Net.core", Some("must have at most 253 characters")),
            ("net..core", Some("must have at most")),
            ("net.co*re", Some("must have at most")),
            ("net.core-", Some("must have at most")),
            ("", Some("must have at most")),
        ];
        for (pattern, want) in cases {
            let got = SysctlAllowlist::new(&[*pattern]);
            match want {
                None => assert!(got.is_ok(), "{pattern}: {got:?}"),
                Some(msg) => {
                    let e = got.expect_err(pattern).to_string();
                    assert!(e.contains(msg), "{pattern}: {e}");
                }
            }
        }
        let e = SysctlAllowlist::new(&["Bad"]).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "sysctl \"Bad\" must have at most 253 characters and match regex {SYSCTL_PATTERN_REGEX}"
            )
        );
    }

    fn pod(sysctls: &[&str], host_net: bool, host_ipc: bool) -> Pod {
        let sysctls: Vec<_> = sysctls
            .iter()
            .map(|n| json!({"name": n, "value": "1"}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "hostNetwork": host_net, "hostIPC": host_ipc,
                     "securityContext": {"sysctls": sysctls}}
        }))
        .unwrap()
    }

    #[test]
    fn admission_table() {
        let list = SysctlAllowlist::with_unsafe(&["kernel.msg*", "net.core.somaxconn"]).unwrap();
        let cases: &[(&[&str], bool, bool, Option<&str>)] = &[
            (&[], false, false, None),
            (&["kernel.shm_rmid_forced"], false, false, None),
            (&["net.ipv4.ip_local_port_range"], false, false, None),
            (&["net/ipv4/ip_local_port_range"], false, false, None),
            (&["kernel.msgmax", "net.core.somaxconn"], false, false, None),
            (
                &["kernel.msgmax"],
                false,
                true,
                Some("forbidden sysctl: \"kernel.msgmax\" not allowed with host ipc enabled"),
            ),
            (
                &["net.core.somaxconn"],
                true,
                false,
                Some("forbidden sysctl: \"net.core.somaxconn\" not allowed with host net enabled"),
            ),
            (
                &["net.ipv4.tcp_syncookies", "kernel.sem"],
                false,
                false,
                Some("forbidden sysctl: \"kernel.sem\" not allowlisted"),
            ),
        ];
        for (sysctls, net, ipc, want) in cases {
            let p = pod(sysctls, *net, *ipc);
            let got = list.admit(&PodAdmitAttributes {
                pod: &p,
                other_pods: &[],
            });
            match want {
                None => assert!(got.admit, "{sysctls:?}: {got:?}"),
                Some(msg) => {
                    assert_eq!(
                        got,
                        PodAdmitResult::rejected(FORBIDDEN_REASON, *msg),
                        "{sysctls:?}"
                    )
                }
            }
        }
    }
}
