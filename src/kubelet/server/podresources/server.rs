//! The v1 and v1alpha1 PodResourcesLister services.

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

/// The v1 service.
#[derive(Clone)]
pub struct V1Server(pub Providers);

#[tonic::async_trait]
impl v1::pod_resources_lister_server::PodResourcesLister for V1Server {
    async fn list(
        &self,
        _: Request<v1::ListPodResourcesRequest>,
    ) -> Result<Response<v1::ListPodResourcesResponse>, Status> {
        let p = &self.0;
        let pods = p.pods.get_pods();
        p.devices.update_allocated_devices();
        let pod_resources = pods
            .iter()
            .map(|pod| {
                let uid = pod.metadata.uid.as_deref().unwrap_or("");
                v1::PodResources {
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    containers: pod
                        .spec
                        .iter()
                        .flat_map(|s| &s.containers)
                        .map(|c| v1::ContainerResources {
                            name: c.name.clone(),
                            devices: p.devices.get_devices(uid, &c.name),
                            cpu_ids: p.cpus.get_cpus(uid, &c.name),
                            memory: p.memory.get_memory(uid, &c.name),
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Response::new(v1::ListPodResourcesResponse {
            pod_resources,
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<v1::AllocatableResourcesRequest>,
    ) -> Result<Response<v1::AllocatableResourcesResponse>, Status> {
        let p = &self.0;
        if !p.get_allocatable {
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
        let p = &self.0;
        let pods = p.pods.get_pods();
        p.devices.update_allocated_devices();
        let pod_resources = pods
            .iter()
            .map(|pod| {
                let uid = pod.metadata.uid.as_deref().unwrap_or("");
                v1alpha1::PodResources {
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    containers: pod
                        .spec
                        .iter()
                        .flat_map(|s| &s.containers)
                        .map(|c| v1alpha1::ContainerResources {
                            name: c.name.clone(),
                            devices: p
                                .devices
                                .get_devices(uid, &c.name)
                                .into_iter()
                                .map(|d| v1alpha1::ContainerDevices {
                                    resource_name: d.resource_name,
                                    device_ids: d.device_ids,
                                })
                                .collect(),
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Response::new(v1alpha1::ListPodResourcesResponse {
            pod_resources,
        }))
    }
}
