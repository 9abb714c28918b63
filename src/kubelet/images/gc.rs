//! Image garbage collection (Go's realImageGCManager): tracks when each
//! image was first seen and last used; when the image filesystem's usage
//! reaches imageGCHighThresholdPercent, removes unused images, least recently
//! used first, until usage is back at imageGCLowThresholdPercent. Images in
//! use by any container, the sandbox image, pinned images and images younger
//! than imageMinimumGCAge are never removed.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;

use super::service::{ImageRequest, RuntimeImageService};
use crate::cri::{CriError, ImageService};
use crate::kubelet::container::{Image, Runtime, RuntimeError};
use crate::kubelet::kuberuntime::events::{EventRecorder, EventType, reasons};
use crate::util::clock::{Clock, Moment};
use crate::util::lifecycle::{Period, TaskSet};

/// How often images are re-detected (and their use recorded).
pub const IMAGE_DETECT_PERIOD: Duration = Duration::from_secs(300);
/// How often the cached image list (for node status) is refreshed.
pub const IMAGE_LIST_REFRESH_PERIOD: Duration = Duration::from_secs(30);

/// Errors of image GC.
#[derive(Debug, thiserror::Error)]
pub enum ImageGcError {
    #[error("invalid HighThresholdPercent {0}, must be in range [0-100]")]
    HighThreshold(i32),
    #[error("invalid LowThresholdPercent {0}, must be in range [0-100]")]
    LowThreshold(i32),
    #[error("LowThresholdPercent {low} can not be higher than HighThresholdPercent {high}")]
    LowAboveHigh { low: i32, high: i32 },
    #[error("invalid capacity 0 on image filesystem")]
    ZeroCapacity,
    #[error(
        "failed to garbage collect required amount of images. Wanted to free {wanted} bytes, but freed {freed} bytes"
    )]
    NotEnoughFreed { wanted: i64, freed: i64 },
    #[error(
        "wanted to free {wanted} bytes, but freed {freed} bytes space with errors in image deletion: [{}]",
        .errors.join(", ")
    )]
    Deletion {
        wanted: i64,
        freed: i64,
        errors: Vec<String>,
    },
    #[error("image filesystem stats: the runtime reported no image filesystem")]
    NoImageFs,
    #[error("image filesystem stats: the runtime's image filesystem has no mount point")]
    NoImageFsMountPoint,
    #[error("image filesystem stats of {mountpoint:?}")]
    ImageFsStats {
        mountpoint: PathBuf,
        #[source]
        source: crate::cadvisor::MachineInfoError,
    },
    #[error("image filesystem stats of {mountpoint:?}: the blocking task failed")]
    ImageFsStatsTask {
        mountpoint: PathBuf,
        #[source]
        source: tokio::task::JoinError,
    },
    #[error(transparent)]
    Cri(#[from] CriError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The policy's band (KubeletConfiguration imageGC*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    pub high_threshold_percent: i32,
    pub low_threshold_percent: i32,
    pub min_age: Duration,
}

impl ImageGcPolicy {
    pub fn validate(&self) -> Result<(), ImageGcError> {
        if !(0..=100).contains(&self.high_threshold_percent) {
            return Err(ImageGcError::HighThreshold(self.high_threshold_percent));
        }
        if !(0..=100).contains(&self.low_threshold_percent) {
            return Err(ImageGcError::LowThreshold(self.low_threshold_percent));
        }
        if self.low_threshold_percent > self.high_threshold_percent {
            return Err(ImageGcError::LowAboveHigh {
                low: self.low_threshold_percent,
                high: self.high_threshold_percent,
            });
        }
        Ok(())
    }
}

/// Capacity and availability of the image filesystem.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsStats {
    pub capacity_bytes: u64,
    pub available_bytes: u64,
    /// What the runtime reports its images use, when it does.
    pub used_bytes: Option<u64>,
}

/// Where image GC reads the image filesystem's usage.
#[async_trait]
pub trait ImageFsStatsProvider: Send + Sync + 'static {
    async fn image_fs_stats(&self) -> Result<FsStats, ImageGcError>;
}

/// Image filesystem stats from the runtime: ImageFsInfo names the mount
/// point, statfs of that mount point gives capacity and availability.
pub struct CriImageFsStats {
    images: Arc<dyn ImageService>,
}

impl CriImageFsStats {
    pub fn new(images: Arc<dyn ImageService>) -> Self {
        CriImageFsStats { images }
    }
}

#[async_trait]
impl ImageFsStatsProvider for CriImageFsStats {
    async fn image_fs_stats(&self) -> Result<FsStats, ImageGcError> {
        let usages = self.images.image_fs_info().await?;
        let usage = usages.into_iter().next().ok_or(ImageGcError::NoImageFs)?;
        let mountpoint = usage
            .fs_id
            .as_ref()
            .map(|f| PathBuf::from(&f.mountpoint))
            .filter(|p| !p.as_os_str().is_empty())
            .ok_or(ImageGcError::NoImageFsMountPoint)?;
        let at = mountpoint.clone();
        let info = tokio::task::spawn_blocking(move || crate::cadvisor::fs_info_at(&at, ""))
            .await
            .map_err(|source| ImageGcError::ImageFsStatsTask {
                mountpoint: mountpoint.clone(),
                source,
            })?
            .map_err(|source| ImageGcError::ImageFsStats { mountpoint, source })?;
        Ok(FsStats {
            capacity_bytes: info.capacity,
            available_bytes: info.available,
            used_bytes: usage.used_bytes.map(|u| u.value),
        })
    }
}

/// Times are the clock's readings ([`Moment`]), so ages and "used since"
/// compare on the monotonic clock and a wall-clock step neither makes
/// every image too young to remove nor old enough at once (Go's
/// `time.Now()` values compare the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ImageRecord {
    /// `UNIX_EPOCH` (no monotonic reading) for images found by the first
    /// detection: "unknown, in the past".
    first_detected: Moment,
    /// `UNIX_EPOCH` when never seen in use.
    last_used: Moment,
    size: u64,
    pinned: bool,
}

/// Image GC state and policy.
pub struct ImageGcManager {
    runtime: Arc<dyn Runtime>,
    images: Arc<RuntimeImageService>,
    stats: Arc<dyn ImageFsStatsProvider>,
    recorder: Arc<dyn EventRecorder>,
    node_ref: ObjectReference,
    policy: ImageGcPolicy,
    sandbox_image: String,
    clock: Arc<dyn Clock>,
    records: Mutex<HashMap<String, ImageRecord>>,
    initialized: Mutex<bool>,
    image_cache: Mutex<Vec<Image>>,
}

impl std::fmt::Debug for ImageGcManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageGcManager")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ImageGcManager {
    /// Validates the policy; `sandbox_image` (podInfraContainerImage) is
    /// always considered in use.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        runtime: Arc<dyn Runtime>,
        images: Arc<RuntimeImageService>,
        stats: Arc<dyn ImageFsStatsProvider>,
        recorder: Arc<dyn EventRecorder>,
        node_ref: ObjectReference,
        policy: ImageGcPolicy,
        sandbox_image: impl Into<String>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ImageGcError> {
        policy.validate()?;
        Ok(ImageGcManager {
            runtime,
            images,
            stats,
            recorder,
            node_ref,
            policy,
            sandbox_image: sandbox_image.into(),
            clock,
            records: Mutex::new(HashMap::new()),
            initialized: Mutex::new(false),
            image_cache: Mutex::new(Vec::new()),
        })
    }

    /// Spawns the periodic image detection (every 5 min) and the image list
    /// refresh (every 30 s).
    pub fn start(self: &Arc<Self>, tasks: &TaskSet) {
        let me = self.clone();
        tasks.spawn_periodic(
            "image-gc-detect",
            Period::sliding(IMAGE_DETECT_PERIOD),
            self.clock.clone(),
            move || {
                let me = me.clone();
                async move {
                    let initialized = *lock(&me.initialized);
                    let ts = if initialized {
                        Moment::now(me.clock.as_ref())
                    } else {
                        Moment::wall(SystemTime::UNIX_EPOCH)
                    };
                    match me.detect_images(ts).await {
                        Ok(_) => *lock(&me.initialized) = true,
                        Err(e) => tracing::info!(error = %e, "failed to monitor images"),
                    }
                }
            },
        );
        let me = self.clone();
        tasks.spawn_periodic(
            "image-list-refresh",
            Period::sliding(IMAGE_LIST_REFRESH_PERIOD),
            self.clock.clone(),
            move || {
                let me = me.clone();
                async move {
                    if let Err(e) = me.refresh_image_list().await {
                        tracing::info!(error = %e, "failed to update image list");
                    }
                }
            },
        );
    }

    /// Refreshes the cached image list now.
    pub async fn refresh_image_list(&self) -> Result<(), CriError> {
        let mut images = self.images.list_images().await?;
        // Largest first, as node status lists them.
        images.sort_by_key(|i| std::cmp::Reverse(i.size));
        *lock(&self.image_cache) = images;
        Ok(())
    }

    /// The images on the node as last listed (largest first).
    pub fn get_image_list(&self) -> Vec<Image> {
        lock(&self.image_cache).clone()
    }

    /// Lists images and running/dead containers; records new images as first
    /// seen at `detect_time` and marks the ones in use as used now. Returns
    /// the IDs in use.
    async fn detect_images(&self, detect_time: Moment) -> Result<HashSet<String>, ImageGcError> {
        let mut in_use = HashSet::new();
        if let Ok(Some(r)) = self
            .images
            .get_image_ref(&ImageRequest::new(self.sandbox_image.clone()))
            .await
        {
            in_use.insert(r);
        }
        let images = self.images.list_images().await?;
        let pods = self.runtime.get_pods(true).await?;
        for pod in &pods {
            for c in &pod.containers {
                crate::vlog!(5, pod = %format!("{}/{}", pod.namespace, pod.name), container = %c.name, image = %c.image, image_id = %c.image_id, "container uses image");
                in_use.insert(c.image_id.clone());
            }
        }
        let now = Moment::now(self.clock.as_ref());
        let mut records = lock(&self.records);
        let mut current = HashSet::new();
        for image in &images {
            current.insert(image.id.clone());
            let r = records.entry(image.id.clone()).or_insert(ImageRecord {
                first_detected: detect_time,
                last_used: Moment::wall(SystemTime::UNIX_EPOCH),
                size: 0,
                pinned: false,
            });
            if in_use.contains(&image.id) {
                r.last_used = now;
            }
            r.size = image.size;
            r.pinned = image.pinned;
        }
        records.retain(|id, _| current.contains(id));
        Ok(in_use)
    }

    /// Frees space when usage is at or above the high threshold, down to the
    /// low threshold.
    pub async fn garbage_collect(&self) -> Result<(), ImageGcError> {
        let fs = self.stats.image_fs_stats().await?;
        let capacity = fs.capacity_bytes as i64;
        let mut available = fs.available_bytes as i64;
        if available > capacity {
            tracing::info!(available, capacity, "availability is larger than capacity");
            available = capacity;
        }
        if capacity == 0 {
            let err = ImageGcError::ZeroCapacity;
            self.recorder.event(
                &self.node_ref,
                EventType::Warning,
                reasons::INVALID_DISK_CAPACITY,
                &err.to_string(),
            );
            return Err(err);
        }
        let usage_percent = 100 - (available * 100 / capacity) as i32;
        if usage_percent >= self.policy.high_threshold_percent {
            let to_free =
                capacity * i64::from(100 - self.policy.low_threshold_percent) / 100 - available;
            tracing::info!(
                usage = usage_percent,
                high_threshold = self.policy.high_threshold_percent,
                amount_to_free = to_free,
                low_threshold = self.policy.low_threshold_percent,
                "disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold"
            );
            let freed = self
                .free_space(to_free, Moment::now(self.clock.as_ref()))
                .await?;
            if freed < to_free {
                let err = ImageGcError::NotEnoughFreed {
                    wanted: to_free,
                    freed,
                };
                self.recorder.event(
                    &self.node_ref,
                    EventType::Warning,
                    reasons::FREE_DISK_SPACE_FAILED,
                    &err.to_string(),
                );
                return Err(err);
            }
        }
        Ok(())
    }

    /// Removes every unused image old enough to go.
    pub async fn delete_unused_images(&self) -> Result<i64, ImageGcError> {
        tracing::info!("attempting to delete unused images");
        self.free_space(i64::MAX, Moment::now(self.clock.as_ref()))
            .await
    }

    /// Removes unused images, least recently used first, until `to_free`
    /// bytes are freed; returns the bytes freed.
    async fn free_space(&self, to_free: i64, free_time: Moment) -> Result<i64, ImageGcError> {
        let in_use = self.detect_images(free_time).await?;
        let candidates = {
            let records = lock(&self.records);
            eviction_order(&records, &in_use)
        };
        let mut freed: i64 = 0;
        let mut errors = Vec::new();
        for (id, record) in candidates {
            if record.last_used.sub_nanos(&free_time) >= 0 {
                crate::vlog!(5, image = %id, "image was used too recently, not eligible for garbage collection");
                continue;
            }
            let age = Duration::from_nanos(
                u64::try_from(free_time.sub_nanos(&record.first_detected)).unwrap_or(u64::MAX),
            );
            if age < self.policy.min_age {
                crate::vlog!(5, image = %id, age = ?age, "image is younger than the minimum GC age");
                continue;
            }
            tracing::info!(image = %id, size = record.size, "removing image to free bytes");
            if let Err(e) = self.images.remove_image(&id).await {
                errors.push(e.status_message());
                continue;
            }
            lock(&self.records).remove(&id);
            freed = freed.saturating_add(record.size as i64);
            if freed >= to_free {
                break;
            }
        }
        if !errors.is_empty() {
            return Err(ImageGcError::Deletion {
                wanted: to_free,
                freed,
                errors,
            });
        }
        Ok(freed)
    }
}

/// `a` against `b` as Go's `Before`/`Equal` compare them.
fn order(a: &Moment, b: &Moment) -> Ordering {
    a.sub_nanos(b).cmp(&0)
}

/// Unused, unpinned images in eviction order: least recently used first,
/// ties broken by earliest detection.
fn eviction_order(
    records: &HashMap<String, ImageRecord>,
    in_use: &HashSet<String>,
) -> Vec<(String, ImageRecord)> {
    let mut out: Vec<(String, ImageRecord)> = records
        .iter()
        .filter(|(id, r)| !in_use.contains(*id) && !r.pinned)
        .map(|(id, r)| (id.clone(), *r))
        .collect();
    out.sort_by(|(ida, a), (idb, b)| {
        order(&a.last_used, &b.last_used)
            .then(order(&a.first_detected, &b.first_detected))
            .then(ida.cmp(idb))
    });
    out
}

#[cfg(test)]
pub(crate) fn eviction_order_for_test(
    records: &[(&str, u64, u64, bool)],
    in_use: &[&str],
) -> Vec<String> {
    let map: HashMap<String, ImageRecord> = records
        .iter()
        .map(|(id, detected, used, pinned)| {
            (
                id.to_string(),
                ImageRecord {
                    first_detected: Moment::wall(
                        SystemTime::UNIX_EPOCH + Duration::from_secs(*detected),
                    ),
                    last_used: Moment::wall(SystemTime::UNIX_EPOCH + Duration::from_secs(*used)),
                    size: 1,
                    pinned: *pinned,
                },
            )
        })
        .collect();
    let set: HashSet<String> = in_use.iter().map(|s| s.to_string()).collect();
    eviction_order(&map, &set)
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}
