//! The sync loop end to end over fakes: config updates, admission, PLEG
//! events, probes, housekeeping, the runtime gate.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use super::testing::{Stack, admission_node, container, eventually, static_pod};
use super::*;
use crate::kubelet::config::{PodConfig, SourceSender};
use crate::kubelet::container::{ContainerId, ContainerState};
use crate::kubelet::pleg::event_stream;
use crate::kubelet::pleg::events::EventSender;
use crate::kubelet::prober::results::{ProbeResult, ResultUpdate};
use crate::util::clock::RealClock;
use crate::util::lifecycle::TaskSet;

struct Loop {
    stack: Stack,
    file: SourceSender,
    pleg: EventSender,
    liveness: mpsc::UnboundedSender<ResultUpdate>,
    readiness: mpsc::UnboundedSender<ResultUpdate>,
    monitor: SyncLoopMonitor,
    tasks: TaskSet,
    _config: PodConfig,
}

async fn start(max_pods: i64, runtime_ready: bool) -> Loop {
    let (config, updates) = PodConfig::new(Arc::new(RealClock));
    let file = config.channel("file");
    let mut stack = Stack::with(true, admission_node(max_pods), config.sources_ready());
    if !runtime_ready {
        stack
            .runtime_state
            .set_runtime_state(Some("container runtime not ready: <nil>".into()));
    }
    let (pleg, pleg_events) = event_stream();
    let (liveness, liveness_rx) = mpsc::unbounded_channel();
    let (readiness, readiness_rx) = mpsc::unbounded_channel();
    let (_startup, startup_rx) = mpsc::unbounded_channel();
    let tasks = TaskSet::new();
    stack.start_workers(&tasks);
    stack.start_fake_pleg(&tasks, Some(pleg.clone()));
    let sync_loop = stack.sync_loop.take().expect("workers started");
    let monitor = sync_loop.monitor.clone();
    let inputs = SyncLoopInputs {
        updates,
        pleg: pleg_events,
        probes: ProbeUpdates {
            liveness: liveness_rx,
            readiness: readiness_rx,
            startup: startup_rx,
        },
    };
    sync_loop.spawn(&tasks, inputs, ());
    Loop {
        stack,
        file,
        pleg,
        liveness,
        readiness,
        monitor,
        tasks,
        _config: config,
    }
}

impl Loop {
    fn phase(&self, uid: &str) -> Option<String> {
        self.stack
            .status_manager
            .get_pod_status(uid)
            .and_then(|s| s.phase)
    }

    fn set(&self, pods: &[Arc<Pod>]) {
        self.file.set(pods.iter().map(|p| (**p).clone()).collect());
    }

    async fn stop(self) {
        self.tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(5))
            .await
            .expect("every task stops");
    }
}

#[tokio::test(start_paused = true)]
async fn added_pods_run_and_a_pod_over_max_pods_is_rejected() {
    let l = start(1, true).await;
    let a = static_pod("a", &["app"]);
    let b = static_pod("b", &["app"]);
    l.set(std::slice::from_ref(&a));
    eventually("a running", || l.phase("a").as_deref() == Some("Running")).await;
    l.set(&[a.clone(), b.clone()]);
    eventually("b rejected", || l.phase("b").as_deref() == Some("Failed")).await;
    let status = l.stack.status_manager.get_pod_status("b").unwrap();
    // Static pods are critical: admission tries to preempt for them and
    // finds nothing it may preempt (as the Go kubelet does).
    assert_eq!(status.reason.as_deref(), Some("UnexpectedAdmissionError"));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Pod Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: pods, q: 1), ]"
        )
    );
    assert!(!l.stack.runtime.calls().contains(&"sync b".to_string()));
    assert!(
        l.stack
            .events
            .reasons()
            .contains(&"UnexpectedAdmissionError".to_string())
    );
    assert!(l.monitor.latest().is_some());
    l.stop().await;
}

#[tokio::test(start_paused = true)]
async fn removed_pods_are_killed_with_their_grace_period_and_cleaned_up() {
    let l = start(10, true).await;
    let a = static_pod("a", &["app"]);
    l.set(std::slice::from_ref(&a));
    eventually("a running", || l.phase("a").as_deref() == Some("Running")).await;
    l.set(&[]);
    eventually("a cleaned", || {
        l.stack
            .pcm
            .destroyed
            .lock()
            .unwrap()
            .contains(&"a".to_string())
    })
    .await;
    assert_eq!(*l.stack.runtime.kill_grace.lock().unwrap(), vec![Some(30)]);
    assert_eq!(*l.stack.volumes.unmounted.lock().unwrap(), vec!["a"]);
    assert!(l.stack.workers.is_pod_known_terminated("a"));
    // Housekeeping forgets the worker and the status once the pod is gone.
    eventually("worker forgotten", || {
        l.stack.workers.known_pods().is_empty()
    })
    .await;
    eventually("status dropped", || {
        l.stack.status_manager.get_pod_status("a").is_none()
    })
    .await;
    l.stop().await;
}

#[tokio::test(start_paused = true)]
async fn housekeeping_kills_orphaned_runtime_pods_and_their_cgroups() {
    let l = start(10, true).await;
    l.stack.runtime.add_running("orphan", "gone");
    l.stack.pcm.cgroups.lock().unwrap().insert("orphan".into());
    l.set(&[]);
    eventually("orphan killed", || {
        l.stack.runtime.calls().contains(&"kill orphan".to_string())
    })
    .await;
    assert_eq!(*l.stack.runtime.kill_grace.lock().unwrap(), vec![Some(1)]);
    eventually("orphan cgroup removed", || {
        l.stack
            .pcm
            .destroyed
            .lock()
            .unwrap()
            .contains(&"orphan".to_string())
    })
    .await;
    l.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_dead_container_prunes_its_older_instances() {
    let l = start(10, true).await;
    let a = static_pod("a", &["app"]);
    l.set(std::slice::from_ref(&a));
    eventually("a running", || l.phase("a").as_deref() == Some("Running")).await;
    {
        let mut pods = l.stack.runtime.pods.lock().unwrap();
        let p = pods.get_mut("a").unwrap();
        let mut old = container("app", "old", ContainerState::Exited);
        old.created_at = Some(SystemTime::UNIX_EPOCH);
        let mut newer = container("app", "newer", ContainerState::Exited);
        newer.created_at = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(5));
        p.container_statuses.push(old);
        p.container_statuses.push(newer);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    l.pleg.send(crate::kubelet::pleg::PodLifecycleEvent {
        id: "a".into(),
        event_type: crate::kubelet::pleg::PodLifecycleEventType::ContainerDied,
        data: "newer".into(),
    });
    eventually("old deleted", || {
        *l.stack.runtime.deleted.lock().unwrap() == vec!["old"]
    })
    .await;
    l.stop().await;
}

#[tokio::test(start_paused = true)]
async fn probe_results_update_readiness_and_trigger_syncs() {
    let l = start(10, true).await;
    let a = static_pod("a", &["app"]);
    l.set(std::slice::from_ref(&a));
    eventually("a running", || l.phase("a").as_deref() == Some("Running")).await;
    let id = ContainerId::new("fake", "a-app");
    l.stack
        .probes
        .unready
        .lock()
        .unwrap()
        .insert(id.to_string());
    l.readiness
        .send(ResultUpdate {
            container_id: id.clone(),
            result: ProbeResult::Failure,
            pod_uid: "a".into(),
        })
        .unwrap();
    eventually("not ready", || {
        l.stack
            .status_manager
            .get_pod_status("a")
            .and_then(|s| s.container_statuses)
            .is_some_and(|c| !c[0].ready)
    })
    .await;
    let syncs = || {
        l.stack
            .runtime
            .calls()
            .iter()
            .filter(|c| *c == "sync a")
            .count()
    };
    let before = syncs();
    l.liveness
        .send(ResultUpdate {
            container_id: id,
            result: ProbeResult::Failure,
            pod_uid: "a".into(),
        })
        .unwrap();
    eventually("liveness failure syncs the pod", || syncs() > before).await;
    l.stop().await;
}

#[tokio::test(start_paused = true)]
async fn nothing_syncs_while_the_runtime_is_not_ready() {
    let l = start(10, false).await;
    l.set(&[static_pod("a", &["app"])]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(l.stack.runtime.calls().is_empty());
    assert!(l.monitor.latest().is_none());
    l.stack.runtime_state.set_runtime_state(None);
    eventually("a running", || l.phase("a").as_deref() == Some("Running")).await;
    l.stop().await;
}

/// The syncloop check allows max(2 × syncFrequency, 5 min) of monotonic
/// time since the loop's last iteration, whatever the wall clock does.
#[tokio::test(start_paused = true)]
async fn syncloop_health_threshold_ignores_wall_clock_jumps() {
    use crate::util::clock::Clock;
    use crate::util::clock::testing::JumpClock;
    // (wall-clock step, resync interval, seconds after the last iteration, healthy)
    let cases = [
        (0, 60, 299, true),
        (0, 60, 301, false),
        (0, 200, 301, true),
        (3600, 60, 0, true),
        (3600, 60, 299, true),
        (3600, 60, 301, false),
        (-3600, 60, 299, true),
        (-3600, 60, 301, false),
    ];
    for (jump, resync, after, healthy) in cases {
        let clock = JumpClock::at_a_fixed_date();
        let m = SyncLoopMonitor::default();
        let resync = Duration::from_secs(resync);
        assert!(
            m.check(clock.monotonic(), resync).is_ok(),
            "not started yet"
        );
        m.store(clock.monotonic());
        clock.jump(jump);
        tokio::time::advance(Duration::from_secs(after)).await;
        let got = m.check(clock.monotonic(), resync);
        assert_eq!(got.is_ok(), healthy, "jump {jump} s, {after} s later");
        if !healthy {
            assert_eq!(got.unwrap_err(), "sync Loop took longer than expected");
        }
    }
}
