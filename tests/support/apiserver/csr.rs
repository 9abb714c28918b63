//! CertificateSigningRequests: validation on create, and what the
//! controller manager does next: auto-approval of kubelet client CSRs
//! (csrapproving, when enabled) and signing of approved CSRs of the
//! built-in kubelet signers (csrsigning) with the double's CA.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::errors::ApiError;
use super::meta;
use super::pki;
use super::resources::ResourceDef;
use super::server::Shared;
use super::store::{Inner, ObjKey};

pub const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
pub const APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

fn request_pem(csr: &Value) -> Option<String> {
    let b = STANDARD
        .decode(meta::str_at(csr, &["spec", "request"])?)
        .ok()?;
    String::from_utf8(b).ok()
}

fn usages(csr: &Value) -> Vec<String> {
    meta::get_path(csr, &["spec", "usages"])
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Create-time validation of a CSR.
pub fn validate_create(res: &ResourceDef, csr: &Value) -> Result<(), ApiError> {
    let name = meta::name(csr);
    let invalid =
        |f: &str, m: String| ApiError::invalid(res.kind, res.group, name, &[(f.to_string(), m)]);
    match request_pem(csr) {
        Some(pem) => {
            pki::csr_subject(&pem)
                .map_err(|e| invalid("spec.request", format!("Invalid value: {e}")))?;
        }
        None => return Err(invalid("spec.request", "Required value".into())),
    }
    if meta::str_at(csr, &["spec", "signerName"])
        .unwrap_or("")
        .is_empty()
    {
        return Err(invalid("spec.signerName", "Required value".into()));
    }
    if usages(csr).is_empty() {
        return Err(invalid("spec.usages", "Required value".into()));
    }
    if let Some(e) = meta::get_path(csr, &["spec", "expirationSeconds"]).and_then(Value::as_i64)
        && e < 600
    {
        return Err(invalid(
            "spec.expirationSeconds",
            format!(
                "Invalid value: {e}: may not specify a duration less than 600 seconds (10 minutes)"
            ),
        ));
    }
    Ok(())
}

fn has_condition(csr: &Value, ty: &str) -> bool {
    meta::get_path(csr, &["status", "conditions"])
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                meta::str_at(c, &["type"]) == Some(ty)
                    && meta::str_at(c, &["status"]) != Some("False")
            })
        })
}

fn push_condition(csr: &mut Value, cond: Value) {
    let status = meta::obj_at(csr, &["status"]);
    let conds = status.entry("conditions").or_insert_with(|| json!([]));
    if let Value::Array(c) = conds {
        c.push(cond);
    }
}

fn same_set(a: &[String], b: &[&str]) -> bool {
    a.len() == b.len() && b.iter().all(|x| a.iter().any(|y| y == x))
}

/// Why the signer refuses this request, if it does.
fn signer_check(signer: &str, s: &pki::Subject, usages: &[String]) -> Result<(), String> {
    let node_subject = || -> Result<(), String> {
        if s.organizations != ["system:nodes"] {
            return Err("subject organization is not system:nodes".into());
        }
        if !s.common_name.starts_with("system:node:") {
            return Err("subject common name does not begin with system:node:".into());
        }
        if !s.emails.is_empty() {
            return Err("Email subjectAltNames are not allowed".into());
        }
        if !s.uris.is_empty() {
            return Err("URI subjectAltNames are not allowed".into());
        }
        Ok(())
    };
    match signer {
        KUBELET_CLIENT => {
            node_subject()?;
            if !s.dns_names.is_empty() {
                return Err("DNS subjectAltNames are not allowed".into());
            }
            if !s.ip_addresses.is_empty() {
                return Err("IP subjectAltNames are not allowed".into());
            }
            let full = ["key encipherment", "digital signature", "client auth"];
            if !same_set(usages, &full) && !same_set(usages, &full[1..]) {
                return Err(format!("usages did not match {full:?}"));
            }
            Ok(())
        }
        KUBELET_SERVING => {
            node_subject()?;
            if s.dns_names.is_empty() && s.ip_addresses.is_empty() {
                return Err("DNS or IP subjectAltName is required".into());
            }
            let full = ["key encipherment", "digital signature", "server auth"];
            if !same_set(usages, &full) && !same_set(usages, &full[1..]) {
                return Err(format!("usages did not match {full:?}"));
            }
            Ok(())
        }
        _ => {
            for u in usages {
                if !["digital signature", "key encipherment", "client auth"].contains(&u.as_str()) {
                    return Err(format!("invalid usage for client certificate: {u}"));
                }
            }
            Ok(())
        }
    }
}

/// The controllers' turn after a CSR was written: maybe approve, maybe sign.
pub fn reconcile(shared: &Shared, tx: &mut Inner, res: &'static ResourceDef, name: &str) {
    let Some(mut csr) = tx.get(res, &ObjKey::new("", name)).cloned() else {
        return;
    };
    let signer = meta::str_at(&csr, &["spec", "signerName"])
        .unwrap_or("")
        .to_string();
    let decided = has_condition(&csr, "Approved") || has_condition(&csr, "Denied");
    if shared.opts.auto_approve_csrs && !decided && signer == KUBELET_CLIENT {
        let now = meta::now_rfc3339();
        push_condition(
            &mut csr,
            json!({
                "type": "Approved",
                "status": "True",
                "reason": "AutoApproved",
                "message": "Auto approving kubelet client certificate after SubjectAccessReview.",
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }),
        );
        csr = tx.replace(res, csr);
    }
    let signable = [KUBELET_CLIENT, KUBELET_SERVING, APISERVER_CLIENT].contains(&signer.as_str());
    let has_cert = meta::str_at(&csr, &["status", "certificate"]).is_some_and(|c| !c.is_empty());
    if !shared.opts.sign_csrs
        || !signable
        || !has_condition(&csr, "Approved")
        || has_condition(&csr, "Denied")
        || has_condition(&csr, "Failed")
        || has_cert
    {
        return;
    }
    let Some(pem) = request_pem(&csr) else { return };
    let usages = usages(&csr);
    let checked = pki::csr_subject(&pem).and_then(|s| signer_check(&signer, &s, &usages));
    let requested = meta::get_path(&csr, &["spec", "expirationSeconds"])
        .and_then(Value::as_u64)
        .map(Duration::from_secs);
    let lifetime = requested
        .map(|r| r.min(shared.opts.max_cert_lifetime))
        .unwrap_or(shared.opts.max_cert_lifetime);
    match checked.and_then(|()| shared.pki.sign_csr(&pem, &usages, lifetime)) {
        Ok(cert) => {
            meta::obj_at(&mut csr, &["status"]).insert(
                "certificate".into(),
                json!(STANDARD.encode(cert.as_bytes())),
            );
        }
        Err(why) => {
            let now = meta::now_rfc3339();
            push_condition(
                &mut csr,
                json!({
                    "type": "Failed",
                    "status": "True",
                    "reason": "SignerValidationFailure",
                    "message": why,
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                }),
            );
        }
    }
    tx.replace(res, csr);
}
