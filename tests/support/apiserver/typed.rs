//! Typed normalization of stored objects. The real server decodes every body
//! into its Go type and encodes it again: unknown fields and leftover patch
//! directives vanish, wrongly typed fields are rejected, times are written
//! with whole seconds and quantities in canonical form. Round-tripping
//! through the k8s-openapi types does the same here.

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, VolumeAttachment};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::resources::ResourceDef;

fn roundtrip<T: DeserializeOwned + Serialize>(v: Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Decodes and re-encodes `obj` as the kind of `res`; the error is the
/// decoder's complaint (answered with 400).
pub fn normalize(res: &ResourceDef, obj: Value) -> Result<Value, String> {
    let mut v = match res.kind {
        "Namespace" => roundtrip::<core::Namespace>(obj)?,
        "Node" => roundtrip::<core::Node>(obj)?,
        "Pod" => roundtrip::<core::Pod>(obj)?,
        "Event" => roundtrip::<core::Event>(obj)?,
        "ConfigMap" => roundtrip::<core::ConfigMap>(obj)?,
        "Secret" => roundtrip::<core::Secret>(obj)?,
        "ServiceAccount" => roundtrip::<core::ServiceAccount>(obj)?,
        "Service" => roundtrip::<core::Service>(obj)?,
        "Endpoints" => roundtrip::<core::Endpoints>(obj)?,
        "PersistentVolume" => roundtrip::<core::PersistentVolume>(obj)?,
        "PersistentVolumeClaim" => roundtrip::<core::PersistentVolumeClaim>(obj)?,
        "Lease" => roundtrip::<Lease>(obj)?,
        "CertificateSigningRequest" => roundtrip::<CertificateSigningRequest>(obj)?,
        "RuntimeClass" => roundtrip::<RuntimeClass>(obj)?,
        "CSIDriver" => roundtrip::<CSIDriver>(obj)?,
        "CSINode" => roundtrip::<CSINode>(obj)?,
        "VolumeAttachment" => roundtrip::<VolumeAttachment>(obj)?,
        "ClusterRole" => roundtrip::<ClusterRole>(obj)?,
        "ClusterRoleBinding" => roundtrip::<ClusterRoleBinding>(obj)?,
        "TokenReview" => roundtrip::<TokenReview>(obj)?,
        "SubjectAccessReview" => roundtrip::<SubjectAccessReview>(obj)?,
        _ => obj,
    };
    canonical_quantities(res.kind, &mut v)?;
    Ok(v)
}

fn canonical_map(m: Option<&mut Value>) -> Result<(), String> {
    let Some(Value::Object(m)) = m else {
        return Ok(());
    };
    for (_, q) in m.iter_mut() {
        if let Value::String(s) = q {
            let parsed = kubelet::util::quantity::parse(s).map_err(|e| e.to_string())?;
            *s = parsed.to_canonical_string();
        }
    }
    Ok(())
}

fn canonical_resources(container: &mut Value) -> Result<(), String> {
    let Some(r) = container.get_mut("resources") else {
        return Ok(());
    };
    canonical_map(r.get_mut("requests"))?;
    canonical_map(r.get_mut("limits"))
}

/// Quantities print in canonical form on the way out of a real server.
fn canonical_quantities(kind: &str, v: &mut Value) -> Result<(), String> {
    match kind {
        "Pod" => {
            let Some(spec) = v.get_mut("spec") else {
                return Ok(());
            };
            for list in ["containers", "initContainers", "ephemeralContainers"] {
                if let Some(Value::Array(cs)) = spec.get_mut(list) {
                    for c in cs {
                        canonical_resources(c)?;
                    }
                }
            }
            canonical_map(spec.get_mut("overhead"))
        }
        "Node" => {
            let Some(status) = v.get_mut("status") else {
                return Ok(());
            };
            canonical_map(status.get_mut("capacity"))?;
            canonical_map(status.get_mut("allocatable"))
        }
        "PersistentVolumeClaim" => {
            if let Some(spec) = v.get_mut("spec") {
                canonical_resources(spec)?;
            }
            if let Some(status) = v.get_mut("status") {
                canonical_map(status.get_mut("capacity"))?;
            }
            Ok(())
        }
        "PersistentVolume" => canonical_map(v.get_mut("spec").and_then(|s| s.get_mut("capacity"))),
        _ => Ok(()),
    }
}
