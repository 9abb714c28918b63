//! Per-kind registry strategies: what create resets, which part of an object
//! the main resource and each subresource may write, what may not change,
//! graceful deletion periods.

use base64::Engine;
use serde_json::{Map, Value, json};

use super::auth::UserInfo;
use super::errors::ApiError;
use super::meta;
use super::resources::ResourceDef;

/// Kinds whose metadata.generation follows spec changes. Pods do on current
/// servers (the v1.25 server leaves it unset; nothing in the kubelet reads it).
pub fn tracks_generation(res: &ResourceDef) -> bool {
    res.kind == "Pod"
}

/// PUT of a missing object creates it.
pub fn allow_create_on_update(res: &ResourceDef) -> bool {
    matches!(res.kind, "Event" | "Service" | "Endpoints" | "Lease")
}

/// Kinds whose status only the status subresource writes.
fn status_owned(res: &ResourceDef) -> bool {
    matches!(
        res.kind,
        "Pod"
            | "Node"
            | "Namespace"
            | "Service"
            | "CertificateSigningRequest"
            | "PersistentVolume"
            | "PersistentVolumeClaim"
            | "VolumeAttachment"
    )
}

fn string_data_into_data(obj: &mut Value) {
    let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    let data = meta::obj_at(obj, &["data"]);
    for (k, v) in sd {
        if let Value::String(s) = v {
            let enc = base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
            data.insert(k, Value::String(enc));
        }
    }
}

/// Service ClusterIP allocation from the default service CIDR.
fn allocate_cluster_ip(obj: &mut Value) {
    let spec = meta::obj_at(obj, &["spec"]);
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if ty == "ExternalName" {
        return;
    }
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => ip.to_string(),
        _ => {
            let b: [u8; 2] = rand::random();
            format!("10.96.{}.{}", b[0], b[1].clamp(11, 254))
        }
    };
    spec.insert("clusterIP".into(), json!(ip));
    spec.insert("clusterIPs".into(), json!([ip]));
    if ip != "None" {
        spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
        spec.entry("ipFamilyPolicy")
            .or_insert_with(|| json!("SingleStack"));
    }
}

/// PrepareForCreate.
pub fn prepare_create(res: &ResourceDef, obj: &mut Value, user: &UserInfo) {
    match res.kind {
        "Pod" => {
            let qos = super::defaults::qos_class(obj);
            obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        "Namespace" => {
            let name = meta::name(obj).to_string();
            obj["status"] = json!({"phase": "Active"});
            meta::obj_at(obj, &["spec"]).insert("finalizers".into(), json!(["kubernetes"]));
            meta::obj_at(obj, &["metadata", "labels"])
                .insert("kubernetes.io/metadata.name".into(), json!(name));
        }
        "CertificateSigningRequest" => {
            obj["status"] = json!({});
            let spec = meta::obj_at(obj, &["spec"]);
            spec.insert("username".into(), json!(user.name));
            spec.insert("groups".into(), json!(user.groups));
            if user.uid.is_empty() {
                spec.remove("uid");
            } else {
                spec.insert("uid".into(), json!(user.uid));
            }
            spec.remove("extra");
        }
        "Service" => {
            obj["status"] = json!({"loadBalancer": {}});
            allocate_cluster_ip(obj);
        }
        "PersistentVolume" | "PersistentVolumeClaim" => {
            obj["status"] = json!({"phase": "Pending"});
        }
        "Secret" => string_data_into_data(obj),
        _ => {}
    }
}

fn copy_field(new: &mut Value, old: &Value, path: &[&str]) {
    match meta::get_path(old, path) {
        Some(v) => meta::set_path(new, path, v.clone()),
        None => {
            meta::remove_path(new, path);
        }
    }
}

fn conditions_of(v: &Value) -> Vec<Value> {
    meta::get_path(v, &["status", "conditions"])
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Keeps the old object's conditions of type `ty` in `new`, dropping any
/// the writer added or changed.
fn preserve_conditions(new: &mut Value, old: &Value, ty: &str) {
    let mut conds: Vec<Value> = conditions_of(new)
        .into_iter()
        .filter(|c| meta::str_at(c, &["type"]) != Some(ty))
        .collect();
    conds.extend(
        conditions_of(old)
            .into_iter()
            .filter(|c| meta::str_at(c, &["type"]) == Some(ty)),
    );
    meta::set_path(new, &["status", "conditions"], Value::Array(conds));
}

/// Fills lastUpdateTime / lastTransitionTime of CSR conditions.
fn condition_timestamps(new: &mut Value, old: &Value) {
    let now = meta::now_rfc3339();
    let olds = conditions_of(old);
    let mut conds = conditions_of(new);
    for c in &mut conds {
        let Some(m) = c.as_object_mut() else { continue };
        let ty = m.get("type").cloned();
        let prev = olds.iter().find(|o| o.get("type") == ty.as_ref());
        if m.get("lastUpdateTime").is_none_or(Value::is_null) {
            m.insert("lastUpdateTime".into(), json!(now));
        }
        if m.get("lastTransitionTime").is_none_or(Value::is_null) {
            let t = match prev {
                Some(p) if p.get("status") == m.get("status") => p
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or_else(|| json!(now)),
                _ => json!(now),
            };
            m.insert("lastTransitionTime".into(), t);
        }
    }
    if !conds.is_empty() {
        meta::set_path(new, &["status", "conditions"], Value::Array(conds));
    }
}

/// PrepareForUpdate of the main resource (`sub` None) or a subresource;
/// also carries the metadata a client cannot change.
pub fn prepare_update(res: &ResourceDef, sub: Option<&str>, new: &mut Value, old: &Value) {
    let m: &mut Map<String, Value> = meta::metadata(new);
    if m.get("uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        m.insert("uid".into(), json!(meta::uid(old)));
    }
    for f in [
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        copy_field(new, old, &["metadata", f]);
    }
    match (res.kind, sub) {
        (_, None) if status_owned(res) => {
            copy_field(new, old, &["status"]);
            if res.kind == "Namespace" {
                copy_field(new, old, &["spec", "finalizers"]);
            }
        }
        ("CertificateSigningRequest", Some("status")) => {
            copy_field(new, old, &["spec"]);
            preserve_conditions(new, old, "Approved");
            preserve_conditions(new, old, "Denied");
            condition_timestamps(new, old);
        }
        ("CertificateSigningRequest", Some("approval")) => {
            copy_field(new, old, &["spec"]);
            copy_field(new, old, &["status", "certificate"]);
            preserve_conditions(new, old, "Failed");
            condition_timestamps(new, old);
        }
        ("Namespace", Some("finalize")) => {
            let finalizers = meta::get_path(new, &["spec", "finalizers"]).cloned();
            let mut next = old.clone();
            match finalizers {
                Some(f) => meta::set_path(&mut next, &["spec", "finalizers"], f),
                None => {
                    meta::remove_path(&mut next, &["spec", "finalizers"]);
                }
            }
            *new = next;
        }
        (_, Some("status")) => {
            copy_field(new, old, &["spec"]);
            if res.kind == "Pod" {
                copy_field(new, old, &["metadata", "ownerReferences"]);
            }
        }
        _ => {}
    }
    if res.kind == "Secret" {
        string_data_into_data(new);
    }
    if res.kind == "Namespace" {
        let name = meta::name(old).to_string();
        meta::obj_at(new, &["metadata", "labels"])
            .insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    if tracks_generation(res) && sub.is_none() && new.get("spec") != old.get("spec") {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta::metadata(new).insert("generation".into(), json!(g + 1));
    }
}

fn invalid(res: &ResourceDef, name: &str, field: &str, msg: &str) -> ApiError {
    ApiError::invalid(
        res.kind,
        res.group,
        name,
        &[(field.to_string(), msg.to_string())],
    )
}

/// The pod spec with the fields an update may change blanked out.
fn pod_spec_masked(spec: Option<&Value>) -> Value {
    let mut s = spec.cloned().unwrap_or(Value::Null);
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = s.get_mut(list) {
            for c in cs {
                if let Some(m) = c.as_object_mut() {
                    m.remove("image");
                }
            }
        }
    }
    if let Some(m) = s.as_object_mut() {
        m.remove("activeDeadlineSeconds");
        m.remove("tolerations");
        m.remove("terminationGracePeriodSeconds");
    }
    s
}

pub fn validate_update(
    res: &ResourceDef,
    sub: Option<&str>,
    new: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    let name = meta::name(old);
    if meta::uid(new) != meta::uid(old) {
        return Err(invalid(
            res,
            name,
            "metadata.uid",
            &format!("Invalid value: {:?}: field is immutable", meta::uid(new)),
        ));
    }
    match (res.kind, sub) {
        ("Pod", None) => {
            if pod_spec_masked(new.get("spec")) != pod_spec_masked(old.get("spec")) {
                return Err(invalid(
                    res,
                    name,
                    "spec",
                    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                ));
            }
            Ok(())
        }
        ("CertificateSigningRequest", None) if new.get("spec") != old.get("spec") => Err(invalid(
            res,
            name,
            "spec",
            "Forbidden: updates to certificate signing request spec are forbidden",
        )),
        ("Node", _) => {
            let cidr = |v: &Value| {
                meta::str_at(v, &["spec", "podCIDR"])
                    .unwrap_or("")
                    .to_string()
            };
            if !cidr(old).is_empty() && cidr(new) != cidr(old) {
                return Err(invalid(
                    res,
                    name,
                    "spec.podCIDR",
                    "Forbidden: podCIDR cannot be changed once set",
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn dns_subdomain(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// A core/v1 Event without an eventTime lives in its involved object's
/// namespace; one about a cluster-scoped object (no namespace) only in
/// "default" (or none), as the server's legacy event validation requires.
fn validate_event_namespace(res: &ResourceDef, name: &str, obj: &Value) -> Result<(), ApiError> {
    if meta::get_path(obj, &["eventTime"]).is_some_and(|t| !t.is_null()) {
        return Ok(());
    }
    let ns = meta::str_at(obj, &["metadata", "namespace"]).unwrap_or("");
    let involved = meta::str_at(obj, &["involvedObject", "namespace"]).unwrap_or("");
    let ok = match involved {
        "" => ns.is_empty() || ns == "default",
        other => ns == other,
    };
    if ok {
        return Ok(());
    }
    Err(invalid(
        res,
        name,
        "involvedObject.namespace",
        &format!("Invalid value: {involved:?}: does not match event.namespace"),
    ))
}

/// Validation on create: names, and the pod fields without which nothing works.
pub fn validate_create(res: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let name = meta::name(obj);
    let path_safe = !name.contains('/') && !name.contains('%') && name != "." && name != "..";
    let strict = matches!(
        res.kind,
        "Pod" | "Node" | "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount" | "Lease"
    );
    if !path_safe || (strict && !dns_subdomain(name)) {
        return Err(invalid(
            res,
            name,
            "metadata.name",
            &format!(
                "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ));
    }
    if res.kind == "Event" {
        validate_event_namespace(res, name, obj)?;
    }
    if res.kind == "Pod" {
        let containers = meta::get_path(obj, &["spec", "containers"])
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if containers.is_empty() {
            return Err(invalid(res, name, "spec.containers", "Required value"));
        }
        let mut seen = Vec::new();
        for list in ["initContainers", "containers"] {
            let cs = meta::get_path(obj, &["spec", list])
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (i, c) in cs.iter().enumerate() {
                let cname = meta::str_at(c, &["name"]).unwrap_or("");
                if cname.is_empty() {
                    return Err(invalid(
                        res,
                        name,
                        &format!("spec.{list}[{i}].name"),
                        "Required value",
                    ));
                }
                if seen.contains(&cname.to_string()) {
                    return Err(invalid(
                        res,
                        name,
                        &format!("spec.{list}[{i}].name"),
                        &format!("Duplicate value: {cname:?}"),
                    ));
                }
                seen.push(cname.to_string());
                if meta::str_at(c, &["image"]).unwrap_or("").is_empty() {
                    return Err(invalid(
                        res,
                        name,
                        &format!("spec.{list}[{i}].image"),
                        "Required value",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The deletion grace period: pods that are scheduled and not terminal get
/// the requested period or their terminationGracePeriodSeconds; everything
/// else goes at once.
pub fn grace_period(res: &ResourceDef, obj: &Value, requested: Option<i64>) -> i64 {
    if res.kind != "Pod" {
        return 0;
    }
    let phase = meta::str_at(obj, &["status", "phase"]).unwrap_or("");
    let scheduled = meta::str_at(obj, &["spec", "nodeName"]).is_some_and(|n| !n.is_empty());
    if !scheduled || phase == "Succeeded" || phase == "Failed" {
        return 0;
    }
    let period = requested.unwrap_or_else(|| {
        meta::get_path(obj, &["spec", "terminationGracePeriodSeconds"])
            .and_then(Value::as_i64)
            .unwrap_or(30)
    });
    // A negative request means "as short as possible" but still graceful.
    if period < 0 { 1 } else { period }
}

/// Whether a delete of this kind answers with the object (pods do) rather
/// than a Status.
pub fn returns_deleted_object(res: &ResourceDef) -> bool {
    res.kind == "Pod"
}
