//! Container environment: variable names, `valueFrom` sources (downward API
//! field and resource references, configMap and secret keys) and `envFrom`.

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, ResourceFieldSelector};

use super::field::{ErrorList, FieldError};
use super::names::{is_config_map_key, is_dns1123_subdomain, is_env_var_name, is_qualified_name};

const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.podIP",
    "status.podIPs",
];

const RESOURCE_FIELD_PATHS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

pub fn validate_env(vars: &[EnvVar], base: &str, errs: &mut ErrorList) {
    for (i, ev) in vars.iter().enumerate() {
        let path = format!("{base}[{i}]");
        if ev.name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else {
            errs.invalid_each(&format!("{path}.name"), &ev.name, is_env_var_name(&ev.name));
        }
        let Some(from) = &ev.value_from else {
            continue;
        };
        let from_path = format!("{path}.valueFrom");
        let mut sources = 0;
        if let Some(field_ref) = &from.field_ref {
            sources += 1;
            validate_object_field_selector(
                field_ref.api_version.as_deref().unwrap_or(""),
                &field_ref.field_path,
                ENV_FIELD_PATHS,
                &format!("{from_path}.fieldRef"),
                errs,
            );
        }
        if let Some(resource_ref) = &from.resource_field_ref {
            sources += 1;
            validate_resource_field_selector(
                resource_ref,
                false,
                &format!("{from_path}.resourceFieldRef"),
                errs,
            );
        }
        if let Some(cm) = &from.config_map_key_ref {
            sources += 1;
            validate_key_selector(
                &cm.name,
                &cm.key,
                &format!("{from_path}.configMapKeyRef"),
                errs,
            );
        }
        if let Some(secret) = &from.secret_key_ref {
            sources += 1;
            validate_key_selector(
                &secret.name,
                &secret.key,
                &format!("{from_path}.secretKeyRef"),
                errs,
            );
        }
        if sources == 0 {
            errs.push(FieldError::invalid(
                &from_path,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if ev.value.as_deref().is_some_and(|v| !v.is_empty()) {
            errs.push(FieldError::invalid(
                &from_path,
                "",
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                &from_path,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
}

fn validate_key_selector(name: &str, key: &str, path: &str, errs: &mut ErrorList) {
    errs.invalid_each(&format!("{path}.name"), name, is_dns1123_subdomain(name));
    if key.is_empty() {
        errs.push(FieldError::required(format!("{path}.key"), ""));
    } else {
        errs.invalid_each(&format!("{path}.key"), key, is_config_map_key(key));
    }
}

/// A downward API field reference (env or volume items).
pub fn validate_object_field_selector(
    api_version: &str,
    field_path: &str,
    allowed: &[&str],
    path: &str,
    errs: &mut ErrorList,
) {
    if api_version.is_empty() {
        errs.push(FieldError::required(format!("{path}.apiVersion"), ""));
        return;
    }
    if field_path.is_empty() {
        errs.push(FieldError::required(format!("{path}.fieldPath"), ""));
        return;
    }
    if api_version != "v1" {
        errs.push(FieldError::invalid(
            format!("{path}.fieldPath"),
            field_path,
            format!("error converting fieldPath: unsupported pod version: {api_version}"),
        ));
        return;
    }
    if let Some((field, subscript)) = split_subscripted_path(field_path) {
        match field {
            "metadata.annotations" => errs.invalid_each(path, subscript, is_qualified_name(&subscript.to_lowercase())),
            "metadata.labels" => errs.invalid_each(path, subscript, is_qualified_name(subscript)),
            _ => errs.push(FieldError::invalid(
                format!("{path}.fieldPath"),
                field_path,
                format!("error converting fieldPath: field label does not support subscript: {field_path}"),
            )),
        }
        return;
    }
    let internal = match field_path {
        "spec.host" => "spec.nodeName",
        p => p,
    };
    const CONVERTIBLE: &[&str] = &[
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.podIP",
        "status.podIPs",
    ];
    if !CONVERTIBLE.contains(&internal) {
        errs.push(FieldError::invalid(
            format!("{path}.fieldPath"),
            field_path,
            format!("error converting fieldPath: field label not supported: {field_path}"),
        ));
        return;
    }
    if !allowed.contains(&internal) {
        errs.push(FieldError::not_supported(
            format!("{path}.fieldPath"),
            internal,
            allowed,
        ));
    }
}

/// `metadata.labels['key']` → `("metadata.labels", "key")`.
fn split_subscripted_path(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (field, subscript) = inner.split_once("['")?;
    (!field.is_empty()).then_some((field, subscript))
}

/// A resource field reference (env or downward API volume items).
pub fn validate_resource_field_selector(
    fs: &ResourceFieldSelector,
    volume: bool,
    path: &str,
    errs: &mut ErrorList,
) {
    let container_name = fs.container_name.as_deref().unwrap_or("");
    if volume && container_name.is_empty() {
        errs.push(FieldError::required(format!("{path}.containerName"), ""));
    } else if fs.resource.is_empty() {
        errs.push(FieldError::required(format!("{path}.resource"), ""));
    } else if !RESOURCE_FIELD_PATHS.contains(&fs.resource.as_str()) {
        errs.push(FieldError::not_supported(
            format!("{path}.resource"),
            &fs.resource,
            RESOURCE_FIELD_PATHS,
        ));
    }
    let Some(divisor) = fs
        .divisor
        .as_ref()
        .map(|q| q.0.as_str())
        .filter(|d| *d != "0")
    else {
        return;
    };
    const MEMORY: &[&str] = &[
        "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei",
    ];
    let (ok, what) = match fs.resource.as_str() {
        "limits.cpu" | "requests.cpu" => (
            ["1m", "1"].contains(&divisor),
            "only divisor's values 1m and 1 are supported with the cpu resource",
        ),
        "limits.memory" | "requests.memory" => (
            MEMORY.contains(&divisor),
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource",
        ),
        "limits.ephemeral-storage" | "requests.ephemeral-storage" => (
            MEMORY.contains(&divisor),
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local ephemeral storage resource",
        ),
        _ => (true, ""),
    };
    if !ok {
        errs.push(FieldError::invalid(
            format!("{path}.divisor"),
            &fs.resource,
            what,
        ));
    }
}

pub fn validate_env_from(sources: &[EnvFromSource], base: &str, errs: &mut ErrorList) {
    for (i, ev) in sources.iter().enumerate() {
        let path = format!("{base}[{i}]");
        if let Some(prefix) = ev.prefix.as_deref().filter(|p| !p.is_empty()) {
            errs.invalid_each(&format!("{path}.prefix"), prefix, is_env_var_name(prefix));
        }
        let mut count = 0;
        for (field, name) in [
            (
                "configMapRef",
                ev.config_map_ref.as_ref().map(|r| r.name.as_str()),
            ),
            ("secretRef", ev.secret_ref.as_ref().map(|r| r.name.as_str())),
        ] {
            let Some(name) = name else { continue };
            count += 1;
            let name_path = format!("{path}.{field}.name");
            if name.is_empty() {
                errs.push(FieldError::required(name_path, ""));
            } else {
                let masked = name
                    .strip_suffix('-')
                    .map_or_else(|| name.to_string(), |r| format!("{r}a"));
                errs.invalid_each(&name_path, name, is_dns1123_subdomain(&masked));
            }
        }
        if count == 0 {
            errs.push(FieldError::invalid(
                base,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if count > 1 {
            errs.push(FieldError::invalid(
                base,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
}
