//! The topology manager: at admission it asks each hint provider where the
//! pod's resources could come from, merges the hints under its policy, per
//! container or for the whole pod (scope), rejects a pod that cannot be
//! aligned, records the affinity and lets every provider allocate.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::error::TopologyManagerError;
use super::hint::{AffinityStore, HintProvider, ProviderHints, TopologyHint};
use super::policy::{Policy, PolicyKind};
use crate::cm::admission::AllocationError;

/// The most NUMA nodes an aligning policy supports.
pub const MAX_ALLOWABLE_NUMA_NODES: usize = 8;
pub const SCOPE_CONTAINER: &str = "container";
pub const SCOPE_POD: &str = "pod";

/// `topologyManagerScope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Container,
    Pod,
}

/// What the topology manager is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyManagerConfig {
    /// `topologyManagerPolicy`.
    pub policy: String,
    /// `topologyManagerScope`.
    pub scope: String,
}

impl Default for TopologyManagerConfig {
    fn default() -> Self {
        TopologyManagerConfig {
            policy: super::policy::POLICY_NONE.into(),
            scope: SCOPE_CONTAINER.into(),
        }
    }
}

/// Go's topology manager with its hint providers (device, CPU, memory, in
/// the order Go adds them).
pub struct TopologyManager {
    policy: Policy,
    scope: Scope,
    store: Arc<AffinityStore>,
    providers: Vec<Arc<dyn HintProvider>>,
}

impl std::fmt::Debug for TopologyManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopologyManager")
            .field("policy", &self.policy)
            .field("scope", &self.scope)
            .field("providers", &self.providers.len())
            .finish()
    }
}

fn containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    pod.spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
}

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

impl TopologyManager {
    /// Builds the policy over the machine's NUMA node ids.
    pub fn new(
        config: &TopologyManagerConfig,
        numa_nodes: &[u32],
        store: Arc<AffinityStore>,
        providers: Vec<Arc<dyn HintProvider>>,
    ) -> Result<Self, TopologyManagerError> {
        tracing::info!(topology_policy_name = %config.policy, topology_scope_name = %config.scope, "Creating topology manager with policy per scope");
        let kind = PolicyKind::parse(&config.policy)
            .ok_or_else(|| TopologyManagerError::UnknownPolicy(config.policy.clone()))?;
        if kind != PolicyKind::None && numa_nodes.len() > MAX_ALLOWABLE_NUMA_NODES {
            return Err(TopologyManagerError::TooManyNumaNodes(
                MAX_ALLOWABLE_NUMA_NODES,
            ));
        }
        let scope = match config.scope.as_str() {
            SCOPE_CONTAINER => Scope::Container,
            SCOPE_POD => Scope::Pod,
            other => return Err(TopologyManagerError::UnknownScope(other.to_string())),
        };
        Ok(TopologyManager {
            policy: Policy {
                kind,
                numa_nodes: numa_nodes.to_vec(),
            },
            scope,
            store,
            providers,
        })
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.kind.name()
    }

    /// The affinities chosen so far.
    pub fn store(&self) -> &Arc<AffinityStore> {
        &self.store
    }

    /// Admission: align, record and allocate, or say why not.
    pub fn admit(&self, pod: &Pod) -> Result<(), AllocationError> {
        tracing::info!("Topology Admit Handler");
        if self.policy.kind == PolicyKind::None {
            return containers(pod).try_for_each(|c| self.allocate(pod, c));
        }
        match self.scope {
            Scope::Container => {
                for container in containers(pod) {
                    let hints: Vec<ProviderHints> = self
                        .providers
                        .iter()
                        .map(|p| p.topology_hints(pod, container))
                        .collect();
                    let best = self.merge(pod, &container.name, &hints)?;
                    self.store.set(pod_uid(pod), &container.name, best);
                    self.allocate(pod, container)?;
                }
            }
            Scope::Pod => {
                let hints: Vec<ProviderHints> = self
                    .providers
                    .iter()
                    .map(|p| p.pod_topology_hints(pod))
                    .collect();
                let best = self.merge(pod, "", &hints)?;
                for container in containers(pod) {
                    self.store.set(pod_uid(pod), &container.name, best);
                    self.allocate(pod, container)?;
                }
            }
        }
        Ok(())
    }

    fn merge(
        &self,
        pod: &Pod,
        container: &str,
        hints: &[ProviderHints],
    ) -> Result<TopologyHint, AllocationError> {
        let (best, admit) = self.policy.merge(hints);
        let name = pod.metadata.name.as_deref().unwrap_or("");
        tracing::info!(best_hint = %best, pod = name, container_name = container, admit, "Best TopologyHint");
        if admit {
            Ok(best)
        } else {
            Err(AllocationError::TopologyAffinity)
        }
    }

    fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), AllocationError> {
        self.providers
            .iter()
            .try_for_each(|p| p.allocate(pod, container))
    }

    /// The container started: its affinity lives as long as its id.
    pub fn add_container(&self, pod: &Pod, container: &Container, container_id: &str) {
        self.store
            .add_container(pod_uid(pod), &container.name, container_id);
    }

    pub fn remove_container(&self, container_id: &str) {
        self.store.remove_container(container_id);
    }
}
