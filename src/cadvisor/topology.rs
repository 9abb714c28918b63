//! NUMA nodes, cores and threads from sysfs, as cadvisor builds them: one
//! entry per node under `devices/system/node`, or — without NUMA
//! information — one per physical package of the CPUs on the cpu bus.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::machine::{hugepages_in, meminfo_bytes};
use super::{Core, MachineInfoError, NumaNode};
use crate::cm::cpuset::CpuSet;

/// Entries `<prefix><n>` of `dir`, as (n, path), ascending by n.
fn numbered(dir: &Path, prefix: &str) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    out.sort();
    out
}

fn read_u32(path: &Path) -> Result<Option<u32>, MachineInfoError> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| MachineInfoError::Parse {
                path: path.to_path_buf(),
                detail: format!("{:?} is not a number", text.trim()),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MachineInfoError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Groups online CPUs into cores by (core id, package id), in CPU order.
fn cores_of(
    cpus: &[(u32, PathBuf)],
    online: &Option<CpuSet>,
) -> Result<Vec<Core>, MachineInfoError> {
    let mut cores: Vec<Core> = Vec::new();
    for (cpu, dir) in cpus {
        if online.as_ref().is_some_and(|set| !set.contains(*cpu)) {
            continue;
        }
        let Some(core_id) = read_u32(&dir.join("topology/core_id"))? else {
            tracing::warn!(cpu = %dir.display(), "cannot read core id: core_id file does not exist");
            continue;
        };
        let Some(socket_id) = read_u32(&dir.join("topology/physical_package_id"))? else {
            tracing::warn!(cpu = %dir.display(), "cannot read physical package id: file does not exist");
            continue;
        };
        match cores
            .iter_mut()
            .find(|c| c.id == core_id && c.socket_id == socket_id)
        {
            Some(core) => core.threads.push(*cpu),
            None => cores.push(Core {
                id: core_id,
                threads: vec![*cpu],
                socket_id,
            }),
        }
    }
    Ok(cores)
}

fn online_cpus(sys: &Path) -> Option<CpuSet> {
    let text = std::fs::read_to_string(sys.join("devices/system/cpu/online")).ok()?;
    CpuSet::parse(&text).ok()
}

/// The NUMA nodes and the number of logical CPUs in them.
pub fn nodes(sys: &Path) -> Result<(Vec<NumaNode>, u32), MachineInfoError> {
    let online = online_cpus(sys);
    let node_dirs = numbered(&sys.join("devices/system/node"), "node");
    if node_dirs.is_empty() {
        return cpu_topology(sys, &online);
    }
    let mut nodes = Vec::new();
    let mut logical = 0u32;
    for (id, dir) in node_dirs {
        let cpus = numbered(&dir, "cpu");
        let cores = cores_of(&cpus, &online)?;
        logical += cores.iter().map(|c| c.threads.len() as u32).sum::<u32>();
        let meminfo_path = dir.join("meminfo");
        let meminfo =
            std::fs::read_to_string(&meminfo_path).map_err(|source| MachineInfoError::Read {
                path: meminfo_path.clone(),
                source,
            })?;
        let memory =
            meminfo_bytes(&meminfo, "MemTotal").ok_or_else(|| MachineInfoError::Parse {
                path: meminfo_path,
                detail: "no MemTotal line".into(),
            })?;
        let distances = std::fs::read_to_string(dir.join("distance"))
            .map(|t| {
                t.split_whitespace()
                    .filter_map(|d| d.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        nodes.push(NumaNode {
            id,
            memory,
            hugepages: hugepages_in(&dir.join("hugepages"))?,
            cores,
            distances,
        });
    }
    Ok((nodes, logical))
}

fn cpu_topology(
    sys: &Path,
    online: &Option<CpuSet>,
) -> Result<(Vec<NumaNode>, u32), MachineInfoError> {
    let cpus = numbered(&sys.join("bus/cpu/devices"), "cpu");
    if cpus.is_empty() {
        return Err(MachineInfoError::Parse {
            path: sys.join("bus/cpu/devices"),
            detail: "no CPU is available".into(),
        });
    }
    let count = cpus.len() as u32;
    let mut by_package: BTreeMap<u32, Vec<(u32, PathBuf)>> = BTreeMap::new();
    for (cpu, dir) in cpus {
        if let Some(pkg) = read_u32(&dir.join("topology/physical_package_id"))? {
            by_package.entry(pkg).or_default().push((cpu, dir));
        }
    }
    let mut nodes = Vec::new();
    for (pkg, cpus) in by_package {
        nodes.push(NumaNode {
            id: pkg,
            cores: cores_of(&cpus, online)?,
            ..Default::default()
        });
    }
    Ok((nodes, count))
}
