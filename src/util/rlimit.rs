//! RLIMIT_NOFILE from `maxOpenFiles`: the kubelet sets both the soft and the
//! hard limit. Raising the hard limit needs CAP_SYS_RESOURCE; a failure is
//! logged and start-up goes on, as with the Go kubelet.

use nix::errno::Errno;
use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Errors from reading or setting the open-files limit.
#[derive(Debug, thiserror::Error)]
pub enum RlimitError {
    #[error("failed to set RLIMIT_NOFILE to {value}: {source}")]
    Set { value: u64, source: Errno },
    #[error("failed to read RLIMIT_NOFILE: {0}")]
    Get(Errno),
}

impl RlimitError {
    /// Whether the failure is a missing privilege.
    pub fn is_permission_denied(&self) -> bool {
        matches!(
            self,
            RlimitError::Set {
                source: Errno::EPERM,
                ..
            }
        )
    }
}

/// The current (soft, hard) open-files limits.
pub fn num_files() -> Result<(u64, u64), RlimitError> {
    getrlimit(Resource::RLIMIT_NOFILE).map_err(RlimitError::Get)
}

/// Sets the soft and hard open-files limits to `max_open_files`.
pub fn set_num_files(max_open_files: u64) -> Result<(), RlimitError> {
    setrlimit(Resource::RLIMIT_NOFILE, max_open_files, max_open_files).map_err(|source| {
        RlimitError::Set {
            value: max_open_files,
            source,
        }
    })
}

/// RunKubelet's step: applies `maxOpenFiles`, logging a failure and going on.
/// Returns whether the limit was set.
pub fn apply_max_open_files(max_open_files: i64) -> bool {
    let value = match u64::try_from(max_open_files) {
        Ok(v) => v,
        Err(_) => {
            tracing::error!(
                value = max_open_files,
                "Failed to set rlimit on max file handles: negative value"
            );
            return false;
        }
    };
    match set_num_files(value) {
        Ok(()) => true,
        Err(err) => {
            tracing::error!(error = %err, "Failed to set rlimit on max file handles");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Setting both limits to the current hard limit is always allowed; going
    /// above it works only with CAP_SYS_RESOURCE (EPERM otherwise). The test
    /// accepts both outcomes but checks each is what it claims.
    #[test]
    fn set_num_files_on_this_process() {
        let (_, hard) = num_files().unwrap();
        if hard == libc::RLIM_INFINITY {
            return;
        }
        set_num_files(hard).unwrap();
        assert_eq!(num_files().unwrap(), (hard, hard));

        match set_num_files(hard + 1) {
            Ok(()) => assert_eq!(num_files().unwrap(), (hard + 1, hard + 1)),
            Err(err) => {
                assert!(err.is_permission_denied(), "{err}");
                assert_eq!(num_files().unwrap(), (hard, hard), "limits unchanged");
                assert!(!apply_max_open_files((hard + 1) as i64));
            }
        }
    }

    #[test]
    fn negative_value_is_refused_without_touching_limits() {
        let before = num_files().unwrap();
        assert!(!apply_max_open_files(-1));
        assert_eq!(num_files().unwrap(), before);
    }
}
