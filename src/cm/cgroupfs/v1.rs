//! cgroup v1: one directory per mounted hierarchy, limits written to each
//! controller's own files, in runc's order (cpuset, memory, cpu, pids, hugetlb).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::CgroupWriter;
use crate::cm::error::CmError;
use crate::cm::resources::ResourceConfig;
use crate::cm::subsystems::CgroupSubsystems;

/// Hierarchies a cgroup is created in, when mounted (runc's list). The
/// devices hierarchy is not among them: the kubelet leaves device access to
/// the runtime, and its cgroups skip that controller as Go's do.
pub const SUBSYSTEMS: [&str; 13] = [
    "cpuset",
    "memory",
    "cpu",
    "cpuacct",
    "pids",
    "blkio",
    "hugetlb",
    "net_cls",
    "net_prio",
    "perf_event",
    "freezer",
    "rdma",
    "systemd",
];

const EBUSY: i32 = 16;
const EINVAL: i32 = 22;

/// Creates the directories of a cgroup (cgroupfs literal) in every mounted
/// hierarchy; cpuset directories inherit the parent's cpus and mems so that
/// tasks can join them. Returns subsystem → directory.
pub fn create(
    w: &CgroupWriter,
    subsystems: &CgroupSubsystems,
    literal: &str,
) -> Result<BTreeMap<String, PathBuf>, CmError> {
    let mut paths = BTreeMap::new();
    for name in SUBSYSTEMS {
        let Some(mount) = subsystems.mount_point(name) else {
            continue;
        };
        let path = super::join_literal(mount, literal);
        if name == "cpuset" {
            ensure_cpuset(w, mount, &path)?;
        } else {
            std::fs::create_dir_all(&path).map_err(|e| CmError::io("create", &path, e))?;
        }
        paths.insert(name.to_string(), path);
    }
    Ok(paths)
}

fn ensure_cpuset(w: &CgroupWriter, mount: &Path, target: &Path) -> Result<(), CmError> {
    let rel = target.strip_prefix(mount).unwrap_or(Path::new(""));
    let mut current = mount.to_path_buf();
    for component in rel.components() {
        let parent = current.clone();
        current.push(component);
        match std::fs::create_dir(&current) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(CmError::io("create", &current, e)),
        }
        copy_cpuset_if_empty(w, &current, &parent)?;
    }
    Ok(())
}

fn copy_cpuset_if_empty(w: &CgroupWriter, current: &Path, parent: &Path) -> Result<(), CmError> {
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let mine = w.read(current, file).unwrap_or_default();
        if !mine.is_empty() {
            continue;
        }
        if let Ok(theirs) = w.read(parent, file)
            && !theirs.is_empty()
        {
            w.write(current, file, &theirs)?;
        }
    }
    Ok(())
}

/// Page size name (`2MB`) → limit in bytes, for the hugetlb controller.
pub type HugetlbLimits = Vec<(String, u64)>;

/// Writes the limits of `r` into the cgroup directories `paths`
/// (subsystem → directory); a limit whose controller is not mounted is an error.
pub fn set(
    w: &CgroupWriter,
    paths: &BTreeMap<String, PathBuf>,
    r: &ResourceConfig,
    hugetlb: &HugetlbLimits,
) -> Result<(), CmError> {
    let dir = |s: &str| {
        paths.get(s).ok_or_else(|| {
            CmError::Mounts(format!(
                "cannot set {s} limit: container could not join or create cgroup"
            ))
        })
    };
    if r.cpuset_cpus.is_some() || r.cpuset_mems.is_some() {
        let d = dir("cpuset")?;
        if let Some(cpus) = r.cpuset_cpus.as_deref().filter(|s| !s.is_empty()) {
            w.write(d, "cpuset.cpus", cpus)?;
        }
        if let Some(mems) = r.cpuset_mems.as_deref().filter(|s| !s.is_empty()) {
            w.write(d, "cpuset.mems", mems)?;
        }
    }
    if let Some(memory) = r.memory.filter(|m| *m != 0) {
        set_memory(w, dir("memory")?, memory)?;
    }
    let wants_cpu = r.cpu_shares.is_some_and(|s| s != 0)
        || r.cpu_period.is_some_and(|p| p != 0)
        || r.cpu_quota.is_some_and(|q| q != 0);
    if wants_cpu {
        set_cpu(w, dir("cpu")?, r)?;
    }
    if let Some(limit) = r.pids_limit.filter(|l| *l != 0) {
        let value = if limit > 0 {
            limit.to_string()
        } else {
            "max".to_string()
        };
        w.write(dir("pids")?, "pids.max", &value)?;
    }
    if !hugetlb.is_empty() {
        let d = dir("hugetlb")?;
        for (size, limit) in hugetlb {
            w.write(
                d,
                &format!("hugetlb.{size}.limit_in_bytes"),
                &limit.to_string(),
            )?;
        }
    }
    Ok(())
}

fn set_memory(w: &CgroupWriter, dir: &Path, memory: i64) -> Result<(), CmError> {
    // Unlimited memory also lifts the memory+swap limit, when the kernel accounts swap.
    if memory == -1 && dir.join("memory.memsw.limit_in_bytes").exists() {
        w.write(dir, "memory.memsw.limit_in_bytes", "-1")?;
    }
    match w.write(dir, "memory.limit_in_bytes", &memory.to_string()) {
        Err(e) if e.raw_os_error() == Some(EBUSY) => {
            let usage = w.read_u64(dir, "memory.usage_in_bytes").unwrap_or(0);
            let peak = w.read_u64(dir, "memory.max_usage_in_bytes").unwrap_or(0);
            Err(CmError::MemoryBusy {
                path: dir.to_path_buf(),
                limit: memory,
                usage,
                peak,
            })
        }
        other => other,
    }
}

fn set_cpu(w: &CgroupWriter, dir: &Path, r: &ResourceConfig) -> Result<(), CmError> {
    if let Some(shares) = r.cpu_shares.filter(|s| *s != 0) {
        w.write(dir, "cpu.shares", &shares.to_string())?;
        let read = w.read_u64(dir, "cpu.shares")?;
        if shares > read {
            return Err(CmError::CpuSharesClamped {
                path: dir.to_path_buf(),
                bound: "maximum",
                read,
            });
        } else if shares < read {
            return Err(CmError::CpuSharesClamped {
                path: dir.to_path_buf(),
                bound: "minimum",
                read,
            });
        }
    }
    let quota = r.cpu_quota.unwrap_or(0);
    let mut period_after_quota = None;
    if let Some(period) = r.cpu_period.filter(|p| *p != 0) {
        match w.write(dir, "cpu.cfs_period_us", &period.to_string()) {
            Ok(()) => {}
            // A shorter period can be refused until the quota is lowered first.
            Err(e) if e.raw_os_error() == Some(EINVAL) && quota != 0 => {
                period_after_quota = Some(period)
            }
            Err(e) => return Err(e),
        }
    }
    if quota != 0 {
        w.write(dir, "cpu.cfs_quota_us", &quota.to_string())?;
        if let Some(period) = period_after_quota {
            w.write(dir, "cpu.cfs_period_us", &period.to_string())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::cgroupfs::WriteMode;
    use std::collections::BTreeSet;

    fn fake_tree() -> (tempfile::TempDir, CgroupSubsystems) {
        let dir = tempfile::tempdir().unwrap();
        let mut mountinfo = String::new();
        for (i, s) in ["cpu", "cpuacct", "cpuset", "memory", "pids", "devices"]
            .iter()
            .enumerate()
        {
            let mount = dir.path().join(s);
            std::fs::create_dir_all(&mount).unwrap();
            mountinfo.push_str(&format!(
                "{} 1 0:{i} / {} rw - cgroup cgroup rw,{s}\n",
                30 + i,
                mount.display()
            ));
        }
        std::fs::write(dir.path().join("cpuset/cpuset.cpus"), "0-3\n").unwrap();
        std::fs::write(dir.path().join("cpuset/cpuset.mems"), "0\n").unwrap();
        let subs = CgroupSubsystems::from_mountinfo(&mountinfo, &BTreeSet::new()).unwrap();
        (dir, subs)
    }

    #[test]
    fn create_makes_every_hierarchy_and_seeds_cpuset() {
        let (dir, subs) = fake_tree();
        let w = CgroupWriter::new(WriteMode::PlainFiles);
        let paths = create(&w, &subs, "/kubepods/burstable").unwrap();
        assert_eq!(paths.len(), 5);
        assert!(
            !dir.path().join("devices/kubepods").exists(),
            "devices is left to the runtime"
        );
        for s in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
            assert!(
                dir.path().join(s).join("kubepods/burstable").is_dir(),
                "{s}"
            );
        }
        for level in ["kubepods", "kubepods/burstable"] {
            let d = dir.path().join("cpuset").join(level);
            assert_eq!(w.read(&d, "cpuset.cpus").unwrap(), "0-3", "{level}");
            assert_eq!(w.read(&d, "cpuset.mems").unwrap(), "0", "{level}");
        }
    }

    #[test]
    fn set_writes_only_what_is_asked() {
        let (dir, subs) = fake_tree();
        let w = CgroupWriter::new(WriteMode::PlainFiles);
        let paths = create(&w, &subs, "/pod1").unwrap();
        let r = ResourceConfig {
            memory: Some(134217728),
            cpu_shares: Some(512),
            cpu_quota: Some(50000),
            cpu_period: Some(100000),
            pids_limit: Some(-1),
            ..Default::default()
        };
        set(&w, &paths, &r, &Vec::new()).unwrap();
        let read = |s: &str, f: &str| w.read(&dir.path().join(s).join("pod1"), f).unwrap();
        assert_eq!(read("memory", "memory.limit_in_bytes"), "134217728");
        assert_eq!(read("cpu", "cpu.shares"), "512");
        assert_eq!(read("cpu", "cpu.cfs_quota_us"), "50000");
        assert_eq!(read("cpu", "cpu.cfs_period_us"), "100000");
        assert_eq!(read("pids", "pids.max"), "max");
        assert!(!dir.path().join("cpuset/pod1/cpuset.cpus.extra").exists());

        let only_shares = ResourceConfig {
            cpu_shares: Some(2),
            ..Default::default()
        };
        set(&w, &paths, &only_shares, &Vec::new()).unwrap();
        assert_eq!(read("cpu", "cpu.shares"), "2");
        assert_eq!(read("cpu", "cpu.cfs_quota_us"), "50000");

        let hugetlb = vec![("2MB".to_string(), 0u64)];
        let err = set(&w, &paths, &ResourceConfig::default(), &hugetlb).unwrap_err();
        assert!(err.to_string().contains("hugetlb"), "{err}");
    }
}
