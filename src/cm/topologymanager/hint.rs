//! Topology hints: what a resource manager says about where on the machine
//! a container's resources could come from, and the store of the affinity
//! the topology manager chose, which the managers read when they allocate.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::bitmask::BitMask;
use crate::cm::admission::AllocationError;

/// NUMA nodes a resource could come from, and whether that placement is
/// one the provider prefers. No affinity means "anywhere".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopologyHint {
    pub numa_node_affinity: Option<BitMask>,
    pub preferred: bool,
}

impl TopologyHint {
    pub fn new(affinity: BitMask, preferred: bool) -> Self {
        TopologyHint {
            numa_node_affinity: Some(affinity),
            preferred,
        }
    }

    /// No preference at all.
    pub fn any() -> Self {
        TopologyHint {
            numa_node_affinity: None,
            preferred: true,
        }
    }

    /// Preferred first, then the narrower affinity (Go's LessThan).
    pub fn less_than(&self, other: &TopologyHint) -> bool {
        if self.preferred != other.preferred {
            return self.preferred;
        }
        match (self.numa_node_affinity, other.numa_node_affinity) {
            (Some(a), Some(b)) => a.is_narrower_than(b),
            _ => false,
        }
    }
}

impl fmt::Display for TopologyHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.numa_node_affinity {
            Some(m) => write!(f, "{{{m} {}}}", self.preferred),
            None => write!(f, "{{<nil> {}}}", self.preferred),
        }
    }
}

/// One provider's hints by resource name. A resource mapped to `None` has
/// no preference; mapped to an empty list it cannot be placed anywhere. An
/// empty map means no preference for any resource.
pub type ProviderHints = BTreeMap<String, Option<Vec<TopologyHint>>>;

/// A resource manager the topology manager consults and then lets allocate.
pub trait HintProvider: Send + Sync {
    /// Hints for one container (container scope).
    fn topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints;
    /// Hints for the whole pod (pod scope).
    fn pod_topology_hints(&self, pod: &Pod) -> ProviderHints;
    /// Allocates for the container, reading the chosen affinity from the store.
    fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), AllocationError>;
}

#[derive(Debug, Default)]
struct Affinities {
    by_pod: HashMap<String, HashMap<String, TopologyHint>>,
    /// Container id → (pod UID, container name).
    containers: HashMap<String, (String, String)>,
}

/// The affinity chosen for each container at admission (Go's Store). Made
/// first, handed to the managers that read it and to the topology manager
/// that fills it.
#[derive(Debug, Default)]
pub struct AffinityStore(Mutex<Affinities>);

impl AffinityStore {
    fn lock(&self) -> MutexGuard<'_, Affinities> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The affinity of the container (the default hint when none was set).
    pub fn get_affinity(&self, pod_uid: &str, container: &str) -> TopologyHint {
        self.lock()
            .by_pod
            .get(pod_uid)
            .and_then(|c| c.get(container))
            .copied()
            .unwrap_or_default()
    }

    /// Records an affinity as the topology manager would (tests of the
    /// providers).
    #[cfg(test)]
    pub fn set_for_test(&self, pod_uid: &str, container: &str, hint: TopologyHint) {
        self.set(pod_uid, container, hint);
    }

    pub(super) fn set(&self, pod_uid: &str, container: &str, hint: TopologyHint) {
        self.lock()
            .by_pod
            .entry(pod_uid.to_string())
            .or_default()
            .insert(container.to_string(), hint);
    }

    /// Remembers which container id runs the container.
    pub fn add_container(&self, pod_uid: &str, container: &str, container_id: &str) {
        self.lock().containers.insert(
            container_id.to_string(),
            (pod_uid.to_string(), container.to_string()),
        );
    }

    /// Forgets a container; the affinity goes with the last id of its name.
    pub fn remove_container(&self, container_id: &str) {
        let mut a = self.lock();
        let Some((pod, name)) = a.containers.remove(container_id) else {
            return;
        };
        let still = a.containers.values().any(|(p, n)| *p == pod && *n == name);
        if still {
            return;
        }
        if let Some(per_pod) = a.by_pod.get_mut(&pod) {
            per_pod.remove(&name);
            if per_pod.is_empty() {
                a.by_pod.remove(&pod);
            }
        }
    }
}
