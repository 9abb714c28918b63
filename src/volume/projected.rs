//! projected volumes (pkg/volume/projected): serviceAccountToken,
//! configMap, secret and downwardAPI sources merged into one atomic-writer
//! volume in a tmpfs (the `kube-api-access-*` volume the API server adds to
//! pods is one: token, ca.crt from kube-root-ca.crt, namespace). Failing
//! sources are reported together. Tokens are 0600 when the pod sets
//! fsGroup or a common runAsUser (fsGroup then makes them 0640), else
//! defaultMode. Needs API access: without a token manager SetUp fails as
//! the Go kubelet's does without a client.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ProjectedVolumeSource, Volume};

use crate::volume::atomic_plugin::{AtomicKind, AtomicPlugin};
use crate::volume::atomic_volume::AtomicVolume;
use crate::volume::configmap::{PROJECTING_ATTRIBUTES, get_config_map};
use crate::volume::downwardapi::collect_data;
use crate::volume::error::VolumeError;
use crate::volume::payload::{config_map_payload, secret_payload};
use crate::volume::plugin::{Mounter, Unmounter};
use crate::volume::secret::get_secret;
use crate::volume::spec::{Attributes, MounterArgs, Spec};
use crate::volume::util::atomic_writer::{FileProjection, Payload};

pub const PROJECTED_PLUGIN_NAME: &str = "kubernetes.io/projected";

/// The projected kind of atomic-writer volume.
pub struct ProjectedKind;

/// The plugin.
pub type ProjectedPlugin = AtomicPlugin<ProjectedKind>;

impl AtomicKind for ProjectedKind {
    const PLUGIN_NAME: &'static str = PROJECTED_PLUGIN_NAME;
    const WHAT: &'static str = "a projected";
    const MEMORY: bool = true;
    type Source = ProjectedVolumeSource;

    fn source(spec: &Spec) -> Option<&ProjectedVolumeSource> {
        spec.projected()
    }

    fn mounter(
        vol: AtomicVolume,
        source: ProjectedVolumeSource,
        pod: Arc<Pod>,
    ) -> Arc<dyn Mounter> {
        Arc::new(ProjectedMounter { vol, source, pod })
    }

    fn unmounter(vol: AtomicVolume) -> Arc<dyn Unmounter> {
        Arc::new(ProjectedUnmounter(vol))
    }

    fn reconstructed(volume_name: &str) -> Volume {
        Volume {
            name: volume_name.to_string(),
            projected: Some(ProjectedVolumeSource::default()),
            ..Default::default()
        }
    }
}

/// Sets up one projected volume.
pub struct ProjectedMounter {
    vol: AtomicVolume,
    source: ProjectedVolumeSource,
    pod: Arc<Pod>,
}

impl ProjectedMounter {
    /// The merged files of every source.
    async fn collect_data(&self, args: &MounterArgs) -> Result<Payload, VolumeError> {
        let default_mode = self.source.default_mode.ok_or_else(|| {
            VolumeError::other("no defaultMode used, not even the default value for it")
        })?;
        let host = &self.vol.host;
        let Some(tokens) = host.tokens() else {
            return Err(VolumeError::other(format!(
                "cannot setup projected volume {} because kube client is not configured",
                self.vol.vol_name
            )));
        };
        let pod = &self.pod;
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut errs = Vec::new();
        let mut payload = Payload::new();
        for source in self.source.sources.iter().flatten() {
            if let Some(s) = &source.secret {
                let optional = s.optional == Some(true);
                let result = match get_secret(host, ns, &s.name, optional).await {
                    Ok(secret) => {
                        secret_payload(s.items.as_deref(), &secret, Some(default_mode), optional)
                    }
                    Err(e) => Err(e),
                };
                match result {
                    Ok(p) => payload.extend(p),
                    Err(e) => errs.push(e),
                }
            } else if let Some(c) = &source.config_map {
                let optional = c.optional == Some(true);
                let result = match get_config_map(host, ns, &c.name, optional).await {
                    Ok(cm) => {
                        config_map_payload(c.items.as_deref(), &cm, Some(default_mode), optional)
                    }
                    Err(e) => Err(e),
                };
                match result {
                    Ok(p) => payload.extend(p),
                    Err(e) => errs.push(e),
                }
            } else if let Some(d) = &source.downward_api {
                match collect_data(
                    d.items.as_deref().unwrap_or_default(),
                    pod,
                    host,
                    Some(default_mode),
                ) {
                    Ok(p) => payload.extend(p),
                    Err(e) => errs.push(e),
                }
            } else if let Some(tp) = &source.service_account_token {
                let mode = if args.fs_user.is_some() || args.fs_group.is_some() {
                    0o600
                } else {
                    default_mode as u32
                };
                let audiences = tp
                    .audience
                    .clone()
                    .filter(|a| !a.is_empty())
                    .into_iter()
                    .collect();
                let request = TokenRequest {
                    spec: TokenRequestSpec {
                        audiences,
                        expiration_seconds: tp.expiration_seconds,
                        bound_object_ref: Some(BoundObjectReference {
                            api_version: Some("v1".into()),
                            kind: Some("Pod".into()),
                            name: pod.metadata.name.clone(),
                            uid: pod.metadata.uid.clone(),
                        }),
                    },
                    ..Default::default()
                };
                let sa = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.as_deref())
                    .unwrap_or_default();
                match tokens.get_service_account_token(ns, sa, &request).await {
                    Ok(tr) => {
                        let token = tr.status.map(|s| s.token).unwrap_or_default();
                        payload.insert(
                            tp.path.clone(),
                            FileProjection {
                                data: token.into_bytes(),
                                mode,
                                fs_user: args.fs_user,
                            },
                        );
                    }
                    Err(e) => errs.push(VolumeError::other(e.to_string())),
                }
            }
        }
        VolumeError::aggregate(errs)?;
        Ok(payload)
    }
}

#[async_trait]
impl Mounter for ProjectedMounter {
    fn path(&self) -> PathBuf {
        self.vol.path()
    }

    fn attributes(&self) -> Attributes {
        PROJECTING_ATTRIBUTES
    }

    async fn set_up(&self, args: &MounterArgs) -> Result<(), VolumeError> {
        crate::vlog!(3, volume = %self.vol.vol_name, pod = %self.vol.pod_uid, "Setting up volume");
        let wrapper = self.vol.wrapper(&self.pod)?;
        let data = self.collect_data(args).await.inspect_err(|e| {
            tracing::error!(volume = %self.vol.vol_name, error = %e, "Error preparing data for projected volume");
        })?;
        let result = self.vol.write(wrapper, self.pod.clone(), data, args).await;
        if result.is_err()
            && let Some(tokens) = self.vol.host.tokens()
        {
            // The failed setup tore the volume down; so does its token.
            tokens.delete_service_account_token(&self.vol.pod_uid);
        }
        result
    }
}

/// Tears a projected volume down and forgets the pod's tokens.
pub struct ProjectedUnmounter(AtomicVolume);

#[async_trait]
impl Unmounter for ProjectedUnmounter {
    fn path(&self) -> PathBuf {
        self.0.path()
    }

    async fn tear_down(&self) -> Result<(), VolumeError> {
        self.0.tear_down().await?;
        if let Some(tokens) = self.0.host.tokens() {
            tokens.delete_service_account_token(&self.0.pod_uid);
        }
        Ok(())
    }
}
