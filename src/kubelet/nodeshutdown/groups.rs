//! Shutdown grace periods by pod priority: the configured ranges (or the
//! two that shutdownGracePeriod and shutdownGracePeriodCriticalPods stand
//! for), and the active pods sorted into them.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::apis::config::types::ShutdownGracePeriodByPodPriority;

/// The priority of a pod with no priority class when no class is the
/// default (scheduling.DefaultPriorityWhenNoDefaultClassExists).
pub const DEFAULT_PRIORITY: i32 = 0;
/// The lowest priority of system-critical pods (scheduling.SystemCriticalPriority).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// One priority range: pods at or above `priority` (and below the next
/// range) get `grace_seconds` to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityRange {
    pub priority: i32,
    pub grace_seconds: i64,
}

/// The ranges, lowest priority first; empty means graceful shutdown is off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownRanges(Vec<PriorityRange>);

/// The pods of one range, stopped together.
#[derive(Debug, Clone)]
pub struct ShutdownGroup {
    pub range: PriorityRange,
    pub pods: Vec<Arc<Pod>>,
}

impl ShutdownRanges {
    /// The ranges the configuration asks for: shutdownGracePeriodByPodPriority
    /// when its gate is on and it is set, else the two ranges the plain
    /// periods stand for (regular pods get what the critical ones leave).
    pub fn from_config(
        by_priority: &[ShutdownGracePeriodByPodPriority],
        by_priority_enabled: bool,
        grace: Duration,
        critical: Duration,
    ) -> Self {
        let mut ranges: Vec<PriorityRange> = if by_priority_enabled && !by_priority.is_empty() {
            by_priority
                .iter()
                .map(|p| PriorityRange {
                    priority: p.priority,
                    grace_seconds: p.shutdown_grace_period_seconds,
                })
                .collect()
        } else {
            migrate(grace, critical)
        };
        ranges.sort_by_key(|r| r.priority);
        ShutdownRanges(ranges)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn ranges(&self) -> &[PriorityRange] {
        &self.0
    }

    /// The whole time asked of logind: the sum of every range's grace.
    pub fn period_requested(&self) -> Duration {
        let secs: i64 = self.0.iter().map(|r| r.grace_seconds).sum();
        Duration::from_secs(secs.max(0) as u64)
    }

    /// `pods` sorted into the ranges, lowest priority first: a pod goes to
    /// the highest range whose priority it reaches, pods below every range
    /// to the lowest.
    pub fn group(&self, pods: &[Arc<Pod>]) -> Vec<ShutdownGroup> {
        let mut groups: Vec<ShutdownGroup> = self
            .0
            .iter()
            .map(|r| ShutdownGroup {
                range: *r,
                pods: Vec::new(),
            })
            .collect();
        if groups.is_empty() {
            return groups;
        }
        for pod in pods {
            let priority = pod
                .spec
                .as_ref()
                .and_then(|s| s.priority)
                .unwrap_or(DEFAULT_PRIORITY);
            let first_at_or_above = groups.partition_point(|g| g.range.priority < priority);
            let index = if first_at_or_above == groups.len() {
                groups.len() - 1
            } else if first_at_or_above > 0 && groups[first_at_or_above].range.priority > priority {
                first_at_or_above - 1
            } else {
                first_at_or_above
            };
            groups[index].pods.push(pod.clone());
        }
        groups
    }
}

/// The two ranges of shutdownGracePeriod/shutdownGracePeriodCriticalPods;
/// none when the period is zero or the critical share exceeds it.
fn migrate(grace: Duration, critical: Duration) -> Vec<PriorityRange> {
    if grace.is_zero() || critical > grace {
        return Vec::new();
    }
    let regular = grace - critical;
    vec![
        PriorityRange {
            priority: DEFAULT_PRIORITY,
            grace_seconds: regular.as_secs() as i64,
        },
        PriorityRange {
            priority: SYSTEM_CRITICAL_PRIORITY,
            grace_seconds: critical.as_secs() as i64,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(priority: i32, grace_seconds: i64) -> PriorityRange {
        PriorityRange {
            priority,
            grace_seconds,
        }
    }

    fn by(p: &[(i32, i64)]) -> Vec<ShutdownGracePeriodByPodPriority> {
        p.iter()
            .map(|&(priority, s)| ShutdownGracePeriodByPodPriority {
                priority,
                shutdown_grace_period_seconds: s,
            })
            .collect()
    }

    fn pod(name: &str, priority: Option<i32>) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            priority,
            ..Default::default()
        });
        Arc::new(p)
    }

    #[test]
    fn ranges_from_config() {
        let s = Duration::from_secs;
        type Case = (
            &'static str,
            Vec<ShutdownGracePeriodByPodPriority>,
            bool,
            Duration,
            Duration,
            Vec<PriorityRange>,
        );
        let cases: Vec<Case> = vec![
            ("off", vec![], true, s(0), s(0), vec![]),
            (
                "plain periods",
                vec![],
                true,
                s(30),
                s(10),
                vec![range(0, 20), range(SYSTEM_CRITICAL_PRIORITY, 10)],
            ),
            (
                "all critical",
                vec![],
                true,
                s(10),
                s(10),
                vec![range(0, 0), range(SYSTEM_CRITICAL_PRIORITY, 10)],
            ),
            (
                "critical above the period",
                vec![],
                true,
                s(5),
                s(10),
                vec![],
            ),
            (
                "by priority, sorted",
                by(&[(100000, 5), (0, 20), (2000000000, 10)]),
                true,
                s(0),
                s(0),
                vec![
                    range(0, 20),
                    range(100000, 5),
                    range(SYSTEM_CRITICAL_PRIORITY, 10),
                ],
            ),
            (
                "by priority, gate off",
                by(&[(0, 20)]),
                false,
                s(30),
                s(10),
                vec![range(0, 20), range(SYSTEM_CRITICAL_PRIORITY, 10)],
            ),
        ];
        for (name, by_priority, gate, grace, critical, want) in cases {
            let got = ShutdownRanges::from_config(&by_priority, gate, grace, critical);
            assert_eq!(got.ranges(), want.as_slice(), "{name}");
        }
        let r = ShutdownRanges::from_config(&by(&[(0, 20), (10, 7)]), true, s(0), s(0));
        assert_eq!(r.period_requested(), s(27));
    }

    #[test]
    fn pods_go_to_the_highest_range_they_reach() {
        let ranges = ShutdownRanges::from_config(
            &by(&[(1, 10), (2, 20), (3, 30), (4, 40)]),
            true,
            Duration::ZERO,
            Duration::ZERO,
        );
        let cases: Vec<(Option<i32>, i32)> = vec![
            (None, 1),
            (Some(-1), 1),
            (Some(1), 1),
            (Some(2), 2),
            (Some(3), 3),
            (Some(4), 4),
            (Some(5), 4),
            (Some(i32::MAX), 4),
        ];
        for (priority, want) in cases {
            let groups = ranges.group(&[pod("p", priority)]);
            let holder: Vec<i32> = groups
                .iter()
                .filter(|g| !g.pods.is_empty())
                .map(|g| g.range.priority)
                .collect();
            assert_eq!(holder, vec![want], "priority {priority:?}");
        }
        let gaps = ShutdownRanges::from_config(
            &by(&[(0, 10), (100, 20)]),
            true,
            Duration::ZERO,
            Duration::ZERO,
        );
        let groups = gaps.group(&[pod("a", Some(50)), pod("b", Some(100)), pod("c", Some(99))]);
        let names = |g: &ShutdownGroup| -> Vec<String> {
            g.pods
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect()
        };
        assert_eq!(names(&groups[0]), vec!["a", "c"]);
        assert_eq!(names(&groups[1]), vec!["b"]);
    }
}
