//! Metrics around any `RuntimeService` / `ImageService`: every call counts in
//! `kubelet_runtime_operations_total`, its latency in
//! `kubelet_runtime_operations_duration_seconds`, and a failure in
//! `kubelet_runtime_operations_errors_total`, labelled by operation type.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::api;
use super::service::{ExecSyncOutput, ImageService, Result, RuntimeService};
use crate::metrics::kubelet as m;
use crate::util::clock::{Clock, RealClock};

async fn record<T>(
    clock: &dyn Clock,
    operation: &'static str,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let start = clock.monotonic();
    let out = call.await;
    let elapsed = clock.monotonic().saturating_duration_since(start);
    m::runtime_operations().inc(&[operation]);
    m::runtime_operations_duration().observe(&[operation], elapsed.as_secs_f64());
    if out.is_err() {
        m::runtime_operations_errors().inc(&[operation]);
    }
    out
}

/// A `RuntimeService` that records metrics for every call it forwards.
pub struct InstrumentedRuntimeService {
    inner: Arc<dyn RuntimeService>,
    clock: Arc<dyn Clock>,
}

impl InstrumentedRuntimeService {
    /// Wraps `inner`, timing with the real clock.
    pub fn new(inner: Arc<dyn RuntimeService>) -> Self {
        Self::with_clock(inner, Arc::new(RealClock))
    }

    /// Wraps `inner`, timing with `clock`.
    pub fn with_clock(inner: Arc<dyn RuntimeService>, clock: Arc<dyn Clock>) -> Self {
        InstrumentedRuntimeService { inner, clock }
    }
}

#[async_trait]
impl RuntimeService for InstrumentedRuntimeService {
    async fn version(&self, api_version: &str) -> Result<api::VersionResponse> {
        record(&*self.clock, "version", self.inner.version(api_version)).await
    }

    async fn run_pod_sandbox(
        &self,
        config: &api::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<String> {
        let start = self.clock.monotonic();
        let out = record(
            &*self.clock,
            "run_podsandbox",
            self.inner.run_pod_sandbox(config, runtime_handler),
        )
        .await;
        let elapsed = self.clock.monotonic().saturating_duration_since(start);
        m::run_podsandbox_duration().observe(&[runtime_handler], elapsed.as_secs_f64());
        if out.is_err() {
            m::run_podsandbox_errors().inc(&[runtime_handler]);
        }
        out
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        record(
            &*self.clock,
            "stop_podsandbox",
            self.inner.stop_pod_sandbox(id),
        )
        .await
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        record(
            &*self.clock,
            "remove_podsandbox",
            self.inner.remove_pod_sandbox(id),
        )
        .await
    }

    async fn pod_sandbox_status(
        &self,
        id: &str,
        verbose: bool,
    ) -> Result<api::PodSandboxStatusResponse> {
        record(
            &*self.clock,
            "podsandbox_status",
            self.inner.pod_sandbox_status(id, verbose),
        )
        .await
    }

    async fn list_pod_sandbox(
        &self,
        filter: Option<api::PodSandboxFilter>,
    ) -> Result<Vec<api::PodSandbox>> {
        record(
            &*self.clock,
            "list_podsandbox",
            self.inner.list_pod_sandbox(filter),
        )
        .await
    }

    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &api::ContainerConfig,
        sandbox_config: &api::PodSandboxConfig,
    ) -> Result<String> {
        record(
            &*self.clock,
            "create_container",
            self.inner
                .create_container(pod_sandbox_id, config, sandbox_config),
        )
        .await
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        record(
            &*self.clock,
            "start_container",
            self.inner.start_container(id),
        )
        .await
    }

    async fn stop_container(&self, id: &str, timeout: i64) -> Result<()> {
        record(
            &*self.clock,
            "stop_container",
            self.inner.stop_container(id, timeout),
        )
        .await
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        record(
            &*self.clock,
            "remove_container",
            self.inner.remove_container(id),
        )
        .await
    }

    async fn list_containers(
        &self,
        filter: Option<api::ContainerFilter>,
    ) -> Result<Vec<api::Container>> {
        record(
            &*self.clock,
            "list_containers",
            self.inner.list_containers(filter),
        )
        .await
    }

    async fn container_status(
        &self,
        id: &str,
        verbose: bool,
    ) -> Result<api::ContainerStatusResponse> {
        record(
            &*self.clock,
            "container_status",
            self.inner.container_status(id, verbose),
        )
        .await
    }

    async fn update_container_resources(
        &self,
        id: &str,
        resources: &api::ContainerResources,
    ) -> Result<()> {
        record(
            &*self.clock,
            "update_container",
            self.inner.update_container_resources(id, resources),
        )
        .await
    }

    async fn reopen_container_log(&self, id: &str) -> Result<()> {
        record(
            &*self.clock,
            "reopen_container_log",
            self.inner.reopen_container_log(id),
        )
        .await
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncOutput> {
        record(
            &*self.clock,
            "exec_sync",
            self.inner.exec_sync(id, cmd, timeout),
        )
        .await
    }

    async fn exec(&self, req: &api::ExecRequest) -> Result<api::ExecResponse> {
        record(&*self.clock, "exec", self.inner.exec(req)).await
    }

    async fn attach(&self, req: &api::AttachRequest) -> Result<api::AttachResponse> {
        record(&*self.clock, "attach", self.inner.attach(req)).await
    }

    async fn port_forward(
        &self,
        req: &api::PortForwardRequest,
    ) -> Result<api::PortForwardResponse> {
        record(&*self.clock, "port_forward", self.inner.port_forward(req)).await
    }

    async fn container_stats(&self, id: &str) -> Result<Option<api::ContainerStats>> {
        record(
            &*self.clock,
            "container_stats",
            self.inner.container_stats(id),
        )
        .await
    }

    async fn list_container_stats(
        &self,
        filter: Option<api::ContainerStatsFilter>,
    ) -> Result<Vec<api::ContainerStats>> {
        record(
            &*self.clock,
            "list_container_stats",
            self.inner.list_container_stats(filter),
        )
        .await
    }

    async fn pod_sandbox_stats(&self, id: &str) -> Result<Option<api::PodSandboxStats>> {
        record(
            &*self.clock,
            "podsandbox_stats",
            self.inner.pod_sandbox_stats(id),
        )
        .await
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: Option<api::PodSandboxStatsFilter>,
    ) -> Result<Vec<api::PodSandboxStats>> {
        record(
            &*self.clock,
            "list_podsandbox_stats",
            self.inner.list_pod_sandbox_stats(filter),
        )
        .await
    }

    async fn update_runtime_config(&self, runtime_config: &api::RuntimeConfig) -> Result<()> {
        record(
            &*self.clock,
            "update_runtime_config",
            self.inner.update_runtime_config(runtime_config),
        )
        .await
    }

    async fn status(&self, verbose: bool) -> Result<api::StatusResponse> {
        record(&*self.clock, "status", self.inner.status(verbose)).await
    }

    async fn runtime_config(&self) -> Result<api::RuntimeConfigResponse> {
        record(&*self.clock, "runtime_config", self.inner.runtime_config()).await
    }
}

/// An `ImageService` that records metrics for every call it forwards.
pub struct InstrumentedImageService {
    inner: Arc<dyn ImageService>,
    clock: Arc<dyn Clock>,
}

impl InstrumentedImageService {
    /// Wraps `inner`, timing with the real clock.
    pub fn new(inner: Arc<dyn ImageService>) -> Self {
        Self::with_clock(inner, Arc::new(RealClock))
    }

    /// Wraps `inner`, timing with `clock`.
    pub fn with_clock(inner: Arc<dyn ImageService>, clock: Arc<dyn Clock>) -> Self {
        InstrumentedImageService { inner, clock }
    }
}

#[async_trait]
impl ImageService for InstrumentedImageService {
    async fn list_images(&self, filter: Option<api::ImageFilter>) -> Result<Vec<api::Image>> {
        record(&*self.clock, "list_images", self.inner.list_images(filter)).await
    }

    async fn image_status(
        &self,
        image: &api::ImageSpec,
        verbose: bool,
    ) -> Result<api::ImageStatusResponse> {
        record(
            &*self.clock,
            "image_status",
            self.inner.image_status(image, verbose),
        )
        .await
    }

    async fn pull_image(
        &self,
        image: &api::ImageSpec,
        auth: Option<&api::AuthConfig>,
        sandbox_config: Option<&api::PodSandboxConfig>,
    ) -> Result<String> {
        record(
            &*self.clock,
            "pull_image",
            self.inner.pull_image(image, auth, sandbox_config),
        )
        .await
    }

    async fn remove_image(&self, image: &api::ImageSpec) -> Result<()> {
        record(&*self.clock, "remove_image", self.inner.remove_image(image)).await
    }

    async fn image_fs_info(&self) -> Result<Vec<api::FilesystemUsage>> {
        record(&*self.clock, "image_fs_info", self.inner.image_fs_info()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::error::CriError;

    /// Answers every call from a fixed script: list/status succeed, pulls fail.
    struct ScriptedImages;

    #[async_trait]
    impl ImageService for ScriptedImages {
        async fn list_images(&self, _: Option<api::ImageFilter>) -> Result<Vec<api::Image>> {
            Ok(vec![api::Image::default()])
        }
        async fn image_status(
            &self,
            _: &api::ImageSpec,
            _: bool,
        ) -> Result<api::ImageStatusResponse> {
            Ok(api::ImageStatusResponse::default())
        }
        async fn pull_image(
            &self,
            image: &api::ImageSpec,
            _: Option<&api::AuthConfig>,
            _: Option<&api::PodSandboxConfig>,
        ) -> Result<String> {
            Err(CriError::ImagePull {
                image: image.image.clone(),
                source: Box::new(CriError::from_status(
                    "unix:///x",
                    "PullImage",
                    &tonic::Status::not_found("absent"),
                )),
            })
        }
        async fn remove_image(&self, _: &api::ImageSpec) -> Result<()> {
            Ok(())
        }
        async fn image_fs_info(&self) -> Result<Vec<api::FilesystemUsage>> {
            Ok(vec![])
        }
    }

    fn counts(op: &str) -> (f64, f64, u64) {
        (
            m::runtime_operations().get(&[op]),
            m::runtime_operations_errors().get(&[op]),
            m::runtime_operations_duration()
                .snapshot(&[op])
                .map(|s| s.count)
                .unwrap_or(0),
        )
    }

    #[tokio::test]
    async fn calls_and_failures_are_counted_per_operation() {
        let svc = InstrumentedImageService::new(Arc::new(ScriptedImages));
        let (ops0, errs0, hist0) = counts("list_images");
        let (pops0, perrs0, phist0) = counts("pull_image");

        svc.list_images(None).await.expect("list");
        svc.list_images(None).await.expect("list");
        let spec = api::ImageSpec {
            image: "kubelet-rs.local/absent:1".into(),
            ..Default::default()
        };
        let err = svc
            .pull_image(&spec, None, None)
            .await
            .expect_err("pull fails");
        assert_eq!(err.reason(), Some("ErrImagePull"));

        let (ops, errs, hist) = counts("list_images");
        assert_eq!(ops - ops0, 2.0);
        assert_eq!(errs - errs0, 0.0);
        assert_eq!(hist - hist0, 2);
        let (pops, perrs, phist) = counts("pull_image");
        assert_eq!(pops - pops0, 1.0);
        assert_eq!(perrs - perrs0, 1.0);
        assert_eq!(phist - phist0, 1);

        let text = crate::metrics::render_text();
        assert!(text.contains("# TYPE kubelet_runtime_operations_total counter"));
        assert!(
            text.contains("kubelet_runtime_operations_errors_total{operation_type=\"pull_image\"}")
        );
        assert!(text.contains(
            "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"list_images\",le=\"0.005\"}"
        ));
        assert!(text.contains(
            "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"list_images\",le=\"745.0580596923828\"}"
        ));
    }
}
