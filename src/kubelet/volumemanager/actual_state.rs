//! The actual state of the world (cache/actual_state_of_world.go): which
//! volumes are attached (for the plugins here: known to the node) and
//! which pods have them mounted, mounted uncertainly (a SetUp or TearDown
//! that may have half happened), or need a remount.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use super::error::VolumeManagerError;
use crate::volume::plugin::PluginManager;
use crate::volume::spec::{Attributes, Spec};

/// How far a pod's mount of a volume got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountState {
    Mounted,
    /// A SetUp or TearDown failed midway; the volume may be mounted.
    Uncertain,
}

/// A pod's mount of a volume, as the reconciler and the kubelet see it.
#[derive(Debug, Clone)]
pub struct MountedVolume {
    pub pod_uid: String,
    /// `namespace/name` of the pod, for logs.
    pub pod_name: String,
    pub volume_name: String,
    /// The volume's name in the pod spec.
    pub outer_volume_spec_name: String,
    /// The plugin's own name for the volume (the same for inline volumes).
    pub inner_volume_spec_name: String,
    pub plugin_name: String,
    pub spec: Spec,
    /// Where the volume is on the host.
    pub path: PathBuf,
    pub attributes: Attributes,
    pub volume_gid_value: String,
    pub state: MountState,
}

/// Why a pod's volume is not simply mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExistsError {
    /// The volume is not attached (not known to the node yet).
    NotAttached,
    /// Mounted, but SetUp must run again.
    RemountRequired,
}

struct MountedPod {
    volume: MountedVolume,
    remount_required: bool,
}

struct AttachedVolume {
    spec: Spec,
    plugin_name: String,
    plugin_is_attachable: bool,
    /// Boxed: a map node holds eleven entries inline, and most volumes
    /// have one pod.
    pods: BTreeMap<String, Box<MountedPod>>,
}

/// What to record when a SetUp succeeded or became uncertain.
#[derive(Debug, Clone)]
pub struct MarkMountOpts {
    pub volume: MountedVolume,
}

/// The actual state.
pub struct ActualStateOfWorld {
    inner: Mutex<BTreeMap<String, AttachedVolume>>,
    plugins: Arc<PluginManager>,
}

impl ActualStateOfWorld {
    pub fn new(plugins: Arc<PluginManager>) -> Self {
        ActualStateOfWorld {
            inner: Mutex::new(BTreeMap::new()),
            plugins,
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, AttachedVolume>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the volume as attached (no-op when it already is).
    pub fn mark_volume_as_attached(&self, volume_name: &str, spec: &Spec, plugin_name: &str) {
        self.lock()
            .entry(volume_name.to_string())
            .or_insert_with(|| AttachedVolume {
                spec: spec.clone(),
                plugin_name: plugin_name.to_string(),
                plugin_is_attachable: false,
                pods: BTreeMap::new(),
            });
    }

    /// Forgets the volume entirely.
    pub fn mark_volume_as_detached(&self, volume_name: &str) {
        self.lock().remove(volume_name);
    }

    fn mark(&self, mut volume: MountedVolume, state: MountState) -> Result<(), VolumeManagerError> {
        let mut inner = self.lock();
        let Some(vol) = inner.get_mut(&volume.volume_name) else {
            return Err(VolumeManagerError::NotAttached(volume.volume_name));
        };
        volume.state = state;
        vol.pods.insert(
            volume.pod_uid.clone(),
            Box::new(MountedPod {
                volume,
                remount_required: false,
            }),
        );
        Ok(())
    }

    /// A SetUp succeeded.
    pub fn mark_volume_as_mounted(&self, opts: MarkMountOpts) -> Result<(), VolumeManagerError> {
        self.mark(opts.volume, MountState::Mounted)
    }

    /// A SetUp or TearDown may have half happened. A pod already recorded
    /// as mounted keeps its record (only the state changes).
    pub fn mark_volume_mount_as_uncertain(
        &self,
        opts: MarkMountOpts,
    ) -> Result<(), VolumeManagerError> {
        self.mark(opts.volume, MountState::Uncertain)
    }

    /// TearDown succeeded: the pod no longer has the volume.
    pub fn mark_volume_as_unmounted(&self, pod_uid: &str, volume_name: &str) {
        if let Some(vol) = self.lock().get_mut(volume_name) {
            vol.pods.remove(pod_uid);
        }
    }

    /// Every mounted volume of the pod whose plugin remounts on updates
    /// will be set up again.
    pub fn mark_remount_required(&self, pod_uid: &str) {
        let mut inner = self.lock();
        for vol in inner.values_mut() {
            if let Some(p) = vol.pods.get_mut(pod_uid)
                && let Ok(plugin) = self.plugins.find_plugin_by_spec(&p.volume.spec)
                && plugin.requires_remount(&p.volume.spec)
            {
                p.remount_required = true;
            }
        }
    }

    /// Whether the pod has the volume mounted; the errors say it is not
    /// attached or needs a remount.
    pub fn pod_exists_in_volume(
        &self,
        pod_uid: &str,
        volume_name: &str,
    ) -> Result<bool, ExistsError> {
        let inner = self.lock();
        let Some(vol) = inner.get(volume_name) else {
            return Err(ExistsError::NotAttached);
        };
        match vol.pods.get(pod_uid) {
            None => Ok(false),
            Some(p) if p.volume.state == MountState::Uncertain => Ok(false),
            Some(p) if p.remount_required => Err(ExistsError::RemountRequired),
            Some(_) => Ok(true),
        }
    }

    /// True unless the pod still has the volume mounted or uncertain.
    pub fn pod_removed_from_volume(&self, pod_uid: &str, volume_name: &str) -> bool {
        self.lock()
            .get(volume_name)
            .and_then(|v| v.pods.get(pod_uid))
            .is_none()
    }

    pub fn volume_exists(&self, volume_name: &str) -> bool {
        self.lock().contains_key(volume_name)
    }

    pub fn volume_exists_with_spec_name(&self, pod_uid: &str, spec_name: &str) -> bool {
        self.lock().values().any(|v| {
            v.pods
                .get(pod_uid)
                .is_some_and(|p| p.volume.inner_volume_spec_name == spec_name)
        })
    }

    pub fn get_volume_mount_state(&self, volume_name: &str, pod_uid: &str) -> Option<MountState> {
        self.lock()
            .get(volume_name)
            .and_then(|v| v.pods.get(pod_uid))
            .map(|p| p.volume.state)
    }

    fn collect(&self, filter: impl Fn(&str, &MountedPod) -> bool) -> Vec<MountedVolume> {
        self.lock()
            .values()
            .flat_map(|v| v.pods.iter())
            .filter(|(uid, p)| filter(uid, p))
            .map(|(_, p)| p.volume.clone())
            .collect()
    }

    /// The pod's volumes that are certainly mounted.
    pub fn get_mounted_volumes_for_pod(&self, pod_uid: &str) -> Vec<MountedVolume> {
        self.collect(|uid, p| uid == pod_uid && p.volume.state == MountState::Mounted)
    }

    /// The pod's volumes that are mounted or may be.
    pub fn get_possibly_mounted_volumes_for_pod(&self, pod_uid: &str) -> Vec<MountedVolume> {
        self.collect(|uid, _| uid == pod_uid)
    }

    /// Every pod's mounted or possibly mounted volumes.
    pub fn get_all_mounted_volumes(&self) -> Vec<MountedVolume> {
        self.collect(|_, _| true)
    }

    /// Attached volumes no pod has mounted.
    pub fn get_unmounted_volumes(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, v)| v.pods.is_empty())
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Attached volumes (name, plugin, attachable).
    pub fn get_attached_volumes(&self) -> Vec<(String, String, bool)> {
        self.lock()
            .iter()
            .map(|(n, v)| (n.clone(), v.plugin_name.clone(), v.plugin_is_attachable))
            .collect()
    }

    /// The spec an attached volume was recorded with.
    pub fn attached_spec(&self, volume_name: &str) -> Option<Spec> {
        self.lock().get(volume_name).map(|v| v.spec.clone())
    }
}
