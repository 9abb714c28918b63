//! configMap volumes (pkg/volume/configmap): the ConfigMap's keys as files
//! through the atomic writer, in an on-disk emptyDir. A missing ConfigMap
//! is an error unless the volume is optional (then the volume is empty).
//! Remounted on every pod resync so updates reach the files.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, Pod, Volume};

use crate::volume::atomic_plugin::{AtomicKind, AtomicPlugin};
use crate::volume::atomic_volume::AtomicVolume;
use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::payload::config_map_payload;
use crate::volume::plugin::{Mounter, Unmounter};
use crate::volume::spec::{Attributes, MounterArgs, Spec};

pub const CONFIG_MAP_PLUGIN_NAME: &str = "kubernetes.io/configmap";

/// Attributes of every API-projecting volume: read-only, managed.
pub(crate) const PROJECTING_ATTRIBUTES: Attributes = Attributes {
    read_only: true,
    managed: true,
    selinux_relabel: true,
};

/// The config map kind of atomic-writer volume.
pub struct ConfigMapKind;

/// The plugin.
pub type ConfigMapPlugin = AtomicPlugin<ConfigMapKind>;

impl AtomicKind for ConfigMapKind {
    const PLUGIN_NAME: &'static str = CONFIG_MAP_PLUGIN_NAME;
    const WHAT: &'static str = "a configMap";
    const MEMORY: bool = false;
    type Source = ConfigMapVolumeSource;

    fn source(spec: &Spec) -> Option<&ConfigMapVolumeSource> {
        spec.config_map()
    }

    fn mounter(
        vol: AtomicVolume,
        source: ConfigMapVolumeSource,
        pod: Arc<Pod>,
    ) -> Arc<dyn Mounter> {
        Arc::new(ConfigMapMounter { vol, source, pod })
    }

    fn reconstructed(volume_name: &str) -> Volume {
        Volume {
            name: volume_name.to_string(),
            config_map: Some(ConfigMapVolumeSource::default()),
            ..Default::default()
        }
    }
}

/// Sets up one configMap volume.
pub struct ConfigMapMounter {
    vol: AtomicVolume,
    source: ConfigMapVolumeSource,
    pod: Arc<Pod>,
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

/// Reads a ConfigMap through the host's getter; an optional reference to
/// a missing object reads as an empty one.
pub(crate) async fn get_config_map(
    host: &VolumeHost,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<ConfigMap, VolumeError> {
    let getter = host.config_maps().ok_or_else(|| {
        VolumeError::other(format!(
            "couldn't get configMap {namespace}/{name}, no kubeClient defined"
        ))
    })?;
    match getter.get_config_map(namespace, name).await {
        Ok(cm) => Ok(cm),
        Err(e) if e.is_not_found() && optional => Ok(ConfigMap::default()),
        Err(e) => {
            tracing::error!(namespace, name, error = %e, "Couldn't get configMap");
            Err(e.into())
        }
    }
}

#[async_trait]
impl Mounter for ConfigMapMounter {
    fn path(&self) -> PathBuf {
        self.vol.path()
    }

    fn attributes(&self) -> Attributes {
        PROJECTING_ATTRIBUTES
    }

    async fn set_up(&self, args: &MounterArgs) -> Result<(), VolumeError> {
        crate::vlog!(3, volume = %self.vol.vol_name, pod = %self.vol.pod_uid, "Setting up volume");
        let wrapper = self.vol.wrapper(&self.pod)?;
        let optional = self.source.optional == Some(true);
        let ns = namespace(&self.pod);
        let cm = get_config_map(&self.vol.host, ns, &self.source.name, optional).await?;
        let payload = config_map_payload(
            self.source.items.as_deref(),
            &cm,
            self.source.default_mode,
            optional,
        )?;
        crate::vlog!(3, namespace = ns, name = %self.source.name, pieces = payload.len(), "Received configMap");
        self.vol
            .write(wrapper, self.pod.clone(), payload, args)
            .await
    }
}

/// Tears an atomic-writer volume down through its wrapper.
pub struct AtomicUnmounter(pub(crate) AtomicVolume);

#[async_trait]
impl Unmounter for AtomicUnmounter {
    fn path(&self) -> PathBuf {
        self.0.path()
    }

    async fn tear_down(&self) -> Result<(), VolumeError> {
        self.0.tear_down().await
    }
}
