//! Table tests for container security contexts.

use super::*;
use crate::cri::api::security_profile::ProfileType;
use serde_json::json;

fn pod(
    pod_sc: serde_json::Value,
    container_sc: serde_json::Value,
    extra_spec: serde_json::Value,
) -> (Pod, Container) {
    let mut c = json!({"name": "c"});
    if !container_sc.is_null() {
        c["securityContext"] = container_sc;
    }
    let mut spec = json!({"containers": [c]});
    if !pod_sc.is_null() {
        spec["securityContext"] = pod_sc;
    }
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    let p: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}),
    )
    .expect("pod");
    let c = p.spec.as_ref().expect("spec").containers[0].clone();
    (p, c)
}

#[test]
fn effective_context_table() {
    let cases: Vec<(
        &str,
        serde_json::Value,
        serde_json::Value,
        serde_json::Value,
    )> = vec![
        ("none", json!(null), json!(null), json!({})),
        (
            "pod only: only user, group, nonroot, selinux carried",
            json!({"runAsUser": 1, "runAsGroup": 2, "runAsNonRoot": true, "fsGroup": 3,
                "seLinuxOptions": {"level": "s0"}, "seccompProfile": {"type": "RuntimeDefault"}}),
            json!(null),
            json!({"runAsUser": 1, "runAsGroup": 2, "runAsNonRoot": true, "seLinuxOptions": {"level": "s0"}}),
        ),
        (
            "container only",
            json!(null),
            json!({"privileged": true, "runAsUser": 5}),
            json!({"privileged": true, "runAsUser": 5}),
        ),
        (
            "container overrides pod",
            json!({"runAsUser": 1, "runAsGroup": 2, "seLinuxOptions": {"level": "s0"}}),
            json!({"runAsUser": 10, "seLinuxOptions": {"type": "t"}, "allowPrivilegeEscalation": false,
                "procMount": "Unmasked", "capabilities": {"add": ["NET_ADMIN"]}, "readOnlyRootFilesystem": true}),
            json!({"runAsUser": 10, "runAsGroup": 2, "seLinuxOptions": {"type": "t"}, "allowPrivilegeEscalation": false,
                "procMount": "Unmasked", "capabilities": {"add": ["NET_ADMIN"]}, "readOnlyRootFilesystem": true}),
        ),
    ];
    for (name, psc, csc, want) in cases {
        let (p, c) = pod(psc, csc, json!({}));
        let want: SecurityContext = serde_json::from_value(want).expect("sc");
        assert_eq!(
            determine_effective_security_context(&p, &c),
            want,
            "case {name}"
        );
    }
}

#[test]
fn linux_context_defaults_match_reference() {
    // Pod security context {} and a root image, as in the reference pods.
    let (p, c) = pod(json!({}), json!(null), json!({}));
    let sc = determine_effective_linux_security_context(
        &p,
        &c,
        &ImageUser::root(),
        &RuntimeSettings::default(),
        &[],
    );
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 0 }));
    assert_eq!(sc.masked_paths, masked_paths(None));
    assert_eq!(sc.readonly_paths.len(), 6);
    assert_eq!(
        sc.namespace_options.as_ref().map(|n| n.pid),
        Some(NamespaceMode::Container as i32)
    );
    assert_eq!(
        sc.seccomp.as_ref().map(|s| s.profile_type),
        Some(ProfileType::Unconfined as i32)
    );
    #[allow(deprecated)]
    {
        assert_eq!(sc.seccomp_profile_path, "");
        assert_eq!(sc.apparmor_profile, "");
    }
    assert!(!sc.privileged && !sc.no_new_privs && !sc.readonly_rootfs);
    assert!(sc.capabilities.is_none() && sc.selinux_options.is_none());
    assert!(sc.supplemental_groups.is_empty());
}

#[test]
fn linux_context_table() {
    let settings = RuntimeSettings {
        seccomp_default: true,
        ..Default::default()
    };
    let (p, c) = pod(
        json!({"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [3000, 3001],
            "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
        json!({"allowPrivilegeEscalation": false, "privileged": false, "procMount": "Unmasked",
            "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}, "runAsGroup": 7,
            "seLinuxOptions": {"user": "u", "role": "r", "type": "t", "level": "l"}}),
        json!({"hostPID": true, "hostIPC": true, "hostNetwork": true}),
    );
    let sc =
        determine_effective_linux_security_context(&p, &c, &ImageUser::root(), &settings, &[42]);
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 1000 }));
    assert_eq!(sc.run_as_group, Some(Int64Value { value: 7 }));
    assert_eq!(sc.supplemental_groups, vec![2000, 3000, 3001, 42]);
    assert!(sc.no_new_privs);
    assert!(sc.masked_paths.is_empty() && sc.readonly_paths.is_empty());
    let caps = sc.capabilities.clone().expect("caps");
    assert_eq!(
        (caps.add_capabilities, caps.drop_capabilities),
        (vec!["NET_ADMIN".to_string()], vec!["ALL".to_string()])
    );
    assert_eq!(
        sc.selinux_options.as_ref().map(|s| s.r#type.as_str()),
        Some("t")
    );
    let ns = sc.namespace_options.clone().expect("ns");
    assert_eq!(
        (ns.network, ns.pid, ns.ipc),
        (
            NamespaceMode::Node as i32,
            NamespaceMode::Node as i32,
            NamespaceMode::Node as i32
        )
    );
    let seccomp = sc.seccomp.clone().expect("seccomp");
    assert_eq!(seccomp.profile_type, ProfileType::Localhost as i32);
    assert_eq!(seccomp.localhost_ref, "/var/lib/kubelet/seccomp/p.json");
    #[allow(deprecated)]
    {
        assert_eq!(
            sc.seccomp_profile_path,
            "localhost//var/lib/kubelet/seccomp/p.json"
        );
    }

    // A named image user is passed through when no runAsUser is set.
    let (p, c) = pod(
        json!(null),
        json!(null),
        json!({"shareProcessNamespace": true}),
    );
    let user = ImageUser {
        uid: None,
        username: "www".into(),
    };
    let sc =
        determine_effective_linux_security_context(&p, &c, &user, &RuntimeSettings::default(), &[]);
    assert_eq!(sc.run_as_user, None);
    assert_eq!(sc.run_as_username, "www");
    assert_eq!(
        sc.namespace_options.map(|n| n.pid),
        Some(NamespaceMode::Pod as i32)
    );
}

#[test]
fn run_as_non_root_table() {
    let named = ImageUser {
        uid: None,
        username: "www".into(),
    };
    let uid1 = ImageUser {
        uid: Some(1),
        username: String::new(),
    };
    let none = ImageUser::default();
    let cases: Vec<(&str, serde_json::Value, serde_json::Value, ImageUser, bool)> = vec![
        (
            "not required",
            json!(null),
            json!(null),
            ImageUser::root(),
            true,
        ),
        (
            "required, explicit root",
            json!({"runAsNonRoot": true}),
            json!({"runAsUser": 0}),
            uid1.clone(),
            false,
        ),
        (
            "required, explicit non-root beats root image",
            json!({"runAsNonRoot": true}),
            json!({"runAsUser": 5}),
            ImageUser::root(),
            true,
        ),
        (
            "required, root image",
            json!(null),
            json!({"runAsNonRoot": true}),
            ImageUser::root(),
            false,
        ),
        (
            "required, non-root image",
            json!(null),
            json!({"runAsNonRoot": true}),
            uid1,
            true,
        ),
        (
            "required, named image user",
            json!(null),
            json!({"runAsNonRoot": true}),
            named,
            false,
        ),
        (
            "required, no image info",
            json!(null),
            json!({"runAsNonRoot": true}),
            none,
            true,
        ),
        (
            "container turns it off",
            json!({"runAsNonRoot": true}),
            json!({"runAsNonRoot": false}),
            ImageUser::root(),
            true,
        ),
    ];
    for (name, psc, csc, user, ok) in cases {
        let (p, c) = pod(psc, csc, json!({}));
        assert_eq!(
            verify_run_as_non_root(&p, &c, &user).is_ok(),
            ok,
            "case {name}"
        );
    }
}
