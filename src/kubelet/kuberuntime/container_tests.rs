//! Unit tests for container configs (the reference pods are compared in
//! tests/cri_config_reference.rs).

use super::*;
use crate::kubelet::container::{DeviceInfo, EnvVar};
use serde_json::json;

fn pod(container: serde_json::Value) -> (Pod, Container) {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": [container], "securityContext": {}}
    }))
    .expect("pod");
    let c = p.spec.as_ref().expect("spec").containers[0].clone();
    (p, c)
}

fn settings() -> RuntimeSettings {
    RuntimeSettings {
        memory_capacity: 4 << 30,
        hugepage_sizes: vec!["2MB".into()],
        ..Default::default()
    }
}

#[test]
fn fields_from_spec_and_options() {
    let (p, c) = pod(
        json!({"name": "app", "image": "busybox", "command": ["sh", "-c", "echo $(GREETING)"],
        "args": ["$(MISSING)", "$$(GREETING)"], "workingDir": "/w", "stdin": true, "stdinOnce": true, "tty": true,
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"cpu": "1", "hugepages-2Mi": "4Mi"}}}),
    );
    let opts = RunContainerOptions {
        envs: vec![EnvVar::new("GREETING", "hi")],
        devices: vec![DeviceInfo {
            path_on_host: "/dev/fuse".into(),
            path_in_container: "/dev/fuse".into(),
            permissions: "rwm".into(),
        }],
        pod_container_dir: Some(PathBuf::from("/var/lib/kubelet/pods/u1/containers/app")),
        ..Default::default()
    };
    let s = settings();
    let user = ImageUser::root();
    let params = ContainerParams {
        restart_count: 3,
        image_ref: "sha256:abc",
        image_user: &user,
        opts: &opts,
        ns_target_container_id: None,
        extra_supplemental_groups: &[],
        settings: &s,
    };
    let g = generate_container_config(&c, &p, &params).expect("config");
    let cfg = &g.config;
    assert_eq!(
        cfg.metadata,
        Some(ContainerMetadata {
            name: "app".into(),
            attempt: 3
        })
    );
    assert_eq!(
        cfg.image.as_ref().map(|i| i.image.as_str()),
        Some("sha256:abc")
    );
    assert_eq!(cfg.command, vec!["sh", "-c", "echo hi"]);
    assert_eq!(cfg.args, vec!["$(MISSING)", "$(GREETING)"]);
    assert_eq!(cfg.working_dir, "/w");
    assert_eq!(
        cfg.envs,
        vec![KeyValue {
            key: "GREETING".into(),
            value: "hi".into()
        }]
    );
    assert_eq!(cfg.devices.len(), 1);
    assert_eq!(cfg.log_path, "app/3.log");
    assert!(cfg.stdin && cfg.stdin_once && cfg.tty);
    assert_eq!(
        cfg.annotations
            .get("io.kubernetes.container.restartCount")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        g.log_directory,
        PathBuf::from("/var/log/pods/ns_web_u1/app")
    );

    let tlog = g.termination_log.clone().expect("termination log");
    let file = tlog.file_name().and_then(|f| f.to_str()).expect("name");
    assert_eq!(
        tlog.parent(),
        Some(std::path::Path::new(
            "/var/lib/kubelet/pods/u1/containers/app"
        ))
    );
    assert!(
        file.len() == 8
            && file
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "{file}"
    );
    let last = cfg.mounts.last().expect("mount");
    assert_eq!(
        (
            last.container_path.as_str(),
            last.host_path.as_str(),
            last.readonly
        ),
        ("/dev/termination-log", tlog.to_str().expect("utf8"), false)
    );

    let linux = cfg.linux.clone().expect("linux");
    let r = linux.resources.expect("resources");
    assert_eq!(
        (
            r.cpu_shares,
            r.cpu_quota,
            r.cpu_period,
            r.memory_limit_in_bytes
        ),
        (256, 100_000, 100_000, 0)
    );
    // Burstable, 1Gi of 4Gi requested.
    assert_eq!(r.oom_score_adj, 750);
    assert_eq!(
        r.hugepage_limits
            .iter()
            .map(|h| (h.page_size.as_str(), h.limit))
            .collect::<Vec<_>>(),
        vec![("2MB", 4 << 20)]
    );
}

#[test]
fn ephemeral_target_and_non_root() {
    let (p, c) = pod(json!({"name": "dbg"}));
    let opts = RunContainerOptions::default();
    let s = settings();
    let user = ImageUser::root();
    let mut params = ContainerParams {
        restart_count: 0,
        image_ref: "img",
        image_user: &user,
        opts: &opts,
        ns_target_container_id: Some("abc123"),
        extra_supplemental_groups: &[],
        settings: &s,
    };
    let g = generate_container_config(&c, &p, &params).expect("config");
    let ns = g
        .config
        .linux
        .and_then(|l| l.security_context)
        .and_then(|s| s.namespace_options)
        .expect("ns");
    assert_eq!(
        (ns.pid, ns.target_id.as_str()),
        (NamespaceMode::Target as i32, "abc123")
    );
    assert!(g.termination_log.is_none());
    assert!(g.config.mounts.is_empty());

    let (p, c) = pod(json!({"name": "c", "securityContext": {"runAsNonRoot": true}}));
    params.ns_target_container_id = None;
    let err = generate_container_config(&c, &p, &params).expect_err("root image");
    assert_eq!(err.reason(), "CreateContainerConfigError");
    assert!(err.to_string().contains("image will run as root"), "{err}");
}

#[test]
fn selinux_relabel_only_when_enabled() {
    let (p, c) = pod(json!({"name": "c", "terminationMessagePath": "/t"}));
    let opts = RunContainerOptions {
        mounts: vec![crate::kubelet::container::Mount {
            name: "v".into(),
            container_path: "/v".into(),
            host_path: "/h".into(),
            read_only: true,
            selinux_relabel: true,
            propagation: crate::cri::api::MountPropagation::PropagationBidirectional,
            sub_path: None,
        }],
        pod_container_dir: Some(PathBuf::from("/d")),
        ..Default::default()
    };
    let user = ImageUser::root();
    for enabled in [false, true] {
        let s = RuntimeSettings {
            selinux_enabled: enabled,
            ..settings()
        };
        let params = ContainerParams {
            restart_count: 0,
            image_ref: "img",
            image_user: &user,
            opts: &opts,
            ns_target_container_id: None,
            extra_supplemental_groups: &[],
            settings: &s,
        };
        let g = generate_container_config(&c, &p, &params).expect("config");
        let relabels: Vec<bool> = g.config.mounts.iter().map(|m| m.selinux_relabel).collect();
        assert_eq!(relabels, vec![enabled, enabled]);
        assert_eq!(
            g.config.mounts[0].propagation,
            crate::cri::api::MountPropagation::PropagationBidirectional as i32
        );
        assert!(g.config.mounts[0].readonly);
    }
}
