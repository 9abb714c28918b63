//! downwardAPI volumes (pkg/volume/downwardapi): pod metadata fields
//! (labels and annotations as `key="value"` lines) and container resource
//! values (in units of the divisor, unset limits read as the node's
//! allocatable) as files through the atomic writer, in a tmpfs. Remounted
//! on pod updates so label and annotation changes reach the files.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, DownwardAPIVolumeSource, Pod, Volume};

use crate::util::fieldpath::extract_field_path_as_string;
use crate::util::resource::{extract_container_resource_value, merge_container_resource_limits};
use crate::volume::atomic_plugin::{AtomicKind, AtomicPlugin};
use crate::volume::atomic_volume::AtomicVolume;
use crate::volume::configmap::PROJECTING_ATTRIBUTES;
use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::plugin::Mounter;
use crate::volume::spec::{Attributes, MounterArgs, Spec};
use crate::volume::util::atomic_writer::{FileProjection, Payload};

pub const DOWNWARD_API_PLUGIN_NAME: &str = "kubernetes.io/downward-api";

/// The downward api kind of atomic-writer volume.
pub struct DownwardApiKind;

/// The plugin.
pub type DownwardApiPlugin = AtomicPlugin<DownwardApiKind>;

impl AtomicKind for DownwardApiKind {
    const PLUGIN_NAME: &'static str = DOWNWARD_API_PLUGIN_NAME;
    const WHAT: &'static str = "a DownwardAPI";
    const MEMORY: bool = true;
    type Source = DownwardAPIVolumeSource;

    fn source(spec: &Spec) -> Option<&DownwardAPIVolumeSource> {
        spec.downward_api()
    }

    fn mounter(
        vol: AtomicVolume,
        source: DownwardAPIVolumeSource,
        pod: Arc<Pod>,
    ) -> Arc<dyn Mounter> {
        Arc::new(DownwardApiMounter { vol, source, pod })
    }

    fn reconstructed(volume_name: &str) -> Volume {
        Volume {
            name: volume_name.to_string(),
            downward_api: Some(DownwardAPIVolumeSource::default()),
            ..Default::default()
        }
    }
}

fn clean_relative(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// The files of downward API `items` for `pod`; failures of single items
/// are collected and reported together (their files stay empty).
pub fn collect_data(
    items: &[DownwardAPIVolumeFile],
    pod: &Pod,
    host: &VolumeHost,
    default_mode: Option<i32>,
) -> Result<Payload, VolumeError> {
    let default_mode = default_mode.ok_or_else(|| {
        VolumeError::other("no defaultMode used, not even the default value for it")
    })? as u32;
    let mut errs = Vec::new();
    let mut data = Payload::new();
    for item in items {
        let mut fp = FileProjection {
            mode: item.mode.map_or(default_mode, |m| m as u32),
            ..Default::default()
        };
        if let Some(field) = &item.field_ref {
            match extract_field_path_as_string(pod, &field.field_path) {
                Ok(v) => fp.data = v.into_bytes(),
                Err(e) => {
                    tracing::error!(field = %field.field_path, error = %e, "Unable to extract field");
                    errs.push(VolumeError::other(e.to_string()));
                }
            }
        } else if let Some(res) = &item.resource_field_ref {
            match resource_value(res, pod, host) {
                Ok(v) => fp.data = v.into_bytes(),
                Err(e) => {
                    tracing::error!(field = %res.resource, error = %e, "Unable to extract field");
                    errs.push(e);
                }
            }
        }
        data.insert(clean_relative(&item.path), fp);
    }
    VolumeError::aggregate(errs)?;
    Ok(data)
}

fn resource_value(
    fs: &k8s_openapi::api::core::v1::ResourceFieldSelector,
    pod: &Pod,
    host: &VolumeHost,
) -> Result<String, VolumeError> {
    let allocatable = host.node_allocatable()?;
    let name = fs.container_name.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let container = spec
        .and_then(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
                .find(|c| c.name == name)
        })
        .ok_or_else(|| VolumeError::other(format!("container {name} not found")))?;
    let mut container = container.clone();
    merge_container_resource_limits(&mut container, &allocatable);
    extract_container_resource_value(fs, &container).map_err(|e| VolumeError::other(e.to_string()))
}

/// Sets up one downwardAPI volume.
pub struct DownwardApiMounter {
    vol: AtomicVolume,
    source: DownwardAPIVolumeSource,
    pod: Arc<Pod>,
}

#[async_trait]
impl Mounter for DownwardApiMounter {
    fn path(&self) -> PathBuf {
        self.vol.path()
    }

    fn attributes(&self) -> Attributes {
        PROJECTING_ATTRIBUTES
    }

    async fn set_up(&self, args: &MounterArgs) -> Result<(), VolumeError> {
        crate::vlog!(3, volume = %self.vol.vol_name, pod = %self.vol.pod_uid, "Setting up a downwardAPI volume");
        let wrapper = self.vol.wrapper(&self.pod)?;
        let data = collect_data(
            self.source.items.as_deref().unwrap_or_default(),
            &self.pod,
            &self.vol.host,
            self.source.default_mode,
        )
        .inspect_err(|e| {
            tracing::error!(volume = %self.vol.vol_name, error = %e, "Error preparing data for downwardAPI volume");
        })?;
        self.vol.write(wrapper, self.pod.clone(), data, args).await
    }
}
