//! Pod cgroups: `pod<uid>` under the pod's QoS tier, sized from the pod spec
//! on creation, found again by scanning the tiers, and destroyed after
//! killing whatever still runs in them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::cgroup_manager::CgroupManager;
use super::cgroup_name::CgroupName;
use super::cgroupfs;
use super::error::{CmError, blocking};
use super::helpers::{PodResourceOptions, resource_config_for_pod};
use super::qos::get_pod_qos;
use super::qos_container_manager::QosContainersInfo;
use super::resources::CgroupConfig;

/// The prefix of a pod cgroup's last component.
pub const POD_CGROUP_NAME_PREFIX: &str = "pod";

/// The last component of a pod's cgroup name: `pod<uid>`.
pub fn pod_cgroup_name_suffix(uid: &str) -> String {
    format!("{POD_CGROUP_NAME_PREFIX}{uid}")
}

fn pod_uid(pod: &Pod) -> Result<&str, CmError> {
    pod.metadata
        .uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| CmError::InvalidName {
            name: pod.metadata.name.clone().unwrap_or_default(),
            reason: "the pod has no UID".into(),
        })
}

/// What orphan cleanup did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OrphanCleanup {
    /// Pod UIDs whose cgroups were destroyed.
    pub destroyed: Vec<String>,
    /// Pod UIDs kept (volumes still mounted) with their CPU reduced.
    pub reduced: Vec<String>,
    /// Pod UIDs whose cgroups could not be removed this time.
    pub failed: Vec<String>,
}

/// Pod-level cgroups, as the pod workers and housekeeping use them.
#[async_trait::async_trait]
pub trait PodContainerManager: Send + Sync + 'static {
    /// The pod's cgroup name and its literal form for the driver (what the
    /// runtime gets as the sandbox's cgroup parent).
    fn get_pod_container_name(&self, pod: &Pod) -> Result<(CgroupName, String), CmError>;
    /// The literal cgroup parent for the pod's sandbox (the second half of
    /// [`PodContainerManager::get_pod_container_name`]).
    fn get_pod_cgroup_parent(&self, pod: &Pod) -> Result<String, CmError> {
        self.get_pod_container_name(pod).map(|(_, literal)| literal)
    }
    async fn exists(&self, pod: &Pod) -> bool;
    /// Creates the pod cgroup with limits from its spec, unless it exists.
    async fn ensure_exists(&self, pod: &Pod) -> Result<(), CmError>;
    /// Kills every process left in the cgroup, then removes it.
    async fn destroy(&self, name: &CgroupName) -> Result<(), CmError>;
    /// Lowers the cgroup's cpu shares to the minimum.
    async fn reduce_cpu_limits(&self, name: &CgroupName) -> Result<(), CmError>;
    /// Pod UID → cgroup name of every pod cgroup found under the QoS tiers.
    async fn get_all_pods_from_cgroups(&self) -> Result<BTreeMap<String, CgroupName>, CmError>;
    /// The pod UID, when a driver literal names a pod cgroup.
    fn is_pod_cgroup(&self, literal: &str) -> Option<String>;
    /// Housekeeping: destroys the cgroups of pods that should not be running;
    /// pods whose volumes still exist only get their CPU reduced meanwhile.
    async fn cleanup_orphaned(
        &self,
        cgroup_pods: &BTreeMap<String, CgroupName>,
        possibly_running: &BTreeSet<String>,
        volumes_exist: &(dyn for<'a> Fn(&'a str) -> bool + Send + Sync),
    ) -> OrphanCleanup {
        let mut report = OrphanCleanup::default();
        for (uid, name) in cgroup_pods {
            if possibly_running.contains(uid) {
                continue;
            }
            if volumes_exist(uid) {
                crate::vlog!(3, pod_uid = %uid, "orphaned pod found, but volumes not yet removed; reducing cpu to minimum");
                if let Err(e) = self.reduce_cpu_limits(name).await {
                    tracing::info!(pod_uid = %uid, error = %e, "failed to reduce cpu time for pod pending volume cleanup");
                }
                report.reduced.push(uid.clone());
                continue;
            }
            crate::vlog!(3, pod_uid = %uid, "orphaned pod found, removing pod cgroups");
            match self.destroy(name).await {
                Ok(()) => report.destroyed.push(uid.clone()),
                Err(e) => {
                    tracing::info!(pod_uid = %uid, error = %e, "failed to remove orphaned pod cgroup");
                    report.failed.push(uid.clone());
                }
            }
        }
        report
    }
}

/// Pod cgroups under the QoS tiers.
pub struct PodContainerManagerImpl {
    qos: QosContainersInfo,
    cgroups: Arc<dyn CgroupManager>,
    pod_pids_limit: i64,
    options: PodResourceOptions,
}

impl PodContainerManagerImpl {
    pub fn new(
        qos: QosContainersInfo,
        cgroups: Arc<dyn CgroupManager>,
        pod_pids_limit: i64,
        options: PodResourceOptions,
    ) -> Self {
        PodContainerManagerImpl {
            qos,
            cgroups,
            pod_pids_limit,
            options,
        }
    }

    /// The config a new pod cgroup gets.
    pub fn pod_cgroup_config(&self, pod: &Pod) -> Result<CgroupConfig, CmError> {
        let (name, _) = self.get_pod_container_name(pod)?;
        let mut resources = resource_config_for_pod(pod, &self.options);
        if self.pod_pids_limit > 0 {
            resources.pids_limit = Some(self.pod_pids_limit);
        }
        Ok(CgroupConfig::new(name, resources))
    }
}

/// Kills the processes in a cgroup, up to five rounds; a process already gone is killed.
pub fn kill_cgroup_processes(
    cgroups: &dyn CgroupManager,
    name: &CgroupName,
) -> Result<(), CmError> {
    let pids = cgroups.pids(name);
    if pids.is_empty() {
        return Ok(());
    }
    let mut killed: BTreeSet<i32> = BTreeSet::new();
    let mut errs = Vec::new();
    for attempt in 0..5 {
        if attempt > 0 {
            crate::vlog!(3, attempt, cgroup = %name, "attempt failed to kill all unwanted processes from cgroup, retrying");
        }
        errs.clear();
        for pid in &pids {
            if killed.contains(pid) {
                continue;
            }
            crate::vlog!(3, pid, cgroup = %name, "attempting to kill process from cgroup");
            match nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            ) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {
                    killed.insert(*pid);
                }
                Err(e) => errs.push(CmError::Requirement(format!("killing pid {pid}: {e}"))),
            }
        }
        if errs.is_empty() {
            crate::vlog!(3, cgroup = %name, "successfully killed all unwanted processes from cgroup");
            return Ok(());
        }
    }
    CmError::aggregate(errs)
}

/// Destroys a pod cgroup: stragglers killed first. Blocking.
pub fn destroy_pod_cgroup(cgroups: &dyn CgroupManager, name: &CgroupName) -> Result<(), CmError> {
    kill_cgroup_processes(cgroups, name).map_err(|e| {
        tracing::info!(cgroup = %name, error = %e, "failed to kill all the processes attached to cgroup");
        CmError::Requirement(format!("failed to kill all the processes attached to cgroup {name}: {e}"))
    })?;
    cgroups.destroy(name).map_err(|e| {
        tracing::info!(cgroup = %name, error = %e, "failed to delete cgroup paths");
        CmError::Requirement(format!("failed to delete cgroup paths for {name}: {e}"))
    })
}

/// Pod UID → name of every `pod*` directory under the QoS tiers, in any hierarchy. Blocking.
pub fn scan_pod_cgroups(
    cgroups: &dyn CgroupManager,
    qos: &QosContainersInfo,
) -> Result<BTreeMap<String, CgroupName>, CmError> {
    let mut found = BTreeMap::new();
    let mounts: BTreeSet<&std::path::Path> = cgroups
        .subsystems()
        .mount_points()
        .values()
        .map(|p| p.as_path())
        .collect();
    for mount in mounts {
        for tier in [&qos.best_effort, &qos.burstable, &qos.guaranteed] {
            let tier_literal = cgroups.name(tier)?;
            let dir = cgroupfs::join_literal(mount, &tier_literal);
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(CmError::io("read dir", &dir, e)),
            };
            for entry in entries.flatten() {
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let Ok(child) = entry.file_name().into_string() else {
                    continue;
                };
                let literal = format!("{}/{child}", tier_literal.trim_end_matches('/'));
                let internal = cgroups.cgroup_name(&literal);
                let Some(base) = internal.base() else {
                    continue;
                };
                if !base.contains(POD_CGROUP_NAME_PREFIX) {
                    continue;
                }
                let parts: Vec<&str> = base.split(POD_CGROUP_NAME_PREFIX).collect();
                if parts.len() != 2 {
                    tracing::info!(path = %literal, "pod cgroup manager ignored unexpected cgroup because it is not a pod");
                    continue;
                }
                found.insert(parts[1].to_string(), internal.clone());
            }
        }
    }
    Ok(found)
}

#[async_trait::async_trait]
impl PodContainerManager for PodContainerManagerImpl {
    fn get_pod_container_name(&self, pod: &Pod) -> Result<(CgroupName, String), CmError> {
        let parent = self.qos.parent_of(get_pod_qos(pod));
        let name = parent.child(&pod_cgroup_name_suffix(pod_uid(pod)?))?;
        let literal = self.cgroups.name(&name)?;
        Ok((name, literal))
    }

    async fn exists(&self, pod: &Pod) -> bool {
        let Ok((name, _)) = self.get_pod_container_name(pod) else {
            return false;
        };
        let cgroups = self.cgroups.clone();
        blocking(move || Ok(cgroups.exists(&name)))
            .await
            .unwrap_or(false)
    }

    async fn ensure_exists(&self, pod: &Pod) -> Result<(), CmError> {
        let config = self.pod_cgroup_config(pod)?;
        let cgroups = self.cgroups.clone();
        blocking(move || {
            if cgroups.exists(&config.name) {
                return Ok(());
            }
            cgroups.create(&config).map_err(|e| {
                CmError::Requirement(format!(
                    "failed to create container for {}: {e}",
                    config.name
                ))
            })
        })
        .await
    }

    async fn destroy(&self, name: &CgroupName) -> Result<(), CmError> {
        let cgroups = self.cgroups.clone();
        let name = name.clone();
        blocking(move || destroy_pod_cgroup(cgroups.as_ref(), &name)).await
    }

    async fn reduce_cpu_limits(&self, name: &CgroupName) -> Result<(), CmError> {
        let cgroups = self.cgroups.clone();
        let name = name.clone();
        blocking(move || cgroups.reduce_cpu_limits(&name)).await
    }

    async fn get_all_pods_from_cgroups(&self) -> Result<BTreeMap<String, CgroupName>, CmError> {
        let cgroups = self.cgroups.clone();
        let qos = self.qos.clone();
        blocking(move || scan_pod_cgroups(cgroups.as_ref(), &qos)).await
    }

    fn is_pod_cgroup(&self, literal: &str) -> Option<String> {
        let name = self.cgroups.cgroup_name(literal);
        let mut base = None;
        for tier in [
            &self.qos.best_effort,
            &self.qos.burstable,
            &self.qos.guaranteed,
        ] {
            if name.len() == tier.len() + 1 {
                base = name.components().get(tier.len()).cloned();
            }
        }
        let base = base?;
        let uid = base.strip_prefix(POD_CGROUP_NAME_PREFIX)?;
        let parts: Vec<&str> = base.split(POD_CGROUP_NAME_PREFIX).collect();
        (parts.len() == 2).then(|| uid.to_string())
    }
}

/// The pod container manager when cgroups-per-qos is off: pods share the root.
pub struct PodContainerManagerNoop {
    pub cgroup_root: CgroupName,
}

#[async_trait::async_trait]
impl PodContainerManager for PodContainerManagerNoop {
    fn get_pod_container_name(&self, _pod: &Pod) -> Result<(CgroupName, String), CmError> {
        Ok((self.cgroup_root.clone(), String::new()))
    }
    async fn exists(&self, _pod: &Pod) -> bool {
        true
    }
    async fn ensure_exists(&self, _pod: &Pod) -> Result<(), CmError> {
        Ok(())
    }
    async fn destroy(&self, _name: &CgroupName) -> Result<(), CmError> {
        Ok(())
    }
    async fn reduce_cpu_limits(&self, _name: &CgroupName) -> Result<(), CmError> {
        Ok(())
    }
    async fn get_all_pods_from_cgroups(&self) -> Result<BTreeMap<String, CgroupName>, CmError> {
        Ok(BTreeMap::new())
    }
    fn is_pod_cgroup(&self, _literal: &str) -> Option<String> {
        None
    }
}
