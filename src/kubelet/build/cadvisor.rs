//! The containers behind /metrics/cadvisor: this host's cgroup layout and
//! the subtrees reported besides the machine — the pods' root, and the
//! kubelet's, runtime's and system's cgroups (as the Go kubelet hands
//! cadvisor its cgroup roots).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cadvisor::container::{CgroupLayout, ContainerReader};
use crate::cm::host::HostPaths;
use crate::cm::subsystems::CgroupSubsystems;
use crate::kubelet::stats::CadvisorContainers;

/// The machine's boot time (`btime` of /proc/stat).
fn boot_time(proc_root: &Path) -> SystemTime {
    std::fs::read_to_string(proc_root.join("stat"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
        })
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
        .unwrap_or(UNIX_EPOCH)
}

/// The cgroup subtrees reported besides `/`; the whole machine (`/`) is
/// never walked, only sampled.
pub fn cgroup_roots(pods_root: &str, kubelet: &str, runtime: &str, system: &str) -> Vec<String> {
    let mut roots: Vec<String> = Vec::new();
    for r in [pods_root, kubelet, runtime, system] {
        let r = format!("/{}", r.trim_matches('/'));
        if r != "/" && !roots.contains(&r) {
            roots.push(r);
        }
    }
    roots
}

/// Detects the layout (blocking file reads, off the runtime threads) and
/// builds the source.
pub(super) async fn build(
    env: &super::Env,
    pods: Arc<crate::kubelet::pod::PodManager>,
    clock: Arc<dyn crate::util::clock::Clock>,
) -> Result<Arc<CadvisorContainers>, super::BuildError> {
    let c = &env.server.config;
    let pods_root = env.container_manager.get_pod_cgroup_root();
    let (runtime_cg, system_cg, kubelet_cg) = (
        env.server.flags.runtime_cgroups.clone(),
        c.system_cgroups.clone(),
        c.kubelet_cgroups.clone(),
    );
    let (layout, boot, own, partitions) = tokio::task::spawn_blocking(move || {
        let proc_root = Path::new("/proc");
        let subsystems = CgroupSubsystems::detect(&HostPaths::default())?;
        let layout = match subsystems.unified_mount() {
            Some(m) if subsystems.is_unified() => CgroupLayout::V2(m.to_path_buf()),
            _ => CgroupLayout::V1(subsystems.mount_points().clone()),
        };
        // The kubelet's own cgroup, found as Go finds it (on v1 the cpu and
        // memory paths must agree); when it cannot be, its rows are left out.
        let own = crate::cm::system_containers::get_container(
            &HostPaths::default(),
            &subsystems,
            std::process::id(),
        )
        .inspect_err(|e| {
            tracing::info!(err = %e, "Failed to get the kubelet's cgroup. Kubelet system container metrics may be missing.");
        })
        .ok();
        // The root container's filesystems, listed once at start as
        // cadvisor lists them.
        let partitions = std::fs::read_to_string(proc_root.join("self/mountinfo"))
            .map(|m| crate::cadvisor::container::partitions(&m))
            .unwrap_or_else(|e| {
                tracing::warn!(err = %e, "Failed to read mountinfo; no filesystem stats for the root container");
                Vec::new()
            });
        Ok::<_, crate::cm::CmError>((layout, boot_time(proc_root), own, partitions))
    })
    .await??;
    let kubelet_cg = if kubelet_cg.is_empty() {
        own.unwrap_or_default()
    } else {
        kubelet_cg
    };
    let roots = cgroup_roots(&pods_root, &kubelet_cg, &runtime_cg, &system_cg);
    Ok(Arc::new(CadvisorContainers::new(
        ContainerReader::new(layout, "/proc".into(), boot, partitions),
        roots,
        env.runtime_services.runtime.clone(),
        env.runtime_services.image.clone(),
        pods,
        env.machine_info.clone(),
        clock,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_table() {
        let cases: [(&[&str; 4], &[&str]); 3] = [
            (&["/kubepods", "", "", ""], &["/kubepods"]),
            (
                &[
                    "kubepods.slice",
                    "/system.slice/kubelet.service",
                    "/system.slice/containerd.service",
                    "/system.slice",
                ],
                &[
                    "/kubepods.slice",
                    "/system.slice/kubelet.service",
                    "/system.slice/containerd.service",
                    "/system.slice",
                ],
            ),
            (&["/kubepods", "/", "/kubepods", ""], &["/kubepods"]),
        ];
        for (input, want) in cases {
            assert_eq!(
                cgroup_roots(input[0], input[1], input[2], input[3]),
                *want,
                "{input:?}"
            );
        }
        assert!(boot_time(Path::new("/proc")) > UNIX_EPOCH);
    }
}
