//! Reconstruction after a restart (reconciler.go syncStates, v1.25): the
//! volume directories under `pods/<uid>/volumes` are compared with both
//! states. A volume a pod still wants is left alone (the reconciler's
//! SetUp finds it in place: tmpfs stays mounted, unchanged files are not
//! rewritten). A volume no pod wants is recorded as mounted when it is a
//! mount point, so the reconciler tears it down, and torn down directly
//! otherwise.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use super::actual_state::{MarkMountOpts, MountState, MountedVolume};
use super::error::VolumeManagerError;
use super::operations::start_unmount;
use super::shared::Shared;
use crate::util::lifecycle::TaskSet;
use crate::volume::plugin::unique_volume_name;
use crate::volume::util::unescape_qualified_name;

/// A volume directory found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    pub pod_uid: String,
    pub volume_spec_name: String,
    pub volume_path: PathBuf,
    /// The unescaped plugin name.
    pub plugin_name: String,
}

/// Every `pods/<uid>/volumes/<plugin>/<volume>` directory (blocking).
pub fn volumes_from_pod_dirs(pods_dir: &std::path::Path) -> Vec<PodVolume> {
    let mut out = Vec::new();
    let Ok(pods) = std::fs::read_dir(pods_dir) else {
        return out;
    };
    for pod in pods.flatten() {
        if !pod.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let uid = pod.file_name().to_string_lossy().into_owned();
        let volumes_dir = pod.path().join(crate::kubelet::pod_dirs::VOLUMES_DIR_NAME);
        let Ok(plugins) = std::fs::read_dir(&volumes_dir) else {
            continue;
        };
        for plugin in plugins.flatten() {
            let plugin_name = unescape_qualified_name(&plugin.file_name().to_string_lossy());
            let Ok(vols) = std::fs::read_dir(plugin.path()) else {
                tracing::error!(path = %plugin.path().display(), "Could not read volume plugin directory");
                continue;
            };
            for vol in vols.flatten() {
                out.push(PodVolume {
                    pod_uid: uid.clone(),
                    volume_spec_name: vol.file_name().to_string_lossy().into_owned(),
                    volume_path: vol.path(),
                    plugin_name: plugin_name.clone(),
                });
            }
        }
    }
    out
}

fn reconstructed_record(
    v: &PodVolume,
    volume_name: String,
    spec: crate::volume::Spec,
    path: PathBuf,
    attributes: crate::volume::Attributes,
) -> MountedVolume {
    MountedVolume {
        pod_uid: v.pod_uid.clone(),
        pod_name: v.pod_uid.clone(),
        volume_name,
        outer_volume_spec_name: v.volume_spec_name.clone(),
        inner_volume_spec_name: v.volume_spec_name.clone(),
        plugin_name: v.plugin_name.clone(),
        spec,
        path,
        attributes,
        volume_gid_value: String::new(),
        state: MountState::Mounted,
    }
}

/// Rebuilds a volume found on disk: its plugin, spec and unique name; it
/// must be a mount point.
fn reconstruct_volume(
    shared: &Shared,
    v: &PodVolume,
    mount_points: &HashSet<PathBuf>,
) -> Result<MountedVolume, VolumeManagerError> {
    let plugin = shared.plugins.find_plugin_by_name(&v.plugin_name)?;
    let spec = plugin.construct_volume_spec(&v.volume_spec_name, &v.volume_path)?;
    let volume_name = unique_volume_name(plugin.name(), &v.pod_uid, spec.name());
    let mut pod = k8s_openapi::api::core::v1::Pod::default();
    pod.metadata.uid = Some(v.pod_uid.clone());
    let mounter = plugin.new_mounter(&spec, &Arc::new(pod))?;
    let path = mounter.path();
    if !mount_points.contains(&path) {
        return Err(VolumeManagerError::NotMounted(volume_name));
    }
    Ok(reconstructed_record(
        v,
        volume_name,
        spec,
        path,
        mounter.attributes(),
    ))
}

/// Compares the disk with both states once (syncStates).
pub async fn sync_states(shared: &Arc<Shared>, tasks: &TaskSet) {
    let host = shared.plugins.host().clone();
    let pods_dir = host.dirs().pods_dir();
    let mounter = host.mounter().clone();
    let found = tokio::task::spawn_blocking(move || {
        let vols = volumes_from_pod_dirs(&pods_dir);
        let mounts: HashSet<PathBuf> = vols
            .iter()
            .filter(|v| {
                crate::volume::util::mount::is_not_mount_point(mounter.as_ref(), &v.volume_path)
                    .is_ok_and(|not| !not)
            })
            .map(|v| v.volume_path.clone())
            .collect();
        (vols, mounts)
    })
    .await;
    let Ok((volumes, mount_points)) = found else {
        tracing::error!("Error occurred during reconstruct volume from disk");
        return;
    };
    let mut report = Vec::new();
    for v in volumes {
        if shared
            .asw
            .volume_exists_with_spec_name(&v.pod_uid, &v.volume_spec_name)
        {
            crate::vlog!(4, pod = %v.pod_uid, volume = %v.volume_spec_name, "Volume exists in actual state, skip cleaning up mounts");
            continue;
        }
        let in_dsw = shared
            .dsw
            .volume_exists_with_spec_name(&v.pod_uid, &v.volume_spec_name);
        match reconstruct_volume(shared, &v, &mount_points) {
            Err(e) => {
                if in_dsw {
                    crate::vlog!(4, pod = %v.pod_uid, volume = %v.volume_spec_name, "Volume exists in desired state, skip cleaning up mounts");
                    continue;
                }
                tracing::info!(pod = %v.pod_uid, volume = %v.volume_spec_name, error = %e, "Could not construct volume information, cleaning up mounts");
                let record = MountedVolume {
                    pod_uid: v.pod_uid.clone(),
                    pod_name: v.pod_uid.clone(),
                    volume_name: v.volume_spec_name.clone(),
                    outer_volume_spec_name: String::new(),
                    inner_volume_spec_name: v.volume_spec_name.clone(),
                    plugin_name: v.plugin_name.clone(),
                    spec: crate::volume::Spec::from_volume(
                        k8s_openapi::api::core::v1::Volume::default(),
                    ),
                    path: v.volume_path.clone(),
                    attributes: Default::default(),
                    volume_gid_value: String::new(),
                    state: MountState::Uncertain,
                };
                start_unmount(shared, tasks, record);
            }
            Ok(record) => {
                if in_dsw {
                    crate::vlog!(4, pod = %v.pod_uid, volume = %v.volume_spec_name, "Volume exists in desired state, marking as InUse");
                    report.push(record.volume_name);
                    continue;
                }
                crate::vlog!(2, pod = %v.pod_uid, volume = %v.volume_spec_name, "Reconciler sync states: could not find pod information in desired state, update it in actual state");
                shared.asw.mark_volume_as_attached(
                    &record.volume_name,
                    &record.spec,
                    &record.plugin_name,
                );
                if let Err(e) = shared
                    .asw
                    .mark_volume_as_mounted(MarkMountOpts { volume: record })
                {
                    tracing::error!(error = %e, "Could not add pod to volume information to actual state of world");
                }
            }
        }
    }
    if !report.is_empty() {
        shared.dsw.mark_volumes_reported_in_use(&report);
    }
}
