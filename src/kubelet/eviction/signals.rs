//! Observations: what each eviction signal reads from a stats summary
//! (capacity and what is available), and the per-pod stats lookup the
//! ranking and messages use.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;

use super::threshold::Signal;
use crate::kubelet::stats::{MemoryStats, PodStats, Summary};
use crate::util::quantity::Quantity;

/// One signal's observed capacity and availability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignalObservation {
    pub capacity: Quantity,
    pub available: Quantity,
    /// When the underlying stats were taken (`None`: unknown).
    pub time: Option<SystemTime>,
}

/// Observations by signal.
pub type SignalObservations = BTreeMap<Signal, SignalObservation>;

/// Pod stats by pod UID, as the summary reported them.
#[derive(Debug, Clone, Default)]
pub struct PodStatsIndex {
    by_uid: HashMap<String, PodStats>,
}

impl PodStatsIndex {
    pub fn new(pods: &[PodStats]) -> Self {
        PodStatsIndex {
            by_uid: pods.iter().map(|p| (p.uid.clone(), p.clone())).collect(),
        }
    }

    /// The stats of `pod`, when the summary had them.
    pub fn get(&self, pod: &Pod) -> Option<&PodStats> {
        self.by_uid.get(pod.metadata.uid.as_deref()?)
    }
}

fn memory_observation(m: &MemoryStats) -> Option<SignalObservation> {
    let available = m.available_bytes?;
    let ws = m.working_set_bytes?;
    Some(SignalObservation {
        available: Quantity::from_binary(available as i64),
        capacity: Quantity::from_binary((available + ws) as i64),
        time: m.time,
    })
}

/// The observations a summary supports (a signal whose stats are missing is
/// left out), and the per-pod stats lookup.
pub fn make_signal_observations(summary: &Summary) -> (SignalObservations, PodStatsIndex) {
    let mut out = SignalObservations::new();
    let node = &summary.node;
    if let Some(o) = node.memory.as_ref().and_then(memory_observation) {
        out.insert(Signal::MemoryAvailable, o);
    }
    match node.allocatable_memory.as_ref() {
        Some(m) => {
            if let Some(o) = memory_observation(m) {
                out.insert(Signal::AllocatableMemoryAvailable, o);
            }
        }
        None => crate::vlog!(
            4,
            signal = %Signal::AllocatableMemoryAvailable,
            "Eviction manager: no stats of the pods cgroup to construct the signal"
        ),
    }
    let fs_pairs = [
        (
            node.fs.as_ref(),
            Signal::NodeFsAvailable,
            Signal::NodeFsInodesFree,
        ),
        (
            node.image_fs.as_ref(),
            Signal::ImageFsAvailable,
            Signal::ImageFsInodesFree,
        ),
    ];
    for (fs, bytes_signal, inodes_signal) in fs_pairs {
        let Some(fs) = fs else { continue };
        if let (Some(avail), Some(cap)) = (fs.available_bytes, fs.capacity_bytes) {
            out.insert(
                bytes_signal,
                SignalObservation {
                    available: Quantity::from_binary(avail as i64),
                    capacity: Quantity::from_binary(cap as i64),
                    time: fs.time,
                },
            );
        }
        if let (Some(free), Some(total)) = (fs.inodes_free, fs.inodes) {
            out.insert(
                inodes_signal,
                SignalObservation {
                    available: Quantity::from_decimal(free as i64),
                    capacity: Quantity::from_decimal(total as i64),
                    time: fs.time,
                },
            );
        }
    }
    if let Some(r) = node.rlimit.as_ref()
        && let (Some(max), Some(running)) = (r.max_pid, r.num_of_running_processes)
    {
        out.insert(
            Signal::PidAvailable,
            SignalObservation {
                available: Quantity::from_decimal(max - running),
                capacity: Quantity::from_decimal(max),
                time: r.time,
            },
        );
    }
    (out, PodStatsIndex::new(&summary.pods))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::stats::{FsStats, NodeStats, RlimitStats};

    #[test]
    fn observations_from_a_summary() {
        let summary = Summary {
            node: NodeStats {
                memory: Some(MemoryStats {
                    available_bytes: Some(3 << 30),
                    working_set_bytes: Some(1 << 30),
                    ..Default::default()
                }),
                // No working set: no allocatable observation.
                allocatable_memory: Some(MemoryStats {
                    available_bytes: Some(1 << 30),
                    ..Default::default()
                }),
                fs: Some(FsStats {
                    available_bytes: Some(10),
                    capacity_bytes: Some(100),
                    inodes_free: Some(7),
                    inodes: Some(70),
                    ..Default::default()
                }),
                // Bytes only.
                image_fs: Some(FsStats {
                    available_bytes: Some(20),
                    capacity_bytes: Some(200),
                    ..Default::default()
                }),
                rlimit: Some(RlimitStats {
                    max_pid: Some(1000),
                    num_of_running_processes: Some(300),
                    ..Default::default()
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                uid: "u1".into(),
                ..Default::default()
            }],
        };
        let (obs, pods) = make_signal_observations(&summary);
        let keys: Vec<Signal> = obs.keys().copied().collect();
        assert_eq!(
            keys,
            vec![
                Signal::MemoryAvailable,
                Signal::NodeFsAvailable,
                Signal::NodeFsInodesFree,
                Signal::ImageFsAvailable,
                Signal::PidAvailable
            ]
        );
        let m = &obs[&Signal::MemoryAvailable];
        assert_eq!(
            (m.available.value(), m.capacity.value()),
            (3 << 30, 4 << 30)
        );
        assert_eq!(m.capacity.to_string(), "4Gi");
        let i = &obs[&Signal::NodeFsInodesFree];
        assert_eq!((i.available.value(), i.capacity.value()), (7, 70));
        let p = &obs[&Signal::PidAvailable];
        assert_eq!((p.available.value(), p.capacity.value()), (700, 1000));
        let mut pod = Pod::default();
        pod.metadata.uid = Some("u1".into());
        assert!(pods.get(&pod).is_some());
        pod.metadata.uid = Some("u2".into());
        assert!(pods.get(&pod).is_none());
    }
}
