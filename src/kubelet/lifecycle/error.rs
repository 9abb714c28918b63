//! Errors building admission handlers (start-up configuration errors).

/// Why an admission handler could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// An `allowedUnsafeSysctls` entry is not a valid sysctl name or pattern.
    #[error("sysctl {pattern:?} must have at most {max_len} characters and match regex {regex}")]
    InvalidSysctlPattern {
        pattern: String,
        max_len: usize,
        regex: &'static str,
    },
    /// An `allowedUnsafeSysctls` pattern (ending in `*`) covers no namespaced sysctls.
    #[error("the sysctls {pattern:?} are not known to be namespaced")]
    SysctlPatternNotNamespaced { pattern: String },
    /// An `allowedUnsafeSysctls` entry names a sysctl that is not namespaced.
    #[error("the sysctl {sysctl:?} are not known to be namespaced")]
    SysctlNotNamespaced { sysctl: String },
}
