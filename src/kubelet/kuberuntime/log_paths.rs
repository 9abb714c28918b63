//! Container log locations: `/var/log/pods/<ns>_<name>_<uid>/<container>/<restart>.log`,
//! and the legacy `/var/log/containers/<pod>_<ns>_<container>-<id>.log`
//! symlink the v1.25 kubelet still creates after starting a container.

use std::path::{Path, PathBuf};

/// Root of the per-pod log directories.
pub const POD_LOGS_ROOT_DIRECTORY: &str = "/var/log/pods";
/// Where the legacy symlinks live.
pub const LEGACY_CONTAINER_LOGS_DIR: &str = "/var/log/containers";
const LEGACY_LOG_SUFFIX: &str = "log";
const LOG_PATH_DELIMITER: &str = "_";
const EXT4_MAX_FILE_NAME_LEN: usize = 255;

/// Errors parsing a legacy symlink name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogPathError {
    #[error("{0:?} doesn't end with \".{LEGACY_LOG_SUFFIX}\"")]
    BadSuffix(String),
    #[error("container ID {0:?} is too short")]
    IdTooShort(String),
}

/// `/var/log/pods/<ns>_<name>_<uid>`.
pub fn build_pod_logs_directory(namespace: &str, name: &str, uid: &str) -> PathBuf {
    Path::new(POD_LOGS_ROOT_DIRECTORY).join([namespace, name, uid].join(LOG_PATH_DELIMITER))
}

/// `/var/log/pods/<ns>_<name>_<uid>/<container>`.
pub fn build_container_logs_directory(
    namespace: &str,
    name: &str,
    uid: &str,
    container: &str,
) -> PathBuf {
    build_pod_logs_directory(namespace, name, uid).join(container)
}

/// `<container>/<restart>.log`, relative to the pod log directory (the
/// ContainerConfig's log_path).
pub fn build_container_log_path(container: &str, restart_count: u32) -> String {
    format!("{container}/{restart_count}.log")
}

/// The legacy symlink for a container, its name capped to 255 bytes.
pub fn legacy_log_symlink(
    container_id: &str,
    container: &str,
    pod_name: &str,
    pod_namespace: &str,
) -> PathBuf {
    let suffix = format!(".{LEGACY_LOG_SUFFIX}");
    let mut name = format!("{pod_name}_{pod_namespace}_{container}-{container_id}");
    let max = EXT4_MAX_FILE_NAME_LEN - suffix.len();
    if name.len() > max {
        let mut cut = max;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    Path::new(LEGACY_CONTAINER_LOGS_DIR).join(name + &suffix)
}

/// The container ID at the end of a legacy symlink name.
pub fn container_id_from_legacy_log_symlink(name: &str) -> Result<String, LogPathError> {
    let last = name.rsplit('-').next().unwrap_or(name);
    let suffix = format!(".{LEGACY_LOG_SUFFIX}");
    let id = last
        .strip_suffix(&suffix)
        .ok_or_else(|| LogPathError::BadSuffix(name.to_string()))?;
    if id.len() < 6 {
        return Err(LogPathError::IdTooShort(id.to_string()));
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_table() {
        let uid = "520ef51a-fff4-4bee-862a-4acaa44e6c6f";
        assert_eq!(
            build_pod_logs_directory("refpack", "guaranteed", uid),
            PathBuf::from(format!("/var/log/pods/refpack_guaranteed_{uid}"))
        );
        assert_eq!(
            build_container_logs_directory("refpack", "guaranteed", uid, "main"),
            PathBuf::from(format!("/var/log/pods/refpack_guaranteed_{uid}/main"))
        );
        assert_eq!(build_container_log_path("main", 0), "main/0.log");
        assert_eq!(build_container_log_path("web", 12), "web/12.log");
    }

    #[test]
    fn legacy_symlink_table() {
        let id = "4edc47ec395b8312d874ab2165faae29cfe5238c09c360522db7897807072fcf";
        let link = legacy_log_symlink(id, "app", "besteffort", "refpack");
        assert_eq!(
            link,
            PathBuf::from(format!(
                "/var/log/containers/besteffort_refpack_app-{id}.log"
            ))
        );
        let name = link.file_name().and_then(|n| n.to_str()).expect("name");
        assert_eq!(
            container_id_from_legacy_log_symlink(name).as_deref(),
            Ok(id)
        );

        let long = "x".repeat(300);
        let capped = legacy_log_symlink(id, &long, "p", "ns");
        let fname = capped.file_name().and_then(|n| n.to_str()).expect("name");
        assert_eq!(fname.len(), 255);
        assert!(fname.ends_with(".log"));

        assert!(container_id_from_legacy_log_symlink("p_ns_c-abc.log").is_err());
        assert!(container_id_from_legacy_log_symlink("p_ns_c-abcdef.txt").is_err());
        assert_eq!(
            container_id_from_legacy_log_symlink("p_ns_c-abcdef.log").as_deref(),
            Ok("abcdef")
        );
    }
}
