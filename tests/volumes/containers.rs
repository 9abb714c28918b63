//! Real containers on a private containerd read what the volume manager
//! mounted, with the mounts the kubelet computes (run options and subPath
//! binds), and see a ConfigMap update through the `..data` swap.

use super::*;
use kubelet::cri::{RemoteRuntimeService, RuntimeService, api};
use kubelet::kubelet::kuberuntime::run_options::{
    RunOptionsParams, generate_run_container_options,
};
use kubelet::volume::subpath::prepare_subpath_mounts;
use support::containerd::{Containerd, images};
use support::cri_requests::{container, pod as cri_pod};

async fn exec(rt: &RemoteRuntimeService, id: &str, script: &str) -> Result<String, String> {
    rt.exec_sync(
        id,
        &["sh".to_string(), "-c".to_string(), script.to_string()],
        Duration::from_secs(10),
    )
    .await
    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_read_volumes_and_see_updates() {
    if !root_or_skip("containers_read_volumes_and_see_updates") {
        return;
    }
    let Some(rig) = Containerd::start("containers_read_volumes_and_see_updates") else {
        return;
    };
    let api = TestApi::start().await;
    let ns = api.create_namespace("ctr").await;
    let client = api.admin_client().await;
    let pp = PostParams::default();
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "cfg"}, "data": {"greeting": "hello"}})),
        )
        .await
        .unwrap();
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "sec"}, "data": {"password": "aHVudGVyMg=="}})),
        )
        .await
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let host_dir = tmp.path().join("host/data");
    let _guard = MountGuard(root.clone());
    let pod: Pod = obj(json!({
        "metadata": {"name": "reader", "labels": {"app": "reader"}},
        "spec": {
            "securityContext": {"fsGroup": 2000},
            "containers": [{"name": "c", "image": "busybox", "volumeMounts": [
                {"name": "cfg", "mountPath": "/cfg"},
                {"name": "cfg", "mountPath": "/sub/greeting", "subPath": "greeting"},
                {"name": "sec", "mountPath": "/sec"},
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "scratch", "mountPath": "/work", "subPath": "made/by/kubelet"},
                {"name": "host", "mountPath": "/host"},
                {"name": "info", "mountPath": "/info"},
                {"name": "scratch", "mountPath": "/per-pod", "subPathExpr": "$(POD_NAME)"}
            ]}],
            "volumes": [
                {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}},
                {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 256}},
                {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}},
                {"name": "host", "hostPath": {"path": host_dir.to_string_lossy(), "type": "DirectoryOrCreate"}},
                {"name": "info", "downwardAPI": {"defaultMode": 420, "items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
            ]
        }
    }));
    let pod = Arc::new(
        Api::<Pod>::namespaced(client.clone(), &ns)
            .create(&pp, &pod)
            .await
            .unwrap(),
    );
    let uid = pod.metadata.uid.clone().unwrap();
    let k = start_kubelet(&root, Some(client.clone()));
    k.pods.add_pod(pod.clone());
    k.vm.wait_for_attach_and_mount(&pod).await.expect("mounted");
    assert!(host_dir.is_dir(), "DirectoryOrCreate made the host path");
    std::fs::write(host_dir.join("file"), b"from the host").unwrap();

    // The kubelet's half of container creation: mounts, then subPath binds.
    let dirs = PodDirs::new(&root);
    let pod_dir = dirs.pod_dir(&uid);
    let volumes = k.vm.get_mounted_volumes_for_pod(&uid);
    let spec_container = &pod.spec.as_ref().unwrap().containers[0];
    let opts = generate_run_container_options(
        &pod,
        spec_container,
        RunOptionsParams {
            pod_dir: &pod_dir,
            pod_ips: &[],
            cluster_domain: "cluster.local",
            volumes: &volumes,
            base: Default::default(),
            block_devices: vec![],
            envs: vec![kubelet::kubelet::container::EnvVar::new(
                "POD_NAME", "reader",
            )],
            node_hosts: None,
        },
    )
    .expect("run options");
    let mounts = prepare_subpath_mounts(
        Arc::new(SystemMounter),
        pod_dir.clone(),
        "c".into(),
        opts.mounts,
    )
    .await
    .expect("subpaths");
    assert_eq!(
        mounts[1].host_path,
        pod_dir.join("volume-subpaths/cfg/c/1").to_string_lossy()
    );

    let rt = RemoteRuntimeService::connect(&rig.endpoint(), rig.timeout())
        .await
        .expect("connect");
    let sandbox_pod = cri_pod(&rig, "reader", &ns);
    let sandbox = rt
        .run_pod_sandbox(&sandbox_pod.config, "")
        .await
        .expect("RunPodSandbox");
    let mut config = container(&sandbox_pod, "c", &images().busybox, &["sleep", "3600"]);
    config.mounts = mounts
        .iter()
        .map(|m| api::Mount {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            readonly: m.read_only,
            selinux_relabel: false,
            propagation: m.propagation as i32,
        })
        .collect();
    let id = rt
        .create_container(&sandbox, &config, &sandbox_pod.config)
        .await
        .expect("CreateContainer");
    rt.start_container(&id).await.expect("StartContainer");

    let cases: &[(&str, Result<&str, ()>)] = &[
        ("cat /cfg/greeting", Ok("hello")),
        ("cat /sub/greeting", Ok("hello")),
        ("stat -L -c '%a %g' /cfg/greeting", Ok("644 2000")),
        ("cat /sec/password", Ok("hunter2")),
        ("stat -L -c '%a %g' /sec/password", Ok("440 2000")),
        ("cat /info/labels", Ok("app=\"reader\"")),
        ("cat /host/file", Ok("from the host")),
        (
            "grep ' /scratch ' /proc/mounts | cut -d' ' -f3",
            Ok("tmpfs"),
        ),
        ("echo data > /scratch/f && cat /scratch/f", Ok("data")),
        ("echo w > /work/f && cat /work/f", Ok("w")),
        ("echo e > /per-pod/f && cat /per-pod/f", Ok("e")),
        ("touch /cfg/new", Err(())),
        ("touch /sec/new", Err(())),
    ];
    for (script, want) in cases {
        let got = exec(&rt, &id, script).await;
        match want {
            Ok(w) => assert_eq!(got.as_deref(), Ok(*w), "{script}"),
            Err(()) => assert!(got.is_err(), "{script} should fail: {got:?}"),
        }
    }
    let scratch = vol(&root, &uid, "empty-dir", "scratch");
    assert_eq!(
        std::fs::read(scratch.join("made/by/kubelet/f")).unwrap(),
        b"w\n"
    );

    // An update reaches the running container atomically.
    let before = exec(&rt, &id, "readlink /cfg/..data").await.unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .replace(
            "cfg",
            &pp,
            &obj(json!({"metadata": {"name": "cfg", "namespace": ns}, "data": {"greeting": "bonjour"}})),
        )
        .await
        .unwrap();
    k.vm.wait_for_attach_and_mount(&pod).await.expect("resync");
    let mut seen = String::new();
    for _ in 0..100 {
        // The content, the link it came through and the versions present.
        seen = exec(
            &rt,
            &id,
            "echo $(cat /cfg/greeting) $(readlink /cfg/..data) $(ls -d /cfg/..20* | wc -l)",
        )
        .await
        .unwrap();
        if seen.starts_with("bonjour ") && seen.ends_with(" 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let parts: Vec<&str> = seen.split(' ').collect();
    assert_eq!(parts.len(), 3, "{seen}");
    assert_eq!(parts[0], "bonjour");
    assert_ne!(parts[1], before, "..data was swapped");
    assert_eq!(parts[2], "1", "the old version is gone");
    // subPath mounts pin the file they bound, as with the Go kubelet.
    assert_eq!(
        exec(&rt, &id, "cat /sub/greeting").await.as_deref(),
        Ok("hello")
    );

    rt.stop_container(&id, 0).await.expect("stop");
    rt.remove_container(&id).await.expect("remove");
    rt.stop_pod_sandbox(&sandbox).await.expect("stop sandbox");
    rt.remove_pod_sandbox(&sandbox)
        .await
        .expect("remove sandbox");

    k.remove_pod(&pod).await;
    assert!(
        !pod_dir.join("volume-subpaths").exists(),
        "subPath binds cleaned"
    );
    assert!(mounts_under(&root).is_empty(), "nothing left mounted");
    assert!(!pod_dir.exists(), "pod directory removed");
    assert_eq!(
        std::fs::read(host_dir.join("file")).unwrap(),
        b"from the host",
        "hostPath contents are never touched"
    );
    k.stop().await;
    api.cleanup().await;
}
