//! Probe results (Go's prober/results): the latest result per container, and
//! a stream of changes the syncLoop consumes. The kuberuntime manager reads
//! liveness and startup results when it decides which containers to restart;
//! the status code reads readiness.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::mpsc;

use crate::kubelet::container::{ContainerId, PodUid};

/// The outcome of the latest probe of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Unknown,
    Success,
    Failure,
}

impl ProbeResult {
    pub fn as_str(&self) -> &'static str {
        match self {
            ProbeResult::Unknown => "UNKNOWN",
            ProbeResult::Success => "Success",
            ProbeResult::Failure => "Failure",
        }
    }
}

/// A change of a container's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultUpdate {
    pub container_id: ContainerId,
    pub result: ProbeResult,
    pub pod_uid: PodUid,
}

/// Results of one probe kind (liveness, readiness or startup).
#[derive(Debug)]
pub struct ResultsManager {
    cache: Mutex<HashMap<ContainerId, ProbeResult>>,
    updates: mpsc::UnboundedSender<ResultUpdate>,
}

impl ResultsManager {
    /// A manager and the receiving end of its change stream (taken once, by
    /// the syncLoop).
    pub fn new() -> (Self, mpsc::UnboundedReceiver<ResultUpdate>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                cache: Mutex::new(HashMap::new()),
                updates: tx,
            },
            rx,
        )
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ContainerId, ProbeResult>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, id: &ContainerId) -> Option<ProbeResult> {
        self.lock().get(id).copied()
    }

    /// Records a result; a change is also sent on the update stream.
    pub fn set(&self, id: &ContainerId, result: ProbeResult, pod_uid: &str) {
        let changed = {
            let mut cache = self.lock();
            cache.insert(id.clone(), result) != Some(result)
        };
        if changed {
            // The receiver lives as long as the syncLoop; after shutdown
            // nobody needs the update.
            let _ = self.updates.send(ResultUpdate {
                container_id: id.clone(),
                result,
                pod_uid: pod_uid.to_string(),
            });
        }
    }

    pub fn remove(&self, id: &ContainerId) {
        self.lock().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_are_streamed() {
        let (m, mut rx) = ResultsManager::new();
        let id = ContainerId::new("containerd", "c1");
        assert_eq!(m.get(&id), None);
        m.set(&id, ProbeResult::Success, "uid");
        m.set(&id, ProbeResult::Success, "uid");
        m.set(&id, ProbeResult::Failure, "uid");
        assert_eq!(m.get(&id), Some(ProbeResult::Failure));
        let got: Vec<ProbeResult> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|u| u.result)
            .collect();
        assert_eq!(got, vec![ProbeResult::Success, ProbeResult::Failure]);
        m.remove(&id);
        assert_eq!(m.get(&id), None);
    }
}
