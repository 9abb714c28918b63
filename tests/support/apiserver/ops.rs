//! Create, update (PUT) and patch, with the real server's semantics:
//! defaulting, admission, strategies, typed decoding, optimistic concurrency,
//! no-op writes that keep the resourceVersion, and the controllers' reaction
//! (namespace contents, CSR approval and signing).

use serde_json::{Value, json};

use super::admission;
use super::auth::UserInfo;
use super::csr;
use super::defaults;
use super::errors::ApiError;
use super::meta;
use super::patch;
use super::resources::{self, ResourceDef};
use super::server::Shared;
use super::store::{Inner, ObjKey};
use super::strategy;
use super::typed;

/// Who writes, and whether to persist.
pub struct Caller<'a> {
    pub user: &'a UserInfo,
    pub dry_run: bool,
}

/// Checks apiVersion/kind of a body against the resource and fills them.
pub fn check_kind(res: &ResourceDef, body: &mut Value) -> Result<(), ApiError> {
    let Value::Object(m) = body else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let want_av = res.api_version();
    match m.get("apiVersion").and_then(Value::as_str) {
        Some(av) if !av.is_empty() && av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => {}
    }
    match m.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != res.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )));
        }
        _ => {}
    }
    m.insert("apiVersion".into(), json!(want_av));
    m.insert("kind".into(), json!(res.kind));
    Ok(())
}

fn normalize(res: &ResourceDef, obj: Value) -> Result<Value, ApiError> {
    typed::normalize(res, obj)
        .map_err(|e| ApiError::bad_request(format!("error decoding object: {e}")))
}

/// POST to a collection.
pub fn create(
    shared: &Shared,
    res: &'static ResourceDef,
    ns: &str,
    body: Value,
    c: &Caller<'_>,
) -> Result<Value, ApiError> {
    shared
        .store
        .tx(|tx| create_in(shared, tx, res, ns, body, c))
}

pub fn create_in(
    shared: &Shared,
    tx: &mut Inner,
    res: &'static ResourceDef,
    ns: &str,
    mut obj: Value,
    c: &Caller<'_>,
) -> Result<Value, ApiError> {
    check_kind(res, &mut obj)?;
    let m = meta::metadata(&mut obj);
    if res.namespaced {
        let body_ns = m.get("namespace").and_then(Value::as_str).unwrap_or("");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        m.insert("namespace".into(), json!(ns));
    } else {
        m.remove("namespace");
    }
    let name = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty() {
        match m
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
        {
            Some(g) => {
                let n = format!("{g}{}", meta::random_suffix(5));
                m.insert("name".into(), json!(n));
            }
            None => {
                return Err(ApiError::invalid(
                    res.kind,
                    res.group,
                    "",
                    &[(
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ));
            }
        }
    }
    if m.get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty())
    {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    m.insert("uid".into(), json!(meta::new_uid()));
    m.insert("creationTimestamp".into(), json!(meta::now_rfc3339()));
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("generation");
    m.remove("managedFields");
    m.remove("selfLink");
    let name = meta::name(&obj).to_string();
    admission::namespace_lifecycle(tx, res, ns)?;
    defaults::object(res.kind, &mut obj);
    if res.kind == "Pod" {
        admission::admit_pod(shared, tx, res, &mut obj)?;
    }
    admission::node_restriction(c.user, "create", res, None, Some(&obj), &name)?;
    strategy::prepare_create(res, &mut obj, c.user);
    if strategy::tracks_generation(res) {
        meta::metadata(&mut obj).insert("generation".into(), json!(1));
    }
    let obj = normalize(res, obj)?;
    strategy::validate_create(res, &obj)?;
    if res.kind == "CertificateSigningRequest" {
        csr::validate_create(res, &obj)?;
    }
    if tx.get(res, &ObjKey::of(res, &obj)).is_some() {
        return Err(ApiError::already_exists(res, &name));
    }
    if c.dry_run {
        return Ok(obj);
    }
    let stored = tx.insert(res, obj);
    after_create(shared, tx, res, &stored);
    Ok(stored)
}

/// What the controllers do when an object appears.
fn after_create(shared: &Shared, tx: &mut Inner, res: &'static ResourceDef, obj: &Value) {
    let admin = UserInfo::admin();
    let sys = Caller {
        user: &admin,
        dry_run: false,
    };
    match res.kind {
        "Namespace" => {
            let ns = meta::name(obj).to_string();
            let sa = json!({"metadata": {"name": "default"}});
            let _ = create_in(
                shared,
                tx,
                resources::core("serviceaccounts"),
                &ns,
                sa,
                &sys,
            );
            let cm = json!({
                "metadata": {"name": "kube-root-ca.crt"},
                "data": {"ca.crt": shared.pki.ca_pem},
            });
            let _ = create_in(shared, tx, resources::core("configmaps"), &ns, cm, &sys);
        }
        "CertificateSigningRequest" => csr::reconcile(shared, tx, res, meta::name(obj)),
        _ => {}
    }
}

/// PUT of an object or subresource. Returns 201 when the PUT created it.
#[allow(clippy::too_many_arguments)]
pub fn update(
    shared: &Shared,
    res: &'static ResourceDef,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    body: Value,
    c: &Caller<'_>,
) -> Result<(u16, Value), ApiError> {
    shared
        .store
        .tx(|tx| update_in(shared, tx, res, ns, name, sub, body, c, false))
}

/// PATCH of an object or subresource.
#[allow(clippy::too_many_arguments)]
pub fn patch(
    shared: &Shared,
    res: &'static ResourceDef,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    content_type: &str,
    body: &[u8],
    c: &Caller<'_>,
) -> Result<Value, ApiError> {
    shared.store.tx(|tx| {
        let current = tx
            .get(res, &ObjKey::new(ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, name))?;
        let patched = patch::apply(res, name, content_type, &current, body)?;
        update_in(shared, tx, res, ns, name, sub, patched, c, true).map(|(_, v)| v)
    })
}

#[allow(clippy::too_many_arguments)]
pub fn update_in(
    shared: &Shared,
    tx: &mut Inner,
    res: &'static ResourceDef,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    mut new: Value,
    c: &Caller<'_>,
    is_patch: bool,
) -> Result<(u16, Value), ApiError> {
    check_kind(res, &mut new)?;
    let key = ObjKey::new(ns, name);
    let Some(old) = tx.get(res, &key).cloned() else {
        if sub.is_none() && !is_patch && strategy::allow_create_on_update(res) {
            if meta::name(&new) != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta::name(&new)
                )));
            }
            meta::metadata(&mut new).remove("resourceVersion");
            return create_in(shared, tx, res, ns, new, c).map(|v| (201, v));
        }
        return Err(ApiError::not_found(res, name));
    };
    let body_name = meta::name(&new);
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = meta::namespace(&new).to_string();
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if res.namespaced {
        meta::metadata(&mut new).insert("namespace".into(), json!(ns));
    }
    let new_uid = meta::uid(&new).to_string();
    if !is_patch && !new_uid.is_empty() && new_uid != meta::uid(&old) {
        return Err(ApiError::conflict(
            res,
            name,
            &format!(
                "Precondition failed: UID in precondition: {new_uid}, UID in object meta: {}",
                meta::uid(&old)
            ),
        ));
    }
    let rv = meta::resource_version(&new).to_string();
    if !rv.is_empty() && rv != meta::resource_version(&old) {
        return Err(ApiError::stale(res, name));
    }
    admission::node_restriction(
        c.user,
        if is_patch { "patch" } else { "update" },
        res,
        sub,
        Some(&old),
        name,
    )?;
    strategy::prepare_update(res, sub, &mut new, &old);
    defaults::object(res.kind, &mut new);
    meta::metadata(&mut new).insert(
        "resourceVersion".into(),
        json!(meta::resource_version(&old)),
    );
    let new = normalize(res, new)?;
    strategy::validate_update(res, sub, &new, &old)?;
    if new == old {
        return Ok((200, old));
    }
    let finished = meta::is_deleting(&new)
        && meta::finalizers(&new).is_empty()
        && old
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            == Some(0);
    if c.dry_run {
        return Ok((200, new));
    }
    if finished {
        let gone = tx.remove(res, &key).unwrap_or(new);
        super::delete::after_remove(shared, tx, res, &gone);
        return Ok((200, gone));
    }
    let stored = tx.replace(res, new);
    if res.kind == "CertificateSigningRequest" {
        csr::reconcile(shared, tx, res, name);
    }
    Ok((200, stored))
}
