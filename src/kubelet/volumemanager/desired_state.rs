//! The desired state of the world (cache/desired_state_of_world.go): which
//! volumes should be mounted for which pods, and the errors met while
//! working that out, per pod. Filled by the populator, read by the
//! reconciler and by WaitForAttachAndMount.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;

use super::error::VolumeManagerError;
use crate::volume::plugin::{PluginManager, unique_volume_name};
use crate::volume::spec::Spec;

/// At most this many distinct errors are kept per pod.
const MAX_POD_ERRORS: usize = 10;

/// One (volume, pod) pair to mount.
#[derive(Clone)]
pub struct VolumeToMount {
    /// `<plugin>/<pod uid>-<volume>`.
    pub volume_name: String,
    pub pod_uid: String,
    pub pod: Arc<Pod>,
    pub spec: Spec,
    /// The volume's name in the pod spec.
    pub outer_volume_spec_name: String,
    pub plugin_name: &'static str,
    pub plugin_is_attachable: bool,
    /// The `pv.beta.kubernetes.io/gid` of a persistent volume ("" here).
    pub volume_gid_value: String,
    pub reported_in_use: bool,
}

struct PodToMount {
    pod: Arc<Pod>,
    spec: Spec,
    outer_volume_spec_name: String,
}

struct DesiredVolume {
    plugin_name: &'static str,
    gid_value: String,
    reported_in_use: bool,
    pods: BTreeMap<String, PodToMount>,
}

#[derive(Default)]
struct Inner {
    volumes: BTreeMap<String, DesiredVolume>,
    pod_errors: HashMap<String, BTreeSet<String>>,
}

/// The desired state.
pub struct DesiredStateOfWorld {
    inner: Mutex<Inner>,
    plugins: Arc<PluginManager>,
}

impl DesiredStateOfWorld {
    pub fn new(plugins: Arc<PluginManager>) -> Self {
        DesiredStateOfWorld {
            inner: Mutex::new(Inner::default()),
            plugins,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds (or refreshes) the pod's use of the volume in `spec`; returns
    /// the volume's unique name.
    pub fn add_pod_to_volume(
        &self,
        pod_uid: &str,
        pod: &Arc<Pod>,
        spec: Spec,
        outer_volume_spec_name: &str,
        gid_value: &str,
    ) -> Result<String, VolumeManagerError> {
        let plugin = self.plugins.find_plugin_by_spec(&spec).map_err(|source| {
            VolumeManagerError::NoPlugin {
                volume: spec.name().to_string(),
                source,
            }
        })?;
        let volume_name = unique_volume_name(plugin.name(), pod_uid, spec.name());
        let mut inner = self.lock();
        let vol = inner
            .volumes
            .entry(volume_name.clone())
            .or_insert_with(|| DesiredVolume {
                plugin_name: plugin.name(),
                gid_value: gid_value.to_string(),
                reported_in_use: false,
                pods: BTreeMap::new(),
            });
        vol.pods.insert(
            pod_uid.to_string(),
            PodToMount {
                pod: pod.clone(),
                spec,
                outer_volume_spec_name: outer_volume_spec_name.to_string(),
            },
        );
        Ok(volume_name)
    }

    /// Removes the pod from the volume, and the volume once no pod uses it.
    pub fn delete_pod_from_volume(&self, pod_uid: &str, volume_name: &str) {
        let mut inner = self.lock();
        if let Some(vol) = inner.volumes.get_mut(volume_name) {
            vol.pods.remove(pod_uid);
            if vol.pods.is_empty() {
                inner.volumes.remove(volume_name);
            }
        }
    }

    pub fn pod_exists_in_volume(&self, pod_uid: &str, volume_name: &str) -> bool {
        self.lock()
            .volumes
            .get(volume_name)
            .is_some_and(|v| v.pods.contains_key(pod_uid))
    }

    pub fn volume_exists(&self, volume_name: &str) -> bool {
        self.lock().volumes.contains_key(volume_name)
    }

    /// Whether the pod wants a volume with this name in its spec.
    pub fn volume_exists_with_spec_name(&self, pod_uid: &str, spec_name: &str) -> bool {
        self.lock().volumes.values().any(|v| {
            v.pods
                .get(pod_uid)
                .is_some_and(|p| p.spec.name() == spec_name)
        })
    }

    /// The UIDs of all pods that want volumes.
    pub fn get_pods(&self) -> BTreeSet<String> {
        self.lock()
            .volumes
            .values()
            .flat_map(|v| v.pods.keys().cloned())
            .collect()
    }

    /// Every (volume, pod) pair.
    pub fn get_volumes_to_mount(&self) -> Vec<VolumeToMount> {
        let inner = self.lock();
        let mut out = Vec::new();
        for (name, vol) in &inner.volumes {
            for (uid, p) in &vol.pods {
                out.push(VolumeToMount {
                    volume_name: name.clone(),
                    pod_uid: uid.clone(),
                    pod: p.pod.clone(),
                    spec: p.spec.clone(),
                    outer_volume_spec_name: p.outer_volume_spec_name.clone(),
                    plugin_name: vol.plugin_name,
                    plugin_is_attachable: false,
                    volume_gid_value: vol.gid_value.clone(),
                    reported_in_use: vol.reported_in_use,
                });
            }
        }
        out
    }

    /// Marks the named volumes as reported in the node's volumesInUse.
    pub fn mark_volumes_reported_in_use(&self, names: &[String]) {
        let mut inner = self.lock();
        for (name, vol) in inner.volumes.iter_mut() {
            vol.reported_in_use = names.contains(name);
        }
    }

    pub fn add_error_to_pod(&self, pod_uid: &str, err: String) {
        let mut inner = self.lock();
        let errs = inner.pod_errors.entry(pod_uid.to_string()).or_default();
        if errs.len() < MAX_POD_ERRORS {
            errs.insert(err);
        }
    }

    /// The pod's errors (sorted), forgetting them.
    pub fn pop_pod_errors(&self, pod_uid: &str) -> Vec<String> {
        self.lock()
            .pod_errors
            .remove(pod_uid)
            .map(|s| s.into_iter().collect())
            .unwrap_or_default()
    }

    pub fn get_pods_with_errors(&self) -> Vec<String> {
        self.lock().pod_errors.keys().cloned().collect()
    }
}
