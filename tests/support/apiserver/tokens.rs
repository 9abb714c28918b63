//! Service account tokens: TokenRequest issues JWT-shaped tokens signed by
//! the double (HS256), which then authenticate as the service account while
//! the account and the bound object exist. Also TokenReview and
//! SubjectAccessReview, which the kubelet's webhook authn/authz calls.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::auth::{self, UserInfo};
use super::errors::ApiError;
use super::meta;
use super::rbac::{self, SarPolicy};
use super::resources::{self, ResourceDef};
use super::server::Shared;
use super::store::ObjKey;

/// The signing key and the static token table.
pub struct Tokens {
    key: [u8; 32],
    statics: Mutex<HashMap<String, UserInfo>>,
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    k[..key.len()].copy_from_slice(key);
    let ipad: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
    let opad: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new()
        .chain_update(&ipad)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(&opad)
        .chain_update(inner)
        .finalize()
        .into()
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens {
            key: rand::random(),
            statics: Mutex::new(HashMap::new()),
        }
    }
}

impl Tokens {
    pub fn add_static(&self, token: &str, user: UserInfo) {
        self.statics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.to_string(), user);
    }

    pub fn static_user(&self, token: &str) -> Option<UserInfo> {
        self.statics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()
    }

    /// A signed JWT carrying `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{payload}");
        let sig = URL_SAFE_NO_PAD.encode(hmac_sha256(&self.key, signing_input.as_bytes()));
        format!("{signing_input}.{sig}")
    }

    /// The claims of a token this double signed that has not expired.
    pub fn verify(&self, token: &str) -> Option<Value> {
        let mut parts = token.split('.');
        let (h, p, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let want = URL_SAFE_NO_PAD.encode(hmac_sha256(&self.key, format!("{h}.{p}").as_bytes()));
        if want != s {
            return None;
        }
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).ok()?).ok()?;
        let exp = claims.get("exp")?.as_i64()?;
        (exp > jiff::Timestamp::now().as_second()).then_some(claims)
    }
}

/// The decoded claims of a JWT, without checking its signature.
pub fn decode_claims(token: &str) -> Option<Value> {
    let p = token.split('.').nth(1)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).ok()?).ok()
}

fn exists_with_uid(shared: &Shared, res: &ResourceDef, ns: &str, name: &str, uid: &str) -> bool {
    shared.store.tx(|tx| {
        tx.get(res, &ObjKey::new(ns, name))
            .is_some_and(|o| meta::uid(o) == uid)
    })
}

/// The service account user of valid token claims, while the account and
/// the object the token is bound to still exist.
pub fn service_account_user(shared: &Shared, claims: &Value) -> Option<UserInfo> {
    let k = claims.get("kubernetes.io")?;
    let ns = k.get("namespace")?.as_str()?;
    let sa = k.get("serviceaccount")?;
    let (name, uid) = (sa.get("name")?.as_str()?, sa.get("uid")?.as_str()?);
    if !exists_with_uid(shared, resources::core("serviceaccounts"), ns, name, uid) {
        return None;
    }
    for (field, plural) in [("pod", "pods"), ("secret", "secrets")] {
        if let Some(b) = k.get(field) {
            let (bn, bu) = (b.get("name")?.as_str()?, b.get("uid")?.as_str()?);
            if !exists_with_uid(shared, resources::core(plural), ns, bn, bu) {
                return None;
            }
        }
    }
    Some(UserInfo {
        name: format!("system:serviceaccount:{ns}:{name}"),
        uid: uid.to_string(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
    })
}

fn invalid(name: &str, field: &str, msg: String) -> ApiError {
    ApiError::invalid(
        "TokenRequest",
        "authentication.k8s.io",
        name,
        &[(field.to_string(), msg)],
    )
}

/// POST serviceaccounts/<name>/token.
pub fn token_request(
    shared: &Shared,
    ns: &str,
    sa_name: &str,
    body: Value,
) -> Result<Value, ApiError> {
    let sa_res = resources::core("serviceaccounts");
    let sa = shared
        .store
        .tx(|tx| tx.get(sa_res, &ObjKey::new(ns, sa_name)).cloned())
        .ok_or_else(|| ApiError::not_found(sa_res, sa_name))?;
    let mut spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let exp = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    if exp < 600 {
        return Err(invalid(
            sa_name,
            "spec.expirationSeconds",
            format!("Invalid value: {exp}: may not specify a duration less than 10 minutes"),
        ));
    }
    if exp > 1 << 32 {
        return Err(invalid(
            sa_name,
            "spec.expirationSeconds",
            format!("Invalid value: {exp}: may not specify a duration larger than 2^32 seconds"),
        ));
    }
    spec["expirationSeconds"] = json!(exp);
    let audiences = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a.clone(),
        _ => shared.opts.api_audiences.iter().map(|a| json!(a)).collect(),
    };
    spec["audiences"] = Value::Array(audiences.clone());
    let now = jiff::Timestamp::now().as_second();
    let mut k8s = json!({
        "namespace": ns,
        "serviceaccount": {"name": sa_name, "uid": meta::uid(&sa)},
    });
    if let Some(b) = spec.get("boundObjectRef").filter(|b| !b.is_null()) {
        let kind = meta::str_at(b, &["kind"]).unwrap_or("");
        let bname = meta::str_at(b, &["name"]).unwrap_or("");
        let (field, plural) = match kind {
            "Pod" => ("pod", "pods"),
            "Secret" => ("secret", "secrets"),
            other => {
                return Err(invalid(
                    sa_name,
                    "spec.boundObjectRef.kind",
                    format!("Unsupported value: {other:?}: supported values: \"Pod\", \"Secret\""),
                ));
            }
        };
        let bres = resources::core(plural);
        let obj = shared
            .store
            .tx(|tx| tx.get(bres, &ObjKey::new(ns, bname)).cloned())
            .ok_or_else(|| ApiError::not_found(bres, bname))?;
        if let Some(want) = meta::str_at(b, &["uid"]).filter(|u| !u.is_empty())
            && want != meta::uid(&obj)
        {
            return Err(ApiError::conflict(
                bres,
                bname,
                &format!(
                    "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        k8s[field] = json!({"name": bname, "uid": meta::uid(&obj)});
    }
    let claims = json!({
        "aud": audiences,
        "exp": now + exp,
        "iat": now,
        "iss": shared.opts.token_issuer,
        "kubernetes.io": k8s,
        "nbf": now,
        "sub": format!("system:serviceaccount:{ns}:{sa_name}"),
    });
    let token = shared.tokens.sign(&claims);
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": sa_name, "namespace": ns, "creationTimestamp": meta::now_rfc3339()},
        "spec": spec,
        "status": {
            "token": token,
            "expirationTimestamp": meta::rfc3339_in(exp),
        },
    }))
}

/// POST tokenreviews: who a token is.
pub fn token_review(shared: &Shared, mut body: Value) -> Value {
    let token = meta::str_at(&body, &["spec", "token"])
        .unwrap_or("")
        .to_string();
    let status = match auth::token_user(shared, &token) {
        Some(u) => {
            let auds = decode_claims(&token)
                .and_then(|c| c.get("aud").cloned())
                .unwrap_or_else(|| json!(shared.opts.api_audiences));
            json!({
                "authenticated": true,
                "user": {"username": u.name, "uid": u.uid, "groups": u.groups},
                "audiences": auds,
            })
        }
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    body["status"] = status;
    body
}

/// POST subjectaccessreviews: allowed unless the test said otherwise.
pub fn subject_access_review(shared: &Shared, mut body: Value) -> Value {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    shared
        .sar_log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(spec.clone());
    let policy = *shared.sar.lock().unwrap_or_else(|p| p.into_inner());
    let allowed = match policy {
        SarPolicy::AllowAll => true,
        SarPolicy::DenyAll => false,
        SarPolicy::Rbac => rbac::allowed(shared, &spec),
    };
    body["status"] = if allowed {
        json!({"allowed": true, "reason": "allowed by the API server double"})
    } else {
        json!({"allowed": false, "reason": "denied by the API server double"})
    };
    body
}
