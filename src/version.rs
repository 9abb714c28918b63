//! The version this binary reports: a Kubernetes release of the target line,
//! with kubelet-rs's own identity as semver build metadata so that kubeadm and
//! the API server's skew checks parse it like a Go kubelet's.

/// The Kubernetes release whose kubelet behaviour this build follows.
pub const KUBERNETES_VERSION: &str = "v1.25.16";

/// kubelet-rs's own crate version.
pub const BUILD_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The full git-style version, e.g. `v1.25.16+kubelet-rs.0.1.0`.
pub fn git_version() -> String {
    format!(
        "{}+kubelet-rs.{}",
        KUBERNETES_VERSION,
        BUILD_VERSION.replace(['-', '+'], ".")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_version_is_semver_with_build_metadata() {
        let v = git_version();
        assert!(v.starts_with("v1.25."));
        let (core, meta) = v.split_once('+').expect("build metadata present");
        assert_eq!(core.trim_start_matches('v').split('.').count(), 3);
        assert!(
            meta.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        );
    }
}
