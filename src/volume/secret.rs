//! secret volumes (pkg/volume/secret): the Secret's keys as files through
//! the atomic writer, in a tmpfs so they never reach the node's disk.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret, SecretVolumeSource, Volume};

use crate::volume::atomic_plugin::{AtomicKind, AtomicPlugin};
use crate::volume::atomic_volume::AtomicVolume;
use crate::volume::configmap::PROJECTING_ATTRIBUTES;
use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::payload::secret_payload;
use crate::volume::plugin::Mounter;
use crate::volume::spec::{Attributes, MounterArgs, Spec};

pub const SECRET_PLUGIN_NAME: &str = "kubernetes.io/secret";

/// The secret kind of atomic-writer volume.
pub struct SecretKind;

/// The plugin.
pub type SecretPlugin = AtomicPlugin<SecretKind>;

impl AtomicKind for SecretKind {
    const PLUGIN_NAME: &'static str = SECRET_PLUGIN_NAME;
    const WHAT: &'static str = "a secret";
    const MEMORY: bool = true;
    type Source = SecretVolumeSource;

    fn source(spec: &Spec) -> Option<&SecretVolumeSource> {
        spec.secret()
    }

    fn mounter(vol: AtomicVolume, source: SecretVolumeSource, pod: Arc<Pod>) -> Arc<dyn Mounter> {
        Arc::new(SecretMounter { vol, source, pod })
    }

    fn reconstructed(volume_name: &str) -> Volume {
        Volume {
            name: volume_name.to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(volume_name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }
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
