//! The kubelet's side of `kubectl logs` (GetKubeletContainerLogs): from a
//! pod and container name to the runtime container whose log is wanted —
//! the current one, or with `previous` the last one that terminated — then
//! the runtime's log file for it, streamed by the kuberuntime log reader.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use crate::cri::RuntimeService;
use crate::kubelet::container::ContainerId;
use crate::kubelet::images::ImageErrorKind;
use crate::kubelet::kuberuntime::kill::get_container_spec;
use crate::kubelet::kuberuntime::logs::{
    LogOptions, LogSink, LogsError, PodLogOptions, RuntimeContainerRunning, read_logs,
};
use crate::kubelet::pod::PodManager;
use crate::kubelet::status::StatusManager;
use crate::util::clock::Clock;

/// Why no log can be served for a container.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerLogsError {
    #[error("pod {0:?} does not exist")]
    PodNotFound(String),
    #[error("container {container:?} not found in pod {pod:?}")]
    ContainerNotFound { pod: String, container: String },
    #[error("container {container:?} in pod {pod:?} is not available")]
    NotAvailable { pod: String, container: String },
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious { pod: String, container: String },
    #[error("container {container:?} in pod {pod:?} is terminated")]
    Terminated { pod: String, container: String },
    #[error("container {container:?} in pod {pod:?} is waiting to start: {why}")]
    Waiting {
        pod: String,
        container: String,
        why: String,
    },
    #[error("container {container:?} in pod {pod:?} is waiting to start - no logs yet")]
    NoLogsYet { pod: String, container: String },
    #[error("unable to retrieve container logs for {0}")]
    Status(String),
}

fn find_status<'a>(status: &'a PodStatus, container: &str) -> Option<&'a ContainerStatus> {
    [
        &status.container_statuses,
        &status.init_container_statuses,
        &status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|s| s.name == container)
}

/// The container whose log a request means, from the pod's status
/// (validateContainerLogStatus).
pub fn container_for_logs(
    pod_name: &str,
    status: &PodStatus,
    container: &str,
    previous: bool,
) -> Result<ContainerId, ContainerLogsError> {
    let (pod, name) = (pod_name.to_string(), container.to_string());
    let cs = find_status(status, container).ok_or_else(|| ContainerLogsError::NotAvailable {
        pod: pod.clone(),
        container: name.clone(),
    })?;
    let last = cs
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.container_id.clone())
        .filter(|id| !id.is_empty());
    let state = cs.state.clone().unwrap_or_default();
    let terminated = || ContainerLogsError::Terminated {
        pod: pod.clone(),
        container: name.clone(),
    };
    let id = if previous {
        last.ok_or_else(|| ContainerLogsError::NoPrevious {
            pod: pod.clone(),
            container: name.clone(),
        })?
    } else if state.running.is_some() {
        cs.container_id.clone().unwrap_or_default()
    } else if let Some(t) = &state.terminated {
        // When the next container never started, its predecessor's log is
        // the one there is.
        match t.container_id.clone().filter(|id| !id.is_empty()) {
            Some(id) => id,
            None => last.ok_or_else(terminated)?,
        }
    } else if cs
        .last_state
        .as_ref()
        .is_some_and(|s| s.terminated.is_some())
    {
        last.ok_or_else(terminated)?
    } else if let Some(w) = &state.waiting {
        let reason = w.reason.clone().unwrap_or_default();
        let why = if reason == ImageErrorKind::Pull.reason() {
            "image can't be pulled".to_string()
        } else if reason == ImageErrorKind::PullBackOff.reason() {
            "trying and failing to pull image".to_string()
        } else {
            reason
        };
        return Err(ContainerLogsError::Waiting {
            pod,
            container: name,
            why,
        });
    } else {
        return Err(ContainerLogsError::NoLogsYet {
            pod,
            container: name,
        });
    };
    Ok(ContainerId::parse(&id).unwrap_or_else(|| ContainerId::new("", id)))
}

/// A container log ready to stream: where it is and which container wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLog {
    pub container_id: String,
    pub path: PathBuf,
}

/// Streams one request's log into the sink; the error's text, if any, is
/// what the client sees at the end of the stream.
pub type LogStreamer = Box<dyn FnOnce(LogSink) -> BoxFuture<'static, Result<(), LogsError>> + Send>;

/// What the server's /containerLogs handler asks the kubelet.
#[async_trait::async_trait]
pub trait ContainerLogs: Send + Sync + 'static {
    /// Checks the pod and container exist, picks the container and finds
    /// its log; the returned streamer reads it.
    async fn container_logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        opts: PodLogOptions,
    ) -> Result<LogStreamer, ContainerLogsError>;
}

/// The kubelet's answer: desired pods, their latest status, the runtime.
pub struct KubeletContainerLogs {
    pub pod_manager: Arc<PodManager>,
    pub status_manager: Arc<StatusManager>,
    pub runtime: Arc<dyn RuntimeService>,
    pub clock: Arc<dyn Clock>,
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

#[async_trait::async_trait]
impl ContainerLogs for KubeletContainerLogs {
    async fn container_logs(
        &self,
        namespace: &str,
        pod_name: &str,
        container: &str,
        opts: PodLogOptions,
    ) -> Result<LogStreamer, ContainerLogsError> {
        let pod = self
            .pod_manager
            .get_pod_by_name(namespace, pod_name)
            .ok_or_else(|| ContainerLogsError::PodNotFound(pod_name.to_string()))?;
        if get_container_spec(&pod, container).is_none() {
            return Err(ContainerLogsError::ContainerNotFound {
                pod: pod_name.to_string(),
                container: container.to_string(),
            });
        }
        // The kubelet's latest status; after a restart, the source's.
        let status = self
            .status_manager
            .get_pod_status(uid(&pod))
            .or_else(|| pod.status.clone())
            .unwrap_or_default();
        let id = container_for_logs(pod_name, &status, container, opts.previous)?;
        let resp = self
            .runtime
            .container_status(&id.id, false)
            .await
            .map_err(|e| {
                crate::vlog!(4, container_id = %id, error = %e, "Failed to get container status");
                ContainerLogsError::Status(id.to_string())
            })?;
        let path = resp
            .status
            .map(|s| PathBuf::from(s.log_path))
            .ok_or_else(|| ContainerLogsError::Status(id.to_string()))?;
        let now =
            jiff::Timestamp::try_from(self.clock.now()).unwrap_or_else(|_| jiff::Timestamp::now());
        let log_opts = LogOptions::new(&opts, now);
        let runtime = self.runtime.clone();
        Ok(Box::new(move |sink: LogSink| {
            Box::pin(async move {
                read_logs(
                    &path,
                    &id.id,
                    &log_opts,
                    &RuntimeContainerRunning(runtime.as_ref()),
                    &sink,
                )
                .await
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(container: serde_json::Value) -> PodStatus {
        serde_json::from_value(json!({"containerStatuses": [container]})).unwrap()
    }

    #[test]
    fn which_container_a_log_request_means() {
        let running = json!({"name": "c", "containerID": "containerd://cur", "image": "", "imageID": "", "ready": true, "restartCount": 1,
            "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": "containerd://old"}}});
        let term_no_id = json!({"name": "c", "image": "", "imageID": "", "ready": false, "restartCount": 1,
            "state": {"terminated": {"exitCode": 0}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": "containerd://old"}}});
        let term = json!({"name": "c", "image": "", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "containerID": "containerd://done"}}});
        let crashloop = json!({"name": "c", "image": "", "imageID": "", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 2, "containerID": "containerd://crashed"}}});
        let pulling = |reason: &str| {
            json!({"name": "c", "image": "", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason}}})
        };
        let empty =
            json!({"name": "c", "image": "", "imageID": "", "ready": false, "restartCount": 0});
        let cases: Vec<(&str, serde_json::Value, bool, Result<&str, &str>)> = vec![
            ("running", running.clone(), false, Ok("cur")),
            ("running previous", running, true, Ok("old")),
            ("terminated", term.clone(), false, Ok("done")),
            (
                "terminated, no previous",
                term,
                true,
                Err("previous terminated container \"c\" in pod \"p\" not found"),
            ),
            ("terminated without id", term_no_id, false, Ok("old")),
            ("crash loop", crashloop.clone(), false, Ok("crashed")),
            ("crash loop previous", crashloop, true, Ok("crashed")),
            (
                "pull",
                pulling("ErrImagePull"),
                false,
                Err("container \"c\" in pod \"p\" is waiting to start: image can't be pulled"),
            ),
            (
                "backoff",
                pulling("ImagePullBackOff"),
                false,
                Err(
                    "container \"c\" in pod \"p\" is waiting to start: trying and failing to pull image",
                ),
            ),
            (
                "creating",
                pulling("ContainerCreating"),
                false,
                Err("container \"c\" in pod \"p\" is waiting to start: ContainerCreating"),
            ),
            (
                "no state",
                empty,
                false,
                Err("container \"c\" in pod \"p\" is waiting to start - no logs yet"),
            ),
        ];
        for (name, cs, previous, want) in cases {
            let got = container_for_logs("p", &status(cs), "c", previous)
                .map(|id| id.id)
                .map_err(|e| e.to_string());
            assert_eq!(got, want.map(String::from).map_err(String::from), "{name}");
        }
        let err = container_for_logs("p", &PodStatus::default(), "c", false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "container \"c\" in pod \"p\" is not available"
        );
    }
}
