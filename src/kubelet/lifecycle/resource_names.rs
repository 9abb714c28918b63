//! Resource name classes (Go's v1helper): native, prefixed native, extended,
//! hugepages, attachable volumes, and the scalar resources the fit check
//! counts beyond cpu, memory, ephemeral storage and pods.

use crate::kubelet::config::validation::is_qualified_name;

const NATIVE_PREFIX: &str = "kubernetes.io/";
const REQUESTS_PREFIX: &str = "requests.";
const HUGEPAGES_PREFIX: &str = "hugepages-";
const ATTACHABLE_VOLUMES_PREFIX: &str = "attachable-volumes-";

/// Names in the `kubernetes.io/` domain.
pub fn is_prefixed_native_resource(name: &str) -> bool {
    name.contains(NATIVE_PREFIX)
}

/// Unprefixed names (cpu, memory, …) and the `kubernetes.io/` domain.
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || is_prefixed_native_resource(name)
}

/// A resource advertised by a device plugin or the cluster: a qualified,
/// non-native name that quota can track as `requests.<name>`.
pub fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    is_qualified_name(&format!("{REQUESTS_PREFIX}{name}")).is_empty()
}

/// `hugepages-<size>`.
pub fn is_hugepage_resource_name(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
}

fn is_attachable_volume_resource_name(name: &str) -> bool {
    name.starts_with(ATTACHABLE_VOLUMES_PREFIX)
}

/// Resources counted by name in the fit check.
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || is_hugepage_resource_name(name)
        || is_prefixed_native_resource(name)
        || is_attachable_volume_resource_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        // name, native, extended, scalar
        let cases = [
            ("cpu", true, false, false),
            ("memory", true, false, false),
            ("hugepages-2Mi", true, false, true),
            ("example.com/gpu", false, true, true),
            ("kubernetes.io/batch", true, false, true),
            ("requests.example.com/x", false, false, false),
            ("attachable-volumes-aws-ebs", true, false, true),
            ("bad_domain/x", false, false, false),
        ];
        for (name, native, extended, scalar) in cases {
            assert_eq!(is_native_resource(name), native, "{name} native");
            assert_eq!(is_extended_resource_name(name), extended, "{name} extended");
            assert_eq!(is_scalar_resource_name(name), scalar, "{name} scalar");
        }
    }
}
