use super::*;
use crate::volume::testing::{self, is_mounted, is_root, mode};
use serde_json::json;

fn mounter(root: &Path, source: serde_json::Value, pod_spec: serde_json::Value) -> EmptyDir {
    let host = Arc::new(testing::host(root));
    let source: EmptyDirVolumeSource = serde_json::from_value(source).expect("source");
    EmptyDir::new_mounter(host, "scratch", &source, &testing::pod("u1", pod_spec)).expect("mounter")
}

#[test]
fn medium_table() {
    let cases = [
        (None, Medium::Default),
        (Some(""), Medium::Default),
        (Some("Memory"), Medium::Memory),
        (Some("HugePages"), Medium::HugePages),
        (Some("HugePages-2Mi"), Medium::HugePagesSized("2Mi".into())),
        (Some("Floppy"), Medium::Unknown("Floppy".into())),
    ];
    for (input, want) in cases {
        assert_eq!(Medium::parse(input), want, "{input:?}");
    }
}

#[test]
fn memory_size_table() {
    let mi = 1024 * 1024;
    let pod_with = |limit: Option<&str>| -> Pod {
        let res = match limit {
            Some(l) => {
                json!({"limits": {"memory": l, "cpu": "1"}, "requests": {"memory": l, "cpu": "1"}})
            }
            None => json!({}),
        };
        serde_json::from_value(json!({"spec": {"containers": [{"name": "c", "resources": res}]}}))
            .expect("pod")
    };
    // (node allocatable, volume sizeLimit, pod memory limit, want)
    let cases = [
        (1024 * mi, None, None, 1024 * mi),
        (1024 * mi, None, Some("128Mi"), 128 * mi),
        (1024 * mi, Some(64 * mi), Some("128Mi"), 64 * mi),
        (1024 * mi, Some(256 * mi), Some("128Mi"), 128 * mi),
        (1024 * mi, Some(2048 * mi), None, 1024 * mi),
        (0, Some(64 * mi), None, 0),
        (100 * mi, None, Some("200Mi"), 100 * mi),
    ];
    for (node, vol, pod_limit, want) in cases {
        assert_eq!(
            memory_size_limit(node, vol, &pod_with(pod_limit)),
            want,
            "{node} {vol:?} {pod_limit:?}"
        );
    }
}

#[test]
fn page_size_option_table() {
    let tmp = tempfile::tempdir().expect("tmp");
    let spec = |reqs: serde_json::Value| json!({"containers": [{"name": "c", "resources": {"requests": reqs}}]});
    let cases: Vec<(&str, serde_json::Value, Result<&str, &str>)> = vec![
        (
            "HugePages",
            json!({"hugepages-2Mi": "4Mi"}),
            Ok("pagesize=2Mi"),
        ),
        (
            "HugePages-1Gi",
            json!({"hugepages-2Mi": "4Mi", "hugepages-1Gi": "1Gi"}),
            Ok("pagesize=1Gi"),
        ),
        (
            "HugePages",
            json!({"hugepages-2Mi": "4Mi", "hugepages-1Gi": "1Gi"}),
            Err("medium: HugePages can't be used if container requests multiple huge page sizes"),
        ),
        (
            "HugePages-1Gi",
            json!({"hugepages-2Mi": "4Mi"}),
            Err(
                "medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages",
            ),
        ),
        (
            "HugePages",
            json!({"memory": "1Gi"}),
            Err(
                "medium HugePages: hugePages storage requested, but there is no resource request for huge pages",
            ),
        ),
    ];
    for (medium, reqs, want) in cases {
        let m = mounter(tmp.path(), json!({"medium": medium}), spec(reqs.clone()));
        let got = m.page_size_mount_option().map_err(|e| e.to_string());
        assert_eq!(
            got.as_deref().map_err(String::as_str),
            want,
            "{medium} {reqs}"
        );
    }
}

#[tokio::test]
async fn disk_medium_set_up_and_tear_down() {
    let tmp = tempfile::tempdir().expect("tmp");
    let m = mounter(tmp.path(), json!({}), json!({"containers": []}));
    let dir = tmp
        .path()
        .join("pods/u1/volumes/kubernetes.io~empty-dir/scratch");
    assert_eq!(Mounter::path(&m), dir);
    m.set_up(&MounterArgs::default()).await.expect("setup");
    assert!(dir.is_dir());
    assert_eq!(mode(&dir), 0o777);
    let ready = tmp
        .path()
        .join("pods/u1/plugins/kubernetes.io~empty-dir/scratch/ready");
    assert!(ready.is_file());
    std::fs::write(dir.join("data"), b"keep").expect("write");
    m.set_up(&MounterArgs::default()).await.expect("again");
    assert_eq!(std::fs::read(dir.join("data")).expect("read"), b"keep");

    let host = Arc::new(testing::host(tmp.path()));
    let u = EmptyDir::new_unmounter(host, "scratch", "u1");
    u.tear_down().await.expect("teardown");
    assert!(!dir.exists());
    assert!(!ready.exists());
    u.tear_down()
        .await
        .expect("teardown of a missing dir is fine");
}

#[tokio::test]
async fn unknown_medium_fails() {
    let tmp = tempfile::tempdir().expect("tmp");
    let m = mounter(
        tmp.path(),
        json!({"medium": "Floppy"}),
        json!({"containers": []}),
    );
    let err = m
        .set_up(&MounterArgs::default())
        .await
        .expect_err("unknown");
    assert_eq!(err.to_string(), "unknown storage medium \"Floppy\"");
}

#[tokio::test]
async fn memory_medium_is_a_sized_tmpfs() {
    if !is_root() {
        eprintln!("SKIPPED memory_medium_is_a_sized_tmpfs: mounting needs root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let m = mounter(
        tmp.path(),
        json!({"medium": "Memory", "sizeLimit": "16Mi"}),
        json!({"containers": [{"name": "c"}]}),
    );
    assert_eq!(m.size_limit(), 16 * 1024 * 1024);
    let dir = Mounter::path(&m);
    m.set_up(&MounterArgs::default()).await.expect("setup");
    assert!(is_mounted(&dir));
    let st = nix::sys::statfs::statfs(&dir).expect("statfs");
    assert_eq!(st.filesystem_type(), nix::sys::statfs::TMPFS_MAGIC);
    assert_eq!(
        st.blocks() as u64 * st.block_size() as u64,
        16 * 1024 * 1024
    );
    std::fs::write(dir.join("data"), b"in memory").expect("write");
    // SetUp again keeps the mount and its contents.
    m.set_up(&MounterArgs::default()).await.expect("again");
    assert_eq!(std::fs::read(dir.join("data")).expect("read"), b"in memory");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let count = crate::volume::util::mount::parse_mountinfo(&mounts)
        .iter()
        .filter(|mi| mi.mount_point == dir)
        .count();
    assert_eq!(count, 1, "not mounted twice");

    let host = Arc::new(testing::host(tmp.path()));
    EmptyDir::new_unmounter(host, "scratch", "u1")
        .tear_down()
        .await
        .expect("teardown");
    assert!(!is_mounted(&dir));
    assert!(!dir.exists());
}

#[tokio::test]
async fn huge_pages_medium_is_hugetlbfs_with_the_requested_size() {
    if !is_root()
        || !std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| f.contains("hugetlbfs"))
    {
        eprintln!(
            "SKIPPED huge_pages_medium_is_hugetlbfs_with_the_requested_size: needs root and hugetlbfs"
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let spec = json!({"containers": [{"name": "c", "resources": {
        "requests": {"hugepages-2Mi": "4Mi", "memory": "1Mi"}, "limits": {"hugepages-2Mi": "4Mi", "memory": "1Mi"}}}]});
    let m = mounter(tmp.path(), json!({"medium": "HugePages-2Mi"}), spec.clone());
    let dir = Mounter::path(&m);
    m.set_up(&MounterArgs::default()).await.expect("setup");
    let st = nix::sys::statfs::statfs(&dir).expect("statfs");
    assert_eq!(st.filesystem_type(), nix::sys::statfs::HUGETLBFS_MAGIC);
    let mounts = crate::volume::util::mount::parse_mountinfo(
        &std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo"),
    );
    let mi = mounts
        .iter()
        .find(|mi| mi.mount_point == dir)
        .expect("mounted");
    assert!(
        mi.super_options.iter().any(|o| o == "pagesize=2M"),
        "{:?}",
        mi.super_options
    );
    m.set_up(&MounterArgs::default()).await.expect("idempotent");
    // The same directory asked for with another page size.
    let other = mounter(tmp.path(), json!({"medium": "HugePages-1Gi"}), spec);
    let err = other
        .set_up_at(&dir, &MounterArgs::default())
        .expect_err("differ");
    assert_eq!(
        err.to_string(),
        format!(
            "pod u1: mounted dir {} pagesize '2Mi' and requested medium size '1Gi' differ",
            dir.display()
        )
    );
    let host = Arc::new(testing::host(tmp.path()));
    EmptyDir::new_unmounter(host, "scratch", "u1")
        .tear_down()
        .await
        .expect("teardown");
    assert!(!is_mounted(&dir) && !dir.exists());
}
