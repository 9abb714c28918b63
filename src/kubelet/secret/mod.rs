//! pkg/kubelet/secret: the Secrets pods reference (env, volumes, image pull
//! secrets), read through the strategy the config chooses
//! (`configMapAndSecretChangeDetectionStrategy`, see
//! [`crate::kubelet::util::manager`]). Registered with the pod manager as a
//! [`crate::kubelet::pod::PodObjectRegistrar`]; serves [`SecretGetter`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod, Secret, Volume};

use crate::kubelet::configmap::to_get_error;
use crate::kubelet::container::helpers::visit_containers;
use crate::kubelet::envvars::{GetError, ObjectKind, SecretGetter};
use crate::kubelet::util::manager::{ChangeDetectionStrategy, GetObjectTtl, KindManager};
use crate::util::clock::Clock;

/// The Secret manager.
pub type SecretManager = KindManager<Secret>;

/// Builds the Secret manager for `strategy` (build phase; call
/// `start(&tasks)` in the start phase).
pub fn new_secret_manager(
    strategy: ChangeDetectionStrategy,
    client: kube::Client,
    clock: Arc<dyn Clock>,
    resync: Duration,
    get_ttl: GetObjectTtl,
) -> SecretManager {
    KindManager::new(strategy, client, clock, resync, get_ttl, secret_names)
}

fn container_names(c: &Container, out: &mut BTreeSet<String>) {
    for from in c.env_from.iter().flatten() {
        if let Some(r) = &from.secret_ref {
            out.insert(r.name.clone());
        }
    }
    for env in c.env.iter().flatten() {
        if let Some(r) = env
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
        {
            out.insert(r.name.clone());
        }
    }
}

/// The Secret a volume refers to (one source per volume).
fn volume_names(v: &Volume, out: &mut BTreeSet<String>) {
    let r = |r: &Option<k8s_openapi::api::core::v1::LocalObjectReference>| {
        r.as_ref().map(|r| r.name.clone())
    };
    let name = if let Some(s) = &v.azure_file {
        Some(s.secret_name.clone())
    } else if let Some(s) = &v.cephfs {
        r(&s.secret_ref)
    } else if let Some(s) = &v.cinder {
        r(&s.secret_ref)
    } else if let Some(s) = &v.flex_volume {
        r(&s.secret_ref)
    } else if let Some(p) = &v.projected {
        for s in p.sources.iter().flatten() {
            if let Some(secret) = &s.secret {
                out.insert(secret.name.clone());
            }
        }
        None
    } else if let Some(s) = &v.rbd {
        r(&s.secret_ref)
    } else if let Some(s) = &v.secret {
        s.secret_name.clone()
    } else if let Some(s) = &v.scale_io {
        Some(s.secret_ref.name.clone())
    } else if let Some(s) = &v.iscsi {
        r(&s.secret_ref)
    } else if let Some(s) = &v.storageos {
        r(&s.secret_ref)
    } else if let Some(s) = &v.csi {
        r(&s.node_publish_secret_ref)
    } else {
        None
    };
    out.extend(name);
}

/// Every Secret a pod references: image pull secrets, its containers'
/// (init, regular, ephemeral) env and envFrom, and its volumes.
pub fn secret_names(pod: &Pod) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(spec) = pod.spec.as_ref() else {
        return out;
    };
    for r in spec.image_pull_secrets.iter().flatten() {
        out.insert(r.name.clone());
    }
    visit_containers(pod, |c| container_names(c, &mut out));
    for v in spec.volumes.iter().flatten() {
        volume_names(v, &mut out);
    }
    out.remove("");
    out
}

#[async_trait]
impl SecretGetter for KindManager<Secret> {
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Secret, GetError> {
        self.get(namespace, name)
            .await
            .map_err(|e| to_get_error(ObjectKind::Secret, e))
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
                "imagePullSecrets": [{"name": "pull"}],
                "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-from"}}]}],
                "containers": [{"name": "c",
                    "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-key", "key": "k"}}},
                            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "not-me", "key": "k"}}}]}],
                "ephemeralContainers": [{"name": "e", "env": [{"name": "D", "valueFrom": {"secretKeyRef": {"name": "debug", "key": "k"}}}]}],
                "volumes": [
                    {"name": "v1", "secret": {"secretName": "vol"}},
                    {"name": "v2", "projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "nope"}}]}},
                    {"name": "v3", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                    {"name": "v4", "cephfs": {"monitors": ["m"], "secretRef": {"name": "ceph"}}},
                    {"name": "v5", "azureFile": {"secretName": "azure", "shareName": "s"}},
                    {"name": "v6", "secret": {}},
                ],
            },
        }))
        .unwrap();
        let names: Vec<String> = secret_names(&pod).into_iter().collect();
        assert_eq!(
            names,
            [
                "azure",
                "ceph",
                "csi",
                "debug",
                "env-key",
                "init-from",
                "proj",
                "pull",
                "vol"
            ]
        );
    }
}
