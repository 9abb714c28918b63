//! Fields of the pod API newer than v1.25. The Go kubelet of the v1.25 line
//! decodes manifests into its own types, so it never sees such fields; the
//! k8s-openapi types used here know them, so they are dropped from the
//! manifest before decoding to keep the same meaning (e.g. an init container's
//! `restartPolicy` does not make it a sidecar, a lifecycle handler that is only
//! `sleep` has no handler).

use serde_json::Value;

/// Paths (`*` = every array element) of fields added after v1.25.
const NEWER_FIELDS: &[&[&str]] = &[
    &["spec", "resourceClaims"],
    &["spec", "resources"],
    &["spec", "schedulingGates"],
    &["spec", "securityContext", "appArmorProfile"],
    &["spec", "securityContext", "seLinuxChangePolicy"],
    &["spec", "securityContext", "supplementalGroupsPolicy"],
    &["spec", "volumes", "*", "image"],
    &[
        "spec",
        "volumes",
        "*",
        "projected",
        "sources",
        "*",
        "clusterTrustBundle",
    ],
    &[
        "spec",
        "volumes",
        "*",
        "ephemeral",
        "volumeClaimTemplate",
        "spec",
        "volumeAttributesClassName",
    ],
    &["status", "hostIPs"],
    &["status", "observedGeneration"],
    &["status", "resize"],
    &["status", "resourceClaimStatuses"],
    &["status", "conditions", "*", "observedGeneration"],
];

const NEWER_CONTAINER_FIELDS: &[&[&str]] = &[
    &["resizePolicy"],
    &["restartPolicy"],
    &["resources", "claims"],
    &["lifecycle", "stopSignal"],
    &["lifecycle", "postStart", "sleep"],
    &["lifecycle", "preStop", "sleep"],
    &["securityContext", "appArmorProfile"],
    &["volumeMounts", "*", "recursiveReadOnly"],
];

const NEWER_CONTAINER_STATUS_FIELDS: &[&str] = &[
    "allocatedResources",
    "allocatedResourcesStatus",
    "resources",
    "stopSignal",
    "user",
    "volumeMounts",
];

const NEWER_AFFINITY_TERM_FIELDS: &[&str] = &["matchLabelKeys", "mismatchLabelKeys"];

/// Removes every field the v1.25 pod API does not have.
pub fn drop_newer_fields(pod: &mut Value) {
    for path in NEWER_FIELDS {
        remove(pod, path);
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for_each(pod, &["spec", list, "*"], &mut |c| {
            for path in NEWER_CONTAINER_FIELDS {
                remove(c, path);
            }
        });
    }
    for list in [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ] {
        for_each(pod, &["status", list, "*"], &mut |s| {
            for field in NEWER_CONTAINER_STATUS_FIELDS {
                remove(s, &[field]);
            }
        });
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let required = [
            "spec",
            "affinity",
            kind,
            "requiredDuringSchedulingIgnoredDuringExecution",
            "*",
        ];
        let preferred = [
            "spec",
            "affinity",
            kind,
            "preferredDuringSchedulingIgnoredDuringExecution",
            "*",
            "podAffinityTerm",
        ];
        for path in [&required[..], &preferred[..]] {
            for_each(pod, path, &mut |term| {
                for field in NEWER_AFFINITY_TERM_FIELDS {
                    remove(term, &[field]);
                }
            });
        }
    }
}

fn for_each(value: &mut Value, path: &[&str], f: &mut dyn FnMut(&mut Value)) {
    match path.split_first() {
        None => f(value),
        Some((&"*", rest)) => {
            if let Value::Array(items) = value {
                for item in items {
                    for_each(item, rest, f);
                }
            }
        }
        Some((key, rest)) => {
            if let Some(child) = value.get_mut(*key) {
                for_each(child, rest, f);
            }
        }
    }
}

fn remove(value: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    for_each(value, parents, &mut |parent| {
        if let Value::Object(map) = parent {
            map.remove(*last);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn newer_fields_are_dropped_and_the_rest_kept() {
        let mut pod = json!({
            "spec": {
                "schedulingGates": [{"name": "g"}],
                "hostUsers": false,
                "initContainers": [{"name": "i", "restartPolicy": "Always"}],
                "containers": [{
                    "name": "c",
                    "resizePolicy": [],
                    "lifecycle": {"preStop": {"sleep": {"seconds": 1}, "exec": {"command": ["x"]}}},
                    "volumeMounts": [{"name": "v", "mountPath": "/v", "recursiveReadOnly": "Enabled"}]
                }],
                "volumes": [{"name": "v", "image": {"reference": "x"}}],
                "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "k", "matchLabelKeys": ["a"]}
                ]}}
            },
            "status": {"hostIPs": [], "phase": "Pending"}
        });
        drop_newer_fields(&mut pod);
        assert_eq!(
            pod,
            json!({
                "spec": {
                    "hostUsers": false,
                    "initContainers": [{"name": "i"}],
                    "containers": [{
                        "name": "c",
                        "lifecycle": {"preStop": {"exec": {"command": ["x"]}}},
                        "volumeMounts": [{"name": "v", "mountPath": "/v"}]
                    }],
                    "volumes": [{"name": "v"}],
                    "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "k"}
                    ]}}
                },
                "status": {"phase": "Pending"}
            })
        );
    }
}
