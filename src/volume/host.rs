//! What the plugins need from the kubelet (Go's VolumeHost): the root-dir
//! layout, the mounter, the clock, the object getters and the node's
//! allocatable resources. Built once, shared by every plugin.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::util::clock::Clock;
use crate::util::object_getters::{ConfigMapGetter, SecretGetter};
use crate::util::pod_dirs::PodDirs;
use crate::volume::VolumeError;
use crate::volume::token_manager::TokenManager;
use crate::volume::util::escape_qualified_name;
use crate::volume::util::mount::MountInterface;

/// The node's allocatable resources (for memory-backed emptyDir sizes and
/// downward API limits of containers without limits).
pub trait NodeAllocatable: Send + Sync {
    fn node_allocatable(&self) -> Result<BTreeMap<String, ApiQuantity>, String>;
}

/// Fixed allocatable resources.
#[derive(Debug, Clone, Default)]
pub struct StaticNodeAllocatable(pub BTreeMap<String, ApiQuantity>);

impl NodeAllocatable for StaticNodeAllocatable {
    fn node_allocatable(&self) -> Result<BTreeMap<String, ApiQuantity>, String> {
        Ok(self.0.clone())
    }
}

/// Shared context of the volume plugins.
#[derive(Clone)]
pub struct VolumeHost {
    dirs: PodDirs,
    mounter: Arc<dyn MountInterface>,
    clock: Arc<dyn Clock>,
    node: Arc<dyn NodeAllocatable>,
    config_maps: Option<Arc<dyn ConfigMapGetter>>,
    secrets: Option<Arc<dyn SecretGetter>>,
    tokens: Option<Arc<TokenManager>>,
}

impl VolumeHost {
    /// A host without API access (standalone): ConfigMap, Secret and
    /// projected volumes fail until getters are added.
    pub fn new(
        dirs: PodDirs,
        mounter: Arc<dyn MountInterface>,
        clock: Arc<dyn Clock>,
        node: Arc<dyn NodeAllocatable>,
    ) -> Self {
        VolumeHost {
            dirs,
            mounter,
            clock,
            node,
            config_maps: None,
            secrets: None,
            tokens: None,
        }
    }

    pub fn with_config_maps(mut self, getter: Arc<dyn ConfigMapGetter>) -> Self {
        self.config_maps = Some(getter);
        self
    }

    pub fn with_secrets(mut self, getter: Arc<dyn SecretGetter>) -> Self {
        self.secrets = Some(getter);
        self
    }

    pub fn with_tokens(mut self, tokens: Arc<TokenManager>) -> Self {
        self.tokens = Some(tokens);
        self
    }

    pub fn dirs(&self) -> &PodDirs {
        &self.dirs
    }

    pub fn mounter(&self) -> &Arc<dyn MountInterface> {
        &self.mounter
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn node_allocatable(&self) -> Result<BTreeMap<String, ApiQuantity>, VolumeError> {
        self.node
            .node_allocatable()
            .map_err(VolumeError::NodeAllocatable)
    }

    pub fn config_maps(&self) -> Option<&Arc<dyn ConfigMapGetter>> {
        self.config_maps.as_ref()
    }

    pub fn secrets(&self) -> Option<&Arc<dyn SecretGetter>> {
        self.secrets.as_ref()
    }

    pub fn tokens(&self) -> Option<&Arc<TokenManager>> {
        self.tokens.as_ref()
    }

    /// `<root>/pods/<uid>/volumes/<escaped plugin>/<volume>`.
    pub fn pod_volume_dir(&self, pod_uid: &str, plugin_name: &str, volume: &str) -> PathBuf {
        self.dirs
            .pod_volume_dir(pod_uid, &escape_qualified_name(plugin_name), volume)
    }

    /// `<root>/pods/<uid>/plugins/<escaped plugin>`.
    pub fn pod_plugin_dir(&self, pod_uid: &str, plugin_name: &str) -> PathBuf {
        self.dirs
            .pod_plugin_dir(pod_uid, &escape_qualified_name(plugin_name))
    }
}
