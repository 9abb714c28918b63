//! The image manager (Go's images.imageManager): makes sure a container's
//! image is on the node before the container is created, following its pull
//! policy, backing off failed pulls per (pod, image), and pulling one at a
//! time (serializeImagePulls), a bounded number at a time
//! (maxParallelImagePulls) or freely.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use tokio::sync::Semaphore;

use super::reference::{apply_default_image_tag, parse_reference};
use super::service::{ImageRequest, RuntimeImageService};
use crate::cri::api::PodSandboxConfig;
use crate::kubelet::container::refs::{pod_name, pod_namespace, pod_uid};
use crate::kubelet::kuberuntime::events::{EventRecorder, EventType, container_ref, reasons};
use crate::util::backoff::{Backoff, go_duration_string};

/// Why an image could not be made available (the kubelet reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageErrorKind {
    /// A pull failed recently; waiting before the next attempt.
    PullBackOff,
    /// The image could not be inspected.
    Inspect,
    /// The pull failed.
    Pull,
    /// Absent, and the pull policy is Never.
    NeverPull,
    /// The registry could not be reached.
    RegistryUnavailable,
    /// The image name does not parse.
    InvalidName,
}

impl ImageErrorKind {
    /// The reason string in pod status.
    pub fn reason(&self) -> &'static str {
        match self {
            ImageErrorKind::PullBackOff => "ImagePullBackOff",
            ImageErrorKind::Inspect => "ImageInspectError",
            ImageErrorKind::Pull => "ErrImagePull",
            ImageErrorKind::NeverPull => "ErrImageNeverPull",
            ImageErrorKind::RegistryUnavailable => "RegistryUnavailable",
            ImageErrorKind::InvalidName => "InvalidImageName",
        }
    }
}

/// An image that is not available, with the message for pod status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.reason())]
pub struct ImagePullError {
    pub kind: ImageErrorKind,
    pub message: String,
}

/// How image pulls are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PullSettings {
    /// `serializeImagePulls`: one pull at a time.
    pub serialize_image_pulls: bool,
    /// `maxParallelImagePulls` when pulls are not serialized (no limit when
    /// unset).
    pub max_parallel_image_pulls: Option<u32>,
}

/// The pull policy a container effectively has (the API server's default
/// when the field is unset: Always for `:latest` or untagged images).
pub fn effective_pull_policy(container: &Container) -> &str {
    match container.image_pull_policy.as_deref() {
        Some(p) if !p.is_empty() => p,
        _ => {
            let image = container.image.as_deref().unwrap_or("");
            match parse_reference(image) {
                Ok(r) if r.digest.is_some() => "IfNotPresent",
                Ok(r) if r.tag.as_deref().is_some_and(|t| t != "latest") => "IfNotPresent",
                _ => "Always",
            }
        }
    }
}

/// Whether to pull given the policy and whether the image is present.
pub fn should_pull_image(policy: &str, image_present: bool) -> bool {
    match policy {
        "Never" => false,
        "Always" => true,
        "IfNotPresent" => !image_present,
        _ => false,
    }
}

/// Ensures images exist before containers use them.
pub struct ImageManager {
    service: Arc<RuntimeImageService>,
    recorder: Arc<dyn EventRecorder>,
    backoff: Arc<Backoff>,
    slots: Option<Arc<Semaphore>>,
}

impl std::fmt::Debug for ImageManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageManager").finish_non_exhaustive()
    }
}

impl ImageManager {
    /// `backoff` is the image pull back-off (10 s doubling to 5 min in the
    /// kubelet).
    pub fn new(
        service: Arc<RuntimeImageService>,
        recorder: Arc<dyn EventRecorder>,
        backoff: Arc<Backoff>,
        settings: PullSettings,
    ) -> Self {
        let slots = if settings.serialize_image_pulls {
            Some(1)
        } else {
            settings.max_parallel_image_pulls.filter(|n| *n > 0)
        };
        ImageManager {
            service,
            recorder,
            backoff,
            slots: slots.map(|n| Arc::new(Semaphore::new(n as usize))),
        }
    }

    /// The image service pulls go through.
    pub fn service(&self) -> &Arc<RuntimeImageService> {
        &self.service
    }

    fn record(&self, pod: &Pod, container: &Container, t: EventType, reason: &str, msg: &str) {
        self.recorder
            .event(&container_ref(pod, &container.name), t, reason, msg);
    }

    /// Makes the container's image available and returns its reference
    /// (image ID), or why it is not.
    pub async fn ensure_image_exists(
        &self,
        pod: &Pod,
        container: &Container,
        pull_secrets: &[Secret],
        sandbox_config: Option<&PodSandboxConfig>,
    ) -> Result<String, ImagePullError> {
        let raw = container.image.as_deref().unwrap_or("");
        let image = match apply_default_image_tag(raw) {
            Ok(i) => i,
            Err(e) => {
                let message = format!("Failed to apply default image tag {raw:?}: {e}");
                self.record(
                    pod,
                    container,
                    EventType::Warning,
                    reasons::FAILED_TO_INSPECT_IMAGE,
                    &message,
                );
                return Err(ImagePullError {
                    kind: ImageErrorKind::InvalidName,
                    message,
                });
            }
        };
        let request = ImageRequest {
            image: image.clone(),
            annotations: pod
                .metadata
                .annotations
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        let image_ref = match self.service.get_image_ref(&request).await {
            Ok(r) => r,
            Err(e) => {
                let message = format!("Failed to inspect image {raw:?}: {}", e.status_message());
                self.record(
                    pod,
                    container,
                    EventType::Warning,
                    reasons::FAILED_TO_INSPECT_IMAGE,
                    &message,
                );
                return Err(ImagePullError {
                    kind: ImageErrorKind::Inspect,
                    message,
                });
            }
        };
        let policy = effective_pull_policy(container);
        if !should_pull_image(policy, image_ref.is_some()) {
            if let Some(r) = image_ref {
                let message = format!("Container image {raw:?} already present on machine");
                self.record(
                    pod,
                    container,
                    EventType::Normal,
                    reasons::PULLED_IMAGE,
                    &message,
                );
                return Ok(r);
            }
            let message =
                format!("Container image {raw:?} is not present with pull policy of Never");
            self.record(
                pod,
                container,
                EventType::Warning,
                reasons::ERR_IMAGE_NEVER_PULL_POLICY,
                &message,
            );
            return Err(ImagePullError {
                kind: ImageErrorKind::NeverPull,
                message,
            });
        }
        let key = format!("{}_{raw}", pod_uid(pod));
        if self
            .backoff
            .is_in_backoff_since_update(&key, self.backoff.now())
        {
            let message = format!("Back-off pulling image {raw:?}");
            self.record(
                pod,
                container,
                EventType::Normal,
                reasons::BACK_OFF_PULL_IMAGE,
                &message,
            );
            return Err(ImagePullError {
                kind: ImageErrorKind::PullBackOff,
                message,
            });
        }
        self.record(
            pod,
            container,
            EventType::Normal,
            reasons::PULLING_IMAGE,
            &format!("Pulling image {raw:?}"),
        );
        let started = self.backoff.clock().monotonic();
        let result = {
            let _slot = match &self.slots {
                Some(s) => s.clone().acquire_owned().await.ok(),
                None => None,
            };
            self.service
                .pull_image(&request, pull_secrets, sandbox_config)
                .await
        };
        match result {
            Ok(r) => {
                let took = go_duration_string(
                    self.backoff
                        .clock()
                        .monotonic()
                        .saturating_duration_since(started),
                );
                self.record(
                    pod,
                    container,
                    EventType::Normal,
                    reasons::PULLED_IMAGE,
                    &format!("Successfully pulled image {raw:?} in {took}"),
                );
                self.backoff.gc();
                Ok(r)
            }
            Err(e) => {
                let message = e.message();
                self.record(
                    pod,
                    container,
                    EventType::Warning,
                    reasons::FAILED_TO_PULL_IMAGE,
                    &format!("Failed to pull image {raw:?}: {message}"),
                );
                self.backoff.next(&key, self.backoff.now());
                tracing::warn!(
                    pod = %format!("{}/{}", pod_namespace(pod), pod_name(pod)),
                    container = %container.name,
                    image = raw,
                    error = %message,
                    "image pull failed"
                );
                Err(ImagePullError {
                    kind: ImageErrorKind::Pull,
                    message,
                })
            }
        }
    }
}
