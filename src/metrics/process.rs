//! The process families Prometheus clients export (`process_*`), read from
//! /proc/self when scraped: CPU time, memory, file descriptors and their
//! limits, start time.

use std::fmt::Write as _;

use super::text::format_float;
use super::vec::Collector;

/// What /proc says about this process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: f64,
    pub virtual_bytes: f64,
    pub start_time_seconds: f64,
    pub open_fds: f64,
    pub max_fds: f64,
    pub max_virtual_bytes: f64,
}

/// The fields of /proc/<pid>/stat after the command name: (utime, stime,
/// starttime in ticks, vsize in bytes, rss in pages).
fn parse_stat(stat: &str) -> Option<(u64, u64, u64, u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is the state (field 3); utime is field 14, stime 15,
    // starttime 22, vsize 23, rss 24.
    let at = |field: usize| f.get(field - 3).and_then(|v| v.parse::<u64>().ok());
    Some((at(14)?, at(15)?, at(22)?, at(23)?, at(24)?))
}

/// A soft limit of /proc/<pid>/limits; `unlimited` is u64::MAX.
fn soft_limit(limits: &str, name: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with(name))?;
    let soft = line[name.len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(u64::MAX as f64);
    }
    soft.parse::<f64>().ok()
}

fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Reads the stats of `proc_dir` (`/proc/self`) with the host's /proc/stat.
pub fn read(proc_dir: &std::path::Path, host_stat: &std::path::Path) -> Option<ProcessStats> {
    // SAFETY: sysconf has no preconditions.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let (ticks, page) = (ticks.max(1) as f64, page.max(1) as f64);
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    let (utime, stime, start, vsize, rss) = parse_stat(&stat)?;
    let limits = std::fs::read_to_string(proc_dir.join("limits")).unwrap_or_default();
    let btime = std::fs::read_to_string(host_stat)
        .ok()
        .and_then(|s| boot_time(&s))
        .unwrap_or(0);
    let open_fds = std::fs::read_dir(proc_dir.join("fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    Some(ProcessStats {
        cpu_seconds: (utime + stime) as f64 / ticks,
        resident_bytes: rss as f64 * page,
        virtual_bytes: vsize as f64,
        start_time_seconds: btime as f64 + start as f64 / ticks,
        open_fds: open_fds as f64,
        max_fds: soft_limit(&limits, "Max open files").unwrap_or(0.0),
        max_virtual_bytes: soft_limit(&limits, "Max address space").unwrap_or(0.0),
    })
}

fn family(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    let _ = writeln!(out, "{name} {}", format_float(value));
}

/// Every `process_*` family, or only `process_start_time_seconds`.
#[derive(Debug, Clone, Copy)]
pub struct ProcessCollector {
    start_time_only: bool,
}

impl ProcessCollector {
    pub fn all() -> Self {
        ProcessCollector {
            start_time_only: false,
        }
    }

    pub fn start_time_only() -> Self {
        ProcessCollector {
            start_time_only: true,
        }
    }
}

/// Renders `s` (one family per field, sorted by name).
pub fn encode_stats(out: &mut String, s: &ProcessStats, start_time_only: bool) {
    const START: &str = "Process start time, in seconds since the Unix epoch.";
    if start_time_only {
        family(
            out,
            "process_start_time_seconds",
            "gauge",
            START,
            s.start_time_seconds,
        );
        return;
    }
    family(
        out,
        "process_cpu_seconds_total",
        "counter",
        "User plus system CPU time used, in seconds.",
        s.cpu_seconds,
    );
    family(
        out,
        "process_max_fds",
        "gauge",
        "The most file descriptors the process may open.",
        s.max_fds,
    );
    family(
        out,
        "process_open_fds",
        "gauge",
        "File descriptors the process has open.",
        s.open_fds,
    );
    family(
        out,
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory of the process, in bytes.",
        s.resident_bytes,
    );
    family(
        out,
        "process_start_time_seconds",
        "gauge",
        START,
        s.start_time_seconds,
    );
    family(
        out,
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory of the process, in bytes.",
        s.virtual_bytes,
    );
    family(
        out,
        "process_virtual_memory_max_bytes",
        "gauge",
        "The most virtual memory the process may use, in bytes.",
        s.max_virtual_bytes,
    );
}

impl Collector for ProcessCollector {
    fn name(&self) -> &str {
        if self.start_time_only {
            "process_start_time_seconds"
        } else {
            // The block sorts where its first family does.
            "process_cpu_seconds_total"
        }
    }

    fn encode(&self, out: &mut String) {
        let proc_self = std::path::Path::new("/proc/self");
        if let Some(s) = read(proc_self, std::path::Path::new("/proc/stat")) {
            encode_stats(out, &s, self.start_time_only);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_and_limits_parse_as_proc_writes_them() {
        let stat = "4242 (kube let) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 12 0 1000 104857600 2560 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((250, 50, 1000, 104_857_600, 2560)));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1048576              1048576              files\n\
                      Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1_048_576.0));
        assert_eq!(
            soft_limit(limits, "Max address space"),
            Some(u64::MAX as f64)
        );
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn this_process_is_read_and_rendered() {
        let s = read(
            std::path::Path::new("/proc/self"),
            std::path::Path::new("/proc/stat"),
        )
        .expect("stats of this process");
        assert!(s.resident_bytes > 0.0 && s.open_fds >= 1.0 && s.max_fds >= s.open_fds);
        assert!(s.start_time_seconds > 1_600_000_000.0);
        let mut out = String::new();
        ProcessCollector::all().encode(&mut out);
        let names: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("# TYPE"))
            .filter_map(|l| l.split_whitespace().nth(2))
            .collect();
        assert_eq!(
            names,
            [
                "process_cpu_seconds_total",
                "process_max_fds",
                "process_open_fds",
                "process_resident_memory_bytes",
                "process_start_time_seconds",
                "process_virtual_memory_bytes",
                "process_virtual_memory_max_bytes"
            ]
        );
        let mut start = String::new();
        ProcessCollector::start_time_only().encode(&mut start);
        assert!(start.starts_with("# HELP process_start_time_seconds "));
        assert_eq!(start.lines().count(), 3);
    }
}
