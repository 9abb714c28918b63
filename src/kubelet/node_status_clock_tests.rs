//! Node status reports across wall-clock steps (paused tokio time, a fake
//! API server, the hollow node's described machine and no-op container
//! manager). Go decides whether a report is due with
//! `now.Before(lastStatusReportTime.Add(nodeStatusReportFrequency))` on
//! `clock.Now()` readings, which compare on the monotonic clock: a step of
//! the wall clock neither stops reports (a step back) nor makes every round
//! a report (a step forward). Each report's heartbeat is the wall time of
//! its moment.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;
use crate::apis::config::flags::KubeletFlags;
use crate::apis::config::types::KubeletConfiguration;
use crate::cadvisor::{MachineInfoProvider, MachineSpec, StaticMachine};
use crate::cm::NodeConfig;
use crate::cm::noop::NoopContainerManager;
use crate::features::FeatureGate;
use crate::kubelet::client::testing::{Answer, fake_client};
use crate::kubelet::container::{Image, RuntimeStatus};
use crate::kubelet::events::LoggingRecorder;
use crate::kubelet::nodestatus::{
    NoPressure, NoVolumes, RuntimeInfo, RuntimeInfoError, RuntimeState,
};
use crate::util::clock::testing::JumpClock;

const NODE: &str = "n1";

/// A runtime that answers and has no images.
struct QuietRuntime;

#[async_trait::async_trait]
impl RuntimeInfo for QuietRuntime {
    fn runtime_type(&self) -> String {
        "fake".into()
    }
    async fn version(&self) -> Result<String, RuntimeInfoError> {
        Ok("fake://1".into())
    }
    async fn status(&self) -> Result<RuntimeStatus, RuntimeInfoError> {
        Ok(RuntimeStatus::default())
    }
    async fn list_images(&self) -> Result<Vec<Image>, RuntimeInfoError> {
        Ok(vec![])
    }
    async fn update_pod_cidr(&self, _cidr: &str) -> Result<(), RuntimeInfoError> {
        Ok(())
    }
}

/// One status PATCH: when (monotonic), and the Ready heartbeat it carried.
#[derive(Debug, Clone)]
struct Report {
    at: tokio::time::Instant,
    heartbeat: Option<String>,
}

/// One Node; records every status PATCH.
#[derive(Clone, Default)]
struct FakeApi {
    node: Arc<Mutex<Value>>,
    reports: Arc<Mutex<Vec<Report>>>,
}

impl Answer for FakeApi {
    fn answer(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        let node = self.node.lock().unwrap().clone();
        match (method, path) {
            ("GET", p) if p == format!("/api/v1/nodes/{NODE}") => (200, node),
            ("PATCH", p) if p == format!("/api/v1/nodes/{NODE}/status") => {
                let patch: Value = serde_json::from_slice(body).unwrap();
                let heartbeat = patch["status"]["conditions"]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                    .and_then(|c| c["lastHeartbeatTime"].as_str())
                    .map(str::to_string);
                self.reports.lock().unwrap().push(Report {
                    at: tokio::time::Instant::now(),
                    heartbeat,
                });
                (200, node)
            }
            _ => (
                404,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404}),
            ),
        }
    }
}

fn client(api: FakeApi) -> kube::Client {
    fake_client(api)
}

async fn manager(clock: Arc<JumpClock>, api: &FakeApi) -> Arc<NodeStatusManager> {
    let server = KubeletServer::new(
        KubeletFlags::default(),
        KubeletConfiguration::v1beta1_defaults(),
        FeatureGate::new(),
    );
    // A hostname that is an IP: the address without a lookup.
    let mut params = NodeStatusParams::from_server(&server, NODE, "10.0.0.1").unwrap();
    params.register_node = false;
    params.update_frequency = Duration::from_secs(10);
    params.report_frequency = Duration::from_secs(60);
    let machine = StaticMachine::new(&MachineSpec::default(), NODE);
    let cm = NoopContainerManager::new(
        NodeConfig::default(),
        machine.machine_info().unwrap(),
        &machine.fs_info(std::path::Path::new("/")).unwrap(),
    );
    let sources = StatusSources::new(
        Arc::new(cm),
        Arc::new(machine),
        Arc::new(QuietRuntime),
        Arc::new(RuntimeState::new(clock.clone())),
        Arc::new(NoPressure),
        Arc::new(NoVolumes),
        clock.clone(),
    );
    let c = client(api.clone());
    let m = NodeStatusManager::new(
        params,
        NodeStatusDeps {
            client: c.clone(),
            heartbeat_client: c,
            sources,
            recorder: Arc::new(LoggingRecorder),
            on_heartbeat_failure: None,
            reset_extended_resources: false,
            clock,
        },
    );
    // The API holds the Node as this kubelet would report it now.
    let mut node = serde_json::to_value(m.initial_node().await).unwrap();
    node["metadata"]["resourceVersion"] = json!("1");
    *api.node.lock().unwrap() = node;
    m
}

fn rfc3339_secs(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .unwrap()
        .round(jiff::Unit::Second)
        .unwrap()
        .to_string()
}

/// Status rounds every 10 s for 180 s with a 60 s report frequency and
/// an unchanged status: reports at 0, 60, 120 and 180 s whatever steps the
/// wall clock takes in between, each with the wall time of its moment as
/// the Ready heartbeat.
#[tokio::test(start_paused = true)]
async fn reports_stay_on_the_monotonic_schedule_across_wall_clock_jumps() {
    // Wall-clock steps (seconds) before the given rounds.
    let cases: [&[(usize, i64)]; 5] = [
        &[],
        &[(3, 3600)],
        &[(3, -3600)],
        &[(3, 3600), (9, -7200), (14, 3600)],
        &[(6, -3600), (12, 3600)],
    ];
    for steps in cases {
        let clock = JumpClock::at_a_fixed_date();
        let api = FakeApi::default();
        let m = manager(clock.clone(), &api).await;
        // The Node in the API was reported 10 s ago.
        tokio::time::advance(Duration::from_secs(10)).await;
        let start = tokio::time::Instant::now();
        let mut walls = Vec::new();
        for round in 0..=18 {
            if let Some((_, jump)) = steps.iter().find(|(r, _)| *r == round) {
                clock.jump(*jump);
            }
            walls.push(clock.now());
            m.update_node_status().await.unwrap();
            tokio::time::advance(Duration::from_secs(10)).await;
        }
        let reports = api.reports.lock().unwrap().clone();
        let rounds: Vec<u64> = reports
            .iter()
            .map(|r| (r.at - start).as_secs() / 10)
            .collect();
        assert_eq!(rounds, vec![0, 6, 12, 18], "steps {steps:?}");
        for (r, round) in reports.iter().zip(rounds) {
            assert_eq!(
                r.heartbeat.as_deref(),
                Some(rfc3339_secs(walls[round as usize]).as_str()),
                "steps {steps:?}: the heartbeat of round {round}"
            );
        }
    }
}
