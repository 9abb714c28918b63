//! The device plugin manager and the pod-resources API end to end (issue
//! 13): a standalone kubelet over a private containerd, and a device
//! plugin built here (a tonic DevicePlugin server on a unix socket in the
//! kubelet's device-plugins directory) that registers `example.com/foo`
//! with two devices, prefers the last one offered, asks for
//! PreStartContainer, and answers Allocate with `FOO_DEVICE=<ids>`, a
//! read-only mount, a device node and an annotation. A static pod asking
//! for one device runs with all of them in its OCI spec / CRI status; the checkpoint is Go's (checksum verified) with the
//! assignment; pod-resources v1/v1alpha1 List and GetAllocatableResources
//! show it. After a kubelet restart the plugin registers again on the new
//! socket, the checkpoint is loaded and the pod keeps its device (its
//! container is not recreated, nothing is allocated again). In API mode
//! the Node reports the devices (capacity and allocatable 2), and when the
//! plugin's stream ends, capacity 2 with allocatable 0.

#[path = "e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod support;

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::*;
use hyper_util::rt::TokioIo;
use kubelet::cm::devicemanager::api::device_plugin_server::{DevicePlugin, DevicePluginServer};
use kubelet::cm::devicemanager::api::registration_client::RegistrationClient;
use kubelet::cm::devicemanager::api::{
    AllocateRequest, AllocateResponse, ContainerAllocateResponse,
    ContainerPreferredAllocationResponse, Device, DevicePluginOptions, DeviceSpec, Empty,
    ListAndWatchResponse, Mount, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse, RegisterRequest,
};
use kubelet::cm::devicemanager::checkpoint::DeviceCheckpoint;
use kubelet::cri::RuntimeService;
use kubelet::kubelet::server::podresources::api::{v1, v1alpha1};
use support::containerd::{Containerd, images};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Request, Response, Status};

const WAIT: Duration = Duration::from_secs(60);
const RESOURCE: &str = "example.com/foo";
const NODE: &str = "dp-node";

/// What the plugin was asked.
#[derive(Default)]
struct Calls {
    allocate: Vec<Vec<String>>,
    pre_start: Vec<Vec<String>>,
    preferred: Vec<Vec<String>>,
}

#[derive(Clone)]
struct Plugin {
    mount_source: PathBuf,
    calls: Arc<Mutex<Calls>>,
    /// Cancelled: the plugin goes away (its ListAndWatch stream ends).
    stop: CancellationToken,
}

type DeviceStream =
    Pin<Box<dyn futures::Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Plugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(options()))
    }

    type ListAndWatchStream = DeviceStream;

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let devices = ["dev-1", "dev-2"]
            .iter()
            .map(|id| Device {
                id: id.to_string(),
                health: "Healthy".into(),
                topology: None,
            })
            .collect();
        // One list, then the stream stays open until the plugin stops.
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let _ = tx.try_send(Ok(ListAndWatchResponse { devices }));
        let stop = self.stop.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            drop(tx);
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn get_preferred_allocation(
        &self,
        r: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let mut out = Vec::new();
        for c in r.into_inner().container_requests {
            let mut ids = c.available_device_i_ds.clone();
            self.calls.lock().unwrap().preferred.push(ids.clone());
            ids.sort();
            ids.reverse();
            ids.truncate(c.allocation_size as usize);
            out.push(ContainerPreferredAllocationResponse { device_i_ds: ids });
        }
        Ok(Response::new(PreferredAllocationResponse {
            container_responses: out,
        }))
    }

    async fn allocate(
        &self,
        r: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let mut out = Vec::new();
        for c in r.into_inner().container_requests {
            self.calls
                .lock()
                .unwrap()
                .allocate
                .push(c.devices_ids.clone());
            out.push(ContainerAllocateResponse {
                envs: [("FOO_DEVICE".to_string(), c.devices_ids.join(","))].into(),
                mounts: vec![Mount {
                    container_path: "/foo-device".into(),
                    host_path: self.mount_source.display().to_string(),
                    read_only: true,
                }],
                devices: vec![DeviceSpec {
                    container_path: "/dev/foo0".into(),
                    host_path: "/dev/null".into(),
                    permissions: "rw".into(),
                }],
                annotations: [("example.com/foo-ids".to_string(), c.devices_ids.join(","))].into(),
            });
        }
        Ok(Response::new(AllocateResponse {
            container_responses: out,
        }))
    }

    async fn pre_start_container(
        &self,
        r: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        self.calls
            .lock()
            .unwrap()
            .pre_start
            .push(r.into_inner().devices_ids);
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

fn options() -> DevicePluginOptions {
    DevicePluginOptions {
        pre_start_required: true,
        get_preferred_allocation_available: true,
    }
}

async fn unix_channel(path: &Path) -> Option<Channel> {
    let path = path.to_path_buf();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = path.clone();
            async move { tokio::net::UnixStream::connect(p).await.map(TokioIo::new) }
        }))
        .await
        .ok()
}

/// Serves the plugin on `<dir>/<socket>` and registers it with the
/// kubelet's socket in the same directory (retrying until it answers).
async fn run_plugin(dir: &Path, socket: &str, plugin: Plugin) {
    let stop = plugin.stop.clone();
    let path = dir.join(socket);
    let _ = std::fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path).expect("plugin socket");
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(
                DevicePluginServer::new(plugin),
                tokio_stream::wrappers::UnixListenerStream::new(listener),
                stop.cancelled_owned(),
            )
            .await;
    });
    let kubelet_sock = dir.join("kubelet.sock");
    support::eventually(WAIT, || {
        let kubelet_sock = kubelet_sock.clone();
        async move {
            let ch = unix_channel(&kubelet_sock).await?;
            RegistrationClient::new(ch)
                .register(RegisterRequest {
                    version: "v1beta1".into(),
                    endpoint: socket.to_string(),
                    resource_name: RESOURCE.into(),
                    options: Some(options()),
                })
                .await
                .ok()
        }
    })
    .await
    .expect("the kubelet accepts the registration");
}

fn checkpoint(path: &Path) -> Option<DeviceCheckpoint> {
    DeviceCheckpoint::unmarshal(&std::fs::read(path).ok()?).ok()
}

/// The OCI spec containerd made for the container.
async fn spec(rt: &kubelet::cri::RemoteRuntimeService, id: &str) -> serde_json::Value {
    let status = rt.container_status(id, true).await.expect("status");
    let info: serde_json::Value =
        serde_json::from_str(status.info.get("info").expect("verbose info")).expect("json");
    info["runtimeSpec"].clone()
}

fn container_id(p: &k8s_openapi::api::core::v1::Pod, name: &str) -> Option<String> {
    let id = container(p, name)?.container_id.clone()?;
    Some(id.split_once("://")?.1.to_string())
}

async fn pod_resources(
    root: &Path,
) -> Option<(
    v1::ListPodResourcesResponse,
    v1alpha1::ListPodResourcesResponse,
    v1::AllocatableResourcesResponse,
)> {
    let ch = unix_channel(&root.join("pod-resources/kubelet.sock")).await?;
    let mut c1 = v1::pod_resources_lister_client::PodResourcesListerClient::new(ch.clone());
    let mut ca = v1alpha1::pod_resources_lister_client::PodResourcesListerClient::new(ch);
    let list = c1
        .list(v1::ListPodResourcesRequest {})
        .await
        .ok()?
        .into_inner();
    let alpha = ca
        .list(v1alpha1::ListPodResourcesRequest {})
        .await
        .ok()?
        .into_inner();
    let alloc = c1
        .get_allocatable_resources(v1::AllocatableResourcesRequest {})
        .await
        .ok()?
        .into_inner();
    Some((list, alpha, alloc))
}

/// The device ids pod-resources v1 reports for the container.
fn listed_devices(
    list: &v1::ListPodResourcesResponse,
    pod: &str,
    c: &str,
) -> Vec<(String, Vec<String>)> {
    list.pod_resources
        .iter()
        .filter(|p| p.name == pod && p.namespace == "default")
        .flat_map(|p| &p.containers)
        .filter(|x| x.name == c)
        .flat_map(|x| &x.devices)
        .map(|d| (d.resource_name.clone(), d.device_ids.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_plugin_devices_reach_the_container_and_survive_a_restart() {
    let Some(rig) = Containerd::start("e2e_device_plugin") else {
        return;
    };
    let dirs = NodeDirs::new();
    let root_cg = make_cgroup_root(&rig, "deviceplugin");
    let p = Ports {
        main: 22310,
        read_only: 22311,
        healthz: 22312,
    };
    let cfg = config(&dirs, &root_cg, p, "");
    let root = dirs.path("root");
    let dp_dir = root.join("device-plugins");
    let mount_source = dirs.path("foo-device");
    std::fs::create_dir_all(&mount_source).unwrap();
    std::fs::write(mount_source.join("id"), "foo").unwrap();
    let calls = Arc::new(Mutex::new(Calls::default()));
    let stop1 = CancellationToken::new();
    let plugin = Plugin {
        mount_source: mount_source.clone(),
        calls: calls.clone(),
        stop: stop1.clone(),
    };

    // A stale file in the plugin directory goes at start; the checkpoint
    // of an earlier run would stay.
    std::fs::create_dir_all(&dp_dir).unwrap();
    std::fs::write(dp_dir.join("stale.sock"), "").unwrap();
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
    support::eventually(WAIT, || async {
        (dp_dir.join("kubelet.sock").exists() && !dp_dir.join("stale.sock").exists()).then_some(())
    })
    .await
    .expect("registration socket, stale files gone");
    run_plugin(&dp_dir, "foo.sock", plugin).await;

    // The devices are registered: the checkpoint lists them.
    let cp_path = dp_dir.join("kubelet_internal_checkpoint");
    support::eventually(WAIT, || async {
        let cp = checkpoint(&cp_path)?;
        let (_, registered) = cp.into_parts();
        (registered.get(RESOURCE)?.len() == 2).then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "registered devices in {:?}",
            std::fs::read_to_string(&cp_path)
        )
    });

    dirs.write_manifest(
        "dev.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: devpod\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    command: [sleep, '3600']\n    resources: {{limits: {{{RESOURCE}: 1}}}}\n",
            image = images().busybox
        ),
    );
    let pod_name = format!("devpod-{NODE}");
    let pod = wait_pod(p.read_only, &pod_name, WAIT, "Running", |pod| {
        is_running(pod, "c")
    })
    .await;
    let cid = container_id(&pod, "c").expect("container id");

    // The plugin's preferred device was allocated, PreStartContainer
    // called with it, and its env and mount are in the OCI spec.
    {
        let c = calls.lock().unwrap();
        assert_eq!(c.allocate, vec![vec!["dev-2".to_string()]]);
        assert_eq!(c.pre_start, vec![vec!["dev-2".to_string()]]);
        assert_eq!(c.preferred.len(), 1);
    }
    let rt = cri(&rig).await;
    let s = spec(&rt, &cid).await;
    let env: Vec<String> = s["process"]["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    assert!(env.contains(&"FOO_DEVICE=dev-2".to_string()), "{env:?}");
    let mount = s["mounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["destination"] == "/foo-device")
        .unwrap_or_else(|| panic!("mount in {}", s["mounts"]));
    assert_eq!(mount["source"], mount_source.display().to_string());
    assert!(
        mount["options"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o == "ro"),
        "{mount}"
    );

    let devices = s["linux"]["devices"].as_array().expect("linux.devices");
    assert!(
        devices.iter().any(|d| d["path"] == "/dev/foo0"),
        "device in {devices:?}"
    );
    let status = rt.container_status(&cid, false).await.expect("status");
    assert_eq!(
        status
            .status
            .as_ref()
            .and_then(|s| s.annotations.get("example.com/foo-ids"))
            .map(String::as_str),
        Some("dev-2")
    );

    // The registration and the Allocate call are counted.
    let (code, metrics) = http_get(p.read_only, "/metrics").expect("/metrics");
    assert_eq!(code, 200);
    for family in [
        "kubelet_device_plugin_registration_total{resource_name=\"example.com/foo\"}",
        "kubelet_device_plugin_alloc_duration_seconds_count{resource_name=\"example.com/foo\"}",
    ] {
        assert!(metrics.contains(family), "{family} in /metrics");
    }

    // Go's checkpoint, checksum verified, with the assignment.
    let uid = uid(&pod);
    let cp = checkpoint(&cp_path).expect("checkpoint verifies");
    let (entries, _) = cp.into_parts();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].pod_uid, uid);
    assert_eq!(entries[0].container_name, "c");
    assert_eq!(entries[0].resource_name, RESOURCE);
    assert_eq!(
        entries[0].device_ids,
        Some([(-1, vec!["dev-2".to_string()])].into())
    );

    // The pod-resources API shows it.
    let (list, alpha, alloc) = pod_resources(&root).await.expect("pod-resources answers");
    assert_eq!(
        listed_devices(&list, &pod_name, "c"),
        vec![(RESOURCE.to_string(), vec!["dev-2".to_string()])]
    );
    let alpha_devs: Vec<(String, Vec<String>)> = alpha
        .pod_resources
        .iter()
        .filter(|p| p.name == pod_name)
        .flat_map(|p| &p.containers)
        .flat_map(|c| &c.devices)
        .map(|d| (d.resource_name.clone(), d.device_ids.clone()))
        .collect();
    assert_eq!(
        alpha_devs,
        vec![(RESOURCE.to_string(), vec!["dev-2".to_string()])]
    );
    let mut allocatable: Vec<String> = alloc
        .devices
        .iter()
        .filter(|d| d.resource_name == RESOURCE)
        .flat_map(|d| d.device_ids.clone())
        .collect();
    allocatable.sort();
    assert_eq!(allocatable, vec!["dev-1", "dev-2"]);

    // Restart: the socket goes with the kubelet and comes back; the plugin
    // registers again (on a new socket: start cleans the directory).
    kubelet.stop().await.expect("clean stop");
    stop1.cancel();
    assert!(
        !dp_dir.join("kubelet.sock").exists(),
        "socket removed at stop"
    );
    let restarted_calls = Arc::new(Mutex::new(Calls::default()));
    let stop2 = CancellationToken::new();
    let plugin2 = Plugin {
        mount_source: mount_source.clone(),
        calls: restarted_calls.clone(),
        stop: stop2.clone(),
    };
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
    support::eventually(WAIT, || async {
        dp_dir.join("kubelet.sock").exists().then_some(())
    })
    .await
    .expect("registration socket again");
    run_plugin(&dp_dir, "foo-2.sock", plugin2).await;

    let again = wait_pod(p.read_only, &pod_name, WAIT, "Running", |pod| {
        is_running(pod, "c")
    })
    .await;
    assert_eq!(container_id(&again, "c"), Some(cid), "container kept");
    let listed = support::eventually(WAIT, || async {
        let (list, _, alloc) = pod_resources(&root).await?;
        (alloc.devices.len() == 2).then_some(list)
    })
    .await
    .expect("re-registered plugin's devices allocatable");
    assert_eq!(
        listed_devices(&listed, &pod_name, "c"),
        vec![(RESOURCE.to_string(), vec!["dev-2".to_string()])],
        "the pod keeps its device from the checkpoint"
    );
    let cp = checkpoint(&cp_path).expect("checkpoint verifies");
    let (entries, registered) = cp.into_parts();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].pod_uid, uid);
    assert_eq!(registered[RESOURCE].len(), 2);
    assert!(
        restarted_calls.lock().unwrap().allocate.is_empty(),
        "nothing allocated again"
    );

    dirs.remove_manifest("dev.yaml");
    support::eventually(WAIT, || async {
        (!pods(p.read_only).contains_key(&pod_name)).then_some(())
    })
    .await
    .expect("pod gone");
    kubelet.stop().await.expect("clean stop");
    stop2.cancel();
}

/// This machine's outbound IPv4 address (what `--node-ip` names).
fn host_ip() -> String {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    s.connect("10.255.255.255:9").expect("udp connect");
    s.local_addr().expect("local addr").ip().to_string()
}

fn node_quantity(n: &k8s_openapi::api::core::v1::Node, field: &str) -> Option<String> {
    let s = n.status.as_ref()?;
    let list = if field == "capacity" {
        s.capacity.as_ref()
    } else {
        s.allocatable.as_ref()
    }?;
    Some(list.get(RESOURCE)?.0.clone())
}

/// In API mode the Node reports the plugin's devices: capacity and
/// allocatable 2; when the plugin goes away its devices stay in capacity
/// with allocatable 0 (for the grace period); when it comes back it
/// registers again and they are allocatable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_mode_node_status_reports_device_plugin_resources() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start("e2e_device_plugin_api") else {
        return;
    };
    let api = support::apiserver::TestApi::start().await;
    let node = api.unique_name("dpnode");
    let root_cg = make_cgroup_root(&rig, "deviceplugin-api");
    let cfg = config(
        &dirs,
        &root_cg,
        Ports {
            main: 22313,
            read_only: 22314,
            healthz: 22315,
        },
        "nodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 2s\n",
    );
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.push(format!("--node-ip={}", host_ip()));
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    let dp_dir = dirs.path("root").join("device-plugins");
    support::eventually(WAIT, || async {
        dp_dir.join("kubelet.sock").exists().then_some(())
    })
    .await
    .expect("registration socket");
    let stop = CancellationToken::new();
    let plugin = Plugin {
        mount_source: dirs.path("host"),
        calls: Default::default(),
        stop: stop.clone(),
    };
    run_plugin(&dp_dir, "foo.sock", plugin).await;

    use k8s_openapi::api::core::v1::Node;
    api.wait_for::<Node>(None, &node, WAIT, |n| {
        node_quantity(n, "capacity").as_deref() == Some("2")
            && node_quantity(n, "allocatable").as_deref() == Some("2")
    })
    .await;
    stop.cancel();
    api.wait_for::<Node>(None, &node, WAIT, |n| {
        node_quantity(n, "capacity").as_deref() == Some("2")
            && node_quantity(n, "allocatable").as_deref() == Some("0")
    })
    .await;
    // The plugin restarts (on a new socket) and registers again: its
    // devices are allocatable again.
    let stop = CancellationToken::new();
    let plugin = Plugin {
        mount_source: dirs.path("host"),
        calls: Default::default(),
        stop: stop.clone(),
    };
    run_plugin(&dp_dir, "foo-again.sock", plugin).await;
    api.wait_for::<Node>(None, &node, WAIT, |n| {
        node_quantity(n, "capacity").as_deref() == Some("2")
            && node_quantity(n, "allocatable").as_deref() == Some("2")
    })
    .await;
    stop.cancel();
    kubelet.stop().await.expect("clean stop");
    api.cleanup().await;
}
