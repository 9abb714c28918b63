//! secret volumes (pkg/volume/secret): the Secret's keys as files through
//! the atomic writer, in a tmpfs so they never reach the node's disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret, SecretVolumeSource, Volume};

use crate::volume::atomic_volume::AtomicVolume;
use crate::volume::configmap::{AtomicUnmounter, PROJECTING_ATTRIBUTES};
use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::payload::secret_payload;
use crate::volume::plugin::{Mounter, Unmounter, VolumePlugin};
use crate::volume::spec::{Attributes, MounterArgs, Spec};

pub const SECRET_PLUGIN_NAME: &str = "kubernetes.io/secret";

/// The plugin.
pub struct SecretPlugin {
    host: Arc<VolumeHost>,
}

impl SecretPlugin {
    pub fn new(host: Arc<VolumeHost>) -> Self {
        SecretPlugin { host }
    }
}

impl VolumePlugin for SecretPlugin {
    fn name(&self) -> &'static str {
        SECRET_PLUGIN_NAME
    }

    fn can_support(&self, spec: &Spec) -> bool {
        spec.volume.secret.is_some()
    }

    fn requires_remount(&self, _spec: &Spec) -> bool {
        true
    }

    fn new_mounter(&self, spec: &Spec, pod: &Arc<Pod>) -> Result<Arc<dyn Mounter>, VolumeError> {
        let source = spec
            .volume
            .secret
            .clone()
            .ok_or(VolumeError::WrongSpec("a secret"))?;
        Ok(Arc::new(SecretMounter {
            vol: AtomicVolume::new(
                self.host.clone(),
                SECRET_PLUGIN_NAME,
                spec.name(),
                pod.metadata.uid.as_deref().unwrap_or_default(),
                true,
            ),
            source,
            pod: pod.clone(),
        }))
    }

    fn new_unmounter(
        &self,
        volume_name: &str,
        pod_uid: &str,
    ) -> Result<Arc<dyn Unmounter>, VolumeError> {
        Ok(Arc::new(AtomicUnmounter(AtomicVolume::new(
            self.host.clone(),
            SECRET_PLUGIN_NAME,
            volume_name,
            pod_uid,
            true,
        ))))
    }

    fn construct_volume_spec(
        &self,
        volume_name: &str,
        _mount_path: &Path,
    ) -> Result<Spec, VolumeError> {
        Ok(Spec::from_volume(Volume {
            name: volume_name.to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(volume_name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }
}

/// Sets up one secret volume.
pub struct SecretMounter {
    vol: AtomicVolume,
    source: SecretVolumeSource,
    pod: Arc<Pod>,
}

/// Reads a Secret through the host's getter; an optional reference to a
/// missing object reads as an empty one.
pub(crate) async fn get_secret(
    host: &VolumeHost,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<Secret, VolumeError> {
    let getter = host.secrets().ok_or_else(|| {
        VolumeError::other(format!(
            "couldn't get secret {namespace}/{name}, no kubeClient defined"
        ))
    })?;
    match getter.get_secret(namespace, name).await {
        Ok(s) => Ok(s),
        Err(e) if e.is_not_found() && optional => Ok(Secret::default()),
        Err(e) => {
            tracing::error!(namespace, name, error = %e, "Couldn't get secret");
            Err(e.into())
        }
    }
}

#[async_trait]
impl Mounter for SecretMounter {
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
        let ns = self.pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = self.source.secret_name.as_deref().unwrap_or_default();
        let secret = get_secret(&self.vol.host, ns, name, optional).await?;
        let payload = secret_payload(
            self.source.items.as_deref(),
            &secret,
            self.source.default_mode,
            optional,
        )?;
        crate::vlog!(
            3,
            namespace = ns,
            name,
            pieces = payload.len(),
            "Received secret"
        );
        self.vol
            .write(wrapper, self.pod.clone(), payload, args)
            .await
    }
}
