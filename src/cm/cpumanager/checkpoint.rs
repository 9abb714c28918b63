//! The `cpu_manager_state` file in the Go kubelet's format, both ways:
//! `{"policyName":…,"defaultCpuSet":…,"entries":{podUID:{container:cpus}},"checksum":…}`.
//!
//! The checksum is FNV-32a over the text go-spew prints for the checkpoint
//! struct with its checksum zeroed (`%#v`, sorted keys), so files written
//! by either kubelet load in the other. The older v1 layout (entries keyed
//! by container id) is read and migrated.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::error::CpuManagerError;
use crate::util::gospew;

/// The checkpoint as stored (v2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuManagerCheckpoint {
    #[serde(rename = "policyName", default)]
    pub policy_name: String,
    #[serde(rename = "defaultCpuSet", default)]
    pub default_cpu_set: String,
    /// `None` only when a file says `"entries": null`.
    #[serde(
        rename = "entries",
        default = "empty_entries",
        skip_serializing_if = "entries_empty"
    )]
    pub entries: Option<BTreeMap<String, BTreeMap<String, String>>>,
    #[serde(default)]
    pub checksum: u64,
}

/// The v1 layout: entries keyed by container id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CpuManagerCheckpointV1 {
    #[serde(rename = "policyName", default)]
    pub policy_name: String,
    #[serde(rename = "defaultCpuSet", default)]
    pub default_cpu_set: String,
    #[serde(rename = "entries", default = "empty_v1_entries")]
    pub entries: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub checksum: u64,
}

fn empty_entries() -> Option<BTreeMap<String, BTreeMap<String, String>>> {
    Some(BTreeMap::new())
}

fn empty_v1_entries() -> Option<BTreeMap<String, String>> {
    Some(BTreeMap::new())
}

fn entries_empty(e: &Option<BTreeMap<String, BTreeMap<String, String>>>) -> bool {
    e.as_ref().is_none_or(BTreeMap::is_empty)
}

pub use crate::util::gospew::fnv32a;

fn spew_struct(policy: &str, default: &str, entries_type: &str, entries: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "(*state.CPUManagerCheckpoint){{PolicyName:(string){policy} DefaultCPUSet:(string){default} Entries:({entries_type}){entries} Checksum:(checksum.Checksum)0}}"
    );
    out
}

impl CpuManagerCheckpoint {
    /// A checkpoint with no entries.
    pub fn new(policy_name: &str, default_cpu_set: &str) -> Self {
        CpuManagerCheckpoint {
            policy_name: policy_name.into(),
            default_cpu_set: default_cpu_set.into(),
            entries: Some(BTreeMap::new()),
            checksum: 0,
        }
    }

    /// Go's checksum of this checkpoint (its own checksum field ignored).
    pub fn compute_checksum(&self) -> u64 {
        let mut entries = String::new();
        gospew::map(&mut entries, self.entries.as_ref(), |out, inner| {
            gospew::map(out, Some(inner), |out, v: &String| out.push_str(v))
        });
        let text = spew_struct(
            &self.policy_name,
            &self.default_cpu_set,
            "map[string]map[string]string",
            &entries,
        );
        u64::from(fnv32a(text.as_bytes()))
    }

    /// The file's bytes, with the checksum filled in.
    pub fn marshal(&mut self) -> Result<Vec<u8>, CpuManagerError> {
        self.checksum = self.compute_checksum();
        Ok(serde_json::to_vec(self)?)
    }

    /// Parses and verifies a v2 file (a zero checksum is accepted).
    pub fn unmarshal(blob: &[u8]) -> Result<Self, CpuManagerError> {
        let cp: CpuManagerCheckpoint = serde_json::from_slice(blob)?;
        if cp.checksum != 0 && cp.checksum != cp.compute_checksum() {
            return Err(CpuManagerError::CorruptCheckpoint);
        }
        Ok(cp)
    }
}

impl CpuManagerCheckpointV1 {
    /// Go's v1 checksum (its type name printed as the v2 one's).
    pub fn compute_checksum(&self) -> u64 {
        let mut entries = String::new();
        gospew::map(&mut entries, self.entries.as_ref(), |out, v: &String| {
            out.push_str(v)
        });
        let text = spew_struct(
            &self.policy_name,
            &self.default_cpu_set,
            "map[string]string",
            &entries,
        );
        u64::from(fnv32a(text.as_bytes()))
    }

    /// Parses and verifies a v1 file (a zero checksum is accepted).
    pub fn unmarshal(blob: &[u8]) -> Result<Self, CpuManagerError> {
        let cp: CpuManagerCheckpointV1 = serde_json::from_slice(blob)?;
        if cp.checksum != 0 && cp.checksum != cp.compute_checksum() {
            return Err(CpuManagerError::CorruptCheckpoint);
        }
        Ok(cp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(
        list: &[(&str, &[(&str, &str)])],
    ) -> Option<BTreeMap<String, BTreeMap<String, String>>> {
        Some(
            list.iter()
                .map(|(pod, cs)| {
                    (
                        pod.to_string(),
                        cs.iter()
                            .map(|(c, v)| (c.to_string(), v.to_string()))
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn go_vectors_round_trip() {
        let cases: [(&str, CpuManagerCheckpoint); 2] = [
            (
                r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438}"#,
                CpuManagerCheckpoint::new("static", "0-1"),
            ),
            (
                r#"{"policyName":"static","defaultCpuSet":"0","entries":{"d5728e25ce604581f166177c6cfb23d0":{"pinned":"1"}},"checksum":2714905772}"#,
                CpuManagerCheckpoint {
                    entries: entries(&[("d5728e25ce604581f166177c6cfb23d0", &[("pinned", "1")])]),
                    ..CpuManagerCheckpoint::new("static", "0")
                },
            ),
        ];
        for (file, mut cp) in cases {
            assert_eq!(String::from_utf8(cp.marshal().unwrap()).unwrap(), file);
            let back = CpuManagerCheckpoint::unmarshal(file.as_bytes()).unwrap();
            assert_eq!(back, cp);
        }
    }

    #[test]
    fn corrupt_and_legacy_files() {
        let bad = r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":1}"#;
        assert!(matches!(
            CpuManagerCheckpoint::unmarshal(bad.as_bytes()),
            Err(CpuManagerError::CorruptCheckpoint)
        ));
        let zero = r#"{"policyName":"none","defaultCpuSet":"","checksum":0}"#;
        assert_eq!(
            CpuManagerCheckpoint::unmarshal(zero.as_bytes())
                .unwrap()
                .policy_name,
            "none"
        );
        assert!(CpuManagerCheckpoint::unmarshal(b"{not json").is_err());
        // A v2 file is no v1 file: nested entries fail to parse, and
        // without entries the v1 checksum differs.
        let v2 = r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438}"#;
        assert!(matches!(
            CpuManagerCheckpointV1::unmarshal(v2.as_bytes()),
            Err(CpuManagerError::CorruptCheckpoint)
        ));
        let mut v1 = CpuManagerCheckpointV1 {
            policy_name: "static".into(),
            default_cpu_set: "0".into(),
            entries: Some([("abc".to_string(), "1".to_string())].into()),
            checksum: 0,
        };
        v1.checksum = v1.compute_checksum();
        let text = format!(
            r#"{{"policyName":"static","defaultCpuSet":"0","entries":{{"abc":"1"}},"checksum":{}}}"#,
            v1.checksum
        );
        assert_eq!(
            CpuManagerCheckpointV1::unmarshal(text.as_bytes()).unwrap(),
            v1
        );
    }
}
