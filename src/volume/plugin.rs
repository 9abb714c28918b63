//! The plugin seam (pkg/volume/plugins.go): a plugin recognises the volume
//! sources it handles and makes mounters (SetUp) and unmounters (TearDown)
//! for them; the plugin manager finds the plugin for a spec.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::spec::{Attributes, MounterArgs, Spec};

/// Makes one pod volume available on the host.
#[async_trait]
pub trait Mounter: Send + Sync {
    /// Where the volume is on the host (what containers bind-mount).
    fn path(&self) -> PathBuf;
    fn attributes(&self) -> Attributes;
    /// Sets the volume up at `path()`. Idempotent: called again on every
    /// remount, it keeps what is already in place.
    async fn set_up(&self, args: &MounterArgs) -> Result<(), VolumeError>;
}

/// Removes one pod volume from the host.
#[async_trait]
pub trait Unmounter: Send + Sync {
    fn path(&self) -> PathBuf;
    async fn tear_down(&self) -> Result<(), VolumeError>;
}

/// A kind of volume (`kubernetes.io/empty-dir`, ...).
pub trait VolumePlugin: Send + Sync {
    /// The qualified plugin name.
    fn name(&self) -> &'static str;
    fn can_support(&self, spec: &Spec) -> bool;
    /// Whether SetUp must run again on pod updates and resyncs (volumes
    /// projecting API data).
    fn requires_remount(&self, spec: &Spec) -> bool;
    fn new_mounter(&self, spec: &Spec, pod: &Arc<Pod>) -> Result<Arc<dyn Mounter>, VolumeError>;
    fn new_unmounter(
        &self,
        volume_name: &str,
        pod_uid: &str,
    ) -> Result<Arc<dyn Unmounter>, VolumeError>;
    /// A spec good enough to unmount a volume found on disk after a
    /// restart.
    fn construct_volume_spec(
        &self,
        volume_name: &str,
        mount_path: &Path,
    ) -> Result<Spec, VolumeError>;
}

/// The unique name of a pod-scoped volume: `<plugin>/<pod uid>-<volume>`.
pub fn unique_volume_name(plugin_name: &str, pod_uid: &str, volume_name: &str) -> String {
    format!("{plugin_name}/{pod_uid}-{volume_name}")
}

/// The registered plugins.
pub struct PluginManager {
    host: Arc<VolumeHost>,
    plugins: Vec<Arc<dyn VolumePlugin>>,
}

impl PluginManager {
    /// The kubelet's in-tree plugins: emptyDir, hostPath, configMap,
    /// secret, downwardAPI and projected.
    pub fn new(host: Arc<VolumeHost>) -> Self {
        use crate::volume::{configmap, downwardapi, emptydir, hostpath, projected, secret};
        let plugins: Vec<Arc<dyn VolumePlugin>> = vec![
            Arc::new(emptydir::EmptyDirPlugin::new(host.clone())),
            Arc::new(hostpath::HostPathPlugin::new()),
            Arc::new(configmap::ConfigMapPlugin::new(host.clone())),
            Arc::new(secret::SecretPlugin::new(host.clone())),
            Arc::new(downwardapi::DownwardApiPlugin::new(host.clone())),
            Arc::new(projected::ProjectedPlugin::new(host.clone())),
        ];
        PluginManager { host, plugins }
    }

    /// A manager with exactly `plugins`.
    pub fn with_plugins(host: Arc<VolumeHost>, plugins: Vec<Arc<dyn VolumePlugin>>) -> Self {
        PluginManager { host, plugins }
    }

    pub fn host(&self) -> &Arc<VolumeHost> {
        &self.host
    }

    /// The one plugin that supports `spec`.
    pub fn find_plugin_by_spec(&self, spec: &Spec) -> Result<Arc<dyn VolumePlugin>, VolumeError> {
        let matches: Vec<&Arc<dyn VolumePlugin>> = self
            .plugins
            .iter()
            .filter(|p| p.can_support(spec))
            .collect();
        match matches.as_slice() {
            [] => Err(VolumeError::NoPluginMatched),
            [one] => Ok((*one).clone()),
            many => Err(VolumeError::MultiplePluginsMatched(
                many.iter().map(|p| p.name().to_string()).collect(),
            )),
        }
    }

    /// The plugin called `name`.
    pub fn find_plugin_by_name(&self, name: &str) -> Result<Arc<dyn VolumePlugin>, VolumeError> {
        self.plugins
            .iter()
            .find(|p| p.name() == name)
            .cloned()
            .ok_or_else(|| VolumeError::NoPluginNamed(name.to_string()))
    }
}
