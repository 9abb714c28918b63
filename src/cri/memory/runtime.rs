//! The in-memory RuntimeService: sandboxes and containers as records, no
//! processes, no network namespaces, no files. Scripted containers exit
//! when their time is up, observed by the next call that reads them.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::script::Script;
use super::state::{Container, Sandbox, State, unix_nanos};
use super::{ENDPOINT, RUNTIME_NAME, not_found, unimplemented};
use crate::cri::api;
use crate::cri::service::{ExecSyncOutput, Result, RuntimeService};
use crate::util::clock::Clock;

/// Sandboxes and containers of one hollow node.
pub struct MemoryRuntime {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    /// The node's /24 of sandbox IPs (`10.<b>.<c>.0`).
    ip_base: Ipv4Addr,
    /// Distinguishes this runtime's ids from another node's.
    id_prefix: u64,
}

impl MemoryRuntime {
    /// The runtime of hollow node `index`: its sandboxes get IPs from
    /// `10.(64 + index / 256).(index % 256).0/24`.
    pub fn new(index: u32, clock: Arc<dyn Clock>) -> Self {
        let b = 64u32.saturating_add(index / 256).min(255) as u8;
        MemoryRuntime {
            state: Mutex::new(State::default()),
            clock,
            ip_base: Ipv4Addr::new(10, b, (index % 256) as u8, 0),
            id_prefix: u64::from(index),
        }
    }

    /// The state, its scripts applied as of now.
    fn state(&self) -> MutexGuard<'_, State> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.settle(self.clock.monotonic());
        s
    }

    fn new_id(&self, s: &mut State) -> String {
        s.next_id += 1;
        format!("{:016x}{:048x}", self.id_prefix, s.next_id)
    }

    fn next_ip(&self, s: &mut State) -> String {
        s.next_ip += 1;
        let host = (s.next_ip - 1) % 253 + 1;
        let [a, b, c, _] = self.ip_base.octets();
        Ipv4Addr::new(a, b, c, host as u8).to_string()
    }

    /// How many sandboxes and containers it holds.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state();
        (s.sandboxes.len(), s.containers.len())
    }
}

fn stop_containers_of(s: &mut State, sandbox: &str, finished_at: i64) {
    for c in s.containers.values_mut() {
        if c.sandbox_id == sandbox && c.state != api::ContainerState::ContainerExited {
            c.exit(finished_at, 0);
        }
    }
}

#[async_trait]
impl RuntimeService for MemoryRuntime {
    async fn version(&self, _api_version: &str) -> Result<api::VersionResponse> {
        Ok(api::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: RUNTIME_NAME.into(),
            runtime_version: crate::version::git_version(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn run_pod_sandbox(
        &self,
        config: &api::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<String> {
        let now = unix_nanos(self.clock.now());
        let mut s = self.state();
        let id = self.new_id(&mut s);
        let ip = self.next_ip(&mut s);
        s.sandboxes.insert(
            id.clone(),
            Sandbox {
                id: id.clone(),
                metadata: config.metadata.clone().unwrap_or_default(),
                ready: true,
                created_at: now,
                ip,
                labels: config.labels.clone(),
                annotations: config.annotations.clone(),
                runtime_handler: runtime_handler.to_string(),
            },
        );
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<()> {
        let now = unix_nanos(self.clock.now());
        let mut s = self.state();
        if let Some(sb) = s.sandboxes.get_mut(pod_sandbox_id) {
            sb.ready = false;
            stop_containers_of(&mut s, pod_sandbox_id, now);
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<()> {
        let mut s = self.state();
        s.sandboxes.remove(pod_sandbox_id);
        s.containers.retain(|_, c| c.sandbox_id != pod_sandbox_id);
        Ok(())
    }

    async fn pod_sandbox_status(
        &self,
        pod_sandbox_id: &str,
        _verbose: bool,
    ) -> Result<api::PodSandboxStatusResponse> {
        let s = self.state();
        let sb = s
            .sandboxes
            .get(pod_sandbox_id)
            .ok_or_else(|| not_found("PodSandboxStatus", "sandbox", pod_sandbox_id))?;
        Ok(api::PodSandboxStatusResponse {
            status: Some(sb.status()),
            info: HashMap::new(),
        })
    }

    async fn list_pod_sandbox(
        &self,
        filter: Option<api::PodSandboxFilter>,
    ) -> Result<Vec<api::PodSandbox>> {
        let s = self.state();
        Ok(s.sandboxes
            .values()
            .filter(|sb| filter.as_ref().is_none_or(|f| sb.matches(f)))
            .map(Sandbox::to_api)
            .collect())
    }

    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &api::ContainerConfig,
        sandbox_config: &api::PodSandboxConfig,
    ) -> Result<String> {
        let now = unix_nanos(self.clock.now());
        let mut s = self.state();
        let log_dir = match s.sandboxes.get(pod_sandbox_id) {
            Some(_) => sandbox_config.log_directory.clone(),
            None => return Err(not_found("CreateContainer", "sandbox", pod_sandbox_id)),
        };
        let metadata = config.metadata.clone().unwrap_or_default();
        let image = config.image.clone().unwrap_or_default();
        if image.image.is_empty() {
            // As a real runtime: a container needs an image to run.
            return Err(crate::cri::CriError::Rpc {
                endpoint: ENDPOINT.into(),
                rpc: "CreateContainer",
                code: tonic::Code::InvalidArgument,
                message: format!("container {:?} names no image", metadata.name),
            });
        }
        let id = self.new_id(&mut s);
        let log_path = if config.log_path.is_empty() {
            String::new()
        } else {
            format!("{}/{}", log_dir.trim_end_matches('/'), config.log_path)
        };
        let script = Script::from_annotations(&sandbox_config.annotations, &metadata.name);
        s.containers.insert(
            id.clone(),
            Container {
                id: id.clone(),
                sandbox_id: pod_sandbox_id.to_string(),
                image_ref: super::images::image_id(&image.image),
                metadata,
                image,
                labels: config.labels.clone(),
                annotations: config.annotations.clone(),
                log_path,
                state: api::ContainerState::ContainerCreated,
                created_at: now,
                started_at: 0,
                finished_at: 0,
                exit_code: 0,
                reason: String::new(),
                script,
                started: None,
            },
        );
        Ok(id)
    }

    async fn start_container(&self, container_id: &str) -> Result<()> {
        let (now, mono) = (self.clock.now(), self.clock.monotonic());
        let log_path = {
            let mut s = self.state();
            let c = s
                .containers
                .get_mut(container_id)
                .ok_or_else(|| not_found("StartContainer", "container", container_id))?;
            if c.state != api::ContainerState::ContainerCreated {
                return Err(crate::cri::CriError::Rpc {
                    endpoint: ENDPOINT.into(),
                    rpc: "StartContainer",
                    code: tonic::Code::FailedPrecondition,
                    message: format!("container {container_id} is not in created state"),
                });
            }
            c.start(now, mono);
            c.settle(mono);
            c.log_path.clone()
        };
        create_log(&log_path).await;
        Ok(())
    }

    async fn stop_container(&self, container_id: &str, _timeout: i64) -> Result<()> {
        let now = unix_nanos(self.clock.now());
        let mut s = self.state();
        let c = s
            .containers
            .get_mut(container_id)
            .ok_or_else(|| not_found("StopContainer", "container", container_id))?;
        if c.state != api::ContainerState::ContainerExited {
            c.exit(now, 0);
        }
        Ok(())
    }

    async fn remove_container(&self, container_id: &str) -> Result<()> {
        self.state().containers.remove(container_id);
        Ok(())
    }

    async fn list_containers(
        &self,
        filter: Option<api::ContainerFilter>,
    ) -> Result<Vec<api::Container>> {
        let s = self.state();
        Ok(s.containers
            .values()
            .filter(|c| filter.as_ref().is_none_or(|f| c.matches(f)))
            .map(Container::to_api)
            .collect())
    }

    async fn container_status(
        &self,
        container_id: &str,
        _verbose: bool,
    ) -> Result<api::ContainerStatusResponse> {
        let s = self.state();
        let c = s
            .containers
            .get(container_id)
            .ok_or_else(|| not_found("ContainerStatus", "container", container_id))?;
        Ok(api::ContainerStatusResponse {
            status: Some(c.status()),
            info: HashMap::new(),
        })
    }

    async fn update_container_resources(
        &self,
        container_id: &str,
        _resources: &api::ContainerResources,
    ) -> Result<()> {
        match self.state().containers.contains_key(container_id) {
            true => Ok(()),
            false => Err(not_found(
                "UpdateContainerResources",
                "container",
                container_id,
            )),
        }
    }

    async fn reopen_container_log(&self, container_id: &str) -> Result<()> {
        let log_path = self
            .state()
            .containers
            .get(container_id)
            .map(|c| c.log_path.clone())
            .ok_or_else(|| not_found("ReopenContainerLog", "container", container_id))?;
        create_log(&log_path).await;
        Ok(())
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        _timeout: Duration,
    ) -> Result<ExecSyncOutput> {
        // Every command succeeds silently in a running container (exec
        // probes pass), unless the container's script fails it now.
        let mono = self.clock.monotonic();
        let s = self.state();
        match s.containers.get(container_id) {
            Some(c) if c.state == api::ContainerState::ContainerRunning => {
                let running_for = c
                    .started
                    .map_or(Duration::ZERO, |t| mono.saturating_duration_since(t));
                if c.script.exec_passes(running_for) {
                    return Ok(ExecSyncOutput::default());
                }
                Err(crate::cri::CriError::ExitCode {
                    container: container_id.to_string(),
                    cmd: cmd.join(" "),
                    code: super::script::PROBE_FAILURE_EXIT_CODE,
                    stdout: Vec::new(),
                    stderr: b"hollow: scripted failure".to_vec(),
                })
            }
            Some(_) => Err(crate::cri::CriError::Rpc {
                endpoint: ENDPOINT.into(),
                rpc: "ExecSync",
                code: tonic::Code::FailedPrecondition,
                message: format!("container {container_id} is not running"),
            }),
            None => Err(not_found("ExecSync", "container", container_id)),
        }
    }

    async fn exec(&self, _request: &api::ExecRequest) -> Result<api::ExecResponse> {
        Err(unimplemented("Exec"))
    }

    async fn attach(&self, _request: &api::AttachRequest) -> Result<api::AttachResponse> {
        Err(unimplemented("Attach"))
    }

    async fn port_forward(
        &self,
        _request: &api::PortForwardRequest,
    ) -> Result<api::PortForwardResponse> {
        Err(unimplemented("PortForward"))
    }

    async fn container_stats(&self, container_id: &str) -> Result<Option<api::ContainerStats>> {
        let now = unix_nanos(self.clock.now());
        let s = self.state();
        Ok(s.containers.get(container_id).map(|c| zero_stats(c, now)))
    }

    async fn list_container_stats(
        &self,
        filter: Option<api::ContainerStatsFilter>,
    ) -> Result<Vec<api::ContainerStats>> {
        let now = unix_nanos(self.clock.now());
        let s = self.state();
        Ok(s.containers
            .values()
            .filter(|c| c.state == api::ContainerState::ContainerRunning)
            .filter(|c| {
                filter.as_ref().is_none_or(|f| {
                    (f.id.is_empty() || c.id.starts_with(&f.id))
                        && (f.pod_sandbox_id.is_empty()
                            || c.sandbox_id.starts_with(&f.pod_sandbox_id))
                        && super::state::labels_match(&c.labels, &f.label_selector)
                })
            })
            .map(|c| zero_stats(c, now))
            .collect())
    }

    async fn pod_sandbox_stats(
        &self,
        _pod_sandbox_id: &str,
    ) -> Result<Option<api::PodSandboxStats>> {
        Ok(None)
    }

    async fn list_pod_sandbox_stats(
        &self,
        _filter: Option<api::PodSandboxStatsFilter>,
    ) -> Result<Vec<api::PodSandboxStats>> {
        Ok(Vec::new())
    }

    async fn update_runtime_config(&self, runtime_config: &api::RuntimeConfig) -> Result<()> {
        if let Some(net) = &runtime_config.network_config {
            self.state().pod_cidr = net.pod_cidr.clone();
        }
        Ok(())
    }

    async fn status(&self, _verbose: bool) -> Result<api::StatusResponse> {
        let ready = |t: &str| api::RuntimeCondition {
            r#type: t.to_string(),
            status: true,
            reason: String::new(),
            message: String::new(),
        };
        Ok(api::StatusResponse {
            status: Some(api::RuntimeStatus {
                conditions: vec![ready("RuntimeReady"), ready("NetworkReady")],
            }),
            info: HashMap::new(),
        })
    }

    async fn runtime_config(&self) -> Result<api::RuntimeConfigResponse> {
        Err(unimplemented("RuntimeConfig"))
    }
}

/// The container's (empty) log file, as a runtime creates it when the
/// container starts: the log manager and `kubectl logs` find a file.
async fn create_log(path: &str) {
    if path.is_empty() {
        return;
    }
    let path = std::path::Path::new(path);
    if let Some(dir) = path.parent()
        && let Err(e) = tokio::fs::create_dir_all(dir).await
    {
        tracing::warn!(path = %dir.display(), err = %e, "Could not create the container log directory");
        return;
    }
    let opened = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await;
    if let Err(e) = opened {
        tracing::warn!(path = %path.display(), err = %e, "Could not create the container log");
    }
}

/// Stats of a container that uses nothing.
fn zero_stats(c: &Container, now: i64) -> api::ContainerStats {
    let zero = Some(api::UInt64Value { value: 0 });
    api::ContainerStats {
        attributes: Some(c.attributes()),
        cpu: Some(api::CpuUsage {
            timestamp: now,
            usage_core_nano_seconds: zero,
            usage_nano_cores: zero,
        }),
        memory: Some(api::MemoryUsage {
            timestamp: now,
            working_set_bytes: zero,
            available_bytes: zero,
            usage_bytes: zero,
            rss_bytes: zero,
            page_faults: zero,
            major_page_faults: zero,
        }),
        writable_layer: Some(api::FilesystemUsage {
            timestamp: now,
            fs_id: Some(api::FilesystemIdentifier {
                mountpoint: "/".into(),
            }),
            used_bytes: zero,
            inodes_used: zero,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;

    fn sandbox_config(annotations: &[(&str, &str)]) -> api::PodSandboxConfig {
        api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: "p".into(),
                uid: "u1".into(),
                namespace: "ns".into(),
                attempt: 0,
            }),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn container_config(name: &str) -> api::ContainerConfig {
        api::ContainerConfig {
            metadata: Some(api::ContainerMetadata {
                name: name.into(),
                attempt: 0,
            }),
            image: Some(api::ImageSpec {
                image: "pause:3.8".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn state_of(rt: &MemoryRuntime, id: &str) -> (i32, i32, String) {
        let s = rt
            .container_status(id, false)
            .await
            .unwrap()
            .status
            .unwrap();
        assert!(
            crate::cri::verify::verify_container_status(&s).is_ok(),
            "{s:?}"
        );
        (s.state, s.exit_code, s.reason)
    }

    #[tokio::test(start_paused = true)]
    async fn containers_follow_the_cri_state_machine_and_their_scripts() {
        let rt = MemoryRuntime::new(3, Arc::new(RealClock));
        let config = sandbox_config(&[
            ("hollow.kubelet-rs.io/exit-after.crash", "2"),
            ("hollow.kubelet-rs.io/exit-code.crash", "3"),
        ]);
        let sb = rt.run_pod_sandbox(&config, "").await.unwrap();
        let status = rt
            .pod_sandbox_status(&sb, false)
            .await
            .unwrap()
            .status
            .unwrap();
        assert!(crate::cri::verify::verify_sandbox_status(&status).is_ok());
        assert_eq!(status.network.unwrap().ip, "10.64.3.1");

        let app = rt
            .create_container(&sb, &container_config("app"), &config)
            .await
            .unwrap();
        let crash = rt
            .create_container(&sb, &container_config("crash"), &config)
            .await
            .unwrap();
        let (created, running, exited) = (
            api::ContainerState::ContainerCreated as i32,
            api::ContainerState::ContainerRunning as i32,
            api::ContainerState::ContainerExited as i32,
        );
        assert_eq!(state_of(&rt, &app).await.0, created);
        rt.start_container(&app).await.unwrap();
        rt.start_container(&crash).await.unwrap();
        assert!(rt.start_container(&app).await.is_err(), "started twice");
        // (after, app, crash)
        let steps = [
            (0, (running, 0, ""), (running, 0, "")),
            (2, (running, 0, ""), (exited, 3, "Error")),
        ];
        for (secs, want_app, want_crash) in steps {
            tokio::time::advance(Duration::from_secs(secs)).await;
            let (a, c) = (state_of(&rt, &app).await, state_of(&rt, &crash).await);
            assert_eq!((a.0, a.1, a.2.as_str()), want_app, "app at +{secs}s");
            assert_eq!((c.0, c.1, c.2.as_str()), want_crash, "crash at +{secs}s");
        }
        let running_filter = api::ContainerFilter {
            state: Some(api::ContainerStateValue { state: running }),
            ..Default::default()
        };
        let listed = rt.list_containers(Some(running_filter)).await.unwrap();
        assert_eq!(
            listed.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
            vec![app.clone()]
        );

        // Stopping the sandbox ends its containers; removing it, everything.
        rt.stop_pod_sandbox(&sb).await.unwrap();
        assert_eq!(state_of(&rt, &app).await.0, exited);
        let sandboxes = rt.list_pod_sandbox(None).await.unwrap();
        assert_eq!(
            sandboxes[0].state,
            api::PodSandboxState::SandboxNotready as i32
        );
        rt.remove_pod_sandbox(&sb).await.unwrap();
        assert_eq!(rt.counts(), (0, 0));
        assert!(matches!(
            rt.container_status(&app, false).await,
            Err(crate::cri::CriError::NotFound { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn exec_commands_follow_the_probe_script() {
        let rt = MemoryRuntime::new(0, Arc::new(RealClock));
        let config = sandbox_config(&[
            ("hollow.kubelet-rs.io/probe-pass-after.app", "5"),
            ("hollow.kubelet-rs.io/probe-fail-after.app", "10"),
        ]);
        let sb = rt.run_pod_sandbox(&config, "").await.unwrap();
        let app = rt
            .create_container(&sb, &container_config("app"), &config)
            .await
            .unwrap();
        let other = rt
            .create_container(&sb, &container_config("other"), &config)
            .await
            .unwrap();
        rt.start_container(&app).await.unwrap();
        rt.start_container(&other).await.unwrap();
        let cmd = ["cat".to_string(), "/tmp/healthy".to_string()];
        // (seconds since start, app's exec passes)
        let steps = [(0, false), (5, true), (9, true), (10, false)];
        let mut at = 0;
        for (secs, want) in steps {
            tokio::time::advance(Duration::from_secs(secs - at)).await;
            at = secs;
            let got = rt.exec_sync(&app, &cmd, Duration::from_secs(1)).await;
            match (&got, want) {
                (Ok(_), true) => {}
                (Err(crate::cri::CriError::ExitCode { code, cmd: c, .. }), false) => {
                    assert_eq!(*code, 1, "+{secs}s");
                    assert_eq!(c, "cat /tmp/healthy");
                }
                _ => panic!("+{secs}s: {got:?}, want pass={want}"),
            }
            // An unscripted container's commands always pass.
            assert!(
                rt.exec_sync(&other, &cmd, Duration::from_secs(1))
                    .await
                    .is_ok()
            );
        }
    }

    #[tokio::test]
    async fn a_container_without_an_image_is_refused() {
        let rt = MemoryRuntime::new(0, Arc::new(RealClock));
        let config = sandbox_config(&[]);
        let sb = rt.run_pod_sandbox(&config, "").await.unwrap();
        let mut c = container_config("app");
        c.image = Some(api::ImageSpec::default());
        let err = rt.create_container(&sb, &c, &config).await.unwrap_err();
        assert!(err.to_string().contains("names no image"), "{err}");
        assert_eq!(rt.counts(), (1, 0));
    }
}
