//! The in-memory ImageService: a pull records the image (no bytes move);
//! ids are the sha256 of the reference, so every node agrees on them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::state::unix_nanos;
use crate::cri::api;
use crate::cri::service::{ImageService, Result};
use crate::util::clock::Clock;

/// The size every hollow image reports.
pub const IMAGE_SIZE: u64 = 1 << 20;

/// The id of the image `reference` names.
pub fn image_id(reference: &str) -> String {
    format!("sha256:{:x}", Sha256::digest(reference.as_bytes()))
}

/// Images of one hollow node, by reference.
pub struct MemoryImages {
    images: Mutex<BTreeMap<String, api::Image>>,
    clock: Arc<dyn Clock>,
    /// The directory ImageFsInfo names as the images' filesystem: one the
    /// node owns, so that what reads its filesystem (image GC, stats) finds
    /// it.
    fs_dir: PathBuf,
}

impl MemoryImages {
    pub fn new(clock: Arc<dyn Clock>, fs_dir: PathBuf) -> Self {
        MemoryImages {
            images: Mutex::new(BTreeMap::new()),
            clock,
            fs_dir,
        }
    }

    fn images(&self) -> MutexGuard<'_, BTreeMap<String, api::Image>> {
        self.images.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The image `spec` names: by reference or by id.
    fn find(&self, spec: &str) -> Option<api::Image> {
        let images = self.images();
        images
            .get(spec)
            .or_else(|| images.values().find(|i| i.id == spec))
            .cloned()
    }
}

#[async_trait]
impl ImageService for MemoryImages {
    async fn list_images(&self, filter: Option<api::ImageFilter>) -> Result<Vec<api::Image>> {
        let wanted = filter.and_then(|f| f.image).map(|i| i.image);
        Ok(self
            .images()
            .values()
            .filter(|i| {
                wanted
                    .as_ref()
                    .is_none_or(|w| i.id == *w || i.repo_tags.contains(w))
            })
            .cloned()
            .collect())
    }

    async fn image_status(
        &self,
        image: &api::ImageSpec,
        _verbose: bool,
    ) -> Result<api::ImageStatusResponse> {
        Ok(api::ImageStatusResponse {
            image: self.find(&image.image),
            info: Default::default(),
        })
    }

    async fn pull_image(
        &self,
        image: &api::ImageSpec,
        _auth: Option<&api::AuthConfig>,
        sandbox_config: Option<&api::PodSandboxConfig>,
    ) -> Result<String> {
        if let Some(message) =
            sandbox_config.and_then(|c| super::script::pull_error(&c.annotations))
        {
            return Err(crate::cri::CriError::Rpc {
                endpoint: super::ENDPOINT.into(),
                rpc: "PullImage",
                code: tonic::Code::Unknown,
                message: format!("failed to pull image {:?}: {message}", image.image),
            });
        }
        let id = image_id(&image.image);
        self.images()
            .entry(image.image.clone())
            .or_insert_with(|| api::Image {
                id: id.clone(),
                repo_tags: vec![image.image.clone()],
                repo_digests: Vec::new(),
                size: IMAGE_SIZE,
                uid: None,
                username: String::new(),
                spec: Some(image.clone()),
                pinned: false,
            });
        Ok(id)
    }

    async fn remove_image(&self, image: &api::ImageSpec) -> Result<()> {
        let target = image.image.clone();
        self.images()
            .retain(|name, i| *name != target && i.id != target);
        Ok(())
    }

    async fn image_fs_info(&self) -> Result<Vec<api::FilesystemUsage>> {
        let (count, used) = {
            let images = self.images();
            (images.len() as u64, images.values().map(|i| i.size).sum())
        };
        Ok(vec![api::FilesystemUsage {
            timestamp: unix_nanos(self.clock.now()),
            fs_id: Some(api::FilesystemIdentifier {
                mountpoint: self.fs_dir.to_string_lossy().into_owned(),
            }),
            used_bytes: Some(api::UInt64Value { value: used }),
            inodes_used: Some(api::UInt64Value { value: count }),
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;

    #[tokio::test]
    async fn image_fs_info_names_the_nodes_directory() {
        let dir = tempfile::tempdir().unwrap();
        let images = MemoryImages::new(Arc::new(RealClock), dir.path().to_path_buf());
        let fs = images.image_fs_info().await.unwrap();
        let mountpoint = fs[0].fs_id.as_ref().unwrap().mountpoint.clone();
        assert_eq!(mountpoint, dir.path().to_string_lossy());
        // What image GC and the stats read of it: a filesystem that exists.
        assert!(nix::sys::statvfs::statvfs(mountpoint.as_str()).is_ok());
    }

    #[tokio::test]
    async fn a_scripted_pull_error_fails_the_pull_and_stores_nothing() {
        let images = MemoryImages::new(Arc::new(RealClock), PathBuf::from("/var/lib/hollow"));
        let spec = api::ImageSpec {
            image: "app:1".into(),
            ..Default::default()
        };
        let sandbox = api::PodSandboxConfig {
            annotations: [(
                "hollow.kubelet-rs.io/pull-error".to_string(),
                "manifest unknown".to_string(),
            )]
            .into(),
            ..Default::default()
        };
        let err = images
            .pull_image(&spec, None, Some(&sandbox))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("manifest unknown"), "{err}");
        assert!(images.list_images(None).await.unwrap().is_empty());
        // Another pod's pull of the same image succeeds.
        assert!(images.pull_image(&spec, None, None).await.is_ok());
    }

    #[tokio::test]
    async fn pull_then_status_list_remove() {
        let images = MemoryImages::new(Arc::new(RealClock), PathBuf::from("/var/lib/hollow"));
        let spec = |s: &str| api::ImageSpec {
            image: s.into(),
            ..Default::default()
        };
        assert!(
            images
                .image_status(&spec("pause:3.8"), false)
                .await
                .unwrap()
                .image
                .is_none()
        );
        let id = images
            .pull_image(&spec("pause:3.8"), None, None)
            .await
            .unwrap();
        assert_eq!(id, image_id("pause:3.8"));
        // By reference and by id.
        for s in ["pause:3.8", id.as_str()] {
            let got = images.image_status(&spec(s), false).await.unwrap().image;
            assert_eq!(got.map(|i| i.id), Some(id.clone()), "{s}");
        }
        assert_eq!(images.list_images(None).await.unwrap().len(), 1);
        let fs = images.image_fs_info().await.unwrap();
        assert_eq!(fs[0].used_bytes.map(|u| u.value), Some(IMAGE_SIZE));
        images.remove_image(&spec(&id)).await.unwrap();
        assert!(images.list_images(None).await.unwrap().is_empty());
    }
}
