//! Helpers the volume plugins share (pkg/volume/util and k8s.io/mount-utils).

pub mod atomic_writer;
pub mod escape;
pub mod fs_user;
pub mod mount;
pub mod nested;
pub mod ownership;
pub mod removeall;

pub use atomic_writer::{AtomicWriteError, AtomicWriter, FileProjection, Payload};
pub use escape::{escape_qualified_name, unescape_qualified_name};
pub use mount::{MountInfo, MountInterface, SystemMounter};
