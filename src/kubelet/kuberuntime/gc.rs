//! Container garbage collection (kuberuntime_gc.go): dead containers older
//! than the minimum age, grouped per (pod, container name); all of a removed
//! pod's, then the oldest beyond the per-container limit, then the oldest
//! beyond the node limit (spread evenly first). Dead sandboxes without
//! containers (all of a removed pod's, else all but the newest), and the log
//! directories of removed pods.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::actions::KillReason;
use super::labels::get_container_info_from_labels;
use super::manager::{KubeGenericRuntimeManager, call_error};
use super::status::from_unix_nanos;
use crate::cri::api::{ContainerState as CriState, PodSandboxState};
use crate::kubelet::container::{GcPolicy, RuntimeError};

/// A dead container considered for removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcContainer {
    pub id: String,
    pub name: String,
    pub created: SystemTime,
    /// In an unknown state: stop it before removal.
    pub unknown: bool,
}

/// A sandbox considered for removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcSandbox {
    pub id: String,
    pub created: SystemTime,
    /// Ready, or still has containers.
    pub active: bool,
}

/// Dead containers per (pod UID, container name).
pub type EvictUnits = BTreeMap<(String, String), Vec<GcContainer>>;

fn num_containers(units: &EvictUnits) -> usize {
    units.values().map(Vec::len).sum()
}

/// Splits `containers` (newest first after sorting) into (kept, removed):
/// the oldest `to_remove` go.
pub fn oldest_n(
    mut containers: Vec<GcContainer>,
    to_remove: usize,
) -> (Vec<GcContainer>, Vec<GcContainer>) {
    let keep = containers.len().saturating_sub(to_remove);
    containers.sort_by_key(|c| std::cmp::Reverse(c.created));
    let removed = containers.split_off(keep);
    (containers, removed)
}

/// Which containers go, per the policy. Units of pods whose content (or,
/// with `evict_non_deleted_pods`, runtime) should be removed lose every
/// container when all sources are ready.
pub fn select_containers_to_evict(
    mut units: EvictUnits,
    policy: &GcPolicy,
    all_sources_ready: bool,
    remove_all: &dyn Fn(&str) -> bool,
) -> Vec<GcContainer> {
    let mut evicted = Vec::new();
    if all_sources_ready {
        let gone: Vec<(String, String)> = units
            .keys()
            .filter(|(uid, _)| remove_all(uid))
            .cloned()
            .collect();
        for key in gone {
            if let Some(v) = units.remove(&key) {
                evicted.extend(oldest_n(v, usize::MAX).1);
            }
        }
    }
    let enforce = |units: &mut EvictUnits, evicted: &mut Vec<GcContainer>, max: usize| {
        for v in units.values_mut() {
            if v.len() > max {
                let n = v.len() - max;
                let (kept, removed) = oldest_n(std::mem::take(v), n);
                *v = kept;
                evicted.extend(removed);
            }
        }
    };
    if policy.max_per_pod_container >= 0 {
        enforce(
            &mut units,
            &mut evicted,
            policy.max_per_pod_container as usize,
        );
    }
    if policy.max_containers >= 0 && num_containers(&units) > policy.max_containers as usize {
        let per_unit = (policy.max_containers as usize / units.len().max(1)).max(1);
        enforce(&mut units, &mut evicted, per_unit);
        let total = num_containers(&units);
        if total > policy.max_containers as usize {
            let flat: Vec<GcContainer> = units.into_values().flatten().collect();
            evicted.extend(oldest_n(flat, total - policy.max_containers as usize).1);
        }
    }
    evicted
}

/// Which sandboxes go: inactive ones of removed pods, and all inactive but
/// the newest of the others.
pub fn select_sandboxes_to_evict(
    by_pod: HashMap<String, Vec<GcSandbox>>,
    remove_all: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (uid, mut sandboxes) in by_pod {
        let to_remove = if remove_all(&uid) {
            sandboxes.len()
        } else {
            sandboxes.len().saturating_sub(1)
        };
        sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created));
        let keep = sandboxes.len() - to_remove;
        out.extend(
            sandboxes
                .into_iter()
                .skip(keep)
                .filter(|s| !s.active)
                .map(|s| s.id),
        );
    }
    out
}

impl KubeGenericRuntimeManager {
    fn remove_all_for(&self, evict_non_deleted_pods: bool) -> impl Fn(&str) -> bool + '_ {
        move |uid: &str| {
            self.pod_state.should_pod_content_be_removed(uid)
                || (evict_non_deleted_pods && self.pod_state.should_pod_runtime_be_removed(uid))
        }
    }

    async fn evictable_containers(&self, min_age: Duration) -> Result<EvictUnits, RuntimeError> {
        let containers = self
            .get_kubelet_containers(true)
            .await
            .map_err(|e| call_error("ListContainers", e))?;
        let newest = self
            .clock
            .now()
            .checked_sub(min_age)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut units = EvictUnits::new();
        for c in containers {
            if c.state == CriState::ContainerRunning as i32 {
                continue;
            }
            let created = from_unix_nanos(c.created_at);
            if newest < created {
                continue;
            }
            let labeled = get_container_info_from_labels(&c.labels);
            let name = c
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            units
                .entry((labeled.pod_uid, name.clone()))
                .or_default()
                .push(GcContainer {
                    id: c.id,
                    name,
                    created,
                    unknown: c.state == CriState::ContainerUnknown as i32,
                });
        }
        Ok(units)
    }

    async fn remove_gc_containers(&self, containers: Vec<GcContainer>) {
        for c in containers {
            if c.unknown {
                let id = self.container_id(&c.id);
                let msg = "Container is in unknown state, try killing it before removal";
                if let Err(e) = self
                    .kill_container(None, &id, &c.name, msg, KillReason::Unknown, None)
                    .await
                {
                    tracing::error!(container_id = %c.id, error = %e, "failed to stop container");
                    continue;
                }
            }
            if let Err(e) = self.remove_container(&c.id).await {
                tracing::error!(container_id = %c.id, error = %e, "failed to remove container");
            }
        }
    }

    async fn evict_containers(
        &self,
        policy: &GcPolicy,
        all_sources_ready: bool,
        evict_non_deleted_pods: bool,
    ) -> Result<(), RuntimeError> {
        let units = self.evictable_containers(policy.min_age).await?;
        let remove_all = self.remove_all_for(evict_non_deleted_pods);
        let evicted = select_containers_to_evict(units, policy, all_sources_ready, &remove_all);
        self.remove_gc_containers(evicted).await;
        Ok(())
    }

    async fn evict_sandboxes(&self, evict_non_deleted_pods: bool) -> Result<(), RuntimeError> {
        let containers = self
            .get_kubelet_containers(true)
            .await
            .map_err(|e| call_error("ListContainers", e))?;
        let sandboxes = self
            .get_kubelet_sandboxes(true)
            .await
            .map_err(|e| call_error("ListPodSandbox", e))?;
        let with_containers: HashSet<&str> = containers
            .iter()
            .map(|c| c.pod_sandbox_id.as_str())
            .collect();
        let mut by_pod: HashMap<String, Vec<GcSandbox>> = HashMap::new();
        for s in &sandboxes {
            let uid = s
                .metadata
                .as_ref()
                .map(|m| m.uid.clone())
                .unwrap_or_default();
            by_pod.entry(uid).or_default().push(GcSandbox {
                id: s.id.clone(),
                created: from_unix_nanos(s.created_at),
                active: s.state == PodSandboxState::SandboxReady as i32
                    || with_containers.contains(s.id.as_str()),
            });
        }
        let remove_all = self.remove_all_for(evict_non_deleted_pods);
        for id in select_sandboxes_to_evict(by_pod, &remove_all) {
            crate::vlog!(4, sandbox_id = %id, "removing sandbox");
            // Stop first, in case it was never stopped.
            if let Err(e) = self.runtime.stop_pod_sandbox(&id).await {
                tracing::error!(sandbox_id = %id, error = %e, "failed to stop sandbox before removing");
                continue;
            }
            if let Err(e) = self.runtime.remove_pod_sandbox(&id).await {
                tracing::error!(sandbox_id = %id, error = %e, "failed to remove sandbox");
            }
        }
        Ok(())
    }

    async fn evict_pod_logs_directories(
        &self,
        all_sources_ready: bool,
    ) -> Result<(), RuntimeError> {
        if all_sources_ready {
            let root = self.config.pod_logs_root.clone();
            let names = tokio::task::spawn_blocking({
                let root = root.clone();
                move || -> std::io::Result<Vec<String>> {
                    Ok(std::fs::read_dir(&root)?
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect())
                }
            })
            .await
            .map_err(|e| RuntimeError::Call {
                op: "GarbageCollect",
                message: e.to_string(),
            })?
            .map_err(|e| RuntimeError::Call {
                op: "GarbageCollect",
                message: format!(
                    "failed to read podLogsRootDirectory {:?}: {e}",
                    root.display()
                ),
            })?;
            let doomed: Vec<PathBuf> = names
                .into_iter()
                .filter(|name| {
                    let uid = name.rsplit('_').next().unwrap_or(name);
                    self.pod_state.should_pod_content_be_removed(uid)
                })
                .map(|name| root.join(name))
                .collect();
            let _ = tokio::task::spawn_blocking(move || {
                for dir in doomed {
                    crate::vlog!(4, path = %dir.display(), "removing pod logs");
                    if let Err(e) = std::fs::remove_dir_all(&dir) {
                        tracing::error!(path = %dir.display(), error = %e, "failed to remove pod logs directory");
                    }
                }
            })
            .await;
        }
        self.remove_dead_legacy_symlinks().await;
        Ok(())
    }

    /// Removes dangling legacy log symlinks of containers that exited.
    async fn remove_dead_legacy_symlinks(&self) {
        let Some(dir) = self.config.legacy_log_symlinks_dir.clone() else {
            return;
        };
        let dangling = tokio::task::spawn_blocking(move || -> Vec<PathBuf> {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                return Vec::new();
            };
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .filter(|p| std::fs::metadata(p).is_err())
                .collect()
        })
        .await
        .unwrap_or_default();
        for link in dangling {
            let name = link
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match super::log_paths::container_id_from_legacy_log_symlink(&name) {
                Ok(id) => match self.runtime.container_status(&id, false).await {
                    Ok(resp) => match resp.status {
                        None => continue,
                        // Rotation briefly leaves the link dangling; only
                        // dead containers lose it.
                        Some(s) if s.state != CriState::ContainerExited as i32 => continue,
                        Some(_) => {}
                    },
                    Err(e) => {
                        tracing::info!(container_id = %id, error = %e, "error getting ContainerStatus for containerID")
                    }
                },
                Err(e) => crate::vlog!(4, error = %e, "unable to obtain container ID"),
            }
            let path = link.clone();
            let removed = tokio::task::spawn_blocking(move || std::fs::remove_file(&path)).await;
            match removed {
                Ok(Ok(())) => crate::vlog!(4, path = %link.display(), "removed symlink"),
                Ok(Err(e)) => {
                    tracing::error!(path = %link.display(), error = %e, "failed to remove container log dead symlink")
                }
                Err(_) => {}
            }
        }
    }

    pub(super) async fn garbage_collect_impl(
        &self,
        policy: GcPolicy,
        all_sources_ready: bool,
        evict_non_deleted_pods: bool,
    ) -> Result<(), RuntimeError> {
        let mut errors = Vec::new();
        if let Err(e) = self
            .evict_containers(&policy, all_sources_ready, evict_non_deleted_pods)
            .await
        {
            errors.push(e.to_string());
        }
        if let Err(e) = self.evict_sandboxes(evict_non_deleted_pods).await {
            errors.push(e.to_string());
        }
        if let Err(e) = self.evict_pod_logs_directories(all_sources_ready).await {
            errors.push(e.to_string());
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(RuntimeError::Call {
                op: "GarbageCollect",
                message: errors.remove(0),
            }),
            _ => Err(RuntimeError::Call {
                op: "GarbageCollect",
                message: format!("[{}]", errors.join(", ")),
            }),
        }
    }
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
