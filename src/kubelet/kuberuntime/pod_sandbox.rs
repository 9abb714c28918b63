//! Sandboxes (kuberuntime_sandbox.go): generate the config with what the
//! kubelet resolves (DNS, cgroup parent, groups), create the pod log
//! directory, run the sandbox with its runtime handler; list sandboxes and
//! read their IPs.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;

use super::log_paths::build_pod_logs_directory;
use super::manager::KubeGenericRuntimeManager;
use super::sandbox::{SandboxParams, generate_pod_sandbox_config};
use crate::cri::CriError;
use crate::cri::api::{
    PodSandbox, PodSandboxConfig, PodSandboxFilter, PodSandboxState, PodSandboxStateValue,
    PodSandboxStatus,
};
use crate::kubelet::container::format_pod;
use crate::kubelet::container::refs::{pod_name, pod_namespace, pod_uid};

use super::labels::KUBERNETES_POD_UID_LABEL;

/// Why a sandbox could not be created, with the message for status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SandboxCreateError {
    pub message: String,
}

/// Why a sandbox config could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SandboxSetupError {
    #[error(transparent)]
    Dns(#[from] super::helper::HelperError),
    #[error(transparent)]
    Config(#[from] super::sandbox::SandboxConfigError),
    #[error("runtimeclass.node.k8s.io {0:?} not found")]
    RuntimeClass(String),
}

impl KubeGenericRuntimeManager {
    /// `<pod logs root>/<ns>_<name>_<uid>`.
    pub(super) fn pod_logs_directory(&self, pod: &Pod) -> PathBuf {
        let default = build_pod_logs_directory(pod_namespace(pod), pod_name(pod), pod_uid(pod));
        match default.file_name() {
            Some(name) => self.config.pod_logs_root.join(name),
            None => default,
        }
    }

    /// The sandbox config for `pod` at `attempt`.
    pub(super) async fn generate_pod_sandbox_config(
        &self,
        pod: &Pod,
        attempt: u32,
    ) -> Result<PodSandboxConfig, SandboxSetupError> {
        let dns = self.helper.get_pod_dns(pod).await?;
        let cgroup_parent = self.helper.get_pod_cgroup_parent(pod);
        let groups = self.helper.get_extra_supplemental_groups_for_pod(pod);
        let mut config = generate_pod_sandbox_config(
            pod,
            &SandboxParams {
                attempt,
                dns_config: dns,
                cluster_domain: &self.config.cluster_domain,
                cgroup_parent: &cgroup_parent,
                extra_supplemental_groups: &groups,
                settings: &self.config.settings,
            },
        )?;
        config.log_directory = self.pod_logs_directory(pod).display().to_string();
        Ok(config)
    }

    fn runtime_handler(&self, pod: &Pod) -> Result<String, SandboxSetupError> {
        let Some(handlers) = &self.config.runtime_class_handlers else {
            return Ok(String::new());
        };
        match pod
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref())
        {
            None | Some("") => Ok(String::new()),
            Some(name) => handlers
                .get(name)
                .cloned()
                .ok_or_else(|| SandboxSetupError::RuntimeClass(name.to_string())),
        }
    }

    /// Creates and starts the sandbox; returns its ID.
    pub(super) async fn create_pod_sandbox(
        &self,
        pod: &Pod,
        attempt: u32,
    ) -> Result<String, SandboxCreateError> {
        let key = format_pod(pod);
        let config = self
            .generate_pod_sandbox_config(pod, attempt)
            .await
            .map_err(|e| {
                tracing::error!(pod = %key, error = %e, "failed to generate sandbox config for pod");
                SandboxCreateError {
                    message: format!("Failed to generate sandbox config for pod {key:?}: {e}"),
                }
            })?;
        let dir = PathBuf::from(&config.log_directory);
        let made = tokio::task::spawn_blocking(move || create_dir_all_mode(&dir, 0o755))
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r);
        if let Err(e) = made {
            tracing::error!(pod = %key, error = %e, "failed to create log directory for pod");
            return Err(SandboxCreateError {
                message: format!("Failed to create log directory for pod {key:?}: {e}"),
            });
        }
        let handler = self.runtime_handler(pod).map_err(|e| SandboxCreateError {
            message: format!("Failed to create sandbox for pod {key:?}: {e}"),
        })?;
        if !handler.is_empty() {
            crate::vlog!(2, pod = %key, runtime_handler = %handler, "running pod with runtime handler");
        }
        self.runtime
            .run_pod_sandbox(&config, &handler)
            .await
            .map_err(|e| {
                tracing::error!(pod = %key, error = %e, "failed to create sandbox for pod");
                SandboxCreateError {
                    message: format!(
                        "Failed to create sandbox for pod {key:?}: {}",
                        e.status_message()
                    ),
                }
            })
    }

    /// Sandboxes managed by the kubelet; only ready ones unless `all`.
    pub(super) async fn get_kubelet_sandboxes(
        &self,
        all: bool,
    ) -> Result<Vec<PodSandbox>, CriError> {
        let filter = (!all).then(|| PodSandboxFilter {
            state: Some(PodSandboxStateValue {
                state: PodSandboxState::SandboxReady as i32,
            }),
            ..Default::default()
        });
        self.runtime
            .list_pod_sandbox(filter)
            .await
            .inspect_err(|e| tracing::error!(error = %e, "failed to list pod sandboxes"))
    }

    /// The pod's sandbox IDs, newest first.
    pub(super) async fn get_sandbox_ids_by_pod_uid(
        &self,
        uid: &str,
    ) -> Result<Vec<String>, CriError> {
        let filter = PodSandboxFilter {
            label_selector: [(KUBERNETES_POD_UID_LABEL.to_string(), uid.to_string())].into(),
            ..Default::default()
        };
        let mut sandboxes = self
            .runtime
            .list_pod_sandbox(Some(filter))
            .await
            .inspect_err(
                |e| tracing::error!(pod_uid = uid, error = %e, "failed to list sandboxes for pod"),
            )?;
        sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        Ok(sandboxes.into_iter().map(|s| s.id).collect())
    }
}

/// The IPs of a sandbox: the primary, then any additional ones; none when
/// any of them does not parse.
pub fn determine_pod_sandbox_ips(
    namespace: &str,
    name: &str,
    sandbox: &PodSandboxStatus,
) -> Vec<String> {
    let Some(network) = sandbox.network.as_ref() else {
        tracing::info!(pod = %format!("{namespace}/{name}"), "pod sandbox status doesn't have network information, cannot report IPs");
        return Vec::new();
    };
    let mut ips = Vec::new();
    if !network.ip.is_empty() {
        if network.ip.parse::<std::net::IpAddr>().is_err() {
            tracing::info!(pod = %format!("{namespace}/{name}"), ip = %network.ip, "pod sandbox reported an unparseable primary IP");
            return Vec::new();
        }
        ips.push(network.ip.clone());
    }
    for extra in &network.additional_ips {
        if extra.ip.parse::<std::net::IpAddr>().is_err() {
            tracing::info!(pod = %format!("{namespace}/{name}"), ip = %extra.ip, "pod sandbox reported an unparseable additional IP");
            return Vec::new();
        }
        ips.push(extra.ip.clone());
    }
    ips
}

/// `mkdir -p` with the given mode for the directories it creates.
pub(super) fn create_dir_all_mode(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
}
