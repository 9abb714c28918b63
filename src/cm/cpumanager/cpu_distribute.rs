//! Spreading CPUs evenly over NUMA nodes (Go's
//! takeByTopologyNUMADistributed, the alpha option
//! `distribute-cpus-across-numa`): the fewest NUMA nodes that can hold the
//! request, in the combination that leaves the free CPUs of all nodes most
//! even; each node's share is then packed by topology. CPUs move in groups
//! (`cpu_group_size`: whole cores with `full-pcpus-only`).

use std::collections::BTreeMap;

use super::cpu_assignment::{Accumulator, take_by_topology};
use super::error::CpuManagerError;
use super::topology::CpuTopology;
use crate::cm::cpuset::CpuSet;

/// Calls `f` with every `k`-combination of `n` in order, until it says stop.
fn iterate_combinations(n: &[u32], k: usize, f: &mut dyn FnMut(&[u32]) -> bool) {
    fn helper(
        n: &[u32],
        k: usize,
        start: usize,
        accum: &mut Vec<u32>,
        f: &mut dyn FnMut(&[u32]) -> bool,
    ) -> bool {
        if k == 0 {
            return f(accum);
        }
        for i in start..=n.len().saturating_sub(k) {
            if i >= n.len() {
                break;
            }
            accum.push(n[i]);
            let go_on = helper(n, k - 1, i + 1, accum, f);
            accum.pop();
            if !go_on {
                return false;
            }
        }
        true
    }
    if k >= 1 && k <= n.len() {
        helper(n, k, 0, &mut Vec::new(), f);
    }
}

/// Population standard deviation, rounded to thousandths as Go does.
fn standard_deviation(xs: &[i64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let len = xs.len() as f64;
    let mean = (xs.iter().sum::<i64>() as f64 / len * 1000.0).round() / 1000.0;
    let var = xs.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / len;
    (var.sqrt() * 1000.0).round() / 1000.0
}

/// Free CPUs per NUMA node after taking `group`-sized chunks from `subset`
/// until `remainder` is covered (`None` when it cannot be).
fn spread_remainder(
    after: &BTreeMap<u32, i64>,
    subset: &[u32],
    mut remainder: i64,
    group: i64,
) -> Option<BTreeMap<u32, i64>> {
    let mut after = after.clone();
    while remainder > 0 {
        let mut progressed = false;
        for numa in subset {
            if remainder == 0 {
                break;
            }
            let free = after.get_mut(numa)?;
            if *free < group {
                continue;
            }
            *free -= group;
            remainder -= group;
            progressed = true;
        }
        if !progressed {
            return None;
        }
    }
    Some(after)
}

struct Choice {
    balance: f64,
    combo: Vec<u32>,
    remainder: Vec<u32>,
}

/// Takes `num_cpus` of `available`, balanced over NUMA nodes.
pub fn take_by_topology_numa_distributed(
    topo: &CpuTopology,
    available: &CpuSet,
    num_cpus: usize,
    cpu_group_size: usize,
) -> Result<CpuSet, CpuManagerError> {
    let group = cpu_group_size.max(1);
    if !num_cpus.is_multiple_of(group) {
        return take_by_topology(topo, available, num_cpus);
    }
    let mut acc = Accumulator::new(topo, available, num_cpus);
    if acc.is_satisfied() {
        return Ok(acc.result.clone());
    }
    if acc.is_failed() {
        return Err(CpuManagerError::NotEnoughCpus);
    }
    let numas = acc.sorted_numa_nodes();
    let (min_numas, max_numas) = acc.numa_nodes_needed(group);
    let free_in = |acc: &Accumulator, numa: u32| acc.details.cpus_in_numa_nodes(&[numa]).len();
    let (num, group_i) = (num_cpus as i64, group as i64);
    for k in min_numas..=max_numas {
        let mut best: Option<Choice> = None;
        iterate_combinations(&numas, k, &mut |combo| {
            if best.as_ref().is_some_and(|b| b.balance == 0.0) {
                return false;
            }
            if acc.details.cpus_in_numa_nodes(combo).len() < num_cpus {
                return true;
            }
            let groups: usize = combo.iter().map(|n| free_in(&acc, *n) / group).sum();
            if groups * group < num_cpus {
                return true;
            }
            let distribution = (num_cpus / combo.len() / group) * group;
            if combo.iter().any(|n| free_in(&acc, *n) < distribution) {
                return true;
            }
            let mut after: BTreeMap<u32, i64> = numas
                .iter()
                .map(|n| (*n, free_in(&acc, *n) as i64))
                .collect();
            for n in combo {
                if let Some(v) = after.get_mut(n) {
                    *v -= distribution as i64;
                }
            }
            let remainder = num - (distribution * combo.len()) as i64;
            let remainder_combo: Vec<u32> = combo
                .iter()
                .copied()
                .filter(|n| after.get(n).is_some_and(|v| *v >= group_i))
                .collect();
            let mut local: Option<(f64, Vec<u32>)> = None;
            if remainder == 0 {
                let values: Vec<i64> = after.values().copied().collect();
                local = Some((standard_deviation(&values), Vec::new()));
            }
            let mut size = remainder_combo.len();
            while remainder > 0 && size >= 1 {
                iterate_combinations(&remainder_combo, size, &mut |subset| {
                    let free: i64 = subset.iter().filter_map(|n| after.get(n)).sum();
                    if free < remainder {
                        return true;
                    }
                    if let Some(spread) = spread_remainder(&after, subset, remainder, group_i) {
                        let values: Vec<i64> = spread.values().copied().collect();
                        let balance = standard_deviation(&values);
                        if local.as_ref().is_none_or(|(b, _)| balance < *b) {
                            local = Some((balance, subset.to_vec()));
                        }
                    }
                    true
                });
                size -= 1;
            }
            if let Some((balance, remainder)) = local
                && best.as_ref().is_none_or(|b| balance < b.balance)
            {
                best = Some(Choice {
                    balance,
                    combo: combo.to_vec(),
                    remainder,
                });
            }
            true
        });
        let Some(best) = best else { continue };
        let distribution = (num_cpus / best.combo.len() / group) * group;
        for numa in &best.combo {
            let share = acc.details.cpus_in_numa_nodes(&[*numa]);
            let cpus = take_by_topology(topo, &share, distribution).unwrap_or_default();
            acc.take(&cpus);
        }
        let mut remainder = num - (distribution * best.combo.len()) as i64;
        while remainder > 0 {
            let mut progressed = false;
            for numa in &best.remainder {
                if remainder == 0 {
                    break;
                }
                let share = acc.details.cpus_in_numa_nodes(&[*numa]);
                if share.len() < group {
                    continue;
                }
                let cpus = take_by_topology(topo, &share, group).unwrap_or_default();
                acc.take(&cpus);
                remainder -= group_i;
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        return match acc.needed() {
            0 => Ok(acc.result.clone()),
            n if n > 0 => Err(CpuManagerError::Accounting {
                detail: "not enough CPUs allocated",
                remaining: n,
            }),
            n => Err(CpuManagerError::Accounting {
                detail: "too many CPUs allocated",
                remaining: n,
            }),
        };
    }
    take_by_topology(topo, available, num_cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deviation_and_combinations() {
        assert_eq!(standard_deviation(&[0, 4]), 2.0);
        assert_eq!(standard_deviation(&[1, 1, 1]), 0.0);
        let mut seen = Vec::new();
        iterate_combinations(&[1, 2, 3], 2, &mut |c| {
            seen.push(c.to_vec());
            true
        });
        assert_eq!(seen, vec![vec![1, 2], vec![1, 3], vec![2, 3]]);
        let mut first = Vec::new();
        iterate_combinations(&[1, 2, 3], 1, &mut |c| {
            first.push(c[0]);
            false
        });
        assert_eq!(first, vec![1]);
    }
}
