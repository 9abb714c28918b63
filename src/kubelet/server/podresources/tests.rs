//! The services over fake providers: List per container with devices,
//! CPUs and memory; v1alpha1 devices only; GetAllocatableResources and its
//! gate; the per-NUMA device conversion.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tonic::Request;

use super::api::v1::pod_resources_lister_server::PodResourcesLister as V1Lister;
use super::api::v1::{ContainerDevices, ContainerMemory, NumaNode, TopologyInfo};
use super::api::v1alpha1::pod_resources_lister_server::PodResourcesLister as AlphaLister;
use super::api::{v1, v1alpha1};
use super::providers::container_devices;
use super::*;
use crate::cm::devicemanager::ResourceDeviceInstances;
use crate::cm::devicemanager::api as dp;

struct Fake {
    pods: Vec<Arc<Pod>>,
}

impl PodsProvider for Fake {
    fn get_pods(&self) -> Vec<Arc<Pod>> {
        self.pods.clone()
    }
}

impl DevicesProvider for Fake {
    fn update_allocated_devices(&self) {}
    fn get_devices(&self, pod_uid: &str, container: &str) -> Vec<ContainerDevices> {
        if pod_uid == "u1" && container == "c1" {
            vec![ContainerDevices {
                resource_name: "example.com/foo".into(),
                device_ids: vec!["d1".into()],
                topology: None,
            }]
        } else {
            Vec::new()
        }
    }
    fn get_allocatable_devices(&self) -> Vec<ContainerDevices> {
        self.get_devices("u1", "c1")
    }
}

impl CpusProvider for Fake {
    fn get_cpus(&self, pod_uid: &str, _: &str) -> Vec<i64> {
        if pod_uid == "u1" { vec![1] } else { Vec::new() }
    }
    fn get_allocatable_cpus(&self) -> Vec<i64> {
        vec![1, 2, 3]
    }
}

fn pod(uid: &str, name: &str, containers: &[&str]) -> Arc<Pod> {
    let cs: Vec<serde_json::Value> = containers
        .iter()
        .map(|c| serde_json::json!({"name": c}))
        .collect();
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"uid": uid, "name": name, "namespace": "ns"},
            "spec": {"containers": cs, "initContainers": [{"name": "init"}]},
        }))
        .unwrap(),
    )
}

fn providers(get_allocatable: bool) -> Providers {
    let fake = Arc::new(Fake {
        pods: vec![pod("u1", "a", &["c1", "c2"]), pod("u2", "b", &["c3"])],
    });
    Providers {
        pods: fake.clone(),
        devices: fake.clone(),
        cpus: fake,
        memory: Arc::new(NoMemory),
        get_allocatable,
    }
}

#[tokio::test]
async fn list_reports_every_app_container() {
    let s = V1Server(providers(true));
    let list = V1Lister::list(&s, Request::new(v1::ListPodResourcesRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.pod_resources.len(), 2);
    let a = &list.pod_resources[0];
    assert_eq!((a.name.as_str(), a.namespace.as_str()), ("a", "ns"));
    let names: Vec<&str> = a.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["c1", "c2"], "init containers are not listed");
    assert_eq!(a.containers[0].devices[0].device_ids, vec!["d1"]);
    assert_eq!(a.containers[0].cpu_ids, vec![1]);
    assert!(a.containers[0].memory.is_empty());
    assert!(list.pod_resources[1].containers[0].devices.is_empty());

    let alpha = AlphaLister::list(
        &V1alpha1Server(providers(true)),
        Request::new(v1alpha1::ListPodResourcesRequest {}),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(
        alpha.pod_resources[0].containers[0].devices,
        vec![v1alpha1::ContainerDevices {
            resource_name: "example.com/foo".into(),
            device_ids: vec!["d1".into()],
        }]
    );

    let alloc =
        V1Lister::get_allocatable_resources(&s, Request::new(v1::AllocatableResourcesRequest {}))
            .await
            .unwrap()
            .into_inner();
    assert_eq!(alloc.cpu_ids, vec![1, 2, 3]);
    assert_eq!(alloc.devices.len(), 1);
    assert_eq!(alloc.memory, Vec::<ContainerMemory>::new());

    let off = V1Lister::get_allocatable_resources(
        &V1Server(providers(false)),
        Request::new(v1::AllocatableResourcesRequest {}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        off.message(),
        "resource GetAllocatableResources unavailable"
    );
}

#[test]
fn devices_per_numa_node() {
    let topo = |ids: &[i64]| dp::TopologyInfo {
        nodes: ids.iter().map(|id| dp::NumaNode { id: *id }).collect(),
    };
    let devs: ResourceDeviceInstances = [(
        "r/x".to_string(),
        [
            (
                "a".to_string(),
                dp::Device {
                    topology: None,
                    ..Default::default()
                },
            ),
            (
                "b".to_string(),
                dp::Device {
                    topology: Some(topo(&[0, 1])),
                    ..Default::default()
                },
            ),
        ]
        .into(),
    )]
    .into();
    let out = container_devices(&devs);
    let one = |id: &str, node: Option<i64>| ContainerDevices {
        resource_name: "r/x".into(),
        device_ids: vec![id.into()],
        topology: node.map(|n| TopologyInfo {
            nodes: vec![NumaNode { id: n }],
        }),
    };
    assert_eq!(
        out,
        vec![one("a", None), one("b", Some(0)), one("b", Some(1))]
    );
}
