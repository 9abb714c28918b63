//! Downward API field paths (`metadata.name`, `metadata.labels['k']`, ...):
//! which paths a pod field selector may use, and their values.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::util::validation::is_qualified_name;

/// A field path that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    #[error("unsupported pod version: {0}")]
    UnsupportedVersion(String),
    #[error("field label does not support subscript: {0}")]
    SubscriptNotSupported(String),
    #[error("field label not supported: {0}")]
    LabelNotSupported(String),
    #[error("invalid key subscript in {path}: {reason}")]
    InvalidSubscript { path: String, reason: String },
    #[error("unsupported fieldPath: {0}")]
    Unsupported(String),
}

/// Splits `path['key']` into (`path`, `key`); `None` when not subscripted.
pub fn split_maybe_subscripted_path(field_path: &str) -> Option<(&str, &str)> {
    let inner = field_path.strip_suffix("']")?;
    let (path, key) = inner.split_once("['")?;
    if path.is_empty() {
        return None;
    }
    Some((path, key))
}

/// Checks a field selector's path against what the v1 pod downward API
/// allows and returns the internal path (`spec.host` becomes
/// `spec.nodeName`). An empty API version is read as `v1`, the API default.
pub fn convert_downward_api_field_label(
    version: &str,
    label: &str,
) -> Result<String, FieldPathError> {
    if !version.is_empty() && version != "v1" {
        return Err(FieldPathError::UnsupportedVersion(version.to_string()));
    }
    if let Some((path, _)) = split_maybe_subscripted_path(label) {
        return match path {
            "metadata.annotations" | "metadata.labels" => Ok(label.to_string()),
            _ => Err(FieldPathError::SubscriptNotSupported(label.to_string())),
        };
    }
    match label {
        "metadata.annotations"
        | "metadata.labels"
        | "metadata.name"
        | "metadata.namespace"
        | "metadata.uid"
        | "spec.nodeName"
        | "spec.restartPolicy"
        | "spec.serviceAccountName"
        | "spec.schedulerName"
        | "status.phase"
        | "status.hostIP"
        | "status.podIP"
        | "status.podIPs" => Ok(label.to_string()),
        "spec.host" => Ok("spec.nodeName".to_string()),
        _ => Err(FieldPathError::LabelNotSupported(label.to_string())),
    }
}

/// The metadata value a field path names (labels and annotations as a whole
/// or by key; name, namespace, uid). Other paths are not metadata and fail.
pub fn extract_field_path_as_string(pod: &Pod, field_path: &str) -> Result<String, FieldPathError> {
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let annotations = pod.metadata.annotations.as_ref().unwrap_or(&empty);
    if let Some((path, key)) = split_maybe_subscripted_path(field_path) {
        let invalid = |errs: Vec<String>| FieldPathError::InvalidSubscript {
            path: field_path.to_string(),
            reason: errs.join(";"),
        };
        return match path {
            "metadata.annotations" => {
                let errs = is_qualified_name(&key.to_lowercase());
                if !errs.is_empty() {
                    return Err(invalid(errs));
                }
                Ok(annotations.get(key).cloned().unwrap_or_default())
            }
            "metadata.labels" => {
                let errs = is_qualified_name(key);
                if !errs.is_empty() {
                    return Err(invalid(errs));
                }
                Ok(labels.get(key).cloned().unwrap_or_default())
            }
            _ => Err(FieldPathError::SubscriptNotSupported(
                field_path.to_string(),
            )),
        };
    }
    let meta = &pod.metadata;
    match field_path {
        "metadata.annotations" => Ok(format_map(annotations)),
        "metadata.labels" => Ok(format_map(labels)),
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        _ => Err(FieldPathError::Unsupported(field_path.to_string())),
    }
}

/// `key="value"` lines in key order, values quoted as Go's `%q` does.
pub fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Characters Go's `unicode.IsPrint` rejects beyond the control characters:
/// spaces other than U+0020 and the common format characters.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}'
        | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}' | '\u{e000}'..='\u{f8ff}'
        | '\u{f0000}'..='\u{10ffff}')
}

/// Go's `strconv.Quote`.
pub fn go_quote(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_go_printable(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let b = c as u32;
                out.push_str("\\x");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            c if (c as u32) < 0x10000 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"note": "a \"quoted\"\nline", "example.com/Key": "v"}}
        }))
        .expect("pod")
    }

    #[test]
    fn split_table() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("metadata.labels['app']", Some(("metadata.labels", "app"))),
            ("metadata.labels", None),
            ("['x']", None),
            ("metadata.labels['a']b']", Some(("metadata.labels", "a']b"))),
        ];
        for (input, want) in cases {
            assert_eq!(split_maybe_subscripted_path(input), *want, "{input}");
        }
    }

    #[test]
    fn convert_table() {
        let cases: &[(&str, &str, Result<&str, ()>)] = &[
            ("v1", "metadata.name", Ok("metadata.name")),
            ("", "metadata.name", Ok("metadata.name")),
            ("v2", "metadata.name", Err(())),
            ("v1", "spec.host", Ok("spec.nodeName")),
            ("v1", "metadata.labels['x']", Ok("metadata.labels['x']")),
            ("v1", "metadata.name['x']", Err(())),
            ("v1", "spec.containers", Err(())),
            ("v1", "status.podIPs", Ok("status.podIPs")),
        ];
        for (v, label, want) in cases {
            let got = convert_downward_api_field_label(v, label).map_err(|_| ());
            assert_eq!(got, want.map(str::to_string), "{v} {label}");
        }
    }

    #[test]
    fn extract_table() {
        let p = pod();
        let cases: &[(&str, Result<&str, ()>)] = &[
            ("metadata.name", Ok("p")),
            ("metadata.namespace", Ok("ns")),
            ("metadata.uid", Ok("u1")),
            ("metadata.labels['app']", Ok("web")),
            ("metadata.labels['missing']", Ok("")),
            ("metadata.annotations['example.com/Key']", Ok("v")),
            ("metadata.labels", Ok("app=\"web\"\ntier=\"front\"")),
            (
                "metadata.annotations",
                Ok("example.com/Key=\"v\"\nnote=\"a \\\"quoted\\\"\\nline\""),
            ),
            ("metadata.labels['bad key']", Err(())),
            ("spec.restartPolicy", Err(())),
        ];
        for (path, want) in cases {
            let got = extract_field_path_as_string(&p, path).map_err(|_| ());
            assert_eq!(got, want.map(str::to_string), "{path}");
        }
    }

    #[test]
    fn go_quote_table() {
        let cases: &[(&str, &str)] = &[
            ("plain", "\"plain\""),
            ("tab\there", "\"tab\\there\""),
            ("bell\u{7}", "\"bell\\a\""),
            ("nul\u{0}", "\"nul\\x00\""),
            ("del\u{7f}", "\"del\\x7f\""),
            ("é中", "\"é中\""),
            ("nbsp\u{a0}", "\"nbsp\\u00a0\""),
            ("zwsp\u{200b}", "\"zwsp\\u200b\""),
            ("back\\slash", "\"back\\\\slash\""),
        ];
        for (input, want) in cases {
            assert_eq!(go_quote(input), *want, "{input:?}");
        }
    }
}
