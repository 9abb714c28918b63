//! What the runtime knows about pods (GetPods, GetPodStatus): sandboxes and
//! containers grouped by the pod labels, statuses newest first with hashes
//! and restart counts from the annotations, exit details and termination
//! messages for exited containers. Works from CRI state alone, so a
//! restarted kubelet finds the pods it (or a Go kubelet) started.
//! Also removal of one container with its logs.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::labels::{
    KUBERNETES_POD_UID_LABEL, get_container_info_from_annotations, get_container_info_from_labels,
};
use super::log_paths::legacy_log_symlink;
use super::manager::{KubeGenericRuntimeManager, call_error};
use super::pod_sandbox::determine_pod_sandbox_ips;
use super::term_message::{termination_message_from_file, termination_message_from_logs};
use crate::cri::CriError;
use crate::cri::api::{
    Container as CriContainer, ContainerFilter, ContainerState as CriState, ContainerStateValue,
    ContainerStatus as CriContainerStatus, PodSandbox, PodSandboxState,
};
use crate::kubelet::container::helpers::sandbox_to_container_state;
use crate::kubelet::container::{
    ContainerState, ContainerStatus, PodStatus, RunningContainer, RunningPod, RuntimeError,
};

/// The runtime-neutral state of a CRI container state.
pub fn to_container_state(state: i32) -> ContainerState {
    match CriState::try_from(state) {
        Ok(CriState::ContainerCreated) => ContainerState::Created,
        Ok(CriState::ContainerRunning) => ContainerState::Running,
        Ok(CriState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

pub fn from_unix_nanos(ns: i64) -> SystemTime {
    if ns >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

/// A CRI container status in the runtime-neutral form (without the
/// termination message).
pub fn to_kube_container_status(
    status: &CriContainerStatus,
    runtime_name: &str,
) -> ContainerStatus {
    let annotated = get_container_info_from_annotations(&status.annotations);
    let labeled = get_container_info_from_labels(&status.labels);
    let state = to_container_state(status.state);
    let exited =
        state == ContainerState::Exited && status.state == CriState::ContainerExited as i32;
    ContainerStatus {
        id: crate::kubelet::container::ContainerId::new(runtime_name, status.id.clone()),
        name: labeled.container_name,
        state,
        created_at: Some(from_unix_nanos(status.created_at)),
        started_at: (status.state != CriState::ContainerCreated as i32)
            .then(|| from_unix_nanos(status.started_at)),
        finished_at: exited.then(|| from_unix_nanos(status.finished_at)),
        exit_code: if exited { status.exit_code } else { 0 },
        image: status
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_id: status.image_ref.clone(),
        hash: annotated.hash,
        restart_count: i32::try_from(annotated.restart_count).unwrap_or(i32::MAX),
        reason: if exited {
            status.reason.clone()
        } else {
            String::new()
        },
        message: if exited {
            status.message.clone()
        } else {
            String::new()
        },
    }
}

/// The status with its termination message filled in (exited containers).
/// Blocking: reads files.
pub fn convert_container_status(
    status: &CriContainerStatus,
    runtime_name: &str,
) -> ContainerStatus {
    let mut c = to_kube_container_status(status, runtime_name);
    if status.state == CriState::ContainerExited as i32 {
        let annotated = get_container_info_from_annotations(&status.annotations);
        let fallback = annotated.termination_message_policy == "FallbackToLogsOnError"
            && c.exit_code != 0
            && c.reason != "ContainerCannotRun";
        let (mut msg, check_logs) =
            termination_message_from_file(status, &annotated.termination_message_path, fallback);
        if check_logs {
            msg = termination_message_from_logs(&status.log_path);
        }
        if !msg.is_empty() {
            if !c.message.is_empty() {
                c.message.push_str(": ");
            }
            c.message.push_str(&msg);
        }
    }
    c
}

impl KubeGenericRuntimeManager {
    /// Every container the runtime has; only running ones unless `all`.
    pub(super) async fn get_kubelet_containers(
        &self,
        all: bool,
    ) -> Result<Vec<CriContainer>, CriError> {
        let filter = ContainerFilter {
            state: (!all).then_some(ContainerStateValue {
                state: CriState::ContainerRunning as i32,
            }),
            ..Default::default()
        };
        self.runtime
            .list_containers(Some(filter))
            .await
            .inspect_err(|e| tracing::error!(error = %e, "ListContainers failed"))
    }

    fn sandbox_to_running(&self, s: &PodSandbox) -> RunningContainer {
        RunningContainer {
            id: self.container_id(&s.id),
            name: String::new(),
            image: String::new(),
            image_id: String::new(),
            hash: 0,
            state: sandbox_to_container_state(s.state),
        }
    }

    fn container_to_running(&self, c: &CriContainer) -> Option<RunningContainer> {
        if c.id.is_empty() || c.image.is_none() {
            return None;
        }
        let annotated = get_container_info_from_annotations(&c.annotations);
        Some(RunningContainer {
            id: self.container_id(&c.id),
            name: c
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default(),
            image: c
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            image_id: c.image_ref.clone(),
            hash: annotated.hash,
            state: to_container_state(c.state),
        })
    }

    /// Pods with their sandboxes and containers, newest sandbox first.
    pub(super) async fn get_pods_impl(&self, all: bool) -> Result<Vec<RunningPod>, RuntimeError> {
        let sandboxes = self
            .get_kubelet_sandboxes(all)
            .await
            .map_err(|e| call_error("ListPodSandbox", e))?;
        let mut pods: HashMap<String, (RunningPod, i64)> = HashMap::new();
        for s in &sandboxes {
            let Some(meta) = s.metadata.as_ref() else {
                crate::vlog!(4, sandbox = %s.id, "sandbox does not have metadata");
                continue;
            };
            let entry = pods.entry(meta.uid.clone()).or_insert_with(|| {
                (
                    RunningPod {
                        id: meta.uid.clone(),
                        name: meta.name.clone(),
                        namespace: meta.namespace.clone(),
                        ..Default::default()
                    },
                    0,
                )
            });
            if s.id.is_empty() {
                continue;
            }
            entry.0.sandboxes.push(self.sandbox_to_running(s));
            entry.1 = s.created_at;
        }
        let containers = self
            .get_kubelet_containers(all)
            .await
            .map_err(|e| call_error("ListContainers", e))?;
        for c in &containers {
            if c.metadata.is_none() {
                crate::vlog!(4, container = %c.id, "container does not have metadata");
                continue;
            }
            let labeled = get_container_info_from_labels(&c.labels);
            let entry = pods.entry(labeled.pod_uid.clone()).or_insert_with(|| {
                (
                    RunningPod {
                        id: labeled.pod_uid.clone(),
                        name: labeled.pod_name.clone(),
                        namespace: labeled.pod_namespace.clone(),
                        ..Default::default()
                    },
                    0,
                )
            });
            match self.container_to_running(c) {
                Some(rc) => entry.0.containers.push(rc),
                None => crate::vlog!(4, container = %c.id, "convert container of pod failed"),
            }
        }
        let mut result: Vec<(RunningPod, i64)> = pods.into_values().collect();
        // Pods of the same name may coexist while one terminates; the newest
        // first keeps name lookups stable.
        result.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.id.cmp(&b.0.id)));
        crate::vlog!(4, all, "retrieved pods from runtime");
        Ok(result.into_iter().map(|(p, _)| p).collect())
    }

    /// The statuses of every container of the pod, newest first.
    pub(super) async fn get_pod_container_statuses(
        &self,
        uid: &str,
    ) -> Result<Vec<ContainerStatus>, CriError> {
        let filter = ContainerFilter {
            label_selector: [(KUBERNETES_POD_UID_LABEL.to_string(), uid.to_string())].into(),
            ..Default::default()
        };
        let containers = self
            .runtime
            .list_containers(Some(filter))
            .await
            .inspect_err(|e| tracing::error!(error = %e, "ListContainers error"))?;
        let mut raw = Vec::with_capacity(containers.len());
        for c in &containers {
            match self.runtime.container_status(&c.id, false).await {
                Ok(resp) => match resp.status {
                    Some(s) => raw.push(s),
                    None => {
                        return Err(CriError::InvalidResponse {
                            endpoint: String::new(),
                            rpc: "ContainerStatus",
                            reason: "container status is nil".into(),
                        });
                    }
                },
                // Removed between the list and the status: as if never listed.
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    crate::vlog!(4, container_id = %c.id, error = %e, "ContainerStatus return error");
                    return Err(e);
                }
            }
        }
        let runtime_name = self.runtime_name.clone();
        let mut statuses = tokio::task::spawn_blocking(move || {
            raw.iter()
                .map(|s| convert_container_status(s, &runtime_name))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| CriError::InvalidResponse {
            endpoint: String::new(),
            rpc: "ContainerStatus",
            reason: e.to_string(),
        })?;
        statuses.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        Ok(statuses)
    }

    /// The pod's status: sandboxes newest first, IPs from the newest ready
    /// sandbox, container statuses newest first.
    pub(super) async fn get_pod_status_impl(
        &self,
        uid: &str,
        name: &str,
        namespace: &str,
    ) -> Result<PodStatus, RuntimeError> {
        let ids = self
            .get_sandbox_ids_by_pod_uid(uid)
            .await
            .map_err(|e| call_error("ListPodSandbox", e))?;
        crate::vlog!(4, pod = %format!("{namespace}/{name}"), sandbox_ids = ?ids, "getSandboxIDByPodUID got sandbox IDs for pod");
        let mut sandbox_statuses = Vec::new();
        let mut ips = Vec::new();
        for (idx, id) in ids.iter().enumerate() {
            let resp = match self.runtime.pod_sandbox_status(id, false).await {
                Ok(r) => r,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    tracing::error!(pod_sandbox_id = %id, pod = %format!("{namespace}/{name}"), error = %e, "PodSandboxStatus of sandbox for pod");
                    return Err(call_error("PodSandboxStatus", e));
                }
            };
            let Some(status) = resp.status else { continue };
            if idx == 0 && status.state == PodSandboxState::SandboxReady as i32 {
                ips = determine_pod_sandbox_ips(namespace, name, &status);
            }
            sandbox_statuses.push(status);
        }
        let container_statuses = self.get_pod_container_statuses(uid).await.map_err(|e| {
            tracing::error!(pod = %format!("{namespace}/{name}"), error = %e, "getPodContainerStatuses for pod failed");
            call_error("ContainerStatus", e)
        })?;
        Ok(PodStatus {
            id: uid.to_string(),
            name: name.to_string(),
            namespace: namespace.to_string(),
            ips,
            container_statuses,
            sandbox_statuses,
        })
    }

    /// Removes a container after its logs (so a failed log removal leaves
    /// the container for a retry).
    pub(super) async fn remove_container(&self, id: &str) -> Result<(), CriError> {
        crate::vlog!(4, container_id = id, "removing container");
        self.lifecycle.post_stop_container(id);
        self.remove_container_log(id).await?;
        self.runtime.remove_container(id).await
    }

    /// Removes the container's log files and its legacy symlink.
    async fn remove_container_log(&self, id: &str) -> Result<(), CriError> {
        let resp = self.runtime.container_status(id, false).await?;
        let status = resp.status.ok_or_else(|| CriError::InvalidResponse {
            endpoint: String::new(),
            rpc: "ContainerStatus",
            reason: "container status is nil".into(),
        })?;
        let labeled = get_container_info_from_labels(&status.labels);
        let log_path = status.log_path.clone();
        let link = self.config.legacy_log_symlinks_dir.clone().map(|dir| {
            let l = legacy_log_symlink(
                id,
                &labeled.container_name,
                &labeled.pod_name,
                &labeled.pod_namespace,
            );
            dir.join(l.file_name().unwrap_or_default())
        });
        let result = tokio::task::spawn_blocking(move || -> Result<(), LogRemovalError> {
            remove_log_files(&log_path).map_err(|source| LogRemovalError::Log {
                path: log_path.clone(),
                source,
            })?;
            if let Some(link) = link {
                match std::fs::remove_file(&link) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => return Err(LogRemovalError::LegacyLink { link, source }),
                }
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| Err(LogRemovalError::Blocking(e)));
        result.map_err(|e| CriError::InvalidResponse {
            endpoint: String::new(),
            rpc: "RemoveContainer",
            reason: e.to_string(),
        })
    }
}

/// Removing a container's log files failed.
#[derive(Debug, thiserror::Error)]
enum LogRemovalError {
    #[error("failed to remove container log {path}: {source}")]
    Log {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to remove container log legacy symbolic link {}: {source}", link.display())]
    LegacyLink {
        link: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The blocking removal panicked or was cancelled.
    #[error("{0}")]
    Blocking(#[source] tokio::task::JoinError),
}

/// Removes `<log_path>` and its rotated siblings `<log_path>*`.
fn remove_log_files(log_path: &str) -> std::io::Result<()> {
    if log_path.is_empty() {
        return Ok(());
    }
    let path = std::path::Path::new(log_path);
    let (Some(dir), Some(base)) = (path.parent(), path.file_name()) else {
        return Ok(());
    };
    let base = base.to_string_lossy().to_string();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&base) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::api::{ImageSpec, Mount};

    fn cri_status(
        state: CriState,
        exit: i32,
        policy: &str,
        log: &str,
        mounts: Vec<Mount>,
    ) -> CriContainerStatus {
        CriContainerStatus {
            id: "abc".into(),
            state: state as i32,
            created_at: 1_000,
            started_at: 2_000,
            finished_at: 3_000,
            exit_code: exit,
            reason: "Error".into(),
            message: String::new(),
            image: Some(ImageSpec {
                image: "busybox:1".into(),
                ..Default::default()
            }),
            image_ref: "sha256:1".into(),
            labels: [
                (
                    "io.kubernetes.container.name".to_string(),
                    "app".to_string(),
                ),
                ("io.kubernetes.pod.uid".to_string(), "u".to_string()),
            ]
            .into(),
            annotations: [
                (
                    "io.kubernetes.container.hash".to_string(),
                    "1a2b".to_string(),
                ),
                (
                    "io.kubernetes.container.restartCount".to_string(),
                    "4".to_string(),
                ),
                (
                    "io.kubernetes.container.terminationMessagePath".to_string(),
                    "/dev/termination-log".to_string(),
                ),
                (
                    "io.kubernetes.container.terminationMessagePolicy".to_string(),
                    policy.to_string(),
                ),
            ]
            .into(),
            mounts,
            log_path: log.into(),
            ..Default::default()
        }
    }

    #[test]
    fn conversion_table() {
        let running = to_kube_container_status(
            &cri_status(CriState::ContainerRunning, 0, "File", "", vec![]),
            "containerd",
        );
        assert_eq!(running.state, ContainerState::Running);
        assert_eq!(running.hash, 0x1a2b);
        assert_eq!(running.restart_count, 4);
        assert_eq!(running.id.to_string(), "containerd://abc");
        assert!(running.started_at.is_some() && running.finished_at.is_none());
        assert_eq!(running.reason, "");

        let created = to_kube_container_status(
            &cri_status(CriState::ContainerCreated, 0, "File", "", vec![]),
            "c",
        );
        assert!(created.started_at.is_none());

        let exited = to_kube_container_status(
            &cri_status(CriState::ContainerExited, 3, "File", "", vec![]),
            "c",
        );
        assert_eq!((exited.exit_code, exited.reason.as_str()), (3, "Error"));
        assert_eq!(exited.finished_at, Some(from_unix_nanos(3_000)));
    }

    #[test]
    fn termination_message_sources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let msg_file = dir.path().join("msg");
        std::fs::write(&msg_file, "").expect("write");
        let log = dir.path().join("0.log");
        std::fs::write(&log, "2024-01-01T00:00:00Z stderr F boom\n").expect("write");
        let mounts = vec![Mount {
            container_path: "/dev/termination-log".into(),
            host_path: msg_file.display().to_string(),
            ..Default::default()
        }];
        let log_s = log.display().to_string();
        // Fallback to logs only on failure with an empty file.
        let failed = convert_container_status(
            &cri_status(
                CriState::ContainerExited,
                1,
                "FallbackToLogsOnError",
                &log_s,
                mounts.clone(),
            ),
            "c",
        );
        assert_eq!(failed.message, "boom\n");
        let ok = convert_container_status(
            &cri_status(
                CriState::ContainerExited,
                0,
                "FallbackToLogsOnError",
                &log_s,
                mounts.clone(),
            ),
            "c",
        );
        assert_eq!(ok.message, "");
        let file_policy = convert_container_status(
            &cri_status(CriState::ContainerExited, 1, "File", &log_s, mounts.clone()),
            "c",
        );
        assert_eq!(file_policy.message, "");
        std::fs::write(&msg_file, "from file").expect("write");
        let written = convert_container_status(
            &cri_status(
                CriState::ContainerExited,
                1,
                "FallbackToLogsOnError",
                &log_s,
                mounts,
            ),
            "c",
        );
        assert_eq!(written.message, "from file");
    }

    #[test]
    fn log_files_and_rotations_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        for f in ["0.log", "0.log.20240101-000000", "1.log"] {
            std::fs::write(dir.path().join(f), "x").expect("write");
        }
        remove_log_files(&dir.path().join("0.log").display().to_string()).expect("remove");
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec!["1.log"]);
        remove_log_files("/nonexistent/x/0.log").expect("missing dir is fine");
    }
}
