//! The volume manager's builder: the volume host (pod directories, the
//! mounter, the node's allocatable for downward API defaults, and with an
//! API server the ConfigMap/Secret managers and the token cache), the
//! plugins over it, and the manager asking the pod workers what runs.

use std::sync::Arc;

use super::adapters::NodeResources;
use super::api::ApiObjects;
use super::lifecycle::PodCore;
use super::sources::PodSources;
use crate::kubelet::volumemanager::{VolumeManager, VolumeManagerDeps};
use crate::util::pod_dirs::PodDirs;
use crate::volume::util::mount::MountInterface;
use crate::volume::{PluginManager, VolumeHost};

/// Builds the volume manager (nothing started).
pub fn volume_manager(
    dirs: &PodDirs,
    mounter: Arc<dyn MountInterface>,
    node_resources: &Arc<NodeResources>,
    api: Option<&ApiObjects>,
    core: &PodCore,
    sources: &PodSources,
) -> Arc<VolumeManager> {
    let clock = &core.clock;
    let mut host = VolumeHost::new(dirs.clone(), mounter, clock.clone(), node_resources.clone());
    if let Some(a) = api {
        host = host
            .with_config_maps(a.objects.config_maps.clone())
            .with_secrets(a.objects.secrets.clone())
            .with_tokens(a.tokens.clone());
    }
    Arc::new(VolumeManager::new(VolumeManagerDeps {
        plugins: Arc::new(PluginManager::new(Arc::new(host))),
        pods: core.pod_manager.clone(),
        pod_state: Arc::new(core.pod_workers.clone()),
        sources_ready: Arc::new(sources.ready.clone()),
        clock: clock.clone(),
    }))
}
