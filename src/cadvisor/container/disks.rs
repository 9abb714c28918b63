//! The machine's block-device filesystems for the root container: usage
//! from statfs of a mount point, I/O counters from `/proc/diskstats` by the
//! device's major:minor, one entry per device as cadvisor lists them.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use super::types::FsCounters;
use crate::util::mountinfo::parse_mountinfo;

/// `/proc/diskstats` counters by `major:minor`.
pub(super) fn parse_diskstats(text: &str) -> BTreeMap<String, [u64; 11]> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 14 {
            continue;
        }
        let mut c = [0u64; 11];
        for (i, v) in f[3..14].iter().enumerate() {
            c[i] = v.parse().unwrap_or(0);
        }
        out.insert(format!("{}:{}", f[0], f[1]), c);
    }
    out
}

/// Every block-device filesystem mounted (first mount of each device).
pub(super) fn filesystems(mountinfo: &str, diskstats: &str) -> Vec<FsCounters> {
    let io = parse_diskstats(diskstats);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for m in parse_mountinfo(mountinfo) {
        if !m.source.starts_with("/dev/") || !seen.insert(m.source.clone()) {
            continue;
        }
        let Ok(st) = nix::sys::statfs::statfs(Path::new(&m.mount_point)) else {
            continue;
        };
        let bsize = st.block_size() as u64;
        let c = io.get(&m.major_minor).copied().unwrap_or_default();
        out.push(FsCounters {
            device: m.source.clone(),
            limit: st.blocks() * bsize,
            usage: (st.blocks() - st.blocks_free()) * bsize,
            inodes: st.files(),
            inodes_free: st.files_free(),
            reads_completed: c[0],
            reads_merged: c[1],
            sectors_read: c[2],
            read_time_ms: c[3],
            writes_completed: c[4],
            writes_merged: c[5],
            sectors_written: c[6],
            write_time_ms: c[7],
            io_in_progress: c[8],
            io_time_ms: c[9],
            weighted_io_time_ms: c[10],
        });
    }
    out.sort_by(|a, b| a.device.cmp(&b.device));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_device_with_its_io_counters() {
        let mountinfo = "1 0 253:1 / / rw - ext4 /dev/root-test rw\n\
                         2 1 253:1 / /again rw - ext4 /dev/root-test rw\n\
                         3 1 0:22 / /proc rw - proc proc rw\n";
        let diskstats = " 253 1 vda1 10 2 300 40 50 6 700 80 0 90 120 0 0 0 0\n 7 0 loop0 1 2 3\n";
        let fs = filesystems(mountinfo, diskstats);
        assert_eq!(fs.len(), 1, "{fs:?}");
        let f = &fs[0];
        assert_eq!(f.device, "/dev/root-test");
        assert!(f.limit > 0 && f.limit >= f.usage && f.inodes >= f.inodes_free);
        assert_eq!(
            (
                f.reads_completed,
                f.sectors_written,
                f.io_time_ms,
                f.weighted_io_time_ms
            ),
            (10, 700, 90, 120)
        );
    }
}
