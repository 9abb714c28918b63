//! cgroup v2: one directory in the unified tree, controllers enabled down the
//! path through `cgroup.subtree_control`, limits in the v2 interface files.

use std::collections::BTreeSet;
use std::path::Path;

use super::CgroupWriter;
use super::v1::HugetlbLimits;
use crate::cm::error::CmError;
use crate::cm::resources::ResourceConfig;

/// Converts v1 cpu shares [2, 262144] to a v2 cpu weight [1, 10000], as
/// libcontainer does; 0 stays unset.
pub fn cpu_shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    if shares >= 262_144 {
        return 10_000;
    }
    1 + (shares.saturating_sub(2) * 9_999) / 262_142
}

/// Creates `path` (and its missing ancestors) under the unified mount,
/// enabling `controllers` in the subtree of every ancestor on the way.
pub fn create(
    w: &CgroupWriter,
    mount: &Path,
    path: &Path,
    controllers: &BTreeSet<String>,
) -> Result<(), CmError> {
    let rel = path.strip_prefix(mount).map_err(|_| CmError::InvalidName {
        name: path.display().to_string(),
        reason: format!("not under the unified mount {}", mount.display()),
    })?;
    let enable = controllers
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut current = mount.to_path_buf();
    for component in rel.components() {
        if !enable.is_empty()
            && w.write(&current, "cgroup.subtree_control", &enable)
                .is_err()
        {
            // Enable one by one; what cannot be enabled shows up when set.
            for c in enable.split(' ') {
                let _ = w.write(&current, "cgroup.subtree_control", c);
            }
        }
        current.push(component);
        match std::fs::create_dir(&current) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(CmError::io("create", &current, e)),
        }
        if let Ok(kind) = w.read(&current, "cgroup.type")
            && matches!(
                kind.as_str(),
                "domain invalid" | "threaded" | "domain threaded"
            )
        {
            return Err(CmError::Requirement(format!(
                "cannot enter cgroupv2 {} with domain controllers -- it is in {kind} mode",
                current.display()
            )));
        }
    }
    Ok(())
}

fn num_to_str(v: i64) -> Option<String> {
    match v {
        0 => None,
        -1 => Some("max".into()),
        n => Some(n.to_string()),
    }
}

/// Writes the limits of `r` into the v2 cgroup directory `dir`, in runc's
/// order: pids, memory, cpu, cpuset, hugetlb, then raw unified files.
pub fn set(
    w: &CgroupWriter,
    dir: &Path,
    r: &ResourceConfig,
    hugetlb: &HugetlbLimits,
) -> Result<(), CmError> {
    if let Some(v) = r.pids_limit.and_then(num_to_str) {
        w.write(dir, "pids.max", &v)?;
    }
    if let Some(memory) = r.memory.filter(|m| *m != 0) {
        if memory == -1 {
            // Unlimited memory lifts the swap limit too, where swap is accounted.
            match w.write(dir, "memory.swap.max", "max") {
                Err(e) if !e.is_not_found() => return Err(e),
                _ => {}
            }
        }
        if let Some(v) = num_to_str(memory) {
            w.write(dir, "memory.max", &v)?;
        }
    }
    let weight = r.cpu_shares.map(cpu_shares_to_weight).unwrap_or(0);
    if weight != 0 {
        w.write(dir, "cpu.weight", &weight.to_string())?;
    }
    let quota = r.cpu_quota.unwrap_or(0);
    let period = r.cpu_period.unwrap_or(0);
    if quota != 0 || period != 0 {
        let mut value = if quota > 0 {
            quota.to_string()
        } else {
            "max".to_string()
        };
        if period != 0 {
            value.push_str(&format!(" {period}"));
        }
        w.write(dir, "cpu.max", &value)?;
    }
    if let Some(cpus) = r.cpuset_cpus.as_deref().filter(|s| !s.is_empty()) {
        w.write(dir, "cpuset.cpus", cpus)?;
    }
    if let Some(mems) = r.cpuset_mems.as_deref().filter(|s| !s.is_empty()) {
        w.write(dir, "cpuset.mems", mems)?;
    }
    for (size, limit) in hugetlb {
        w.write(dir, &format!("hugetlb.{size}.max"), &limit.to_string())?;
    }
    for (file, value) in &r.unified {
        if file.contains('/') {
            return Err(CmError::InvalidName {
                name: file.clone(),
                reason: "a unified resource must name a file of the cgroup".into(),
            });
        }
        w.write(dir, file, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::cgroupfs::WriteMode;

    #[test]
    fn weight_conversion() {
        let cases = [
            (0, 0),
            (2, 1),
            (102, 4),
            (512, 20),
            (1024, 39),
            (2048, 79),
            (262_144, 10_000),
            (1_000_000, 10_000),
        ];
        for (shares, weight) in cases {
            assert_eq!(cpu_shares_to_weight(shares), weight, "shares {shares}");
        }
    }

    #[test]
    fn create_enables_controllers_down_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let w = CgroupWriter::new(WriteMode::PlainFiles);
        let controllers: BTreeSet<String> =
            ["cpu", "memory"].iter().map(|s| s.to_string()).collect();
        let target = dir.path().join("kubepods/burstable");
        create(&w, dir.path(), &target, &controllers).unwrap();
        assert!(target.is_dir());
        assert_eq!(
            w.read(dir.path(), "cgroup.subtree_control").unwrap(),
            "+cpu +memory"
        );
        assert_eq!(
            w.read(&dir.path().join("kubepods"), "cgroup.subtree_control")
                .unwrap(),
            "+cpu +memory"
        );
        assert!(w.read(&target, "cgroup.subtree_control").is_err());
        assert!(create(&w, dir.path(), Path::new("/elsewhere"), &controllers).is_err());
    }

    #[test]
    fn set_writes_v2_files() {
        let dir = tempfile::tempdir().unwrap();
        let w = CgroupWriter::new(WriteMode::PlainFiles);
        let r = ResourceConfig {
            memory: Some(268435456),
            cpu_shares: Some(102),
            cpu_quota: Some(100000),
            cpu_period: Some(100000),
            pids_limit: Some(1024),
            cpuset_cpus: Some("0-1".into()),
            unified: [("memory.min".to_string(), "67108864".to_string())].into(),
            ..Default::default()
        };
        set(&w, dir.path(), &r, &vec![("2MB".into(), 0)]).unwrap();
        let read = |f: &str| w.read(dir.path(), f).unwrap();
        assert_eq!(read("memory.max"), "268435456");
        assert_eq!(read("cpu.weight"), "4");
        assert_eq!(read("cpu.max"), "100000 100000");
        assert_eq!(read("pids.max"), "1024");
        assert_eq!(read("cpuset.cpus"), "0-1");
        assert_eq!(read("hugetlb.2MB.max"), "0");
        assert_eq!(read("memory.min"), "67108864");

        let unlimited = ResourceConfig {
            cpu_quota: Some(-1),
            cpu_period: Some(100000),
            pids_limit: Some(-1),
            memory: Some(-1),
            ..Default::default()
        };
        set(&w, dir.path(), &unlimited, &Vec::new()).unwrap();
        assert_eq!(read("cpu.max"), "max 100000");
        assert_eq!(read("pids.max"), "max");
        assert_eq!(read("memory.max"), "max");
        assert_eq!(read("memory.swap.max"), "max");
    }
}
