//! Helpers for the plugins' unit tests: a host over a temp root, in-memory
//! object getters and pods.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::util::clock::RealClock;
use crate::util::object_getters::{ConfigMapGetter, GetError, ObjectKind, SecretGetter};
use crate::util::pod_dirs::PodDirs;
use crate::volume::host::{StaticNodeAllocatable, VolumeHost};
use crate::volume::util::mount::SystemMounter;

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub fn allocatable(memory: &str) -> StaticNodeAllocatable {
    let mut m = BTreeMap::new();
    m.insert("memory".to_string(), ApiQuantity(memory.to_string()));
    m.insert("cpu".to_string(), ApiQuantity("4".to_string()));
    StaticNodeAllocatable(m)
}

pub fn host(root: &Path) -> VolumeHost {
    VolumeHost::new(
        PodDirs::new(root),
        Arc::new(SystemMounter),
        Arc::new(RealClock),
        Arc::new(allocatable("1Gi")),
    )
}

pub fn pod(uid: &str, spec: serde_json::Value) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": uid,
                "labels": {"app": "web"}, "annotations": {"note": "hi"}},
            "spec": spec,
        }))
        .expect("pod"),
    )
}

/// ConfigMaps and Secrets by name, changeable during a test.
#[derive(Default)]
pub struct Objects {
    pub config_maps: Mutex<HashMap<String, ConfigMap>>,
    pub secrets: Mutex<HashMap<String, Secret>>,
}

impl Objects {
    pub fn put_config_map(&self, name: &str, data: &[(&str, &str)]) {
        let cm = ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        };
        self.config_maps
            .lock()
            .expect("lock")
            .insert(name.to_string(), cm);
    }

    pub fn put_secret(&self, name: &str, data: &[(&str, &[u8])]) {
        let s = Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), k8s_openapi::ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        };
        self.secrets
            .lock()
            .expect("lock")
            .insert(name.to_string(), s);
    }
}

#[async_trait]
impl ConfigMapGetter for Objects {
    async fn get_config_map(&self, _ns: &str, name: &str) -> Result<ConfigMap, GetError> {
        self.config_maps
            .lock()
            .expect("lock")
            .get(name)
            .cloned()
            .ok_or(GetError::NotFound {
                kind: ObjectKind::ConfigMap,
                name: name.to_string(),
            })
    }
}

#[async_trait]
impl SecretGetter for Objects {
    async fn get_secret(&self, _ns: &str, name: &str) -> Result<Secret, GetError> {
        self.secrets
            .lock()
            .expect("lock")
            .get(name)
            .cloned()
            .ok_or(GetError::NotFound {
                kind: ObjectKind::Secret,
                name: name.to_string(),
            })
    }
}

/// Mode bits of a path (following links).
pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).expect("meta").permissions().mode() & 0o7777
}

/// Whether `p` is a mount point per /proc/self/mountinfo.
pub fn is_mounted(p: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    crate::volume::util::mount::parse_mountinfo(&info)
        .iter()
        .any(|m| m.mount_point == p)
}
