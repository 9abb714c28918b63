//! The node's hostname and name: `--hostname-override` or the machine's
//! hostname, trimmed and lower-cased, and checked against the rules the API
//! server applies to Node names (a DNS-1123 subdomain).

use std::io;

pub use crate::util::validation::DNS1123_SUBDOMAIN_MAX_LENGTH;

/// Errors in finding or validating the node name.
#[derive(Debug, thiserror::Error)]
pub enum NodeNameError {
    #[error("couldn't determine hostname: {0}")]
    Hostname(io::Error),
    #[error("empty hostname is invalid")]
    Empty,
    #[error("invalid node name {name:?}: {}", .reasons.join("; "))]
    Invalid { name: String, reasons: Vec<String> },
}

/// The hostname the kubelet uses: the override when given, else the
/// machine's hostname; surrounding whitespace trimmed, lower-cased.
pub fn get_hostname(hostname_override: &str) -> Result<String, NodeNameError> {
    hostname_with(hostname_override, system_hostname)
}

/// [`get_hostname`] with the system lookup injected (tests).
pub fn hostname_with(
    hostname_override: &str,
    system: impl FnOnce() -> io::Result<String>,
) -> Result<String, NodeNameError> {
    let raw = if hostname_override.is_empty() {
        system().map_err(NodeNameError::Hostname)?
    } else {
        hostname_override.to_string()
    };
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(NodeNameError::Empty);
    }
    Ok(trimmed.to_lowercase())
}

fn system_hostname() -> io::Result<String> {
    let name = nix::unistd::gethostname().map_err(io::Error::from)?;
    name.into_string()
        .map_err(|raw| io::Error::new(io::ErrorKind::InvalidData, format!("{raw:?} is not UTF-8")))
}

/// The problems that make `value` an invalid DNS-1123 subdomain (empty when
/// it is valid), worded as the API server words them.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    crate::util::validation::is_dns1123_subdomain(value)
}

/// Checks a node name.
pub fn validate_node_name(name: &str) -> Result<(), NodeNameError> {
    let reasons = dns1123_subdomain_errors(name);
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(NodeNameError::Invalid {
            name: name.to_string(),
            reasons,
        })
    }
}

/// The node name without a cloud provider: the validated hostname.
pub fn node_name(hostname_override: &str) -> Result<String, NodeNameError> {
    let name = get_hostname(hostname_override)?;
    validate_node_name(&name)?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_table() {
        let cases: &[(&str, &str, Result<&str, &str>)] = &[
            ("", "node-1", Ok("node-1")),
            ("", "  Node-1.Example.COM \n", Ok("node-1.example.com")),
            ("Override", "ignored", Ok("override")),
            (" \t", "ignored", Err("empty hostname is invalid")),
            ("", "   ", Err("empty hostname is invalid")),
        ];
        for (ovr, sys, want) in cases {
            let sys = sys.to_string();
            let got = hostname_with(ovr, move || Ok(sys));
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(&g, w, "override {ovr:?}"),
                (Err(e), Err(w)) => assert_eq!(e.to_string(), *w),
                (g, w) => panic!("override {ovr:?}: got {g:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn system_failure_is_reported() {
        let err = hostname_with("", || Err(io::Error::other("boom"))).unwrap_err();
        assert!(
            err.to_string().starts_with("couldn't determine hostname"),
            "{err}"
        );
    }

    #[test]
    fn validation_table() {
        let long = format!("{}.{}", "a".repeat(200), "b".repeat(60));
        let cases: &[(&str, bool)] = &[
            ("node-1", true),
            ("node-1.example.com", true),
            ("1node", true),
            ("a", true),
            ("", false),
            ("-node", false),
            ("node-", false),
            ("node..a", false),
            (".node", false),
            ("node.", false),
            ("node_1", false),
            ("Node", false),
            ("node 1", false),
            (long.as_str(), false),
        ];
        for (name, ok) in cases {
            let res = validate_node_name(name);
            assert_eq!(res.is_ok(), *ok, "{name:?}: {res:?}");
            if let Err(e) = res {
                assert!(e.to_string().contains("invalid node name"), "{e}");
            }
        }
        let long_errs = dns1123_subdomain_errors(&long);
        assert_eq!(
            long_errs,
            vec!["must be no more than 253 characters".to_string()]
        );
        assert!(dns1123_subdomain_errors("Bad")[0].contains("lowercase RFC 1123 subdomain"));
    }

    #[test]
    fn real_hostname_is_lower_case_and_trimmed() {
        let name = get_hostname("").unwrap();
        assert_eq!(name, name.trim().to_lowercase());
        assert!(!name.is_empty());
    }
}
