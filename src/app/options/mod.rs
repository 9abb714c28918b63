//! Command-line flags: [`KubeletFlags`] (settings that exist only as flags:
//! they are node-specific or cannot change over a node's life) and the
//! configuration fields that are also flags, all declared in one table
//! ([`table`]) and parsed with pflag's semantics ([`parse`]).

pub mod help;
pub mod labels;
pub mod parse;
pub mod table;
pub mod values;

use std::collections::BTreeMap;

use crate::features::{self, FeatureGate};

pub use parse::{Occurrence, ParseError, parse_args};
pub use table::{Flag, Target, flag_table};
pub use values::VersionRequest;

pub use crate::apis::config::flags::{
    DEFAULT_POD_SANDBOX_IMAGE, DEFAULT_ROOT_DIR, DEFAULT_RUNTIME_ENDPOINT, GlobalFlags,
    KubeletFlags, LegacyLogFlags,
};

/// `--help` and `--version`, which stop the command before it does anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandFlags {
    pub help: bool,
    pub version: VersionRequest,
}

/// Flag values that failed ValidateKubeletFlags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagValidationError(pub String);

/// The v1.25 line's ValidateKubeletFlags: node labels must be well formed,
/// reserved-namespace labels must be ones a kubelet may set, and
/// `--seccomp-default` needs its feature gate.
pub fn validate_kubelet_flags(
    f: &KubeletFlags,
    gate: &FeatureGate,
) -> Result<(), FlagValidationError> {
    let mut unknown: Vec<&str> = Vec::new();
    let mut invalid: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (k, v) in &f.node_labels {
        if labels::is_kubernetes_label(k) && !labels::is_kubelet_label(k) {
            unknown.push(k);
        }
        if let Err(e) = labels::is_qualified_name(k) {
            invalid.entry(k).or_default().push(e.to_string());
        }
        if let Err(e) = labels::is_valid_label_value(v) {
            invalid.entry(v).or_default().push(e.to_string());
        }
    }
    if !unknown.is_empty() {
        return Err(FlagValidationError(format!(
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{}]\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix ({}) or be in the specifically allowed set ({})",
            unknown.join(" "),
            labels::KUBELET_LABEL_NAMESPACES.join(", "),
            labels::KUBELET_LABELS.join(", ")
        )));
    }
    if !invalid.is_empty() {
        let parts: Vec<String> = invalid
            .iter()
            .map(|(k, errs)| format!("'{k}' - {}", errs.join(", ")))
            .collect();
        return Err(FlagValidationError(format!(
            "invalid node labels: {}",
            parts.join("; ")
        )));
    }
    if f.seccomp_default && !gate.enabled(features::SECCOMP_DEFAULT) {
        return Err(FlagValidationError(format!(
            "--seccomp-default needs the {} feature gate",
            features::SECCOMP_DEFAULT
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_validation_table() {
        let mut seccomp_off = FeatureGate::new();
        seccomp_off
            .set_from_map(
                &[("SeccompDefault".to_string(), false)]
                    .into_iter()
                    .collect(),
            )
            .unwrap();
        let defaults = FeatureGate::default();
        type Mutate = fn(&mut KubeletFlags);
        let cases: Vec<(&str, Mutate, &FeatureGate, Option<&str>)> = vec![
            ("defaults", |_| {}, &defaults, None),
            (
                "allowed labels",
                |f| {
                    f.node_labels
                        .insert("node.kubernetes.io/pool".into(), "a".into());
                    f.node_labels.insert("example.com/team".into(), "b".into());
                },
                &defaults,
                None,
            ),
            (
                "reserved label",
                |f| {
                    f.node_labels
                        .insert("node-role.kubernetes.io/master".into(), "".into());
                },
                &defaults,
                Some(
                    "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [node-role.kubernetes.io/master]",
                ),
            ),
            (
                "bad key",
                |f| {
                    f.node_labels.insert("bad key".into(), "v".into());
                },
                &defaults,
                Some("invalid node labels: 'bad key'"),
            ),
            (
                "bad value",
                |f| {
                    f.node_labels.insert("k".into(), "-v".into());
                },
                &defaults,
                Some("invalid node labels: '-v'"),
            ),
            (
                "seccomp default without its gate",
                |f| f.seccomp_default = true,
                &seccomp_off,
                Some("--seccomp-default needs the SeccompDefault feature gate"),
            ),
        ];
        for (name, mutate, gate, want) in cases {
            let mut f = KubeletFlags::default();
            mutate(&mut f);
            match (validate_kubelet_flags(&f, gate), want) {
                (Ok(()), None) => {}
                (Err(e), Some(prefix)) => assert!(e.0.starts_with(prefix), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
