//! `ImageService` over gRPC: the kubelet's client of the runtime's CRI v1
//! ImageService on a unix socket.

use std::time::Duration;

use async_trait::async_trait;
use tonic::transport::Channel;

use super::api;
use super::api::image_service_client::ImageServiceClient;
use super::connection::{MAX_MSG_SIZE, parse_endpoint, request, unary, unix_channel};
use super::error::CriError;
use super::service::{ImageService, Result};
use crate::vlog;

/// The image service of a CRI runtime, reached over a unix socket.
#[derive(Clone)]
pub struct RemoteImageService {
    endpoint: String,
    timeout: Duration,
    client: ImageServiceClient<Channel>,
}

impl std::fmt::Debug for RemoteImageService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteImageService")
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RemoteImageService {
    /// Opens a channel to `endpoint` and checks that it serves the CRI v1
    /// ImageService (an ImageFsInfo call bounded by `timeout`).
    pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Self> {
        vlog!(3, endpoint, "Connecting to image service");
        let service = Self::new_lazy(endpoint, timeout)?;
        service.check_v1().await?;
        Ok(service)
    }

    /// A client that has not talked to the service yet (no API check).
    pub fn new_lazy(endpoint: &str, timeout: Duration) -> Result<Self> {
        let parsed = parse_endpoint(endpoint)?;
        let channel = unix_channel(&parsed, timeout)?;
        let client = ImageServiceClient::new(channel).max_decoding_message_size(MAX_MSG_SIZE);
        Ok(RemoteImageService {
            endpoint: endpoint.to_string(),
            timeout,
            client,
        })
    }

    /// The endpoint this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn check_v1(&self) -> Result<()> {
        vlog!(4, "Finding the CRI API image version");
        let t = Some(self.timeout);
        let res = unary(
            &self.endpoint,
            "ImageFsInfo",
            t,
            self.client()
                .image_fs_info(request(api::ImageFsInfoRequest {}, t)),
        )
        .await;
        match res {
            Ok(_) => {
                vlog!(2, "Using CRI v1 image API");
                Ok(())
            }
            Err(err) if err.is_unimplemented() => Err(CriError::UnsupportedApi {
                endpoint: self.endpoint.clone(),
                service: "image",
                message: err.status_message(),
            }),
            Err(err) => {
                tracing::error!(endpoint = %self.endpoint, error = %err, "Unable to determine image API version");
                Err(err)
            }
        }
    }

    fn client(&self) -> ImageServiceClient<Channel> {
        self.client.clone()
    }
}

#[async_trait]
impl ImageService for RemoteImageService {
    async fn list_images(&self, filter: Option<api::ImageFilter>) -> Result<Vec<api::Image>> {
        let t = Some(self.timeout);
        let req = api::ListImagesRequest {
            filter: filter.clone(),
        };
        let resp = unary(&self.endpoint, "ListImages", t, self.client().list_images(request(req, t)))
            .await
            .inspect_err(|e| {
                tracing::error!(error = %e, filter = ?filter, "ListImages with filter from image service failed")
            })?;
        Ok(resp.images)
    }

    async fn image_status(
        &self,
        image: &api::ImageSpec,
        verbose: bool,
    ) -> Result<api::ImageStatusResponse> {
        let t = Some(self.timeout);
        let req = api::ImageStatusRequest {
            image: Some(image.clone()),
            verbose,
        };
        let resp = unary(
            &self.endpoint,
            "ImageStatus",
            t,
            self.client().image_status(request(req, t)),
        )
        .await
        .inspect_err(|e| {
            tracing::error!(error = %e, image = %image.image, "Get ImageStatus from image service failed")
        })?;
        super::verify::check_image_status(&self.endpoint, image, &resp).inspect_err(|err| {
            tracing::error!(error = %err, image = %image.image, "ImageStatus failed");
        })?;
        Ok(resp)
    }

    async fn pull_image(
        &self,
        image: &api::ImageSpec,
        auth: Option<&api::AuthConfig>,
        sandbox_config: Option<&api::PodSandboxConfig>,
    ) -> Result<String> {
        // Unbounded: pulls of large images legitimately take long.
        let req = api::PullImageRequest {
            image: Some(image.clone()),
            auth: auth.cloned(),
            sandbox_config: sandbox_config.cloned(),
        };
        let pull_err = |source: CriError| CriError::ImagePull {
            image: image.image.clone(),
            source: Box::new(source),
        };
        let resp = unary(
            &self.endpoint,
            "PullImage",
            None,
            self.client().pull_image(request(req, None)),
        )
        .await
        .map_err(|e| {
            tracing::error!(error = %e, image = %image.image, "PullImage from image service failed");
            pull_err(e)
        })?;
        if resp.image_ref.is_empty() {
            let err = pull_err(CriError::InvalidResponse {
                endpoint: self.endpoint.clone(),
                rpc: "PullImage",
                reason: format!("imageRef of image {:?} is not set", image.image),
            });
            tracing::error!(error = %err, image = %image.image, "ImageRef of image is not set");
            return Err(err);
        }
        Ok(resp.image_ref)
    }

    async fn remove_image(&self, image: &api::ImageSpec) -> Result<()> {
        let t = Some(self.timeout);
        let req = api::RemoveImageRequest {
            image: Some(image.clone()),
        };
        unary(
            &self.endpoint,
            "RemoveImage",
            t,
            self.client().remove_image(request(req, t)),
        )
        .await
        .inspect_err(|e| {
            tracing::error!(error = %e, image = %image.image, "RemoveImage from image service failed")
        })?;
        Ok(())
    }

    async fn image_fs_info(&self) -> Result<Vec<api::FilesystemUsage>> {
        // Unbounded: usage accounting can take long on big stores.
        let resp = unary(
            &self.endpoint,
            "ImageFsInfo",
            None,
            self.client()
                .image_fs_info(request(api::ImageFsInfoRequest {}, None)),
        )
        .await
        .inspect_err(|e| tracing::error!(error = %e, "ImageFsInfo from image service failed"))?;
        Ok(resp.image_filesystems)
    }
}
