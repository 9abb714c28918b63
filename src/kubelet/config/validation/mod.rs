//! What the API server's pod create validation would reject, for the parts a
//! static pod manifest can get wrong: object metadata, names, containers
//! (names, images, ports, env, mounts, probes, lifecycle, resources, security
//! context), volumes, policies, DNS config, tolerations, host aliases, node
//! affinity, topology spread and the pod security context. Messages follow the
//! API server's field errors (`spec.containers[0].image: Required value`), so
//! an operator sees what kubectl would have told them.
//!
//! Static pods are validated with the default options of the v1.25 line
//! (one huge page size per pod, huge page values in whole pages, at most six
//! DNS search paths).

mod container;
mod env;
mod field;
mod meta;
use crate::util::validation as names;
mod pod_spec;
mod probe;
mod resources;
mod volume;

pub use field::{BadValue, ErrorList, ErrorType, FieldError};
pub use names::{
    is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
    is_valid_port_name, is_valid_port_num,
};

use k8s_openapi::api::core::v1::Pod;

/// Validates a pod as the API server does on create. An empty list means valid.
pub fn validate_pod_create(pod: &Pod) -> ErrorList {
    let mut errs = ErrorList::default();
    meta::validate_pod_metadata(pod, &mut errs);
    let default_spec = Default::default();
    let spec = pod.spec.as_ref().unwrap_or(&default_spec);
    pod_spec::validate_pod_spec(spec, &mut errs, pod.metadata.name.as_deref().unwrap_or(""));
    pod_spec::validate_pod_only(spec, &mut errs);
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        errs.push(FieldError::forbidden(
            "spec.ephemeralContainers",
            "cannot be set on create",
        ));
    }
    pod_spec::validate_pod_ips(pod, &mut errs);
    errs
}

#[cfg(test)]
mod tests;
