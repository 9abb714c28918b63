//! Errors of volume plugins and their helpers. The text is what reaches
//! FailedMount events (`MountVolume.SetUp failed for volume "x" : <text>`),
//! so it follows the Go kubelet's wording; file-system failures read like
//! Go's `*os.PathError` (`mkdir /x: permission denied`).

use std::io;
use std::path::Path;

use crate::util::object_getters::GetError;

/// A volume operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    /// No registered plugin supports the volume's source.
    #[error("no volume plugin matched")]
    NoPluginMatched,
    /// More than one plugin claims the volume's source.
    #[error("multiple volume plugins matched: {}", .0.join(","))]
    MultiplePluginsMatched(Vec<String>),
    /// No plugin of that name is registered.
    #[error("no volume plugin matched name: {0}")]
    NoPluginNamed(String),
    /// The spec is not of the kind the plugin handles.
    #[error("spec does not reference {0} volume type")]
    WrongSpec(&'static str),
    /// A file-system call failed (`<op> <path>: <reason>`).
    #[error("{op} {path}: {reason}")]
    Io {
        op: &'static str,
        path: String,
        reason: String,
    },
    /// Reading a ConfigMap or Secret failed.
    #[error(transparent)]
    Get(#[from] GetError),
    /// Several failures, reported together as Go's aggregate error does.
    #[error("{}", aggregate_message(.0))]
    Aggregate(Vec<String>),
    /// The node's allocatable resources could not be read (the host's
    /// words why).
    #[error("error retrieving node: {0}")]
    NodeAllocatable(String),
    /// Any other failure, worded as the Go kubelet words it.
    #[error("{0}")]
    Other(String),
}

impl VolumeError {
    /// A file-system failure of `op` on `path`.
    pub fn io(op: &'static str, path: &Path, err: &io::Error) -> Self {
        VolumeError::Io {
            op,
            path: path.display().to_string(),
            reason: io_reason(err),
        }
    }

    pub fn other(msg: impl Into<String>) -> Self {
        VolumeError::Other(msg.into())
    }

    /// Whether the error says the object a volume reads does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, VolumeError::Get(e) if e.is_not_found())
    }

    /// `Ok` for no errors, the single error itself, or an aggregate.
    pub fn aggregate(mut errs: Vec<VolumeError>) -> Result<(), VolumeError> {
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(VolumeError::Aggregate(
                errs.iter().map(ToString::to_string).collect(),
            )),
        }
    }
}

/// The reason part of an I/O error as Go prints it: the C library's
/// message in lower case (`no such file or directory`).
pub fn io_reason(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_lowercase(),
        None => err.to_string(),
    }
}

/// Go's `utilerrors.NewAggregate(...).Error()`: one message as is, several
/// de-duplicated, comma-separated and bracketed.
pub fn aggregate_message(msgs: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for m in msgs {
        if !seen.contains(&m.as_str()) {
            seen.push(m);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen[0].to_string(),
        _ => format!("[{}]", seen.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_read_like_go() {
        let err = io::Error::from_raw_os_error(libc::ENOENT);
        let e = VolumeError::io("mkdir", Path::new("/x/y"), &err);
        assert_eq!(e.to_string(), "mkdir /x/y: no such file or directory");
        let err = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(io_reason(&err), "permission denied");
    }

    #[test]
    fn aggregate_table() {
        let cases: &[(&[&str], &str)] = &[
            (&[], ""),
            (&["a"], "a"),
            (&["a", "b"], "[a, b]"),
            (&["a", "a"], "a"),
            (&["a", "b", "a"], "[a, b]"),
        ];
        for (input, want) in cases {
            let msgs: Vec<String> = input.iter().map(|s| s.to_string()).collect();
            assert_eq!(aggregate_message(&msgs), *want, "{input:?}");
        }
        assert!(VolumeError::aggregate(vec![]).is_ok());
        let one = VolumeError::aggregate(vec![VolumeError::other("x")]).expect_err("one");
        assert_eq!(one, VolumeError::other("x"));
        let two = VolumeError::aggregate(vec![VolumeError::other("x"), VolumeError::other("y")])
            .expect_err("two");
        assert_eq!(two.to_string(), "[x, y]");
    }
}
