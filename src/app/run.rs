//! run(): the placeholder entry until the run()-time stages land. It logs
//! the start and waits for SIGTERM or SIGINT.

use std::sync::Arc;

use tokio::signal::unix::{SignalKind, signal};

use super::server::KubeletServer;
use crate::version;

/// Why run() ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("failed to watch for {signal}: {source}")]
    Signals {
        signal: &'static str,
        source: std::io::Error,
    },
}

/// Starts the kubelet described by `server` and returns once it was asked
/// to stop.
pub async fn run(server: Arc<KubeletServer>) -> Result<(), RunError> {
    let mut term = signal(SignalKind::terminate()).map_err(|source| RunError::Signals {
        signal: "SIGTERM",
        source,
    })?;
    let mut int = signal(SignalKind::interrupt()).map_err(|source| RunError::Signals {
        signal: "SIGINT",
        source,
    })?;
    // Announced only once the signals are watched, so a stop request that
    // follows the announcement is never lost.
    tracing::info!(
        version = %version::git_version(),
        standalone = server.is_standalone(),
        "Starting kubelet"
    );
    let received = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    tracing::info!(signal = received, "Shutting down");
    Ok(())
}
