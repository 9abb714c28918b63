//! Mount points for volumes mounted inside another volume
//! (MakeNestedMountpoints): when a container mounts volume A at /a and
//! volume B at /a/b, the directory `b` is created inside A's directory so
//! the runtime has somewhere to mount B, even in read-only volumes.

use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::util::path::clean;
use crate::volume::error::VolumeError;

/// The directories (relative to the volume) to create for mounts nested
/// directly beneath the places `name` is mounted.
pub fn nested_mountpoints(name: &str, pod: &Pod) -> Result<Vec<String>, VolumeError> {
    let mut out = Vec::new();
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(out);
    };
    let mut check =
        |mounts: &[k8s_openapi::api::core::v1::VolumeMount]| -> Result<(), VolumeError> {
            let mut all: Vec<String> = mounts.iter().map(|m| clean(&m.mount_path)).collect();
            let mine: Vec<String> = mounts
                .iter()
                .filter(|m| m.name == name)
                .map(|m| clean(&m.mount_path))
                .collect();
            all.sort();
            for my in mine {
                if my.starts_with("../") {
                    return Err(VolumeError::other(format!(
                        "invalid container mount point {my}"
                    )));
                }
                let my_slash = format!("{my}/");
                let mut prev_nested = String::new();
                for mp in &all {
                    if !mp.starts_with(&my_slash) {
                        continue;
                    }
                    if !prev_nested.is_empty() && mp.starts_with(&prev_nested) {
                        continue;
                    }
                    prev_nested = format!("{mp}/");
                    out.push(mp[my_slash.len()..].to_string());
                }
            }
            Ok(())
        };
    let containers: Vec<&Container> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .collect();
    for c in containers {
        check(c.volume_mounts.as_deref().unwrap_or_default())?;
    }
    for ec in spec.ephemeral_containers.iter().flatten() {
        check(ec.volume_mounts.as_deref().unwrap_or_default())?;
    }
    Ok(out)
}

/// Creates the nested mount points of `name` under `base_dir` (0755).
pub fn make_nested_mountpoints(name: &str, base_dir: &Path, pod: &Pod) -> Result<(), VolumeError> {
    use std::os::unix::fs::DirBuilderExt;
    for dir in nested_mountpoints(name, pod)? {
        let path = base_dir.join(&dir);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&path)
            .map_err(|e| {
                VolumeError::other(format!(
                    "unable to create nested volume mountpoints: {}",
                    VolumeError::io("mkdir", &path, &e)
                ))
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(mounts: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"spec": {"containers": [
            {"name": "c", "volumeMounts": mounts}
        ]}}))
        .expect("pod")
    }

    #[test]
    fn nested_table() {
        type Case = (
            serde_json::Value,
            &'static str,
            Result<Vec<&'static str>, ()>,
        );
        let cases: Vec<Case> = vec![
            (
                json!([{"name": "a", "mountPath": "/dir"}, {"name": "b", "mountPath": "/dir/nested"}]),
                "a",
                Ok(vec!["nested"]),
            ),
            (
                json!([{"name": "a", "mountPath": "/dir"}, {"name": "b", "mountPath": "/dir/nested"},
                       {"name": "c", "mountPath": "/dir/nested/other"}]),
                "a",
                Ok(vec!["nested"]),
            ),
            (
                json!([{"name": "a", "mountPath": "/dir/"}, {"name": "b", "mountPath": "/dir2/x"}]),
                "a",
                Ok(vec![]),
            ),
            (
                json!([{"name": "a", "mountPath": "/dir"}, {"name": "b", "mountPath": "/dir/x/y"},
                       {"name": "c", "mountPath": "/dir/z"}]),
                "a",
                Ok(vec!["x/y", "z"]),
            ),
            (
                json!([{"name": "a", "mountPath": "../escape"}]),
                "a",
                Err(()),
            ),
        ];
        for (mounts, name, want) in cases {
            let got = nested_mountpoints(name, &pod(mounts.clone())).map_err(|_| ());
            let want = want.map(|v| v.into_iter().map(str::to_string).collect::<Vec<_>>());
            assert_eq!(got, want, "{mounts}");
        }
    }

    #[test]
    fn creates_dirs() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p =
            pod(json!([{"name": "a", "mountPath": "/d"}, {"name": "b", "mountPath": "/d/x/y"}]));
        make_nested_mountpoints("a", tmp.path(), &p).expect("make");
        assert!(tmp.path().join("x/y").is_dir());
    }
}
