//! The pod status patch (Go's statusutil.PatchPodStatus): a two-way
//! strategic merge patch (`util::strategicpatch`, Pod schema) from the
//! status the API server has to the status the kubelet wants, with the
//! pod's UID as a precondition (`{"metadata":{"uid":…},"status":{…}}`).
//! `conditions` (by `type`) and `podIPs` (by `ip`) are patched element by
//! element with a `$setElementOrder` directive, other lists are replaced
//! whole, removed fields are set to null; keys are sorted as Go writes maps.

use k8s_openapi::api::core::v1::PodStatus;
use serde_json::{Value, json};

use super::go_json::pod_status_to_go_value;
use crate::util::strategicpatch::{DiffError, PatchSchema, create_two_way_merge_patch};

/// A status patch, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPatch {
    /// The patch document.
    pub patch: Value,
    /// Nothing but the UID precondition: the API server already has this status.
    pub unchanged: bool,
}

impl StatusPatch {
    /// The patch as Go writes it (sorted keys, compact).
    pub fn to_json(&self) -> String {
        self.patch.to_string()
    }
}

/// The patch that turns `old` into `new` for the pod with `uid`: the diff
/// of `{"status": old}` and `{"metadata": {"uid": uid}, "status": new}`, so
/// the UID always rides along as a precondition.
pub fn prepare_pod_status_patch(
    uid: &str,
    old: &PodStatus,
    new: &PodStatus,
) -> Result<StatusPatch, DiffError> {
    let original = json!({ "status": pod_status_to_go_value(old) });
    let modified = json!({
        "metadata": { "uid": uid },
        "status": pod_status_to_go_value(new),
    });
    let patch = create_two_way_merge_patch(&original, &modified, PatchSchema::POD)?;
    let unchanged = patch.get("status").is_none();
    Ok(StatusPatch { patch, unchanged })
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
