//! KubeletServer: the flags and the configuration, built once by
//! `app::command` (the config phase) and shared read-only (`Arc<KubeletServer>`) from then on.

use std::path::Path;
use std::sync::Arc;

use super::flags::KubeletFlags;
use super::types::KubeletConfiguration;
use crate::features::FeatureGate;

/// Everything the kubelet was started with.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletServer {
    /// Flag-only settings.
    pub flags: KubeletFlags,
    /// The configuration: file (if any) with the command line's flags over it.
    pub config: KubeletConfiguration,
    /// The feature gates in force: defaults, then the file's `featureGates`,
    /// then `--feature-gates` (flags win per gate).
    pub feature_gate: FeatureGate,
}

impl KubeletServer {
    /// Builds the server. Serving certificate paths are settled here (the
    /// path half of Go's InitializeTLS): with neither `tlsCertFile` nor
    /// `tlsPrivateKeyFile` given and no `serverTLSBootstrap`, the kubelet
    /// serves `kubelet.crt`/`kubelet.key` from `--cert-dir` (created there
    /// self-signed if absent, by the serving stage).
    pub fn new(
        flags: KubeletFlags,
        mut config: KubeletConfiguration,
        feature_gate: FeatureGate,
    ) -> Arc<Self> {
        if !config.server_tls_bootstrap
            && config.tls_cert_file.is_empty()
            && config.tls_private_key_file.is_empty()
        {
            let dir = Path::new(&flags.cert_directory);
            config.tls_cert_file = dir.join("kubelet.crt").to_string_lossy().into_owned();
            config.tls_private_key_file = dir.join("kubelet.key").to_string_lossy().into_owned();
        }
        Arc::new(KubeletServer {
            flags,
            config,
            feature_gate,
        })
    }

    /// No `--kubeconfig`: no API server, pods from static sources only.
    pub fn is_standalone(&self) -> bool {
        self.flags.kubeconfig.is_empty()
    }

    /// Whether workloads default to the `RuntimeDefault` seccomp profile
    /// (the flag or the configuration field).
    pub fn seccomp_default(&self) -> bool {
        self.flags.seccomp_default || self.config.seccomp_default
    }

    /// The document /configz serves: `{"kubeletconfig": {…}}`.
    pub fn configz(&self) -> serde_json::Value {
        serde_json::json!({ "kubeletconfig": self.config.to_configz_json() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_certificate_paths() {
        let cases = [
            (
                "",
                "",
                false,
                "/var/lib/kubelet/pki/kubelet.crt",
                "/var/lib/kubelet/pki/kubelet.key",
            ),
            ("/c.crt", "/c.key", false, "/c.crt", "/c.key"),
            ("", "", true, "", ""),
        ];
        for (cert, key, bootstrap, want_cert, want_key) in cases {
            let mut config = KubeletConfiguration::v1beta1_defaults();
            config.tls_cert_file = cert.into();
            config.tls_private_key_file = key.into();
            config.server_tls_bootstrap = bootstrap;
            let s = KubeletServer::new(KubeletFlags::default(), config, FeatureGate::new());
            assert_eq!(s.config.tls_cert_file, want_cert);
            assert_eq!(s.config.tls_private_key_file, want_key);
        }
    }

    #[test]
    fn derived_settings() {
        let mut flags = KubeletFlags::default();
        let s = KubeletServer::new(
            flags.clone(),
            KubeletConfiguration::v1beta1_defaults(),
            FeatureGate::new(),
        );
        assert!(s.is_standalone());
        assert!(!s.seccomp_default());
        flags.kubeconfig = "/etc/kubernetes/kubelet.conf".into();
        flags.seccomp_default = true;
        let s = KubeletServer::new(
            flags,
            KubeletConfiguration::v1beta1_defaults(),
            FeatureGate::new(),
        );
        assert!(!s.is_standalone());
        assert!(s.seccomp_default());
        assert!(s.configz()["kubeletconfig"]["port"] == 10250);
    }
}
