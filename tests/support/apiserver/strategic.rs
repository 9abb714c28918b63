//! Applying a strategic merge patch as the server does (the apply side of
//! apimachinery's strategicpatch with parallel-list merging on and unmatched
//! nulls ignored): merge-keyed lists, `$patch` (replace/delete),
//! `$retainKeys`, `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>`,
//! with the server's checks: a patch list whose order disagrees with its
//! `$setElementOrder` list, a malformed directive, a key outside
//! `$retainKeys`, a list of lists or an element without its merge key is
//! refused with the code and message kube-apiserver answers.

use std::collections::HashSet;

use kubelet::util::strategicpatch::gofmt;
use kubelet::util::strategicpatch::schema::child_path;
use kubelet::util::strategicpatch::{ListStrategy, PatchSchema};
use serde_json::{Map, Value};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

/// Why a patch does not apply, sorted by the answer kube-apiserver gives
/// (its patch handler's interpretation of apimachinery's errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmpError {
    /// 400 BadRequest: a malformed directive (mergepatch's format errors).
    BadRequest(&'static str),
    /// 422 Invalid: lists of lists, content outside `$retainKeys`.
    Unprocessable(&'static str),
    /// 500: every other failure, its message as is (an order mismatch, a
    /// missing merge key, an unknown `$patch`).
    Internal(String),
}

impl std::fmt::Display for SmpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SmpError::BadRequest(m) | SmpError::Unprocessable(m) => f.write_str(m),
            SmpError::Internal(m) => f.write_str(m),
        }
    }
}

const BAD_SET_ORDER: SmpError =
    SmpError::BadRequest("invalid patch format of setElementOrder list");
const BAD_RETAIN_KEYS: SmpError = SmpError::BadRequest("invalid patch format of retainKeys");
const BAD_PRIMITIVE_LIST: SmpError = SmpError::BadRequest("invalid patch format of primitive list");
const LIST_OF_LISTS: SmpError = SmpError::Unprocessable("lists of lists are not supported");

fn internal(msg: impl Into<String>) -> SmpError {
    SmpError::Internal(msg.into())
}

/// Go's `reflect.TypeOf` name of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn no_merge_key(v: &Value, key: &str) -> SmpError {
    internal(format!(
        "map: {} does not contain declared merge key: {key}",
        gofmt::v(v)
    ))
}

type R<T> = Result<T, SmpError>;

struct Ctx {
    schema: PatchSchema,
}

/// Applies `patch` to `original`, both JSON objects of `kind`.
pub fn apply(kind: &'static str, original: &Value, patch: &Value) -> R<Value> {
    let (Value::Object(o), Value::Object(p)) = (original, patch) else {
        return Err(SmpError::BadRequest("invalid JSON document"));
    };
    let ctx = Ctx {
        schema: PatchSchema::of(kind),
    };
    let mut merged = Value::Object(merge_map(&ctx, "", o.clone(), p.clone())?);
    strip_directives(&mut merged);
    Ok(merged)
}

fn same_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn discard_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(discard_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Removes directive keys a typed decode would drop.
fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| {
                k != DIRECTIVE
                    && k != RETAIN_KEYS
                    && !k.starts_with(SET_ORDER)
                    && !k.starts_with(DELETE_FROM)
            });
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

fn merge_map(
    ctx: &Ctx,
    path: &str,
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
) -> R<Map<String, Value>> {
    if let Some(d) = patch.remove(DIRECTIVE) {
        return match d.as_str() {
            Some("replace") => Ok(patch),
            Some("delete") => Ok(Map::new()),
            _ => {
                patch.insert(DIRECTIVE.to_string(), d.clone());
                Err(internal(format!(
                    "unknown patch type: {} in map: {}",
                    gofmt::v(&d),
                    gofmt::v(&Value::Object(patch))
                )))
            }
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(ctx, path, &mut original, &mut patch)?;
    for (k, mut pv) in patch {
        let (key, is_delete_list) = match k.strip_prefix(DELETE_FROM) {
            Some(f) => (f.to_string(), true),
            None if k.starts_with(DELETE_FROM.trim_end_matches('/')) => {
                return Err(BAD_PRIMITIVE_LIST);
            }
            None => (k, false),
        };
        if pv.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(ov) = original.get(&key) else {
            if !is_delete_list {
                discard_nulls(&mut pv);
                original.insert(key, pv);
            }
            continue;
        };
        if !same_type(ov, &pv) {
            if !is_delete_list {
                discard_nulls(&mut pv);
                original.insert(key, pv);
            }
            continue;
        }
        let sub = child_path(path, &key);
        let merged = match (original.remove(&key), pv) {
            (Some(Value::Object(o)), Value::Object(p)) => {
                Value::Object(merge_map(ctx, &sub, o, p)?)
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                Value::Array(merge_slice_handler(ctx, &sub, o, p, is_delete_list)?)
            }
            (_, p) => p,
        };
        original.insert(key, merged);
    }
    Ok(original)
}

fn apply_retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> R<()> {
    let Some(rk) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(list) = rk else {
        return Err(BAD_RETAIN_KEYS);
    };
    let keep: HashSet<String> = list
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    for (k, v) in patch.iter() {
        if v.is_null() || k.starts_with(DELETE_FROM) || k.starts_with(SET_ORDER) {
            continue;
        }
        if !keep.contains(k) {
            return Err(BAD_RETAIN_KEYS);
        }
    }
    original.retain(|k, _| keep.contains(k));
    Ok(())
}

fn apply_set_element_order(
    ctx: &Ctx,
    path: &str,
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> R<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ORDER.trim_end_matches('/')))
        .cloned()
        .collect();
    for key in keys {
        let order = patch.remove(&key).unwrap_or(Value::Null);
        let Value::Array(order) = order else {
            return Err(internal(format!(
                "expected a []interface {{}}, but received a {}",
                go_type(&order)
            )));
        };
        let Some(field) = key.strip_prefix(SET_ORDER).map(str::to_string) else {
            return Err(BAD_SET_ORDER);
        };
        let sub = child_path(path, &field);
        let merge_key = match ctx.schema.list(&sub) {
            ListStrategy::MergeByKey(k) => Some(k),
            _ => None,
        };
        let orig_list = match original.get(&field) {
            Some(Value::Array(a)) => Some(a.clone()),
            Some(v) => {
                return Err(internal(format!(
                    "expected a []interface {{}}, but received a {}",
                    go_type(v)
                )));
            }
            None => None,
        };
        let patch_list = match patch.remove(&field) {
            Some(Value::Array(a)) => Some(a),
            Some(v) => {
                return Err(internal(format!(
                    "expected a []interface {{}}, but received a {}",
                    go_type(&v)
                )));
            }
            None => None,
        };
        validate_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;
        let merged = match (orig_list.clone(), patch_list) {
            (Some(o), None) => o,
            (None, Some(p)) => p,
            (Some(o), Some(p)) => merge_slice_handler(ctx, &sub, o, p, false)?,
            (None, None) => continue,
        };
        let (in_order, server_only) = partition(&merged, &order, merge_key)?;
        let server_order = orig_list.unwrap_or_default();
        let both = normalize_element_order(in_order, server_only, &order, &server_order, merge_key);
        original.insert(field, Value::Array(both));
    }
    Ok(())
}

/// The patch list's elements (deletions and directives aside) must appear
/// in the `$setElementOrder` list, in the same relative order.
fn validate_order(patch_list: &[Value], order: &[Value], merge_key: Option<&str>) -> R<()> {
    if patch_list.is_empty() || order.is_empty() {
        return Ok(());
    }
    let is_delete = |v: &Value| v.get(DIRECTIVE).and_then(Value::as_str) == Some("delete");
    let listed: Vec<&Value> = match merge_key {
        Some(_) => {
            if let Some(v) = patch_list.iter().find(|v| !v.is_object()) {
                return Err(internal(format!(
                    "expected a map[string]interface {{}}, but received a {}",
                    go_type(v)
                )));
            }
            patch_list.iter().filter(|v| !is_delete(v)).collect()
        }
        None => patch_list.iter().collect(),
    };
    let (mut p, mut o) = (0, 0);
    while p < listed.len() && o < order.len() {
        if listed[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        let equal = match merge_key {
            None => listed[p] == &order[o],
            Some(k) => {
                let l = listed[p].get(k).ok_or_else(|| no_merge_key(listed[p], k))?;
                let r = order[o].get(k).ok_or_else(|| no_merge_key(&order[o], k))?;
                l == r
            }
        };
        if equal {
            p += 1;
        }
        o += 1;
    }
    if p < listed.len() && o >= order.len() {
        return Err(internal(format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            gofmt::v(&Value::Array(patch_list.to_vec())),
            gofmt::v(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn merge_slice_handler(
    ctx: &Ctx,
    path: &str,
    original: Vec<Value>,
    patch: Vec<Value>,
    is_delete_list: bool,
) -> R<Vec<Value>> {
    match ctx.schema.list(path) {
        ListStrategy::Replace => Ok(patch),
        ListStrategy::MergeScalars => merge_slice(ctx, path, original, patch, None, is_delete_list),
        ListStrategy::MergeByKey(k) => {
            merge_slice(ctx, path, original, patch, Some(k), is_delete_list)
        }
    }
}

fn key_of<'a>(v: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match key {
        Some(k) => v.as_object()?.get(k),
        None => Some(v),
    }
}

fn index_in(list: &[Value], v: &Value, key: Option<&str>) -> Option<usize> {
    let want = key_of(v, key)?;
    list.iter().position(|x| key_of(x, key) == Some(want))
}

fn merge_slice(
    ctx: &Ctx,
    path: &str,
    original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: Option<&'static str>,
    is_delete_list: bool,
) -> R<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let first = original.iter().chain(patch.iter()).next();
    if first.is_some_and(Value::is_array) {
        return Err(LIST_OF_LISTS);
    }
    let all: Vec<Value> = original.iter().chain(patch.iter()).cloned().collect();
    if all.iter().any(|v| first.is_some_and(|f| !same_type(f, v))) {
        return Err(internal(format!(
            "list element types are not identical: {}",
            gofmt::v(&Value::Array(all))
        )));
    }
    let maps = first.is_some_and(Value::is_object);
    let (server_order, merged, key, patch) = if !maps {
        if is_delete_list {
            let del: Vec<&Value> = patch.iter().collect();
            return Ok(original.into_iter().filter(|v| !del.contains(&v)).collect());
        }
        let mut out: Vec<Value> = Vec::new();
        for v in original.iter().chain(patch.iter()) {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        (original, out, None, patch)
    } else {
        let key = merge_key
            .ok_or_else(|| internal(format!("cannot merge lists without merge key for {path}")))?;
        let (original, patch_rest) = special_elements(original, &patch, key)?;
        let merged = merge_by_key(ctx, path, original.clone(), patch_rest.clone(), key)?;
        (original, merged, Some(key), patch_rest)
    };
    let (in_patch, server_only) = partition(&merged, &patch, key)?;
    Ok(normalize_element_order(
        in_patch,
        server_only,
        &patch,
        &server_order,
        key,
    ))
}

/// Handles `$patch` elements: deletes by key, or replace-the-list.
fn special_elements(
    mut original: Vec<Value>,
    patch: &[Value],
    key: &str,
) -> R<(Vec<Value>, Vec<Value>)> {
    let mut rest = Vec::new();
    let mut replace = false;
    for v in patch {
        let Some(m) = v.as_object() else {
            return Err(internal(format!(
                "expected a map[string]interface {{}}, but received a {}",
                go_type(v)
            )));
        };
        match m.get(DIRECTIVE).map(|d| d.as_str()) {
            None => rest.push(v.clone()),
            Some(Some("delete")) => {
                let want = m.get(key).ok_or_else(|| no_merge_key(v, key))?;
                original.retain(|o| o.get(key) != Some(want));
            }
            Some(Some("replace")) => replace = true,
            Some(Some("merge")) => {
                return Err(internal(
                    "merging lists cannot yet be specified in the patch",
                ));
            }
            Some(d) => {
                return Err(internal(format!(
                    "unknown patch type: {} in map: {}",
                    d.unwrap_or_default(),
                    gofmt::v(v)
                )));
            }
        }
    }
    if replace {
        return Ok((rest, Vec::new()));
    }
    Ok((original, rest))
}

fn merge_by_key(
    ctx: &Ctx,
    path: &str,
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> R<Vec<Value>> {
    for v in patch {
        let want = v.get(key).cloned().ok_or_else(|| no_merge_key(&v, key))?;
        match original.iter().position(|o| o.get(key) == Some(&want)) {
            Some(i) => {
                let (Value::Object(o), Value::Object(p)) = (original[i].take(), v) else {
                    return Err(internal("expected a map[string]interface {}"));
                };
                original[i] = Value::Object(merge_map(ctx, path, o, p)?);
            }
            None => original.push(v),
        }
    }
    Ok(original)
}

/// Splits `merged` into the elements named in `by` and the others.
fn partition(merged: &[Value], by: &[Value], key: Option<&str>) -> R<(Vec<Value>, Vec<Value>)> {
    let mut named = Vec::new();
    let mut others = Vec::new();
    for v in merged {
        if let Some(k) = key
            && key_of(v, key).is_none()
        {
            return Err(no_merge_key(v, k));
        }
        if index_in(by, v, key).is_some() {
            named.push(v.clone());
        } else {
            others.push(v.clone());
        }
    }
    Ok((named, others))
}

fn sort_by_order(mut items: Vec<Value>, order: &[Value], key: Option<&str>) -> Vec<Value> {
    items.sort_by_key(|v| index_in(order, v, key).unwrap_or(usize::MAX));
    items
}

/// Patch-named elements in the patch's order, with the server-only elements
/// slotted back by their position in the live list.
fn normalize_element_order(
    in_patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let right = sort_by_order(in_patch, patch_order, key);
    let left = sort_by_order(server_only, server_order, key);
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut i, mut j) = (0, 0);
    while i < left.len() || j < right.len() {
        let take_left = if i >= left.len() {
            false
        } else if j >= right.len() {
            true
        } else {
            match (
                index_in(server_order, &left[i], key),
                index_in(server_order, &right[j], key),
            ) {
                (Some(l), Some(r)) => l < r,
                _ => false,
            }
        };
        if take_left {
            out.push(left[i].clone());
            i += 1;
        } else {
            out.push(right[j].clone());
            j += 1;
        }
    }
    out
}
