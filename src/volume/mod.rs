//! Volume plugins (pkg/volume): what the volume manager mounts for pods.
//!
//! [`plugin::VolumePlugin`] is the seam; the in-tree plugins are
//! [`emptydir`], [`hostpath`], [`configmap`], [`secret`], [`downwardapi`]
//! and [`projected`] (service account tokens through
//! [`token_manager::TokenManager`] over a [`token_manager::ServiceAccountTokenGetter`]).
//! The atomic writer, fsGroup ownership and mount helpers live in
//! [`util`]; subPath bind mounts in [`subpath`]. Plugins reach the kubelet
//! only through [`host::VolumeHost`].

pub mod atomic_plugin;
pub mod atomic_volume;
pub mod configmap;
pub mod container_mount;
pub mod downwardapi;
pub mod emptydir;
pub mod error;
pub mod host;
pub mod hostpath;
pub mod payload;
pub mod plugin;
pub mod projected;
pub mod secret;
pub mod spec;
pub mod subpath;
pub mod token_manager;
pub mod util;

#[cfg(test)]
mod plugins_tests;
#[cfg(test)]
pub(crate) mod testing;

pub use error::VolumeError;
pub use host::{NodeAllocatable, StaticNodeAllocatable, VolumeHost};
pub use plugin::{Mounter, PluginManager, Unmounter, VolumePlugin, unique_volume_name};
pub use spec::{Attributes, MounterArgs, Spec};
pub use token_manager::{ServiceAccountTokenGetter, TokenError, TokenManager};
