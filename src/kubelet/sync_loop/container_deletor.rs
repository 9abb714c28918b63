//! Removes a pod's dead containers when one dies (Go's podContainerDeletor):
//! the exited instances of that container beyond the newest N are deleted
//! in the background; all of them once the pod's content may go.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::kubelet::container::{ContainerId, ContainerState, ContainerStatus, PodStatus, Runtime};
use crate::util::lifecycle::TaskSet;

/// Requests beyond this many pending are dropped (logged), as in Go.
pub const CONTAINER_DELETOR_BUFFER_LIMIT: usize = 50;
/// At least this many dead instances are kept per container.
pub const MIN_DEAD_CONTAINER_IN_POD: i32 = 1;

/// The exited containers to delete: those named like `filter_id` (all
/// exited ones when no filter), newest `keep` kept.
pub fn containers_to_delete(filter_id: &str, status: &PodStatus, keep: usize) -> Vec<ContainerId> {
    let matched: Option<&ContainerStatus> = if filter_id.is_empty() {
        None
    } else {
        match status
            .container_statuses
            .iter()
            .find(|c| c.id.id == filter_id)
        {
            Some(c) => Some(c),
            None => {
                tracing::info!(
                    container_id = filter_id,
                    "Container not found in pod's containers"
                );
                return Vec::new();
            }
        }
    };
    let mut candidates: Vec<&ContainerStatus> = status
        .container_statuses
        .iter()
        .filter(|c| c.state == ContainerState::Exited)
        .filter(|c| matched.is_none_or(|m| m.name == c.name))
        .collect();
    if candidates.len() <= keep {
        return Vec::new();
    }
    candidates.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    candidates[keep..].iter().map(|c| c.id.clone()).collect()
}

/// Queues container deletions for a background task.
#[derive(Clone)]
pub struct ContainerDeletor {
    tx: mpsc::Sender<ContainerId>,
    keep: usize,
}

/// The receiving half, started with [`ContainerDeletorTask::start`].
pub struct ContainerDeletorTask {
    rx: mpsc::Receiver<ContainerId>,
    runtime: Arc<dyn Runtime>,
}

impl ContainerDeletor {
    /// `max_per_pod_container` is the GC policy's; at least one instance is kept.
    pub fn new(
        runtime: Arc<dyn Runtime>,
        max_per_pod_container: i32,
    ) -> (Self, ContainerDeletorTask) {
        let (tx, rx) = mpsc::channel(CONTAINER_DELETOR_BUFFER_LIMIT);
        let keep = max_per_pod_container.max(MIN_DEAD_CONTAINER_IN_POD) as usize;
        (
            ContainerDeletor { tx, keep },
            ContainerDeletorTask { rx, runtime },
        )
    }

    /// Deletes dead instances of the container `filter_id` (or of every
    /// container when `remove_all`).
    pub fn delete_containers_in_pod(&self, filter_id: &str, status: &PodStatus, remove_all: bool) {
        let (keep, filter) = if remove_all {
            (0, "")
        } else {
            (self.keep, filter_id)
        };
        for id in containers_to_delete(filter, status, keep) {
            if self.tx.try_send(id.clone()).is_err() {
                tracing::info!(container_id = %id, "Failed to issue the request to remove container");
            }
        }
    }
}

impl ContainerDeletorTask {
    pub fn start(self, tasks: &TaskSet) {
        let stop = tasks.token();
        let ContainerDeletorTask { mut rx, runtime } = self;
        tasks.spawn("container-deletor", async move {
            loop {
                let id = tokio::select! {
                    _ = stop.cancelled() => return,
                    id = rx.recv() => match id { Some(id) => id, None => return },
                };
                if let Err(e) = runtime.delete_container(&id).await {
                    tracing::info!(container_id = %id, err = %e, "DeleteContainer returned error");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn c(name: &str, id: &str, state: ContainerState, age: u64) -> ContainerStatus {
        ContainerStatus {
            id: ContainerId::new("containerd", id),
            name: name.into(),
            state,
            created_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1000 - age)),
            started_at: None,
            finished_at: None,
            exit_code: 1,
            image: String::new(),
            image_id: String::new(),
            hash: 0,
            restart_count: 0,
            reason: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn selection_table() {
        let status = PodStatus {
            id: "u".into(),
            container_statuses: vec![
                c("a", "a-run", ContainerState::Running, 0),
                c("a", "a1", ContainerState::Exited, 10),
                c("a", "a2", ContainerState::Exited, 20),
                c("a", "a3", ContainerState::Exited, 30),
                c("b", "b1", ContainerState::Exited, 15),
            ],
            ..Default::default()
        };
        let ids = |v: Vec<ContainerId>| v.into_iter().map(|i| i.id).collect::<Vec<_>>();
        let cases: [(&str, usize, Vec<&str>); 5] = [
            ("a1", 1, vec!["a2", "a3"]),
            ("a1", 3, vec![]),
            ("b1", 0, vec!["b1"]),
            ("", 1, vec!["b1", "a2", "a3"]),
            ("missing", 0, vec![]),
        ];
        for (filter, keep, want) in cases {
            assert_eq!(
                ids(containers_to_delete(filter, &status, keep)),
                want,
                "{filter} keep {keep}"
            );
        }
    }
}
