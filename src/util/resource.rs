//! Downward API resource fields (`limits.cpu`, `requests.memory`,
//! `limits.hugepages-2Mi`, ...) with their divisor, and the node-allocatable
//! defaulting of unset limits the kubelet applies before reading them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::util::quantity::{self, Quantity};

/// A resource field that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceFieldError {
    #[error("unsupported container resource : {0}")]
    Unsupported(String),
    #[error("container {0} not found")]
    ContainerNotFound(String),
    #[error("invalid quantity {value:?} for {field}")]
    BadQuantity { field: String, value: String },
}

fn parse(field: &str, q: &ApiQuantity) -> Result<Quantity, ResourceFieldError> {
    quantity::parse(q.0.trim()).map_err(|_| ResourceFieldError::BadQuantity {
        field: field.to_string(),
        value: q.0.clone(),
    })
}

fn lookup(
    list: Option<&BTreeMap<String, ApiQuantity>>,
    name: &str,
) -> Result<Quantity, ResourceFieldError> {
    match list.and_then(|l| l.get(name)) {
        Some(q) => parse(name, q),
        None => Ok(Quantity::from_decimal(0)),
    }
}

/// Whether `name` is a huge page resource (`hugepages-<size>`).
pub fn is_huge_page_resource_name(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn ceil_div(value: i64, divisor: i64) -> String {
    // Go divides as float64 and rounds up; do the same.
    let v = (value as f64 / divisor as f64).ceil() as i64;
    v.to_string()
}

/// The value of `fs` for `container`, in units of the divisor, rounded up.
pub fn extract_container_resource_value(
    fs: &ResourceFieldSelector,
    container: &Container,
) -> Result<String, ResourceFieldError> {
    let divisor = match &fs.divisor {
        Some(d) => {
            let q = parse("divisor", d)?;
            if q.is_zero() {
                Quantity::from_decimal(1)
            } else {
                q
            }
        }
        None => Quantity::from_decimal(1),
    };
    let res = container.resources.as_ref();
    let limits = res.and_then(|r| r.limits.as_ref());
    let requests = res.and_then(|r| r.requests.as_ref());
    let (list, name) = match fs.resource.split_once('.') {
        Some(("limits", n)) => (limits, n),
        Some(("requests", n)) => (requests, n),
        _ => return Err(ResourceFieldError::Unsupported(fs.resource.clone())),
    };
    match name {
        "cpu" => {
            let v = lookup(list, name)?;
            Ok(ceil_div(v.milli_value(), divisor.milli_value()))
        }
        "memory" | "ephemeral-storage" => {
            let v = lookup(list, name)?;
            Ok(ceil_div(v.value(), divisor.value()))
        }
        n if is_huge_page_resource_name(n) => {
            let v = lookup(list, name)?;
            Ok(ceil_div(v.value(), divisor.value()))
        }
        _ => Err(ResourceFieldError::Unsupported(fs.resource.clone())),
    }
}

fn find_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers.iter().find(|c| c.name == name).or_else(|| {
        spec.init_containers
            .iter()
            .flatten()
            .find(|c| c.name == name)
    })
}

/// The value of `fs`: of the named container when `containerName` is set,
/// else of `container`.
pub fn container_resource_runtime_value(
    fs: &ResourceFieldSelector,
    pod: &Pod,
    container: &Container,
) -> Result<String, ResourceFieldError> {
    match fs.container_name.as_deref().filter(|n| !n.is_empty()) {
        None => extract_container_resource_value(fs, container),
        Some(name) => {
            let c = find_container(pod, name)
                .ok_or_else(|| ResourceFieldError::ContainerNotFound(name.to_string()))?;
            extract_container_resource_value(fs, c)
        }
    }
}

/// Fills unset or zero cpu, memory and ephemeral-storage limits of
/// `container` from the node's allocatable resources.
pub fn merge_container_resource_limits(
    container: &mut Container,
    allocatable: &BTreeMap<String, ApiQuantity>,
) {
    let resources = container.resources.get_or_insert_with(Default::default);
    let limits = resources.limits.get_or_insert_with(BTreeMap::new);
    for name in ["cpu", "memory", "ephemeral-storage"] {
        let unset = match limits.get(name) {
            None => true,
            Some(q) => quantity::parse(q.0.trim())
                .map(|v| v.is_zero())
                .unwrap_or(false),
        };
        if unset && let Some(cap) = allocatable.get(name) {
            limits.insert(name.to_string(), cap.clone());
        }
    }
}

/// Copies of the pod and container with unset limits defaulted to the
/// node's allocatable (only the pod's regular containers; init containers
/// are left as they are, as the Go kubelet leaves them).
pub fn default_pod_limits_for_downward_api(
    pod: &Pod,
    container: &Container,
    allocatable: &BTreeMap<String, ApiQuantity>,
) -> (Pod, Container) {
    let mut out_pod = pod.clone();
    if let Some(spec) = out_pod.spec.as_mut() {
        for c in spec.containers.iter_mut() {
            merge_container_resource_limits(c, allocatable);
        }
    }
    let mut out_container = container.clone();
    merge_container_resource_limits(&mut out_container, allocatable);
    (out_pod, out_container)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container() -> Container {
        serde_json::from_value(serde_json::json!({"name": "c", "resources": {
            "requests": {"cpu": "250m", "memory": "64Mi", "hugepages-2Mi": "4Mi"},
            "limits": {"cpu": "1500m", "memory": "128Mi", "hugepages-2Mi": "4Mi"}}}))
        .expect("container")
    }

    fn sel(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            container_name: None,
            divisor: divisor.map(|d| ApiQuantity(d.to_string())),
            resource: resource.to_string(),
        }
    }

    #[test]
    fn value_table() {
        let c = container();
        let cases: &[(&str, Option<&str>, Result<&str, ()>)] = &[
            ("limits.cpu", None, Ok("2")),
            ("limits.cpu", Some("1m"), Ok("1500")),
            ("limits.cpu", Some("0"), Ok("2")),
            ("requests.cpu", None, Ok("1")),
            ("requests.cpu", Some("100m"), Ok("3")),
            ("limits.memory", None, Ok("134217728")),
            ("limits.memory", Some("1Mi"), Ok("128")),
            ("requests.memory", Some("1Gi"), Ok("1")),
            ("limits.ephemeral-storage", None, Ok("0")),
            ("limits.hugepages-2Mi", Some("1Mi"), Ok("4")),
            ("requests.hugepages-1Gi", None, Ok("0")),
            ("limits.nvidia.com/gpu", None, Err(())),
            ("cpu", None, Err(())),
        ];
        for (res, div, want) in cases {
            let got = extract_container_resource_value(&sel(res, *div), &c).map_err(|_| ());
            assert_eq!(got, want.map(str::to_string), "{res} / {div:?}");
        }
    }

    #[test]
    fn defaults_from_allocatable() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {
            "containers": [{"name": "a"}, {"name": "b", "resources": {"limits": {"cpu": "0"}}}],
            "initContainers": [{"name": "i"}]}}))
        .expect("pod");
        let allocatable: BTreeMap<String, ApiQuantity> = [
            ("cpu".to_string(), ApiQuantity("2".into())),
            ("memory".to_string(), ApiQuantity("1Gi".into())),
        ]
        .into();
        let a = pod.spec.as_ref().expect("spec").containers[0].clone();
        let (dp, dc) = default_pod_limits_for_downward_api(&pod, &a, &allocatable);
        assert_eq!(
            extract_container_resource_value(&sel("limits.cpu", None), &dc),
            Ok("2".into())
        );
        assert_eq!(
            extract_container_resource_value(&sel("limits.memory", Some("1Mi")), &dc),
            Ok("1024".into())
        );
        // Another regular container by name: defaulted too (cpu 0 counts as unset).
        let mut by_name = sel("limits.cpu", None);
        by_name.container_name = Some("b".into());
        assert_eq!(
            container_resource_runtime_value(&by_name, &dp, &dc),
            Ok("2".into())
        );
        // An init container by name: not defaulted.
        by_name.container_name = Some("i".into());
        assert_eq!(
            container_resource_runtime_value(&by_name, &dp, &dc),
            Ok("0".into())
        );
        by_name.container_name = Some("zzz".into());
        assert!(container_resource_runtime_value(&by_name, &dp, &dc).is_err());
    }
}
