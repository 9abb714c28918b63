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

    /// What failed, with each step's kubelet reason; `None` when all went well.
    pub fn failure(&self) -> Option<SyncFailure> {
        let failed: Vec<SyncResult> = self
            .results
            .iter()
            .filter(|r| r.error.is_some())
            .cloned()
            .collect();
        (self.sync_error.is_some() || !failed.is_empty()).then(|| SyncFailure {
            sync_error: self.sync_error.clone(),
            failed,
        })
    }
}

/// The failed part of a SyncPod: the overall error and the failed steps,
/// their reasons kept (`ErrImagePull`, `CrashLoopBackOff`, …). Shown as Go's
/// `result.Error()`: one message, or `[a, b]` for several distinct ones.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct SyncFailure {
    pub sync_error: Option<SyncError>,
    pub failed: Vec<SyncResult>,
}

impl SyncFailure {
    /// Every reason, the overall one first.
    pub fn reasons(&self) -> impl Iterator<Item = &str> {
        self.sync_error
            .iter()
            .chain(self.failed.iter().filter_map(|r| r.error.as_ref()))
            .map(|e| e.reason.as_str())
    }

    /// True when every failed step only waits out a back-off (no overall
    /// error): the sync did what it could.
    pub fn only_back_off(&self, back_off_reasons: &[&str]) -> bool {
        self.sync_error.is_none() && self.reasons().all(|r| back_off_reasons.contains(&r))
    }

    fn messages(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let overall = self.sync_error.iter().map(|e| e.to_string());
        let steps = self.failed.iter().filter_map(|r| {
            r.error.as_ref().map(|e| {
                format!(
                    "failed to {:?} for {:?} with {}: {:?}",
                    r.action.to_string(),
                    r.target,
                    e.reason,
                    e.message
                )
            })
        });
        for m in overall.chain(steps) {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }
}

impl fmt::Display for SyncFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.messages().as_slice() {
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
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

    #[test]
    fn failure_reads_as_go_and_knows_back_off() {
        let step = |reason: &str, msg: &str| {
            SyncResult::fail(
                SyncAction::StartContainer,
                "app",
                SyncError::new(reason, msg),
            )
        };
        let back_off = ["CrashLoopBackOff", "ImagePullBackOff"];
        // (overall error, steps, message, only back-off)
        type Case = (
            Option<SyncError>,
            Vec<SyncResult>,
            Option<&'static str>,
            bool,
        );
        let cases: Vec<Case> = vec![
            (
                None,
                vec![SyncResult::ok(SyncAction::StartContainer, "app")],
                None,
                false,
            ),
            (
                None,
                vec![step("ErrImagePull", "not found")],
                Some(r#"failed to "StartContainer" for "app" with ErrImagePull: "not found""#),
                false,
            ),
            (
                None,
                vec![
                    step("CrashLoopBackOff", "back-off 10s"),
                    step("CrashLoopBackOff", "back-off 10s"),
                ],
                Some(
                    r#"failed to "StartContainer" for "app" with CrashLoopBackOff: "back-off 10s""#,
                ),
                true,
            ),
            (
                Some(SyncError::new("KillPodSandboxError", "gone")),
                vec![step("ImagePullBackOff", "wait")],
                Some(
                    r#"[KillPodSandboxError: gone, failed to "StartContainer" for "app" with ImagePullBackOff: "wait"]"#,
                ),
                false,
            ),
        ];
        for (overall, steps, message, only_back_off) in cases {
            let result = PodSyncResult {
                results: steps,
                sync_error: overall,
            };
            let failure = result.failure();
            assert_eq!(failure.as_ref().map(|f| f.to_string()).as_deref(), message);
            if let Some(f) = failure {
                assert_eq!(f.only_back_off(&back_off), only_back_off, "{f}");
            }
        }
    }
}
