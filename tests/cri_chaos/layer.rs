//! A fault-injecting layer over a CRI runtime and image service: while
//! switched on, each call may fail with a random gRPC error, and each answer
//! that gets through may be bent into another valid protobuf value (random
//! states in list answers, missing optional fields, odd timestamps, garbage
//! labels, annotations, reasons and messages, dropped, repeated or
//! reordered list items, runtime conditions gone, image ids and sizes).
//! Statuses are checked as the remote client checks them, so what reaches
//! the kubelet is what a real runtime's answer could be. Seeded: a failure
//! names its seed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kubelet::cri::api;
use kubelet::cri::service::{ExecSyncOutput, ImageService, Result, RuntimeService};
use kubelet::cri::verify::{self, verify_container_status, verify_sandbox_status};
use kubelet::cri::{CriError, RuntimeServices};

const ENDPOINT: &str = "chaos://hollow";

/// A small seeded generator (xorshift64*): reproducible, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn i64_odd(&mut self) -> i64 {
        let any = self.next() as i64;
        *self.pick(&[0, -1, 1, i64::MIN, i64::MAX, 1_000_000_000_000_000_000, any])
    }
    fn string(&mut self) -> String {
        match self.below(6) {
            0 => String::new(),
            1 => "\u{0}\u{7f}\u{202e}é漢".to_string(),
            2 => "x".repeat(64 * 1024),
            3 => "not-an-ip".to_string(),
            4 => "../../etc/passwd".to_string(),
            _ => format!("{:x}", self.next()),
        }
    }
    fn map(&mut self, mut m: HashMap<String, String>) -> HashMap<String, String> {
        match self.below(5) {
            0 => HashMap::new(),
            1 => {
                // The kubelet's own keys with values it must not trust.
                for k in [
                    "io.kubernetes.container.restartCount",
                    "io.kubernetes.container.hash",
                    "io.kubernetes.pod.terminationGracePeriod",
                    "io.kubernetes.container.terminationMessagePath",
                    "io.kubernetes.pod.uid",
                    "io.kubernetes.container.name",
                ] {
                    if self.chance(0.5) {
                        let v = self.string();
                        m.insert(k.to_string(), v);
                    }
                }
                m
            }
            2 => {
                let (k, v) = (self.string(), self.string());
                m.insert(k, v);
                m
            }
            _ => m,
        }
    }
}

/// The on/off switch and the counts of what the layer did.
#[derive(Default)]
pub struct Chaos {
    pub on: AtomicBool,
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub bent: AtomicU64,
}

struct Layer {
    chaos: Arc<Chaos>,
    rng: Mutex<Rng>,
}

const CODES: [tonic::Code; 7] = [
    tonic::Code::Unavailable,
    tonic::Code::Unknown,
    tonic::Code::Internal,
    tonic::Code::DeadlineExceeded,
    tonic::Code::NotFound,
    tonic::Code::ResourceExhausted,
    tonic::Code::FailedPrecondition,
];

impl Layer {
    fn rng(&self) -> std::sync::MutexGuard<'_, Rng> {
        self.rng.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn on(&self) -> bool {
        self.chaos.calls.fetch_add(1, Ordering::Relaxed);
        self.chaos.on.load(Ordering::Relaxed)
    }
    /// A random error for `rpc` (about one call in eight), before the call.
    fn fail(&self, rpc: &'static str) -> Result<()> {
        if !self.on() {
            return Ok(());
        }
        let mut r = self.rng();
        if !r.chance(0.12) {
            return Ok(());
        }
        self.chaos.errors.fetch_add(1, Ordering::Relaxed);
        let code = *r.pick(&CODES);
        let msg = r.string();
        Err(CriError::from_status(
            ENDPOINT,
            rpc,
            &tonic::Status::new(code, msg),
        ))
    }
    /// Whether to bend this answer (about one in four, while on).
    fn bend(&self) -> Option<std::sync::MutexGuard<'_, Rng>> {
        if !self.chaos.on.load(Ordering::Relaxed) {
            return None;
        }
        let mut r = self.rng();
        if !r.chance(0.25) {
            return None;
        }
        self.chaos.bent.fetch_add(1, Ordering::Relaxed);
        Some(r)
    }
}

fn bend_list<T: Clone>(r: &mut Rng, mut items: Vec<T>, each: impl Fn(&mut Rng, &mut T)) -> Vec<T> {
    match r.below(4) {
        0 if !items.is_empty() => {
            let i = r.below(items.len() as u64) as usize;
            items.remove(i);
        }
        1 if !items.is_empty() => {
            let i = r.below(items.len() as u64) as usize;
            items.push(items[i].clone());
        }
        2 => items.reverse(),
        _ => {}
    }
    for item in &mut items {
        if r.chance(0.3) {
            each(r, item);
        }
    }
    items
}

fn bend_container(r: &mut Rng, c: &mut api::Container) {
    match r.below(7) {
        0 => c.state = r.below(6) as i32 - 1,
        1 => c.metadata = None,
        2 => c.created_at = r.i64_odd(),
        3 => c.labels = r.map(std::mem::take(&mut c.labels)),
        4 => c.annotations = r.map(std::mem::take(&mut c.annotations)),
        5 => c.image_ref = r.string(),
        _ => c.pod_sandbox_id = r.string(),
    }
}

fn bend_sandbox(r: &mut Rng, s: &mut api::PodSandbox) {
    match r.below(5) {
        0 => s.state = r.below(4) as i32 - 1,
        1 => s.metadata = None,
        2 => s.created_at = r.i64_odd(),
        3 => s.labels = r.map(std::mem::take(&mut s.labels)),
        _ => s.annotations = r.map(std::mem::take(&mut s.annotations)),
    }
}

/// Status answers are bent in the fields the kubelet reports but does not
/// decide on, or into shapes the client refuses (which the kubelet retries
/// on the next relist): a state or exit code that lies would be cached
/// until the pod's next runtime event (as in Go), so those lies go through
/// the list answers instead, which every relist reads afresh.
fn bend_container_status(r: &mut Rng, s: &mut api::ContainerStatus) {
    match r.below(8) {
        0 => s.created_at = 0,
        1 => s.reason = r.string(),
        2 => s.message = r.string(),
        3 => s.annotations = r.map(std::mem::take(&mut s.annotations)),
        4 => s.labels = r.map(std::mem::take(&mut s.labels)),
        5 => s.log_path = r.string(),
        6 => s.image = None,
        _ => s.metadata = None,
    }
}

fn bend_sandbox_status(r: &mut Rng, s: &mut api::PodSandboxStatus) {
    match r.below(5) {
        0 => s.network = None,
        1 => {
            let ip = *r.pick(&["", "not-an-ip", "::::", "10.0.0.256", "fe80::1%eth0"]);
            if let Some(n) = s.network.as_mut() {
                n.ip = ip.to_string();
            }
        }
        2 => s.created_at = 0,
        3 => s.annotations = r.map(std::mem::take(&mut s.annotations)),
        _ => s.metadata = None,
    }
}

struct ChaosRuntime {
    inner: Arc<dyn RuntimeService>,
    layer: Layer,
}

struct ChaosImages {
    inner: Arc<dyn ImageService>,
    layer: Layer,
}

/// `services` under the layer (`seed` for this node's generator).
pub fn wrap(services: RuntimeServices, chaos: Arc<Chaos>, seed: u64) -> RuntimeServices {
    let layer = |s: u64| Layer {
        chaos: chaos.clone(),
        rng: Mutex::new(Rng::new(s)),
    };
    RuntimeServices {
        runtime: Arc::new(ChaosRuntime {
            inner: services.runtime,
            layer: layer(seed),
        }),
        image: Arc::new(ChaosImages {
            inner: services.image,
            layer: layer(seed ^ 0x9E37_79B9_7F4A_7C15),
        }),
    }
}

#[async_trait]
impl RuntimeService for ChaosRuntime {
    async fn version(&self, api_version: &str) -> Result<api::VersionResponse> {
        self.layer.fail("Version")?;
        let mut v = self.inner.version(api_version).await?;
        if let Some(mut r) = self.layer.bend() {
            v.runtime_version = r.string();
        }
        Ok(v)
    }
    async fn run_pod_sandbox(
        &self,
        config: &api::PodSandboxConfig,
        handler: &str,
    ) -> Result<String> {
        self.layer.fail("RunPodSandbox")?;
        self.inner.run_pod_sandbox(config, handler).await
    }
    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        self.layer.fail("StopPodSandbox")?;
        self.inner.stop_pod_sandbox(id).await
    }
    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        self.layer.fail("RemovePodSandbox")?;
        self.inner.remove_pod_sandbox(id).await
    }
    async fn pod_sandbox_status(
        &self,
        id: &str,
        verbose: bool,
    ) -> Result<api::PodSandboxStatusResponse> {
        self.layer.fail("PodSandboxStatus")?;
        let mut resp = self.inner.pod_sandbox_status(id, verbose).await?;
        if let (Some(mut r), Some(s)) = (self.layer.bend(), resp.status.as_mut()) {
            bend_sandbox_status(&mut r, s);
        }
        if let Some(s) = &resp.status {
            verify_sandbox_status(s).map_err(|field| CriError::IncompleteStatus {
                endpoint: ENDPOINT.into(),
                rpc: "PodSandboxStatus",
                field,
            })?;
        }
        Ok(resp)
    }
    async fn list_pod_sandbox(
        &self,
        filter: Option<api::PodSandboxFilter>,
    ) -> Result<Vec<api::PodSandbox>> {
        self.layer.fail("ListPodSandbox")?;
        let items = self.inner.list_pod_sandbox(filter).await?;
        Ok(match self.layer.bend() {
            Some(mut r) => bend_list(&mut r, items, bend_sandbox),
            None => items,
        })
    }
    async fn create_container(
        &self,
        sandbox: &str,
        config: &api::ContainerConfig,
        sandbox_config: &api::PodSandboxConfig,
    ) -> Result<String> {
        self.layer.fail("CreateContainer")?;
        self.inner
            .create_container(sandbox, config, sandbox_config)
            .await
    }
    async fn start_container(&self, id: &str) -> Result<()> {
        self.layer.fail("StartContainer")?;
        self.inner.start_container(id).await
    }
    async fn stop_container(&self, id: &str, timeout: i64) -> Result<()> {
        self.layer.fail("StopContainer")?;
        self.inner.stop_container(id, timeout).await
    }
    async fn remove_container(&self, id: &str) -> Result<()> {
        self.layer.fail("RemoveContainer")?;
        self.inner.remove_container(id).await
    }
    async fn list_containers(
        &self,
        filter: Option<api::ContainerFilter>,
    ) -> Result<Vec<api::Container>> {
        self.layer.fail("ListContainers")?;
        let items = self.inner.list_containers(filter).await?;
        Ok(match self.layer.bend() {
            Some(mut r) => bend_list(&mut r, items, bend_container),
            None => items,
        })
    }
    async fn container_status(
        &self,
        id: &str,
        verbose: bool,
    ) -> Result<api::ContainerStatusResponse> {
        self.layer.fail("ContainerStatus")?;
        let mut resp = self.inner.container_status(id, verbose).await?;
        if let (Some(mut r), Some(s)) = (self.layer.bend(), resp.status.as_mut()) {
            bend_container_status(&mut r, s);
        }
        if let Some(s) = &resp.status {
            verify_container_status(s).map_err(|field| CriError::IncompleteStatus {
                endpoint: ENDPOINT.into(),
                rpc: "ContainerStatus",
                field,
            })?;
        }
        Ok(resp)
    }
    async fn update_container_resources(
        &self,
        id: &str,
        resources: &api::ContainerResources,
    ) -> Result<()> {
        self.layer.fail("UpdateContainerResources")?;
        self.inner.update_container_resources(id, resources).await
    }
    async fn reopen_container_log(&self, id: &str) -> Result<()> {
        self.layer.fail("ReopenContainerLog")?;
        self.inner.reopen_container_log(id).await
    }
    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncOutput> {
        self.layer.fail("ExecSync")?;
        let mut out = self.inner.exec_sync(id, cmd, timeout).await?;
        if let Some(mut r) = self.layer.bend() {
            out.stdout = r.string().into_bytes();
        }
        Ok(out)
    }
    async fn exec(&self, request: &api::ExecRequest) -> Result<api::ExecResponse> {
        self.layer.fail("Exec")?;
        self.inner.exec(request).await
    }
    async fn attach(&self, request: &api::AttachRequest) -> Result<api::AttachResponse> {
        self.layer.fail("Attach")?;
        self.inner.attach(request).await
    }
    async fn port_forward(
        &self,
        request: &api::PortForwardRequest,
    ) -> Result<api::PortForwardResponse> {
        self.layer.fail("PortForward")?;
        self.inner.port_forward(request).await
    }
    async fn container_stats(&self, id: &str) -> Result<Option<api::ContainerStats>> {
        self.layer.fail("ContainerStats")?;
        self.inner.container_stats(id).await
    }
    async fn list_container_stats(
        &self,
        filter: Option<api::ContainerStatsFilter>,
    ) -> Result<Vec<api::ContainerStats>> {
        self.layer.fail("ListContainerStats")?;
        let items = self.inner.list_container_stats(filter).await?;
        Ok(match self.layer.bend() {
            Some(mut r) => bend_list(&mut r, items, |r, s| {
                s.attributes = if r.chance(0.5) {
                    None
                } else {
                    s.attributes.take()
                }
            }),
            None => items,
        })
    }
    async fn pod_sandbox_stats(&self, id: &str) -> Result<Option<api::PodSandboxStats>> {
        self.layer.fail("PodSandboxStats")?;
        self.inner.pod_sandbox_stats(id).await
    }
    async fn list_pod_sandbox_stats(
        &self,
        filter: Option<api::PodSandboxStatsFilter>,
    ) -> Result<Vec<api::PodSandboxStats>> {
        self.layer.fail("ListPodSandboxStats")?;
        self.inner.list_pod_sandbox_stats(filter).await
    }
    async fn update_runtime_config(&self, config: &api::RuntimeConfig) -> Result<()> {
        self.layer.fail("UpdateRuntimeConfig")?;
        self.inner.update_runtime_config(config).await
    }
    async fn status(&self, verbose: bool) -> Result<api::StatusResponse> {
        self.layer.fail("Status")?;
        let mut resp = self.inner.status(verbose).await?;
        if let Some(mut r) = self.layer.bend() {
            match r.below(3) {
                0 => resp.status = None,
                1 => {
                    if let Some(s) = resp.status.as_mut() {
                        s.conditions.clear();
                    }
                }
                _ => {
                    if let Some(c) = resp.status.as_mut().and_then(|s| s.conditions.first_mut()) {
                        c.status = false;
                        c.reason = r.string();
                        c.message = r.string();
                    }
                }
            }
        }
        Ok(resp)
    }
    async fn runtime_config(&self) -> Result<api::RuntimeConfigResponse> {
        self.layer.fail("RuntimeConfig")?;
        self.inner.runtime_config().await
    }
}

#[async_trait]
impl ImageService for ChaosImages {
    async fn list_images(&self, filter: Option<api::ImageFilter>) -> Result<Vec<api::Image>> {
        self.layer.fail("ListImages")?;
        let items = self.inner.list_images(filter).await?;
        Ok(match self.layer.bend() {
            Some(mut r) => bend_list(&mut r, items, |r, i| match r.below(3) {
                0 => i.size = r.next(),
                1 => i.repo_tags.clear(),
                _ => i.id = r.string(),
            }),
            None => items,
        })
    }
    async fn image_status(
        &self,
        image: &api::ImageSpec,
        verbose: bool,
    ) -> Result<api::ImageStatusResponse> {
        self.layer.fail("ImageStatus")?;
        let mut resp = self.inner.image_status(image, verbose).await?;
        if let Some(mut r) = self.layer.bend() {
            match r.below(3) {
                0 => resp.image = None,
                1 => {
                    if let Some(i) = resp.image.as_mut() {
                        i.size = 0;
                    }
                }
                _ => {
                    if let Some(i) = resp.image.as_mut() {
                        i.id = r.string();
                    }
                }
            }
        }
        // Checked as the remote client checks it.
        verify::check_image_status(ENDPOINT, image, &resp)?;
        Ok(resp)
    }
    async fn pull_image(
        &self,
        image: &api::ImageSpec,
        auth: Option<&api::AuthConfig>,
        sandbox_config: Option<&api::PodSandboxConfig>,
    ) -> Result<String> {
        self.layer.fail("PullImage")?;
        self.inner.pull_image(image, auth, sandbox_config).await
    }
    async fn remove_image(&self, image: &api::ImageSpec) -> Result<()> {
        self.layer.fail("RemoveImage")?;
        self.inner.remove_image(image).await
    }
    async fn image_fs_info(&self) -> Result<Vec<api::FilesystemUsage>> {
        self.layer.fail("ImageFsInfo")?;
        let mut fs = self.inner.image_fs_info().await?;
        if let Some(mut r) = self.layer.bend() {
            for f in &mut fs {
                f.used_bytes = if r.chance(0.5) {
                    None
                } else {
                    Some(api::UInt64Value { value: r.next() })
                };
            }
        }
        Ok(fs)
    }
}
