//! The CPU manager's state: the shared pool (`defaultCpuSet`) and the CPUs
//! each container owns exclusively, kept in memory and, for the manager's
//! own state, written to `<root-dir>/cpu_manager_state` after every change.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::checkpoint::{CpuManagerCheckpoint, CpuManagerCheckpointV1};
use super::error::CpuManagerError;
use crate::cm::cpuset::CpuSet;

/// The state file's name under the kubelet's root directory.
pub const CPU_MANAGER_STATE_FILE_NAME: &str = "cpu_manager_state";

/// Pod UID → container name → exclusive CPUs.
pub type ContainerCpuAssignments = BTreeMap<String, BTreeMap<String, CpuSet>>;

/// Container id → (pod UID, container name), for migrating v1 files.
pub type ContainerMap = HashMap<String, (String, String)>;

/// Assignments and the shared pool; persisted when it has a file.
#[derive(Debug, Clone, Default)]
pub struct State {
    default_cpu_set: CpuSet,
    assignments: ContainerCpuAssignments,
    /// Where to write (and the policy name to write) after each change.
    file: Option<(PathBuf, String)>,
}

impl State {
    /// A state only in memory.
    pub fn in_memory() -> Self {
        State::default()
    }

    /// Restores `dir/cpu_manager_state` for `policy_name` (or creates it).
    /// A file of another policy that assigns no CPU is replaced (Go refuses
    /// it and the node stays down until someone deletes it); one with
    /// assignments, a corrupt one or one that does not parse is refused
    /// with Go's advice to drain the node and delete it.
    pub fn checkpointed(
        dir: &Path,
        policy_name: &str,
        initial: &ContainerMap,
    ) -> Result<State, CpuManagerError> {
        let path = dir.join(CPU_MANAGER_STATE_FILE_NAME);
        let mut state = State {
            file: Some((path.clone(), policy_name.to_string())),
            ..State::default()
        };
        state
            .restore(&path, policy_name, initial)
            .map_err(|e| CpuManagerError::Restore {
                path,
                source: Box::new(e),
            })?;
        Ok(state)
    }

    fn restore(
        &mut self,
        path: &Path,
        policy_name: &str,
        initial: &ContainerMap,
    ) -> Result<(), CpuManagerError> {
        let blob = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return self.store(),
            Err(source) => {
                return Err(CpuManagerError::Read {
                    path: path.into(),
                    source,
                });
            }
        };
        let checkpoint = match CpuManagerCheckpointV1::unmarshal(&blob) {
            Ok(v1) => migrate_v1(v1, initial)?,
            Err(_) => CpuManagerCheckpoint::unmarshal(&blob)?,
        };
        let assigns_nothing = checkpoint
            .entries
            .as_ref()
            .is_none_or(|e| e.values().all(BTreeMap::is_empty));
        if checkpoint.policy_name != policy_name && assigns_nothing {
            tracing::warn!(configured = policy_name, checkpoint = %checkpoint.policy_name, path = %path.display(), "CPU manager state file of another policy holds no assignments; starting from a fresh state");
            return self.store();
        }
        if checkpoint.policy_name != policy_name {
            return Err(CpuManagerError::PolicyMismatch {
                configured: policy_name.into(),
                checkpoint: checkpoint.policy_name,
            });
        }
        let default = CpuSet::parse(&checkpoint.default_cpu_set).map_err(|e| {
            CpuManagerError::ParseDefault {
                value: checkpoint.default_cpu_set.clone(),
                detail: e.to_string(),
            }
        })?;
        let mut assignments = ContainerCpuAssignments::new();
        for (pod, containers) in checkpoint.entries.unwrap_or_default() {
            let slot = assignments.entry(pod.clone()).or_default();
            for (container, text) in containers {
                let set = CpuSet::parse(&text).map_err(|e| CpuManagerError::ParseEntry {
                    value: text.clone(),
                    container: container.clone(),
                    pod: pod.clone(),
                    detail: e.to_string(),
                })?;
                slot.insert(container, set);
            }
        }
        self.default_cpu_set = default;
        self.assignments = assignments;
        crate::vlog!(2, default_cpu_set = %self.default_cpu_set, "State checkpoint: restored state from checkpoint");
        Ok(())
    }

    /// The checkpoint this state writes.
    pub fn to_checkpoint(&self, policy_name: &str) -> CpuManagerCheckpoint {
        let mut cp = CpuManagerCheckpoint::new(policy_name, &self.default_cpu_set.to_string());
        let entries = cp.entries.get_or_insert_with(BTreeMap::new);
        for (pod, containers) in &self.assignments {
            entries.insert(
                pod.clone(),
                containers
                    .iter()
                    .map(|(c, set)| (c.clone(), set.to_string()))
                    .collect(),
            );
        }
        cp
    }

    fn store(&self) -> Result<(), CpuManagerError> {
        let Some((path, policy)) = &self.file else {
            return Ok(());
        };
        let blob = self.to_checkpoint(policy).marshal()?;
        crate::util::atomic_file::write_atomic(path, &blob, 0o600).map_err(|source| {
            CpuManagerError::Write {
                path: path.clone(),
                source,
            }
        })
    }

    fn stored(&self) {
        if let Err(e) = self.store() {
            tracing::info!(err = %e, "Store state to checkpoint error");
        }
    }

    pub fn get_cpu_set(&self, pod_uid: &str, container: &str) -> Option<CpuSet> {
        self.assignments.get(pod_uid)?.get(container).cloned()
    }

    pub fn default_cpu_set(&self) -> CpuSet {
        self.default_cpu_set.clone()
    }

    /// The container's own CPUs, or the shared pool.
    pub fn get_cpu_set_or_default(&self, pod_uid: &str, container: &str) -> CpuSet {
        self.get_cpu_set(pod_uid, container)
            .unwrap_or_else(|| self.default_cpu_set.clone())
    }

    pub fn assignments(&self) -> &ContainerCpuAssignments {
        &self.assignments
    }

    pub fn set_cpu_set(&mut self, pod_uid: &str, container: &str, set: CpuSet) {
        self.assignments
            .entry(pod_uid.into())
            .or_default()
            .insert(container.into(), set);
        self.stored();
    }

    pub fn set_default_cpu_set(&mut self, set: CpuSet) {
        self.default_cpu_set = set;
        self.stored();
    }

    pub fn delete(&mut self, pod_uid: &str, container: &str) {
        if let Some(containers) = self.assignments.get_mut(pod_uid) {
            containers.remove(container);
            if containers.is_empty() {
                self.assignments.remove(pod_uid);
            }
        }
        self.stored();
    }
}

fn migrate_v1(
    v1: CpuManagerCheckpointV1,
    initial: &ContainerMap,
) -> Result<CpuManagerCheckpoint, CpuManagerError> {
    let mut cp = CpuManagerCheckpoint::new(&v1.policy_name, &v1.default_cpu_set);
    let entries = cp.entries.get_or_insert_with(BTreeMap::new);
    for (container_id, set) in v1.entries.unwrap_or_default() {
        let (pod, name) = initial
            .get(&container_id)
            .ok_or_else(|| CpuManagerError::Migrate(container_id.clone()))?;
        entries
            .entry(pod.clone())
            .or_default()
            .insert(name.clone(), set);
    }
    Ok(cp)
}
