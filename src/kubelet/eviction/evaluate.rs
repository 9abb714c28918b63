//! The threshold arithmetic of one synchronize pass: which thresholds the
//! observations meet (optionally counting minimum reclaim), when each was
//! first met, which node conditions they raise and how long a condition
//! stays after its threshold clears, and which thresholds are past their
//! grace period.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::signals::SignalObservations;
use super::threshold::{Signal, Threshold, ThresholdValue, get_threshold_quantity};

/// A node condition eviction reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeConditionType {
    MemoryPressure,
    DiskPressure,
    PidPressure,
}

impl NodeConditionType {
    pub fn as_str(&self) -> &'static str {
        match self {
            NodeConditionType::MemoryPressure => "MemoryPressure",
            NodeConditionType::DiskPressure => "DiskPressure",
            NodeConditionType::PidPressure => "PIDPressure",
        }
    }

    /// The condition a signal raises.
    pub fn of(signal: Signal) -> Self {
        match signal {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => {
                NodeConditionType::MemoryPressure
            }
            Signal::PidAvailable => NodeConditionType::PidPressure,
            _ => NodeConditionType::DiskPressure,
        }
    }
}

/// Formats conditions the way Go prints a slice of them: `[A B]`.
pub fn format_conditions(conditions: &[NodeConditionType]) -> String {
    let names: Vec<&str> = conditions.iter().map(|c| c.as_str()).collect();
    format!("[{}]", names.join(" "))
}

/// The thresholds whose signal is below its threshold quantity. With
/// `enforce_min_reclaim`, the quantity is raised by the minimum reclaim, so
/// a threshold stays met until that much more is available.
pub fn thresholds_met(
    thresholds: &[Threshold],
    observations: &SignalObservations,
    enforce_min_reclaim: bool,
) -> Vec<Threshold> {
    let mut out = Vec::new();
    for t in thresholds {
        let Some(observed) = observations.get(&t.signal) else {
            tracing::info!(signal = %t.signal, "Eviction manager: no observation found for eviction signal");
            continue;
        };
        let mut quantity = get_threshold_quantity(&t.value, &observed.capacity);
        if enforce_min_reclaim && let Some(min) = &t.min_reclaim {
            quantity = quantity.add(&get_threshold_quantity(min, &observed.capacity));
        }
        if quantity.cmp_value(&observed.available).is_gt() {
            out.push(t.clone());
        }
    }
    out
}

fn same_threshold(a: &Threshold, b: &Threshold) -> bool {
    a.signal == b.signal
        && a.operator == b.operator
        && a.grace_period == b.grace_period
        && same_value(&a.value, &b.value)
}

fn same_value(a: &ThresholdValue, b: &ThresholdValue) -> bool {
    match (a, b) {
        (ThresholdValue::Quantity(x), ThresholdValue::Quantity(y)) => x.cmp_value(y).is_eq(),
        (ThresholdValue::Percentage(x), ThresholdValue::Percentage(y)) => x == y,
        _ => false,
    }
}

/// `a` plus the thresholds of `b` not already in it.
pub fn merge_thresholds(a: Vec<Threshold>, b: Vec<Threshold>) -> Vec<Threshold> {
    let mut out = a;
    for t in b {
        if !out.iter().any(|x| same_threshold(x, &t)) {
            out.push(t);
        }
    }
    out
}

/// When each threshold was first met: kept from `last` when it was already
/// met, `now` otherwise; thresholds no longer met are dropped.
pub fn thresholds_first_observed_at(
    thresholds: &[Threshold],
    last: &[(Threshold, Instant)],
    now: Instant,
) -> Vec<(Threshold, Instant)> {
    thresholds
        .iter()
        .map(|t| {
            let at = last
                .iter()
                .find(|(x, _)| same_threshold(x, t))
                .map_or(now, |(_, at)| *at);
            (t.clone(), at)
        })
        .collect()
}

/// The distinct conditions the thresholds raise, in order of appearance.
pub fn node_conditions(thresholds: &[Threshold]) -> Vec<NodeConditionType> {
    let mut out = Vec::new();
    for t in thresholds {
        let c = NodeConditionType::of(t.signal);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Conditions observed now get `now`; the others keep their last time.
pub fn node_conditions_last_observed_at(
    conditions: &[NodeConditionType],
    last: &BTreeMap<NodeConditionType, Instant>,
    now: Instant,
) -> BTreeMap<NodeConditionType, Instant> {
    let mut out = last.clone();
    for c in conditions {
        out.insert(*c, now);
    }
    out
}

/// The conditions observed within the last `period` (the pressure
/// transition period): a condition stays until its signal has been fine for
/// that long.
pub fn node_conditions_observed_since(
    observed_at: &BTreeMap<NodeConditionType, Instant>,
    period: Duration,
    now: Instant,
) -> Vec<NodeConditionType> {
    observed_at
        .iter()
        .filter(|(_, at)| now.saturating_duration_since(**at) < period)
        .map(|(c, _)| *c)
        .collect()
}

/// The thresholds met for at least their grace period.
pub fn thresholds_met_grace_period(
    observed_at: &[(Threshold, Instant)],
    now: Instant,
) -> Vec<Threshold> {
    observed_at
        .iter()
        .filter(|(t, at)| now.saturating_duration_since(*at) >= t.grace_period)
        .map(|(t, _)| t.clone())
        .collect()
}

/// The thresholds whose signal has stats newer than the last pass (or no
/// last observation, or no time at all): acting twice on the same stale
/// numbers would evict more than needed.
pub fn thresholds_updated_stats(
    thresholds: &[Threshold],
    observations: &SignalObservations,
    last: &SignalObservations,
) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            let Some(observed) = observations.get(&t.signal) else {
                tracing::info!(signal = %t.signal, "Eviction manager: no observation found for eviction signal");
                return false;
            };
            match (last.get(&t.signal), observed.time) {
                (None, _) | (_, None) => true,
                (Some(prev), Some(time)) => prev.time.is_none_or(|p| time > p),
            }
        })
        .cloned()
        .collect()
}

/// Orders thresholds so memory signals come first (stable otherwise).
pub fn sort_by_eviction_priority(thresholds: &mut [Threshold]) {
    thresholds.sort_by_key(|t| {
        !matches!(
            t.signal,
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable
        )
    });
}

#[cfg(test)]
#[path = "evaluate_tests.rs"]
mod tests;
