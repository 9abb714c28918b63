//! Knobs of the API server double.

use std::time::Duration;

/// How a double is started. `Default` gives the behaviour of a fresh
/// kube-apiserver v1.25 with a controller manager that signs approved CSRs.
#[derive(Debug, Clone)]
pub struct DoubleOptions {
    /// Interval of BOOKMARK events on watches that asked for them. A real
    /// server sends one about every minute; tests want them sooner.
    pub bookmark_interval: Duration,
    /// Approve kubelet client CSRs as soon as they are created (what the
    /// csrapproving controller does for bootstrap-token users).
    pub auto_approve_csrs: bool,
    /// Sign approved CSRs of the built-in kubelet signers (the csrsigning
    /// controller). Off: CSRs stay approved without a certificate.
    pub sign_csrs: bool,
    /// Longest lifetime of a certificate issued for a CSR
    /// (`--cluster-signing-duration`, one year by default).
    pub max_cert_lifetime: Duration,
    /// The ServiceAccount admission plugin: default `serviceAccountName` and
    /// inject the `kube-api-access-*` projected volume into pods.
    pub service_account_admission: bool,
    /// Audiences given to tokens whose TokenRequest names none
    /// (`--api-audiences`).
    pub api_audiences: Vec<String>,
    /// Issuer of service account tokens (`--service-account-issuer`).
    pub token_issuer: String,
    /// Git version reported by /version.
    pub git_version: String,
}

impl Default for DoubleOptions {
    fn default() -> Self {
        DoubleOptions {
            bookmark_interval: Duration::from_secs(1),
            auto_approve_csrs: false,
            sign_csrs: true,
            max_cert_lifetime: Duration::from_secs(365 * 24 * 3600),
            service_account_admission: true,
            api_audiences: vec!["https://kubernetes.default.svc.cluster.local".to_string()],
            token_issuer: "https://kubernetes.default.svc.cluster.local".to_string(),
            git_version: "v1.25.16".to_string(),
        }
    }
}
