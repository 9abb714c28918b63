//! The API server's defaulting of a v1 Pod (the scheme defaults the Go
//! kubelet's decoder applies to static pods): restart and DNS policy,
//! grace period, scheduler name, an empty pod security context, service
//! links, image pull policy by tag, termination message path and policy, port
//! protocols, probe and HTTP action defaults, field selector versions, volume
//! source defaults, and container requests copied from limits.
//!
//! Admission-time fields (priority, preemptionPolicy, service account) are
//! not defaults and are left alone, as the Go kubelet leaves them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerPort, EnvVar, HTTPGetAction, Lifecycle, PodSecurityContext, PodSpec, Probe,
    ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
const TERMINATION_MESSAGE_PATH_DEFAULT: &str = "/dev/termination-log";
/// 0644, the default file mode of secret, configMap, downwardAPI and projected volumes.
const DEFAULT_VOLUME_MODE: i32 = 0o644;
const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;

fn unset(s: &Option<String>) -> bool {
    s.as_deref().is_none_or(str::is_empty)
}

fn set_str(s: &mut Option<String>, value: &str) {
    if unset(s) {
        *s = Some(value.to_string());
    }
}

fn set_int<T: Default + PartialEq + Copy>(v: &mut Option<T>, value: T) {
    if v.is_none_or(|x| x == T::default()) {
        *v = Some(value);
    }
}

/// Container defaults; a macro because Container and EphemeralContainer are
/// distinct types with the same fields.
macro_rules! default_container {
    ($c:expr) => {{
        let c = $c;
        if unset(&c.image_pull_policy) {
            c.image_pull_policy =
                Some(default_pull_policy(c.image.as_deref().unwrap_or("")).into());
        }
        set_str(
            &mut c.termination_message_path,
            TERMINATION_MESSAGE_PATH_DEFAULT,
        );
        set_str(&mut c.termination_message_policy, "File");
        for port in c.ports.iter_mut().flatten() {
            default_port(port);
        }
        for env in c.env.iter_mut().flatten() {
            default_env(env);
        }
        for probe in [
            c.liveness_probe.as_mut(),
            c.readiness_probe.as_mut(),
            c.startup_probe.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            default_probe(probe);
        }
        if let Some(lifecycle) = c.lifecycle.as_mut() {
            default_lifecycle(lifecycle);
        }
    }};
}

/// Applies every v1 Pod default in place.
pub fn set_object_defaults_pod(pod: &mut k8s_openapi::api::core::v1::Pod) {
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    set_defaults_pod(spec);
    set_defaults_pod_spec(spec);
    for volume in spec.volumes.iter_mut().flatten() {
        default_volume(volume);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        default_container!(c);
    }
    for c in spec.containers.iter_mut() {
        default_container!(c);
    }
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        default_container!(c);
    }
}

/// Pod-only defaults: requests from limits, service links.
fn set_defaults_pod(spec: &mut PodSpec) {
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        if let Some(resources) = c.resources.as_mut() {
            requests_from_limits(resources);
        }
    }
    if spec.enable_service_links.is_none() {
        spec.enable_service_links = Some(true);
    }
}

fn requests_from_limits(resources: &mut ResourceRequirements) {
    let Some(limits) = resources.limits.as_ref() else {
        return;
    };
    let requests = resources.requests.get_or_insert_with(BTreeMap::new);
    for (name, value) in limits {
        requests
            .entry(name.clone())
            .or_insert_with(|| Quantity(value.0.clone()));
    }
}

fn set_defaults_pod_spec(spec: &mut PodSpec) {
    set_str(&mut spec.dns_policy, "ClusterFirst");
    set_str(&mut spec.restart_policy, "Always");
    if spec.host_network == Some(true) {
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for c in containers {
            for port in c.ports.iter_mut().flatten() {
                if port.host_port.is_none_or(|p| p == 0) {
                    port.host_port = Some(port.container_port);
                }
            }
        }
    }
    if spec.security_context.is_none() {
        spec.security_context = Some(PodSecurityContext::default());
    }
    if spec.termination_grace_period_seconds.is_none() {
        spec.termination_grace_period_seconds = Some(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    }
    set_str(&mut spec.scheduler_name, DEFAULT_SCHEDULER_NAME);
}

fn default_port(port: &mut ContainerPort) {
    set_str(&mut port.protocol, "TCP");
}

fn default_env(env: &mut EnvVar) {
    if let Some(field_ref) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
        set_str(&mut field_ref.api_version, "v1");
    }
}

fn default_probe(probe: &mut Probe) {
    set_int(&mut probe.timeout_seconds, 1);
    set_int(&mut probe.period_seconds, 10);
    set_int(&mut probe.success_threshold, 1);
    set_int(&mut probe.failure_threshold, 3);
    if let Some(http) = probe.http_get.as_mut() {
        default_http_get(http);
    }
    if let Some(grpc) = probe.grpc.as_mut()
        && grpc.service.is_none()
    {
        grpc.service = Some(String::new());
    }
}

fn default_lifecycle(lifecycle: &mut Lifecycle) {
    for handler in [lifecycle.post_start.as_mut(), lifecycle.pre_stop.as_mut()]
        .into_iter()
        .flatten()
    {
        if let Some(http) = handler.http_get.as_mut() {
            default_http_get(http);
        }
    }
}

fn default_http_get(http: &mut HTTPGetAction) {
    set_str(&mut http.path, "/");
    set_str(&mut http.scheme, "HTTP");
}

/// Whether the volume names no source at all (it then becomes an emptyDir).
fn has_no_source(volume: &Volume) -> bool {
    match serde_json::to_value(volume) {
        Ok(serde_json::Value::Object(map)) => map.keys().all(|k| k == "name"),
        _ => false,
    }
}

fn default_volume(v: &mut Volume) {
    if has_no_source(v) {
        v.empty_dir = Some(Default::default());
    }
    if let Some(host_path) = v.host_path.as_mut()
        && host_path.type_.is_none()
    {
        host_path.type_ = Some(String::new());
    }
    if let Some(secret) = v.secret.as_mut() {
        secret.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
    if let Some(config_map) = v.config_map.as_mut() {
        config_map.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
    if let Some(downward) = v.downward_api.as_mut() {
        downward.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
        for item in downward.items.iter_mut().flatten() {
            if let Some(field_ref) = item.field_ref.as_mut() {
                set_str(&mut field_ref.api_version, "v1");
            }
        }
    }
    if let Some(projected) = v.projected.as_mut() {
        projected.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
        for source in projected.sources.iter_mut().flatten() {
            if let Some(downward) = source.downward_api.as_mut() {
                for item in downward.items.iter_mut().flatten() {
                    if let Some(field_ref) = item.field_ref.as_mut() {
                        set_str(&mut field_ref.api_version, "v1");
                    }
                }
            }
            if let Some(token) = source.service_account_token.as_mut() {
                token
                    .expiration_seconds
                    .get_or_insert(DEFAULT_TOKEN_EXPIRATION_SECONDS);
            }
        }
    }
    if let Some(iscsi) = v.iscsi.as_mut() {
        set_str(&mut iscsi.iscsi_interface, "default");
    }
    if let Some(rbd) = v.rbd.as_mut() {
        set_str(&mut rbd.pool, "rbd");
        set_str(&mut rbd.user, "admin");
        set_str(&mut rbd.keyring, "/etc/ceph/keyring");
    }
    if let Some(scale_io) = v.scale_io.as_mut() {
        set_str(&mut scale_io.storage_mode, "ThinProvisioned");
        set_str(&mut scale_io.fs_type, "xfs");
    }
    if let Some(azure) = v.azure_disk.as_mut() {
        azure.caching_mode.get_or_insert_with(|| "ReadWrite".into());
        azure.kind.get_or_insert_with(|| "Shared".into());
        azure.fs_type.get_or_insert_with(|| "ext4".into());
        azure.read_only.get_or_insert(false);
    }
    if let Some(spec) = v
        .ephemeral
        .as_mut()
        .and_then(|e| e.volume_claim_template.as_mut())
        .map(|t| &mut t.spec)
    {
        spec.volume_mode.get_or_insert_with(|| "Filesystem".into());
    }
}

/// `Always` for images tagged (or defaulting to) `latest`, else `IfNotPresent`.
fn default_pull_policy(image: &str) -> &'static str {
    if image_tag(image).as_deref() == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// The tag an image reference pulls: its own tag, `latest` when it has
/// neither tag nor digest, empty when it has only a digest; `None` when the
/// reference is malformed.
pub(crate) fn image_tag(image: &str) -> Option<String> {
    let (name_tag, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest
        && !valid_digest(d)
    {
        return None;
    }
    let (name, tag) = match name_tag.rfind(':') {
        Some(i) if !name_tag[i..].contains('/') => (&name_tag[..i], Some(&name_tag[i + 1..])),
        _ => (name_tag, None),
    };
    if let Some(t) = tag
        && !valid_tag(t)
    {
        return None;
    }
    if !valid_name(name) {
        return None;
    }
    Some(match (tag, digest) {
        (Some(t), _) => t.to_string(),
        (None, Some(_)) => String::new(),
        (None, None) => "latest".to_string(),
    })
}

fn valid_tag(tag: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut chars = tag.chars();
    matches!(chars.next(), Some(c) if word(c))
        && tag.len() <= 128
        && chars.all(|c| word(c) || c == '.' || c == '-')
}

fn valid_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['+', '.', '-', '_']).all(|part| {
        let mut chars = part.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric())
    });
    algorithm_ok && hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
}

fn valid_name(name: &str) -> bool {
    if name.is_empty() || name.len() > 255 {
        return false;
    }
    let (domain, path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_lowercase() != first =>
        {
            (Some(first), rest)
        }
        _ => (None, name),
    };
    if let Some(d) = domain
        && !valid_domain(d)
    {
        return false;
    }
    if path.to_lowercase() != path {
        return false;
    }
    if domain.is_none() && path.len() == 64 && path.chars().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    path.split('/').all(valid_path_component)
}

fn valid_domain(domain: &str) -> bool {
    let (host, port) = match domain.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (domain, None),
    };
    if let Some(p) = port
        && (p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
    {
        return false;
    }
    host.split('.').all(|component| {
        let b = component.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    })
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_path_component(component: &str) -> bool {
    let b = component.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &component[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn image_tags_decide_pull_policy() {
        let cases = [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("registry.k8s.io/pause:3.8", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000/app:v1", "IfNotPresent"),
            (
                "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "IfNotPresent",
            ),
            (
                "busybox:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "Always",
            ),
            ("BusyBox", "IfNotPresent"),
            ("", "IfNotPresent"),
            ("example.com/a__b/c-d", "Always"),
            ("bad//name", "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(default_pull_policy(image), want, "{image:?}");
        }
    }

    #[test]
    fn defaults_fill_what_the_api_server_fills() {
        let mut pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "hostNetwork": true,
                "containers": [{
                    "name": "c", "image": "nginx",
                    "ports": [{"containerPort": 80}],
                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Mi"}},
                    "livenessProbe": {"httpGet": {"port": 80}},
                    "readinessProbe": {"grpc": {"port": 9000}, "periodSeconds": 5},
                    "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}}
                }],
                "initContainers": [{"name": "i", "image": "busybox:1.36", "resources": {"limits": {"memory": "2Mi"}}}],
                "volumes": [
                    {"name": "a"},
                    {"name": "b", "hostPath": {"path": "/x"}},
                    {"name": "c", "configMap": {"name": "cm"}},
                    {"name": "d", "secret": {"secretName": "s", "defaultMode": 256}},
                    {"name": "e", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
                ]
            }
        }))
        .unwrap();
        set_object_defaults_pod(&mut pod);
        let got = serde_json::to_value(&pod).unwrap();
        let spec = &got["spec"];
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["securityContext"], json!({}));
        assert_eq!(spec["enableServiceLinks"], true);
        assert!(spec.get("priority").is_none());
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(
            c["ports"][0],
            json!({"containerPort": 80, "hostPort": 80, "protocol": "TCP"})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(
            c["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Mi"})
        );
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
                   "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(
            c["readinessProbe"]["grpc"],
            json!({"port": 9000, "service": ""})
        );
        assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
        assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["path"], "/stop");
        let i = &spec["initContainers"][0];
        assert_eq!(i["imagePullPolicy"], "IfNotPresent");
        assert_eq!(i["resources"]["requests"], json!({"memory": "2Mi"}));
        let v = &spec["volumes"];
        assert_eq!(v[0], json!({"name": "a", "emptyDir": {}}));
        assert_eq!(v[1]["hostPath"], json!({"path": "/x", "type": ""}));
        assert_eq!(v[2]["configMap"]["defaultMode"], 420);
        assert_eq!(v[3]["secret"]["defaultMode"], 256);
        assert_eq!(v[4]["projected"]["defaultMode"], 420);
        assert_eq!(
            v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3600
        );
    }
}
