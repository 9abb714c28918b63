//! Reading cgroup and procfs files the forgiving way cadvisor does: a file
//! that is missing or unparsable reads as absent, `max` as unlimited.

use std::collections::BTreeMap;
use std::path::Path;

/// A single-number file; `max` reads as `u64::MAX`.
pub(super) fn read_u64(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let t = text.trim();
    if t == "max" {
        return Some(u64::MAX);
    }
    t.parse().ok()
}

/// A single-line file, trimmed.
pub(super) fn read_line(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_string())
}

/// The `key value` lines of a flat keyed file (`memory.stat`, `cpu.stat`,
/// `memory.events`, `cpuacct.stat`).
pub(super) fn read_keyed(path: &Path) -> BTreeMap<String, u64> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return BTreeMap::new();
    };
    parse_keyed(&text)
}

pub(super) fn parse_keyed(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// The pids of a cgroup's own `cgroup.procs` (not its children's).
pub(super) fn read_pids(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}
