//! DELETE: preconditions, graceful deletion of pods bound to a node
//! (deletionTimestamp + deletionGracePeriodSeconds until a delete with
//! grace 0), finalizers, namespace termination.

use serde_json::{Value, json};

use super::admission;
use super::errors::{ApiError, success_status};
use super::meta;
use super::ops::Caller;
use super::resources::{self, RESOURCES, ResourceDef};
use super::selectors::Selectors;
use super::server::Shared;
use super::store::{Inner, ObjKey};
use super::strategy;

/// metav1.DeleteOptions as far as the double honours them.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

impl DeleteOptions {
    /// From the query string and the (optional) JSON body.
    pub fn parse(query_grace: Option<&str>, body: &[u8]) -> Result<Self, ApiError> {
        let mut o = DeleteOptions::default();
        if !body.is_empty() {
            let v: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
            o.grace_period_seconds = v.get("gracePeriodSeconds").and_then(Value::as_i64);
            o.precondition_uid = meta::str_at(&v, &["preconditions", "uid"]).map(str::to_string);
            o.precondition_rv =
                meta::str_at(&v, &["preconditions", "resourceVersion"]).map(str::to_string);
        }
        if let Some(g) = query_grace {
            let g = g
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?;
            o.grace_period_seconds = Some(g);
        }
        Ok(o)
    }
}

pub fn delete(
    shared: &Shared,
    res: &'static ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    c: &Caller<'_>,
) -> Result<Value, ApiError> {
    shared
        .store
        .tx(|tx| delete_in(shared, tx, res, ns, name, opts, c))
}

fn mark_deleting(obj: &mut Value, grace: i64) {
    let m = meta::metadata(obj);
    m.insert("deletionTimestamp".into(), json!(meta::rfc3339_in(grace)));
    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
    if let Some(g) = m
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|g| *g > 0)
    {
        m.insert("generation".into(), json!(g + 1));
    }
}

fn answer(res: &ResourceDef, obj: &Value) -> Value {
    if strategy::returns_deleted_object(res) {
        obj.clone()
    } else {
        success_status(res, meta::name(obj), meta::uid(obj))
    }
}

pub fn delete_in(
    shared: &Shared,
    tx: &mut Inner,
    res: &'static ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    c: &Caller<'_>,
) -> Result<Value, ApiError> {
    let key = ObjKey::new(ns, name);
    let existing = tx
        .get(res, &key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(res, name))?;
    admission::node_restriction(c.user, "delete", res, None, Some(&existing), name)?;
    if let Some(uid) = &opts.precondition_uid
        && uid != meta::uid(&existing)
    {
        return Err(ApiError::conflict(
            res,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta::uid(&existing)
            ),
        ));
    }
    if let Some(rv) = &opts.precondition_rv
        && rv != meta::resource_version(&existing)
    {
        return Err(ApiError::conflict(
            res,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta::resource_version(&existing)
            ),
        ));
    }
    if res.kind == "Namespace" {
        return delete_namespace(shared, tx, res, existing, c);
    }
    let grace = strategy::grace_period(res, &existing, opts.grace_period_seconds);
    let finalizers = !meta::finalizers(&existing).is_empty();
    if meta::is_deleting(&existing) {
        let current = existing
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if grace >= current && !(grace == 0 && current == 0 && !finalizers) {
            return Ok(answer(res, &existing));
        }
    }
    if grace > 0 || finalizers {
        let mut obj = existing;
        mark_deleting(&mut obj, grace);
        if c.dry_run {
            return Ok(obj);
        }
        let stored = tx.replace(res, obj);
        return Ok(answer(res, &stored));
    }
    if c.dry_run {
        return Ok(answer(res, &existing));
    }
    let gone = tx.remove(res, &key).unwrap_or(existing);
    after_remove(shared, tx, res, &gone);
    Ok(answer(res, &gone))
}

/// A namespace delete marks it Terminating, deletes what it holds (pods on
/// nodes gracefully) and removes it once empty.
fn delete_namespace(
    shared: &Shared,
    tx: &mut Inner,
    res: &'static ResourceDef,
    mut ns_obj: Value,
    c: &Caller<'_>,
) -> Result<Value, ApiError> {
    if c.dry_run {
        return Ok(ns_obj);
    }
    let ns = meta::name(&ns_obj).to_string();
    if !meta::is_deleting(&ns_obj) {
        mark_deleting(&mut ns_obj, 0);
        meta::obj_at(&mut ns_obj, &["status"]).insert("phase".into(), json!("Terminating"));
        ns_obj = tx.replace(res, ns_obj);
    }
    for r in RESOURCES
        .iter()
        .filter(|r| r.namespaced && !r.virtual_create)
    {
        for obj in tx.list(r, Some(&ns)) {
            if meta::is_deleting(&obj) {
                continue;
            }
            let _ = delete_in(
                shared,
                tx,
                r,
                &ns,
                meta::name(&obj),
                &DeleteOptions::default(),
                c,
            );
        }
    }
    finish_namespace_if_empty(tx, &ns);
    Ok(tx
        .get(res, &ObjKey::new("", &ns))
        .cloned()
        .unwrap_or(ns_obj))
}

fn finish_namespace_if_empty(tx: &mut Inner, ns: &str) {
    let nsres = resources::core("namespaces");
    let key = ObjKey::new("", ns);
    if !tx.get(nsres, &key).is_some_and(meta::is_deleting) {
        return;
    }
    let empty = RESOURCES
        .iter()
        .filter(|r| r.namespaced && !r.virtual_create)
        .all(|r| tx.list(r, Some(ns)).is_empty());
    if empty {
        tx.remove(nsres, &key);
    }
}

/// Bookkeeping after an object left the store.
pub fn after_remove(_shared: &Shared, tx: &mut Inner, res: &ResourceDef, gone: &Value) {
    if res.namespaced {
        finish_namespace_if_empty(tx, meta::namespace(gone));
    }
}

/// DELETE on a collection: each matching object as a single delete would.
pub fn delete_collection(
    shared: &Shared,
    res: &'static ResourceDef,
    ns: Option<&str>,
    sel: &Selectors,
    opts: &DeleteOptions,
    c: &Caller<'_>,
) -> Result<Value, ApiError> {
    shared.store.tx(|tx| {
        let mut items = Vec::new();
        for obj in tx.list(res, ns).into_iter().filter(|o| sel.matches(o)) {
            let v = delete_in(
                shared,
                tx,
                res,
                meta::namespace(&obj),
                meta::name(&obj),
                opts,
                c,
            )?;
            items.push(v);
        }
        Ok(json!({
            "kind": res.list_kind(),
            "apiVersion": res.api_version(),
            "metadata": {"resourceVersion": tx.current_rv().to_string()},
            "items": items,
        }))
    })
}
