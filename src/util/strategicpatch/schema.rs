//! The patch strategies of the served types (their Go struct tags
//! `patchStrategy` / `patchMergeKey`), by field path from the object root;
//! list elements are transparent in a path ("spec.containers.ports").
//! Lists not named here are atomic: a patch replaces them.
//!
//! Only the kinds the kubelet and the API server double in its tests patch
//! are described; any other kind is all-atomic.

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// Replace the whole list.
    Replace,
    /// Merge elements that are maps by this key.
    MergeByKey(&'static str),
    /// Merge scalar elements as a set.
    MergeScalars,
}

const CONTAINER_LISTS: &[(&str, &str)] = &[
    ("ports", "containerPort"),
    ("env", "name"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
];

fn pod(path: &str) -> Option<ListStrategy> {
    use ListStrategy::*;
    Some(match path {
        "spec.containers" | "spec.initContainers" | "spec.ephemeralContainers" => {
            MergeByKey("name")
        }
        "spec.volumes" | "spec.imagePullSecrets" => MergeByKey("name"),
        "spec.hostAliases" => MergeByKey("ip"),
        "spec.topologySpreadConstraints" => MergeByKey("topologyKey"),
        "status.conditions" => MergeByKey("type"),
        "status.podIPs" => MergeByKey("ip"),
        _ => {
            for list in [
                "spec.containers.",
                "spec.initContainers.",
                "spec.ephemeralContainers.",
            ] {
                if let Some(field) = path.strip_prefix(list) {
                    return CONTAINER_LISTS
                        .iter()
                        .find(|(f, _)| *f == field)
                        .map(|(_, k)| MergeByKey(k));
                }
            }
            return None;
        }
    })
}

/// The path of `field` under `path` ("" is the object root), as the
/// schema names fields: "status" + "conditions" → "status.conditions".
pub fn child_path(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// The patch strategies of one kind of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchSchema {
    kind: &'static str,
}

impl PatchSchema {
    /// core/v1 Node.
    pub const NODE: PatchSchema = PatchSchema { kind: "Node" };
    /// core/v1 Pod.
    pub const POD: PatchSchema = PatchSchema { kind: "Pod" };

    /// The schema of `kind` (an unknown kind has only atomic lists).
    pub fn of(kind: &'static str) -> Self {
        PatchSchema { kind }
    }

    /// The kind described.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// How the list at `path` ("status.conditions") merges.
    pub fn list(&self, path: &str) -> ListStrategy {
        list_strategy(self.kind, path)
    }

    /// Whether the maps at `path` (a map field, or the elements of a list)
    /// carry a `$retainKeys` directive (Go's `patchStrategy:"retainKeys"`).
    pub fn retains_keys(&self, path: &str) -> bool {
        self.kind == "Pod" && path == "spec.volumes"
    }
}

/// The strategy of the list at `path` in an object of `kind`.
fn list_strategy(kind: &str, path: &str) -> ListStrategy {
    use ListStrategy::*;
    let generic = match path {
        "metadata.ownerReferences" => Some(MergeByKey("uid")),
        "metadata.finalizers" => Some(MergeScalars),
        _ => None,
    };
    let specific = match kind {
        "Pod" => pod(path),
        "Node" => match path {
            "spec.podCIDRs" => Some(MergeScalars),
            "status.conditions" | "status.addresses" => Some(MergeByKey("type")),
            _ => None,
        },
        "Namespace" | "PersistentVolumeClaim" => {
            (path == "status.conditions").then_some(MergeByKey("type"))
        }
        "Service" => match path {
            "spec.ports" => Some(MergeByKey("port")),
            "status.conditions" => Some(MergeByKey("type")),
            _ => None,
        },
        "ServiceAccount" => (path == "secrets").then_some(MergeByKey("name")),
        "CSINode" => (path == "spec.drivers").then_some(MergeByKey("name")),
        // The struct apimachinery's own strategic patch tests use.
        #[cfg(test)]
        "MergeItem" => match path {
            "mergingList" => Some(MergeByKey("name")),
            "mergingIntList" => Some(MergeScalars),
            _ => None,
        },
        _ => None,
    };
    generic.or(specific).unwrap_or(Replace)
}
