//! The node shutdown manager over the pod workers and the prober, on the
//! system bus; none when graceful shutdown is off (its gate, or no grace
//! period configured).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use crate::features::{GRACEFUL_NODE_SHUTDOWN, GRACEFUL_NODE_SHUTDOWN_BASED_ON_POD_PRIORITY};
use crate::kubelet::container::format_pod;
use crate::kubelet::events::NodeEvents;
use crate::kubelet::nodeshutdown::{
    LOGIND_CONF_DIR, NODE_SHUTDOWN_MESSAGE, NODE_SHUTDOWN_REASON, ShutdownConfig, ShutdownDeps,
    ShutdownError, ShutdownKiller, ShutdownManager, ShutdownRanges, StateFile, SystemBus,
};
use crate::kubelet::pod_workers::{PodStatusFn, PodWorkers};
use crate::kubelet::prober::ProberManager;

/// Stops a pod for the shutdown through the pod workers, its probes first.
struct WorkersShutdownKiller {
    workers: PodWorkers,
    prober: ProberManager,
}

#[async_trait]
impl ShutdownKiller for WorkersShutdownKiller {
    async fn kill_for_shutdown(&self, pod: &Arc<Pod>, grace: i64) -> Result<(), ShutdownError> {
        self.prober.remove_pod(pod);
        let status_fn: PodStatusFn = Arc::new(|s| {
            if s.phase.as_deref() != Some("Succeeded") {
                s.phase = Some("Failed".into());
            }
            s.reason = Some(NODE_SHUTDOWN_REASON.into());
            s.message = Some(NODE_SHUTDOWN_MESSAGE.into());
        });
        self.workers
            .kill_pod_now(pod.clone(), false, Some(grace), Some(status_fn))
            .await
            .map_err(|e| ShutdownError::KillPod {
                pod: format_pod(pod),
                message: e.to_string(),
            })
    }
}

/// The manager, when graceful node shutdown is on.
pub(super) fn build(
    env: &super::Env,
    core: &super::lifecycle::PodCore,
    prober: &ProberManager,
) -> Option<Arc<ShutdownManager>> {
    let (server, c) = (&env.server, &env.server.config);
    if !server.feature_gate.enabled(GRACEFUL_NODE_SHUTDOWN) {
        return None;
    }
    let by_priority = server
        .feature_gate
        .enabled(GRACEFUL_NODE_SHUTDOWN_BASED_ON_POD_PRIORITY);
    let ranges = ShutdownRanges::from_config(
        &c.shutdown_grace_period_by_pod_priority,
        by_priority,
        c.shutdown_grace_period.to_std(),
        c.shutdown_grace_period_critical_pods.to_std(),
    );
    if ranges.is_empty() {
        return None;
    }
    let root = Path::new(&server.flags.root_directory);
    let active_pods = core.active_pods_fn();
    Some(ShutdownManager::new(
        ShutdownConfig {
            ranges,
            logind_conf_dir: PathBuf::from(LOGIND_CONF_DIR),
            state_file: by_priority.then(|| StateFile::in_dir(root)),
        },
        ShutdownDeps {
            bus: Arc::new(SystemBus),
            killer: Arc::new(WorkersShutdownKiller {
                workers: core.pod_workers.clone(),
                prober: prober.clone(),
            }),
            active_pods,
            events: NodeEvents::new(env.events.clone(), &env.node_name),
            clock: core.clock.clone(),
        },
    ))
}
