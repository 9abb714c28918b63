//! The node-level reclaim seams over the kubelet's own garbage collectors:
//! image GC removes every unused image; container GC removes every dead
//! container, those of pods not yet deleted included.

use std::sync::Arc;

use async_trait::async_trait;

use super::error::EvictionError;
use super::seams::{ContainerGc, ImageGc};
use crate::kubelet::container::{GcPolicy, Runtime};
use crate::kubelet::images::ImageGcManager;

#[async_trait]
impl ImageGc for ImageGcManager {
    async fn delete_unused_images(&self) -> Result<(), EvictionError> {
        ImageGcManager::delete_unused_images(self)
            .await
            .map(|_| ())
            .map_err(|e| EvictionError::Reclaim {
                what: "delete unused images",
                message: e.to_string(),
            })
    }
}

/// Container GC through the runtime with the kubelet's GC policy.
pub struct RuntimeContainerGc {
    runtime: Arc<dyn Runtime>,
    policy: GcPolicy,
    all_sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl RuntimeContainerGc {
    pub fn new(
        runtime: Arc<dyn Runtime>,
        policy: GcPolicy,
        all_sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> Self {
        RuntimeContainerGc {
            runtime,
            policy,
            all_sources_ready,
        }
    }
}

#[async_trait]
impl ContainerGc for RuntimeContainerGc {
    async fn delete_all_unused_containers(&self) -> Result<(), EvictionError> {
        let ready = (self.all_sources_ready)();
        self.runtime
            .garbage_collect(self.policy, ready, true)
            .await
            .map_err(|e| EvictionError::Reclaim {
                what: "delete unused containers",
                message: e.to_string(),
            })
    }
}
