//! Volumes through the kubelet on real containers (standalone kinds):
//! emptyDir on disk and in memory with a size limit, hostPath of every
//! type with its checks, downwardAPI with items, modes and divisors,
//! subPath and subPathExpr, readOnly mounts and fsGroup ownership. A
//! container reads the content, mode and ownership the spec asks for;
//! once the pod goes, nothing of it stays mounted and its directory is
//! removed. A hostPath whose type check fails keeps the pod from starting.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness;
use crate::node::*;
use crate::support::containerd::images;

const START: Duration = Duration::from_secs(60);
const FS_GROUP: u32 = 2345;

pub async fn volumes(node: &Node) {
    tokio::join!(standalone_kinds(node), failed_type_check(node));
}

/// A device node for the type checks (creating one needs root, not a
/// device-enabled mount: nothing opens it).
fn mknod(path: &Path, kind: nix::sys::stat::SFlag, major: u64, minor: u64) {
    nix::sys::stat::mknod(
        path,
        kind,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        nix::sys::stat::makedev(major, minor),
    )
    .unwrap_or_else(|e| panic!("mknod {path:?}: {e}"));
}

async fn standalone_kinds(node: &Node) {
    let host = node.host_dir("vols");
    std::fs::create_dir_all(host.join("dir/nested")).expect("mkdir");
    std::fs::write(host.join("dir/top.txt"), "top\n").expect("write");
    std::fs::write(host.join("dir/nested/inner.txt"), "inner\n").expect("write");
    std::fs::write(host.join("file.txt"), "a file\n").expect("write");
    let _sock = std::os::unix::net::UnixListener::bind(host.join("sock")).expect("socket");
    mknod(&host.join("chr"), nix::sys::stat::SFlag::S_IFCHR, 1, 3);
    mknod(&host.join("blk"), nix::sys::stat::SFlag::S_IFBLK, 7, 200);
    let bb = &images().busybox;
    let h = host.display();
    node.write_pod_in(
        "vols",
        "default",
        "  labels: {app: vols, tier: e2e}\n  annotations: {note: hello}\n",
        &format!(
            "  terminationGracePeriodSeconds: 1
  securityContext: {{fsGroup: {FS_GROUP}}}
  volumes:
  - {{name: disk, emptyDir: {{}}}}
  - {{name: mem, emptyDir: {{medium: Memory, sizeLimit: 8Mi}}}}
  - {{name: hdir, hostPath: {{path: {h}/dir, type: Directory}}}}
  - {{name: hmade, hostPath: {{path: {h}/made/deeper, type: DirectoryOrCreate}}}}
  - {{name: hfile, hostPath: {{path: {h}/file.txt, type: File}}}}
  - {{name: hnewfile, hostPath: {{path: {h}/newfile, type: FileOrCreate}}}}
  - {{name: hsock, hostPath: {{path: {h}/sock, type: Socket}}}}
  - {{name: hchr, hostPath: {{path: {h}/chr, type: CharDevice}}}}
  - {{name: hblk, hostPath: {{path: {h}/blk, type: BlockDevice}}}}
  - {{name: hany, hostPath: {{path: {h}/dir}}}}
  - name: info
    downwardAPI:
      defaultMode: 0400
      items:
      - {{path: name, fieldRef: {{fieldPath: metadata.name}}}}
      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}
      - {{path: sub/note, fieldRef: {{fieldPath: \"metadata.annotations['note']\"}}}}
      - {{path: cpu, resourceFieldRef: {{containerName: main, resource: limits.cpu, divisor: 1m}}}}
      - path: mem
        mode: 0444
        resourceFieldRef: {{containerName: main, resource: requests.memory, divisor: 1Mi}}
  containers:
  - name: main
    image: {bb}
    command: [sleep, '3600']
    env:
    - name: POD_NAME
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    resources:
      requests: {{cpu: 100m, memory: 32Mi}}
      limits: {{cpu: 250m, memory: 64Mi}}
    volumeMounts:
    - {{name: disk, mountPath: /disk}}
    - {{name: mem, mountPath: /mem}}
    - {{name: hdir, mountPath: /hdir, readOnly: true}}
    - {{name: hmade, mountPath: /hmade}}
    - {{name: hfile, mountPath: /hfile.txt}}
    - {{name: hnewfile, mountPath: /hnewfile}}
    - {{name: hsock, mountPath: /hsock}}
    - {{name: hchr, mountPath: /hchr}}
    - {{name: hblk, mountPath: /hblk}}
    - {{name: hany, mountPath: /hany}}
    - {{name: info, mountPath: /info}}
    - {{name: hdir, mountPath: /sub, subPath: nested}}
    - {{name: hdir, mountPath: /subfile.txt, subPath: nested/inner.txt, readOnly: true}}
    - {{name: disk, mountPath: /mine, subPathExpr: $(POD_NAME)}}
  - name: peer
    image: {bb}
    command: [sleep, '3600']
    volumeMounts:
    - {{name: disk, mountPath: /shared}}
    - {{name: hdir, mountPath: /hdir}}
",
        ),
    );
    let (pod, _) = node
        .wait("vols", START, "both containers running", |p| {
            harness::is_running(p, "main") && harness::is_running(p, "peer")
        })
        .await;
    let uid = harness::uid(&pod);
    let name = format!("vols-{NODE}");
    let pod_dir = node.dirs.path("root").join("pods").join(&uid);
    let vol = |plugin: &str, v: &str| {
        pod_dir
            .join("volumes")
            .join(format!("kubernetes.io~{plugin}"))
            .join(v)
    };
    let sh = |c: &'static str, s: String| {
        let pod = pod.clone();
        async move { node.sh(&pod, c, &s).await }
    };

    // emptyDir on disk: the pod's directory, shared by its containers,
    // group-owned by the fsGroup with the setgid bit.
    assert!(
        vol("empty-dir", "disk").is_dir(),
        "disk emptyDir under the pod dir"
    );
    sh("peer", "echo from-peer > /shared/x".into()).await;
    assert_eq!(sh("main", "cat /disk/x".into()).await, "from-peer\n");
    assert_eq!(
        sh("main", "stat -c '%a %g' /disk".into()).await.trim(),
        format!("2777 {FS_GROUP}"),
        "disk emptyDir: world-writable, setgid, fsGroup's"
    );
    // Memory: a tmpfs sized by sizeLimit.
    let mounts = sh("main", "grep ' /mem ' /proc/mounts".into()).await;
    assert!(
        mounts.starts_with("tmpfs /mem tmpfs ") && mounts.contains("size=8192k"),
        "memory emptyDir: {mounts}"
    );
    assert_eq!(
        sh("main", "stat -c '%a %g' /mem".into()).await.trim(),
        format!("3777 {FS_GROUP}"),
        "a tmpfs root keeps its sticky bit; fsGroup adds setgid"
    );
    assert_eq!(
        fs_type(&vol("empty-dir", "mem")),
        "tmpfs",
        "the tmpfs is mounted on the host in the pod dir"
    );

    // hostPath: content, readOnly, the created kinds with Go's modes.
    assert_eq!(
        sh("main", "cat /hdir/top.txt /hany/top.txt".into()).await,
        "top\ntop\n"
    );
    let ro = node.exec(&pod, "main", "touch /hdir/nope").await;
    assert!(ro.is_err(), "readOnly hostPath is not writable: {ro:?}");
    sh("peer", "echo rw > /hdir/written".into()).await;
    assert_eq!(
        std::fs::read_to_string(host.join("dir/written")).expect("written"),
        "rw\n",
        "a writable hostPath writes the host's directory"
    );
    assert_eq!(sh("main", "cat /hfile.txt".into()).await, "a file\n");
    let made = host.join("made/deeper");
    assert!(made.is_dir(), "DirectoryOrCreate made the directory");
    assert_eq!(
        made.metadata().expect("stat").permissions().mode() & 0o7777,
        0o755
    );
    let newfile = host.join("newfile");
    assert!(newfile.is_file(), "FileOrCreate made the file");
    assert_eq!(
        newfile.metadata().expect("stat").permissions().mode() & 0o7777,
        0o644
    );
    assert_eq!(
        newfile.metadata().expect("stat").len(),
        0,
        "FileOrCreate makes an empty file"
    );
    assert_eq!(
        sh(
            "main",
            "stat -c %F /hsock /hchr /hblk /hmade /hnewfile".into()
        )
        .await,
        "socket\ncharacter special file\nblock special file\ndirectory\nregular empty file\n"
    );
    assert_eq!(
        sh(
            "main",
            "stat -c %g /hdir/top.txt; stat -c %g /hfile.txt".into()
        )
        .await,
        "0\n0\n",
        "fsGroup leaves hostPath ownership alone"
    );

    // downwardAPI: values, modes (YAML 1.1 octal as Go reads it), fsGroup.
    assert_eq!(
        sh(
            "main",
            "cat /info/name; echo; cat /info/sub/note; echo".into()
        )
        .await,
        format!("{name}\nhello\n")
    );
    assert_eq!(
        sh("main", "cat /info/labels".into()).await,
        "app=\"vols\"\ntier=\"e2e\""
    );
    assert_eq!(sh("main", "cat /info/cpu".into()).await, "250");
    assert_eq!(sh("main", "cat /info/mem".into()).await, "32");
    assert_eq!(
        sh(
            "main",
            "cd /info && stat -L -c '%n %a %g' name labels sub/note cpu mem".into()
        )
        .await,
        format!(
            "name 440 {g}\nlabels 440 {g}\nsub/note 440 {g}\ncpu 440 {g}\nmem 444 {g}\n",
            g = FS_GROUP
        ),
        "defaultMode 0400 / mode 0444 with the fsGroup's read bit"
    );
    assert_eq!(
        sh("main", "ls -a /info | tr '\\n' ' '".into()).await.trim(),
        format!(
            ". .. {} ..data cpu labels mem name sub",
            sh("main", "readlink /info/..data".into()).await.trim()
        ),
        "the atomic writer's layout"
    );
    assert_eq!(
        sh("main", "readlink /info/name".into()).await.trim(),
        "..data/name"
    );

    // subPath and subPathExpr.
    assert_eq!(sh("main", "cat /sub/inner.txt".into()).await, "inner\n");
    assert_eq!(sh("main", "cat /subfile.txt".into()).await, "inner\n");
    sh("main", "echo mine > /mine/own".into()).await;
    assert_eq!(
        sh("peer", format!("cat /shared/{name}/own")).await,
        "mine\n",
        "subPathExpr expands the pod name into the emptyDir"
    );
    let ro = node.exec(&pod, "main", "echo x > /subfile.txt").await;
    assert!(ro.is_err(), "readOnly subPath is not writable: {ro:?}");

    // Gone: unmounted, pod directory removed.
    let before = harness::mounts_under(&pod_dir);
    assert!(!before.is_empty(), "the pod has mounts under its dir");
    node.remove_pod("vols");
    let deadline = Instant::now() + Duration::from_secs(60);
    while pod_dir.exists() || !harness::mounts_under(&pod_dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "pod dir {pod_dir:?} still there; mounts: {:?}",
            harness::mounts_under(&pod_dir)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(host.join("dir/top.txt").exists(), "hostPath content stays");
}

/// A hostPath whose type does not match (a directory for `File`) keeps
/// the container from being created.
async fn failed_type_check(node: &Node) {
    let host = node.host_dir("badtype");
    let bb = &images().busybox;
    node.write_pod(
        "badtype",
        &format!(
            "  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: f, hostPath: {{path: {h}, type: File}}}}
  containers:
  - name: main
    image: {bb}
    command: [sleep, '3600']
    volumeMounts: [{{name: f, mountPath: /f}}]
",
            h = host.display()
        ),
    );
    node.wait("badtype", START, "listed", |_| true).await;
    node.holds("badtype", Duration::from_secs(6), "not started", |p| {
        harness::phase(p) == "Pending"
            && cstatus_opt(p, "main").is_none_or(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .and_then(|w| w.reason.as_deref())
                    == Some("ContainerCreating")
            })
    })
    .await;
    node.remove_pod("badtype");
}

fn cstatus_opt<'a>(
    p: &'a k8s_openapi::api::core::v1::Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    harness::container(p, name)
}

/// The filesystem type mounted at `p` (from this process's mountinfo).
fn fs_type(p: &Path) -> String {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter(|l| l.split(' ').nth(4).map(Path::new) == Some(p))
        .filter_map(|l| l.split(" - ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .next_back()
        .unwrap_or_default()
        .to_string()
}
