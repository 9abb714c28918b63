//! Unit tests: the checkpoint against files real kubelets wrote, the
//! topology hints (cases of Go's topology_hints_test.go), device choice
//! with init container reuse and NUMA affinity, capacity over an
//! endpoint's grace period, registration checks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::api::{
    ContainerAllocateResponse, Device, HEALTHY, Mount, NumaNode, RegisterRequest, TopologyInfo,
};
use super::checkpoint::{DeviceCheckpoint, DevicesPerNuma};
use super::endpoint::{ENDPOINT_STOP_GRACE_PERIOD, Endpoint};
use super::*;
use crate::cm::topologymanager::{AffinityStore, BitMask, TopologyHint};
use crate::util::clock::RealClock;

fn manager(dir: &std::path::Path) -> Arc<DeviceManager> {
    Arc::new(DeviceManager::new(
        dir.to_path_buf(),
        vec![0, 1],
        Arc::new(AffinityStore::default()),
        Arc::new(RealClock),
    ))
}

fn dev(id: &str, numa: Option<i64>) -> Device {
    Device {
        id: id.into(),
        health: HEALTHY.into(),
        topology: numa.map(|n| TopologyInfo {
            nodes: vec![NumaNode { id: n }],
        }),
    }
}

/// A pod with app containers (name, [(resource, count)]) and init containers.
fn pod(uid: &str, init: &[(&str, &[(&str, i64)])], app: &[(&str, &[(&str, i64)])]) -> Pod {
    let containers = |list: &[(&str, &[(&str, i64)])]| -> Vec<serde_json::Value> {
        list.iter()
            .map(|(name, limits)| {
                let l: serde_json::Map<String, serde_json::Value> = limits
                    .iter()
                    .map(|(r, n)| (r.to_string(), serde_json::json!(n.to_string())))
                    .collect();
                serde_json::json!({"name": name, "resources": {"limits": l}})
            })
            .collect()
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"uid": uid, "name": "p", "namespace": "default"},
        "spec": {"initContainers": containers(init), "containers": containers(app)},
    }))
    .expect("pod")
}

fn set_allocated(m: &DeviceManager, allocated: &[(&str, &str, &str, &[&str])]) {
    let mut st = m.lock();
    for (p, c, r, devs) in allocated {
        let ids: DevicesPerNuma = [(-1, devs.iter().map(|d| d.to_string()).collect())].into();
        st.pod_devices
            .insert(p, c, r, ids, ContainerAllocateResponse::default());
    }
    st.allocated = st.pod_devices.devices();
}

fn mask(bits: &[u32]) -> BitMask {
    BitMask::of(bits)
}

fn sorted(mut hints: Vec<TopologyHint>) -> Vec<TopologyHint> {
    hints.sort_by(|a, b| {
        if a.less_than(b) {
            std::cmp::Ordering::Less
        } else if b.less_than(a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    hints
}

/// Files written by real kubelets (a node's checkpoint before any pod, and
/// one with an allocation): they load, verify, and marshal back byte for
/// byte; the allocation's response decodes.
#[test]
fn checkpoint_go_vectors_round_trip() {
    let vectors = [
        r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"nvidia.com/gpu":["GPU-0650a168-e770-3ea8-8ac3-8a1d419763e0"]}},"Checksum":3952659280}"#,
        r#"{"Data":{"PodDeviceEntries":[{"PodUID":"bf52b2cd-b611-4e79-86b1-280b283185c3","ContainerName":"check","ResourceName":"nvidia.com/gpu","DeviceIDs":{"-1":["tegra"]},"AllocResp":"Ch8KFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSBXRlZ3Jh"}],"RegisteredDevices":{"nvidia.com/gpu":["tegra"]}},"Checksum":3660592824}"#,
    ];
    for v in vectors {
        let mut cp = DeviceCheckpoint::unmarshal(v.as_bytes()).expect(v);
        assert_eq!(String::from_utf8(cp.marshal().unwrap()).unwrap(), v);
    }
    let (entries, registered) = DeviceCheckpoint::unmarshal(vectors[1].as_bytes())
        .unwrap()
        .into_parts();
    assert_eq!(registered["nvidia.com/gpu"], vec!["tegra".to_string()]);
    let mut pd = pod_devices::PodDevices::default();
    pd.from_checkpoint_data(entries);
    let opts = pd
        .device_run_container_options("bf52b2cd-b611-4e79-86b1-280b283185c3", "check")
        .expect("entry");
    assert_eq!(
        opts.envs,
        vec![("NVIDIA_VISIBLE_DEVICES".to_string(), "tegra".to_string())]
    );
    // Our own marshalling is what Go verifies: a fresh checkpoint with the
    // same data gets the same checksum.
    let mut ours = DeviceCheckpoint::new(
        pd.to_checkpoint_data(),
        [("nvidia.com/gpu".to_string(), vec!["tegra".to_string()])].into(),
    );
    assert_eq!(
        String::from_utf8(ours.marshal().unwrap()).unwrap(),
        vectors[1]
    );
}

#[test]
fn checkpoint_corruption_and_spew_text() {
    let bad = r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":1}"#;
    assert!(matches!(
        DeviceCheckpoint::unmarshal(bad.as_bytes()),
        Err(DeviceManagerError::CorruptCheckpoint)
    ));
    assert!(matches!(
        DeviceCheckpoint::unmarshal(b"{not json"),
        Err(DeviceManagerError::ParseCheckpoint(_))
    ));
    let cp = DeviceCheckpoint::new(
        vec![checkpoint::PodDevicesEntry {
            pod_uid: "u".into(),
            container_name: "c".into(),
            resource_name: "r/x".into(),
            device_ids: Some([(0, vec!["a".into(), "b".into()]), (-1, vec![])].into()),
            alloc_resp: Some(vec![10, 0]),
        }],
        [("r/x".to_string(), Vec::new())].into(),
    );
    assert_eq!(
        cp.data.spew(),
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)u ContainerName:(string)c ResourceName:(string)r/x DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[] 0:[a b]] AllocResp:([]uint8)[10 0]}] RegisteredDevices:(map[string][]string)map[r/x:[]]}"
    );
    // NUMA keys in Go's JSON order (their text sorted).
    let cp = DeviceCheckpoint::new(
        vec![checkpoint::PodDevicesEntry {
            device_ids: Some([(2, vec!["a".into()]), (10, vec!["b".into()])].into()),
            ..Default::default()
        }],
        BTreeMap::new(),
    );
    let json = serde_json::to_string(&cp).unwrap();
    assert!(
        json.contains(r#""DeviceIDs":{"10":["b"],"2":["a"]}"#),
        "{json}"
    );
}

/// A file in the v1 layout (device ids as a list, Go's v1 checksum: the
/// spew text with the v1 type names printed as the current ones) loads,
/// its devices on NUMA node 0; a wrong checksum is refused.
#[test]
fn v1_checkpoint_is_read_and_converted() {
    use super::checkpoint::{CheckpointDataV1, PodDevicesEntryV1};
    let data = CheckpointDataV1 {
        pod_device_entries: Some(vec![PodDevicesEntryV1 {
            pod_uid: "u".into(),
            container_name: "c".into(),
            resource_name: "example.com/foo".into(),
            device_ids: Some(vec!["d1".into()]),
            alloc_resp: Some(Vec::new()),
        }]),
        registered_devices: Some([("example.com/foo".to_string(), Some(vec!["d1".into()]))].into()),
    };
    let file = |checksum: u64| {
        format!(
            r#"{{"Data":{},"Checksum":{checksum}}}"#,
            serde_json::to_string(&data).unwrap()
        )
    };
    let text = file(data.checksum());
    assert!(text.contains(r#""DeviceIDs":["d1"]"#), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    std::fs::write(m.checkpoint_path(), &text).unwrap();
    m.read_checkpoint().unwrap();
    let got = m.lock().pod_devices.to_checkpoint_data();
    assert_eq!(
        got[0].device_ids,
        Some([(0, vec!["d1".to_string()])].into())
    );
    assert!(DeviceCheckpoint::unmarshal_v1(file(data.checksum() + 1).as_bytes()).is_err());
}

/// Allocations and registered resources survive a restart: the resource
/// comes back with a stopped endpoint, at zero, until its plugin
/// registers again or the grace period ends.
#[tokio::test(start_paused = true)]
async fn checkpoint_survives_restart_and_grace_period_ends() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.apply_devices("example.com/foo", vec![dev("d1", None), dev("d2", None)]);
    {
        let mut st = m.lock();
        st.pod_devices.insert(
            "pod1",
            "c",
            "example.com/foo",
            [(-1, vec!["d1".to_string()])].into(),
            ContainerAllocateResponse {
                envs: [("FOO_DEVICE".to_string(), "d1".to_string())].into(),
                mounts: vec![Mount {
                    container_path: "/dev/foo".into(),
                    host_path: "/tmp/foo".into(),
                    read_only: true,
                }],
                ..Default::default()
            },
        );
    }
    m.write_checkpoint().unwrap();

    let again = manager(dir.path());
    again.read_checkpoint().unwrap();
    assert_eq!(
        again.container_devices("pod1", "c", "example.com/foo"),
        Some(BTreeSet::from(["d1".to_string()]))
    );
    assert_eq!(
        again.allocated_devices()["example.com/foo"],
        BTreeSet::from(["d1".to_string()])
    );
    let opts = again
        .lock()
        .pod_devices
        .device_run_container_options("pod1", "c")
        .unwrap();
    assert_eq!(opts.mounts[0].host_path, "/tmp/foo");
    let cap = again.get_capacity();
    assert_eq!(cap.capacity["example.com/foo"].value(), 0);
    assert_eq!(cap.allocatable["example.com/foo"].value(), 0);
    assert!(cap.removed.is_empty());
    // Admission still counts the allocated device.
    assert_eq!(again.admission_allocatable()["example.com/foo"].value(), 1);
    tokio::time::advance(ENDPOINT_STOP_GRACE_PERIOD + Duration::from_secs(1)).await;
    let cap = again.get_capacity();
    assert!(cap.capacity.is_empty());
    assert_eq!(cap.removed, vec!["example.com/foo".to_string()]);

    // A corrupt file is refused (start logs and goes on with nothing).
    std::fs::write(again.checkpoint_path(), b"{}").unwrap();
    assert!(manager(dir.path()).read_checkpoint().is_err());
}

/// A plugin whose stream ended: capacity keeps its devices, allocatable
/// drops to zero, and after the grace period the resource is removed.
#[tokio::test(start_paused = true)]
async fn vanished_endpoint_keeps_capacity_for_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    let ep = Arc::new(Endpoint::stopped("example.com/foo", Arc::new(RealClock)));
    m.register_endpoint("example.com/foo", None, ep.clone());
    m.apply_devices(
        "example.com/foo",
        vec![dev("d1", None), dev("d2", None), {
            let mut d = dev("d3", None);
            d.health = "Unhealthy".into();
            d
        }],
    );
    let cap = m.get_capacity();
    assert_eq!(cap.capacity["example.com/foo"].value(), 3);
    assert_eq!(cap.allocatable["example.com/foo"].value(), 2);
    m.endpoint_ended("example.com/foo", &ep);
    let cap = m.get_capacity();
    assert_eq!(cap.capacity["example.com/foo"].value(), 3);
    assert_eq!(cap.allocatable["example.com/foo"].value(), 0);
    tokio::time::advance(ENDPOINT_STOP_GRACE_PERIOD - Duration::from_secs(1)).await;
    assert!(m.get_capacity().removed.is_empty());
    tokio::time::advance(Duration::from_secs(2)).await;
    let cap = m.get_capacity();
    assert_eq!(cap.removed, vec!["example.com/foo".to_string()]);
    assert!(cap.allocatable.is_empty());
    // A replaced endpoint ending does not touch the new one's devices.
    let new = Arc::new(Endpoint::stopped("example.com/bar", Arc::new(RealClock)));
    let old = Arc::new(Endpoint::stopped("example.com/bar", Arc::new(RealClock)));
    m.register_endpoint("example.com/bar", None, new);
    m.apply_devices("example.com/bar", vec![dev("b1", None)]);
    m.endpoint_ended("example.com/bar", &old);
    assert_eq!(m.healthy_devices()["example.com/bar"].len(), 1);
}

#[test]
fn registration_is_validated() {
    let req = |version: &str, name: &str| RegisterRequest {
        version: version.into(),
        endpoint: "p.sock".into(),
        resource_name: name.into(),
        options: None,
    };
    let cases: [(RegisterRequest, Option<&str>); 7] = [
        (req("v1beta1", "example.com/foo"), None),
        (
            req("v1alpha", "example.com/foo"),
            Some(
                "requested API version \"v1alpha\" is not supported by kubelet. Supported version is [\"v1beta1\"]",
            ),
        ),
        (
            req("v1beta1", "foo"),
            Some("the ResourceName \"foo\" is invalid"),
        ),
        (
            req("v1beta1", "kubernetes.io/foo"),
            Some("the ResourceName \"kubernetes.io/foo\" is invalid"),
        ),
        (
            req("v1beta1", "requests.example.com/foo"),
            Some("the ResourceName \"requests.example.com/foo\" is invalid"),
        ),
        (
            req("v1beta1", "example.com/"),
            Some("the ResourceName \"example.com/\" is invalid"),
        ),
        (
            req("v1beta1", "example.com/foo bar"),
            Some("the ResourceName \"example.com/foo bar\" is invalid"),
        ),
    ];
    for (r, want) in cases {
        let got = validate_registration(&r).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), want, "{r:?}");
    }
}

struct HintCase {
    description: &'static str,
    limits: &'static [(&'static str, i64)],
    devices: Vec<(&'static str, Vec<Device>)>,
    allocated: &'static [(
        &'static str,
        &'static str,
        &'static str,
        &'static [&'static str],
    )],
    expected: Vec<(&'static str, Option<Vec<TopologyHint>>)>,
}

#[test]
fn container_topology_hints_as_go() {
    let h = |bits: &[u32], preferred| TopologyHint::new(mask(bits), preferred);
    let cases = vec![
        HintCase {
            description: "Single Request, no alignment",
            limits: &[("testdevice", 1)],
            devices: vec![("testdevice", vec![dev("Dev1", None), dev("Dev2", None)])],
            allocated: &[],
            expected: vec![("testdevice", None)],
        },
        HintCase {
            description: "Single Request, only one with alignment",
            limits: &[("testdevice", 1)],
            devices: vec![("testdevice", vec![dev("Dev1", None), dev("Dev2", Some(1))])],
            allocated: &[],
            expected: vec![("testdevice", Some(vec![h(&[1], true), h(&[0, 1], false)]))],
        },
        HintCase {
            description: "Single Request, one device per socket",
            limits: &[("testdevice", 1)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", Some(0)), dev("Dev2", Some(1))],
            )],
            allocated: &[],
            expected: vec![(
                "testdevice",
                Some(vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
            )],
        },
        HintCase {
            description: "Request for 2, one device per socket",
            limits: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", Some(0)), dev("Dev2", Some(1))],
            )],
            allocated: &[],
            expected: vec![("testdevice", Some(vec![h(&[0, 1], true)]))],
        },
        HintCase {
            description: "Request for 2, 2 devices per socket",
            limits: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![
                    dev("Dev1", Some(0)),
                    dev("Dev2", Some(1)),
                    dev("Dev3", Some(0)),
                    dev("Dev4", Some(1)),
                ],
            )],
            allocated: &[],
            expected: vec![(
                "testdevice",
                Some(vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
            )],
        },
        HintCase {
            description: "Request for 2, optimal on 1 NUMA node, forced cross-NUMA",
            limits: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![
                    dev("Dev1", Some(0)),
                    dev("Dev2", Some(1)),
                    dev("Dev3", Some(0)),
                    dev("Dev4", Some(1)),
                ],
            )],
            allocated: &[(
                "fakePod",
                "fakeOtherContainer",
                "testdevice",
                &["Dev1", "Dev2"],
            )],
            expected: vec![("testdevice", Some(vec![h(&[0, 1], false)]))],
        },
        HintCase {
            description: "2 device types, mixed configuration",
            limits: &[("testdevice1", 2), ("testdevice2", 1)],
            devices: vec![
                (
                    "testdevice1",
                    vec![
                        dev("Dev1", Some(0)),
                        dev("Dev2", Some(1)),
                        dev("Dev3", Some(0)),
                        dev("Dev4", Some(1)),
                    ],
                ),
                ("testdevice2", vec![dev("Dev1", Some(0))]),
            ],
            allocated: &[],
            expected: vec![
                (
                    "testdevice1",
                    Some(vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
                ),
                ("testdevice2", Some(vec![h(&[0], true), h(&[0, 1], false)])),
            ],
        },
        HintCase {
            description: "Single device type, more requested than available",
            limits: &[("testdevice", 6)],
            devices: vec![(
                "testdevice",
                vec![
                    dev("Dev1", Some(0)),
                    dev("Dev2", Some(0)),
                    dev("Dev3", Some(1)),
                    dev("Dev4", Some(1)),
                ],
            )],
            allocated: &[],
            expected: vec![("testdevice", Some(vec![]))],
        },
        HintCase {
            description: "Single device type, all already allocated to container",
            limits: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", Some(0)), dev("Dev2", Some(0))],
            )],
            allocated: &[("fakePod", "fakeContainer", "testdevice", &["Dev1", "Dev2"])],
            expected: vec![("testdevice", Some(vec![h(&[0], true), h(&[0, 1], false)]))],
        },
        HintCase {
            description: "Single device type, less already allocated to container than requested",
            limits: &[("testdevice", 4)],
            devices: vec![(
                "testdevice",
                vec![
                    dev("Dev1", Some(0)),
                    dev("Dev2", Some(0)),
                    dev("Dev3", Some(1)),
                    dev("Dev4", Some(1)),
                ],
            )],
            allocated: &[("fakePod", "fakeContainer", "testdevice", &["Dev1", "Dev2"])],
            expected: vec![("testdevice", Some(vec![]))],
        },
        HintCase {
            description: "Single device type, more already allocated to container than requested",
            limits: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![
                    dev("Dev1", Some(0)),
                    dev("Dev2", Some(0)),
                    dev("Dev3", Some(1)),
                    dev("Dev4", Some(1)),
                ],
            )],
            allocated: &[(
                "fakePod",
                "fakeContainer",
                "testdevice",
                &["Dev1", "Dev2", "Dev3", "Dev4"],
            )],
            expected: vec![("testdevice", Some(vec![]))],
        },
    ];
    for tc in cases {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        let p = pod("fakePod", &[], &[("fakeContainer", tc.limits)]);
        let active = Arc::new(p.clone());
        m.set_sources(Arc::new(move || vec![active.clone()]), Arc::new(|| true));
        for (r, devs) in tc.devices {
            m.lock().all_devices.insert(
                r.to_string(),
                devs.iter().map(|d| (d.id.clone(), d.clone())).collect(),
            );
            m.lock()
                .healthy
                .insert(r.to_string(), devs.iter().map(|d| d.id.clone()).collect());
        }
        set_allocated(&m, tc.allocated);
        let container = &p.spec.as_ref().unwrap().containers[0];
        let hints = m.get_topology_hints(&p, container);
        for (r, want) in tc.expected {
            let got = hints.get(r).cloned().flatten().map(sorted);
            assert_eq!(got, want.map(sorted), "{}: {r}", tc.description);
        }
    }
}

#[test]
fn pod_topology_hints_and_requests() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    let four = vec![
        dev("Dev1", Some(0)),
        dev("Dev2", Some(0)),
        dev("Dev3", Some(1)),
        dev("Dev4", Some(1)),
    ];
    for r in ["testdevice1", "testdevice2"] {
        m.apply_devices(r, four.clone());
    }
    let p = pod(
        "fakePod",
        &[("init", &[("testdevice1", 1), ("testdevice2", 3)])],
        &[
            ("c1", &[("testdevice1", 2)]),
            ("c2", &[("testdevice2", 2)]),
            ("c3", &[("notRegistered", 2)]),
        ],
    );
    let want: BTreeMap<String, usize> = [
        ("testdevice1".to_string(), 2),
        ("testdevice2".to_string(), 3),
    ]
    .into();
    assert_eq!(m.pod_device_request(&p), want);
    let hints = m.get_pod_topology_hints(&p);
    let h = |bits: &[u32], preferred| TopologyHint::new(mask(bits), preferred);
    assert_eq!(
        hints["testdevice1"].clone().map(sorted),
        Some(sorted(vec![
            h(&[0], true),
            h(&[1], true),
            h(&[0, 1], false)
        ]))
    );
    assert_eq!(
        hints["testdevice2"].clone().map(sorted),
        Some(vec![h(&[0, 1], true)])
    );
    assert!(!hints.contains_key("notRegistered"));
}

/// An init container's devices go to the app container after it; a
/// container keeps what it has; a changed request is refused.
#[test]
fn devices_to_allocate_reuses_init_devices() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.apply_devices(
        "example.com/foo",
        vec![dev("d1", None), dev("d2", None), dev("d3", None)],
    );
    let r = "example.com/foo";
    m.register_endpoint(r, None, Arc::new(Endpoint::stopped(r, Arc::new(RealClock))));
    let got = m
        .devices_to_allocate("u", "init", r, 2, &BTreeSet::new())
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 2);
    set_allocated(&m, &[("u", "init", r, &["d1", "d2"])]);
    // The init container's devices are reusable by the app container.
    let mut reuse = pod_devices::ResourceDevices::new();
    m.lock()
        .pod_devices
        .add_container_allocated_resources("u", "init", &mut reuse);
    let got = m
        .devices_to_allocate("u", "app", r, 1, &reuse[r])
        .unwrap()
        .unwrap();
    assert!(got.is_subset(&reuse[r]), "{got:?}");
    // More than the reusable ones: the rest from the free devices.
    let got = m
        .devices_to_allocate("u", "app2", r, 3, &reuse[r])
        .unwrap()
        .unwrap();
    assert_eq!(got, BTreeSet::from(["d1".into(), "d2".into(), "d3".into()]));
    // Already allocated: nothing to do; another count: refused.
    assert_eq!(
        m.devices_to_allocate("u", "init", r, 2, &BTreeSet::new())
            .unwrap(),
        None
    );
    let err = m
        .devices_to_allocate("u", "init", r, 1, &BTreeSet::new())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod \"u\" container \"init\" changed request for resource \"example.com/foo\" from 2 to 1"
    );
    assert_eq!(
        m.devices_to_allocate("u", "x", "example.com/none", 1, &BTreeSet::new())
            .unwrap_err()
            .to_string(),
        "can't allocate unregistered device example.com/none"
    );
    let err = m
        .devices_to_allocate("v", "c", r, 2, &BTreeSet::new())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "requested number of devices unavailable for example.com/foo. Requested: 2, Available: 0"
    );
    let admission = AllocationError::Device(err);
    assert_eq!(admission.admission_reason(), "UnexpectedAdmissionError");
    assert_eq!(
        admission.admission_message(),
        "Allocate failed due to requested number of devices unavailable for example.com/foo. Requested: 2, Available: 0, which is unexpected"
    );
}

/// Says "NUMA node 1" for every container and allocates nothing.
struct NodeOne;

impl crate::cm::topologymanager::HintProvider for NodeOne {
    fn topology_hints(
        &self,
        _: &Pod,
        _: &k8s_openapi::api::core::v1::Container,
    ) -> crate::cm::topologymanager::ProviderHints {
        [(
            "x".to_string(),
            Some(vec![TopologyHint::new(mask(&[1]), true)]),
        )]
        .into()
    }
    fn pod_topology_hints(&self, _: &Pod) -> crate::cm::topologymanager::ProviderHints {
        Default::default()
    }
    fn allocate(
        &self,
        _: &Pod,
        _: &k8s_openapi::api::core::v1::Container,
    ) -> Result<(), AllocationError> {
        Ok(())
    }
}

/// With a NUMA affinity, devices on the affine node come first, then the
/// other node's, then those without topology.
#[test]
fn allocation_follows_numa_affinity() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(AffinityStore::default());
    let m = DeviceManager::new(
        dir.path().to_path_buf(),
        vec![0, 1],
        store.clone(),
        Arc::new(RealClock),
    );
    let r = "example.com/foo";
    m.apply_devices(
        r,
        vec![
            dev("a0", Some(0)),
            dev("b1", Some(1)),
            dev("c1", Some(1)),
            dev("d0", Some(0)),
            dev("e", None),
        ],
    );
    m.register_endpoint(r, None, Arc::new(Endpoint::stopped(r, Arc::new(RealClock))));
    let available = m.healthy_devices()[r].clone();
    let split = |m: &DeviceManager| {
        let st = m.lock();
        m.filter_by_affinity(&st, "u", "c", r, &available)
    };
    let (aligned, unaligned, none) = split(&m);
    assert!(
        aligned.is_empty() && unaligned.is_empty(),
        "no affinity yet"
    );
    assert_eq!(none.len(), 5);

    let tm = crate::cm::topologymanager::TopologyManager::new(
        &crate::cm::topologymanager::TopologyManagerConfig {
            policy: "single-numa-node".into(),
            scope: "container".into(),
        },
        &[0, 1],
        store,
        vec![Arc::new(NodeOne)],
    )
    .unwrap();
    tm.admit(&pod("u", &[], &[("c", &[])])).unwrap();
    let set = |l: &[&str]| {
        l.iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<String>>()
    };
    let (aligned, unaligned, none) = split(&m);
    assert_eq!(aligned, set(&["b1", "c1"]));
    assert_eq!(unaligned, set(&["a0", "d0"]));
    assert_eq!(none, set(&["e"]));
    let got = m
        .devices_to_allocate("u", "c", r, 2, &BTreeSet::new())
        .unwrap();
    assert_eq!(got, Some(set(&["b1", "c1"])));
    let got = m
        .devices_to_allocate("u", "c2", r, 3, &BTreeSet::new())
        .unwrap();
    assert_eq!(got.map(|g| g.len()), Some(3));
}

#[test]
fn run_options_first_of_duplicates_wins() {
    let mut pd = pod_devices::PodDevices::default();
    let resp = |env: &str, path: &str| ContainerAllocateResponse {
        envs: [("E".to_string(), env.to_string())].into(),
        mounts: vec![Mount {
            container_path: "/m".into(),
            host_path: path.into(),
            read_only: false,
        }],
        annotations: [("a".to_string(), env.to_string())].into(),
        ..Default::default()
    };
    pd.insert(
        "u",
        "c",
        "r/a",
        [(-1, vec!["1".into()])].into(),
        resp("x", "/h1"),
    );
    pd.insert(
        "u",
        "c",
        "r/b",
        [(-1, vec!["2".into()])].into(),
        resp("y", "/h2"),
    );
    let o = pd.device_run_container_options("u", "c").unwrap();
    assert_eq!(o.envs, vec![("E".to_string(), "x".to_string())]);
    assert_eq!(o.mounts.len(), 1);
    assert_eq!(o.mounts[0].host_path, "/h1");
    assert_eq!(o.annotations.len(), 1);
    assert!(pd.device_run_container_options("u", "other").is_none());
}
