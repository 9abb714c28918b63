//! The machine's filesystems for the root container, as cadvisor lists
//! them: a partition table taken from mountinfo once, when the kubelet
//! starts (ext*, nfs*, btrfs, overlay, tmpfs, xfs and zfs mounts; the
//! first mount of a device; a tmpfs named by its mount point, an overlay
//! by its source and device numbers), then per sample the usage from
//! statfs of each partition's mount point and the I/O counters from
//! `/proc/diskstats` (by the device's name for sd/vd/xvd/dm devices,
//! else by its numbers).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::types::FsCounters;
use crate::util::mountinfo::parse_mountinfo;

/// One filesystem of the partition table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// The `device` label: the block device, a tmpfs's mount point, or
    /// `overlay_<major>-<minor>`.
    pub device: String,
    pub mount_point: PathBuf,
    pub fs_type: String,
    /// `major:minor`.
    pub major_minor: String,
}

fn supported(fs_type: &str) -> bool {
    fs_type.starts_with("ext")
        || fs_type.starts_with("nfs")
        || matches!(fs_type, "btrfs" | "overlay" | "tmpfs" | "xfs" | "zfs")
}

/// The partition table of a mountinfo text, by device label. Later
/// mounts of the same tmpfs mount point or overlay replace earlier ones;
/// a further mount of a device already listed (a bind mount) is skipped.
pub fn partitions(mountinfo: &str) -> Vec<Partition> {
    let mut table: BTreeMap<String, Partition> = BTreeMap::new();
    for m in parse_mountinfo(mountinfo) {
        if !supported(&m.fs_type) {
            continue;
        }
        if table.contains_key(&m.source) && m.fs_type != "tmpfs" {
            continue;
        }
        let mut major_minor = m.major_minor.clone();
        let device = match m.fs_type.as_str() {
            "tmpfs" => m.mount_point.to_string_lossy().into_owned(),
            "overlay" => format!("{}_{}", m.source, m.major_minor.replace(':', "-")),
            _ => m.source.clone(),
        };
        // btrfs shows major 0 in mountinfo; when its source is a block
        // device, the numbers are taken from a stat of the mount point.
        if m.fs_type == "btrfs"
            && m.major_minor.starts_with("0:")
            && m.source.starts_with("/dev/")
            && let Ok(src) = nix::sys::stat::stat(Path::new(&m.source))
            && src.st_mode & nix::libc::S_IFMT == nix::libc::S_IFBLK
            && let Ok(st) = nix::sys::stat::stat(&m.mount_point)
        {
            let dev = st.st_dev;
            major_minor = format!(
                "{}:{}",
                nix::sys::stat::major(dev),
                nix::sys::stat::minor(dev)
            );
        }
        table.insert(
            device.clone(),
            Partition {
                device,
                mount_point: m.mount_point,
                fs_type: m.fs_type,
                major_minor,
            },
        );
    }
    table.into_values().collect()
}

/// Whether cadvisor reads a `/proc/diskstats` line of this device name:
/// `sd`, `vd` or `xvd` followed by letters and optional digits, or `dm-N`.
fn counted_disk(name: &str) -> bool {
    if let Some(n) = name.strip_prefix("dm-") {
        return !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    }
    let Some(rest) = ["sd", "vd", "xvd"]
        .iter()
        .find_map(|p| name.strip_prefix(p))
    else {
        return false;
    };
    let letters = rest.bytes().take_while(u8::is_ascii_lowercase).count();
    letters > 0 && rest.bytes().skip(letters).all(|b| b.is_ascii_digit())
}

/// `/proc/diskstats` counters of the counted disks, by `/dev/<name>`,
/// with their `major:minor`.
pub(super) fn parse_diskstats(text: &str) -> BTreeMap<String, (String, [u64; 11])> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 14 || !counted_disk(f[2]) {
            continue;
        }
        let mut c = [0u64; 11];
        for (i, v) in f[3..14].iter().enumerate() {
            c[i] = v.parse().unwrap_or(0);
        }
        out.insert(format!("/dev/{}", f[2]), (format!("{}:{}", f[0], f[1]), c));
    }
    out
}

/// Usage and I/O counters of each partition now. A partition whose mount
/// point is gone is listed with zero usage (as cadvisor does); one that
/// statfs refuses is left out.
pub(super) fn filesystems(partitions: &[Partition], diskstats: &str) -> Vec<FsCounters> {
    let io = parse_diskstats(diskstats);
    let mut out = Vec::new();
    for p in partitions {
        let (limit, usage, inodes, inodes_free) = if p.mount_point.exists() {
            let Ok(st) = nix::sys::statvfs::statvfs(&p.mount_point) else {
                continue;
            };
            let frsize = st.fragment_size();
            let blocks = st.blocks();
            (
                blocks * frsize,
                blocks.saturating_sub(st.blocks_free()) * frsize,
                st.files(),
                st.files_free(),
            )
        } else {
            (0, 0, 0, 0)
        };
        let c = io
            .get(&p.device)
            .or_else(|| io.values().find(|(mm, _)| *mm == p.major_minor))
            .map(|(_, c)| *c)
            .unwrap_or_default();
        out.push(FsCounters {
            device: p.device.clone(),
            limit,
            usage,
            inodes,
            inodes_free,
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's mounts (the reference Go kubelet served `/dev/shm`,
    /// `/dev/vda`, the sandbox tmpfs and `/sys/fs/cgroup` for them), plus
    /// a bind mount, an overlay, nfs, and types cadvisor ignores.
    const MOUNTINFO: &str = "\
22 1 253:0 / / rw - ext4 /dev/vda rw
23 22 0:21 / /sys rw - sysfs sysfs rw
24 22 0:6 / /dev rw - devtmpfs devtmpfs rw,size=1k
25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw
28 22 0:25 / /mnt/sandbox ro - tmpfs model_tools_unavailable ro,size=4k
30 25 0:27 / /dev/shm rw - tmpfs tmpfs rw
31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
33 22 253:0 /var/lib /again rw - ext4 /dev/vda rw
34 22 0:50 / /run/c/rootfs rw - overlay overlay rw,lowerdir=/a
35 22 0:51 / /mnt/nfs rw - nfs4 srv:/export rw
36 22 0:24 / /proc rw - proc proc rw
";

    #[test]
    fn partition_table_as_cadvisor_builds_it() {
        let table = partitions(MOUNTINFO);
        let got: Vec<(&str, &str, &str)> = table
            .iter()
            .map(|p| {
                (
                    p.device.as_str(),
                    p.mount_point.to_str().unwrap_or(""),
                    p.major_minor.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("/dev/shm", "/dev/shm", "0:27"),
                ("/dev/vda", "/", "253:0"),
                ("/mnt/sandbox", "/mnt/sandbox", "0:25"),
                ("/sys/fs/cgroup", "/sys/fs/cgroup", "0:28"),
                ("overlay_0-50", "/run/c/rootfs", "0:50"),
                ("srv:/export", "/mnt/nfs", "0:51"),
            ]
        );
    }

    #[test]
    fn counted_disk_names() {
        let cases = [
            ("sda", true),
            ("sda1", true),
            ("vda", true),
            ("xvdb12", true),
            ("dm-0", true),
            ("dm-", false),
            ("nvme0n1", false),
            ("loop0", false),
            ("sd", false),
            ("sda1b", false),
            ("vdA", false),
        ];
        for (name, want) in cases {
            assert_eq!(counted_disk(name), want, "{name}");
        }
    }

    #[test]
    fn counters_by_name_then_by_numbers() {
        let diskstats = " 253 0 vda 10 2 300 40 50 6 700 80 0 90 120 0 0 0 0\n\
                          259 0 nvme0n1 1 1 1 1 1 1 1 1 1 1 1\n\
                          7 0 loop0 1 2 3\n\
                          252 1 dm-1 5 0 0 0 0 0 0 0 0 0 0\n";
        let root = Path::new("/");
        let parts = [
            Partition {
                device: "/dev/vda".into(),
                mount_point: root.into(),
                fs_type: "ext4".into(),
                major_minor: "253:0".into(),
            },
            Partition {
                device: "/dev/mapper/vg-root".into(),
                mount_point: root.into(),
                fs_type: "xfs".into(),
                major_minor: "252:1".into(),
            },
            Partition {
                device: "/dev/nvme0n1".into(),
                mount_point: root.into(),
                fs_type: "ext4".into(),
                major_minor: "259:0".into(),
            },
            Partition {
                device: "/gone".into(),
                mount_point: "/no/such/mount/point".into(),
                fs_type: "tmpfs".into(),
                major_minor: "0:99".into(),
            },
        ];
        let fs = filesystems(&parts, diskstats);
        let io: Vec<(&str, u64, u64, u64)> = fs
            .iter()
            .map(|f| {
                (
                    f.device.as_str(),
                    f.reads_completed,
                    f.sectors_written,
                    f.weighted_io_time_ms,
                )
            })
            .collect();
        assert_eq!(
            io,
            [
                ("/dev/vda", 10, 700, 120),
                ("/dev/mapper/vg-root", 5, 0, 0),
                ("/dev/nvme0n1", 0, 0, 0),
                ("/gone", 0, 0, 0),
            ]
        );
        for f in &fs[..3] {
            assert!(f.limit > 0 && f.limit >= f.usage && f.inodes >= f.inodes_free);
        }
        assert_eq!((fs[3].limit, fs[3].inodes), (0, 0), "a gone mount point");
    }
}
