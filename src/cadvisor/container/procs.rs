//! Processes of a cgroup from procfs: how many, their open descriptors and
//! sockets, and the soft open-files limit of the container's first process.

use std::path::Path;

/// (fd count, socket count) over `pids`; processes gone meanwhile count 0.
pub(super) fn fds_and_sockets(proc_root: &Path, pids: &[u32]) -> (u64, u64) {
    let (mut fds, mut sockets) = (0, 0);
    for pid in pids {
        let dir = proc_root.join(pid.to_string()).join("fd");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            fds += 1;
            if std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket"))
            {
                sockets += 1;
            }
        }
    }
    (fds, sockets)
}

/// The soft limits of `/proc/<pid>/limits` cadvisor exports, by its names:
/// `max_open_files` (-1 when unlimited).
pub(super) fn ulimits(proc_root: &Path, pid: u32) -> Vec<(String, i64)> {
    let Ok(text) = std::fs::read_to_string(proc_root.join(pid.to_string()).join("limits")) else {
        return Vec::new();
    };
    parse_limits(&text)
}

pub(super) fn parse_limits(text: &str) -> Vec<(String, i64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Max open files")?;
            let soft = rest.split_whitespace().next()?;
            let v = if soft == "unlimited" {
                -1
            } else {
                soft.parse().ok()?
            };
            Some(("max_open_files".to_string(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_table() {
        let cases = [
            (
                "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n",
                vec![("max_open_files".to_string(), 1_048_576)],
            ),
            (
                "Max open files            unlimited            unlimited            files\n",
                vec![("max_open_files".to_string(), -1)],
            ),
            ("Max processes 10 10 processes\n", vec![]),
        ];
        for (text, want) in cases {
            assert_eq!(parse_limits(text), want, "{text}");
        }
    }

    #[test]
    fn this_process_has_descriptors() {
        let me = std::process::id();
        let _sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (fds, sockets) = fds_and_sockets(Path::new("/proc"), &[me, u32::MAX]);
        assert!(fds >= 3 && sockets >= 1, "{fds} {sockets}");
        assert!(!ulimits(Path::new("/proc"), me).is_empty());
    }
}
