//! The two-way strategic merge patch (apimachinery's CreateTwoWayMergePatch
//! with `$setElementOrder` on): what turns `original` into `modified`.
//!
//! - fields added or changed in `modified` are set, removed ones are null;
//! - maps are diffed recursively (with `$retainKeys` where the schema says);
//! - lists the schema merges by key carry only their added and changed
//!   elements (changed ones with just the changed fields and the key), in
//!   the order of `modified`, deletions (`{"$patch":"delete"}`) last, and
//!   `$setElementOrder/<list>` naming every key of `modified` in order
//!   whenever anything in the list changed or moved — the API server refuses
//!   a patch whose list order disagrees with that directive;
//! - merged scalar lists carry additions, a `$deleteFromPrimitiveList/<list>`
//!   and their order; every other list is replaced whole when it differs.
//!
//! Object keys come out sorted, as Go writes maps.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::gofmt;
use super::schema::{ListStrategy, PatchSchema, child_path};
use super::{DELETE_FROM_PRIMITIVE_LIST, DIRECTIVE, RETAIN_KEYS, SET_ELEMENT_ORDER};

/// Why no patch could be computed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DiffError {
    #[error("invalid JSON document: {which} is not a JSON object")]
    NotAnObject { which: &'static str },
    #[error("lists of lists are not supported (at {path})")]
    ListOfLists { path: String },
    #[error("list element types are not identical at {path}")]
    MixedElementTypes { path: String },
    #[error("map: {element} does not contain declared merge key: {key} (at {path})")]
    NoMergeKey {
        path: String,
        key: String,
        element: String,
    },
    #[error("invalid value for special key {DIRECTIVE} at {path}")]
    BadDirective { path: String },
}

/// The patch that turns `original` into `modified`, both JSON objects of
/// the kind `schema` describes.
pub fn create_two_way_merge_patch(
    original: &Value,
    modified: &Value,
    schema: PatchSchema,
) -> Result<Value, DiffError> {
    let o = original.as_object().ok_or(DiffError::NotAnObject {
        which: "the original",
    })?;
    let m = modified.as_object().ok_or(DiffError::NotAnObject {
        which: "the modified object",
    })?;
    let differ = Differ { schema };
    let patch = differ.maps(o, m, "", false)?;
    Ok(sort_keys(Value::Object(patch)))
}

struct Differ {
    schema: PatchSchema,
}

/// Go's reflect.TypeOf comparison of two decoded JSON values.
fn same_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

impl Differ {
    fn maps(
        &self,
        original: &Map<String, Value>,
        modified: &Map<String, Value>,
        path: &str,
        retain_keys: bool,
    ) -> Result<Map<String, Value>, DiffError> {
        let mut patch = Map::new();
        let mut retained: Vec<Value> = Vec::new();
        for (key, new) in modified {
            if retain_keys && !new.is_null() {
                retained.push(Value::String(key.clone()));
            }
            let Some(old) = original.get(key) else {
                patch.insert(key.clone(), new.clone());
                continue;
            };
            if key == DIRECTIVE {
                match (old.as_str(), new.as_str()) {
                    (Some(o), Some(n)) => {
                        if o != n {
                            patch.insert(key.clone(), new.clone());
                        }
                        continue;
                    }
                    _ => {
                        return Err(DiffError::BadDirective {
                            path: path.to_string(),
                        });
                    }
                }
            }
            if !same_type(old, new) {
                patch.insert(key.clone(), new.clone());
                continue;
            }
            let sub = child_path(path, key);
            match (old, new) {
                (Value::Object(o), Value::Object(n)) => {
                    let diff = self.maps(o, n, &sub, self.schema.retains_keys(&sub))?;
                    if !diff.is_empty() {
                        patch.insert(key.clone(), Value::Object(diff));
                    }
                }
                (Value::Array(o), Value::Array(n)) => self.slice(key, o, n, &sub, &mut patch)?,
                _ => {
                    if old != new {
                        patch.insert(key.clone(), new.clone());
                    }
                }
            }
        }
        for key in original.keys() {
            if !modified.contains_key(key) {
                patch.insert(key.clone(), Value::Null);
            }
        }
        let cleared = original
            .iter()
            .any(|(k, v)| !v.is_null() && !modified.contains_key(k));
        if !retained.is_empty() && (!patch.is_empty() || cleared) {
            retained.sort_by_key(gofmt::v);
            patch.insert(RETAIN_KEYS.to_string(), Value::Array(retained));
        }
        Ok(patch)
    }

    fn slice(
        &self,
        key: &str,
        original: &[Value],
        modified: &[Value],
        path: &str,
        patch: &mut Map<String, Value>,
    ) -> Result<(), DiffError> {
        let merge_key = match self.schema.list(path) {
            ListStrategy::Replace => {
                if original != modified {
                    patch.insert(key.to_string(), Value::Array(modified.to_vec()));
                }
                return Ok(());
            }
            ListStrategy::MergeByKey(k) => Some(k),
            ListStrategy::MergeScalars => None,
        };
        if original.is_empty() {
            if !modified.is_empty() {
                patch.insert(key.to_string(), Value::Array(modified.to_vec()));
            }
            return Ok(());
        }
        let lists = ListDiff::new(original, modified, path)?;
        let ListPatch {
            changes,
            deletions,
            order,
        } = if lists.maps {
            let Some(merge_key) = merge_key else {
                // A list of maps merged without a key: nothing to pair by.
                if original != modified {
                    patch.insert(key.to_string(), Value::Array(modified.to_vec()));
                }
                return Ok(());
            };
            self.maps_by_key(&lists, merge_key)?
        } else {
            scalars(original, modified)
        };
        if !changes.is_empty() {
            patch.insert(key.to_string(), Value::Array(changes));
        }
        if !deletions.is_empty() {
            patch.insert(
                format!("{DELETE_FROM_PRIMITIVE_LIST}/{key}"),
                Value::Array(deletions),
            );
        }
        if let Some(order) = order.filter(|o| !o.is_empty()) {
            patch.insert(format!("{SET_ELEMENT_ORDER}/{key}"), Value::Array(order));
        }
        Ok(())
    }

    /// Changes then `$patch: delete` elements, and the order directive.
    fn maps_by_key(&self, lists: &ListDiff<'_>, merge_key: &str) -> Result<ListPatch, DiffError> {
        let (original, modified, path) = (lists.original, lists.modified, lists.path);
        let key_text = |v: &Value| -> Result<String, DiffError> {
            match v.get(merge_key) {
                Some(k) => Ok(gofmt::v(k)),
                None => Err(DiffError::NoMergeKey {
                    path: path.to_string(),
                    key: merge_key.to_string(),
                    element: gofmt::v(v),
                }),
            }
        };
        let mut old_sorted: Vec<(String, &Value)> = original
            .iter()
            .map(|v| Ok((key_text(v)?, v)))
            .collect::<Result<_, DiffError>>()?;
        let mut new_sorted: Vec<(String, &Value)> = modified
            .iter()
            .map(|v| Ok((key_text(v)?, v)))
            .collect::<Result<_, DiffError>>()?;
        old_sorted.sort_by(|a, b| a.0.cmp(&b.0));
        new_sorted.sort_by(|a, b| a.0.cmp(&b.0));

        let retain = self.schema.retains_keys(path);
        let empty = Map::new();
        let mut changes: Vec<(String, Value)> = Vec::new();
        let mut deletions: Vec<Value> = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < old_sorted.len() || j < new_sorted.len() {
            let order = match (old_sorted.get(i), new_sorted.get(j)) {
                (Some(o), Some(n)) => o.0.cmp(&n.0),
                (Some(_), None) => Ordering::Less,
                (None, _) => Ordering::Greater,
            };
            match order {
                Ordering::Equal => {
                    let (k, old) = &old_sorted[i];
                    let new = new_sorted[j].1;
                    let diff = self.maps(
                        old.as_object().unwrap_or(&empty),
                        new.as_object().unwrap_or(&empty),
                        path,
                        retain,
                    )?;
                    if !diff.is_empty() {
                        let mut diff = diff;
                        diff.insert(
                            merge_key.to_string(),
                            new.get(merge_key).cloned().unwrap_or(Value::Null),
                        );
                        changes.push((k.clone(), Value::Object(diff)));
                    }
                    i += 1;
                    j += 1;
                }
                // In the original only: removed.
                Ordering::Less => {
                    let old = old_sorted[i].1;
                    let mut d = Map::new();
                    d.insert(
                        merge_key.to_string(),
                        old.get(merge_key).cloned().unwrap_or(Value::Null),
                    );
                    d.insert(DIRECTIVE.to_string(), Value::String("delete".into()));
                    deletions.push(Value::Object(d));
                    i += 1;
                }
                // In the modified list only: added.
                Ordering::Greater => {
                    let (k, new) = &new_sorted[j];
                    changes.push((k.clone(), (*new).clone()));
                    j += 1;
                }
            }
        }
        // The changes in the order of the modified list, then the deletions.
        let position = |k: &str| new_sorted_position(modified, merge_key, k);
        changes.sort_by_key(|(k, _)| position(k));
        let mut list: Vec<Value> = changes.into_iter().map(|(_, v)| v).collect();
        list.extend(deletions);
        let order_same = original.len() == modified.len()
            && original
                .iter()
                .zip(modified)
                .all(|(a, b)| a.get(merge_key) == b.get(merge_key));
        let order = (!list.is_empty() || !order_same).then(|| {
            modified
                .iter()
                .map(|m| {
                    let mut o = Map::new();
                    o.insert(
                        merge_key.to_string(),
                        m.get(merge_key).cloned().unwrap_or(Value::Null),
                    );
                    Value::Object(o)
                })
                .collect()
        });
        Ok(ListPatch {
            changes: list,
            deletions: Vec::new(),
            order,
        })
    }
}

/// What a merged list contributes to the patch.
struct ListPatch {
    /// The list under its own name.
    changes: Vec<Value>,
    /// `$deleteFromPrimitiveList/<list>`.
    deletions: Vec<Value>,
    /// `$setElementOrder/<list>`.
    order: Option<Vec<Value>>,
}

fn new_sorted_position(modified: &[Value], merge_key: &str, key: &str) -> usize {
    modified
        .iter()
        .position(|m| m.get(merge_key).map(gofmt::v).as_deref() == Some(key))
        .unwrap_or(usize::MAX)
}

/// Two lists to diff, checked to hold elements of one type.
struct ListDiff<'a> {
    original: &'a [Value],
    modified: &'a [Value],
    path: &'a str,
    maps: bool,
}

impl<'a> ListDiff<'a> {
    fn new(original: &'a [Value], modified: &'a [Value], path: &'a str) -> Result<Self, DiffError> {
        let mut first: Option<&Value> = None;
        for v in original.iter().chain(modified) {
            if v.is_null() {
                continue;
            }
            if v.is_array() {
                return Err(DiffError::ListOfLists {
                    path: path.to_string(),
                });
            }
            match first {
                None => first = Some(v),
                Some(f) if !same_type(f, v) => {
                    return Err(DiffError::MixedElementTypes {
                        path: path.to_string(),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(ListDiff {
            original,
            modified,
            path,
            maps: first.is_some_and(Value::is_object),
        })
    }
}

/// Scalars merged as a set: additions in the modified order, deletions,
/// and the order directive when anything changed.
fn scalars(original: &[Value], modified: &[Value]) -> ListPatch {
    let text = |list: &[Value]| -> Vec<(String, Value)> {
        let mut v: Vec<(String, Value)> = list.iter().map(|x| (gofmt::v(x), x.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let (old, new) = (text(original), text(modified));
    let (mut additions, mut deletions) = (Vec::new(), Vec::<Value>::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let order = match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) => o.0.cmp(&n.0),
            (Some(_), None) => Ordering::Less,
            (None, _) => Ordering::Greater,
        };
        match order {
            Ordering::Equal => {
                i += 1;
                j += 1;
            }
            Ordering::Less => {
                if !deletions.contains(&old[i].1) {
                    deletions.push(old[i].1.clone());
                }
                i += 1;
            }
            Ordering::Greater => {
                additions.push(new[j].1.clone());
                j += 1;
            }
        }
    }
    additions.sort_by_key(|a| modified.iter().position(|m| m == a).unwrap_or(usize::MAX));
    let order = (!deletions.is_empty() || original != modified).then(|| modified.to_vec());
    ListPatch {
        changes: additions,
        deletions,
        order,
    }
}

/// Object keys sorted at every level, as Go's encoder writes maps.
pub fn sort_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}
