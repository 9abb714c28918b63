//! What /proc says about a process the test started: resident memory and
//! CPU time, for the drills' bounds and the benchmarks' figures.

/// The resident set of process `pid`, in KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
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
        assert!(super::cpu_secs(pid) >= 0.0);
    }
}
