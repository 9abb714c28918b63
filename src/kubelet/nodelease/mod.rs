//! The node lease (component-helpers' lease controller as the kubelet runs
//! it): a Lease named after the node in kube-node-lease, owned by the Node,
//! renewed every nodeLeaseDurationSeconds/4 (4% jitter) through the
//! heartbeat client. Renewals update the last Lease written without reading
//! it; a 409 re-reads it; other failures are retried up to five times
//! (dropping the connections from the second failure on), and creating or
//! reading the Lease backs off from 200 ms to 7 s.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};

use crate::kubelet::client::HeartbeatFailureFn;
use crate::util::clock::Clock;
use crate::util::lifecycle::{Period, TaskSet};

/// The namespace of node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Renewals happen at this fraction of the lease duration.
pub const RENEW_INTERVAL_FRACTION: f64 = 0.25;
const MAX_UPDATE_RETRIES: usize = 5;
const MAX_BACKOFF: Duration = Duration::from_secs(7);

/// Errors of the lease controller.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("failed {0} attempts to update lease")]
    UpdateRetries(usize),
    #[error("getting node {node:?} to own the lease: {source}")]
    Owner { node: String, source: kube::Error },
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// The kubelet's node lease controller.
pub struct LeaseController {
    client: kube::Client,
    node_name: String,
    lease_duration_seconds: i32,
    renew_interval: Duration,
    clock: Arc<dyn Clock>,
    on_repeated_failure: Option<HeartbeatFailureFn>,
    latest: Mutex<Option<Lease>>,
}

impl std::fmt::Debug for LeaseController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseController")
            .field("node_name", &self.node_name)
            .field("renew_interval", &self.renew_interval)
            .finish_non_exhaustive()
    }
}

fn micro_now(clock: &dyn Clock) -> MicroTime {
    MicroTime(jiff::Timestamp::try_from(clock.now()).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

impl LeaseController {
    /// Build phase. `client` is the heartbeat client.
    pub fn new(
        client: kube::Client,
        node_name: &str,
        lease_duration_seconds: i32,
        clock: Arc<dyn Clock>,
        on_repeated_failure: Option<HeartbeatFailureFn>,
    ) -> Arc<Self> {
        let duration = Duration::from_secs(lease_duration_seconds.max(0) as u64);
        Arc::new(LeaseController {
            client,
            node_name: node_name.to_string(),
            lease_duration_seconds,
            renew_interval: duration.mul_f64(RENEW_INTERVAL_FRACTION),
            clock,
            on_repeated_failure,
            latest: Mutex::new(None),
        })
    }

    /// nodeLeaseDurationSeconds × 0.25.
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval
    }

    fn api(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), NODE_LEASE_NAMESPACE)
    }

    /// Spawns the renewal loop (first sync at once; Go's
    /// JitterUntil(sync, renewInterval, 0.04)).
    pub fn start(self: &Arc<Self>, tasks: &TaskSet) {
        let me = self.clone();
        let period = Period::sliding(self.renew_interval).with_jitter(0.04);
        tasks.spawn_periodic("node-lease", period, self.clock.clone(), move || {
            let me = me.clone();
            async move { me.sync().await }
        });
    }

    fn latest(&self) -> Option<Lease> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_latest(&self, l: Option<Lease>) {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = l;
    }

    /// One renewal round.
    pub async fn sync(&self) {
        if let Some(latest) = self.latest() {
            match self.retry_update(latest).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::info!(error = %e, "Failed to update lease using latest lease, fallback to ensure lease")
                }
            }
        }
        let (lease, created) = self.backoff_ensure().await;
        self.set_latest(Some(lease.clone()));
        if !created && let Err(e) = self.retry_update(lease).await {
            tracing::error!(error = %e, retry_in = ?self.renew_interval, "Failed to update lease, will retry");
        }
    }

    async fn backoff_ensure(&self) -> (Lease, bool) {
        let mut sleep = Duration::from_millis(100);
        loop {
            match self.ensure().await {
                Ok(Some(v)) => return v,
                Ok(None) => {}
                Err(e) => {
                    sleep = (sleep * 2).min(MAX_BACKOFF);
                    tracing::error!(error = %e, retry_in = ?sleep, "Failed to ensure lease exists, will retry");
                }
            }
            tokio::time::sleep(sleep).await;
        }
    }

    /// Reads the Lease, creating it when missing. `Ok(None)`: it could not
    /// be built yet (no owner), try again.
    async fn ensure(&self) -> Result<Option<(Lease, bool)>, LeaseError> {
        match self.api().get_opt(&self.node_name).await? {
            Some(l) => Ok(Some((l, false))),
            None => {
                let (lease, err) = self.new_lease(None).await;
                if let Some(e) = err {
                    tracing::error!(error = %e, node = %self.node_name, "Failed to get node when trying to set owner ref to the node lease");
                    return Ok(None);
                }
                let created = self.api().create(&PostParams::default(), &lease).await?;
                Ok(Some((created, true)))
            }
        }
    }

    async fn retry_update(&self, base: Lease) -> Result<(), LeaseError> {
        let mut base = base;
        for i in 0..MAX_UPDATE_RETRIES {
            // A lease without its owner is still renewed.
            let (lease, err) = self.new_lease(Some(&base)).await;
            if let Some(e) = err {
                tracing::error!(error = %e, node = %self.node_name, "Failed to get node when trying to set owner ref to the node lease");
            }
            match self
                .api()
                .replace(&self.node_name, &PostParams::default(), &lease)
                .await
            {
                Ok(l) => {
                    self.set_latest(Some(l));
                    return Ok(());
                }
                Err(e) => {
                    tracing::error!(error = %e, "Failed to update lease");
                    if matches!(&e, kube::Error::Api(s) if s.code == 409) {
                        base = self.backoff_ensure().await.0;
                        continue;
                    }
                    if i > 0
                        && !crate::kubelet::client::server_answered(&e)
                        && let Some(f) = &self.on_repeated_failure
                    {
                        f();
                    }
                }
            }
        }
        Err(LeaseError::UpdateRetries(MAX_UPDATE_RETRIES))
    }

    /// A fresh Lease (or a copy of `base`) renewed now, owned by the Node
    /// when the owner reference can be set (else with the error).
    async fn new_lease(&self, base: Option<&Lease>) -> (Lease, Option<LeaseError>) {
        let mut lease = match base {
            Some(b) => b.clone(),
            None => Lease {
                metadata: ObjectMeta {
                    name: Some(self.node_name.clone()),
                    namespace: Some(NODE_LEASE_NAMESPACE.into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.node_name.clone()),
                    lease_duration_seconds: Some(self.lease_duration_seconds),
                    ..Default::default()
                }),
            },
        };
        lease.spec.get_or_insert_with(Default::default).renew_time =
            Some(micro_now(self.clock.as_ref()));
        if lease
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(|o| o.is_empty())
        {
            let nodes: Api<Node> = Api::all(self.client.clone());
            match nodes.get(&self.node_name).await {
                Ok(node) => {
                    lease.metadata.owner_references = Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: self.node_name.clone(),
                        uid: node.metadata.uid.unwrap_or_default(),
                        ..Default::default()
                    }]);
                }
                Err(source) => {
                    let e = LeaseError::Owner {
                        node: self.node_name.clone(),
                        source,
                    };
                    return (lease, Some(e));
                }
            }
        }
        (lease, None)
    }
}

#[cfg(test)]
mod tests;
