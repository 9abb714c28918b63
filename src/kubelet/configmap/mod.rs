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

use crate::kubelet::container::helpers::visit_containers;
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

/// The ConfigMap and Secret managers the kubelet builds from its
/// configuration (Go's NewMainKubelet switch on
/// configMapAndSecretChangeDetectionStrategy).
pub struct ObjectManagers {
    pub config_maps: Arc<ConfigMapManager>,
    pub secrets: Arc<crate::kubelet::secret::SecretManager>,
}

impl ObjectManagers {
    /// Builds both managers for `strategy` ("Watch", "Cache" or "Get";
    /// anything else is Go's "unknown configmap and secret manager mode"
    /// error). `sync_frequency` paces idle watches; `node` gives the TTL
    /// annotation for "Cache".
    pub fn new(
        strategy: &str,
        sync_frequency: Duration,
        client: kube::Client,
        clock: Arc<dyn Clock>,
        node: Arc<dyn crate::kubelet::lifecycle::NodeGetter>,
    ) -> Result<Self, ManagerError> {
        let strategy = ChangeDetectionStrategy::parse(strategy)?;
        let ttl = crate::kubelet::util::manager::ttl_from_node(move || node.get_node_any_way());
        Ok(ObjectManagers {
            config_maps: Arc::new(new_config_map_manager(
                strategy,
                client.clone(),
                clock.clone(),
                sync_frequency,
                ttl.clone(),
            )),
            secrets: Arc::new(crate::kubelet::secret::new_secret_manager(
                strategy,
                client,
                clock,
                sync_frequency,
                ttl,
            )),
        })
    }

    /// The pod manager hooks (register both with `PodManager::with_registrars`).
    pub fn registrars(&self) -> Vec<Arc<dyn PodObjectRegistrar>> {
        vec![self.config_maps.clone(), self.secrets.clone()]
    }

    /// Start phase: the watches of the Watch strategy.
    pub fn start(&self, tasks: &crate::util::lifecycle::TaskSet) {
        self.config_maps.start(tasks);
        self.secrets.start(tasks);
    }
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
    visit_containers(pod, |c| container_names(c, &mut out));
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
        other => GetError::getter(other),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn managers_from_the_configured_strategy() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let node: Arc<dyn crate::kubelet::lifecycle::NodeGetter> = Arc::new(|| {
            Err::<k8s_openapi::api::core::v1::Node, _>(
                crate::kubelet::lifecycle::NodeGetError::NotFound("n".into()),
            )
        });
        let clock: Arc<dyn Clock> = Arc::new(crate::util::clock::RealClock);
        for (text, want) in [
            ("Watch", ChangeDetectionStrategy::Watch),
            ("Cache", ChangeDetectionStrategy::Cache),
            ("Get", ChangeDetectionStrategy::Get),
        ] {
            let m = ObjectManagers::new(
                text,
                Duration::from_secs(60),
                client.clone(),
                clock.clone(),
                node.clone(),
            )
            .unwrap();
            assert_eq!(m.config_maps.strategy(), want);
            assert_eq!(m.secrets.strategy(), want);
            assert_eq!(m.registrars().len(), 2);
        }
        let err = ObjectManagers::new("Poll", Duration::from_secs(60), client, clock, node)
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "unknown configmap and secret manager mode: Poll"
        );
    }

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
