//! The kubelet's side of container creation for the runtime manager (Go's
//! RuntimeHelper on the Kubelet: GenerateRunContainerOptions, GetPodDNS,
//! GetPodCgroupParent, GetPodDir, GetExtraSupplementalGroupsForPod), over
//! the DNS configurer, the environment builder, the volume manager and the
//! pod container manager.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::cm::PodContainerManager;
use crate::cri::api::DnsConfig;
use crate::kubelet::container::{RunContainerOptions, format_pod};
use crate::kubelet::envvars::{
    ConfigMapGetter, EnvContext, SecretGetter, make_environment_variables,
};
use crate::kubelet::events::EventRecorder;
use crate::kubelet::kuberuntime::{
    HelperError, RunOptionsParams, RuntimeHelper, generate_run_container_options,
};
use crate::kubelet::network::dns::{DnsConfigurer, EventTarget};
use crate::kubelet::pod_sync::PodVolumes;
use crate::kubelet::pod_workers::{EventType, PodEventRecorder};

/// The node's allocatable resources as they are now.
pub type AllocatableFn = Arc<dyn Fn() -> BTreeMap<String, ApiQuantity> + Send + Sync>;

/// Node-wide inputs of container options.
#[derive(Clone)]
pub struct RuntimeHelperConfig {
    /// `--root-dir`.
    pub root_dir: PathBuf,
    /// `clusterDomain`.
    pub cluster_domain: String,
    /// `--node-ip` values.
    pub node_ips: Vec<IpAddr>,
    /// The node's host IPs now (the Node's addresses; none without an API
    /// server).
    pub host_ips: Arc<dyn Fn() -> Vec<String> + Send + Sync>,
    /// Node allocatable now, for resourceFieldRef defaults.
    pub node_allocatable: AllocatableFn,
    /// `--master-service-namespace`.
    pub master_service_namespace: String,
    /// The node's hosts file, copied for host-network pods.
    pub node_hosts_file: PathBuf,
}

/// The RuntimeHelper the runtime manager calls.
pub struct KubeletRuntimeHelper {
    pub config: RuntimeHelperConfig,
    pub dns: DnsConfigurer,
    pub volumes: Arc<dyn PodVolumes>,
    pub pod_container_manager: Arc<dyn PodContainerManager>,
    pub recorder: Arc<dyn PodEventRecorder>,
    /// Events about the node (DNS configuration problems that are the
    /// node's, not the pod's: Go records them on the Node).
    pub node_events: Arc<dyn EventRecorder>,
    /// The node's object reference.
    pub node_ref: ObjectReference,
    /// ConfigMaps for the environment (`None` without an API server).
    pub config_maps: Option<Arc<dyn ConfigMapGetter>>,
    /// Secrets for the environment (`None` without an API server).
    pub secrets: Option<Arc<dyn SecretGetter>>,
    /// The cluster's services (whether listed yet, and all of them); `None`
    /// without an API server.
    pub services: Option<ServicesFn>,
    /// What the resource managers give containers (device plugin devices,
    /// mounts, envs, annotations: Go's GetResources).
    pub container_resources: Arc<dyn ContainerResources>,
}

/// The container manager's part of a container's run options.
#[async_trait]
pub trait ContainerResources: Send + Sync {
    async fn get_resources(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<RunContainerOptions, HelperError>;
}

/// No resource managers: nothing to add.
#[derive(Debug, Default)]
pub struct NoContainerResources;

#[async_trait]
impl ContainerResources for NoContainerResources {
    async fn get_resources(
        &self,
        _: &Pod,
        _: &Container,
    ) -> Result<RunContainerOptions, HelperError> {
        Ok(RunContainerOptions::default())
    }
}

/// The container manager's device plugin options as run options.
pub struct ContainerManagerResources(pub Arc<dyn crate::cm::ContainerManager>);

#[async_trait]
impl ContainerResources for ContainerManagerResources {
    async fn get_resources(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<RunContainerOptions, HelperError> {
        use crate::kubelet::container::{Annotation, DeviceInfo, EnvVar, Mount};
        let d = self
            .0
            .get_resources(pod, container)
            .await
            .map_err(|e| HelperError::new(e.to_string()))?;
        Ok(RunContainerOptions {
            envs: d.envs.into_iter().map(|(k, v)| EnvVar::new(k, v)).collect(),
            mounts: d
                .mounts
                .into_iter()
                .map(|m| Mount {
                    name: m.container_path.clone(),
                    container_path: m.container_path,
                    host_path: m.host_path,
                    read_only: m.read_only,
                    selinux_relabel: false,
                    propagation: Default::default(),
                    sub_path: None,
                })
                .collect(),
            devices: d
                .devices
                .into_iter()
                .map(|x| DeviceInfo {
                    path_on_host: x.host_path,
                    path_in_container: x.container_path,
                    permissions: x.permissions,
                })
                .collect(),
            annotations: d
                .annotations
                .into_iter()
                .map(|(name, value)| Annotation { name, value })
                .collect(),
            ..Default::default()
        })
    }
}

/// The services the kubelet knows: (listed at least once, services).
pub type ServicesFn = Arc<dyn Fn() -> (bool, Vec<Service>) + Send + Sync>;

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

impl KubeletRuntimeHelper {
    fn pod_dir(&self, uid: &str) -> PathBuf {
        self.config.root_dir.join("pods").join(uid)
    }

    async fn node_hosts(&self, pod: &Pod) -> Option<String> {
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        if !host_network {
            return None;
        }
        tokio::fs::read_to_string(&self.config.node_hosts_file)
            .await
            .ok()
    }
}

#[async_trait]
impl RuntimeHelper for KubeletRuntimeHelper {
    async fn generate_run_container_options(
        &self,
        pod: &Pod,
        container: &Container,
        pod_ip: &str,
        pod_ips: &[String],
    ) -> Result<RunContainerOptions, HelperError> {
        // Allocated at admission; only read here (Go's GetResources).
        let base = self
            .container_resources
            .get_resources(pod, container)
            .await?;
        let allocatable = (self.config.node_allocatable)();
        let host_ips = (self.config.host_ips)();
        // Without an API server there is no service list and no service
        // variables (Go has no service lister then).
        let (services_synced, services) = match &self.services {
            Some(f) => f(),
            None => (true, Vec::new()),
        };
        let ctx = EnvContext {
            pod_ip,
            pod_ips,
            node_ips: &self.config.node_ips,
            host_ips: &host_ips,
            node_allocatable: &allocatable,
            services: &services,
            services_synced,
            master_service_namespace: &self.config.master_service_namespace,
            config_maps: self.config_maps.as_deref(),
            secrets: self.secrets.as_deref(),
        };
        let env = make_environment_variables(pod, container, &ctx)
            .await
            .map_err(|e| HelperError::new(e.to_string()))?;
        for e in &env.events {
            self.recorder
                .pod_event(pod, EventType::Warning, e.reason, &e.message);
        }
        let volumes = self.volumes.get_mounted_volumes_for_pod(uid(pod));
        let pod_dir = self.pod_dir(uid(pod));
        let node_hosts = self.node_hosts(pod).await;
        let options = generate_run_container_options(
            pod,
            container,
            RunOptionsParams {
                pod_dir: &pod_dir,
                pod_ips,
                cluster_domain: &self.config.cluster_domain,
                volumes: &volumes,
                base,
                block_devices: Vec::new(),
                envs: env.envs,
                node_hosts: node_hosts.as_deref(),
            },
        )
        .map_err(|e| HelperError::new(e.to_string()))?;
        Ok(options)
    }

    async fn get_pod_dns(&self, pod: &Pod) -> Result<DnsConfig, HelperError> {
        let dns = self.dns.clone();
        let host = tokio::task::spawn_blocking(move || dns.host_dns_config())
            .await
            .map_err(|e| HelperError::new(e.to_string()))?
            .map_err(|e| HelperError::new(e.to_string()))?;
        let pod_dns = self.dns.pod_dns(pod, &host);
        for e in &pod_dns.events {
            match e.target {
                EventTarget::Pod => {
                    self.recorder
                        .pod_event(pod, EventType::Warning, e.reason, &e.message)
                }
                EventTarget::Node => {
                    self.node_events
                        .event(&self.node_ref, EventType::Warning, e.reason, &e.message)
                }
            }
        }
        Ok(pod_dns.config)
    }

    fn get_pod_cgroup_parent(&self, pod: &Pod) -> String {
        match self.pod_container_manager.get_pod_cgroup_parent(pod) {
            Ok(parent) => parent,
            Err(e) => {
                tracing::error!(pod = %format_pod(pod), err = %e, "Failed to get the pod's cgroup parent");
                String::new()
            }
        }
    }

    fn get_pod_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid)
    }

    fn get_extra_supplemental_groups_for_pod(&self, pod: &Pod) -> Vec<i64> {
        self.volumes.get_extra_supplemental_groups_for_pod(pod)
    }
}
