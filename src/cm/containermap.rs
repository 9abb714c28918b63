//! Which containers the resource managers may keep state for: every
//! container (init and app) of the active pods and of the pod being
//! admitted, by pod UID.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// Pod UID → container names.
pub type ActiveContainers = HashMap<String, HashSet<String>>;

/// The containers of `pods` plus `pending`.
pub fn active_containers(pods: &[Arc<Pod>], pending: Option<&Arc<Pod>>) -> ActiveContainers {
    let mut active = ActiveContainers::new();
    for pod in pods.iter().chain(pending) {
        let names = active
            .entry(pod.metadata.uid.clone().unwrap_or_default())
            .or_default();
        if let Some(spec) = &pod.spec {
            let all = spec
                .init_containers
                .iter()
                .flatten()
                .chain(&spec.containers);
            names.extend(all.map(|c| c.name.clone()));
        }
    }
    active
}

/// The assignments to drop: none until every pod source is ready, then
/// those of containers no active (or admitting) pod has.
pub fn stale_assignments<'a>(
    sources_ready: &dyn Fn() -> bool,
    active_pods: &dyn Fn() -> Vec<Arc<Pod>>,
    pending: Option<&Arc<Pod>>,
    assigned: impl Iterator<Item = (&'a String, &'a String)>,
) -> Vec<(String, String)> {
    if !sources_ready() {
        return Vec::new();
    }
    stale(assigned, &active_containers(&active_pods(), pending))
}

/// The (pod UID, container) pairs of `assigned` that are not active.
pub fn stale<'a>(
    assigned: impl Iterator<Item = (&'a String, &'a String)>,
    active: &ActiveContainers,
) -> Vec<(String, String)> {
    assigned
        .filter(|(uid, c)| !active.get(*uid).is_some_and(|names| names.contains(*c)))
        .map(|(uid, c)| (uid.clone(), c.clone()))
        .collect()
}
