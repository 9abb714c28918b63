//! What one SyncPod did, action by action, with the kubelet's reason strings
//! (`ErrImagePull`, `CrashLoopBackOff`, …) that end up in pod status and events.

use std::fmt;

/// The step of a pod sync an outcome belongs to (kubecontainer.SyncAction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncAction {
    StartContainer,
    KillContainer,
    SetupNetwork,
    TeardownNetwork,
    InitContainer,
    CreatePodSandbox,
    ConfigPodSandbox,
    KillPodSandbox,
}

impl fmt::Display for SyncAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncAction::StartContainer => "StartContainer",
            SyncAction::KillContainer => "KillContainer",
            SyncAction::SetupNetwork => "SetupNetwork",
            SyncAction::TeardownNetwork => "TeardownNetwork",
            SyncAction::InitContainer => "InitContainer",
            SyncAction::CreatePodSandbox => "CreatePodSandbox",
            SyncAction::ConfigPodSandbox => "ConfigPodSandbox",
            SyncAction::KillPodSandbox => "KillPodSandbox",
        })
    }
}

/// A failed step: the kubelet reason (`ErrImagePull`, `CrashLoopBackOff`,
/// `CreateContainerConfigError`, `RunContainerError`, …) and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct SyncError {
    pub reason: String,
    pub message: String,
}

impl SyncError {
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// One step's outcome; `target` is a container name or the pod's full name.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncResult {
    pub action: SyncAction,
    pub target: String,
    pub error: Option<SyncError>,
}

impl SyncResult {
    pub fn ok(action: SyncAction, target: impl Into<String>) -> Self {
        Self {
            action,
            target: target.into(),
            error: None,
        }
    }

    pub fn fail(action: SyncAction, target: impl Into<String>, error: SyncError) -> Self {
        Self {
            action,
            target: target.into(),
            error: Some(error),
        }
    }
}

/// The outcome of a whole SyncPod (kubecontainer.PodSyncResult).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSyncResult {
    pub results: Vec<SyncResult>,
    /// A failure outside any single step (e.g. the status could not be read).
    pub sync_error: Option<SyncError>,
}

impl PodSyncResult {
    pub fn add(&mut self, result: SyncResult) {
        self.results.push(result);
    }

    pub fn merge(&mut self, other: PodSyncResult) {
        self.results.extend(other.results);
        if self.sync_error.is_none() {
            self.sync_error = other.sync_error;
        }
    }

    pub fn fail(&mut self, error: SyncError) {
        self.sync_error = Some(error);
    }

    /// The first error: the overall one, else the first failed step's.
    pub fn error(&self) -> Option<&SyncError> {
        self.sync_error
            .as_ref()
            .or_else(|| self.results.iter().find_map(|r| r.error.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_prefers_overall_then_first_failed_step() {
        let mut r = PodSyncResult::default();
        assert!(r.error().is_none());
        r.add(SyncResult::ok(SyncAction::CreatePodSandbox, "p"));
        r.add(SyncResult::fail(
            SyncAction::StartContainer,
            "c",
            SyncError::new("ErrImagePull", "no registry"),
        ));
        assert_eq!(r.error().map(|e| e.reason.as_str()), Some("ErrImagePull"));
        r.fail(SyncError::new("KillPodError", "x"));
        assert_eq!(r.error().map(|e| e.reason.as_str()), Some("KillPodError"));
    }
}
