//! Starting one container (startContainer, generateContainerConfig): pull
//! the image, work out the restart count, generate the config with what the
//! kubelet resolves, prepare the log directory and termination-log file,
//! create and start it, link the legacy log, and run the postStart hook.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Secret};

use super::actions::KillReason;
use super::container::{ContainerParams, GeneratedContainerConfig, generate_container_config};
use super::events::{EventType, container_ref, reasons};
use super::log_paths::legacy_log_symlink;
use super::manager::KubeGenericRuntimeManager;
use super::pod_sandbox::create_dir_all_mode;
use crate::cri::CriError;
use crate::cri::api::{ContainerConfig, PodSandboxConfig};
use crate::kubelet::container::{ContainerId, PodStatus, SyncError, format_pod};

/// Reasons of start failures (kuberuntime and kubecontainer errors).
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";
pub const PRE_CREATE_HOOK_ERROR: &str = "PreCreateHookError";
pub const CREATE_CONTAINER_ERROR: &str = "CreateContainerError";
pub const PRE_START_HOOK_ERROR: &str = "PreStartHookError";
pub const POST_START_HOOK_ERROR: &str = "PostStartHookError";
pub const RUN_CONTAINER_ERROR: &str = "RunContainerError";
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";

/// Why a container's config could not be made (the message of
/// CreateContainerConfigError).
#[derive(Debug, thiserror::Error)]
pub enum ContainerSetupError {
    #[error(transparent)]
    Options(#[from] super::helper::HelperError),
    #[error("{}", .0.status_message())]
    ImageUser(#[source] CriError),
    #[error(transparent)]
    Config(#[from] super::container::ContainerConfigError),
    #[error("create container log directory for container {container} failed: {source}")]
    LogDir {
        container: String,
        source: std::io::Error,
    },
    #[error("error creating container directory {}: {source}", .path.display())]
    ContainerDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing hosts file {}: {source}", .path.display())]
    HostsFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Aborted(#[from] tokio::task::JoinError),
}

/// What to start: a regular or init container, or an ephemeral one with
/// the container whose namespaces it targets.
#[derive(Debug, Clone)]
pub struct StartSpec {
    pub container: Container,
    pub target_container_name: Option<String>,
}

impl StartSpec {
    pub fn container(c: &Container) -> Self {
        StartSpec {
            container: c.clone(),
            target_container_name: None,
        }
    }
}

/// The message inside a gRPC error (Go's `status.Message()`), or the error.
pub(super) fn grpc_message(e: &CriError) -> String {
    match e {
        CriError::NotFound { message, .. }
        | CriError::DeadlineExceeded { message, .. }
        | CriError::Unavailable { message, .. }
        | CriError::Unimplemented { message, .. }
        | CriError::Rpc { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The restart count implied by the log files left in a container's log
/// directory (`<n>.log`, possibly rotated): the highest `n` plus one; zero
/// when there are none. Used when the runtime forgot the container.
pub fn restart_count_from_log_dir(dir: &Path) -> std::io::Result<u32> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(_) => return Ok(0),
    };
    let mut count = 0;
    for entry in entries {
        let entry = entry?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name();
        if let Some(n) = log_file_number(&name.to_string_lossy()) {
            count = count.max(n.saturating_add(1));
        }
    }
    Ok(count)
}

/// The first `<digits><any char>log` in a file name, as the Go kubelet's
/// unanchored pattern finds it.
fn log_file_number(name: &str) -> Option<u32> {
    let b = name.as_bytes();
    for i in 0..b.len() {
        if !b[i].is_ascii_digit() {
            continue;
        }
        let mut end = i;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        for e in (i + 1..=end).rev() {
            if e < b.len() && b[e + 1..].starts_with(b"log") {
                return name[i..e].parse().ok();
            }
        }
    }
    None
}

/// Writes the pod's managed hosts file before each container start, as Go
/// does: in place (containers already running bind-mount this inode and
/// see the new content), and every time, so an earlier write cut short
/// (a full disk) is never left for a container to mount.
fn write_hosts(path: &Path, content: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, content)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
}

fn create_termination_log(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::File::create(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
}

impl KubeGenericRuntimeManager {
    pub(super) fn record_container_event(
        &self,
        pod: &Pod,
        container: &Container,
        container_id: &str,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) {
        // Container IDs in messages defeat event de-duplication.
        let message = if container_id.is_empty() {
            message.to_string()
        } else {
            message.replace(container_id, &container.name)
        };
        self.recorder.event(
            &container_ref(pod, &container.name),
            event_type,
            reason,
            &message,
        );
    }

    /// The container's log directory under the configured root.
    pub(super) fn container_logs_directory(&self, pod: &Pod, container: &str) -> PathBuf {
        self.pod_logs_directory(pod).join(container)
    }

    /// Generates the container config and prepares the host for it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn generate_container_config(
        &self,
        container: &Container,
        pod: &Pod,
        restart_count: u32,
        pod_ip: &str,
        pod_ips: &[String],
        image_ref: &str,
        ns_target: Option<&str>,
    ) -> Result<ContainerConfig, ContainerSetupError> {
        let opts = self
            .helper
            .generate_run_container_options(pod, container, pod_ip, pod_ips)
            .await?;
        let image_user = self
            .images
            .image_user(container.image.as_deref().unwrap_or(""))
            .await
            .map_err(ContainerSetupError::ImageUser)?;
        let groups = self.helper.get_extra_supplemental_groups_for_pod(pod);
        let GeneratedContainerConfig {
            mut config,
            termination_log,
            ..
        } = generate_container_config(
            container,
            pod,
            &ContainerParams {
                restart_count,
                image_ref,
                image_user: &image_user,
                opts: &opts,
                ns_target_container_id: ns_target,
                extra_supplemental_groups: &groups,
                settings: &self.config.settings,
            },
        )?;
        let log_dir = self.container_logs_directory(pod, &container.name);
        let container_dir = opts.pod_container_dir.clone();
        let hosts = opts.etc_hosts.clone();
        let name = container.name.clone();
        let prepared = tokio::task::spawn_blocking(move || -> Result<bool, ContainerSetupError> {
            create_dir_all_mode(&log_dir, 0o755).map_err(|source| {
                ContainerSetupError::LogDir {
                    container: name,
                    source,
                }
            })?;
            if let Some(dir) = &container_dir
                && let Err(source) = create_dir_all_mode(dir, 0o750)
            {
                return Err(ContainerSetupError::ContainerDir {
                    path: dir.clone(),
                    source,
                });
            }
            if let Some(h) = &hosts
                && let Err(source) = write_hosts(&h.path, &h.content)
            {
                return Err(ContainerSetupError::HostsFile {
                    path: h.path.clone(),
                    source,
                });
            }
            Ok(match &termination_log {
                Some(p) => match create_termination_log(p) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::error!(path = %p.display(), error = %e, "error on creating termination-log file");
                        false
                    }
                },
                None => true,
            })
        })
        .await??;
        if !prepared {
            // Mount the termination log only when its file exists.
            config.mounts.pop();
        }
        Ok(config)
    }

    /// Starts one container; the error carries the kubelet reason.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn start_container(
        &self,
        sandbox_id: &str,
        sandbox_config: &PodSandboxConfig,
        spec: &StartSpec,
        pod: &Pod,
        status: &PodStatus,
        pull_secrets: &[Secret],
        pod_ip: &str,
        pod_ips: &[String],
    ) -> Result<(), SyncError> {
        let container = &spec.container;
        let warn = |reason: &str, msg: &str, id: &str| {
            self.record_container_event(pod, container, id, EventType::Warning, reason, msg)
        };

        let image_ref = match self
            .image_manager
            .ensure_image_exists(pod, container, pull_secrets, Some(sandbox_config))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                warn(
                    reasons::FAILED_TO_CREATE_CONTAINER,
                    &format!("Error: {}", e.kind.reason()),
                    "",
                );
                return Err(SyncError::new(e.kind.reason(), e.message));
            }
        };

        let restart_count = match status.find_container_status_by_name(&container.name) {
            Some(s) => u32::try_from(s.restart_count)
                .unwrap_or(0)
                .saturating_add(1),
            None => {
                // The runtime may have forgotten the container (a reboot):
                // continue from the log files so logs are not overwritten.
                let dir = self.container_logs_directory(pod, &container.name);
                let counted =
                    tokio::task::spawn_blocking(move || restart_count_from_log_dir(&dir)).await;
                match counted {
                    Ok(Ok(n)) => n,
                    Ok(Err(e)) => {
                        tracing::info!(error = %e, "log directory exists but could not calculate restartCount");
                        0
                    }
                    Err(_) => 0,
                }
            }
        };

        let target = match &spec.target_container_name {
            Some(name) if !name.is_empty() => match status.find_container_status_by_name(name) {
                Some(s) => Some(s.id.id.clone()),
                None => {
                    let msg = format!("unable to find target container {name}");
                    warn(
                        reasons::FAILED_TO_CREATE_CONTAINER,
                        &format!("Error: {msg}"),
                        "",
                    );
                    return Err(SyncError::new(CREATE_CONTAINER_CONFIG_ERROR, msg));
                }
            },
            _ => None,
        };

        let mut config = match self
            .generate_container_config(
                container,
                pod,
                restart_count,
                pod_ip,
                pod_ips,
                &image_ref,
                target.as_deref(),
            )
            .await
        {
            Ok(c) => c,
            Err(e) => {
                let msg = e.to_string();
                warn(
                    reasons::FAILED_TO_CREATE_CONTAINER,
                    &format!("Error: {msg}"),
                    "",
                );
                return Err(SyncError::new(CREATE_CONTAINER_CONFIG_ERROR, msg));
            }
        };

        self.lifecycle
            .pre_create_container(pod, container, &mut config);
        let container_id = match self
            .runtime
            .create_container(sandbox_id, &config, sandbox_config)
            .await
        {
            Ok(id) => id,
            Err(e) => {
                let msg = grpc_message(&e);
                warn(
                    reasons::FAILED_TO_CREATE_CONTAINER,
                    &format!("Error: {msg}"),
                    "",
                );
                return Err(SyncError::new(CREATE_CONTAINER_ERROR, msg));
            }
        };
        self.record_container_event(
            pod,
            container,
            &container_id,
            EventType::Normal,
            reasons::CREATED_CONTAINER,
            &format!("Created container {}", container.name),
        );

        self.lifecycle
            .pre_start_container(pod, container, &container_id);
        if let Err(e) = self.runtime.start_container(&container_id).await {
            let msg = grpc_message(&e);
            warn(
                reasons::FAILED_TO_START_CONTAINER,
                &format!("Error: {msg}"),
                &container_id,
            );
            return Err(SyncError::new(RUN_CONTAINER_ERROR, msg));
        }
        self.record_container_event(
            pod,
            container,
            &container_id,
            EventType::Normal,
            reasons::STARTED_CONTAINER,
            &format!("Started container {}", container.name),
        );

        if let Some(dir) = self.config.legacy_log_symlinks_dir.clone() {
            let meta = sandbox_config.metadata.clone().unwrap_or_default();
            let link_name =
                legacy_log_symlink(&container_id, &container.name, &meta.name, &meta.namespace);
            let link = dir.join(link_name.file_name().unwrap_or_default());
            let log = Path::new(&sandbox_config.log_directory).join(&config.log_path);
            let id = container_id.clone();
            let _ = tokio::task::spawn_blocking(move || {
                // Only link a log that exists: a dangling link is useless.
                if log.symlink_metadata().is_ok()
                    && let Err(e) = std::os::unix::fs::symlink(&log, &link)
                {
                    tracing::error!(path = %link.display(), container_id = %id, log = %log.display(), error = %e, "failed to create legacy symbolic link");
                }
            })
            .await;
        }

        if let Some(post_start) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        {
            let id = self.container_id(&container_id);
            if let Err(e) = self.run_handler(&id, pod, container, post_start).await {
                let msg = e.to_string();
                tracing::error!(pod = %format_pod(pod), container = %container.name, container_id = %id, "failed to execute PostStartHook");
                self.record_container_event(
                    pod,
                    container,
                    &id.id,
                    EventType::Warning,
                    reasons::FAILED_POST_START_HOOK,
                    &msg,
                );
                if let Err(e) = self
                    .kill_container(
                        Some(pod),
                        &id,
                        &container.name,
                        "FailedPostStartHook",
                        KillReason::FailedPostStartHook,
                        None,
                    )
                    .await
                {
                    tracing::error!(pod = %format_pod(pod), container = %container.name, container_id = %id, error = %e, "failed to kill container");
                }
                return Err(SyncError::new(POST_START_HOOK_ERROR, msg));
            }
        }
        Ok(())
    }

    /// A container ID of this runtime, for callers outside the module.
    pub fn make_container_id(&self, id: &str) -> ContainerId {
        self.container_id(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_count_from_logs_table() {
        let cases: &[(&[&str], u32)] = &[
            (&[], 0),
            (&["0.log"], 1),
            (&["0.log", "3.log", "1.log"], 4),
            (&["2.log.20240101-000000", "1.log"], 3),
            (&["notalog", "x.txt"], 0),
        ];
        for (files, want) in cases {
            let dir = tempfile::tempdir().expect("tempdir");
            for f in *files {
                std::fs::write(dir.path().join(f), "").expect("write");
            }
            assert_eq!(
                restart_count_from_log_dir(dir.path()).expect("count"),
                *want,
                "{files:?}"
            );
        }
        assert_eq!(
            restart_count_from_log_dir(Path::new("/nonexistent/dir")).expect("count"),
            0
        );
    }
}
