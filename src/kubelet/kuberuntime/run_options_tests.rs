//! Table tests for run options and mounts.

use super::*;
use serde_json::json;

fn pod(spec_extra: serde_json::Value, mounts: serde_json::Value) -> (Pod, Container) {
    let mut spec = json!({"containers": [{"name": "c", "volumeMounts": mounts,
        "terminationMessagePath": "/dev/termination-log"}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), spec_extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    let p: Pod = serde_json::from_value(
        json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}, "spec": spec}),
    )
    .expect("pod");
    let c = p.spec.as_ref().expect("spec").containers[0].clone();
    (p, c)
}

fn volumes() -> VolumeMap {
    [
        (
            "data",
            "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data",
            false,
            false,
        ),
        (
            "ro",
            "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~configmap/ro",
            true,
            true,
        ),
    ]
    .into_iter()
    .map(|(n, p, ro, se)| {
        (
            n.to_string(),
            MountedVolume {
                host_path: p.to_string(),
                read_only: ro,
                selinux_relabel: se,
            },
        )
    })
    .collect()
}

fn params<'a>(vols: &'a VolumeMap, ips: &'a [String], envs: Vec<EnvVar>) -> RunOptionsParams<'a> {
    RunOptionsParams {
        pod_dir: Path::new("/var/lib/kubelet/pods/u1"),
        pod_ips: ips,
        cluster_domain: "cluster.local",
        volumes: vols,
        base: RunContainerOptions::default(),
        block_devices: vec![],
        envs,
        node_hosts: Some("127.0.0.1 localhost\n"),
    }
}

#[test]
fn mounts_in_go_order() {
    let vols = volumes();
    let ips = vec!["10.88.0.5".to_string()];
    let (p, c) = pod(
        json!({"subdomain": "sub"}),
        json!([
        {"name": "data", "mountPath": "/data", "mountPropagation": "HostToContainer"},
        {"name": "ro", "mountPath": "cfg", "readOnly": false}]),
    );
    let opts = generate_run_container_options(&p, &c, params(&vols, &ips, vec![])).expect("opts");
    let got: Vec<(&str, &str, bool, bool, MountPropagation)> = opts
        .mounts
        .iter()
        .map(|m| {
            (
                m.container_path.as_str(),
                m.host_path.as_str(),
                m.read_only,
                m.selinux_relabel,
                m.propagation,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "/data",
                "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data",
                false,
                false,
                MountPropagation::PropagationHostToContainer
            ),
            (
                "/cfg",
                "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~configmap/ro",
                true,
                true,
                MountPropagation::PropagationPrivate
            ),
            (
                "/etc/hosts",
                "/var/lib/kubelet/pods/u1/etc-hosts",
                false,
                true,
                MountPropagation::PropagationPrivate
            ),
        ]
    );
    let hosts = opts.etc_hosts.expect("hosts file");
    assert!(
        hosts
            .content
            .ends_with("10.88.0.5\tweb.sub.ns.svc.cluster.local\tweb\n"),
        "{}",
        hosts.content
    );
    assert_eq!(opts.hostname, "web");
    assert_eq!(
        opts.pod_container_dir,
        Some(PathBuf::from("/var/lib/kubelet/pods/u1/containers/c"))
    );
}

#[test]
fn hosts_mount_rules() {
    let vols = volumes();
    let ips = vec!["10.88.0.5".to_string()];
    // No pod IP yet: no hosts mount.
    let (p, c) = pod(json!({}), json!([]));
    let opts = generate_run_container_options(&p, &c, params(&vols, &[], vec![])).expect("opts");
    assert!(opts.mounts.is_empty() && opts.etc_hosts.is_none());
    // The container mounts its own /etc/hosts.
    let (p, c) = pod(
        json!({}),
        json!([{"name": "data", "mountPath": "/etc/hosts"}]),
    );
    let opts = generate_run_container_options(&p, &c, params(&vols, &ips, vec![])).expect("opts");
    assert_eq!(opts.mounts.len(), 1);
    assert!(opts.etc_hosts.is_none());
    // Host network: the node's file.
    let (p, c) = pod(json!({"hostNetwork": true}), json!([]));
    let opts = generate_run_container_options(&p, &c, params(&vols, &ips, vec![])).expect("opts");
    let hosts = opts.etc_hosts.expect("hosts");
    assert_eq!(
        hosts.content,
        "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"
    );
}

#[test]
fn sub_paths_table() {
    let vols = volumes();
    let ips: Vec<String> = vec![];
    let envs = vec![EnvVar::new("POD", "p1")];
    let cases: Vec<(&str, serde_json::Value, Result<&str, &str>)> = vec![
        (
            "subPath",
            json!({"name": "data", "mountPath": "/m", "subPath": "a/./b"}),
            Ok("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data/a/b"),
        ),
        (
            "subPathExpr",
            json!({"name": "data", "mountPath": "/m", "subPathExpr": "logs/$(POD)"}),
            Ok("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data/logs/p1"),
        ),
        (
            "missing expr var",
            json!({"name": "data", "mountPath": "/m", "subPathExpr": "$(NOPE)"}),
            Err("missing value for NOPE"),
        ),
        (
            "absolute",
            json!({"name": "data", "mountPath": "/m", "subPath": "/etc"}),
            Err("error SubPath `/etc` must not be an absolute path"),
        ),
        (
            "backsteps",
            json!({"name": "data", "mountPath": "/m", "subPath": "a/../../b"}),
            Err("unable to provision SubPath `a/../../b`: must not contain '..'"),
        ),
        (
            "unknown volume",
            json!({"name": "nope", "mountPath": "/m"}),
            Err("cannot find volume \"nope\" to mount into container \"c\""),
        ),
        (
            "bad propagation",
            json!({"name": "data", "mountPath": "/m", "mountPropagation": "Sideways"}),
            Err("invalid MountPropagation mode: \"Sideways\""),
        ),
    ];
    for (name, m, want) in cases {
        let (p, c) = pod(json!({}), json!([m]));
        let got = generate_run_container_options(&p, &c, params(&vols, &ips, envs.clone()));
        match want {
            Ok(path) => {
                let opts = got.unwrap_or_else(|e| panic!("case {name}: {e}"));
                assert_eq!(opts.mounts[0].host_path, path, "case {name}");
                let sub = opts.mounts[0].sub_path.clone().expect("sub path recorded");
                assert_eq!(sub.volume_mount_index, 0);
            }
            Err(msg) => {
                let e = got.expect_err(name);
                assert_eq!(e.to_string(), msg, "case {name}");
                assert_eq!(e.reason(), "CreateContainerConfigError");
            }
        }
    }
}

#[test]
fn fqdn_hostname_and_no_termination_path() {
    let vols = volumes();
    let (p, _) = pod(
        json!({"hostname": "h", "subdomain": "s", "setHostnameAsFQDN": true}),
        json!([]),
    );
    let c: Container = serde_json::from_value(json!({"name": "x"})).expect("container");
    let opts = generate_run_container_options(&p, &c, params(&vols, &[], vec![])).expect("opts");
    assert_eq!(opts.hostname, "h.s.ns.svc.cluster.local");
    assert_eq!(opts.pod_container_dir, None);
}

#[test]
fn container_manager_entries_come_first() {
    let vols = volumes();
    let ips = vec!["10.88.0.5".to_string()];
    let (p, c) = pod(
        json!({}),
        json!([{"name": "data", "mountPath": "/data", "subPathExpr": "$(DEV)"}]),
    );
    let mut prm = params(&vols, &ips, vec![EnvVar::new("MINE", "1")]);
    prm.base = RunContainerOptions {
        envs: vec![EnvVar::new("DEV", "gpu0")],
        mounts: vec![crate::kubelet::container::Mount {
            name: "dev-mount".into(),
            container_path: "/usr/local/nvidia".into(),
            host_path: "/opt/nvidia".into(),
            read_only: true,
            selinux_relabel: false,
            propagation: MountPropagation::PropagationPrivate,
            sub_path: None,
        }],
        devices: vec![DeviceInfo {
            path_on_host: "/dev/nvidia0".into(),
            path_in_container: "/dev/nvidia0".into(),
            permissions: "rw".into(),
        }],
        annotations: vec![crate::kubelet::container::Annotation {
            name: "a".into(),
            value: "b".into(),
        }],
        ..Default::default()
    };
    prm.block_devices = vec![DeviceInfo {
        path_on_host: "/dev/sdb".into(),
        path_in_container: "/dev/xvda".into(),
        permissions: "mrw".into(),
    }];
    let opts = generate_run_container_options(&p, &c, prm).expect("opts");
    let envs: Vec<&str> = opts.envs.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(envs, vec!["DEV", "MINE"]);
    let mounts: Vec<&str> = opts
        .mounts
        .iter()
        .map(|m| m.container_path.as_str())
        .collect();
    assert_eq!(mounts, vec!["/usr/local/nvidia", "/data", "/etc/hosts"]);
    // The device plugin's env feeds subPathExpr.
    assert!(
        opts.mounts[1].host_path.ends_with("/data/gpu0"),
        "{}",
        opts.mounts[1].host_path
    );
    let devices: Vec<&str> = opts
        .devices
        .iter()
        .map(|d| d.path_on_host.as_str())
        .collect();
    assert_eq!(devices, vec!["/dev/nvidia0", "/dev/sdb"]);
    assert_eq!(opts.annotations.len(), 1);
}
