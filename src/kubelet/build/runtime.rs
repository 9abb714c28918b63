//! The container runtime's builders: the runtime helper (what a container
//! needs from the kubelet: directories, DNS, hosts, environment, volumes,
//! cgroups), then the CRI runtime manager with its image manager and crash
//! back-off, the PLEG over it, image GC and the container GC policy.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::adapters::NodeResources;
use super::api::ApiObjects;
use super::{BuildError, NodeIps, node_ref, runtime_settings};
use crate::app::server::KubeletServer;
use crate::cm::{ContainerManager, PodContainerManager};
use crate::cri::RuntimeServices;
use crate::kubelet::container::{GcPolicy, PodCache, Runtime};
use crate::kubelet::events::EventRecorder;
use crate::kubelet::images::{
    CriImageFsStats, IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX, ImageGcManager, ImageGcPolicy,
    ImageManager, PullSettings, RuntimeImageService, TokenBucket,
};
use crate::kubelet::kuberuntime::manager::{CRASH_BACKOFF_INITIAL, CRASH_BACKOFF_MAX};
use crate::kubelet::kuberuntime::{
    KubeGenericRuntimeManager, RuntimeManagerConfig, RuntimeManagerDeps,
};
use crate::kubelet::network::dns::DnsConfigurer;
use crate::kubelet::pleg::{EventStream, GenericPleg, event_stream};
use crate::kubelet::pod_sync::PodVolumes;
use crate::kubelet::pod_workers::{PodEventRecorder, PodWorkers};
use crate::kubelet::prober::ProberManager;
use crate::kubelet::runtime_helper::{KubeletRuntimeHelper, RuntimeHelperConfig};
use crate::util::backoff::Backoff;
use crate::util::clock::Clock;
use crate::util::pod_dirs::PodDirs;

/// What the runtime helper is built from.
pub(super) struct HelperInputs<'a> {
    pub server: &'a KubeletServer,
    pub dirs: &'a PodDirs,
    pub node_ips: &'a [IpAddr],
    pub host_ips: &'a NodeIps,
    pub node_resources: &'a Arc<NodeResources>,
    pub node_hosts_file: PathBuf,
    pub dns: &'a DnsConfigurer,
    pub volumes: &'a Arc<dyn PodVolumes>,
    pub pod_container_manager: &'a Arc<dyn PodContainerManager>,
    pub recorder: &'a Arc<dyn PodEventRecorder>,
    /// Where events about the node go.
    pub node_events: &'a Arc<dyn EventRecorder>,
    pub node_name: &'a str,
    pub api: Option<&'a ApiObjects>,
}

/// The runtime helper.
pub(super) fn runtime_helper(i: HelperInputs<'_>) -> Arc<KubeletRuntimeHelper> {
    let c = &i.server.config;
    let resources = i.node_resources.clone();
    Arc::new(KubeletRuntimeHelper {
        config: RuntimeHelperConfig {
            root_dir: i.dirs.root_dir().to_path_buf(),
            cluster_domain: c.cluster_domain.clone(),
            node_ips: i.node_ips.to_vec(),
            host_ips: i.host_ips.strings(),
            node_allocatable: Arc::new(move || resources.api()),
            master_service_namespace: i.server.flags.master_service_namespace.clone(),
            node_hosts_file: i.node_hosts_file,
        },
        dns: i.dns.clone(),
        volumes: i.volumes.clone(),
        pod_container_manager: i.pod_container_manager.clone(),
        recorder: i.recorder.clone(),
        node_events: i.node_events.clone(),
        node_ref: node_ref(i.node_name),
        config_maps: i.api.map(|a| {
            a.objects.config_maps.clone() as Arc<dyn crate::kubelet::envvars::ConfigMapGetter>
        }),
        secrets: i
            .api
            .map(|a| a.objects.secrets.clone() as Arc<dyn crate::kubelet::envvars::SecretGetter>),
        services: i.api.map(|a| {
            let lister = a.services.clone();
            Arc::new(move || lister.snapshot()) as crate::kubelet::runtime_helper::ServicesFn
        }),
    })
}

/// What the runtime manager, the PLEG and image GC are built from.
pub(super) struct RuntimeInputs<'a> {
    pub server: &'a KubeletServer,
    pub dirs: &'a PodDirs,
    pub container_manager: &'a dyn ContainerManager,
    pub runtime_services: &'a RuntimeServices,
    pub helper: Arc<KubeletRuntimeHelper>,
    /// What runs (the pod workers' handle).
    pub pod_state: PodWorkers,
    pub prober: &'a ProberManager,
    pub events: &'a Arc<dyn EventRecorder>,
    pub pod_cache: &'a Arc<PodCache>,
    pub pod_logs_root: &'a Path,
    pub container_logs_dir: &'a Option<PathBuf>,
    pub node_name: &'a str,
    pub clock: &'a Arc<dyn Clock>,
}

/// The built runtime parts.
pub(super) struct RuntimeParts {
    pub runtime: Arc<dyn Runtime>,
    pub pleg: Arc<GenericPleg>,
    pub pleg_events: EventStream,
    pub image_gc: Arc<ImageGcManager>,
    pub container_gc_policy: GcPolicy,
    pub crash_backoff: Arc<Backoff>,
}

/// The runtime manager (asks the runtime for its version: build phase may
/// wait for it), the PLEG and image GC.
pub(super) async fn build(i: RuntimeInputs<'_>) -> Result<RuntimeParts, BuildError> {
    let (c, clock) = (&i.server.config, i.clock);
    let limiter = TokenBucket::new(
        f64::from(c.registry_pull_qps),
        c.registry_burst.max(0) as u32,
        clock.clone(),
    );
    let image_service = Arc::new(RuntimeImageService::new(
        i.runtime_services.image.clone(),
        limiter,
    ));
    let image_manager = Arc::new(ImageManager::new(
        image_service.clone(),
        i.events.clone(),
        Arc::new(Backoff::new(
            IMAGE_BACKOFF_INITIAL,
            IMAGE_BACKOFF_MAX,
            clock.clone(),
        )),
        PullSettings {
            serialize_image_pulls: c.serialize_image_pulls,
            max_parallel_image_pulls: None,
        },
    ));
    let crash_backoff = Arc::new(Backoff::new(
        CRASH_BACKOFF_INITIAL,
        CRASH_BACKOFF_MAX,
        clock.clone(),
    ));
    let manager = KubeGenericRuntimeManager::new(
        RuntimeManagerConfig {
            settings: runtime_settings(i.server, i.container_manager, i.dirs),
            cluster_domain: c.cluster_domain.clone(),
            runtime_class_handlers: None,
            pod_logs_root: i.pod_logs_root.to_path_buf(),
            legacy_log_symlinks_dir: i.container_logs_dir.clone(),
        },
        RuntimeManagerDeps {
            runtime_service: i.runtime_services.runtime.clone(),
            image_service: image_service.clone(),
            image_manager,
            helper: i.helper,
            pod_state: Arc::new(i.pod_state),
            liveness: i.prober.liveness_results(),
            startup: i.prober.startup_results(),
            recorder: i.events.clone(),
            crash_backoff: crash_backoff.clone(),
            clock: clock.clone(),
        },
    )
    .await
    .map_err(|e| BuildError::Runtime(e.to_string()))?;
    let runtime: Arc<dyn Runtime> = Arc::new(manager);
    let (pleg_tx, pleg_events) = event_stream();
    let pleg = Arc::new(GenericPleg::new(
        runtime.clone(),
        i.pod_cache.clone(),
        pleg_tx,
        clock.clone(),
    ));
    let image_gc = Arc::new(
        ImageGcManager::new(
            runtime.clone(),
            image_service,
            Arc::new(CriImageFsStats::new(i.runtime_services.image.clone())),
            i.events.clone(),
            node_ref(i.node_name),
            ImageGcPolicy {
                high_threshold_percent: c.image_gc_high_threshold_percent,
                low_threshold_percent: c.image_gc_low_threshold_percent,
                min_age: c.image_minimum_gc_age.to_std(),
            },
            i.server.flags.pod_infra_container_image.clone(),
            clock.clone(),
        )
        .map_err(|e| BuildError::ImageGc(e.to_string()))?,
    );
    let container_gc_policy = GcPolicy {
        min_age: i.server.flags.minimum_gc_age.to_std(),
        max_per_pod_container: i.server.flags.max_per_pod_container_count,
        max_containers: i.server.flags.max_container_count,
    };
    Ok(RuntimeParts {
        runtime,
        pleg,
        pleg_events,
        image_gc,
        container_gc_policy,
        crash_backoff,
    })
}
