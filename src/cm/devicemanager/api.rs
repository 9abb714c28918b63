//! The device plugin API (package `v1beta1`) and its constants.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("v1beta1");

/// A device the plugin reports usable.
pub const HEALTHY: &str = "Healthy";
/// A device the plugin reports broken.
pub const UNHEALTHY: &str = "Unhealthy";
/// The API version the kubelet speaks.
pub const VERSION: &str = "v1beta1";
/// Every version a plugin may register with.
pub const SUPPORTED_VERSIONS: [&str; 1] = [VERSION];
/// The kubelet's socket under `<root-dir>/device-plugins/`.
pub const KUBELET_SOCKET: &str = "kubelet.sock";
/// The directory under the root directory where plugins and the kubelet meet.
pub const DEVICE_PLUGINS_DIR: &str = "device-plugins";
/// How long PreStartContainer may take.
pub const PRE_START_CONTAINER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
