//! The v1 and v1alpha1 PodResourcesLister services.

use crate::metrics::kubelet_admission::{PodResourcesCount, pod_resources_inc};
use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::api::{v1, v1alpha1};
use super::providers::{CpusProvider, DevicesProvider, MemoryProvider, PodsProvider};

/// What both versions read.
#[derive(Clone)]
pub struct Providers {
    pub pods: Arc<dyn PodsProvider>,
    pub devices: Arc<dyn DevicesProvider>,
    pub cpus: Arc<dyn CpusProvider>,
    pub memory: Arc<dyn MemoryProvider>,
    /// KubeletPodResourcesGetAllocatable: GetAllocatableResources answers.
    pub get_allocatable: bool,
}

/// One entry per pod the kubelet runs, with one per app container (both
/// versions' List); the devices of pods that are gone are freed first, as
/// Go does after taking the pods.
fn per_container<P, C>(
    p: &Providers,
    pod: impl Fn(String, String, Vec<C>) -> P,
    container: impl Fn(&str, &str) -> C,
) -> Vec<P> {
    let pods = p.pods.get_pods();
    p.devices.update_allocated_devices();
    pods.iter()
        .map(|x| {
            let uid = x.metadata.uid.as_deref().unwrap_or("");
            let containers = x
                .spec
                .iter()
                .flat_map(|s| &s.containers)
                .map(|c| container(uid, &c.name))
                .collect();
            pod(
                x.metadata.name.clone().unwrap_or_default(),
                x.metadata.namespace.clone().unwrap_or_default(),
                containers,
            )
        })
        .collect()
}

/// The v1 service.
#[derive(Clone)]
pub struct V1Server(pub Providers);

#[tonic::async_trait]
impl v1::pod_resources_lister_server::PodResourcesLister for V1Server {
    async fn list(
        &self,
        _: Request<v1::ListPodResourcesRequest>,
    ) -> Result<Response<v1::ListPodResourcesResponse>, Status> {
        pod_resources_inc(PodResourcesCount::Requests, "v1");
        pod_resources_inc(PodResourcesCount::List, "v1");
        let p = &self.0;
        let pod_resources = per_container(
            p,
            |name, namespace, containers| v1::PodResources {
                name,
                namespace,
                containers,
            },
            |uid, c| v1::ContainerResources {
                name: c.to_string(),
                devices: p.devices.get_devices(uid, c),
                cpu_ids: p.cpus.get_cpus(uid, c),
                memory: p.memory.get_memory(uid, c),
            },
        );
        Ok(Response::new(v1::ListPodResourcesResponse {
            pod_resources,
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<v1::AllocatableResourcesRequest>,
    ) -> Result<Response<v1::AllocatableResourcesResponse>, Status> {
        pod_resources_inc(PodResourcesCount::Requests, "v1");
        pod_resources_inc(PodResourcesCount::GetAllocatable, "v1");
        let p = &self.0;
        if !p.get_allocatable {
            pod_resources_inc(PodResourcesCount::GetAllocatableErrors, "v1");
            return Err(Status::unknown(
                "resource GetAllocatableResources unavailable",
            ));
        }
        Ok(Response::new(v1::AllocatableResourcesResponse {
            devices: p.devices.get_allocatable_devices(),
            cpu_ids: p.cpus.get_allocatable_cpus(),
            memory: p.memory.get_allocatable_memory(),
        }))
    }
}

/// The v1alpha1 service (devices only).
#[derive(Clone)]
pub struct V1alpha1Server(pub Providers);

#[tonic::async_trait]
impl v1alpha1::pod_resources_lister_server::PodResourcesLister for V1alpha1Server {
    async fn list(
        &self,
        _: Request<v1alpha1::ListPodResourcesRequest>,
    ) -> Result<Response<v1alpha1::ListPodResourcesResponse>, Status> {
        pod_resources_inc(PodResourcesCount::Requests, "v1alpha1");
        let p = &self.0;
        let pod_resources = per_container(
            p,
            |name, namespace, containers| v1alpha1::PodResources {
                name,
                namespace,
                containers,
            },
            |uid, c| v1alpha1::ContainerResources {
                name: c.to_string(),
                devices: p
                    .devices
                    .get_devices(uid, c)
                    .into_iter()
                    .map(|d| v1alpha1::ContainerDevices {
                        resource_name: d.resource_name,
                        device_ids: d.device_ids,
                    })
                    .collect(),
            },
        );
        Ok(Response::new(v1alpha1::ListPodResourcesResponse {
            pod_resources,
        }))
    }
}
