//! The pod spec outside the containers and volumes: policies, scheduling
//! fields, DNS, tolerations, host aliases, the pod security context, and the
//! checks the API server only makes for pods (not templates).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, Pod, PodDNSConfig, PodSecurityContext, PodSpec,
    Toleration,
};

use super::container::{validate_containers, validate_init_containers, validate_seccomp_profile};
use super::field::{BadValue, ErrorList, FieldError};
use super::meta::validate_labels;
use super::names::{
    inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_ip, is_qualified_name,
    is_valid_id, is_valid_label_value,
};
use super::resources::{validate_overhead, validate_single_huge_page_size};
use super::volume::validate_volumes;

const MAX_DNS_NAMESERVERS: usize = 3;
const MAX_DNS_SEARCH_PATHS: usize = 6;
const MAX_DNS_SEARCH_LIST_CHARS: usize = 256;
const SYSCTL_FMT: &str = "([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?";

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

pub fn validate_pod_spec(spec: &PodSpec, errs: &mut ErrorList, pod_name: &str) {
    let volumes = validate_volumes(spec.volumes.as_deref().unwrap_or(&[]), pod_name, errs);
    validate_containers(&spec.containers, &volumes, errs);
    validate_init_containers(
        spec.init_containers.as_deref().unwrap_or(&[]),
        &spec.containers,
        &volumes,
        errs,
    );
    match opt(&spec.restart_policy) {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required("spec.restartPolicy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.restartPolicy",
            other,
            &["Always", "OnFailure", "Never"],
        )),
    }
    let dns_policy = opt(&spec.dns_policy);
    match dns_policy {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None" => {}
        "" => errs.push(FieldError::required("spec.dnsPolicy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.dnsPolicy",
            other,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    if let Some(selector) = &spec.node_selector {
        validate_labels(selector, "spec.nodeSelector", errs);
    }
    validate_pod_security_context(spec, errs);
    if let Some(node_affinity) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
    {
        let base = "spec.affinity.nodeAffinity";
        if let Some(required) = &node_affinity.required_during_scheduling_ignored_during_execution {
            let terms_path =
                format!("{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
            if required.node_selector_terms.is_empty() {
                errs.push(FieldError::required(
                    &terms_path,
                    "must have at least one node selector term",
                ));
            }
            for (i, term) in required.node_selector_terms.iter().enumerate() {
                validate_node_selector_term(term, &format!("{terms_path}[{i}]"), errs);
            }
        }
        for (i, term) in node_affinity
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let p = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            if !(1..=100).contains(&term.weight) {
                errs.push(FieldError::invalid(
                    format!("{p}.weight"),
                    term.weight,
                    "must be in the range 1-100",
                ));
            }
            validate_node_selector_term(&term.preference, &format!("{p}.preference"), errs);
        }
    }
    validate_dns_config(spec.dns_config.as_ref(), dns_policy, errs);
    for (i, gate) in spec.readiness_gates.iter().flatten().enumerate() {
        let p = format!("spec.readinessGates[{i}].conditionType");
        errs.invalid_each(
            &p,
            &gate.condition_type,
            is_qualified_name(&gate.condition_type),
        );
    }
    validate_topology_spread(spec, errs);
    for (field, value) in [
        ("spec.serviceAccountName", &spec.service_account_name),
        ("spec.nodeName", &spec.node_name),
        ("spec.priorityClassName", &spec.priority_class_name),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            errs.invalid_each(field, v, is_dns1123_subdomain(v));
        }
    }
    if let Some(deadline) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&deadline)
    {
        errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            deadline,
            inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }
    for (field, value) in [
        ("spec.hostname", &spec.hostname),
        ("spec.subdomain", &spec.subdomain),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            errs.invalid_each(field, v, is_dns1123_label(v));
        }
    }
    validate_tolerations(spec.tolerations.as_deref().unwrap_or(&[]), errs);
    for alias in spec.host_aliases.iter().flatten() {
        if !is_ip(&alias.ip) {
            errs.push(FieldError::invalid(
                "spec.hostAliases.ip",
                &alias.ip,
                "must be valid IP address",
            ));
        }
        for hostname in alias.hostnames.iter().flatten() {
            errs.invalid_each(
                "spec.hostAliases.hostnames",
                hostname,
                is_dns1123_subdomain(hostname),
            );
        }
    }
    if let Some(runtime_class) = &spec.runtime_class_name {
        errs.invalid_each(
            "spec.runtimeClassName",
            runtime_class,
            is_dns1123_subdomain(runtime_class),
        );
    }
    if let Some(policy) = spec.preemption_policy.as_deref()
        && policy != "Never"
        && policy != "PreemptLowerPriority"
    {
        errs.push(FieldError::not_supported(
            "spec.preemptionPolicy",
            policy,
            &["Never", "PreemptLowerPriority"],
        ));
    }
    if let Some(overhead) = &spec.overhead {
        validate_overhead(overhead, errs);
    }
    if let Some(os) = &spec.os {
        if os.name.is_empty() {
            errs.push(FieldError::required("spec.os.name", "cannot be empty"));
        } else if os.name != "linux" && os.name != "windows" {
            errs.push(FieldError::not_supported(
                "spec.os",
                &os.name,
                &["linux", "windows"],
            ));
        }
    }
}

/// Checks the API server makes only for pods.
pub fn validate_pod_only(spec: &PodSpec, errs: &mut ErrorList) {
    if spec
        .service_account_name
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        for (vi, volume) in spec.volumes.iter().flatten().enumerate() {
            for (si, source) in volume
                .projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten())
                .enumerate()
            {
                if source.service_account_token.is_some() {
                    errs.push(FieldError::forbidden(
                        format!("spec.volumes[{vi}].projected.sources[{si}].serviceAccountToken"),
                        "must not be specified when serviceAccountName is not set",
                    ));
                }
            }
        }
    }
    validate_single_huge_page_size(spec, errs);
}

/// status.podIPs, if the manifest sets them.
pub fn validate_pod_ips(pod: &Pod, errs: &mut ErrorList) {
    let ips: Vec<&str> = pod
        .status
        .iter()
        .flat_map(|s| s.pod_ips.iter().flatten())
        .map(|ip| ip.ip.as_str())
        .collect();
    for (i, ip) in ips.iter().enumerate() {
        if ip.parse::<std::net::IpAddr>().is_err() {
            errs.push(FieldError::invalid(
                format!("status.podIPs[{i}]"),
                *ip,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    if ips.len() > 1 {
        let v4 = ips
            .iter()
            .filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
            .count();
        if v4 > 1 || ips.len() - v4 > 1 {
            let rendered: Vec<String> = ips.iter().map(|s| s.to_string()).collect();
            errs.push(FieldError::invalid(
                "status.podIPs",
                BadValue::strings(&rendered),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
}

fn validate_node_selector_term(term: &NodeSelectorTerm, path: &str, errs: &mut ErrorList) {
    for (j, req) in term.match_expressions.iter().flatten().enumerate() {
        validate_node_selector_requirement(req, &format!("{path}.matchExpressions[{j}]"), errs);
    }
    for (j, req) in term.match_fields.iter().flatten().enumerate() {
        let p = format!("{path}.matchFields[{j}]");
        let values = req.values.as_deref().unwrap_or(&[]);
        match req.operator.as_str() {
            "In" | "NotIn" => {
                if values.len() != 1 {
                    errs.push(FieldError::required(
                        format!("{p}.values"),
                        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                format!("{p}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        if req.key != "metadata.name" {
            errs.push(FieldError::invalid(
                format!("{p}.key"),
                &req.key,
                "not a valid field selector key",
            ));
        } else {
            for (i, v) in values.iter().enumerate() {
                errs.invalid_each(&format!("{p}.values[{i}]"), v, is_dns1123_subdomain(v));
            }
        }
    }
}

fn validate_node_selector_requirement(
    req: &NodeSelectorRequirement,
    path: &str,
    errs: &mut ErrorList,
) {
    let count = req.values.as_ref().map_or(0, Vec::len);
    match req.operator.as_str() {
        "In" | "NotIn" if count == 0 => errs.push(FieldError::required(
            format!("{path}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if count > 0 => errs.push(FieldError::forbidden(
            format!("{path}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if count != 1 => errs.push(FieldError::required(
            format!("{path}.values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        other => errs.push(FieldError::invalid(
            format!("{path}.operator"),
            other,
            "not a valid selector operator",
        )),
    }
    errs.invalid_each(
        &format!("{path}.key"),
        &req.key,
        is_qualified_name(&req.key),
    );
}

fn validate_dns_config(config: Option<&PodDNSConfig>, policy: &str, errs: &mut ErrorList) {
    let base = "spec.dnsConfig";
    if policy == "None" {
        let Some(c) = config else {
            errs.push(FieldError::required(
                base,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
            return;
        };
        if c.nameservers.as_ref().is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(
                format!("{base}.nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            ));
            return;
        }
    }
    let Some(c) = config else { return };
    let nameservers = c.nameservers.as_deref().unwrap_or(&[]);
    if nameservers.len() > MAX_DNS_NAMESERVERS {
        errs.push(FieldError::invalid(
            format!("{base}.nameservers"),
            BadValue::strings(nameservers),
            format!("must not have more than {MAX_DNS_NAMESERVERS} nameservers"),
        ));
    }
    for (i, ns) in nameservers.iter().enumerate() {
        if !is_ip(ns) {
            errs.push(FieldError::invalid(
                format!("{base}.nameservers[{i}]"),
                ns,
                "must be valid IP address",
            ));
        }
    }
    let searches = c.searches.as_deref().unwrap_or(&[]);
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        errs.push(FieldError::invalid(
            format!("{base}.searches"),
            BadValue::strings(searches),
            format!("must not have more than {MAX_DNS_SEARCH_PATHS} search paths"),
        ));
    }
    if searches.join(" ").len() > MAX_DNS_SEARCH_LIST_CHARS {
        errs.push(FieldError::invalid(
            format!("{base}.searches"),
            BadValue::strings(searches),
            format!("must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) in the search list"),
        ));
    }
    for (i, search) in searches.iter().enumerate() {
        let trimmed = search.strip_suffix('.').unwrap_or(search);
        errs.invalid_each(
            &format!("{base}.searches[{i}]"),
            trimmed,
            is_dns1123_subdomain(trimmed),
        );
    }
    for (i, option) in c.options.iter().flatten().enumerate() {
        if option.name.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::required(
                format!("{base}.options[{i}]"),
                "must not be empty",
            ));
        }
    }
}

fn validate_tolerations(tolerations: &[Toleration], errs: &mut ErrorList) {
    for (i, t) in tolerations.iter().enumerate() {
        let path = format!("spec.tolerations[{i}]");
        let key = opt(&t.key);
        let operator = opt(&t.operator);
        let effect = opt(&t.effect);
        let value = opt(&t.value);
        if !key.is_empty() {
            errs.invalid_each(&format!("{path}.key"), key, is_qualified_name(key));
        }
        if key.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                format!("{path}.operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                format!("{path}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{path}.operator"),
                        value,
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    let rendered = serde_json::to_string(t).unwrap_or_default();
                    errs.push(FieldError::invalid(
                        format!("{path}.operator"),
                        BadValue::Other(rendered),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                format!("{path}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
        {
            errs.push(FieldError::not_supported(
                format!("{path}.effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}

fn validate_pod_security_context(spec: &PodSpec, errs: &mut ErrorList) {
    let base = "spec.securityContext";
    if spec.host_network == Some(true) {
        for (list, containers) in [
            ("containers", spec.containers.as_slice()),
            (
                "initContainers",
                spec.init_containers.as_deref().unwrap_or(&[]),
            ),
        ] {
            for (ci, c) in containers.iter().enumerate() {
                for (pi, port) in c.ports.iter().flatten().enumerate() {
                    if port.host_port.unwrap_or(0) != port.container_port {
                        errs.push(FieldError::invalid(
                            format!("spec.{list}[{ci}].ports[{pi}].containerPort"),
                            port.container_port,
                            "must match `hostPort` when `hostNetwork` is true",
                        ));
                    }
                }
            }
        }
    }
    let Some(sc): Option<&PodSecurityContext> = spec.security_context.as_ref() else {
        return;
    };
    for (field, id) in [
        ("fsGroup", sc.fs_group),
        ("runAsUser", sc.run_as_user),
        ("runAsGroup", sc.run_as_group),
    ] {
        if let Some(id) = id {
            for m in is_valid_id(id) {
                errs.push(FieldError::invalid(format!("{base}.{field}"), id, m));
            }
        }
    }
    for (g, gid) in sc.supplemental_groups.iter().flatten().enumerate() {
        for m in is_valid_id(*gid) {
            errs.push(FieldError::invalid(
                format!("{base}.supplementalGroups[{g}]"),
                *gid,
                m,
            ));
        }
    }
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        errs.push(FieldError::invalid(
            format!("{base}.shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    let mut names = HashSet::new();
    for (i, s) in sc.sysctls.iter().flatten().enumerate() {
        let p = format!("{base}.sysctls[{i}].name");
        if s.name.is_empty() {
            errs.push(FieldError::required(&p, ""));
        } else if !is_valid_sysctl_name(&s.name) {
            errs.push(FieldError::invalid(
                &p,
                &s.name,
                format!("must have at most 253 characters and match regex {SYSCTL_FMT}"),
            ));
        } else if names.contains(s.name.as_str()) {
            errs.push(FieldError::duplicate(&p, &s.name));
        }
        names.insert(s.name.as_str());
    }
    if let Some(policy) = sc.fs_group_change_policy.as_deref()
        && policy != "OnRootMismatch"
        && policy != "Always"
    {
        errs.push(FieldError::not_supported(
            format!("{base}.fsGroupChangePolicy"),
            policy,
            &["OnRootMismatch", "Always"],
        ));
    }
    if let Some(profile) = &sc.seccomp_profile {
        validate_seccomp_profile(
            &profile.type_,
            profile.localhost_profile.as_deref(),
            &format!("{base}.seccompProfile"),
            errs,
        );
    }
}

/// Dot- or slash-separated segments of `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`.
fn is_valid_sysctl_name(name: &str) -> bool {
    name.len() <= 253
        && name.split(['.', '/']).all(|seg| {
            let b = seg.as_bytes();
            let end = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty()
                && end(b[0])
                && end(b[b.len() - 1])
                && b.iter().all(|&c| end(c) || c == b'-' || c == b'_')
        })
}

fn validate_topology_spread(spec: &PodSpec, errs: &mut ErrorList) {
    let constraints = spec.topology_spread_constraints.as_deref().unwrap_or(&[]);
    for (i, c) in constraints.iter().enumerate() {
        let p = format!("spec.topologySpreadConstraints[{i}]");
        if c.max_skew <= 0 {
            errs.push(FieldError::invalid(
                format!("{p}.maxSkew"),
                c.max_skew,
                "must be greater than zero",
            ));
        }
        if c.topology_key.is_empty() {
            errs.push(FieldError::required(
                format!("{p}.topologyKey"),
                "can not be empty",
            ));
        }
        let action = c.when_unsatisfiable.as_str();
        if action != "DoNotSchedule" && action != "ScheduleAnyway" {
            errs.push(FieldError::not_supported(
                format!("{p}.whenUnsatisfiable"),
                action,
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        let repeated = constraints[i + 1..].iter().any(|o| {
            o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
        });
        if repeated {
            errs.push(FieldError::duplicate(
                format!("{p}.{{topologyKey, whenUnsatisfiable}}"),
                format!("{{{}, {}}}", c.topology_key, action),
            ));
        }
        if let Some(min) = c.min_domains {
            if min <= 0 {
                errs.push(FieldError::invalid(
                    format!("{p}.minDomains"),
                    min,
                    "must be greater than zero",
                ));
            }
            if action != "DoNotSchedule" {
                errs.push(FieldError::invalid(
                    format!("{p}.minDomains"),
                    min,
                    format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"
                    ),
                ));
            }
        }
        for (field, value) in [
            ("nodeAffinityPolicy", &c.node_affinity_policy),
            ("nodeTaintsPolicy", &c.node_taints_policy),
        ] {
            if let Some(v) = value.as_deref()
                && v != "Honor"
                && v != "Ignore"
            {
                errs.push(FieldError::not_supported(
                    format!("{p}.{field}"),
                    v,
                    &["Honor", "Ignore"],
                ));
            }
        }
    }
}
