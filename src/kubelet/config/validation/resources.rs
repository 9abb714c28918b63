//! Container resource requirements: names, non-negative and integer values,
//! requests not above limits, extended resources requested equal to their
//! limit, huge pages in whole pages and only next to cpu or memory.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::field::{BadValue, ErrorList, FieldError};
use super::names::is_qualified_name;
use crate::util::quantity::{self, Quantity};

const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
    "requests.storage",
];

fn is_huge_page(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}")).is_empty()
}

fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_huge_page(name)
}

fn is_standard_resource(name: &str) -> bool {
    STANDARD_RESOURCES.contains(&name)
        || is_huge_page(name)
        || name.starts_with("requests.hugepages-")
}

fn is_standard_container_resource(name: &str) -> bool {
    ["cpu", "memory", "ephemeral-storage"].contains(&name) || is_huge_page(name)
}

fn validate_container_resource_name(name: &str, path: &str, errs: &mut ErrorList) {
    let before = errs.len();
    errs.invalid_each(path, name, is_qualified_name(name));
    if errs.len() == before && !name.contains('/') && !is_standard_resource(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource type or fully qualified",
        ));
    }
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
}

/// Parses a quantity already normalized by decoding; a value that still
/// fails to parse counts as zero (decoding would have refused it).
fn parse(q: &ApiQuantity) -> Quantity {
    quantity::parse(&q.0).unwrap_or_else(|_| Quantity::from_decimal(0))
}

fn validate_quantity_value(name: &str, q: &Quantity, path: &str, errs: &mut ErrorList) {
    if q.cmp_value(&Quantity::from_decimal(0)).is_lt() {
        errs.push(FieldError::invalid(
            path,
            q.to_canonical_string(),
            "must be greater than or equal to 0",
        ));
    }
    if is_extended(name) && q.milli_value() % 1000 != 0 {
        errs.push(FieldError::invalid(
            path,
            q.to_canonical_string(),
            "must be an integer",
        ));
    }
}

fn huge_page_value_error(name: &str, q: &Quantity) -> Option<String> {
    let divisible = name
        .strip_prefix("hugepages-")
        .and_then(|size| quantity::parse(size).ok())
        .filter(|size| {
            size.cmp_value(&Quantity::from_decimal(0)).is_gt() && size.milli_value() % 1000 == 0
        })
        .is_some_and(|size| q.value() % size.value() == 0);
    (!divisible).then(|| {
        format!(
            "{} is not positive integer multiple of {name}",
            q.to_canonical_string()
        )
    })
}

/// A container's resources (also used for the pod overhead, as limits).
pub fn validate_resource_requirements(r: &ResourceRequirements, path: &str, errs: &mut ErrorList) {
    let empty = BTreeMap::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    let requests = r.requests.as_ref().unwrap_or(&empty);
    validate_lists(limits, requests, path, errs);
}

fn validate_lists(
    limits: &BTreeMap<String, ApiQuantity>,
    requests: &BTreeMap<String, ApiQuantity>,
    path: &str,
    errs: &mut ErrorList,
) {
    let lim_path = format!("{path}.limits");
    let req_path = format!("{path}.requests");
    let (mut lim_cpu_mem, mut req_cpu_mem, mut lim_huge, mut req_huge) =
        (false, false, false, false);
    for (name, value) in limits {
        let p = format!("{lim_path}[{name}]");
        let q = parse(value);
        validate_container_resource_name(name, &p, errs);
        validate_quantity_value(name, &q, &p, errs);
        if is_huge_page(name) {
            lim_huge = true;
            if let Some(e) = huge_page_value_error(name, &q) {
                errs.push(FieldError::invalid(&p, q.to_canonical_string(), e));
            }
        }
        lim_cpu_mem |= name == "cpu" || name == "memory";
    }
    for (name, value) in requests {
        let p = format!("{req_path}[{name}]");
        let q = parse(value);
        validate_container_resource_name(name, &p, errs);
        validate_quantity_value(name, &q, &p, errs);
        match limits.get(name) {
            Some(limit) => {
                let limit = parse(limit);
                let order = q.cmp_value(&limit);
                if order.is_ne() && !overcommit_allowed(name) {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.to_canonical_string(),
                        format!("must be equal to {name} limit"),
                    ));
                } else if order.is_gt() {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.to_canonical_string(),
                        format!("must be less than or equal to {name} limit"),
                    ));
                }
            }
            None if !overcommit_allowed(name) => {
                errs.push(FieldError::required(
                    &lim_path,
                    "Limit must be set for non overcommitable resources",
                ));
            }
            None => {}
        }
        if is_huge_page(name) {
            req_huge = true;
            if let Some(e) = huge_page_value_error(name, &q) {
                errs.push(FieldError::invalid(&p, q.to_canonical_string(), e));
            }
        }
        req_cpu_mem |= name == "cpu" || name == "memory";
    }
    if !lim_cpu_mem && !req_cpu_mem && (req_huge || lim_huge) {
        errs.push(FieldError::forbidden(
            path,
            "HugePages require cpu or memory",
        ));
    }
}

/// The pod overhead, validated as a container's limits.
pub fn validate_overhead(overhead: &BTreeMap<String, ApiQuantity>, errs: &mut ErrorList) {
    validate_lists(overhead, &BTreeMap::new(), "spec.overhead", errs);
}

/// At most one huge page size across the regular containers.
pub fn validate_single_huge_page_size(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    errs: &mut ErrorList,
) {
    let mut sizes = std::collections::BTreeSet::new();
    for c in &spec.containers {
        if let Some(r) = &c.resources {
            for list in [&r.limits, &r.requests].into_iter().flatten() {
                sizes.extend(list.keys().filter(|k| is_huge_page(k)).cloned());
            }
        }
    }
    if sizes.len() > 1 {
        let rendered: Vec<String> = sizes
            .iter()
            .map(|s| format!("{s:?}:sets.Empty{{}}"))
            .collect();
        errs.push(FieldError::invalid(
            "spec",
            BadValue::Other(format!("sets.String{{{}}}", rendered.join(", "))),
            "must use a single hugepage size in a pod spec",
        ));
    }
}
