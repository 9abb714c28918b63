//! Small helpers over JSON objects: metadata access, paths, timestamps,
//! generated names and uids.

use rand::Rng;
use serde_json::{Map, Value};

/// Now, as metav1.Time writes it (RFC 3339, whole seconds, UTC).
pub fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

pub fn rfc3339(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now plus `secs` seconds, RFC 3339.
pub fn rfc3339_in(secs: i64) -> String {
    let now = jiff::Timestamp::now().as_second();
    rfc3339(jiff::Timestamp::from_second(now + secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

/// A random version-4 UUID, as the server assigns to metadata.uid.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `n` characters from the alphabet the server uses for generateName
/// suffixes (no vowels, no confusable digits).
pub fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..n)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub fn get_path<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.as_object()?.get(*p)?;
    }
    Some(cur)
}

pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    get_path(v, path)?.as_str()
}

/// The object at `path`, created (and non-objects replaced) on the way.
pub fn obj_at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = v;
    for p in path {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(m) = cur else {
            unreachable!("made an object above")
        };
        cur = m
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    match cur {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

pub fn set_path(v: &mut Value, path: &[&str], val: Value) {
    if let Some((last, parent)) = path.split_last() {
        obj_at(v, parent).insert(last.to_string(), val);
    }
}

pub fn remove_path(v: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parent) = path.split_last()?;
    let mut cur = v;
    for p in parent {
        cur = cur.as_object_mut()?.get_mut(*p)?;
    }
    cur.as_object_mut()?.remove(*last)
}

pub fn metadata(v: &mut Value) -> &mut Map<String, Value> {
    obj_at(v, &["metadata"])
}

pub fn name(v: &Value) -> &str {
    str_at(v, &["metadata", "name"]).unwrap_or("")
}

pub fn namespace(v: &Value) -> &str {
    str_at(v, &["metadata", "namespace"]).unwrap_or("")
}

pub fn uid(v: &Value) -> &str {
    str_at(v, &["metadata", "uid"]).unwrap_or("")
}

pub fn resource_version(v: &Value) -> &str {
    str_at(v, &["metadata", "resourceVersion"]).unwrap_or("")
}

pub fn labels(v: &Value) -> Option<&Map<String, Value>> {
    get_path(v, &["metadata", "labels"])?.as_object()
}

pub fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    get_path(v, &["metadata", "annotations", key])?.as_str()
}

pub fn finalizers(v: &Value) -> Vec<String> {
    get_path(v, &["metadata", "finalizers"])
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(v: &Value) -> bool {
    get_path(v, &["metadata", "deletionTimestamp"]).is_some_and(|t| !t.is_null())
}

/// A field rendered as a field selector compares it: strings as they are,
/// booleans and numbers as text, absent as "".
pub fn field_string(v: &Value, dotted: &str) -> String {
    let path: Vec<&str> = dotted.split('.').collect();
    match get_path(v, &path) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}
