//! Graceful node shutdown (Go's nodeshutdown manager, Linux): the kubelet
//! holds a systemd-logind delay inhibitor; when logind announces a shutdown
//! (PrepareForShutdown) the node stops admitting pods, reports itself not
//! ready, stops the active pods by priority range, lowest first, each range
//! within its grace period, and then releases the inhibitor so the shutdown
//! goes on. A cancelled shutdown takes the inhibitor again.

mod groups;
mod logind;
mod manager;
mod storage;

#[cfg(test)]
mod manager_tests;

pub use groups::{
    DEFAULT_PRIORITY, PriorityRange, SYSTEM_CRITICAL_PRIORITY, ShutdownGroup, ShutdownRanges,
};
pub use logind::{
    InhibitLock, KUBELET_LOGIND_CONF, LOGIND_CONF_DIR, Logind, LogindBus, SystemBus,
    override_inhibit_delay,
};
pub use manager::{
    NODE_SHUTDOWN_MESSAGE, NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE, NODE_SHUTDOWN_NOT_ADMITTED_REASON,
    NODE_SHUTDOWN_REASON, ShutdownConfig, ShutdownDeps, ShutdownKiller, ShutdownManager,
    ShutdownStatus,
};
pub use storage::{STATE_FILE, ShutdownState, StateFile};

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong talking to logind or keeping the shutdown state.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    #[error("{what}: {source}")]
    Dbus {
        what: &'static str,
        #[source]
        source: Box<zbus::Error>,
    },
    #[error("InhibitDelayMaxUSec from logind is not a uint64 as expected")]
    NotUsec,
    #[error("unable to override inhibit delay by shutdown manager: {0}")]
    Override(#[source] Box<ShutdownError>),
    #[error("{path:?}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "node shutdown manager was unable to update logind InhibitDelayMaxSec to {requested:?} (ShutdownGracePeriod), current value of InhibitDelayMaxSec ({current:?}) is less than requested ShutdownGracePeriod"
    )]
    DelayTooShort {
        requested: Duration,
        current: Duration,
    },
    #[error("graceful shutdown state {path:?}: {message}")]
    State { path: PathBuf, message: String },
    #[error("killing pod {pod}: {message}")]
    KillPod { pod: String, message: String },
}

impl ShutdownError {
    pub(crate) fn dbus(what: &'static str, source: impl Into<zbus::Error>) -> Self {
        ShutdownError::Dbus {
            what,
            source: Box::new(source.into()),
        }
    }
}
