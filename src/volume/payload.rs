//! The files of configMap and secret volumes (and projections): every key
//! with defaultMode, or only the listed items at their paths and modes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Secret};

use crate::volume::error::VolumeError;
use crate::volume::util::atomic_writer::{FileProjection, Payload};

fn no_default_mode() -> VolumeError {
    VolumeError::other("no defaultMode used, not even the default value for it")
}

fn project(
    items: Option<&[KeyToPath]>,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
    all: Vec<(String, Vec<u8>)>,
    default_mode: Option<i32>,
    optional: bool,
    missing: &dyn Fn(&str) -> String,
) -> Result<Payload, VolumeError> {
    let default_mode = default_mode.ok_or_else(no_default_mode)? as u32;
    let mut payload = BTreeMap::new();
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in all {
                payload.insert(
                    k,
                    FileProjection {
                        data: v,
                        mode: default_mode,
                        fs_user: None,
                    },
                );
            }
        }
        Some(items) => {
            for ktp in items {
                let Some(data) = lookup(&ktp.key) else {
                    if optional {
                        continue;
                    }
                    return Err(VolumeError::other(missing(&ktp.key)));
                };
                payload.insert(
                    ktp.path.clone(),
                    FileProjection {
                        data,
                        mode: ktp.mode.map_or(default_mode, |m| m as u32),
                        fs_user: None,
                    },
                );
            }
        }
    }
    Ok(payload)
}

/// The files of a ConfigMap (`data` and `binaryData`).
pub fn config_map_payload(
    items: Option<&[KeyToPath]>,
    cm: &ConfigMap,
    default_mode: Option<i32>,
    optional: bool,
) -> Result<Payload, VolumeError> {
    let lookup = |k: &str| {
        cm.data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|v| v.as_bytes().to_vec())
            .or_else(|| {
                cm.binary_data
                    .as_ref()
                    .and_then(|d| d.get(k))
                    .map(|v| v.0.clone())
            })
    };
    let mut all: Vec<(String, Vec<u8>)> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    all.extend(
        cm.binary_data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone())),
    );
    project(items, &lookup, all, default_mode, optional, &|k| {
        format!("configmap references non-existent config key: {k}")
    })
}

/// The files of a Secret (`data`).
pub fn secret_payload(
    items: Option<&[KeyToPath]>,
    secret: &Secret,
    default_mode: Option<i32>,
    optional: bool,
) -> Result<Payload, VolumeError> {
    let lookup = |k: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|v| v.0.clone())
    };
    let all = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    project(items, &lookup, all, default_mode, optional, &|k| {
        format!("references non-existent secret key: {k}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm() -> ConfigMap {
        serde_json::from_value(json!({"data": {"a": "1", "b": "2"}, "binaryData": {"bin": "AAEC"}}))
            .expect("cm")
    }

    fn items(v: serde_json::Value) -> Vec<KeyToPath> {
        serde_json::from_value(v).expect("items")
    }

    #[test]
    fn config_map_table() {
        type Want = Result<Vec<(&'static str, &'static [u8], u32)>, &'static str>;
        type Case = (Option<Vec<KeyToPath>>, Option<i32>, bool, Want);
        let cases: Vec<Case> = vec![
            (
                None,
                Some(0o644),
                false,
                Ok(vec![
                    ("a", b"1", 0o644),
                    ("b", b"2", 0o644),
                    ("bin", &[0, 1, 2], 0o644),
                ]),
            ),
            (
                Some(items(
                    json!([{"key": "a", "path": "dir/x", "mode": 0o400}, {"key": "bin", "path": "y"}]),
                )),
                Some(0o644),
                false,
                Ok(vec![("dir/x", b"1", 0o400), ("y", &[0, 1, 2], 0o644)]),
            ),
            (
                Some(items(json!([{"key": "missing", "path": "m"}]))),
                Some(0o644),
                false,
                Err("configmap references non-existent config key: missing"),
            ),
            (
                Some(items(
                    json!([{"key": "missing", "path": "m"}, {"key": "a", "path": "a"}]),
                )),
                Some(0o644),
                true,
                Ok(vec![("a", b"1", 0o644)]),
            ),
            (
                None,
                None,
                false,
                Err("no defaultMode used, not even the default value for it"),
            ),
            (
                Some(vec![]),
                Some(0o600),
                false,
                Ok(vec![
                    ("a", b"1", 0o600),
                    ("b", b"2", 0o600),
                    ("bin", &[0, 1, 2], 0o600),
                ]),
            ),
        ];
        for (items, mode, optional, want) in cases {
            let got = config_map_payload(items.as_deref(), &cm(), mode, optional)
                .map(|p| {
                    p.into_iter()
                        .map(|(k, v)| (k, v.data, v.mode))
                        .collect::<Vec<_>>()
                })
                .map_err(|e| e.to_string());
            let want = want
                .map(|v| {
                    v.into_iter()
                        .map(|(k, d, m)| (k.to_string(), d.to_vec(), m))
                        .collect::<Vec<_>>()
                })
                .map_err(str::to_string);
            assert_eq!(got, want, "{items:?} {mode:?} {optional}");
        }
    }

    #[test]
    fn secret_missing_key() {
        let s: Secret = serde_json::from_value(json!({"data": {"k": "dg=="}})).expect("secret");
        let err = secret_payload(
            Some(&items(json!([{"key": "nope", "path": "p"}]))),
            &s,
            Some(0o644),
            false,
        )
        .expect_err("missing");
        assert_eq!(err.to_string(), "references non-existent secret key: nope");
        let p = secret_payload(None, &s, Some(0o644), false).expect("all");
        assert_eq!(p["k"].data, b"v");
    }
}
