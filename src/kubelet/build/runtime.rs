//! The container runtime's builders: the runtime helper (what a container
//! needs from the kubelet: directories, DNS, hosts, environment, volumes,
//! cgroups), then the CRI runtime manager with its image manager (and the
//! node's registry credentials) and crash back-off, the PLEG over it, image
//! GC and the container GC policy.

use std::path::PathBuf;
use std::sync::Arc;

use super::adapters::NodeResources;
use super::api::ApiObjects;
use super::lifecycle::PodCore;
use super::node::NodeIps;
use super::{BuildError, Env, node_ref};
use crate::apis::config::server::KubeletServer;
use crate::cm::{ContainerManager, PodContainerManager};
use crate::features;
use crate::kubelet::container::{GcPolicy, Runtime};
use crate::kubelet::images::credentialprovider::{
    self, DockerKeyring, NodeKeyringSettings, PluginFlags,
};
use crate::kubelet::images::{
    CriImageFsStats, IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX, ImageGcManager, ImageGcPolicy,
    ImageManager, PullSettings, RuntimeImageService, TokenBucket,
};
use crate::kubelet::kuberuntime::manager::{CRASH_BACKOFF_INITIAL, CRASH_BACKOFF_MAX};
use crate::kubelet::kuberuntime::{
    KubeGenericRuntimeManager, RuntimeManagerConfig, RuntimeManagerDeps, RuntimeSettings,
};
use crate::kubelet::network::dns::DnsConfigurer;
use crate::kubelet::pleg::{EventStream, GenericPleg, event_stream};
use crate::kubelet::pod_sync::PodVolumes;
use crate::kubelet::pod_workers::PodEventRecorder;
use crate::kubelet::prober::ProberManager;
use crate::kubelet::runtime_helper::{KubeletRuntimeHelper, RuntimeHelperConfig};
use crate::util::backoff::Backoff;
use crate::util::pod_dirs::PodDirs;

/// What the runtime helper is built from.
pub(super) struct HelperInputs<'a> {
    pub env: &'a Env,
    pub host_ips: &'a NodeIps,
    pub node_resources: &'a Arc<NodeResources>,
    pub node_hosts_file: PathBuf,
    pub dns: &'a DnsConfigurer,
    pub volumes: &'a Arc<dyn PodVolumes>,
    pub pod_container_manager: &'a Arc<dyn PodContainerManager>,
    pub recorder: &'a Arc<dyn PodEventRecorder>,
    pub api: Option<&'a ApiObjects>,
}

/// The runtime helper.
pub(super) fn runtime_helper(i: HelperInputs<'_>) -> Arc<KubeletRuntimeHelper> {
    let env = i.env;
    let c = &env.server.config;
    let resources = i.node_resources.clone();
    Arc::new(KubeletRuntimeHelper {
        config: RuntimeHelperConfig {
            root_dir: env.dirs.root_dir().to_path_buf(),
            cluster_domain: c.cluster_domain.clone(),
            node_ips: env.node_ips.clone(),
            host_ips: i.host_ips.strings(),
            node_allocatable: Arc::new(move || resources.api()),
            master_service_namespace: env.server.flags.master_service_namespace.clone(),
            node_hosts_file: i.node_hosts_file,
        },
        dns: i.dns.clone(),
        volumes: i.volumes.clone(),
        pod_container_manager: i.pod_container_manager.clone(),
        recorder: i.recorder.clone(),
        node_events: env.events.clone(),
        node_ref: node_ref(&env.node_name),
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
        container_resources: Arc::new(crate::kubelet::runtime_helper::ContainerManagerResources(
            env.container_manager.clone(),
        )),
    })
}

/// The built runtime parts.
pub struct RuntimeParts {
    pub runtime: Arc<dyn Runtime>,
    /// The CRI runtime service itself (container logs, streaming).
    pub runtime_service: Arc<dyn crate::cri::RuntimeService>,
    pub pleg: Arc<GenericPleg>,
    pub pleg_events: EventStream,
    pub image_gc: Arc<ImageGcManager>,
    pub container_gc_policy: GcPolicy,
    pub crash_backoff: Arc<Backoff>,
}

/// The runtime manager (asks the runtime for its version: build phase may
/// wait for it), the PLEG and image GC.
pub(super) async fn build(
    env: &Env,
    core: &PodCore,
    prober: &ProberManager,
    helper: Arc<KubeletRuntimeHelper>,
) -> Result<RuntimeParts, BuildError> {
    let clock = &core.clock;
    let c = &env.server.config;
    let limiter = TokenBucket::new(
        f64::from(c.registry_pull_qps),
        c.registry_burst.max(0) as u32,
        clock.clone(),
    );
    let image_service = Arc::new(RuntimeImageService::new(
        env.runtime_services.image.clone(),
        limiter,
        node_keyring(&env.server, clock.clone()).await?,
    ));
    let image_manager = Arc::new(ImageManager::new(
        image_service.clone(),
        env.events.clone(),
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
            settings: runtime_settings(&env.server, env.container_manager.as_ref(), &env.dirs),
            cluster_domain: c.cluster_domain.clone(),
            runtime_class_handlers: None,
            pod_logs_root: env.pod_logs_root.clone(),
            legacy_log_symlinks_dir: env.container_logs_dir.clone(),
        },
        RuntimeManagerDeps {
            runtime_service: env.runtime_services.runtime.clone(),
            image_service: image_service.clone(),
            image_manager,
            helper,
            pod_state: Arc::new(core.pod_workers.clone()),
            liveness: prober.liveness_results(),
            startup: prober.startup_results(),
            recorder: env.events.clone(),
            crash_backoff: crash_backoff.clone(),
            clock: clock.clone(),
            lifecycle: env.container_manager.internal_container_lifecycle(),
        },
    )
    .await
    .map_err(|e| BuildError::Runtime(e.to_string()))?;
    let runtime: Arc<dyn Runtime> = Arc::new(manager);
    let (pleg_tx, pleg_events) = event_stream();
    let pleg = Arc::new(GenericPleg::new(
        runtime.clone(),
        core.pod_cache.clone(),
        pleg_tx,
        clock.clone(),
    ));
    let image_gc = Arc::new(
        ImageGcManager::new(
            runtime.clone(),
            image_service,
            Arc::new(CriImageFsStats::new(env.runtime_services.image.clone())),
            env.events.clone(),
            node_ref(&env.node_name),
            ImageGcPolicy {
                high_threshold_percent: c.image_gc_high_threshold_percent,
                low_threshold_percent: c.image_gc_low_threshold_percent,
                min_age: c.image_minimum_gc_age.to_std(),
            },
            env.server.flags.pod_infra_container_image.clone(),
            clock.clone(),
        )
        .map_err(|e| BuildError::ImageGc(e.to_string()))?,
    );
    let container_gc_policy = GcPolicy {
        min_age: env.server.flags.minimum_gc_age.to_std(),
        max_per_pod_container: env.server.flags.max_per_pod_container_count,
        max_containers: env.server.flags.max_container_count,
    };
    let pleg_health = pleg.clone();
    core.runtime_state.add_health_check(
        "PLEG",
        Arc::new(move || pleg_health.healthy().map_err(|e| e.to_string())),
    );
    Ok(RuntimeParts {
        runtime,
        runtime_service: env.runtime_services.runtime.clone(),
        pleg,
        pleg_events,
        image_gc,
        container_gc_policy,
        crash_backoff,
    })
}

/// The node's registry credentials: its docker config files, and the
/// credential provider plugins when a flag names them and the
/// KubeletCredentialProviders gate is on (ignored with a log line when it
/// is off).
async fn node_keyring(
    server: &KubeletServer,
    clock: Arc<dyn crate::util::clock::Clock>,
) -> Result<Arc<dyn DockerKeyring>, BuildError> {
    let flags = &server.flags;
    let (config_file, bin_dir) = (
        &flags.image_credential_provider_config,
        &flags.image_credential_provider_bin_dir,
    );
    let named = !config_file.is_empty() || !bin_dir.is_empty();
    let enabled = server
        .feature_gate
        .enabled(features::KUBELET_CREDENTIAL_PROVIDERS);
    if named && !enabled {
        tracing::info!(
            feature_gate = "KubeletCredentialProviders",
            "Flags --image-credential-provider-config or --image-credential-provider-bin-dir were set but the feature gate was disabled, these flags will be ignored"
        );
    }
    let keyring = credentialprovider::node_keyring(NodeKeyringSettings {
        root_dir: PathBuf::from(&flags.root_directory),
        home_dir: std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default(),
        plugins: (named && enabled).then(|| PluginFlags {
            config_file: PathBuf::from(config_file),
            bin_dir: PathBuf::from(bin_dir),
        }),
        clock,
    })
    .await?;
    crate::vlog!(2, providers = ?keyring.names(), "node credential providers");
    Ok(Arc::new(keyring))
}

/// The runtime manager's settings from the configuration and the host.
fn runtime_settings(
    server: &KubeletServer,
    cm: &dyn ContainerManager,
    dirs: &PodDirs,
) -> RuntimeSettings {
    let c = &server.config;
    let gate = &server.feature_gate;
    let period_us = if gate.enabled(features::CPU_CFS_QUOTA_PERIOD) {
        c.cpu_cfs_quota_period.to_std().as_micros() as i64
    } else {
        crate::kubelet::kuberuntime::settings::DEFAULT_CPU_CFS_QUOTA_PERIOD_US
    };
    let machine = cm.machine_info();
    RuntimeSettings {
        cpu_cfs_quota: c.cpu_cfs_quota,
        cpu_cfs_quota_period_us: period_us,
        seccomp_profile_root: dirs.root_dir().join("seccomp"),
        seccomp_default: server.seccomp_default() && gate.enabled(features::SECCOMP_DEFAULT),
        memory_capacity: machine.memory_capacity as i64,
        hugepage_sizes: crate::cm::resources::host_hugepage_sizes(std::path::Path::new(
            "/sys/kernel/mm/hugepages",
        )),
        selinux_enabled: std::path::Path::new("/sys/fs/selinux/enforce").exists(),
    }
}
