//! GET on a collection: selectors, resourceVersion / resourceVersionMatch
//! semantics, limit and continue.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};

use super::errors::ApiError;
use super::meta;
use super::resources::ResourceDef;
use super::selectors::Selectors;
use super::server::Shared;
use super::store::ObjKey;

/// The list parameters of a request.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub selectors: Selectors,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let v = json!({"rv": rv, "ns": last.namespace, "name": last.name});
    URL_SAFE_NO_PAD.encode(v.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjKey), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, ObjKey::new(ns, name)))
}

fn gone_continue() -> ApiError {
    ApiError::expired(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue value from the response.",
    )
}

/// The served list object.
pub fn list(
    shared: &Shared,
    res: &ResourceDef,
    ns: Option<&str>,
    q: &ListQuery,
) -> Result<Value, ApiError> {
    let rv_param = q.resource_version.as_deref().filter(|s| !s.is_empty());
    let rv_match = q
        .resource_version_match
        .as_deref()
        .filter(|s| !s.is_empty());
    if q.continue_token.is_some() && rv_param.is_some_and(|r| r != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    if rv_match.is_some() && rv_param.is_none() {
        return Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    shared.store.tx(|tx| {
        // (snapshot rv, objects, first key after which to start, paginate?)
        let (at, items, after, paginate) = if let Some(token) = &q.continue_token {
            let (rv, last) = decode_continue(token)?;
            let items = tx.list_at(res, ns, rv).map_err(|_| gone_continue())?;
            (rv, items, Some(last), true)
        } else {
            match (rv_param, rv_match) {
                (Some(rv), Some("Exact")) => {
                    if rv == "0" {
                        return Err(ApiError::bad_request(
                            "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
                        ));
                    }
                    let n = parse_rv(rv)?;
                    let items = tx.list_at(res, ns, n).map_err(|c| {
                        ApiError::expired(format!("too old resource version: {n} ({})", c.0))
                    })?;
                    (n, items, None, true)
                }
                (Some(_), Some(m)) if m != "NotOlderThan" => {
                    return Err(ApiError::bad_request(format!(
                        "resourceVersionMatch: Unsupported value: {m:?}: supported values: \"Exact\", \"NotOlderThan\""
                    )));
                }
                (Some("0"), _) => (tx.current_rv(), tx.list(res, ns), None, false),
                (Some(rv), _) => {
                    let n = parse_rv(rv)?;
                    if n > tx.current_rv() {
                        return Err(ApiError::timeout(format!(
                            "Too large resource version: {n}, current: {}",
                            tx.current_rv()
                        )));
                    }
                    (tx.current_rv(), tx.list(res, ns), None, false)
                }
                (None, _) => (tx.current_rv(), tx.list(res, ns), None, true),
            }
        };
        let mut matched: Vec<Value> = items
            .into_iter()
            .filter(|o| after.as_ref().is_none_or(|a| &ObjKey::of(res, o) > a))
            .filter(|o| q.selectors.matches(o))
            .collect();
        let mut md = Map::new();
        md.insert("resourceVersion".into(), json!(at.to_string()));
        if let Some(limit) = q.limit.filter(|l| paginate && *l > 0 && matched.len() > *l) {
            let remaining = matched.len() - limit;
            matched.truncate(limit);
            if let Some(last) = matched.last() {
                md.insert("continue".into(), json!(encode_continue(at, &ObjKey::of(res, last))));
            }
            if q.selectors.is_empty() {
                md.insert("remainingItemCount".into(), json!(remaining));
            }
        }
        for o in &mut matched {
            if let Some(m) = o.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
        }
        Ok(json!({
            "kind": res.list_kind(),
            "apiVersion": res.api_version(),
            "metadata": Value::Object(md),
            "items": matched,
        }))
    })
}

/// An object reduced to PartialObjectMetadata (metadata-only clients).
pub fn as_partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A list reduced to PartialObjectMetadataList.
pub fn list_as_partial_metadata(list: &Value) -> Value {
    let items: Vec<Value> = list
        .get("items")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(as_partial_metadata).collect())
        .unwrap_or_default();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list.get("metadata").cloned().unwrap_or_else(|| json!({})),
        "items": items,
    })
}

/// GET of one object.
pub fn get(shared: &Shared, res: &ResourceDef, ns: &str, name: &str) -> Result<Value, ApiError> {
    shared
        .store
        .tx(|tx| tx.get(res, &ObjKey::new(ns, name)).cloned())
        .ok_or_else(|| ApiError::not_found(res, name))
}

/// Whether `obj` is in namespace `ns` (or any, when `ns` is None).
pub fn in_namespace(obj: &Value, ns: Option<&str>) -> bool {
    ns.is_none_or(|n| meta::namespace(obj) == n)
}
