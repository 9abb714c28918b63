//! syncPod / syncTerminatingPod / syncTerminatedPod over fakes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodStatus as ApiStatus;
use tokio_util::sync::CancellationToken;

use crate::kubelet::container::{PodSyncResult, SyncAction, SyncError, SyncResult};
use crate::kubelet::pod_workers::{PodSyncError, PodSyncHandler};
use crate::kubelet::sync_loop::testing::{Stack, static_pod};
use crate::kubelet::types::SyncPodType;

fn token() -> CancellationToken {
    CancellationToken::new()
}

async fn runtime_status(stack: &Stack, uid: &str) -> crate::kubelet::container::PodStatus {
    use crate::kubelet::container::Runtime;
    stack.runtime.get_pod_status(uid, "", "").await.unwrap()
}

#[tokio::test]
async fn sync_creates_cgroup_dirs_volumes_probes_then_runs_the_pod() {
    let stack = Stack::new(true);
    let pod = static_pod("p1", &["app"]);
    let status = runtime_status(&stack, "p1").await;
    let terminal = stack
        .syncer
        .sync_pod(&token(), SyncPodType::Create, &pod, None, status)
        .await
        .expect("synced");
    assert!(!terminal);
    assert!(stack.pcm.cgroups.lock().unwrap().contains("p1"));
    assert_eq!(*stack.cm.qos_updates.lock().unwrap(), 1);
    for dir in ["pods/p1", "pods/p1/volumes", "pods/p1/plugins"] {
        let meta = std::fs::metadata(stack.root.path().join(dir)).expect(dir);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o750, "{dir}");
    }
    assert_eq!(*stack.volumes.mounted.lock().unwrap(), vec!["p1"]);
    assert_eq!(*stack.probes.calls.lock().unwrap(), vec!["add p1"]);
    assert_eq!(stack.runtime.calls(), vec!["sync p1"]);
    let api = stack.status_manager.get_pod_status("p1").unwrap();
    assert_eq!(
        api.phase.as_deref(),
        Some("Pending"),
        "status from before the sync"
    );

    // Next sync sees the running container.
    let status = runtime_status(&stack, "p1").await;
    stack
        .syncer
        .sync_pod(&token(), SyncPodType::Sync, &pod, None, status)
        .await
        .unwrap();
    let api = stack.status_manager.get_pod_status("p1").unwrap();
    assert_eq!(api.phase.as_deref(), Some("Running"));
    assert_eq!(api.pod_ip.as_deref(), Some("10.0.0.2"));
    assert_eq!(*stack.cm.qos_updates.lock().unwrap(), 1, "cgroup existed");
}

#[tokio::test]
async fn back_offs_are_status_reasons_and_other_failures_are_errors() {
    let stack = Stack::new(true);
    let pod = static_pod("p2", &["app"]);
    let mut backoff = PodSyncResult::default();
    backoff.add(SyncResult::fail(
        SyncAction::StartContainer,
        "app",
        SyncError::new(
            "CrashLoopBackOff",
            "back-off 10s restarting failed container=app pod=p2-node_default(p2)",
        ),
    ));
    stack.runtime.sync_results.lock().unwrap().push(backoff);
    stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Create,
            &pod,
            None,
            runtime_status(&stack, "p2").await,
        )
        .await
        .expect("a back-off is not a sync error");
    let api = stack
        .syncer
        .generator
        .generate(&pod, &runtime_status(&stack, "p2").await);
    let waiting = api.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));

    let mut pull = PodSyncResult::default();
    pull.add(SyncResult::fail(
        SyncAction::StartContainer,
        "app",
        SyncError::new("ErrImagePull", "rpc error: not found"),
    ));
    stack.runtime.sync_results.lock().unwrap().push(pull);
    let err = stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Sync,
            &pod,
            None,
            runtime_status(&stack, "p2").await,
        )
        .await
        .expect_err("a failed pull is an error");
    let PodSyncError::Runtime(failure) = &err else {
        panic!("a runtime failure, not {err:?}");
    };
    assert_eq!(failure.reasons().collect::<Vec<_>>(), ["ErrImagePull"]);
    assert_eq!(
        err.to_string(),
        "failed to \"StartContainer\" for \"app\" with ErrImagePull: \"rpc error: not found\""
    );
}

#[tokio::test]
async fn network_not_ready_waits_unless_host_network() {
    let stack = Stack::new(true);
    stack
        .runtime_state
        .set_network_state(Some("cni config uninitialized".into()));
    let pod = static_pod("p3", &["app"]);
    let err = stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Create,
            &pod,
            None,
            runtime_status(&stack, "p3").await,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PodSyncError::NetworkNotReady(m) if m == "cni config uninitialized"),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("network is not ready: "));
    assert_eq!(stack.events.reasons(), vec!["NetworkNotReady"]);
    let mut host = (*static_pod("p4", &["app"])).clone();
    host.spec.as_mut().unwrap().host_network = Some(true);
    stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Create,
            &Arc::new(host),
            None,
            runtime_status(&stack, "p4").await,
        )
        .await
        .expect("host network pods do not wait");
}

#[tokio::test]
async fn a_pod_that_may_not_run_is_stopped_and_kept_pending() {
    let stack = Stack::new(false);
    let mut pod = (*static_pod("p5", &["app"])).clone();
    pod.metadata.annotations.as_mut().unwrap().insert(
        "container.apparmor.security.beta.kubernetes.io/app".into(),
        "runtime/default".into(),
    );
    let pod = Arc::new(pod);
    stack.runtime.add_running("p5", "p5-node");
    let err = stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Create,
            &pod,
            None,
            runtime_status(&stack, "p5").await,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod cannot be run: Cannot enforce AppArmor: AppArmor is not enabled on the host"
    );
    assert_eq!(stack.runtime.calls(), vec!["kill p5"]);
    let api = stack.status_manager.get_pod_status("p5").unwrap();
    assert_eq!(api.phase.as_deref(), Some("Pending"));
    assert_eq!(api.reason.as_deref(), Some("AppArmor"));
}

#[tokio::test]
async fn a_terminal_pod_reports_terminal_without_touching_the_runtime() {
    let stack = Stack::new(true);
    let mut pod = (*static_pod("p6", &["app"])).clone();
    pod.status = Some(ApiStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    let terminal = stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Sync,
            &Arc::new(pod),
            None,
            runtime_status(&stack, "p6").await,
        )
        .await
        .unwrap();
    assert!(terminal);
    assert!(stack.runtime.calls().is_empty());
}

#[tokio::test]
async fn terminating_kills_within_the_grace_period_and_terminated_cleans_up() {
    let stack = Stack::new(true);
    let pod = static_pod("p7", &["app"]);
    stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Create,
            &pod,
            None,
            runtime_status(&stack, "p7").await,
        )
        .await
        .unwrap();
    let status_fn: crate::kubelet::pod_workers::PodStatusFn = Arc::new(|s| {
        s.reason = Some("Evicted".into());
    });
    stack
        .syncer
        .sync_terminating_pod(
            &token(),
            &pod,
            runtime_status(&stack, "p7").await,
            None,
            Some(12),
            Some(status_fn),
        )
        .await
        .expect("terminated");
    assert_eq!(*stack.runtime.kill_grace.lock().unwrap(), vec![Some(12)]);
    assert_eq!(
        *stack.probes.calls.lock().unwrap(),
        vec!["add p7", "stop p7", "remove p7"]
    );
    let api = stack.status_manager.get_pod_status("p7").unwrap();
    assert_eq!(api.reason.as_deref(), Some("Evicted"));
    let state = api.container_statuses.unwrap()[0].state.clone().unwrap();
    assert_eq!(state.terminated.unwrap().exit_code, 137);

    stack.volumes.existing.lock().unwrap().insert("p7".into());
    stack
        .syncer
        .sync_terminated_pod(&token(), &pod, runtime_status(&stack, "p7").await)
        .await
        .expect("cleaned up");
    assert_eq!(*stack.volumes.unmounted.lock().unwrap(), vec!["p7"]);
    assert_eq!(*stack.pcm.destroyed.lock().unwrap(), vec!["p7"]);
    assert!(!stack.pcm.cgroups.lock().unwrap().contains("p7"));
}

#[tokio::test]
async fn orphans_are_killed_from_their_runtime_view() {
    let stack = Stack::new(true);
    stack.runtime.add_running("orphan", "gone");
    use crate::kubelet::container::Runtime;
    let running = stack.runtime.get_pods(false).await.unwrap().remove(0);
    let pod = Arc::new(crate::kubelet::pod_workers::running_pod_to_api_pod(
        &running,
    ));
    stack
        .syncer
        .sync_terminating_pod(
            &token(),
            &pod,
            Default::default(),
            Some(&running),
            Some(1),
            None,
        )
        .await
        .unwrap();
    assert_eq!(stack.runtime.calls(), vec!["kill orphan"]);
    assert!(
        stack.status_manager.get_pod_status("orphan").is_none(),
        "orphans have no status"
    );
}

#[tokio::test]
async fn static_pods_get_their_mirror_pod_in_sync_and_api_pods_do_not() {
    let stack = Stack::new(true);
    let pod = static_pod("s1", &["app"]);
    let status = runtime_status(&stack, "s1").await;
    stack
        .syncer
        .sync_pod(&token(), SyncPodType::Create, &pod, None, status)
        .await
        .unwrap();
    let mirror = Arc::new(crate::kubelet::pod::mirror_pod_for(
        &pod, "node", "node-uid",
    ));
    let status = runtime_status(&stack, "s1").await;
    stack
        .syncer
        .sync_pod(&token(), SyncPodType::Sync, &pod, Some(&mirror), status)
        .await
        .unwrap();
    let mut api_pod = (*static_pod("a1", &["app"])).clone();
    api_pod.metadata.annotations = None;
    let status = runtime_status(&stack, "a1").await;
    stack
        .syncer
        .sync_pod(
            &token(),
            SyncPodType::Create,
            &Arc::new(api_pod),
            None,
            status,
        )
        .await
        .unwrap();
    assert_eq!(
        *stack.mirrors.calls.lock().unwrap(),
        vec!["create s1", "replace s1"],
        "only the static pod, with the mirror it has"
    );
}
