//! Pod volumes: names, exactly one source each, and the checks of the
//! sources a static pod typically uses (hostPath, emptyDir, secret,
//! configMap, downwardAPI, projected, persistentVolumeClaim, nfs, csi,
//! ephemeral).

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Volume};

use super::env::{validate_object_field_selector, validate_resource_field_selector};
use super::field::{ErrorList, FieldError};
use super::names::{is_dns1123_label, is_dns1123_subdomain};

const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";
const VOLUME_FIELD_PATHS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

/// The order in which the API server looks at volume sources.
const SOURCE_ORDER: &[&str] = &[
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flexVolume",
    "cinder",
    "persistentVolumeClaim",
    "rbd",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "projected",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
];

/// The valid volumes of a pod by name, and whether each may back a block device.
#[derive(Debug, Default)]
pub struct VolumeKinds(HashMap<String, bool>);

impl VolumeKinds {
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// `Some(true)` for persistentVolumeClaim and ephemeral volumes, `None`
    /// when there is no such (valid) volume.
    pub fn is_block_capable(&self, name: &str) -> Option<bool> {
        self.0.get(name).copied()
    }
}

pub fn validate_volumes(volumes: &[Volume], pod_name: &str, errs: &mut ErrorList) -> VolumeKinds {
    let created_claims: HashSet<String> = if pod_name.is_empty() {
        HashSet::new()
    } else {
        volumes
            .iter()
            .filter(|v| v.ephemeral.is_some())
            .map(|v| format!("{pod_name}-{}", v.name))
            .collect()
    };
    let mut kinds = VolumeKinds::default();
    for (i, v) in volumes.iter().enumerate() {
        let path = format!("spec.volumes[{i}]");
        let mut el = ErrorList::default();
        validate_volume_source(v, &path, &mut el);
        if v.name.is_empty() {
            el.push(FieldError::required(format!("{path}.name"), ""));
        } else {
            el.invalid_each(&format!("{path}.name"), &v.name, is_dns1123_label(&v.name));
        }
        if kinds.contains(&v.name) {
            el.push(FieldError::duplicate(format!("{path}.name"), &v.name));
        }
        if el.is_empty() {
            let block = v.persistent_volume_claim.is_some() || v.ephemeral.is_some();
            kinds.0.insert(v.name.clone(), block);
        } else {
            errs.0.extend(el.0);
        }
        if let Some(claim) = &v.persistent_volume_claim
            && created_claims.contains(&claim.claim_name)
        {
            errs.push(FieldError::invalid(
                format!("{path}.persistentVolumeClaim.claimName"),
                &claim.claim_name,
                "must not reference a PVC that gets created for an ephemeral volume",
            ));
        }
    }
    kinds
}

fn validate_volume_source(v: &Volume, path: &str, errs: &mut ErrorList) {
    let present: HashSet<String> = match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(map)) => {
            map.keys().filter(|k| *k != "name").cloned().collect()
        }
        _ => HashSet::new(),
    };
    let mut first = None;
    for source in SOURCE_ORDER.iter().filter(|s| present.contains(**s)) {
        if first.is_some() {
            errs.push(FieldError::forbidden(
                format!("{path}.{source}"),
                "may not specify more than 1 volume type",
            ));
        } else {
            first = Some(*source);
        }
    }
    let Some(source) = first else {
        errs.push(FieldError::required(path, "must specify a volume type"));
        return;
    };
    let p = format!("{path}.{source}");
    match source {
        "hostPath" => {
            if let Some(h) = &v.host_path {
                if h.path.is_empty() {
                    errs.push(FieldError::required(format!("{p}.path"), ""));
                } else {
                    validate_path_no_backsteps(&h.path, &format!("{p}.path"), errs);
                }
                const TYPES: &[&str] = &[
                    "",
                    "DirectoryOrCreate",
                    "Directory",
                    "FileOrCreate",
                    "File",
                    "Socket",
                    "CharDevice",
                    "BlockDevice",
                ];
                if let Some(t) = h.type_.as_deref()
                    && !TYPES.contains(&t)
                {
                    errs.push(FieldError::not_supported(format!("{p}.type"), t, TYPES));
                }
            }
        }
        "emptyDir" => {
            let negative = v
                .empty_dir
                .as_ref()
                .and_then(|e| e.size_limit.as_ref())
                .and_then(|q| crate::util::quantity::parse(&q.0).ok())
                .is_some_and(|q| {
                    q.cmp_value(&crate::util::quantity::Quantity::from_decimal(0))
                        .is_lt()
                });
            if negative {
                errs.push(FieldError::forbidden(
                    format!("{p}.sizeLimit"),
                    "SizeLimit field must be a valid resource quantity",
                ));
            }
        }
        "secret" => {
            if let Some(s) = &v.secret {
                if s.secret_name.as_deref().unwrap_or("").is_empty() {
                    errs.push(FieldError::required(format!("{p}.secretName"), ""));
                }
                validate_mode(s.default_mode, &format!("{p}.defaultMode"), errs);
                for (i, kp) in s.items.iter().flatten().enumerate() {
                    validate_key_to_path(kp, &format!("{p}.items[{i}]"), errs);
                }
            }
        }
        "configMap" => {
            if let Some(c) = &v.config_map {
                if c.name.is_empty() {
                    errs.push(FieldError::required(format!("{p}.name"), ""));
                } else {
                    errs.invalid_each(&format!("{p}.name"), &c.name, is_dns1123_subdomain(&c.name));
                }
                validate_mode(c.default_mode, &format!("{p}.defaultMode"), errs);
                for (i, kp) in c.items.iter().flatten().enumerate() {
                    validate_key_to_path(kp, &format!("{p}.items[{i}]"), errs);
                }
            }
        }
        "downwardAPI" => {
            if let Some(d) = &v.downward_api {
                validate_mode(d.default_mode, &format!("{p}.defaultMode"), errs);
                for file in d.items.iter().flatten() {
                    validate_downward_api_file(file, &p, errs);
                }
            }
        }
        "projected" => {
            if let Some(pr) = &v.projected {
                validate_projected(pr, &p, errs);
            }
        }
        "persistentVolumeClaim"
            if v.persistent_volume_claim
                .as_ref()
                .is_some_and(|c| c.claim_name.is_empty()) =>
        {
            errs.push(FieldError::required(format!("{p}.claimName"), ""));
        }
        "nfs" => {
            if let Some(n) = &v.nfs {
                if n.server.is_empty() {
                    errs.push(FieldError::required(format!("{p}.server"), ""));
                }
                if n.path.is_empty() {
                    errs.push(FieldError::required(format!("{p}.path"), ""));
                }
                if !n.path.starts_with('/') {
                    errs.push(FieldError::invalid(
                        format!("{p}.path"),
                        &n.path,
                        "must be an absolute path",
                    ));
                }
            }
        }
        "csi" if v.csi.as_ref().is_some_and(|c| c.driver.is_empty()) => {
            errs.push(FieldError::required(format!("{p}.driver"), ""));
        }
        "ephemeral"
            if v.ephemeral
                .as_ref()
                .is_some_and(|e| e.volume_claim_template.is_none()) =>
        {
            errs.push(FieldError::required(format!("{p}.volumeClaimTemplate"), ""));
        }
        _ => {}
    }
}

fn validate_mode(mode: Option<i32>, path: &str, errs: &mut ErrorList) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        errs.push(FieldError::invalid(path, m, FILE_MODE_ERROR));
    }
}

fn validate_key_to_path(kp: &KeyToPath, path: &str, errs: &mut ErrorList) {
    if kp.key.is_empty() {
        errs.push(FieldError::required(format!("{path}.key"), ""));
    }
    if kp.path.is_empty() {
        errs.push(FieldError::required(format!("{path}.path"), ""));
    }
    validate_local_non_reserved_path(&kp.path, &format!("{path}.path"), errs);
    validate_mode(kp.mode, &format!("{path}.mode"), errs);
}

fn validate_downward_api_file(file: &DownwardAPIVolumeFile, path: &str, errs: &mut ErrorList) {
    if file.path.is_empty() {
        errs.push(FieldError::required(format!("{path}.path"), ""));
    }
    validate_local_non_reserved_path(&file.path, &format!("{path}.path"), errs);
    match (&file.field_ref, &file.resource_field_ref) {
        (Some(f), None) => validate_object_field_selector(
            f.api_version.as_deref().unwrap_or(""),
            &f.field_path,
            VOLUME_FIELD_PATHS,
            &format!("{path}.fieldRef"),
            errs,
        ),
        (None, Some(r)) => {
            validate_resource_field_selector(r, true, &format!("{path}.resourceFieldRef"), errs)
        }
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            "resource",
            "fieldRef and resourceFieldRef can not be specified simultaneously",
        )),
        (None, None) => errs.push(FieldError::required(
            path,
            "one of fieldRef and resourceFieldRef is required",
        )),
    }
    validate_mode(file.mode, &format!("{path}.mode"), errs);
}

fn validate_projected(
    pr: &k8s_openapi::api::core::v1::ProjectedVolumeSource,
    path: &str,
    errs: &mut ErrorList,
) {
    let mut all_paths = HashSet::new();
    for (i, source) in pr.sources.iter().flatten().enumerate() {
        let src = format!("{path}.sources[{i}]");
        let mut count = 0;
        if let Some(s) = &source.secret {
            count += 1;
            let p = format!("{src}.secret");
            if s.name.is_empty() {
                errs.push(FieldError::required(format!("{p}.name"), ""));
            }
            for (j, kp) in s.items.iter().flatten().enumerate() {
                validate_key_to_path(kp, &format!("{p}.items[{j}]"), errs);
                if !kp.path.is_empty() && !all_paths.insert(kp.path.clone()) {
                    errs.push(FieldError::invalid(
                        path,
                        &s.name,
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(c) = &source.config_map {
            count += 1;
            let p = format!("{src}.configMap");
            if c.name.is_empty() {
                errs.push(FieldError::required(format!("{p}.name"), ""));
            }
            for (j, kp) in c.items.iter().flatten().enumerate() {
                validate_key_to_path(kp, &format!("{p}.items[{j}]"), errs);
                if !kp.path.is_empty() && !all_paths.insert(kp.path.clone()) {
                    errs.push(FieldError::invalid(
                        path,
                        &c.name,
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(d) = &source.downward_api {
            count += 1;
            let p = format!("{src}.downwardAPI");
            for file in d.items.iter().flatten() {
                validate_downward_api_file(file, &p, errs);
                if !file.path.is_empty() && !all_paths.insert(file.path.clone()) {
                    errs.push(FieldError::invalid(
                        path,
                        &file.path,
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(t) = &source.service_account_token {
            count += 1;
            let p = format!("{src}.serviceAccountToken");
            let seconds = t.expiration_seconds.unwrap_or(0);
            if seconds < 600 {
                errs.push(FieldError::invalid(
                    format!("{p}.expirationSeconds"),
                    seconds,
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if seconds > 1 << 32 {
                errs.push(FieldError::invalid(
                    format!("{p}.expirationSeconds"),
                    seconds,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
            if t.path.is_empty() {
                errs.push(FieldError::required(format!("{path}.path"), ""));
            }
        }
        if count > 1 {
            errs.push(FieldError::forbidden(
                &src,
                "may not specify more than 1 volume type",
            ));
        }
    }
    validate_mode(pr.default_mode, &format!("{path}.defaultMode"), errs);
}

/// No `..` path element.
pub fn validate_path_no_backsteps(target: &str, path: &str, errs: &mut ErrorList) {
    if target.split('/').any(|part| part == "..") {
        errs.push(FieldError::invalid(path, target, "must not contain '..'"));
    }
}

/// Relative and without `..` elements.
pub fn validate_local_descending_path(target: &str, path: &str, errs: &mut ErrorList) {
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path, target, "must be a relative path"));
    }
    validate_path_no_backsteps(target, path, errs);
}

fn validate_local_non_reserved_path(target: &str, path: &str, errs: &mut ErrorList) {
    validate_local_descending_path(target, path, errs);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(
            path,
            target,
            "must not start with '..'",
        ));
    }
}
