//! Errors of the topology manager, worded as the Go kubelet words them.

/// The topology manager could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyManagerError {
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    #[error("unknown scope: \"{0}\"")]
    UnknownScope(String),
    #[error("unsupported on machines with more than {0} NUMA Nodes")]
    TooManyNumaNodes(usize),
}
