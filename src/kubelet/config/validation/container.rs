//! Containers and init containers: names, images, ports, env, mounts,
//! devices, probes, lifecycle handlers, pull policy, resources and the
//! container security context.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, SecurityContext, VolumeMount};

use super::env::{validate_env, validate_env_from};
use super::field::{ErrorList, FieldError};
use super::names::{is_dns1123_label, is_valid_id, is_valid_port_name, is_valid_port_num};
use super::probe::{validate_lifecycle_handler, validate_probe};
use super::resources::validate_resource_requirements;
use super::volume::{VolumeKinds, validate_local_descending_path, validate_path_no_backsteps};

/// The regular containers of a pod.
pub fn validate_containers(containers: &[Container], volumes: &VolumeKinds, errs: &mut ErrorList) {
    let base = "spec.containers";
    if containers.is_empty() {
        errs.push(FieldError::required(base, ""));
        return;
    }
    let mut names = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let path = format!("{base}[{i}]");
        validate_container_common(c, volumes, &path, errs);
        if !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{path}.name"), &c.name));
        }
        if let Some(lifecycle) = &c.lifecycle {
            for (name, handler) in [
                ("postStart", &lifecycle.post_start),
                ("preStop", &lifecycle.pre_stop),
            ] {
                if let Some(h) = handler {
                    validate_lifecycle_handler(h, &format!("{path}.lifecycle.{name}"), errs);
                }
            }
        }
        validate_probe(
            c.liveness_probe.as_ref(),
            &format!("{path}.livenessProbe"),
            errs,
        );
        if let Some(p) = &c.liveness_probe {
            let threshold = p.success_threshold.unwrap_or(0);
            if threshold != 1 {
                errs.push(FieldError::invalid(
                    format!("{path}.livenessProbe.successThreshold"),
                    threshold,
                    "must be 1",
                ));
            }
        }
        validate_probe(
            c.readiness_probe.as_ref(),
            &format!("{path}.readinessProbe"),
            errs,
        );
        if let Some(grace) = c
            .readiness_probe
            .as_ref()
            .and_then(|p| p.termination_grace_period_seconds)
        {
            errs.push(FieldError::invalid(
                format!("{path}.readinessProbe.terminationGracePeriodSeconds"),
                grace,
                "must not be set for readinessProbes",
            ));
        }
        validate_probe(
            c.startup_probe.as_ref(),
            &format!("{path}.startupProbe"),
            errs,
        );
        if let Some(p) = &c.startup_probe {
            let threshold = p.success_threshold.unwrap_or(0);
            if threshold != 1 {
                errs.push(FieldError::invalid(
                    format!("{path}.startupProbe.successThreshold"),
                    threshold,
                    "must be 1",
                ));
            }
        }
    }
    let mut host_ports = HashSet::new();
    accumulate_unique_host_ports(containers, &mut host_ports, base, errs);
}

/// Init containers: names unique across both lists, no lifecycle or probes.
pub fn validate_init_containers(
    init: &[Container],
    regular: &[Container],
    volumes: &VolumeKinds,
    errs: &mut ErrorList,
) {
    let base = "spec.initContainers";
    let mut names: HashSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in init.iter().enumerate() {
        let path = format!("{base}[{i}]");
        validate_container_common(c, volumes, &path, errs);
        if names.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{path}.name"), &c.name));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }
        // Init containers run one at a time, so each is checked on its own.
        let mut host_ports = HashSet::new();
        accumulate_unique_host_ports(std::slice::from_ref(c), &mut host_ports, base, errs);
        let forbidden = [
            ("lifecycle", c.lifecycle.is_some()),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("readinessProbe", c.readiness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ];
        for (field, set) in forbidden {
            if set {
                errs.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "may not be set for init containers",
                ));
            }
        }
    }
}

fn validate_container_common(
    c: &Container,
    volumes: &VolumeKinds,
    path: &str,
    errs: &mut ErrorList,
) {
    if c.name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        errs.invalid_each(&format!("{path}.name"), &c.name, is_dns1123_label(&c.name));
    }
    let image = c.image.as_deref().unwrap_or("");
    if image.is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    match c.termination_message_policy.as_deref().unwrap_or("") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(
            format!("{path}.terminationMessagePolicy"),
            "must be 'File' or 'FallbackToLogsOnError'",
        )),
        other => errs.push(FieldError::not_supported(
            format!("{path}.terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    let mounts = c.volume_mounts.as_deref().unwrap_or(&[]);
    let devices: BTreeMap<&str, &str> = c
        .volume_devices
        .iter()
        .flatten()
        .map(|d| (d.name.as_str(), d.device_path.as_str()))
        .collect();
    let mount_map: BTreeMap<&str, &str> = mounts
        .iter()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    validate_ports(c, path, errs);
    validate_env(
        c.env.as_deref().unwrap_or(&[]),
        &format!("{path}.env"),
        errs,
    );
    validate_env_from(
        c.env_from.as_deref().unwrap_or(&[]),
        &format!("{path}.envFrom"),
        errs,
    );
    validate_volume_mounts(
        mounts,
        &devices,
        volumes,
        c,
        &format!("{path}.volumeMounts"),
        errs,
    );
    validate_volume_devices(
        c,
        &mount_map,
        volumes,
        &format!("{path}.volumeDevices"),
        errs,
    );
    match c.image_pull_policy.as_deref().unwrap_or("") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(format!("{path}.imagePullPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            format!("{path}.imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    if let Some(resources) = &c.resources {
        validate_resource_requirements(resources, &format!("{path}.resources"), errs);
    }
    if let Some(sc) = &c.security_context {
        validate_security_context(sc, &format!("{path}.securityContext"), errs);
    }
    // validateContainersOnlyForPod
    if image.len() != image.trim().len() {
        errs.push(FieldError::invalid(
            format!("{path}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
}

fn validate_ports(c: &Container, path: &str, errs: &mut ErrorList) {
    let mut names = HashSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let p = format!("{path}.ports[{i}]");
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                errs.invalid_each(&format!("{p}.name"), name, msgs);
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(format!("{p}.containerPort"), ""));
        } else {
            for m in is_valid_port_num(port.container_port.into()) {
                errs.push(FieldError::invalid(
                    format!("{p}.containerPort"),
                    port.container_port,
                    m,
                ));
            }
        }
        if let Some(host_port) = port.host_port.filter(|&h| h != 0) {
            for m in is_valid_port_num(host_port.into()) {
                errs.push(FieldError::invalid(format!("{p}.hostPort"), host_port, m));
            }
        }
        match port.protocol.as_deref().unwrap_or("") {
            "" => errs.push(FieldError::required(format!("{p}.protocol"), "")),
            "TCP" | "UDP" | "SCTP" => {}
            other => errs.push(FieldError::not_supported(
                format!("{p}.protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

fn accumulate_unique_host_ports(
    containers: &[Container],
    seen: &mut HashSet<String>,
    base: &str,
    errs: &mut ErrorList,
) {
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in c.ports.iter().flatten().enumerate() {
            let Some(host_port) = port.host_port.filter(|&h| h != 0) else {
                continue;
            };
            let key = format!(
                "{}/{}/{}",
                port.protocol.as_deref().unwrap_or(""),
                port.host_ip.as_deref().unwrap_or(""),
                host_port
            );
            if !seen.insert(key.clone()) {
                errs.push(FieldError::duplicate(
                    format!("{base}[{ci}].ports[{pi}].hostPort"),
                    key,
                ));
            }
        }
    }
}

fn validate_volume_mounts(
    mounts: &[VolumeMount],
    devices: &BTreeMap<&str, &str>,
    volumes: &VolumeKinds,
    container: &Container,
    base: &str,
    errs: &mut ErrorList,
) {
    let mut mount_points = HashSet::new();
    for (i, m) in mounts.iter().enumerate() {
        let path = format!("{base}[{i}]");
        if m.name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        if !volumes.contains(&m.name) {
            errs.push(FieldError::not_found(format!("{path}.name"), &m.name));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(format!("{path}.mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                format!("{path}.mountPath"),
                &m.mount_path,
                "must be unique",
            ));
        }
        if devices.contains_key(m.name.as_str()) {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &m.name,
                "must not already exist in volumeDevices",
            ));
        }
        if devices.values().any(|p| *p == m.mount_path) {
            errs.push(FieldError::invalid(
                format!("{path}.mountPath"),
                &m.mount_path,
                "must not already exist as a path in volumeDevices",
            ));
        }
        let sub_path = m.sub_path.as_deref().unwrap_or("");
        if !sub_path.is_empty() {
            validate_local_descending_path(sub_path, &format!("{base}.subPath"), errs);
        }
        if let Some(expr) = m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.subPathExpr"),
                    expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            validate_local_descending_path(expr, &format!("{base}.subPathExpr"), errs);
        }
        if let Some(propagation) = &m.mount_propagation {
            let p = format!("{base}.mountPropagation");
            if !["Bidirectional", "HostToContainer", "None"].contains(&propagation.as_str()) {
                errs.push(FieldError::not_supported(
                    &p,
                    propagation,
                    &["Bidirectional", "HostToContainer", "None"],
                ));
            }
            let privileged = container
                .security_context
                .as_ref()
                .and_then(|s| s.privileged)
                .unwrap_or(false);
            if propagation == "Bidirectional" && !privileged {
                errs.push(FieldError::forbidden(
                    &p,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
    }
}

fn validate_volume_devices(
    c: &Container,
    mounts: &BTreeMap<&str, &str>,
    volumes: &VolumeKinds,
    base: &str,
    errs: &mut ErrorList,
) {
    let mut paths = HashSet::new();
    let mut names = HashSet::new();
    for (i, d) in c.volume_devices.iter().flatten().enumerate() {
        let path = format!("{base}[{i}]");
        if d.name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        if names.contains(d.name.as_str()) {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &d.name,
                "must be unique",
            ));
        }
        match volumes.is_block_capable(&d.name) {
            Some(false) => errs.push(FieldError::invalid(
                format!("{path}.name"),
                &d.name,
                "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
            )),
            Some(true) => {}
            None => errs.push(FieldError::not_found(format!("{path}.name"), &d.name)),
        }
        if d.device_path.is_empty() {
            errs.push(FieldError::required(format!("{path}.devicePath"), ""));
        }
        if paths.contains(d.device_path.as_str()) {
            errs.push(FieldError::invalid(
                format!("{path}.devicePath"),
                &d.device_path,
                "must be unique",
            ));
        }
        let mut backsteps = ErrorList::default();
        validate_path_no_backsteps(&d.device_path, "", &mut backsteps);
        if !d.device_path.is_empty() && !backsteps.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.devicePath"),
                &d.device_path,
                "can not contain backsteps ('..')",
            ));
        } else {
            paths.insert(d.device_path.as_str());
        }
        if mounts.contains_key(d.name.as_str()) {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &d.name,
                "must not already exist in volumeMounts",
            ));
        }
        if mounts.values().any(|p| *p == d.device_path) {
            errs.push(FieldError::invalid(
                format!("{path}.devicePath"),
                &d.device_path,
                "must not already exist as a path in volumeMounts",
            ));
        }
        if !d.name.is_empty() {
            names.insert(d.name.as_str());
        }
    }
}

fn validate_security_context(sc: &SecurityContext, path: &str, errs: &mut ErrorList) {
    for (field, id) in [
        ("runAsUser", sc.run_as_user),
        ("runAsGroup", sc.run_as_group),
    ] {
        if let Some(id) = id {
            for m in is_valid_id(id) {
                errs.push(FieldError::invalid(format!("{path}.{field}"), id, m));
            }
        }
    }
    if let Some(proc_mount) = sc.proc_mount.as_deref()
        && proc_mount != "Default"
        && proc_mount != "Unmasked"
    {
        errs.push(FieldError::not_supported(
            format!("{path}.procMount"),
            proc_mount,
            &["Default", "Unmasked"],
        ));
    }
    if let Some(profile) = &sc.seccomp_profile {
        validate_seccomp_profile(
            &profile.type_,
            profile.localhost_profile.as_deref(),
            &format!("{path}.seccompProfile"),
            errs,
        );
    }
    if sc.allow_privilege_escalation == Some(false) {
        let rendered = super::field::BadValue::Other(serde_json::to_string(sc).unwrap_or_default());
        if sc.privileged == Some(true) {
            errs.push(FieldError::invalid(
                path,
                rendered.clone(),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds_sys_admin = sc
            .capabilities
            .as_ref()
            .and_then(|c| c.add.as_ref())
            .is_some_and(|add| add.iter().any(|c| c == "CAP_SYS_ADMIN"));
        if adds_sys_admin {
            errs.push(FieldError::invalid(
                path,
                rendered,
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
}

/// A seccompProfile field of a pod or container security context.
pub fn validate_seccomp_profile(
    type_: &str,
    localhost: Option<&str>,
    path: &str,
    errs: &mut ErrorList,
) {
    match type_ {
        "Localhost" | "RuntimeDefault" | "Unconfined" => {}
        "" => errs.push(FieldError::required(
            format!("{path}.type"),
            "type is required when seccompProfile is set",
        )),
        other => errs.push(FieldError::not_supported(
            format!("{path}.type"),
            other,
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
    if type_ == "Localhost" {
        match localhost {
            None => errs.push(FieldError::required(
                format!("{path}.localhostProfile"),
                "must be set when seccomp type is Localhost",
            )),
            Some(p) => validate_local_descending_path(p, &format!("{path}.localhostProfile"), errs),
        }
    } else if let Some(p) = localhost {
        errs.push(FieldError::invalid(
            format!("{path}.localhostProfile"),
            p,
            "can only be set when seccomp type is Localhost",
        ));
    }
}
