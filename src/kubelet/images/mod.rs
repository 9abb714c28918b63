//! pkg/kubelet/images: making container images available (pull policies,
//! pull back-off, serialized, bounded or parallel pulls, the registry QPS
//! limit, pull secrets, the node's registry credentials) and image garbage
//! collection by disk usage.

pub mod credentialprovider;
pub mod gc;
pub mod keyring;
pub mod manager;
pub mod reference;
pub mod service;
pub mod throttle;

pub use gc::{
    CriImageFsStats, FsStats, ImageFsStatsProvider, ImageGcError, ImageGcManager, ImageGcPolicy,
};
pub use manager::{ImageErrorKind, ImageManager, ImagePullError, PullSettings};
pub use service::{ImageRequest, ImageServiceError, RuntimeImageService};
pub use throttle::TokenBucket;

/// The image pull back-off the kubelet uses: 10 s doubling to 5 min.
pub const IMAGE_BACKOFF_INITIAL: std::time::Duration = std::time::Duration::from_secs(10);
/// The cap of the image pull back-off.
pub const IMAGE_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(300);

#[cfg(test)]
mod tests;
