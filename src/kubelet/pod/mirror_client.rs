//! Mirror pods (Go's pod/mirror_client.go and the mirror steps of syncPod
//! and housekeeping): for every static pod the kubelet runs, a read-only
//! copy in the API server so the cluster can see it. The copy carries the
//! static pod's hash in `kubernetes.io/config.mirror` and, as the
//! NodeRestriction admission requires, a controller owner reference to the
//! Node. A mirror whose hash no longer matches is deleted and recreated; a
//! mirror whose static pod is gone is deleted by housekeeping. Pods of the
//! "api" source never get one.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Preconditions;
use kube::api::{Api, DeleteParams, PostParams};

use super::pod_manager::{PodManager, get_pod_hash};
use crate::kubelet::lifecycle::NodeGetter;
use crate::kubelet::types::{
    CONFIG_MIRROR_ANNOTATION_KEY, PodFullNameError, get_pod_full_name, is_static_pod,
    parse_pod_full_name,
};

/// Why a mirror pod could not be created or deleted.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("failed to get node UID: {0}")]
    NodeUid(String),
    /// The node lister could not give the node.
    #[error("failed to get node UID: {0}")]
    NodeLister(#[from] crate::kubelet::lifecycle::NodeGetError),
    #[error(transparent)]
    FullName(#[from] PodFullNameError),
    #[error("creating mirror pod {namespace}/{name}: {source}")]
    Create {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// Creates and deletes mirror pods in the API server.
#[async_trait]
pub trait MirrorClient: Send + Sync {
    /// Creates the mirror of static pod `pod`.
    async fn create_mirror_pod(&self, pod: &Pod) -> Result<(), MirrorError>;
    /// Deletes the mirror pod `name_namespace` (only the one with `uid` when
    /// given). Returns whether it was deleted; a missing pod or another UID
    /// is not an error. Fails only for a malformed full name.
    async fn delete_mirror_pod(
        &self,
        pod_full_name: &str,
        uid: Option<&str>,
    ) -> Result<bool, MirrorError>;
}

/// The mirror client over a kube client.
pub struct BasicMirrorClient {
    client: kube::Client,
    node_name: String,
    /// The kubelet's cached Node, when it has one; otherwise the Node is
    /// read from the API server.
    node_lister: Option<Arc<dyn NodeGetter>>,
}

impl BasicMirrorClient {
    pub fn new(
        client: kube::Client,
        node_name: &str,
        node_lister: Option<Arc<dyn NodeGetter>>,
    ) -> Self {
        BasicMirrorClient {
            client,
            node_name: node_name.to_string(),
            node_lister,
        }
    }

    async fn node_uid(&self) -> Result<String, MirrorError> {
        let node = match &self.node_lister {
            Some(lister) => lister.get_node_any_way()?,
            None => Api::<Node>::all(self.client.clone())
                .get(&self.node_name)
                .await
                .map_err(|e| MirrorError::NodeUid(e.to_string()))?,
        };
        node.metadata
            .uid
            .filter(|u| !u.is_empty())
            .ok_or_else(|| MirrorError::NodeUid(format!("UID unset for node {}", self.node_name)))
    }
}

/// The mirror pod object for static pod `pod` on node `node_name`.
pub fn mirror_pod_for(pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let mut copy = pod.clone();
    let mut annotations: BTreeMap<String, String> =
        pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(
        CONFIG_MIRROR_ANNOTATION_KEY.to_string(),
        get_pod_hash(pod).to_string(),
    );
    copy.metadata.annotations = Some(annotations);
    copy.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_string(),
        kind: "Node".to_string(),
        name: node_name.to_string(),
        uid: node_uid.to_string(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    copy
}

#[async_trait]
impl MirrorClient for BasicMirrorClient {
    async fn create_mirror_pod(&self, pod: &Pod) -> Result<(), MirrorError> {
        let node_uid = self.node_uid().await?;
        let mirror = mirror_pod_for(pod, &self.node_name, &node_uid);
        let namespace = mirror.metadata.namespace.clone().unwrap_or_default();
        Api::<Pod>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &mirror)
            .await
            .map(|_| ())
            .map_err(|e| MirrorError::Create {
                namespace,
                name: mirror.metadata.name.clone().unwrap_or_default(),
                source: Box::new(e),
            })
    }

    async fn delete_mirror_pod(
        &self,
        pod_full_name: &str,
        uid: Option<&str>,
    ) -> Result<bool, MirrorError> {
        let (name, namespace) = parse_pod_full_name(pod_full_name).inspect_err(|e| {
            tracing::error!(err = %e, pod_full_name, "Failed to parse a pod full name");
        })?;
        crate::vlog!(2, pod = %format!("{namespace}/{name}"), pod_uid = uid.unwrap_or(""), "Deleting a mirror pod");
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: uid.map(str::to_string),
                resource_version: None,
            }),
            ..Default::default()
        };
        match Api::<Pod>::namespaced(self.client.clone(), &namespace)
            .delete(&name, &params)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.is_not_found() || s.code == 409 => Ok(false),
            Err(e) => {
                tracing::error!(err = %e, pod = %format!("{namespace}/{name}"), "Failed deleting a mirror pod");
                Ok(false)
            }
        }
    }
}

/// The mirror step of syncing a static pod: an outdated or terminating
/// mirror is deleted; a missing (or just deleted) one is created unless the
/// Node is gone or being deleted. `node` is the kubelet's Node (None when it
/// cannot be read). Pods not from a static source are left alone.
pub async fn sync_mirror_pod(
    client: &dyn MirrorClient,
    pod: &Pod,
    mirror: Option<&Pod>,
    node: Option<&Node>,
) {
    if !is_static_pod(pod) {
        return;
    }
    let pod_ref = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    );
    let mut deleted = false;
    if let Some(mirror) = mirror
        && (mirror.metadata.deletion_timestamp.is_some()
            || !PodManager::is_mirror_pod_of(mirror, pod))
    {
        let mirror_uid = mirror.metadata.uid.as_deref();
        tracing::info!(pod = %pod_ref, pod_uid = mirror_uid.unwrap_or(""), "Trying to delete pod");
        match client
            .delete_mirror_pod(&get_pod_full_name(pod), mirror_uid)
            .await
        {
            Ok(true) => {
                deleted = true;
                tracing::info!(pod = %pod_ref, "Deleted mirror pod because it is outdated");
            }
            Ok(false) => {}
            Err(e) => tracing::error!(err = %e, pod = %pod_ref, "Failed deleting mirror pod"),
        }
    }
    if mirror.is_some() && !deleted {
        return;
    }
    match node {
        Some(n) if n.metadata.deletion_timestamp.is_none() => {
            crate::vlog!(4, pod = %pod_ref, "Creating a mirror pod for static pod");
            if let Err(e) = client.create_mirror_pod(pod).await {
                tracing::error!(err = %e, pod = %pod_ref, "Failed creating a mirror pod for");
            }
        }
        _ => {
            crate::vlog!(
                4,
                "No need to create a mirror pod, since node has been removed from the cluster"
            );
        }
    }
}

/// Housekeeping: deletes mirror pods whose static pod is gone, unless the
/// static pod is still terminating (`is_terminating` by full name).
pub async fn delete_orphaned_mirror_pods(
    client: &dyn MirrorClient,
    pods: &PodManager,
    is_terminating: impl Fn(&str) -> bool,
) {
    for full_name in pods.get_orphaned_mirror_pod_names() {
        if is_terminating(&full_name) {
            continue;
        }
        match client.delete_mirror_pod(&full_name, None).await {
            Ok(_) => crate::vlog!(3, pod_name = %full_name, "Deleted pod"),
            Err(e) => {
                tracing::error!(err = %e, pod_name = %full_name, "Encountered error when deleting mirror pod")
            }
        }
    }
}

#[cfg(test)]
#[path = "mirror_client_tests.rs"]
mod tests;
