//! The image side of the runtime as the image manager and image GC use it
//! (the image half of Go's kubeGenericRuntimeManager): look an image up,
//! pull it with the pod's registry credentials then the node's, list and
//! remove images, and read the user an image runs as.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;

use super::credentialprovider::DockerKeyring;
use super::keyring::Keyring;
use super::reference::{ReferenceError, repository_to_pull};
use super::throttle::TokenBucket;
use crate::cri::api::{ImageSpec, PodSandboxConfig};
use crate::cri::{CriError, ImageService};
use crate::kubelet::container::Image;
use crate::kubelet::kuberuntime::ImageUser;

/// A failed image operation.
#[derive(Debug, thiserror::Error)]
pub enum ImageServiceError {
    #[error(transparent)]
    Cri(#[from] CriError),
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// Every credential that matched failed.
    #[error("[{}]", .0.iter().map(|e| e.status_message()).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<CriError>),
    /// The registry pull QPS limit allowed no pull now.
    #[error("pull QPS exceeded")]
    QpsExceeded,
}

impl ImageServiceError {
    /// The message as the Go kubelet shows it (gRPC errors as
    /// `rpc error: code = … desc = …`).
    pub fn message(&self) -> String {
        match self {
            ImageServiceError::Cri(e) => e.status_message(),
            other => other.to_string(),
        }
    }
}

/// An image reference with the pod annotations the runtime may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageRequest {
    pub image: String,
    pub annotations: HashMap<String, String>,
}

impl ImageRequest {
    pub fn new(image: impl Into<String>) -> Self {
        ImageRequest {
            image: image.into(),
            annotations: HashMap::new(),
        }
    }

    fn spec(&self) -> ImageSpec {
        ImageSpec {
            image: self.image.clone(),
            annotations: self.annotations.clone(),
        }
    }
}

/// CRI images with the kubelet's conventions on top.
pub struct RuntimeImageService {
    images: Arc<dyn ImageService>,
    limiter: Option<TokenBucket>,
    /// The node's credentials, tried after the pod's pull secrets'.
    node_keyring: Arc<dyn DockerKeyring>,
}

impl std::fmt::Debug for RuntimeImageService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeImageService")
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl RuntimeImageService {
    /// `limiter` throttles pulls (registryPullQPS/registryBurst);
    /// `node_keyring` holds the node's own registry credentials.
    pub fn new(
        images: Arc<dyn ImageService>,
        limiter: Option<TokenBucket>,
        node_keyring: Arc<dyn DockerKeyring>,
    ) -> Self {
        RuntimeImageService {
            images,
            limiter,
            node_keyring,
        }
    }

    /// The CRI image service underneath.
    pub fn cri(&self) -> &Arc<dyn ImageService> {
        &self.images
    }

    /// The image's ID when it is present on the node (GetImageRef).
    pub async fn get_image_ref(&self, image: &ImageRequest) -> Result<Option<String>, CriError> {
        let resp = self.images.image_status(&image.spec(), false).await?;
        Ok(resp.image.map(|i| i.id))
    }

    /// The user the image runs as by default; root when it names none.
    pub async fn image_user(&self, image: &str) -> Result<ImageUser, CriError> {
        let resp = self
            .images
            .image_status(&ImageRequest::new(image).spec(), false)
            .await?;
        Ok(match resp.image {
            Some(i) if i.uid.is_some() => ImageUser {
                uid: i.uid.map(|u| u.value),
                username: String::new(),
            },
            Some(i) if !i.username.is_empty() => ImageUser {
                uid: None,
                username: i.username,
            },
            _ => ImageUser::root(),
        })
    }

    /// Pulls the image, trying each matching credential in turn: the pull
    /// secrets', then the node's (Go's MakeDockerKeyring union); returns
    /// the image reference the runtime reports.
    pub async fn pull_image(
        &self,
        image: &ImageRequest,
        pull_secrets: &[Secret],
        sandbox_config: Option<&PodSandboxConfig>,
    ) -> Result<String, ImageServiceError> {
        if let Some(l) = &self.limiter
            && !l.try_accept()
        {
            return Err(ImageServiceError::QpsExceeded);
        }
        let repo = repository_to_pull(&image.image)?;
        let mut creds = Keyring::from_pull_secrets(pull_secrets).lookup(&repo);
        creds.extend(self.node_keyring.lookup(&repo).await);
        let spec = image.spec();
        if creds.is_empty() {
            crate::vlog!(3, image = %image.image, "pulling image without credentials");
            return self
                .images
                .pull_image(&spec, None, sandbox_config)
                .await
                .map_err(|e| {
                    tracing::error!(image = %image.image, error = %e, "failed to pull image");
                    ImageServiceError::Cri(e)
                });
        }
        let mut errors = Vec::new();
        for auth in creds {
            match self
                .images
                .pull_image(&spec, Some(&auth), sandbox_config)
                .await
            {
                Ok(r) => return Ok(r),
                Err(e) => errors.push(e),
            }
        }
        if errors.len() == 1 {
            return Err(ImageServiceError::Cri(errors.remove(0)));
        }
        Err(ImageServiceError::Aggregate(errors))
    }

    /// Every image on the node.
    pub async fn list_images(&self) -> Result<Vec<Image>, CriError> {
        let images = self.images.list_images(None).await?;
        Ok(images
            .into_iter()
            .map(|i| Image {
                id: i.id,
                repo_tags: i.repo_tags,
                repo_digests: i.repo_digests,
                size: i.size,
                pinned: i.pinned,
            })
            .collect())
    }

    /// Removes an image by ID or reference.
    pub async fn remove_image(&self, image: &str) -> Result<(), CriError> {
        self.images
            .remove_image(&ImageRequest::new(image).spec())
            .await
            .inspect_err(|e| tracing::error!(image, error = %e, "failed to remove image"))
    }
}
