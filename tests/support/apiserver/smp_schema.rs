//! The patch strategies of the served types (their Go struct tags
//! `patchStrategy` / `patchMergeKey`), by field path from the object root;
//! list elements are transparent in a path ("spec.containers.ports").
//! Lists not named here are atomic: a patch replaces them.

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

/// The strategy of the list at `path` in an object of `kind`.
pub fn list_strategy(kind: &str, path: &str) -> ListStrategy {
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
        _ => None,
    };
    generic.or(specific).unwrap_or(Replace)
}
