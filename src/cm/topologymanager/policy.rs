//! The topology manager's policies: how the providers' hints merge into
//! one affinity, and whether a pod with that affinity is admitted.

use super::bitmask::BitMask;
use super::hint::{ProviderHints, TopologyHint};

pub const POLICY_NONE: &str = "none";
pub const POLICY_BEST_EFFORT: &str = "best-effort";
pub const POLICY_RESTRICTED: &str = "restricted";
pub const POLICY_SINGLE_NUMA_NODE: &str = "single-numa-node";

/// `topologyManagerPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    None,
    BestEffort,
    Restricted,
    SingleNumaNode,
}

impl PolicyKind {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            POLICY_NONE => PolicyKind::None,
            POLICY_BEST_EFFORT => PolicyKind::BestEffort,
            POLICY_RESTRICTED => PolicyKind::Restricted,
            POLICY_SINGLE_NUMA_NODE => PolicyKind::SingleNumaNode,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::None => POLICY_NONE,
            PolicyKind::BestEffort => POLICY_BEST_EFFORT,
            PolicyKind::Restricted => POLICY_RESTRICTED,
            PolicyKind::SingleNumaNode => POLICY_SINGLE_NUMA_NODE,
        }
    }
}

/// A policy over the machine's NUMA nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub kind: PolicyKind,
    pub numa_nodes: Vec<u32>,
}

impl Policy {
    /// The merged hint and whether the pod may be admitted with it.
    pub fn merge(&self, providers: &[ProviderHints]) -> (TopologyHint, bool) {
        let default = BitMask::of(&self.numa_nodes);
        match self.kind {
            PolicyKind::None => (TopologyHint::default(), true),
            PolicyKind::BestEffort => (merge_filtered(default, &filter(providers)), true),
            PolicyKind::Restricted => {
                let hint = merge_filtered(default, &filter(providers));
                (hint, hint.preferred)
            }
            PolicyKind::SingleNumaNode => {
                let single = filter_single_numa(filter(providers));
                let mut hint = merge_filtered(default, &single);
                if hint.numa_node_affinity == Some(default) {
                    hint.numa_node_affinity = None;
                }
                (hint, hint.preferred)
            }
        }
    }
}

/// One list of hints per resource of every provider: no preference becomes
/// "anywhere, preferred", no possible placement "anywhere, not preferred".
fn filter(providers: &[ProviderHints]) -> Vec<Vec<TopologyHint>> {
    let mut all = Vec::new();
    for hints in providers {
        if hints.is_empty() {
            tracing::info!("Hint Provider has no preference for NUMA affinity with any resource");
            all.push(vec![TopologyHint::any()]);
            continue;
        }
        for (resource, list) in hints {
            match list {
                None => {
                    tracing::info!(resource = %resource, "Hint Provider has no preference for NUMA affinity with resource");
                    all.push(vec![TopologyHint::any()]);
                }
                Some(list) if list.is_empty() => {
                    tracing::info!(resource = %resource, "Hint Provider has no possible NUMA affinities for resource");
                    all.push(vec![TopologyHint {
                        numa_node_affinity: None,
                        preferred: false,
                    }]);
                }
                Some(list) => all.push(list.clone()),
            }
        }
    }
    all
}

/// Keeps the preferred hints that name one NUMA node or none.
fn filter_single_numa(all: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    all.into_iter()
        .map(|hints| {
            hints
                .into_iter()
                .filter(|h| h.preferred && h.numa_node_affinity.is_none_or(|m| m.count() == 1))
                .collect()
        })
        .collect()
}

/// The AND of one hint from each list; preferred only when all were.
fn merge_permutation(default: BitMask, permutation: &[TopologyHint]) -> TopologyHint {
    let affinity = permutation.iter().fold(default, |acc, h| {
        acc.and(h.numa_node_affinity.unwrap_or(default))
    });
    TopologyHint::new(affinity, permutation.iter().all(|h| h.preferred))
}

/// The best merge over every permutation: preferred beats not preferred,
/// then the narrower affinity; empty affinities never win.
fn merge_filtered(default: BitMask, all: &[Vec<TopologyHint>]) -> TopologyHint {
    let mut best = TopologyHint::new(default, false);
    iterate_permutations(all, &mut Vec::new(), &mut |perm| {
        let merged = merge_permutation(default, perm);
        let (Some(affinity), Some(best_affinity)) =
            (merged.numa_node_affinity, best.numa_node_affinity)
        else {
            return;
        };
        if affinity.count() == 0 {
            return;
        }
        if merged.preferred && !best.preferred {
            best = merged;
            return;
        }
        if !merged.preferred && best.preferred {
            return;
        }
        if affinity.is_narrower_than(best_affinity) {
            best = merged;
        }
    });
    best
}

fn iterate_permutations(
    all: &[Vec<TopologyHint>],
    accum: &mut Vec<TopologyHint>,
    callback: &mut dyn FnMut(&[TopologyHint]),
) {
    let Some((first, rest)) = all.split_first() else {
        callback(accum);
        return;
    };
    for hint in first {
        accum.push(*hint);
        iterate_permutations(rest, accum, callback);
        accum.pop();
    }
}
