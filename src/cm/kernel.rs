//! Node requirements checked or fixed at start: swap off, the cgroup
//! controllers the kubelet needs, CFS quota support, and the kernel tunables
//! it expects (checked only with protectKernelDefaults, otherwise set).

use std::path::Path;

use super::error::CmError;
use super::subsystems::CgroupSubsystems;

/// The sysctls the kubelet wants, with their values.
pub const DESIRED_SYSCTLS: [(&str, i64); 6] = [
    ("vm/overcommit_memory", 1),
    ("vm/panic_on_oom", 0),
    ("kernel/panic", 10),
    ("kernel/panic_on_oops", 1),
    ("kernel/keys/root_maxkeys", 1_000_000),
    ("kernel/keys/root_maxbytes", 25_000_000),
];

/// What to do with a tunable that differs from the wanted value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelTunableBehavior {
    Warn,
    /// protectKernelDefaults: refuse to start.
    Error,
    /// Set it.
    Modify,
}

/// Reads a sysctl (`vm/overcommit_memory`) under `root` as an integer.
pub fn get_sysctl(root: &Path, name: &str) -> Result<i64, CmError> {
    let path = root.join(name);
    let text = std::fs::read_to_string(&path).map_err(|e| CmError::io("read", &path, e))?;
    text.trim().parse().map_err(|_| CmError::Parse {
        path,
        detail: format!("{:?} is not an integer", text.trim()),
    })
}

/// Writes a sysctl under `root`.
pub fn set_sysctl(root: &Path, name: &str, value: i64) -> Result<(), CmError> {
    let path = root.join(name);
    std::fs::write(&path, value.to_string()).map_err(|e| CmError::io("write", &path, e))
}

/// Checks (and with `Modify` sets) every wanted tunable; all problems are reported together.
pub fn setup_kernel_tunables(root: &Path, behavior: KernelTunableBehavior) -> Result<(), CmError> {
    let mut errs = Vec::new();
    for (flag, want) in DESIRED_SYSCTLS {
        let have = match get_sysctl(root, flag) {
            Ok(v) => v,
            Err(e) => {
                errs.push(e);
                continue;
            }
        };
        if have == want {
            continue;
        }
        match behavior {
            KernelTunableBehavior::Error => errs.push(CmError::Requirement(format!(
                "invalid kernel flag: {flag}, expected value: {want}, actual value: {have}"
            ))),
            KernelTunableBehavior::Warn => {
                crate::vlog!(
                    2,
                    flag,
                    expected = want,
                    actual = have,
                    "invalid kernel flag"
                )
            }
            KernelTunableBehavior::Modify => {
                crate::vlog!(
                    2,
                    flag,
                    expected = want,
                    actual = have,
                    "updating kernel flag"
                );
                if let Err(e) = set_sysctl(root, flag, want) {
                    errs.push(e);
                }
            }
        }
    }
    CmError::aggregate(errs)
}

/// Refuses to run with swap on: /proc/swaps listing anything beyond its header.
/// A missing file means no swap.
pub fn check_swap(swaps: &Path) -> Result<(), CmError> {
    let text = match std::fs::read_to_string(swaps) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %swaps.display(), "file does not exist, assuming that swap is disabled");
            return Ok(());
        }
        Err(e) => return Err(CmError::io("read", swaps, e)),
    };
    let lines: Vec<&str> = text.trim().lines().collect();
    if lines.len() > 1 {
        return Err(CmError::Requirement(format!(
            "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false; {} contained: {lines:?}",
            swaps.display()
        )));
    }
    Ok(())
}

/// What the node supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeFeatures {
    /// CFS quota files exist, so CPU limits can be enforced.
    pub cpu_hardcapping: bool,
}

/// The cgroup v1 controllers the kubelet cannot work without must be
/// mounted; CFS quota support is detected. On v2 both hold.
pub fn validate_system_requirements(
    subsystems: &CgroupSubsystems,
) -> Result<NodeFeatures, CmError> {
    if subsystems.is_unified() {
        return Ok(NodeFeatures {
            cpu_hardcapping: true,
        });
    }
    let missing: Vec<&str> = ["cpu", "cpuacct", "cpuset", "memory"]
        .into_iter()
        .filter(|s| !subsystems.has(s))
        .collect();
    if !missing.is_empty() {
        return Err(CmError::Requirement(format!(
            "system validation failed - following cgroup subsystems are not mounted: {missing:?}"
        )));
    }
    let cpu = subsystems.mount_point("cpu").unwrap_or(Path::new("/"));
    Ok(NodeFeatures {
        cpu_hardcapping: cpu.join("cpu.cfs_period_us").exists()
            && cpu.join("cpu.cfs_quota_us").exists(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysctl_tree(values: &[(&str, i64)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, v) in values {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{v}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn tunables_by_behavior() {
        let mut wrong = DESIRED_SYSCTLS.to_vec();
        wrong[0].1 = 0; // vm/overcommit_memory
        wrong[2].1 = 0; // kernel/panic
        for behavior in [
            KernelTunableBehavior::Error,
            KernelTunableBehavior::Warn,
            KernelTunableBehavior::Modify,
        ] {
            let tree = sysctl_tree(&wrong);
            let res = setup_kernel_tunables(tree.path(), behavior);
            let overcommit = get_sysctl(tree.path(), "vm/overcommit_memory").unwrap();
            match behavior {
                KernelTunableBehavior::Error => {
                    let msg = res.unwrap_err().to_string();
                    assert!(
                        msg.contains("vm/overcommit_memory, expected value: 1, actual value: 0"),
                        "{msg}"
                    );
                    assert!(msg.contains("kernel/panic, expected value: 10"), "{msg}");
                    assert_eq!(overcommit, 0, "protected defaults are never written");
                }
                KernelTunableBehavior::Warn => {
                    res.unwrap();
                    assert_eq!(overcommit, 0);
                }
                KernelTunableBehavior::Modify => {
                    res.unwrap();
                    assert_eq!(overcommit, 1);
                    assert_eq!(get_sysctl(tree.path(), "kernel/panic").unwrap(), 10);
                }
            }
        }
        let good = sysctl_tree(&DESIRED_SYSCTLS);
        setup_kernel_tunables(good.path(), KernelTunableBehavior::Error).unwrap();
        let empty = tempfile::tempdir().unwrap();
        assert!(setup_kernel_tunables(empty.path(), KernelTunableBehavior::Modify).is_err());
    }

    #[test]
    fn swap_detection() {
        let dir = tempfile::tempdir().unwrap();
        let swaps = dir.path().join("swaps");
        check_swap(&swaps).unwrap();
        std::fs::write(&swaps, "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n").unwrap();
        check_swap(&swaps).unwrap();
        std::fs::write(
            &swaps,
            "Filename\tType\tSize\tUsed\tPriority\n/swapfile\tfile\t1048572\t0\t-2\n",
        )
        .unwrap();
        let err = check_swap(&swaps).unwrap_err().to_string();
        assert!(err.contains("swap on is not supported"), "{err}");
    }

    #[test]
    fn requirements_on_v1() {
        let dir = tempfile::tempdir().unwrap();
        let mut mountinfo = String::new();
        for (i, s) in ["cpu", "cpuacct", "cpuset", "memory"].iter().enumerate() {
            std::fs::create_dir_all(dir.path().join(s)).unwrap();
            mountinfo.push_str(&format!(
                "{i} 1 0:{i} / {} rw - cgroup cgroup rw,{s}\n",
                dir.path().join(s).display()
            ));
        }
        let subs = CgroupSubsystems::from_mountinfo(&mountinfo, &Default::default()).unwrap();
        assert!(!validate_system_requirements(&subs).unwrap().cpu_hardcapping);
        std::fs::write(dir.path().join("cpu/cpu.cfs_period_us"), "100000").unwrap();
        std::fs::write(dir.path().join("cpu/cpu.cfs_quota_us"), "-1").unwrap();
        assert!(validate_system_requirements(&subs).unwrap().cpu_hardcapping);
        let partial = mountinfo.lines().take(2).collect::<Vec<_>>().join("\n");
        let subs = CgroupSubsystems::from_mountinfo(&partial, &Default::default()).unwrap();
        let err = validate_system_requirements(&subs).unwrap_err().to_string();
        assert!(err.contains("cpuset") && err.contains("memory"), "{err}");
    }
}
