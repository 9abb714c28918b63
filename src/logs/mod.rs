//! Logging as klog does it: `-v` verbosity levels, klog-style text lines by
//! default and JSON on request (the formatters land with issue 2).
//!
//! Severity maps onto tracing levels (`error!` → E, `warn!` → W, `info!` → I).
//! Verbosity is klog's, not tracing's: write `vlog!(4, ...)` for what Go
//! writes as `klog.V(4).InfoS(...)`; it is an `info!` event emitted only when
//! the process runs with `-v` of at least that level.

use std::sync::atomic::{AtomicU32, Ordering};

static VERBOSITY: AtomicU32 = AtomicU32::new(0);

/// Sets the process-wide klog verbosity (`-v`).
pub fn set_verbosity(level: u32) {
    VERBOSITY.store(level, Ordering::Relaxed);
}

/// The current klog verbosity.
pub fn verbosity() -> u32 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Whether `klog.V(level)` would log.
#[inline]
pub fn v_enabled(level: u32) -> bool {
    verbosity() >= level
}

/// `vlog!(level, tracing-info-args...)`: an info event gated on `-v`.
///
/// ```
/// kubelet::vlog!(2, pod = "ns/name", "SyncLoop ADD");
/// ```
#[macro_export]
macro_rules! vlog {
    ($level:expr, $($arg:tt)+) => {
        if $crate::logs::v_enabled($level) {
            ::tracing::info!(v = $level, $($arg)+);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_gates_levels() {
        set_verbosity(3);
        assert!(v_enabled(0));
        assert!(v_enabled(3));
        assert!(!v_enabled(4));
        set_verbosity(0);
    }
}
