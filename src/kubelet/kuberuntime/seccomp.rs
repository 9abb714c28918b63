//! Seccomp and AppArmor settings for containers. v1.25 sends seccomp twice:
//! the structured `seccomp` profile (from the security context fields) and
//! the deprecated `seccomp_profile_path` string (which still honours the
//! deprecated seccomp annotations).

use std::path::Path;

use k8s_openapi::api::core::v1::{PodSecurityContext, SeccompProfile, SecurityContext};

use crate::cri::api::SecurityProfile;
use crate::cri::api::security_profile::ProfileType;

pub const SECCOMP_PROFILE_RUNTIME_DEFAULT: &str = "runtime/default";
pub const SECCOMP_PROFILE_NAME_UNCONFINED: &str = "unconfined";
pub const SECCOMP_LOCALHOST_PROFILE_NAME_PREFIX: &str = "localhost/";
pub const SECCOMP_POD_ANNOTATION_KEY: &str = "seccomp.security.alpha.kubernetes.io/pod";
pub const SECCOMP_CONTAINER_ANNOTATION_KEY_PREFIX: &str =
    "container.seccomp.security.alpha.kubernetes.io/";
pub const APPARMOR_CONTAINER_ANNOTATION_KEY_PREFIX: &str =
    "container.apparmor.security.beta.kubernetes.io/";

fn localhost_profile(scmp: &SeccompProfile) -> Option<&str> {
    scmp.localhost_profile.as_deref().filter(|p| !p.is_empty())
}

fn join(root: &Path, name: &str) -> String {
    root.join(name).display().to_string()
}

fn field_profile(scmp: &SeccompProfile, root: &Path, fallback: bool) -> String {
    match scmp.type_.as_str() {
        "RuntimeDefault" => SECCOMP_PROFILE_RUNTIME_DEFAULT.to_string(),
        "Localhost" if localhost_profile(scmp).is_some() => format!(
            "{SECCOMP_LOCALHOST_PROFILE_NAME_PREFIX}{}",
            join(root, localhost_profile(scmp).unwrap_or_default())
        ),
        "Unconfined" => SECCOMP_PROFILE_NAME_UNCONFINED.to_string(),
        _ if fallback => SECCOMP_PROFILE_RUNTIME_DEFAULT.to_string(),
        _ => String::new(),
    }
}

fn annotation_profile(profile: &str, root: &Path) -> String {
    match profile.strip_prefix(SECCOMP_LOCALHOST_PROFILE_NAME_PREFIX) {
        Some(name) => format!(
            "{SECCOMP_LOCALHOST_PROFILE_NAME_PREFIX}{}",
            join(root, name)
        ),
        None => profile.to_string(),
    }
}

/// The deprecated `seccomp_profile_path`: container field, container
/// annotation, pod field, pod annotation, then the default.
pub fn seccomp_profile_path(
    annotations: &std::collections::BTreeMap<String, String>,
    container_name: &str,
    pod_sc: Option<&PodSecurityContext>,
    container_sc: Option<&SecurityContext>,
    root: &Path,
    fallback_to_runtime_default: bool,
) -> String {
    if let Some(p) = container_sc.and_then(|s| s.seccomp_profile.as_ref()) {
        return field_profile(p, root, fallback_to_runtime_default);
    }
    if !container_name.is_empty() {
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION_KEY_PREFIX}{container_name}");
        if let Some(p) = annotations.get(&key) {
            return annotation_profile(p, root);
        }
    }
    if let Some(p) = pod_sc.and_then(|s| s.seccomp_profile.as_ref()) {
        return field_profile(p, root, fallback_to_runtime_default);
    }
    if let Some(p) = annotations.get(SECCOMP_POD_ANNOTATION_KEY) {
        return annotation_profile(p, root);
    }
    if fallback_to_runtime_default {
        SECCOMP_PROFILE_RUNTIME_DEFAULT.to_string()
    } else {
        String::new()
    }
}

fn profile(t: ProfileType, localhost_ref: String) -> SecurityProfile {
    SecurityProfile {
        profile_type: t as i32,
        localhost_ref,
    }
}

fn field_seccomp_profile(scmp: &SeccompProfile, root: &Path) -> SecurityProfile {
    match scmp.type_.as_str() {
        "RuntimeDefault" => profile(ProfileType::RuntimeDefault, String::new()),
        "Localhost" if localhost_profile(scmp).is_some() => profile(
            ProfileType::Localhost,
            join(root, localhost_profile(scmp).unwrap_or_default()),
        ),
        _ => profile(ProfileType::Unconfined, String::new()),
    }
}

/// The structured seccomp profile: container field, pod field, then
/// RuntimeDefault (with seccompDefault) or Unconfined.
pub fn seccomp_profile(
    pod_sc: Option<&PodSecurityContext>,
    container_sc: Option<&SecurityContext>,
    root: &Path,
    fallback_to_runtime_default: bool,
) -> SecurityProfile {
    if let Some(p) = container_sc.and_then(|s| s.seccomp_profile.as_ref()) {
        return field_seccomp_profile(p, root);
    }
    if let Some(p) = pod_sc.and_then(|s| s.seccomp_profile.as_ref()) {
        return field_seccomp_profile(p, root);
    }
    if fallback_to_runtime_default {
        profile(ProfileType::RuntimeDefault, String::new())
    } else {
        profile(ProfileType::Unconfined, String::new())
    }
}

/// The AppArmor profile the container's annotation names ("" for none).
pub fn apparmor_profile_from_annotations(
    annotations: &std::collections::BTreeMap<String, String>,
    container_name: &str,
) -> String {
    annotations
        .get(&format!(
            "{APPARMOR_CONTAINER_ANNOTATION_KEY_PREFIX}{container_name}"
        ))
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn sp(t: &str, local: Option<&str>) -> SeccompProfile {
        SeccompProfile {
            type_: t.to_string(),
            localhost_profile: local.map(str::to_string),
        }
    }

    fn csc(p: SeccompProfile) -> SecurityContext {
        SecurityContext {
            seccomp_profile: Some(p),
            ..Default::default()
        }
    }

    fn psc(p: SeccompProfile) -> PodSecurityContext {
        PodSecurityContext {
            seccomp_profile: Some(p),
            ..Default::default()
        }
    }

    #[test]
    fn profile_path_table() {
        let root = Path::new("/var/lib/kubelet/seccomp");
        let ann = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cases: Vec<(
            &str,
            BTreeMap<String, String>,
            Option<PodSecurityContext>,
            Option<SecurityContext>,
            bool,
            &str,
        )> = vec![
            ("nothing", ann(&[]), None, None, false, ""),
            (
                "nothing, seccompDefault",
                ann(&[]),
                None,
                None,
                true,
                "runtime/default",
            ),
            (
                "pod annotation",
                ann(&[(
                    "seccomp.security.alpha.kubernetes.io/pod",
                    "runtime/default",
                )]),
                None,
                None,
                false,
                "runtime/default",
            ),
            (
                "container annotation wins over pod annotation",
                ann(&[
                    ("seccomp.security.alpha.kubernetes.io/pod", "unconfined"),
                    (
                        "container.seccomp.security.alpha.kubernetes.io/c",
                        "localhost/prof.json",
                    ),
                ]),
                None,
                None,
                false,
                "localhost//var/lib/kubelet/seccomp/prof.json",
            ),
            (
                "pod field",
                ann(&[]),
                Some(psc(sp("RuntimeDefault", None))),
                None,
                false,
                "runtime/default",
            ),
            (
                "container annotation beats pod field",
                ann(&[(
                    "container.seccomp.security.alpha.kubernetes.io/c",
                    "unconfined",
                )]),
                Some(psc(sp("RuntimeDefault", None))),
                None,
                false,
                "unconfined",
            ),
            (
                "container field beats everything",
                ann(&[(
                    "container.seccomp.security.alpha.kubernetes.io/c",
                    "unconfined",
                )]),
                Some(psc(sp("RuntimeDefault", None))),
                Some(csc(sp("Localhost", Some("a/b.json")))),
                false,
                "localhost//var/lib/kubelet/seccomp/a/b.json",
            ),
            (
                "unconfined field",
                ann(&[]),
                None,
                Some(csc(sp("Unconfined", None))),
                true,
                "unconfined",
            ),
            (
                "localhost without a profile",
                ann(&[]),
                None,
                Some(csc(sp("Localhost", None))),
                false,
                "",
            ),
            (
                "localhost without a profile, seccompDefault",
                ann(&[]),
                None,
                Some(csc(sp("Localhost", Some("")))),
                true,
                "runtime/default",
            ),
        ];
        for (name, a, p, c, fallback, want) in cases {
            let got = seccomp_profile_path(&a, "c", p.as_ref(), c.as_ref(), root, fallback);
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn structured_profile_table() {
        let root = Path::new("/r");
        let cases: Vec<(
            &str,
            Option<PodSecurityContext>,
            Option<SecurityContext>,
            bool,
            (ProfileType, &str),
        )> = vec![
            (
                "default unconfined",
                None,
                None,
                false,
                (ProfileType::Unconfined, ""),
            ),
            (
                "seccompDefault",
                None,
                None,
                true,
                (ProfileType::RuntimeDefault, ""),
            ),
            (
                "pod runtime default",
                Some(psc(sp("RuntimeDefault", None))),
                None,
                false,
                (ProfileType::RuntimeDefault, ""),
            ),
            (
                "container overrides pod",
                Some(psc(sp("RuntimeDefault", None))),
                Some(csc(sp("Unconfined", None))),
                true,
                (ProfileType::Unconfined, ""),
            ),
            (
                "localhost",
                None,
                Some(csc(sp("Localhost", Some("p.json")))),
                false,
                (ProfileType::Localhost, "/r/p.json"),
            ),
            (
                "localhost without profile",
                None,
                Some(csc(sp("Localhost", None))),
                true,
                (ProfileType::Unconfined, ""),
            ),
        ];
        for (name, p, c, fallback, (t, local)) in cases {
            let got = seccomp_profile(p.as_ref(), c.as_ref(), root, fallback);
            assert_eq!(got, profile(t, local.to_string()), "case {name}");
        }
    }

    #[test]
    fn apparmor_annotation() {
        let a: BTreeMap<String, String> = [(
            "container.apparmor.security.beta.kubernetes.io/c".to_string(),
            "runtime/default".to_string(),
        )]
        .into();
        assert_eq!(
            apparmor_profile_from_annotations(&a, "c"),
            "runtime/default"
        );
        assert_eq!(apparmor_profile_from_annotations(&a, "d"), "");
    }
}
