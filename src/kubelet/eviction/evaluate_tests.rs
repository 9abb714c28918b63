use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::*;
use crate::kubelet::eviction::signals::{SignalObservation, SignalObservations};
use crate::kubelet::eviction::threshold::{Signal, ThresholdOperator};
use crate::util::quantity::Quantity;

fn q(s: &str) -> Quantity {
    s.parse().unwrap()
}

fn threshold(
    signal: Signal,
    value: ThresholdValue,
    grace: u64,
    min: Option<ThresholdValue>,
) -> Threshold {
    Threshold {
        signal,
        operator: ThresholdOperator::LessThan,
        value,
        grace_period: Duration::from_secs(grace),
        min_reclaim: min,
    }
}

fn obs(
    signal: Signal,
    available: &str,
    capacity: &str,
    time: Option<SystemTime>,
) -> (Signal, SignalObservation) {
    (
        signal,
        SignalObservation {
            available: q(available),
            capacity: q(capacity),
            time,
        },
    )
}

#[test]
fn thresholds_met_table() {
    let mem_1gi = threshold(
        Signal::MemoryAvailable,
        ThresholdValue::Quantity(q("1Gi")),
        0,
        None,
    );
    let mem_1gi_reclaim = threshold(
        Signal::MemoryAvailable,
        ThresholdValue::Quantity(q("1Gi")),
        0,
        Some(ThresholdValue::Quantity(q("500Mi"))),
    );
    let nodefs_10pct = threshold(
        Signal::NodeFsAvailable,
        ThresholdValue::Percentage(0.1),
        0,
        None,
    );
    let nodefs_10pct_reclaim = threshold(
        Signal::NodeFsAvailable,
        ThresholdValue::Percentage(0.1),
        0,
        Some(ThresholdValue::Percentage(0.05)),
    );
    struct Case {
        name: &'static str,
        thresholds: Vec<Threshold>,
        observations: Vec<(Signal, SignalObservation)>,
        enforce_min_reclaim: bool,
        met: usize,
    }
    let cases = vec![
        Case {
            name: "no observation",
            thresholds: vec![mem_1gi.clone()],
            observations: vec![],
            enforce_min_reclaim: false,
            met: 0,
        },
        Case {
            name: "above threshold",
            thresholds: vec![mem_1gi.clone()],
            observations: vec![obs(Signal::MemoryAvailable, "2Gi", "8Gi", None)],
            enforce_min_reclaim: false,
            met: 0,
        },
        Case {
            name: "equal is not met",
            thresholds: vec![mem_1gi.clone()],
            observations: vec![obs(Signal::MemoryAvailable, "1Gi", "8Gi", None)],
            enforce_min_reclaim: false,
            met: 0,
        },
        Case {
            name: "below threshold",
            thresholds: vec![mem_1gi.clone()],
            observations: vec![obs(Signal::MemoryAvailable, "500Mi", "8Gi", None)],
            enforce_min_reclaim: false,
            met: 1,
        },
        Case {
            name: "min reclaim not counted",
            thresholds: vec![mem_1gi_reclaim.clone()],
            observations: vec![obs(Signal::MemoryAvailable, "1200Mi", "8Gi", None)],
            enforce_min_reclaim: false,
            met: 0,
        },
        Case {
            name: "min reclaim counted",
            thresholds: vec![mem_1gi_reclaim.clone()],
            observations: vec![obs(Signal::MemoryAvailable, "1200Mi", "8Gi", None)],
            enforce_min_reclaim: true,
            met: 1,
        },
        Case {
            name: "percentage met",
            thresholds: vec![nodefs_10pct.clone()],
            observations: vec![obs(Signal::NodeFsAvailable, "9Gi", "100Gi", None)],
            enforce_min_reclaim: false,
            met: 1,
        },
        Case {
            name: "percentage not met",
            thresholds: vec![nodefs_10pct.clone()],
            observations: vec![obs(Signal::NodeFsAvailable, "11Gi", "100Gi", None)],
            enforce_min_reclaim: false,
            met: 0,
        },
        Case {
            name: "percentage min reclaim",
            thresholds: vec![nodefs_10pct_reclaim],
            observations: vec![obs(Signal::NodeFsAvailable, "14Gi", "100Gi", None)],
            enforce_min_reclaim: true,
            met: 1,
        },
    ];
    for c in cases {
        let observations: SignalObservations = c.observations.into_iter().collect();
        let got = thresholds_met(&c.thresholds, &observations, c.enforce_min_reclaim);
        assert_eq!(got.len(), c.met, "{}", c.name);
    }
}

#[test]
fn grace_periods_and_first_observation() {
    let hard = threshold(
        Signal::MemoryAvailable,
        ThresholdValue::Quantity(q("1Gi")),
        0,
        None,
    );
    let soft = threshold(
        Signal::MemoryAvailable,
        ThresholdValue::Quantity(q("2Gi")),
        30,
        None,
    );
    let t0 = Instant::now();
    let first = thresholds_first_observed_at(&[hard.clone(), soft.clone()], &[], t0);
    assert!(first.iter().all(|(_, at)| *at == t0));
    // Hard thresholds act at once, soft ones after their grace period.
    assert_eq!(thresholds_met_grace_period(&first, t0), vec![hard.clone()]);
    let t1 = t0 + Duration::from_secs(29);
    let again = thresholds_first_observed_at(&[hard.clone(), soft.clone()], &first, t1);
    assert!(
        again.iter().all(|(_, at)| *at == t0),
        "first observation kept"
    );
    assert_eq!(thresholds_met_grace_period(&again, t1).len(), 1);
    let t2 = t0 + Duration::from_secs(30);
    assert_eq!(
        thresholds_met_grace_period(&again, t2),
        vec![hard.clone(), soft.clone()]
    );
    // A threshold that stopped being met starts over.
    let later = thresholds_first_observed_at(std::slice::from_ref(&soft), &[(hard, t0)], t2);
    assert_eq!(later, vec![(soft, t2)]);
}

#[test]
fn conditions_held_for_the_transition_period() {
    let mem = threshold(
        Signal::AllocatableMemoryAvailable,
        ThresholdValue::Quantity(q("1Gi")),
        0,
        None,
    );
    let disk = threshold(
        Signal::ImageFsInodesFree,
        ThresholdValue::Percentage(0.05),
        0,
        None,
    );
    let pid = threshold(
        Signal::PidAvailable,
        ThresholdValue::Percentage(0.05),
        0,
        None,
    );
    let mem2 = threshold(
        Signal::MemoryAvailable,
        ThresholdValue::Quantity(q("1Gi")),
        0,
        None,
    );
    assert_eq!(
        node_conditions(&[mem, disk, pid, mem2]),
        vec![
            NodeConditionType::MemoryPressure,
            NodeConditionType::DiskPressure,
            NodeConditionType::PidPressure
        ]
    );
    let period = Duration::from_secs(300);
    let t0 = Instant::now();
    let at = node_conditions_last_observed_at(
        &[NodeConditionType::MemoryPressure],
        &BTreeMap::new(),
        t0,
    );
    assert_eq!(
        node_conditions_observed_since(&at, period, t0),
        vec![NodeConditionType::MemoryPressure]
    );
    // Not observed any more, but within the period: still reported.
    let t1 = t0 + Duration::from_secs(299);
    let at = node_conditions_last_observed_at(&[], &at, t1);
    assert_eq!(
        node_conditions_observed_since(&at, period, t1),
        vec![NodeConditionType::MemoryPressure]
    );
    let t2 = t0 + period;
    assert!(node_conditions_observed_since(&at, period, t2).is_empty());
    assert_eq!(
        format_conditions(&[
            NodeConditionType::MemoryPressure,
            NodeConditionType::PidPressure
        ]),
        "[MemoryPressure PIDPressure]"
    );
}

#[test]
fn merge_and_updated_stats() {
    let a = threshold(
        Signal::MemoryAvailable,
        ThresholdValue::Quantity(q("1Gi")),
        0,
        None,
    );
    let b = threshold(
        Signal::NodeFsAvailable,
        ThresholdValue::Percentage(0.1),
        0,
        None,
    );
    let merged = merge_thresholds(vec![a.clone()], vec![a.clone(), b.clone()]);
    assert_eq!(merged, vec![a.clone(), b.clone()]);

    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
    let t1 = t0 + Duration::from_secs(10);
    let last: SignalObservations = [
        obs(Signal::MemoryAvailable, "1", "2", Some(t0)),
        obs(Signal::NodeFsAvailable, "1", "2", Some(t0)),
    ]
    .into_iter()
    .collect();
    let now: SignalObservations = [
        obs(Signal::MemoryAvailable, "1", "2", Some(t1)),
        obs(Signal::NodeFsAvailable, "1", "2", Some(t0)),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        thresholds_updated_stats(&merged, &now, &last),
        vec![a.clone()],
        "stale nodefs stats are not acted on twice"
    );
    assert_eq!(
        thresholds_updated_stats(&merged, &now, &SignalObservations::new()),
        merged
    );
}

#[test]
fn memory_thresholds_sort_first() {
    let mut ts = vec![
        threshold(
            Signal::NodeFsAvailable,
            ThresholdValue::Percentage(0.1),
            0,
            None,
        ),
        threshold(
            Signal::PidAvailable,
            ThresholdValue::Percentage(0.1),
            0,
            None,
        ),
        threshold(
            Signal::AllocatableMemoryAvailable,
            ThresholdValue::Quantity(q("1Gi")),
            0,
            None,
        ),
        threshold(
            Signal::ImageFsAvailable,
            ThresholdValue::Percentage(0.1),
            0,
            None,
        ),
    ];
    sort_by_eviction_priority(&mut ts);
    let order: Vec<Signal> = ts.iter().map(|t| t.signal).collect();
    assert_eq!(
        order,
        vec![
            Signal::AllocatableMemoryAvailable,
            Signal::NodeFsAvailable,
            Signal::PidAvailable,
            Signal::ImageFsAvailable
        ]
    );
}
