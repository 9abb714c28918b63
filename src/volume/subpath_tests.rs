use super::*;
use crate::volume::testing::{is_mounted, is_root};
use crate::volume::util::mount::SystemMounter;

fn sub(volume: &Path, sub_path: &str, index: usize) -> SubPathMount {
    SubPathMount {
        volume_path: volume.to_path_buf(),
        sub_path: sub_path.to_string(),
        volume_mount_index: index,
    }
}

#[test]
fn within_base_table() {
    let cases = [
        ("/a/b", "/a", true),
        ("/a", "/a", true),
        ("/ab", "/a", false),
        ("/a/../b", "/a", false),
        ("/b", "/a", false),
    ];
    for (p, b, want) in cases {
        assert_eq!(
            path_within_base(Path::new(p), Path::new(b)),
            want,
            "{p} in {b}"
        );
    }
}

#[test]
fn safe_make_dir_creates_with_mode_and_refuses_escapes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let vol = tmp.path().join("vol");
    fs::create_dir(&vol).expect("mkdir");
    safe_make_dir("a/b/c", &vol, 0o2775).expect("make");
    let mode = fs::metadata(vol.join("a/b/c"))
        .expect("meta")
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o2775);
    safe_make_dir("a/b/c", &vol, 0o700).expect("existing is fine");

    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).expect("mkdir");
    std::os::unix::fs::symlink(&outside, vol.join("link")).expect("symlink");
    let err = safe_make_dir("link/x", &vol, 0o755).expect_err("escape");
    assert!(err.to_string().contains("outside of allowed base"), "{err}");
    assert!(!outside.join("x").exists());
    fs::write(vol.join("file"), b"").expect("file");
    let err = safe_make_dir("file", &vol, 0o755).expect_err("a file");
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[test]
fn symlinks_out_of_the_volume_are_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let vol = tmp.path().join("vol");
    fs::create_dir(&vol).expect("mkdir");
    std::os::unix::fs::symlink("/etc", vol.join("evil")).expect("symlink");
    let sp = SubPath {
        volume_mount_index: 0,
        path: vol.join("evil"),
        volume_name: "v".into(),
        volume_path: vol.clone(),
        pod_dir: tmp.path().join("pod"),
        container_name: "c".into(),
    };
    let err = prepare_safe_subpath(&SystemMounter, &sp).expect_err("escape");
    assert!(err.to_string().contains("not within volume path"), "{err}");
    assert!(!tmp.path().join("pod/volume-subpaths").exists());
}

#[tokio::test]
async fn bind_mounts_and_cleans_up() {
    if !is_root() {
        eprintln!("SKIPPED bind_mounts_and_cleans_up: mounting needs root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let vol = tmp.path().join("vol");
    fs::create_dir_all(vol.join("data")).expect("mkdir");
    fs::write(vol.join("data/f"), b"inside").expect("write");
    fs::write(vol.join("single"), b"one file").expect("write");
    let pod_dir = tmp.path().join("pod");
    let m: Arc<dyn MountInterface> = Arc::new(SystemMounter);
    let mounts = vec![
        Mount {
            name: "v".into(),
            container_path: "/d".into(),
            host_path: vol.join("data").to_string_lossy().into_owned(),
            read_only: false,
            selinux_relabel: false,
            propagation: crate::cri::api::MountPropagation::PropagationPrivate,
            sub_path: Some(sub(&vol, "data", 0)),
        },
        Mount {
            name: "v".into(),
            container_path: "/f".into(),
            host_path: vol.join("single").to_string_lossy().into_owned(),
            read_only: true,
            selinux_relabel: false,
            propagation: crate::cri::api::MountPropagation::PropagationPrivate,
            sub_path: Some(sub(&vol, "single", 1)),
        },
        Mount {
            name: "v".into(),
            container_path: "/new".into(),
            host_path: vol.join("made/here").to_string_lossy().into_owned(),
            read_only: false,
            selinux_relabel: false,
            propagation: crate::cri::api::MountPropagation::PropagationPrivate,
            sub_path: Some(sub(&vol, "made/here", 2)),
        },
    ];
    let out = prepare_subpath_mounts(m.clone(), pod_dir.clone(), "c".into(), mounts)
        .await
        .expect("prepare");
    let t0 = pod_dir.join("volume-subpaths/v/c/0");
    let t1 = pod_dir.join("volume-subpaths/v/c/1");
    let t2 = pod_dir.join("volume-subpaths/v/c/2");
    assert_eq!(out[0].host_path, t0.to_string_lossy());
    assert_eq!(out[1].host_path, t1.to_string_lossy());
    assert!(is_mounted(&t0) && is_mounted(&t1) && is_mounted(&t2));
    assert_eq!(fs::read(t0.join("f")).expect("read"), b"inside");
    assert_eq!(fs::read(&t1).expect("read"), b"one file");
    assert!(vol.join("made/here").is_dir());

    // Preparing again reuses the binds.
    let again = prepare_subpath_mount(m.as_ref(), &pod_dir, "c", "v", &sub(&vol, "data", 0))
        .expect("again");
    assert_eq!(again, t0);
    let count = crate::volume::util::mount::parse_mountinfo(
        &fs::read_to_string("/proc/self/mountinfo").expect("mountinfo"),
    )
    .iter()
    .filter(|mi| mi.mount_point == t0)
    .count();
    assert_eq!(count, 1);

    clean_subpaths(m.as_ref(), &pod_dir, "v").expect("clean");
    assert!(!is_mounted(&t0) && !is_mounted(&t1) && !is_mounted(&t2));
    assert!(!pod_dir.join("volume-subpaths").exists());
    assert_eq!(fs::read(vol.join("data/f")).expect("kept"), b"inside");
    clean_subpaths(m.as_ref(), &pod_dir, "v").expect("nothing left is fine");
}
