//! What /proc says about a process the test started: resident memory and
//! CPU time, for the drills' bounds and the benchmarks' figures.

/// A number field of `/proc/<pid>/status` (0 when it cannot be read).
fn status_field(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The resident set of process `pid`, in KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS")
}

/// The anonymous part of the resident set (heap, stacks), in KiB: what
/// grows with the work, without the binary's mapped text.
pub fn rss_anon_kib(pid: u32) -> u64 {
    status_field(pid, "RssAnon")
}

/// The threads of process `pid`.
pub fn threads(pid: u32) -> u64 {
    status_field(pid, "Threads")
}

/// Process `pid`'s threads by name, with their count (`tokio-rt-worker 2,
/// kubelet-blocking 5`).
pub fn thread_names(pid: u32) -> String {
    let mut names = std::collections::BTreeMap::<String, usize>::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in dir.flatten() {
            if let Ok(n) = std::fs::read_to_string(t.path().join("comm")) {
                *names.entry(n.trim().to_string()).or_default() += 1;
            }
        }
    }
    names
        .iter()
        .map(|(n, c)| format!("{n} {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// CPU time (user + system) process `pid` has used, in seconds.
pub fn cpu_secs(pid: u32) -> f64 {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // Fields after the command name, which ends with ')'.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = f.get(11)?.parse().ok()?;
            let stime: f64 = f.get(12)?.parse().ok()?;
            Some((utime + stime) / ticks)
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_memory_and_cpu() {
        let pid = std::process::id();
        assert!(super::rss_kib(pid) > 0);
        assert!(super::rss_anon_kib(pid) > 0);
        assert!(super::rss_anon_kib(pid) <= super::rss_kib(pid));
        assert!(super::threads(pid) >= 1);
        assert!(super::cpu_secs(pid) >= 0.0);
    }
}
