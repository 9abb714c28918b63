//! The in-memory runtime's records: sandboxes and containers with CRI v1's
//! state machines (sandbox ready → not ready; container created → running
//! → exited), and the filters of the List calls.

use std::collections::HashMap;
use std::time::SystemTime;

use tokio::time::Instant;

use super::script::Script;
use crate::cri::api;

/// Nanoseconds since the epoch (CRI timestamps).
pub fn unix_nanos(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One sandbox.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub id: String,
    pub metadata: api::PodSandboxMetadata,
    pub ready: bool,
    pub created_at: i64,
    pub ip: String,
    pub labels: HashMap<String, String>,
    pub annotations: HashMap<String, String>,
    pub runtime_handler: String,
}

impl Sandbox {
    fn state(&self) -> i32 {
        if self.ready {
            api::PodSandboxState::SandboxReady as i32
        } else {
            api::PodSandboxState::SandboxNotready as i32
        }
    }

    pub fn to_api(&self) -> api::PodSandbox {
        api::PodSandbox {
            id: self.id.clone(),
            metadata: Some(self.metadata.clone()),
            state: self.state(),
            created_at: self.created_at,
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    pub fn status(&self) -> api::PodSandboxStatus {
        api::PodSandboxStatus {
            id: self.id.clone(),
            metadata: Some(self.metadata.clone()),
            state: self.state(),
            created_at: self.created_at,
            network: Some(api::PodSandboxNetworkStatus {
                ip: self.ip.clone(),
                additional_ips: Vec::new(),
            }),
            linux: None,
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    pub fn matches(&self, f: &api::PodSandboxFilter) -> bool {
        (f.id.is_empty() || self.id.starts_with(&f.id))
            && f.state.as_ref().is_none_or(|s| s.state == self.state())
            && labels_match(&self.labels, &f.label_selector)
    }
}

/// One container.
#[derive(Debug, Clone)]
pub struct Container {
    pub id: String,
    pub sandbox_id: String,
    pub metadata: api::ContainerMetadata,
    pub image: api::ImageSpec,
    pub image_ref: String,
    pub labels: HashMap<String, String>,
    pub annotations: HashMap<String, String>,
    pub log_path: String,
    pub state: api::ContainerState,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub reason: String,
    pub script: Script,
    /// When it started, on the monotonic clock (the script's exit timer).
    pub started: Option<Instant>,
}

impl Container {
    /// Starts a created container.
    pub fn start(&mut self, now: SystemTime, mono: Instant) {
        self.state = api::ContainerState::ContainerRunning;
        self.started_at = unix_nanos(now);
        self.started = Some(mono);
    }

    /// Ends a running (or created) container with `code`.
    pub fn exit(&mut self, finished_at: i64, code: i32) {
        self.state = api::ContainerState::ContainerExited;
        self.finished_at = finished_at;
        self.exit_code = code;
        self.reason = if code == 0 { "Completed" } else { "Error" }.to_string();
    }

    /// Applies the script: a running container whose time is up exits.
    pub fn settle(&mut self, mono: Instant) {
        if self.state != api::ContainerState::ContainerRunning {
            return;
        }
        let (Some(after), Some(started)) = (self.script.exit_after, self.started) else {
            return;
        };
        if mono.saturating_duration_since(started) >= after {
            let finished = self
                .started_at
                .saturating_add(i64::try_from(after.as_nanos()).unwrap_or(i64::MAX));
            self.exit(finished, self.script.exit_code);
        }
    }

    pub fn to_api(&self) -> api::Container {
        api::Container {
            id: self.id.clone(),
            pod_sandbox_id: self.sandbox_id.clone(),
            metadata: Some(self.metadata.clone()),
            image: Some(self.image.clone()),
            image_ref: self.image_ref.clone(),
            state: self.state as i32,
            created_at: self.created_at,
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
        }
    }

    pub fn status(&self) -> api::ContainerStatus {
        api::ContainerStatus {
            id: self.id.clone(),
            metadata: Some(self.metadata.clone()),
            state: self.state as i32,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            exit_code: self.exit_code,
            image: Some(self.image.clone()),
            image_ref: self.image_ref.clone(),
            reason: self.reason.clone(),
            message: String::new(),
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            mounts: Vec::new(),
            log_path: self.log_path.clone(),
            resources: None,
        }
    }

    pub fn attributes(&self) -> api::ContainerAttributes {
        api::ContainerAttributes {
            id: self.id.clone(),
            metadata: Some(self.metadata.clone()),
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
        }
    }

    pub fn matches(&self, f: &api::ContainerFilter) -> bool {
        (f.id.is_empty() || self.id.starts_with(&f.id))
            && f.state
                .as_ref()
                .is_none_or(|s| s.state == self.state as i32)
            && (f.pod_sandbox_id.is_empty() || self.sandbox_id.starts_with(&f.pod_sandbox_id))
            && labels_match(&self.labels, &f.label_selector)
    }
}

/// Every selector label is on the object with the same value.
pub fn labels_match(labels: &HashMap<String, String>, selector: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Everything the runtime holds.
#[derive(Debug, Default)]
pub struct State {
    pub sandboxes: HashMap<String, Sandbox>,
    pub containers: HashMap<String, Container>,
    /// Ids handed out so far (sandboxes and containers share the counter).
    pub next_id: u64,
    /// Sandboxes created so far (their IPs).
    pub next_ip: u32,
    pub pod_cidr: String,
}

impl State {
    /// Applies every container's script.
    pub fn settle(&mut self, mono: Instant) {
        for c in self.containers.values_mut() {
            c.settle(mono);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn container(script: Script) -> Container {
        Container {
            id: "c1".into(),
            sandbox_id: "s1".into(),
            metadata: api::ContainerMetadata {
                name: "app".into(),
                attempt: 0,
            },
            image: api::ImageSpec::default(),
            image_ref: String::new(),
            labels: HashMap::new(),
            annotations: HashMap::new(),
            log_path: String::new(),
            state: api::ContainerState::ContainerCreated,
            created_at: 1,
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            script,
            started: None,
        }
    }

    #[test]
    fn settle_table() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let exits = |after: u64, code: i32| Script {
            probe_pass_after: None,
            probe_fail_after: None,
            exit_after: Some(Duration::from_secs(after)),
            exit_code: code,
        };
        // (script, when settled, state, exit code, reason)
        let cases = [
            (
                Script::default(),
                at(3600),
                api::ContainerState::ContainerRunning,
                0,
                "",
            ),
            (
                exits(2, 1),
                at(1),
                api::ContainerState::ContainerRunning,
                0,
                "",
            ),
            (
                exits(2, 1),
                at(2),
                api::ContainerState::ContainerExited,
                1,
                "Error",
            ),
            (
                exits(0, 0),
                at(0),
                api::ContainerState::ContainerExited,
                0,
                "Completed",
            ),
        ];
        for (script, when, state, code, reason) in cases {
            let mut c = container(script);
            c.start(SystemTime::UNIX_EPOCH + Duration::from_secs(10), start);
            c.settle(when);
            assert_eq!(c.state, state, "{script:?}");
            assert_eq!(
                (c.exit_code, c.reason.as_str()),
                (code, reason),
                "{script:?}"
            );
            if state == api::ContainerState::ContainerExited {
                let after = script.exit_after.unwrap_or_default().as_nanos() as i64;
                assert_eq!(c.finished_at, c.started_at + after);
            }
        }
    }

    #[test]
    fn filter_table() {
        let mut c = container(Script::default());
        c.labels.insert("io.kubernetes.pod.uid".into(), "u1".into());
        let sel = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        let cases = [
            (api::ContainerFilter::default(), true),
            (
                api::ContainerFilter {
                    id: "c".into(),
                    ..Default::default()
                },
                true,
            ),
            (
                api::ContainerFilter {
                    pod_sandbox_id: "s2".into(),
                    ..Default::default()
                },
                false,
            ),
            (
                api::ContainerFilter {
                    state: Some(api::ContainerStateValue {
                        state: api::ContainerState::ContainerRunning as i32,
                    }),
                    ..Default::default()
                },
                false,
            ),
            (
                api::ContainerFilter {
                    label_selector: sel("io.kubernetes.pod.uid", "u1"),
                    ..Default::default()
                },
                true,
            ),
            (
                api::ContainerFilter {
                    label_selector: sel("io.kubernetes.pod.uid", "u2"),
                    ..Default::default()
                },
                false,
            ),
        ];
        for (filter, want) in cases {
            assert_eq!(c.matches(&filter), want, "{filter:?}");
        }
    }
}
