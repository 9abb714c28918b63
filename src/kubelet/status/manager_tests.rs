//! Status manager behaviour: versions, transition times, start time,
//! illegal transitions, readiness and termination.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    Pod, PodCondition, PodSpec,
};

use super::conditions::{CONTAINERS_READY, POD_READY};
use super::generate::ApiPodStatus;
use super::generate_tests::TestClock;
use super::manager::*;
use crate::kubelet::container::ContainerId;
use crate::kubelet::pod::PodManager;

fn pod(uid: &str, policy: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.uid = Some(uid.into());
    p.metadata.name = Some(uid.into());
    p.metadata.namespace = Some("default".into());
    p.spec = Some(PodSpec {
        restart_policy: Some(policy.into()),
        containers: vec![Container {
            name: "app".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

fn cond(t: &str, status: &str) -> PodCondition {
    PodCondition {
        type_: t.into(),
        status: status.into(),
        ..Default::default()
    }
}

fn status(phase: &str, app: ContainerState, ready: &str) -> ApiPodStatus {
    ApiPodStatus {
        phase: Some(phase.into()),
        container_statuses: Some(vec![ContainerStatus {
            name: "app".into(),
            container_id: Some("containerd://c1".into()),
            state: Some(app),
            ..Default::default()
        }]),
        conditions: Some(vec![cond(POD_READY, ready), cond(CONTAINERS_READY, ready)]),
        ..Default::default()
    }
}

fn running() -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning::default()),
        ..Default::default()
    }
}

fn exited(code: i32) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn setup() -> (Arc<TestClock>, Arc<PodManager>, StatusManager) {
    let clock = TestClock::at(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let pm = Arc::new(PodManager::new());
    let sm = StatusManager::new(pm.clone(), clock.clone());
    (clock, pm, sm)
}

fn ready_time(sm: &StatusManager, uid: &str) -> SystemTime {
    let s = sm.get_pod_status(uid).unwrap();
    let c = s
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == POD_READY)
        .unwrap();
    c.last_transition_time.unwrap().0.into()
}

#[test]
fn versions_transition_times_and_start_time() {
    let (clock, _pm, sm) = setup();
    let p = pod("a", "Always");
    let mut rx = sm.subscribe();
    sm.set_pod_status(&p, status("Pending", running(), "False"));
    let t0 = ready_time(&sm, "a");
    let v1 = sm.get_versioned("a").unwrap();
    assert_eq!(v1.version, 1);
    let start = v1.status.start_time.clone().unwrap();

    clock.advance(Duration::from_secs(5));
    sm.set_pod_status(&p, status("Pending", running(), "False"));
    assert_eq!(
        sm.get_versioned("a").unwrap().version,
        1,
        "same status is no change"
    );

    sm.set_pod_status(&p, status("Running", running(), "False"));
    assert_eq!(sm.get_versioned("a").unwrap().version, 2);
    assert_eq!(ready_time(&sm, "a"), t0, "Ready kept its status: time kept");

    clock.advance(Duration::from_secs(5));
    sm.set_pod_status(&p, status("Running", running(), "True"));
    let t2 = ready_time(&sm, "a");
    assert_eq!(t2, t0 + Duration::from_secs(10));
    let v3 = sm.get_versioned("a").unwrap();
    assert_eq!(v3.version, 3);
    assert_eq!(v3.status.start_time, Some(start), "start time never moves");

    let versions: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok())
        .map(|u| u.status.version)
        .collect();
    assert_eq!(versions, vec![1, 2, 3]);
}

#[test]
fn terminated_containers_do_not_restart_under_never_and_phases_do_not_regress() {
    let (_clock, _pm, sm) = setup();
    let p = pod("b", "Never");
    sm.set_pod_status(&p, status("Succeeded", exited(0), "False"));
    sm.set_pod_status(&p, status("Running", running(), "True"));
    let s = sm.get_pod_status("b").unwrap();
    assert_eq!(
        s.phase.as_deref(),
        Some("Succeeded"),
        "illegal update aborted"
    );

    let q = pod("c", "OnFailure");
    sm.set_pod_status(&q, status("Running", exited(1), "False"));
    sm.set_pod_status(&q, status("Running", running(), "True"));
    assert!(
        sm.get_pod_status("c").unwrap().container_statuses.unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some(),
        "a failed container may restart under OnFailure"
    );

    let r = pod("d", "Always");
    sm.set_pod_status(&r, status("Failed", exited(1), "False"));
    sm.set_pod_status(&r, status("Running", running(), "False"));
    assert_eq!(
        sm.get_pod_status("d").unwrap().phase.as_deref(),
        Some("Failed"),
        "terminal phases never regress"
    );
}

#[test]
fn readiness_updates_the_container_and_conditions() {
    let (_clock, pm, sm) = setup();
    let p = pod("e", "Always");
    pm.add_pod(Arc::new(p.clone()));
    sm.set_pod_status(&p, status("Running", running(), "False"));
    let id = ContainerId::new("containerd", "c1");
    sm.set_container_readiness("e", &id, true);
    let s = sm.get_pod_status("e").unwrap();
    assert!(s.container_statuses.as_ref().unwrap()[0].ready);
    let conds = s.conditions.unwrap();
    for t in [POD_READY, CONTAINERS_READY] {
        let c = conds.iter().find(|c| c.type_ == t).unwrap();
        assert_eq!(c.status, "True", "{t}");
    }
    sm.set_container_startup("e", &id, true);
    assert_eq!(
        sm.get_pod_status("e").unwrap().container_statuses.unwrap()[0].started,
        Some(true)
    );
    // Unknown pods and containers are ignored.
    sm.set_container_readiness("nope", &id, false);
    sm.set_container_readiness("e", &ContainerId::new("containerd", "zz"), false);
    assert_eq!(sm.get_versioned("e").unwrap().version, 3);
}

#[test]
fn terminate_pod_gives_every_container_a_terminal_state() {
    let (_clock, _pm, sm) = setup();
    let p = pod("f", "Always");
    sm.set_pod_status(&p, status("Running", running(), "True"));
    sm.terminate_pod(&p);
    let s = sm.get_pod_status("f").unwrap();
    let t = s.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(t.exit_code, 137);
    assert_eq!(t.reason.as_deref(), Some("ContainerStatusUnknown"));
    sm.remove_orphaned_statuses(&HashSet::new());
    assert!(sm.get_pod_status("f").is_none());
}

#[test]
fn normalize_truncates_messages_and_times() {
    let p = pod("g", "Always");
    let mut s = status("Running", exited(1), "False");
    let long = "x".repeat(MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH + 10);
    let t = s.container_statuses.as_mut().unwrap()[0]
        .state
        .as_mut()
        .unwrap()
        .terminated
        .as_mut()
        .unwrap();
    t.message = Some(long);
    t.finished_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::new(1_700_000_000, 123_456_789).unwrap(),
    ));
    normalize_status(&p, &mut s);
    let t = s.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(
        t.message.unwrap().len(),
        MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH
    );
    assert_eq!(t.finished_at.unwrap().0.subsec_nanosecond(), 0);
}
