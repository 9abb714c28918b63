//! The pending updates between the merger and the sync loop.
//!
//! Go hands merged updates to the sync loop through a channel of 50; when the
//! sync loop is slow, every source blocks behind it. Here a source never
//! waits and nothing is lost: pending changes are kept per pod and folded
//! together (an ADD then an UPDATE is still one ADD, with the newest pod; an
//! ADD then a REMOVE cancels out; a REMOVE then an ADD of the same UID is an
//! UPDATE), so the queue never holds more than one entry per pod plus one
//! "source seen" marker per source. Updates come out in the order their pods
//! first became pending, batched per operation and source.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::types::{PodOperation, PodUpdate};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Pod {
        source: String,
        uid: String,
    },
    /// An empty ADD telling the sync loop that a source has been seen.
    SourceSeen(String),
}

#[derive(Debug)]
struct Entry {
    op: PodOperation,
    source: String,
    pod: Option<Arc<Pod>>,
}

/// Coalescing FIFO of pod updates.
#[derive(Debug, Default)]
pub struct UpdateQueue {
    order: VecDeque<Key>,
    pending: HashMap<Key, Entry>,
}

/// What a pending operation becomes when another one arrives for the same pod;
/// `None` when the two cancel out.
fn fold(old: PodOperation, new: PodOperation) -> Option<PodOperation> {
    use PodOperation::*;
    match (old, new) {
        (Add, Remove) => None,
        (Add, _) => Some(Add),
        (Remove, Add) => Some(Update),
        (Remove, other) => Some(other),
        (_, Remove) => Some(Remove),
        (Delete, _) | (_, Delete) => Some(Delete),
        (Update, _) | (_, Update) => Some(Update),
        (Reconcile, Reconcile) => Some(Reconcile),
        (Set, other) | (other, Set) => Some(other),
        (other, _) => Some(other),
    }
}

impl UpdateQueue {
    /// Number of pending entries (pods plus markers).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Queues an update. An update without pods marks its source as seen.
    pub fn push(&mut self, update: PodUpdate) {
        if update.pods.is_empty() {
            let key = Key::SourceSeen(update.source.clone());
            if !self.pending.contains_key(&key) {
                self.order.push_back(key.clone());
                self.pending.insert(
                    key,
                    Entry {
                        op: update.op,
                        source: update.source,
                        pod: None,
                    },
                );
            }
            return;
        }
        for pod in update.pods {
            let key = Key::Pod {
                source: update.source.clone(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            };
            match self.pending.get_mut(&key) {
                None => {
                    self.order.push_back(key.clone());
                    self.pending.insert(
                        key,
                        Entry {
                            op: update.op,
                            source: update.source.clone(),
                            pod: Some(pod),
                        },
                    );
                }
                Some(entry) => match fold(entry.op, update.op) {
                    Some(op) => {
                        entry.op = op;
                        entry.pod = Some(pod);
                    }
                    None => {
                        self.pending.remove(&key);
                        self.order.retain(|k| *k != key);
                    }
                },
            }
        }
    }

    /// The oldest pending change, with every other pending change of the
    /// same operation and source.
    pub fn pop(&mut self) -> Option<PodUpdate> {
        let first = self.order.pop_front()?;
        let entry = self.pending.remove(&first)?;
        let mut update = PodUpdate {
            pods: entry.pod.into_iter().collect(),
            op: entry.op,
            source: entry.source,
        };
        if matches!(first, Key::SourceSeen(_)) {
            return Some(update);
        }
        let mut rest = VecDeque::with_capacity(self.order.len());
        for key in self.order.drain(..) {
            let same = matches!(key, Key::Pod { .. })
                && self
                    .pending
                    .get(&key)
                    .is_some_and(|e| e.op == update.op && e.source == update.source);
            if same {
                if let Some(e) = self.pending.remove(&key) {
                    update.pods.extend(e.pod);
                }
            } else {
                rest.push_back(key);
            }
        }
        self.order = rest;
        Some(update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PodOperation::*;

    fn pod(uid: &str, hostname: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            hostname: Some(hostname.into()),
            ..Default::default()
        });
        Arc::new(p)
    }

    fn update(op: PodOperation, source: &str, pods: &[(&str, &str)]) -> PodUpdate {
        PodUpdate {
            pods: pods.iter().map(|(u, h)| pod(u, h)).collect(),
            op,
            source: source.into(),
        }
    }

    fn drain(q: &mut UpdateQueue) -> Vec<(PodOperation, String, Vec<String>)> {
        std::iter::from_fn(|| q.pop())
            .map(|u| {
                let pods = u
                    .pods
                    .iter()
                    .map(|p| {
                        format!(
                            "{}:{}",
                            p.metadata.uid.as_deref().unwrap_or(""),
                            p.spec
                                .as_ref()
                                .and_then(|s| s.hostname.as_deref())
                                .unwrap_or("")
                        )
                    })
                    .collect();
                (u.op, u.source, pods)
            })
            .collect()
    }

    #[test]
    fn folding_table() {
        let cases = [
            (Add, Update, Some(Add)),
            (Add, Reconcile, Some(Add)),
            (Add, Delete, Some(Add)),
            (Add, Remove, None),
            (Update, Update, Some(Update)),
            (Update, Reconcile, Some(Update)),
            (Reconcile, Update, Some(Update)),
            (Reconcile, Reconcile, Some(Reconcile)),
            (Update, Delete, Some(Delete)),
            (Delete, Update, Some(Delete)),
            (Update, Remove, Some(Remove)),
            (Delete, Remove, Some(Remove)),
            (Remove, Add, Some(Update)),
        ];
        for (old, new, want) in cases {
            assert_eq!(fold(old, new), want, "{old} then {new}");
        }
    }

    #[test]
    fn batches_keep_first_pending_order_and_newest_pods() {
        let mut q = UpdateQueue::default();
        q.push(update(Add, "file", &[("a", "1"), ("b", "1")]));
        q.push(update(Update, "file", &[("a", "2")]));
        q.push(update(Remove, "api", &[("x", "1")]));
        q.push(update(Add, "file", &[]));
        q.push(update(Update, "file", &[("c", "1")]));
        q.push(update(Add, "file", &[("d", "1")]));
        assert_eq!(q.len(), 6);
        assert_eq!(
            drain(&mut q),
            vec![
                (
                    Add,
                    "file".to_string(),
                    vec!["a:2".to_string(), "b:1".to_string(), "d:1".to_string()]
                ),
                (Remove, "api".to_string(), vec!["x:1".to_string()]),
                (Add, "file".to_string(), vec![]),
                (Update, "file".to_string(), vec!["c:1".to_string()]),
            ]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn cancelled_and_revived_pods() {
        let mut q = UpdateQueue::default();
        q.push(update(Add, "file", &[("a", "1")]));
        q.push(update(Remove, "file", &[("a", "1")]));
        assert!(q.is_empty());
        q.push(update(Remove, "file", &[("b", "1")]));
        q.push(update(Add, "file", &[("b", "2")]));
        assert_eq!(
            drain(&mut q),
            vec![(Update, "file".to_string(), vec!["b:2".to_string()])]
        );
    }

    #[test]
    fn the_queue_is_bounded_by_pods_not_by_updates() {
        let mut q = UpdateQueue::default();
        for i in 0..1000 {
            q.push(update(Update, "file", &[("a", &i.to_string()), ("b", "x")]));
            q.push(update(Add, "file", &[]));
        }
        assert_eq!(q.len(), 3);
        assert_eq!(
            drain(&mut q),
            vec![
                (
                    Update,
                    "file".to_string(),
                    vec!["a:999".to_string(), "b:x".to_string()]
                ),
                (Add, "file".to_string(), vec![]),
            ]
        );
    }
}
