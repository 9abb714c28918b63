//! Turning manifest bytes into static pods, as the Go kubelet's file and HTTP
//! sources do: YAML (1.1 rules) or JSON, exactly one `v1` object of kind
//! `Pod` (or, for the HTTP source, `PodList`), unknown fields ignored, then
//! API defaults, static identity and create validation.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::common::{StaticPodOrigin, apply_static_pod_identity};
use super::defaults::set_object_defaults_pod;
use super::prune::drop_newer_fields;
use super::quantities::{BadQuantity, normalize_pod_quantities};
use super::validation::{ErrorList, validate_pod_create};
use crate::util::yaml::{self, YamlError};

/// Why manifest bytes did not yield a usable pod.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("manifest is not valid UTF-8")]
    NotUtf8,
    #[error("{0}")]
    Yaml(#[from] YamlError),
    #[error("json: {0}")]
    Json(String),
    #[error("Object 'Kind' is missing in '{0}'")]
    MissingKind(String),
    #[error("Object 'apiVersion' is missing in '{0}'")]
    MissingApiVersion(String),
    /// A well-formed object that is not what was asked for (a list where a
    /// pod was expected, a Deployment, ...).
    #[error(
        "no kind {kind:?} is registered for version {api_version:?}, or it is not a {expected}"
    )]
    WrongKind {
        api_version: String,
        kind: String,
        expected: &'static str,
    },
    #[error("{0}")]
    Quantity(#[from] BadQuantity),
    #[error("{0}")]
    Fields(String),
    #[error("invalid pod: {0}")]
    Invalid(ErrorList),
}

impl DecodeError {
    /// Whether the bytes were an object of another kind.
    pub fn is_wrong_kind(&self) -> bool {
        matches!(self, DecodeError::WrongKind { .. })
    }

    /// Whether the bytes decoded into the expected kind and only defaulting
    /// or validation refused it (Go's "parsed"); otherwise another decoding
    /// may be tried.
    pub fn is_parsed(&self) -> bool {
        matches!(self, DecodeError::Invalid(_))
    }
}

/// Parses YAML or JSON into a JSON value. Text whose first non-blank
/// character is `{` is JSON; anything else goes through the YAML reader.
pub fn to_json(data: &[u8]) -> Result<Value, DecodeError> {
    let text = std::str::from_utf8(data).map_err(|_| DecodeError::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))
    } else {
        Ok(yaml::to_json(text)?.value)
    }
}

fn abbreviate(value: &Value) -> String {
    let mut s = value.to_string();
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Checks the type of a decoded object; returns `(apiVersion, kind)`.
fn type_meta(value: &Value) -> Result<(String, String), DecodeError> {
    let field = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let kind = field("kind");
    if kind.is_empty() {
        return Err(DecodeError::MissingKind(abbreviate(value)));
    }
    let api_version = field("apiVersion");
    if api_version.is_empty() {
        return Err(DecodeError::MissingApiVersion(abbreviate(value)));
    }
    Ok((api_version, kind))
}

/// Decodes one `v1` Pod object held as JSON: newer fields dropped,
/// quantities normalized, typed, defaulted, given its static identity and
/// validated.
fn finish_pod(
    mut value: Value,
    origin: StaticPodOrigin<'_>,
    node_name: &str,
) -> Result<Pod, DecodeError> {
    drop_newer_fields(&mut value);
    normalize_pod_quantities(&mut value)?;
    let mut pod: Pod =
        serde_json::from_value(value).map_err(|e| DecodeError::Fields(e.to_string()))?;
    set_object_defaults_pod(&mut pod);
    apply_static_pod_identity(&mut pod, origin, node_name);
    let errs = validate_pod_create(&pod);
    if !errs.is_empty() {
        return Err(DecodeError::Invalid(errs));
    }
    Ok(pod)
}

/// Decodes a manifest holding a single pod.
pub fn decode_single_pod(
    data: &[u8],
    origin: StaticPodOrigin<'_>,
    node_name: &str,
) -> Result<Pod, DecodeError> {
    let value = to_json(data)?;
    let (api_version, kind) = type_meta(&value)?;
    if api_version != "v1" || kind != "Pod" {
        return Err(DecodeError::WrongKind {
            api_version,
            kind,
            expected: "Pod",
        });
    }
    finish_pod(value, origin, node_name)
}

/// Decodes a `v1` PodList; every item must be a valid pod.
pub fn decode_pod_list(
    data: &[u8],
    origin: StaticPodOrigin<'_>,
    node_name: &str,
) -> Result<Vec<Pod>, DecodeError> {
    let value = to_json(data)?;
    let (api_version, kind) = type_meta(&value)?;
    if api_version != "v1" || kind != "PodList" {
        return Err(DecodeError::WrongKind {
            api_version,
            kind,
            expected: "PodList",
        });
    }
    let items = match value.get("items") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(other) => {
            return Err(DecodeError::Fields(format!(
                "items: expected a list, got {}",
                abbreviate(other)
            )));
        }
    };
    items
        .into_iter()
        .map(|mut item| {
            // List items carry no type of their own.
            if let Value::Object(map) = &mut item {
                map.remove("apiVersion");
                map.remove("kind");
            }
            finish_pod(item, origin, node_name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const ORIGIN: StaticPodOrigin<'static> = StaticPodOrigin::Url("http://example/pods");

    #[test]
    fn type_checks() {
        type Check = fn(&DecodeError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |e| matches!(e, DecodeError::MissingKind(_))),
            ("kind: Pod\nmetadata: {name: a}", |e| {
                matches!(e, DecodeError::MissingApiVersion(_))
            }),
            ("apiVersion: v1\nkind: PodList\nitems: []", |e| {
                e.is_wrong_kind()
            }),
            ("apiVersion: apps/v1\nkind: Deployment", |e| {
                e.is_wrong_kind()
            }),
            ("apiVersion: v2\nkind: Pod", |e| e.is_wrong_kind()),
            ("{\"apiVersion\": \"v1\", \"kind\": \"Pod\",", |e| {
                matches!(e, DecodeError::Json(_))
            }),
            (
                "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b, resources: {limits: {cpu: lots}}}]}",
                |e| matches!(e, DecodeError::Quantity(_)),
            ),
            ("apiVersion: v1\nkind: Pod\nspec: {containers: 7}", |e| {
                matches!(e, DecodeError::Fields(_))
            }),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}",
                |e| matches!(e, DecodeError::Invalid(_)),
            ),
        ];
        for (src, check) in cases {
            let err = decode_single_pod(src.as_bytes(), ORIGIN, "node").expect_err(src);
            assert!(check(&err), "{src:?} gave {err}");
        }
    }

    #[test]
    fn a_pod_list_decodes_every_item() {
        let src = br#"{"apiVersion": "v1", "kind": "PodList", "items": [
            {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
            {"kind": "Ignored", "metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        ]}"#;
        let pods = decode_pod_list(src, ORIGIN, "node").expect("list decodes");
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a-node", "b-node"]);
        assert!(
            decode_single_pod(src, ORIGIN, "node")
                .unwrap_err()
                .is_wrong_kind()
        );
    }

    #[test]
    fn yaml_1_1_manifests_mean_what_they_mean_to_go() {
        let yaml = "\
apiVersion: v1
kind: Pod
metadata:
  name: cfg
  annotations:
    released: 2024-01-02
spec:
  hostNetwork: yes
  containers:
  - name: c
    image: busybox:1.36
    stdin: on
    ports:
    - containerPort: 0x50
    volumeMounts:
    - name: cfg
      mountPath: /cfg
      readOnly: y
  volumes:
  - name: cfg
    configMap:
      name: cfg
      defaultMode: 0644
";
        let pod = decode_single_pod(yaml.as_bytes(), ORIGIN, "node").expect("valid");
        let v = serde_json::to_value(&pod).unwrap();
        // A timestamp-looking scalar keeps its text, as go-yaml v2 does when
        // decoding into interface{} (sigs.k8s.io/yaml's path).
        assert_eq!(v["metadata"]["annotations"]["released"], "2024-01-02");
        assert_eq!(v["spec"]["hostNetwork"], true);
        let c = &v["spec"]["containers"][0];
        assert_eq!(c["stdin"], true);
        assert_eq!(c["ports"][0]["containerPort"], 80);
        assert_eq!(
            c["ports"][0]["hostPort"], 80,
            "host network defaults host ports"
        );
        assert_eq!(c["volumeMounts"][0]["readOnly"], true);
        assert_eq!(v["spec"]["volumes"][0]["configMap"]["defaultMode"], 420);
        // A YAML 1.1 boolean where a string belongs is an error, as in Go.
        let bad = yaml.replace(
            "name: cfg\n  annotations",
            "name: cfg\n  labels: {enabled: on}\n  annotations",
        );
        assert!(matches!(
            decode_single_pod(bad.as_bytes(), ORIGIN, "node"),
            Err(DecodeError::Fields(_))
        ));
    }

    /// What kubeadm writes to /etc/kubernetes/manifests.
    const KUBEADM_ETCD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.1:2379
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.1:2379
    - --data-dir=/var/lib/etcd
    image: registry.k8s.io/etcd:3.5.6-0
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /health?exclude=NOSPACE&serializable=true
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /health?serializable=false
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: /var/lib/etcd
      name: etcd-data
    - mountPath: /etc/kubernetes/pki/etcd
      name: etcd-certs
  hostNetwork: true
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: /etc/kubernetes/pki/etcd
      type: DirectoryOrCreate
    name: etcd-certs
  - hostPath:
      path: /var/lib/etcd
      type: DirectoryOrCreate
    name: etcd-data
status: {}
";

    #[test]
    fn a_kubeadm_control_plane_manifest_is_accepted() {
        let origin = StaticPodOrigin::File(Path::new("/etc/kubernetes/manifests/etcd.yaml"));
        let pod = decode_single_pod(KUBEADM_ETCD.as_bytes(), origin, "cp-1")
            .expect("kubeadm's etcd is valid");
        assert_eq!(pod.metadata.name.as_deref(), Some("etcd-cp-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.priority, None,
            "priority comes from admission, not defaulting"
        );
        assert_eq!(
            spec.containers[0].termination_message_policy.as_deref(),
            Some("File")
        );
        assert_eq!(
            spec.containers[0]
                .startup_probe
                .as_ref()
                .unwrap()
                .success_threshold,
            Some(1)
        );
    }

    #[test]
    fn yaml_and_json_of_one_pod_get_one_uid() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: nginx:1.25\n    ports:\n    - containerPort: 80\n";
        let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
            "spec":{"containers":[{"name":"c","image":"nginx:1.25","ports":[{"containerPort":80,"protocol":"TCP"}]}]}}"#;
        let origin = StaticPodOrigin::File(Path::new("/etc/kubernetes/manifests/web"));
        let a = decode_single_pod(yaml.as_bytes(), origin, "n").unwrap();
        let b = decode_single_pod(json.as_bytes(), origin, "n").unwrap();
        assert_eq!(a.metadata.uid, b.metadata.uid);
        assert_eq!(a, b);
    }
}
