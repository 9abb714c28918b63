//! The plugin half shared by the atomic-writer volumes (configMap, secret,
//! downwardAPI, projected): each kind names its plugin, its volume source,
//! whether its files live in tmpfs, and how a mounter is made from the
//! source; finding, mounting, unmounting and reconstructing are the same.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::volume::atomic_volume::AtomicVolume;
use crate::volume::configmap::AtomicUnmounter;
use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::plugin::{Mounter, Unmounter, VolumePlugin};
use crate::volume::spec::Spec;

/// One kind of atomic-writer volume.
pub trait AtomicKind: Send + Sync + 'static {
    /// The plugin's name (`kubernetes.io/secret` …).
    const PLUGIN_NAME: &'static str;
    /// How errors name the source ("a secret").
    const WHAT: &'static str;
    /// Whether the files live in tmpfs.
    const MEMORY: bool;
    type Source: Clone + Send + Sync + 'static;
    /// The kind's source in a volume, if it is one of this kind.
    fn source(spec: &Spec) -> Option<&Self::Source>;
    /// The mounter of one volume.
    fn mounter(vol: AtomicVolume, source: Self::Source, pod: Arc<Pod>) -> Arc<dyn Mounter>;
    /// The unmounter of one volume.
    fn unmounter(vol: AtomicVolume) -> Arc<dyn Unmounter> {
        Arc::new(AtomicUnmounter(vol))
    }
    /// The volume a mount found on disk stands for (reconstruction).
    fn reconstructed(volume_name: &str) -> Volume;
}

/// The plugin of an atomic-writer volume kind.
pub struct AtomicPlugin<K> {
    host: Arc<VolumeHost>,
    kind: PhantomData<fn() -> K>,
}

impl<K> AtomicPlugin<K> {
    pub fn new(host: Arc<VolumeHost>) -> Self {
        AtomicPlugin {
            host,
            kind: PhantomData,
        }
    }
}

impl<K: AtomicKind> VolumePlugin for AtomicPlugin<K> {
    fn name(&self) -> &'static str {
        K::PLUGIN_NAME
    }

    fn can_support(&self, spec: &Spec) -> bool {
        K::source(spec).is_some()
    }

    fn requires_remount(&self, _spec: &Spec) -> bool {
        true
    }

    fn new_mounter(&self, spec: &Spec, pod: &Arc<Pod>) -> Result<Arc<dyn Mounter>, VolumeError> {
        let source = K::source(spec)
            .cloned()
            .ok_or(VolumeError::WrongSpec(K::WHAT))?;
        let vol = AtomicVolume::new(
            self.host.clone(),
            K::PLUGIN_NAME,
            spec.name(),
            pod.metadata.uid.as_deref().unwrap_or_default(),
            K::MEMORY,
        );
        Ok(K::mounter(vol, source, pod.clone()))
    }

    fn new_unmounter(
        &self,
        volume_name: &str,
        pod_uid: &str,
    ) -> Result<Arc<dyn Unmounter>, VolumeError> {
        Ok(K::unmounter(AtomicVolume::new(
            self.host.clone(),
            K::PLUGIN_NAME,
            volume_name,
            pod_uid,
            K::MEMORY,
        )))
    }

    fn construct_volume_spec(
        &self,
        volume_name: &str,
        _mount_path: &Path,
    ) -> Result<Spec, VolumeError> {
        Ok(Spec::from_volume(K::reconstructed(volume_name)))
    }
}
