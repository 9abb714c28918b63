//! The CRI configs kubelet-rs generates for the reference pods, assembled
//! from `pod-*.json` the way the runtime manager will (DNS, environment,
//! volumes, run options, sandbox and container configs), compared field by
//! field with what the Go kubelet sent (tests/fixtures/go-kubelet-examples).
//!
//! Set aside as the brief allows: the config.seen timestamp, the random name
//! of the termination-log file, and the order of the KUBERNETES_* service
//! variables (Go map order), compared as a set.

#[path = "cri_reference/projection.rs"]
mod projection;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service};
use kubelet::cri::api::DnsConfig;
use kubelet::kubelet::envvars::{
    ConfigMapGetter, EnvContext, GetError, ObjectKind, SecretGetter, make_environment_variables,
};
use kubelet::kubelet::kuberuntime::{
    ContainerParams, ImageUser, MountedVolume, RunOptionsParams, RuntimeSettings, SandboxParams,
    VolumeMap, generate_container_config, generate_pod_sandbox_config,
    generate_run_container_options,
};
use kubelet::kubelet::network::dns::DnsConfigurer;
use kubelet::kubelet::qos::{QosClass, get_pod_qos};
use serde_json::Value;

const ROOT_DIR: &str = "/var/lib/kubelet";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/go-kubelet-examples")
        .join(name)
}

fn read_json(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The cluster objects the reference pods read.
struct Cluster;

#[async_trait]
impl ConfigMapGetter for Cluster {
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, GetError> {
        match (namespace, name) {
            ("refpack", "cfg") => Ok(ConfigMap {
                data: Some([("greeting".to_string(), "hello".to_string())].into()),
                ..Default::default()
            }),
            _ => Err(GetError::NotFound {
                kind: ObjectKind::ConfigMap,
                name: name.into(),
            }),
        }
    }
}

#[async_trait]
impl SecretGetter for Cluster {
    async fn get_secret(&self, _namespace: &str, name: &str) -> Result<Secret, GetError> {
        Err(GetError::NotFound {
            kind: ObjectKind::Secret,
            name: name.into(),
        })
    }
}

fn kubernetes_service() -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kubernetes", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}
    }))
    .expect("service")
}

/// The volume manager's view: where each of the pod's volumes is mounted.
fn volumes(pod: &Pod, uid: &str) -> VolumeMap {
    let mut map = VolumeMap::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let plugin_dir = |plugin: &str| {
            format!(
                "{ROOT_DIR}/pods/{uid}/volumes/kubernetes.io~{plugin}/{}",
                v.name
            )
        };
        let (host_path, read_only) = if let Some(hp) = &v.host_path {
            (hp.path.clone(), false)
        } else if v.config_map.is_some() {
            (plugin_dir("configmap"), true)
        } else if v.secret.is_some() {
            (plugin_dir("secret"), true)
        } else if v.projected.is_some() {
            (plugin_dir("projected"), true)
        } else if v.empty_dir.is_some() {
            (plugin_dir("empty-dir"), false)
        } else {
            continue;
        };
        map.insert(
            v.name.clone(),
            MountedVolume {
                host_path,
                read_only,
                selinux_relabel: false,
            },
        );
    }
    map
}

fn cgroup_parent(pod: &Pod, uid: &str) -> String {
    match get_pod_qos(pod) {
        QosClass::Guaranteed => format!("/kubepods/pod{uid}"),
        QosClass::Burstable => format!("/kubepods/burstable/pod{uid}"),
        QosClass::BestEffort => format!("/kubepods/besteffort/pod{uid}"),
    }
}

struct Generated {
    sandbox: Value,
    containers: Vec<(String, Value)>,
}

async fn assemble(pod_name: &str) -> Generated {
    let mut pod: Pod =
        serde_json::from_value(read_json(&format!("pod-{pod_name}.json"))).expect("pod");
    let node: Node = serde_json::from_value(read_json("node-gonode.json")).expect("node");
    // The kubelet's config layer marks pods from the API server.
    let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert("kubernetes.io/config.source".into(), "api".into());
    annotations.insert(
        "kubernetes.io/config.seen".into(),
        "2026-11-22T04:03:41.900000000Z".into(),
    );

    let uid = pod.metadata.uid.clone().expect("uid");
    let status = node.status.clone().expect("node status");
    let capacity = status.capacity.clone().unwrap_or_default();
    let allocatable = status.allocatable.clone().unwrap_or_default();
    let memory = kubelet::util::quantity::parse(&capacity["memory"].0)
        .expect("memory")
        .value();
    let settings = RuntimeSettings {
        memory_capacity: memory,
        hugepage_sizes: vec!["2MB".into(), "1GB".into()],
        seccomp_profile_root: PathBuf::from(ROOT_DIR).join("seccomp"),
        ..Default::default()
    };

    let dns = DnsConfigurer {
        cluster_dns: vec!["10.96.0.10".parse().expect("ip")],
        cluster_domain: "cluster.local".into(),
        resolver_config: "/etc/resolv.conf".into(),
        node_ips: vec!["10.88.0.1".parse().expect("ip")],
        expanded_dns_config: false,
    };
    let host_dns = DnsConfig {
        servers: vec!["10.88.0.1".into()],
        searches: vec![],
        options: vec![],
    };
    let pod_dns = dns.pod_dns(&pod, &host_dns);
    assert!(pod_dns.events.is_empty());

    let cgroup = cgroup_parent(&pod, &uid);
    let sandbox = generate_pod_sandbox_config(
        &pod,
        &SandboxParams {
            attempt: 0,
            dns_config: pod_dns.config,
            cluster_domain: "cluster.local",
            cgroup_parent: &cgroup,
            extra_supplemental_groups: &[],
            settings: &settings,
        },
    )
    .expect("sandbox config");

    let pod_status = pod.status.clone().expect("pod status");
    let pod_ips: Vec<String> = pod_status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.clone())
        .collect();
    let host_ips = vec![pod_status.host_ip.clone().expect("host ip")];
    let services = vec![kubernetes_service()];
    let node_ips = vec!["10.88.0.1".parse().expect("ip")];
    let ctx = EnvContext {
        pod_ip: pod_status.pod_ip.as_deref().unwrap_or(""),
        pod_ips: &pod_ips,
        node_ips: &node_ips,
        host_ips: &host_ips,
        node_allocatable: &allocatable,
        services: &services,
        services_synced: true,
        master_service_namespace: "default",
        config_maps: Some(&Cluster),
        secrets: Some(&Cluster),
    };
    let statuses: Vec<_> = pod_status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(pod_status.container_statuses.iter().flatten())
        .cloned()
        .collect();
    let vols = volumes(&pod, &uid);
    let pod_dir = PathBuf::from(ROOT_DIR).join("pods").join(&uid);
    let spec = pod.spec.clone().expect("spec");
    let mut containers = Vec::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
    {
        let env = make_environment_variables(&pod, c, &ctx)
            .await
            .expect("environment");
        let opts = generate_run_container_options(
            &pod,
            c,
            RunOptionsParams {
                pod_dir: &pod_dir,
                pod_ips: &pod_ips,
                cluster_domain: "cluster.local",
                volumes: &vols,
                base: Default::default(),
                block_devices: vec![],
                envs: env.envs,
                node_hosts: None,
            },
        )
        .expect("run options");
        let st = statuses
            .iter()
            .find(|s| s.name == c.name)
            .expect("container status");
        let image_user = ImageUser::root();
        let generated = generate_container_config(
            c,
            &pod,
            &ContainerParams {
                restart_count: u32::try_from(st.restart_count).expect("restart count"),
                image_ref: st.image_id.as_str(),
                image_user: &image_user,
                opts: &opts,
                ns_target_container_id: None,
                extra_supplemental_groups: &[],
                settings: &settings,
            },
        )
        .expect("container config");
        assert_eq!(
            generated.log_directory,
            PathBuf::from(&sandbox.log_directory).join(&c.name)
        );
        containers.push((c.name.clone(), projection::container(&generated.config)));
    }
    Generated {
        sandbox: projection::sandbox(&sandbox),
        containers,
    }
}

fn normalize_sandbox(mut v: Value) -> Value {
    if let Some(seen) = v.pointer_mut("/annotations/kubernetes.io~1config.seen") {
        *seen = Value::from("<seen>");
    }
    v
}

/// Splits envs into the ordered user part and the sorted KUBERNETES_* set,
/// and masks the random termination-log file name.
fn normalize_container(mut v: Value) -> Value {
    if let Some(envs) = v.get_mut("envs").and_then(Value::as_array_mut) {
        let is_service = |e: &Value| {
            e["key"]
                .as_str()
                .is_some_and(|k| k.starts_with("KUBERNETES_"))
        };
        let user: Vec<Value> = envs.iter().filter(|e| !is_service(e)).cloned().collect();
        let mut service: Vec<Value> = envs.iter().filter(|e| is_service(e)).cloned().collect();
        service.sort_by_key(|e| e["key"].as_str().unwrap_or("").to_string());
        *envs = user.into_iter().chain(service).collect();
    }
    if let Some(mounts) = v.get_mut("mounts").and_then(Value::as_array_mut) {
        for m in mounts.iter_mut() {
            if m["container_path"] == "/dev/termination-log" {
                let host = m["host_path"].as_str().unwrap_or("").to_string();
                let (dir, file) = host.rsplit_once('/').unwrap_or(("", ""));
                assert!(
                    file.len() == 8 && file.chars().all(|c| c.is_ascii_hexdigit()),
                    "termination-log file name {file:?}"
                );
                m["host_path"] = Value::from(format!("{dir}/<random>"));
            }
        }
    }
    v
}

fn assert_same(what: &str, got: Value, want: Value) {
    if got != want {
        panic!(
            "{what} differs from the Go kubelet's\n--- generated\n{}\n--- reference\n{}",
            serde_json::to_string_pretty(&got).unwrap_or_default(),
            serde_json::to_string_pretty(&want).unwrap_or_default()
        );
    }
}

async fn check(pod_name: &str, container_names: &[&str]) {
    let generated = assemble(pod_name).await;
    assert_same(
        &format!("{pod_name} sandbox"),
        normalize_sandbox(generated.sandbox),
        normalize_sandbox(read_json(&format!("cri-{pod_name}.sandbox.json"))),
    );
    let names: Vec<&str> = generated
        .containers
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, container_names, "{pod_name} containers");
    for (name, got) in generated.containers {
        let want = read_json(&format!("cri-{pod_name}.container.{name}.json"));
        assert_same(
            &format!("{pod_name}/{name}"),
            normalize_container(got),
            normalize_container(want),
        );
    }
}

#[tokio::test]
async fn guaranteed_pod_matches_go_kubelet() {
    check("guaranteed", &["main"]).await;
}

#[tokio::test]
async fn burstable_pod_matches_go_kubelet() {
    check("burstable", &["web"]).await;
}

#[tokio::test]
async fn besteffort_pod_matches_go_kubelet() {
    check("besteffort", &["init", "app"]).await;
}

/// Every reference container's hash, straight from the pod object: a
/// kubelet-rs replacing the Go kubelet must not restart these containers.
#[test]
fn container_hashes_match_reference() {
    let cases = [
        ("guaranteed", "main"),
        ("burstable", "web"),
        ("besteffort", "init"),
        ("besteffort", "app"),
    ];
    for (pod_name, container) in cases {
        let pod: Pod =
            serde_json::from_value(read_json(&format!("pod-{pod_name}.json"))).expect("pod");
        let spec = pod.spec.expect("spec");
        let c = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
            .find(|c| c.name == container)
            .expect("container");
        let want = read_json(&format!("cri-{pod_name}.container.{container}.json"));
        assert_eq!(
            Value::from(kubelet::kubelet::container::hash_container_hex(c)),
            want["annotations"]["io.kubernetes.container.hash"],
            "{pod_name}/{container}"
        );
    }
}
