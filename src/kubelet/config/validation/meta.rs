//! Object metadata of a pod: name, namespace, labels, annotations, finalizers
//! and the pod-specific annotations (mirror, seccomp, AppArmor).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};

use super::field::{ErrorList, FieldError};
use super::names::{
    is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};
use super::volume::validate_local_descending_path;
use crate::kubelet::types::CONFIG_MIRROR_ANNOTATION_KEY;

const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_CONTAINER_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

pub fn validate_pod_metadata(pod: &Pod, errs: &mut ErrorList) {
    let meta = &pod.metadata;
    if let Some(generate) = meta.generate_name.as_deref().filter(|g| !g.is_empty()) {
        // A trailing dash is allowed in a prefix.
        let masked = match generate.strip_suffix('-') {
            Some(rest) => format!("{rest}a"),
            None => generate.to_string(),
        };
        errs.invalid_each(
            "metadata.generateName",
            generate,
            is_dns1123_subdomain(&masked),
        );
    }
    match meta.name.as_deref().filter(|n| !n.is_empty()) {
        None => errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
        Some(name) => errs.invalid_each("metadata.name", name, is_dns1123_subdomain(name)),
    }
    match meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        None => errs.push(FieldError::required("metadata.namespace", "")),
        Some(ns) => errs.invalid_each("metadata.namespace", ns, is_dns1123_label(ns)),
    }
    if let Some(generation) = meta.generation
        && generation < 0
    {
        errs.push(FieldError::invalid(
            "metadata.generation",
            generation,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(labels) = &meta.labels {
        validate_labels(labels, "metadata.labels", errs);
    }
    if let Some(annotations) = &meta.annotations {
        validate_annotations(annotations, "metadata.annotations", errs);
    }
    for (i, finalizer) in meta.finalizers.iter().flatten().enumerate() {
        let path = format!("metadata.finalizers[{i}]");
        errs.invalid_each(&path, finalizer, is_qualified_name(finalizer));
    }
    let default_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&default_spec);
    if let Some(annotations) = &meta.annotations {
        validate_pod_specific_annotations(annotations, spec, errs);
    }
}

/// Label keys must be qualified names and values valid label values.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &str, errs: &mut ErrorList) {
    for (k, v) in labels {
        errs.invalid_each(path, k, is_qualified_name(k));
        errs.invalid_each(path, v, is_valid_label_value(v));
    }
}

fn validate_annotations(annotations: &BTreeMap<String, String>, path: &str, errs: &mut ErrorList) {
    let mut total = 0usize;
    for (k, v) in annotations {
        errs.invalid_each(path, k, is_qualified_name(&k.to_lowercase()));
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

fn validate_pod_specific_annotations(
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    errs: &mut ErrorList,
) {
    let base = "metadata.annotations";
    if let Some(value) = annotations.get(CONFIG_MIRROR_ANNOTATION_KEY)
        && spec.node_name.as_deref().is_none_or(str::is_empty)
    {
        errs.push(FieldError::invalid(
            format!("{base}[{CONFIG_MIRROR_ANNOTATION_KEY}]"),
            value,
            "must set spec.nodeName if mirror pod annotation is set",
        ));
    }
    for (k, v) in annotations {
        if k == SECCOMP_POD_ANNOTATION || k.starts_with(SECCOMP_CONTAINER_PREFIX) {
            validate_seccomp_annotation(v, &format!("{base}.{k}"), errs);
        }
        if let Some(container) = k.strip_prefix(APPARMOR_CONTAINER_PREFIX) {
            let path = format!("{base}[{k}]");
            if !has_container(spec, container) {
                errs.push(FieldError::invalid(&path, container, "container not found"));
            }
            let ok = v.is_empty()
                || v == "runtime/default"
                || v == "unconfined"
                || v.starts_with("localhost/");
            if !ok {
                errs.push(FieldError::invalid(
                    &path,
                    v,
                    format!("invalid AppArmor profile name: {v:?}"),
                ));
            }
        }
    }
}

fn validate_seccomp_annotation(profile: &str, path: &str, errs: &mut ErrorList) {
    match profile {
        "runtime/default" | "docker/default" | "unconfined" => {}
        p => match p.strip_prefix("localhost/") {
            Some(local) => validate_local_descending_path(local, path, errs),
            None => errs.push(FieldError::invalid(
                path,
                p,
                "must be a valid seccomp profile",
            )),
        },
    }
}

fn has_container(spec: &PodSpec, name: &str) -> bool {
    spec.containers.iter().any(|c| c.name == name)
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
}
