//! pkg/kubelet/configmap: the ConfigMaps pods reference, read for their
//! environment and volumes through the strategy the config chooses
//! (`configMapAndSecretChangeDetectionStrategy`, see
//! [`crate::kubelet::util::manager`]).
//!
//! The manager is registered with the pod manager (a
//! [`PodObjectRegistrar`]) so it learns which ConfigMaps each pod needs, and
//! serves them through [`ConfigMapGetter`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod};

use crate::kubelet::envvars::{ConfigMapGetter, GetError, ObjectKind};
use crate::kubelet::pod::PodObjectRegistrar;
use crate::kubelet::util::manager::{
    ChangeDetectionStrategy, GetObjectTtl, KindManager, ManagerError,
};
use crate::util::clock::Clock;

/// The ConfigMap manager.
pub type ConfigMapManager = KindManager<ConfigMap>;

/// Builds the ConfigMap manager for `strategy` (build phase; call
/// `start(&tasks)` in the start phase).
pub fn new_config_map_manager(
    strategy: ChangeDetectionStrategy,
    client: kube::Client,
    clock: Arc<dyn Clock>,
    resync: Duration,
    get_ttl: GetObjectTtl,
) -> ConfigMapManager {
    KindManager::new(strategy, client, clock, resync, get_ttl, config_map_names)
}

fn container_names(c: &Container, out: &mut BTreeSet<String>) {
    for from in c.env_from.iter().flatten() {
        if let Some(r) = &from.config_map_ref {
            out.insert(r.name.clone());
        }
    }
    for env in c.env.iter().flatten() {
        if let Some(r) = env
            .value_from
            .as_ref()
            .and_then(|v| v.config_map_key_ref.as_ref())
        {
            out.insert(r.name.clone());
        }
    }
}

/// Every ConfigMap a pod references: its containers' (init, regular,
/// ephemeral) env and envFrom, configMap volumes and projected sources.
pub fn config_map_names(pod: &Pod) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(spec) = pod.spec.as_ref() else {
        return out;
    };
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        container_names(c, &mut out);
    }
    for ec in spec.ephemeral_containers.iter().flatten() {
        let c = crate::kubelet::container::helpers::ephemeral_as_container(ec);
        container_names(&c, &mut out);
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(p) = &v.projected {
            for s in p.sources.iter().flatten() {
                if let Some(cm) = &s.config_map {
                    out.insert(cm.name.clone());
                }
            }
        } else if let Some(cm) = &v.config_map {
            out.insert(cm.name.clone());
        }
    }
    out.remove("");
    out
}

pub(crate) fn to_get_error(kind: ObjectKind, e: ManagerError) -> GetError {
    match e {
        ManagerError::NotFound { name, .. } => GetError::NotFound { kind, name },
        other => GetError::Other(other.to_string()),
    }
}

#[async_trait]
impl ConfigMapGetter for KindManager<ConfigMap> {
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, GetError> {
        self.get(namespace, name)
            .await
            .map_err(|e| to_get_error(ObjectKind::ConfigMap, e))
    }
}

impl PodObjectRegistrar for KindManager<ConfigMap> {
    fn register_pod(&self, pod: &Pod) {
        KindManager::register_pod(self, pod);
    }

    fn unregister_pod(&self, pod: &Pod) {
        KindManager::unregister_pod(self, pod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_of_every_reference() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "init-from"}}]}],
                "containers": [{"name": "c",
                    "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env-key", "key": "k"}}},
                            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "not-me", "key": "k"}}},
                            {"name": "C", "value": "plain"}],
                    "envFrom": [{"secretRef": {"name": "not-me-either"}}]}],
                "ephemeralContainers": [{"name": "e", "envFrom": [{"configMapRef": {"name": "debug"}}]}],
                "volumes": [
                    {"name": "v1", "configMap": {"name": "vol"}},
                    {"name": "v2", "projected": {"sources": [
                        {"configMap": {"name": "kube-root-ca.crt"}}, {"secret": {"name": "nope"}},
                        {"serviceAccountToken": {"path": "token"}}]}},
                    {"name": "v3", "emptyDir": {}},
                ],
            },
        }))
        .unwrap();
        let names: Vec<String> = config_map_names(&pod).into_iter().collect();
        assert_eq!(
            names,
            ["debug", "env-key", "init-from", "kube-root-ca.crt", "vol"]
        );
    }
}
