//! Which cgroup hierarchies the host mounts, and whether it runs cgroup v1
//! (legacy), v1 with a v2 tree beside it (hybrid) or v2 only (unified).
//! Read from mountinfo, so a test can describe any layout.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::error::CmError;
use super::host::HostPaths;
use crate::util::mountinfo::parse_mountinfo_line;

/// The cgroup layout of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// cgroup v1 only.
    Legacy,
    /// cgroup v1 controllers, plus a controller-less v2 tree (usually at
    /// `/sys/fs/cgroup/unified`) that the kubelet leaves alone, as Go does.
    Hybrid,
    /// cgroup v2 only.
    Unified,
}

/// One mounted v1 hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    pub mount_point: PathBuf,
    pub root: String,
    pub subsystems: Vec<String>,
}

/// The mounted subsystems and where they live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupSubsystems {
    mode: CgroupMode,
    mounts: Vec<CgroupMount>,
    /// Subsystem → mount point (v1: the shortest mount of that subsystem;
    /// v2: the unified mount for every controller).
    mount_points: BTreeMap<String, PathBuf>,
    /// The cgroup2 mount, in hybrid and unified modes.
    unified_mount: Option<PathBuf>,
    /// Controllers listed by the unified root's `cgroup.controllers`.
    unified_controllers: BTreeSet<String>,
}

/// Controllers the kubelet manages on v2, when the kernel offers them.
pub const UNIFIED_SUPPORTED_CONTROLLERS: [&str; 5] = ["cpu", "cpuset", "hugetlb", "memory", "pids"];

impl CgroupSubsystems {
    /// Reads the layout from `<proc>/self/mountinfo` (and the subsystem names
    /// from `<proc>/self/cgroup`).
    pub fn detect(host: &HostPaths) -> Result<Self, CmError> {
        let mountinfo_path = host.mountinfo();
        let mountinfo = std::fs::read_to_string(&mountinfo_path)
            .map_err(|e| CmError::io("read", &mountinfo_path, e))?;
        let known = std::fs::read_to_string(host.self_cgroup())
            .map(|c| self_cgroup_subsystems(&c))
            .unwrap_or_default();
        Self::from_mountinfo(&mountinfo, &known)
    }

    /// Builds the layout from mountinfo text. `known` names the v1 subsystems
    /// (as /proc/self/cgroup lists them, `name=systemd` included); when empty,
    /// the kernel's usual controllers and any `name=` hierarchy are accepted.
    pub fn from_mountinfo(mountinfo: &str, known: &BTreeSet<String>) -> Result<Self, CmError> {
        let mut mounts = Vec::new();
        let mut unified: Vec<PathBuf> = Vec::new();
        for line in mountinfo.lines() {
            let Some(entry) = parse_mountinfo_line(line) else {
                continue;
            };
            match entry.fs_type.as_str() {
                "cgroup2" => unified.push(entry.mount_point),
                "cgroup" => {
                    let subsystems: Vec<String> = entry
                        .super_options
                        .iter()
                        .map(String::as_str)
                        .filter(|opt| is_subsystem_option(opt, known))
                        .map(|opt| opt.strip_prefix("name=").unwrap_or(opt).to_string())
                        .collect();
                    mounts.push(CgroupMount {
                        mount_point: entry.mount_point,
                        root: entry.root,
                        subsystems,
                    });
                }
                _ => {}
            }
        }
        unified.sort_by_key(|p| p.as_os_str().len());
        let unified_mount = unified.into_iter().next();
        if mounts.is_empty() {
            return match unified_mount {
                Some(mount) => Self::unified_at(&mount),
                None => Err(CmError::Mounts("failed to find cgroup mounts".into())),
            };
        }
        let mut mount_points: BTreeMap<String, PathBuf> = BTreeMap::new();
        for m in &mounts {
            for s in &m.subsystems {
                let shorter = mount_points
                    .get(s)
                    .is_none_or(|prev| m.mount_point.as_os_str().len() < prev.as_os_str().len());
                if shorter {
                    mount_points.insert(s.clone(), m.mount_point.clone());
                }
            }
        }
        let mode = if unified_mount.is_some() {
            CgroupMode::Hybrid
        } else {
            CgroupMode::Legacy
        };
        Ok(CgroupSubsystems {
            mode,
            mounts,
            mount_points,
            unified_mount,
            unified_controllers: BTreeSet::new(),
        })
    }

    /// A unified (v2) layout rooted at `mount`: the host's /sys/fs/cgroup, or
    /// the v2 tree of a hybrid host when a caller wants to drive it directly.
    pub fn unified_at(mount: &Path) -> Result<Self, CmError> {
        let path = mount.join("cgroup.controllers");
        let text = std::fs::read_to_string(&path).map_err(|e| CmError::io("read", &path, e))?;
        let controllers: BTreeSet<String> = text.split_whitespace().map(str::to_string).collect();
        let mut mount_points = BTreeMap::new();
        for c in ["devices", "freezer"]
            .into_iter()
            .map(str::to_string)
            .chain(controllers.iter().cloned())
        {
            mount_points.insert(c, mount.to_path_buf());
        }
        Ok(CgroupSubsystems {
            mode: CgroupMode::Unified,
            mounts: vec![CgroupMount {
                mount_point: mount.to_path_buf(),
                root: "/".into(),
                subsystems: controllers.iter().cloned().collect(),
            }],
            mount_points,
            unified_mount: Some(mount.to_path_buf()),
            unified_controllers: controllers,
        })
    }

    pub fn mode(&self) -> CgroupMode {
        self.mode
    }

    /// Whether cgroups are driven through the v2 interface files.
    pub fn is_unified(&self) -> bool {
        self.mode == CgroupMode::Unified
    }

    pub fn mounts(&self) -> &[CgroupMount] {
        &self.mounts
    }

    /// Subsystem → mount point.
    pub fn mount_points(&self) -> &BTreeMap<String, PathBuf> {
        &self.mount_points
    }

    pub fn mount_point(&self, subsystem: &str) -> Option<&Path> {
        self.mount_points.get(subsystem).map(PathBuf::as_path)
    }

    pub fn has(&self, subsystem: &str) -> bool {
        self.mount_points.contains_key(subsystem)
    }

    /// The cgroup2 mount, if any (the whole tree in unified mode).
    pub fn unified_mount(&self) -> Option<&Path> {
        self.unified_mount.as_deref()
    }

    /// Every controller the v2 root offers (its `cgroup.controllers`).
    pub fn unified_controllers(&self) -> &BTreeSet<String> {
        &self.unified_controllers
    }

    /// Controllers the kubelet uses on v2 that the kernel offers at the root.
    pub fn unified_supported_controllers(&self) -> BTreeSet<String> {
        UNIFIED_SUPPORTED_CONTROLLERS
            .iter()
            .filter(|c| self.unified_controllers.contains(**c))
            .map(|c| c.to_string())
            .collect()
    }

    /// Whether the hugetlb controller can be used (mounted on v1, offered on v2).
    pub fn hugetlb_supported(&self) -> bool {
        if self.is_unified() {
            self.unified_controllers.contains("hugetlb")
        } else {
            self.has("hugetlb")
        }
    }
}

/// Subsystem names listed in /proc/<pid>/cgroup (`name=systemd` kept whole).
pub fn self_cgroup_subsystems(content: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in content.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, Some(list), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        for s in list.split(',').filter(|s| !s.is_empty()) {
            out.insert(s.to_string());
        }
    }
    out
}

/// Controller → cgroup path, as /proc/<pid>/cgroup lists them (v2 under "").
pub fn parse_proc_cgroup(content: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in content.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(list), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if list.is_empty() {
            out.insert(String::new(), path.to_string());
        }
        for s in list.split(',').filter(|s| !s.is_empty()) {
            out.insert(s.to_string(), path.to_string());
        }
    }
    out
}

const KNOWN_V1: [&str; 13] = [
    "cpuset",
    "cpu",
    "cpuacct",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
];

fn is_subsystem_option(opt: &str, known: &BTreeSet<String>) -> bool {
    if known.is_empty() {
        KNOWN_V1.contains(&opt) || opt.starts_with("name=")
    } else {
        known.contains(opt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
99 31 0:32 / /sys/fs/cgroup/memory/extra/bind rw,relatime - cgroup cgroup rw,memory
";

    const SELF_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/x
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
";

    #[test]
    fn hybrid_layout_from_mountinfo() {
        let known = self_cgroup_subsystems(SELF_CGROUP);
        let s = CgroupSubsystems::from_mountinfo(HYBRID, &known).unwrap();
        assert_eq!(s.mode(), CgroupMode::Hybrid);
        assert_eq!(s.unified_mount(), Some(Path::new("/sys/fs/cgroup/unified")));
        let want = [
            ("cpu", "/sys/fs/cgroup/cpu"),
            ("cpuacct", "/sys/fs/cgroup/cpuacct"),
            ("cpuset", "/sys/fs/cgroup/cpuset"),
            ("memory", "/sys/fs/cgroup/memory"),
            ("pids", "/sys/fs/cgroup/pids"),
            ("systemd", "/sys/fs/cgroup/systemd"),
        ];
        let got: Vec<(&str, &str)> = s
            .mount_points()
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(got, want);
        assert!(!s.hugetlb_supported());
    }

    #[test]
    fn legacy_without_self_cgroup_accepts_known_controllers() {
        let text = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                    33 31 0:30 / /sys/fs/cgroup/hugetlb rw - cgroup cgroup rw,hugetlb\n";
        let s = CgroupSubsystems::from_mountinfo(text, &BTreeSet::new()).unwrap();
        assert_eq!(s.mode(), CgroupMode::Legacy);
        assert_eq!(
            s.mount_point("cpuacct"),
            Some(Path::new("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert!(s.hugetlb_supported());
        assert!(!s.has("rw"));
    }

    #[test]
    fn unified_layout_reads_controllers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        let text = format!(
            "30 23 0:26 / {} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
            dir.path().display()
        );
        let s = CgroupSubsystems::from_mountinfo(&text, &BTreeSet::new()).unwrap();
        assert_eq!(s.mode(), CgroupMode::Unified);
        assert_eq!(
            s.unified_supported_controllers()
                .into_iter()
                .collect::<Vec<_>>(),
            ["cpu", "cpuset", "memory", "pids"]
        );
        assert!(!s.hugetlb_supported());
        assert_eq!(s.mount_point("freezer"), Some(dir.path()));
    }

    #[test]
    fn no_cgroup_mounts_is_an_error() {
        let text = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n";
        assert!(CgroupSubsystems::from_mountinfo(text, &BTreeSet::new()).is_err());
    }

    #[test]
    fn proc_cgroup_parse() {
        let m = parse_proc_cgroup(SELF_CGROUP);
        assert_eq!(m["memory"], "/process_api/x");
        assert_eq!(m["name=systemd"], "/");
        assert_eq!(m[""], "/");
    }
}
