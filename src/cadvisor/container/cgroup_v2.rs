//! A cgroup's statistics and settings on the unified hierarchy (v2), as
//! libcontainer reads them for cadvisor.

use std::path::Path;

use super::files::{read_keyed, read_line, read_u64};
use super::sample::CgroupSample;
use super::types::{CfsStats, CpuSpec, CpuUsage, MemorySpec, MemoryUsage};

/// One sample of the cgroup's counters.
pub(super) fn sample(dir: &Path) -> CgroupSample {
    let cpu = read_keyed(&dir.join("cpu.stat"));
    let c = |k: &str| cpu.get(k).copied().unwrap_or(0);
    let stat = read_keyed(&dir.join("memory.stat"));
    let m = |k: &str| stat.get(k).copied().unwrap_or(0);
    let events = read_keyed(&dir.join("memory.events"));
    let usage = read_u64(&dir.join("memory.current")).unwrap_or(0);
    CgroupSample {
        cpu: CpuUsage {
            total_ns: c("usage_usec").saturating_mul(1000),
            user_ns: c("user_usec").saturating_mul(1000),
            system_ns: c("system_usec").saturating_mul(1000),
        },
        cfs: CfsStats {
            periods: c("nr_periods"),
            throttled_periods: c("nr_throttled"),
            throttled_ns: c("throttled_usec").saturating_mul(1000),
        },
        memory: MemoryUsage {
            usage,
            max_usage: read_u64(&dir.join("memory.peak")).unwrap_or(0),
            cache: m("file"),
            rss: m("anon"),
            mapped_file: m("file_mapped"),
            swap: read_u64(&dir.join("memory.swap.current")).unwrap_or(0),
            failcnt: events.get("max").copied().unwrap_or(0),
            working_set: usage.saturating_sub(m("inactive_file")),
            pgfault: m("pgfault"),
            pgmajfault: m("pgmajfault"),
        },
        threads_current: read_u64(&dir.join("pids.current")).unwrap_or(0),
        threads_max: read_u64(&dir.join("pids.max"))
            .filter(|&v| v != u64::MAX)
            .unwrap_or(0),
        oom_events: events.get("oom_kill").copied().unwrap_or(0),
    }
}

/// `cpu.weight` (1..=10000) as the cpu.shares it stands for.
pub(super) fn weight_to_shares(weight: u64) -> Option<u64> {
    (1..=10_000)
        .contains(&weight)
        .then(|| 2 + ((weight - 1) * 262_142) / 9_999)
}

/// CPU and memory settings.
pub(super) fn spec(dir: &Path) -> (Option<CpuSpec>, Option<MemorySpec>) {
    let mut cpu = CpuSpec {
        shares: read_u64(&dir.join("cpu.weight"))
            .and_then(weight_to_shares)
            .unwrap_or(0),
        ..Default::default()
    };
    if let Some((quota, period)) = read_line(&dir.join("cpu.max")).and_then(|l| {
        l.split_once(' ')
            .map(|(q, p)| (q.to_string(), p.to_string()))
    }) {
        cpu.quota_us = quota.parse().unwrap_or(0);
        cpu.period_us = period.parse().unwrap_or(0);
    }
    let memory = dir.join("memory.max").exists().then(|| MemorySpec {
        limit: read_u64(&dir.join("memory.max")).unwrap_or(0),
        swap_limit: read_u64(&dir.join("memory.swap.max")).unwrap_or(0),
        reservation: read_u64(&dir.join("memory.high")).unwrap_or(0),
    });
    (Some(cpu), memory)
}
