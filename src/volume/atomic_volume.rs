//! The SetUp/TearDown shared by configMap, secret, downwardAPI and
//! projected volumes: an emptyDir (`wrapped_<name>`, on disk for
//! configMap, tmpfs for the others) is set up at the volume's path, mount
//! points for nested volume mounts are made, and the payload is projected
//! with the atomic writer, fsGroup applied before the new version is
//! published. A failure after the wrapper was set up tears the whole
//! volume down again, as the Go plugins do.

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::volume::emptydir::EmptyDir;
use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::spec::MounterArgs;
use crate::volume::util::atomic_writer::{AtomicWriter, Payload};
use crate::volume::util::nested::make_nested_mountpoints;
use crate::volume::util::ownership::set_volume_ownership;

/// One atomic-writer volume of one pod.
#[derive(Clone)]
pub struct AtomicVolume {
    pub host: Arc<VolumeHost>,
    pub plugin_name: &'static str,
    pub vol_name: String,
    pub pod_uid: String,
    /// tmpfs-backed wrapper (secret, downwardAPI, projected).
    pub memory: bool,
}

impl AtomicVolume {
    pub fn new(
        host: Arc<VolumeHost>,
        plugin_name: &'static str,
        vol_name: &str,
        pod_uid: &str,
        memory: bool,
    ) -> Self {
        AtomicVolume {
            host,
            plugin_name,
            vol_name: vol_name.to_string(),
            pod_uid: pod_uid.to_string(),
            memory,
        }
    }

    /// `<pod>/volumes/<escaped plugin>/<name>`.
    pub fn path(&self) -> PathBuf {
        self.host
            .pod_volume_dir(&self.pod_uid, self.plugin_name, &self.vol_name)
    }

    /// The emptyDir mounter backing the volume (fails when memory-backed
    /// and the node's allocatable resources cannot be read).
    pub fn wrapper(&self, pod: &Arc<Pod>) -> Result<EmptyDir, VolumeError> {
        EmptyDir::new_wrapper(self.host.clone(), &self.vol_name, self.memory, pod)
    }

    /// Sets up the wrapper at the volume's path and projects `payload`
    /// (blocking). The volume is read-only to containers, so fsGroup gives
    /// group read, not write.
    pub fn write_blocking(
        &self,
        wrapper: &EmptyDir,
        pod: &Pod,
        payload: &Payload,
        args: &MounterArgs,
    ) -> Result<(), VolumeError> {
        let dir = self.path();
        wrapper.set_up_at(&dir, args)?;
        make_nested_mountpoints(&self.vol_name, &dir, pod)?;
        let result = self.project(pod, payload, args);
        if result.is_err()
            && let Err(e) = self.tear_down_blocking()
        {
            tracing::error!(volume = %self.vol_name, error = %e, "Error tearing down volume after a failed setup");
        }
        result
    }

    fn project(&self, pod: &Pod, payload: &Payload, args: &MounterArgs) -> Result<(), VolumeError> {
        let dir = self.path();
        let context = format!(
            "pod {}/{} volume {}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
            self.vol_name
        );
        let writer = AtomicWriter::new(&dir, context).inspect_err(|e| {
            tracing::error!(error = %e, "Error creating atomic writer");
        })?;
        let fs_group = args.fs_group;
        let set_perms = |_: &str| set_volume_ownership(&dir, true, fs_group, None);
        writer
            .write(payload, Some(&set_perms), self.host.clock().now())
            .inspect_err(|e| tracing::error!(error = %e, "Error writing payload to dir"))
    }

    /// Tears the wrapper down at the volume's path (blocking).
    pub fn tear_down_blocking(&self) -> Result<(), VolumeError> {
        crate::vlog!(3, volume = %self.vol_name, pod = %self.pod_uid, "Tearing down volume");
        EmptyDir::new_wrapper_unmounter(self.host.clone(), &self.vol_name, &self.pod_uid)
            .tear_down_at(&self.path())
    }

    /// Runs `write_blocking` on the blocking pool.
    pub async fn write(
        &self,
        wrapper: EmptyDir,
        pod: Arc<Pod>,
        payload: Payload,
        args: &MounterArgs,
    ) -> Result<(), VolumeError> {
        let me = self.clone();
        let args = args.clone();
        tokio::task::spawn_blocking(move || me.write_blocking(&wrapper, &pod, &payload, &args))
            .await
            .map_err(|e| VolumeError::other(format!("volume setup task failed: {e}")))?
    }

    /// Runs `tear_down_blocking` on the blocking pool.
    pub async fn tear_down(&self) -> Result<(), VolumeError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.tear_down_blocking())
            .await
            .map_err(|e| VolumeError::other(format!("volume teardown task failed: {e}")))?
    }
}
