//! Processes the kubelet keeps in place: the kubelet itself (kubeletCgroups,
//! with its oom_score_adj) and, with systemCgroups, every non-kernel process
//! left in the root cgroup.

use std::path::{Path, PathBuf};

use super::cgroupfs::{self, CgroupWriter};
use super::error::CmError;
use super::host::HostPaths;
use super::subsystems::{CgroupSubsystems, parse_proc_cgroup};
use crate::util::oom::OomAdjuster;

/// A cgroup given by its cgroupfs path, present in every hierarchy.
#[derive(Debug, Clone)]
pub struct SystemContainer {
    /// The configured name (`/system.slice`, `/kubelet`).
    pub name: String,
    /// (mount point, directory) per hierarchy.
    dirs: Vec<(PathBuf, PathBuf, bool)>,
    writer: CgroupWriter,
}

impl SystemContainer {
    pub fn new(name: &str, subsystems: &CgroupSubsystems, writer: CgroupWriter) -> Self {
        let mut dirs: Vec<(PathBuf, PathBuf, bool)> = Vec::new();
        if subsystems.is_unified() {
            if let Some(m) = subsystems.unified_mount() {
                dirs.push((m.to_path_buf(), cgroupfs::join_literal(m, name), false));
            }
        } else {
            for (s, m) in subsystems.mount_points() {
                if s == "devices" {
                    continue;
                }
                let dir = cgroupfs::join_literal(m, name);
                if !dirs.iter().any(|(_, d, _)| *d == dir) {
                    dirs.push((m.clone(), dir, s == "cpuset"));
                }
            }
        }
        SystemContainer {
            name: name.to_string(),
            dirs,
            writer,
        }
    }

    /// Creates the cgroup where missing and moves `pid` into it.
    pub fn apply(&self, pid: i32) -> Result<(), CmError> {
        for (mount, dir, cpuset) in &self.dirs {
            std::fs::create_dir_all(dir).map_err(|e| CmError::io("create", dir, e))?;
            if *cpuset {
                seed_cpuset(&self.writer, mount, dir)?;
            }
            self.writer.write(dir, "cgroup.procs", &pid.to_string())?;
        }
        Ok(())
    }
}

fn seed_cpuset(w: &CgroupWriter, mount: &Path, dir: &Path) -> Result<(), CmError> {
    let rel = dir.strip_prefix(mount).unwrap_or(Path::new(""));
    let mut current = mount.to_path_buf();
    for c in rel.components() {
        let parent = current.clone();
        current.push(c);
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if w.read(&current, file).unwrap_or_default().is_empty()
                && let Ok(v) = w.read(&parent, file)
                && !v.is_empty()
            {
                w.write(&current, file, &v)?;
            }
        }
    }
    Ok(())
}

/// The processes directly in the root cgroup (v1: of the devices hierarchy).
fn root_pids(subsystems: &CgroupSubsystems) -> Result<Vec<i32>, CmError> {
    let dir = if subsystems.is_unified() {
        subsystems.unified_mount()
    } else {
        subsystems
            .mount_point("devices")
            .or_else(|| subsystems.mount_point("cpu"))
    }
    .ok_or_else(|| CmError::Mounts("no hierarchy to list root processes from".into()))?;
    cgroupfs::cgroup_procs(dir)
}

/// Kernel threads have no executable.
pub fn is_kernel_pid(host: &HostPaths, pid: i32) -> bool {
    matches!(
        std::fs::read_link(host.proc.join(pid.to_string()).join("exe")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

/// Moves every non-kernel process except init out of the root cgroup into
/// `container`, retrying as processes come and go; the last attempt's error
/// is returned.
pub fn ensure_system_cgroups(
    host: &HostPaths,
    subsystems: &CgroupSubsystems,
    container: &SystemContainer,
) -> Result<(), CmError> {
    let mut last = Ok(());
    for _ in 0..=10 {
        let all = match root_pids(subsystems) {
            Ok(p) => p,
            Err(e) => {
                last = Err(e);
                continue;
            }
        };
        let pids: Vec<i32> = all
            .into_iter()
            .filter(|p| *p != 1 && !is_kernel_pid(host, *p))
            .collect();
        if pids.is_empty() {
            return Ok(());
        }
        crate::vlog!(3, pids = ?pids, "moving non-kernel processes");
        for pid in pids {
            if let Err(e) = container.apply(pid) {
                last = Err(CmError::Requirement(format!(
                    "failed to move PID {pid} into the system container {:?}: {e}",
                    container.name
                )));
            }
        }
    }
    last
}

/// The cgroup a process accounts to: the v2 path, or on v1 the cpu path
/// (which must equal the memory path), or the name=systemd path when present.
pub fn get_container(
    host: &HostPaths,
    subsystems: &CgroupSubsystems,
    pid: u32,
) -> Result<String, CmError> {
    let path = host.pid_dir(pid).join("cgroup");
    let text = std::fs::read_to_string(&path).map_err(|e| CmError::io("read", &path, e))?;
    let cgs = parse_proc_cgroup(&text);
    if subsystems.is_unified() {
        return cgs.get("").cloned().ok_or_else(|| CmError::Parse {
            path,
            detail: "no unified hierarchy entry".into(),
        });
    }
    let find = |k: &str| {
        cgs.get(k).cloned().ok_or_else(|| CmError::Parse {
            path: path.clone(),
            detail: format!("no {k} hierarchy entry"),
        })
    };
    let cpu = find("cpu")?;
    let memory = find("memory")?;
    if cpu != memory {
        return Err(CmError::Requirement(format!(
            "cpu and memory cgroup hierarchy not unified. cpu: {cpu}, memory: {memory}"
        )));
    }
    if let Some(systemd) = cgs.get("name=systemd") {
        if *systemd != cpu {
            tracing::info!(pid, "CPUAccounting not enabled for process");
        }
        if *systemd != memory {
            tracing::info!(pid, "MemoryAccounting not enabled for process");
        }
        return Ok(systemd.clone());
    }
    Ok(cpu)
}

/// Whether `pid` shares init's pid namespace.
pub fn is_process_running_in_host(host: &HostPaths, pid: u32) -> Result<bool, CmError> {
    let init = host.proc.join("1/ns/pid");
    let init_ns = std::fs::read_link(&init).map_err(|e| CmError::io("readlink", &init, e))?;
    let mine = host.pid_dir(pid).join("ns/pid");
    let ns = std::fs::read_link(&mine).map_err(|e| CmError::io("readlink", &mine, e))?;
    Ok(init_ns == ns)
}

/// Keeps a host process in `container` (when given) and applies its oom_score_adj.
pub fn ensure_process_in_container_with_oom_score(
    host: &HostPaths,
    subsystems: &CgroupSubsystems,
    pid: u32,
    oom_score_adj: i32,
    container: Option<&SystemContainer>,
) -> Result<(), CmError> {
    if !is_process_running_in_host(host, pid)? {
        crate::vlog!(2, pid, "PID is not running in the host namespace");
        return Ok(());
    }
    let mut errs = Vec::new();
    if let Some(c) = container {
        let current = get_container(host, subsystems, pid);
        if let Err(e) = &current {
            errs.push(CmError::Requirement(format!(
                "failed to find container of PID {pid}: {e}"
            )));
        }
        if current.as_deref().ok() != Some(c.name.as_str())
            && let Err(e) = c.apply(pid as i32)
        {
            errs.push(CmError::Requirement(format!(
                "failed to move PID {pid} to {:?}: {e}",
                c.name
            )));
        }
    }
    let target = (pid != 0).then_some(pid);
    if let Err(e) = OomAdjuster::with_proc_root(&host.proc).apply_blocking(target, oom_score_adj) {
        crate::vlog!(3, pid, oom_score_adj, error = %e, "failed to apply oom_score_adj to process");
        errs.push(CmError::Requirement(format!(
            "failed to apply oom score {oom_score_adj} to PID {pid}: {e}"
        )));
    }
    CmError::aggregate(errs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::cgroupfs::WriteMode;

    struct Fake {
        dir: tempfile::TempDir,
        host: HostPaths,
        subs: CgroupSubsystems,
    }

    fn fake() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let mut mountinfo = String::new();
        for (i, s) in ["cpu", "cpuset", "memory", "devices"].iter().enumerate() {
            std::fs::create_dir_all(dir.path().join("cg").join(s)).unwrap();
            mountinfo.push_str(&format!(
                "{i} 1 0:{i} / {} rw - cgroup cgroup rw,{s}\n",
                dir.path().join("cg").join(s).display()
            ));
        }
        std::fs::write(dir.path().join("cg/cpuset/cpuset.cpus"), "0-1").unwrap();
        std::fs::write(dir.path().join("cg/cpuset/cpuset.mems"), "0").unwrap();
        let subs = CgroupSubsystems::from_mountinfo(&mountinfo, &Default::default()).unwrap();
        let proc = dir.path().join("proc");
        for pid in ["1", "77", "88", "99"] {
            std::fs::create_dir_all(proc.join(pid).join("ns")).unwrap();
            std::os::unix::fs::symlink("pid:[4026531836]", proc.join(pid).join("ns/pid")).unwrap();
            std::fs::write(proc.join(pid).join("oom_score_adj"), "0").unwrap();
        }
        // 88 is a user process; 99 a kernel thread (no exe).
        std::os::unix::fs::symlink("/bin/sleep", proc.join("88/exe")).unwrap();
        let host = HostPaths {
            proc,
            ..HostPaths::default()
        };
        Fake { dir, host, subs }
    }

    #[test]
    fn system_cgroups_take_root_processes() {
        let f = fake();
        std::fs::write(f.dir.path().join("cg/devices/cgroup.procs"), "1\n88\n99\n").unwrap();
        let c = SystemContainer::new("/system", &f.subs, CgroupWriter::new(WriteMode::PlainFiles));
        // A fake tree never empties its root, so every attempt moves 88 again; that is fine.
        ensure_system_cgroups(&f.host, &f.subs, &c).unwrap();
        assert!(!f.dir.path().join("cg/devices/system").exists());
        for s in ["cpu", "cpuset", "memory"] {
            let procs = std::fs::read_to_string(
                f.dir.path().join("cg").join(s).join("system/cgroup.procs"),
            )
            .unwrap();
            assert_eq!(procs, "88", "{s}");
        }
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("cg/cpuset/system/cpuset.cpus")).unwrap(),
            "0-1"
        );
    }

    #[test]
    fn kubelet_container_and_oom_score() {
        let f = fake();
        std::fs::write(
            f.host.proc.join("77/cgroup"),
            "3:cpu:/\n2:memory:/\n1:name=systemd:/user.slice\n",
        )
        .unwrap();
        assert_eq!(get_container(&f.host, &f.subs, 77).unwrap(), "/user.slice");
        let c = SystemContainer::new(
            "/kubelet",
            &f.subs,
            CgroupWriter::new(WriteMode::PlainFiles),
        );
        ensure_process_in_container_with_oom_score(&f.host, &f.subs, 77, -999, Some(&c)).unwrap();
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("cg/memory/kubelet/cgroup.procs")).unwrap(),
            "77"
        );
        assert_eq!(
            std::fs::read_to_string(f.host.proc.join("77/oom_score_adj")).unwrap(),
            "-999"
        );

        std::fs::write(f.host.proc.join("77/cgroup"), "3:cpu:/\n2:memory:/other\n").unwrap();
        let err = get_container(&f.host, &f.subs, 77).unwrap_err().to_string();
        assert!(err.contains("not unified"), "{err}");
    }
}
