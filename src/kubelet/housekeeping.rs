//! Housekeeping (kubelet_pods.go HandlePodCleanups, v1.25), every 2 s once
//! all pod sources are ready: the pod workers forget finished pods that left
//! config, probes of pods no longer running stop, containers the runtime
//! runs for pods nobody wants are killed, statuses of unknown pods are
//! dropped, orphaned pod directories and pod cgroups are removed, the
//! container restart back-off is pruned, and pods recreated under a UID
//! that was terminating are started again.
//!
//! The pod workers are the record of what may run; the pod manager the
//! record of what should. Housekeeping reconciles the two and says so when
//! they disagree: a desired, active pod the workers never saw is dispatched
//! (and logged), and anything running that no worker owns is killed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::cm::{CgroupName, PodContainerManager};
use crate::kubelet::container::{Runtime, format_pod};
use crate::kubelet::pod::PodManager;
use crate::kubelet::pod_sync::{MirrorPods, PodVolumes, ProbeManager};
use crate::kubelet::pod_workers::{KillPodOptions, PodWorkerState, PodWorkers, UpdatePodOptions};
use crate::kubelet::status::StatusManager;
use crate::kubelet::sync_loop::{filter_out_inactive_pods, is_admitted_pod_terminal};
use crate::kubelet::types::SyncPodType;

/// A housekeeping pass that stopped early.
#[derive(Debug, thiserror::Error)]
pub enum HousekeepingError {
    #[error("failed to get list of pods that still exist on cgroup mounts: {0}")]
    CgroupPods(#[source] crate::cm::CmError),
    #[error("Error listing containers: {0}")]
    ListContainers(#[source] crate::kubelet::container::RuntimeError),
}

/// Prunes expired entries of the container restart back-off.
pub type BackoffGcFn = Arc<dyn Fn() + Send + Sync>;

/// What housekeeping works on.
pub struct Housekeeping {
    pub pod_manager: Arc<PodManager>,
    pub pod_workers: PodWorkers,
    pub status_manager: Arc<StatusManager>,
    pub probes: Arc<dyn ProbeManager>,
    pub runtime: Arc<dyn Runtime>,
    pub volumes: Arc<dyn PodVolumes>,
    pub pod_container_manager: Arc<dyn PodContainerManager>,
    pub cgroups_per_qos: bool,
    pub keep_terminated_pod_volumes: bool,
    pub backoff_gc: Option<BackoffGcFn>,
    /// Mirror pods of static pods (API server mode).
    pub mirror_pods: Option<Arc<dyn MirrorPods>>,
}

/// What one housekeeping pass did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanupReport {
    /// Runtime pods with no worker, killed.
    pub orphans_killed: Vec<String>,
    /// Desired pods the workers had never seen, dispatched.
    pub undispatched: Vec<String>,
    /// Pods recreated under a terminated UID, restarted.
    pub restarted: Vec<String>,
    /// Pod cgroups destroyed.
    pub cgroups_destroyed: Vec<String>,
}

impl Housekeeping {
    fn uid(pod: &Pod) -> String {
        pod.metadata.uid.clone().unwrap_or_default()
    }

    /// One pass (HandlePodCleanups).
    pub async fn handle_pod_cleanups(&self) -> Result<CleanupReport, HousekeepingError> {
        let mut report = CleanupReport::default();
        // The cgroup tree first, so pods added later are not mistaken for orphans.
        let cgroup_pods: BTreeMap<String, CgroupName> = if self.cgroups_per_qos {
            self.pod_container_manager
                .get_all_pods_from_cgroups()
                .await
                .map_err(HousekeepingError::CgroupPods)?
        } else {
            BTreeMap::new()
        };

        let (all_pods, mirror_pods) = self.pod_manager.get_pods_and_mirror_pods();
        crate::vlog!(3, "Clean up pod workers for terminated pods");
        let working = self.pod_workers.sync_known_pods(&all_pods);
        let by_uid: HashMap<String, Arc<Pod>> =
            all_pods.iter().map(|p| (Self::uid(p), p.clone())).collect();

        let mut running = HashSet::new();
        let mut possibly_running = HashSet::new();
        let mut restartable = Vec::new();
        for (uid, state) in &working {
            match state {
                PodWorkerState::Sync => {
                    running.insert(uid.clone());
                    possibly_running.insert(uid.clone());
                }
                PodWorkerState::Terminating => {
                    possibly_running.insert(uid.clone());
                }
                PodWorkerState::TerminatedAndRecreated => restartable.push(uid.clone()),
                PodWorkerState::Terminated => {}
            }
        }

        crate::vlog!(3, "Clean up probes for terminated pods");
        self.probes.cleanup_pods(&running);

        let runtime_pods = self
            .runtime
            .get_pods(false)
            .await
            .map_err(HousekeepingError::ListContainers)?;
        for rp in runtime_pods {
            if matches!(
                working.get(&rp.id),
                Some(PodWorkerState::Sync) | Some(PodWorkerState::Terminating)
            ) {
                continue;
            }
            if by_uid.contains_key(&rp.id) {
                continue;
            }
            crate::vlog!(3, pod_uid = %rp.id, "Clean up orphaned pod containers");
            report.orphans_killed.push(rp.id.clone());
            self.pod_workers.update_pod(UpdatePodOptions {
                update_type: SyncPodType::Kill,
                start_time: None,
                pod: None,
                mirror_pod: None,
                running_pod: Some(rp),
                kill: Some(KillPodOptions {
                    grace_period_override: Some(1),
                    ..Default::default()
                }),
            });
        }

        // A desired pod that is neither terminal nor known to the workers was
        // never dispatched: the two records disagree, so make them agree.
        let known = self.pod_workers.known_pods();
        for pod in &all_pods {
            let uid = Self::uid(pod);
            if known.contains_key(&uid) || is_admitted_pod_terminal(pod, &self.status_manager) {
                continue;
            }
            tracing::warn!(pod = %format_pod(pod), "Desired pod has no pod worker; dispatching it");
            report.undispatched.push(uid);
            let mirror = self.pod_manager.get_mirror_pod_by_pod(pod);
            self.pod_workers.update_pod(UpdatePodOptions::new(
                SyncPodType::Create,
                pod.clone(),
                mirror,
            ));
        }

        crate::vlog!(3, "Clean up orphaned pod statuses");
        let known_uids: HashSet<String> = all_pods
            .iter()
            .chain(mirror_pods.iter())
            .map(|p| Self::uid(p))
            .collect();
        self.status_manager.remove_orphaned_statuses(&known_uids);

        // Bypass any cache: what was just killed must not count as running.
        let running_now: HashSet<String> = match self.runtime.get_pods(false).await {
            Ok(pods) => pods.into_iter().map(|p| p.id).collect(),
            Err(e) => return Err(HousekeepingError::ListContainers(e)),
        };
        crate::vlog!(3, "Clean up orphaned pod directories");
        let desired: HashSet<String> = by_uid.keys().cloned().collect();
        if let Err(e) = self
            .volumes
            .cleanup_orphaned_pod_dirs(&desired, &running_now)
            .await
        {
            tracing::error!(err = %e, "Failed cleaning up orphaned pod directories");
        }

        if let Some(mirrors) = &self.mirror_pods {
            crate::vlog!(3, "Clean up orphaned mirror pods");
            let workers = self.pod_workers.clone();
            let terminating = move |full_name: &str| {
                workers.is_pod_for_mirror_pod_terminating_by_full_name(full_name)
            };
            mirrors
                .delete_orphaned(&self.pod_manager, &terminating)
                .await;
        }

        if self.cgroups_per_qos {
            crate::vlog!(3, "Clean up orphaned pod cgroups");
            let mut with_volumes = HashSet::new();
            if !self.keep_terminated_pod_volumes {
                for uid in cgroup_pods
                    .keys()
                    .filter(|u| !possibly_running.contains(*u))
                {
                    if self.volumes.pod_volumes_exist(uid).await {
                        with_volumes.insert(uid.clone());
                    }
                }
            }
            let exists = move |uid: &str| with_volumes.contains(uid);
            let possibly: BTreeSet<String> = possibly_running.iter().cloned().collect();
            let done = self
                .pod_container_manager
                .cleanup_orphaned(&cgroup_pods, &possibly, &exists)
                .await;
            report.cgroups_destroyed = done.destroyed;
        }

        if let Some(gc) = &self.backoff_gc {
            gc();
        }

        let active =
            filter_out_inactive_pods(all_pods.clone(), &self.pod_workers, &self.status_manager);
        crate::vlog!(
            4,
            desired = all_pods.len(),
            active = active.len(),
            "Pod counts"
        );

        for uid in restartable {
            let Some(pod) = by_uid.get(&uid) else {
                continue;
            };
            if is_admitted_pod_terminal(pod, &self.status_manager) {
                crate::vlog!(3, pod = %format_pod(pod), "Pod is restartable after termination due to UID reuse, but pod phase is terminal");
                continue;
            }
            crate::vlog!(3, pod = %format_pod(pod), "Pod is restartable after termination due to UID reuse");
            report.restarted.push(uid.clone());
            let mirror = self.pod_manager.get_mirror_pod_by_pod(pod);
            let mut options = UpdatePodOptions::new(SyncPodType::Create, pod.clone(), mirror);
            options.start_time = Some(self.pod_workers.clock().monotonic());
            self.pod_workers.update_pod(options);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::kubelet::sync_loop::testing::{Stack, eventually, static_pod};
    use crate::util::lifecycle::TaskSet;

    #[tokio::test]
    async fn orphaned_mirror_pods_are_deleted_unless_their_static_pod_terminates() {
        let stack = Stack::new(true);
        let orphan = static_pod("gone", &["app"]);
        let mirror = crate::kubelet::pod::mirror_pod_for(&orphan, "node", "node-uid");
        stack.pod_manager.add_pod(std::sync::Arc::new(mirror));
        stack
            .housekeeping
            .handle_pod_cleanups()
            .await
            .expect("cleanup");
        assert_eq!(
            *stack.mirrors.calls.lock().unwrap(),
            vec!["delete gone-node_default"]
        );
    }

    #[tokio::test]
    async fn a_desired_pod_the_workers_never_saw_is_dispatched() {
        let mut stack = Stack::new(true);
        let tasks = TaskSet::new();
        stack.start_workers(&tasks);
        stack.start_fake_pleg(&tasks, None);
        let pod = static_pod("lost", &["app"]);
        stack.pod_manager.add_pod(pod.clone());
        let report = stack
            .housekeeping
            .handle_pod_cleanups()
            .await
            .expect("cleanup");
        assert_eq!(report.undispatched, vec!["lost"]);
        eventually("synced", || {
            stack.runtime.calls().contains(&"sync lost".to_string())
        })
        .await;
        let report = stack
            .housekeeping
            .handle_pod_cleanups()
            .await
            .expect("cleanup");
        assert!(report.undispatched.is_empty(), "the records agree now");
        tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(5))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn orphaned_cgroups_go_unless_volumes_remain() {
        let mut stack = Stack::new(true);
        let tasks = TaskSet::new();
        stack.start_workers(&tasks);
        stack
            .pcm
            .cgroups
            .lock()
            .unwrap()
            .extend(["gone".to_string(), "mounted".to_string()]);
        stack
            .volumes
            .existing
            .lock()
            .unwrap()
            .insert("mounted".into());
        let report = stack
            .housekeeping
            .handle_pod_cleanups()
            .await
            .expect("cleanup");
        assert_eq!(report.cgroups_destroyed, vec!["gone"]);
        assert!(stack.pcm.cgroups.lock().unwrap().contains("mounted"));
        let (desired, running) = stack.volumes.cleaned.lock().unwrap()[0].clone();
        assert!(desired.is_empty() && running.is_empty());
        tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(5))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_pod_recreated_under_a_terminated_uid_starts_again() {
        let mut stack = Stack::new(true);
        let tasks = TaskSet::new();
        stack.start_workers(&tasks);
        stack.start_fake_pleg(&tasks, None);
        let pod = static_pod("again", &["app"]);
        stack.pod_manager.add_pod(pod.clone());
        stack
            .workers
            .update_pod(crate::kubelet::pod_workers::UpdatePodOptions::new(
                crate::kubelet::types::SyncPodType::Create,
                pod.clone(),
                None,
            ));
        eventually("running", || {
            stack.runtime.calls().contains(&"sync again".to_string())
        })
        .await;
        stack
            .workers
            .kill_pod_now(pod.clone(), false, Some(1), None)
            .await
            .expect("killed");
        // A create for the same UID while it terminates is remembered.
        stack
            .workers
            .update_pod(crate::kubelet::pod_workers::UpdatePodOptions::new(
                crate::kubelet::types::SyncPodType::Create,
                pod.clone(),
                None,
            ));
        eventually("finished", || {
            stack.workers.known_pods().get("again")
                == Some(&crate::kubelet::pod_workers::PodWorkerState::TerminatedAndRecreated)
        })
        .await;
        // Housekeeping restarts it once the worker is done with the old one
        // (until then the create is remembered again).
        let mut restarted = Vec::new();
        for _ in 0..50 {
            let report = stack
                .housekeeping
                .handle_pod_cleanups()
                .await
                .expect("cleanup");
            restarted.extend(report.restarted);
            if stack
                .runtime
                .calls()
                .iter()
                .filter(|c| *c == "sync again")
                .count()
                >= 2
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(restarted.contains(&"again".to_string()));
        eventually("synced again", || {
            stack
                .runtime
                .calls()
                .iter()
                .filter(|c| *c == "sync again")
                .count()
                >= 2
        })
        .await;
        tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(5))
            .await
            .unwrap();
    }
}
