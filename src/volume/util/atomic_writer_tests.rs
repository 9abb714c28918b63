use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, UNIX_EPOCH};

fn fp(data: &str, mode: u32) -> FileProjection {
    FileProjection {
        data: data.as_bytes().to_vec(),
        mode,
        fs_user: None,
    }
}

fn payload(items: &[(&str, &str)]) -> Payload {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), fp(v, 0o644)))
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn ts_dirs(dir: &Path) -> Vec<String> {
    entries(dir)
        .into_iter()
        .filter(|n| n.starts_with("..") && n != DATA_DIR_NAME)
        .collect()
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

#[test]
fn validate_path_table() {
    let long_name = "a".repeat(256);
    let long_path = vec!["a"; 2100].join("/");
    let cases: Vec<(&str, Option<&str>)> = vec![
        ("foo", None),
        ("foo/bar", None),
        (
            "..foo/bar",
            Some("invalid path: must not start with '..': ..foo/bar"),
        ),
        ("foo/..bar", None),
        (
            "foo/../bar",
            Some("invalid path: must not contain '..': foo/../bar"),
        ),
        ("..", Some("invalid path: must not contain '..': ..")),
        ("/abs", Some("invalid path: must be relative path: /abs")),
        ("", Some("invalid path: must not be empty: \"\"")),
        (
            &long_name,
            Some("invalid path: filenames must be less than or equal to 255 characters"),
        ),
        (
            &long_path,
            Some("invalid path: must be less than or equal to 4096 characters"),
        ),
        ("./foo", None),
    ];
    for (input, want) in cases {
        let got = validate_path(input).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), want, "{input:.40}");
    }
}

#[test]
fn timestamp_prefix_is_go_layout_in_utc() {
    // 2026-11-22T04:03:42Z
    assert_eq!(
        timestamp_prefix(at(1_795_320_222)),
        "..2026_11_22_04_03_42."
    );
}

#[test]
fn first_write_lays_out_data_dir_and_links() {
    let tmp = tempfile::tempdir().expect("tmp");
    let w = AtomicWriter::new(tmp.path(), "test").expect("writer");
    let mut p = payload(&[("greeting", "hello"), ("nested/deep/file", "x")]);
    p.get_mut("greeting").expect("greeting").mode = 0o400;
    w.write(&p, None, at(1_795_320_222)).expect("write");

    let ts = ts_dirs(tmp.path());
    assert_eq!(ts.len(), 1);
    assert!(ts[0].starts_with("..2026_11_22_04_03_42."), "{ts:?}");
    let suffix = &ts[0]["..2026_11_22_04_03_42.".len()..];
    assert!(suffix.parse::<u32>().is_ok(), "random suffix {suffix}");
    assert_eq!(
        fs::read_link(tmp.path().join(DATA_DIR_NAME)).expect("..data"),
        PathBuf::from(&ts[0])
    );
    assert_eq!(
        fs::read_link(tmp.path().join("greeting")).expect("link"),
        PathBuf::from("..data/greeting")
    );
    assert_eq!(
        fs::read_link(tmp.path().join("nested")).expect("link"),
        PathBuf::from("..data/nested")
    );
    assert_eq!(
        fs::read_to_string(tmp.path().join("nested/deep/file")).expect("read"),
        "x"
    );
    let mode = fs::metadata(tmp.path().join(&ts[0]).join("greeting"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o400);
    let mode = fs::metadata(tmp.path().join(&ts[0]))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(!tmp.path().join(NEW_DATA_DIR_NAME).exists());
}

#[test]
fn update_sequence_removes_old_files_and_swaps_data() {
    let tmp = tempfile::tempdir().expect("tmp");
    let w = AtomicWriter::new(tmp.path(), "test").expect("writer");
    w.write(
        &payload(&[("a", "1"), ("b", "1"), ("dir/c", "1")]),
        None,
        at(1),
    )
    .expect("v1");
    let v1 = ts_dirs(tmp.path());

    // Same content: nothing is rewritten.
    w.write(
        &payload(&[("a", "1"), ("b", "1"), ("dir/c", "1")]),
        None,
        at(2),
    )
    .expect("same");
    assert_eq!(ts_dirs(tmp.path()), v1);

    // New content, "b" and "dir/c" dropped, "d" added.
    w.write(&payload(&[("a", "2"), ("d", "2")]), None, at(3))
        .expect("v2");
    let v2 = ts_dirs(tmp.path());
    assert_eq!(v2.len(), 1);
    assert_ne!(v2, v1, "a new timestamped directory");
    assert_eq!(
        entries(tmp.path())
            .into_iter()
            .filter(|n| !n.starts_with(".."))
            .collect::<Vec<_>>(),
        vec!["a", "d"]
    );
    assert_eq!(fs::read_to_string(tmp.path().join("a")).expect("a"), "2");
    assert_eq!(fs::read_to_string(tmp.path().join("d")).expect("d"), "2");
    assert!(fs::symlink_metadata(tmp.path().join("b")).is_err());
    assert!(fs::symlink_metadata(tmp.path().join("dir")).is_err());

    // Only a removal also counts as a change.
    w.write(&payload(&[("a", "2")]), None, at(4)).expect("v3");
    assert_ne!(ts_dirs(tmp.path()), v2);
    assert!(fs::symlink_metadata(tmp.path().join("d")).is_err());
}

#[test]
fn set_perms_sees_the_new_dir_before_it_is_published() {
    let tmp = tempfile::tempdir().expect("tmp");
    let w = AtomicWriter::new(tmp.path(), "test").expect("writer");
    let target = tmp.path().to_path_buf();
    let seen = std::sync::Mutex::new(None);
    let cb = |name: &str| -> Result<(), VolumeError> {
        assert!(target.join(name).join("a").is_file());
        assert!(
            fs::read_link(target.join(DATA_DIR_NAME)).is_err(),
            "not yet published"
        );
        *seen.lock().expect("lock") = Some(name.to_string());
        Ok(())
    };
    w.write(&payload(&[("a", "1")]), Some(&cb), at(1))
        .expect("write");
    let name = seen.lock().expect("lock").clone().expect("called");
    assert_eq!(
        fs::read_link(tmp.path().join(DATA_DIR_NAME)).expect("link"),
        PathBuf::from(name)
    );
    let fail = |_: &str| -> Result<(), VolumeError> { Err(VolumeError::other("no perms")) };
    let err = w
        .write(&payload(&[("a", "2")]), Some(&fail), at(2))
        .expect_err("set_perms failure");
    assert_eq!(err.to_string(), "no perms");
    assert_eq!(fs::read_to_string(tmp.path().join("a")).expect("a"), "1");
}

#[test]
fn missing_target_dir_is_an_error() {
    let tmp = tempfile::tempdir().expect("tmp");
    let err = AtomicWriter::new(&tmp.path().join("nope"), "x").expect_err("missing");
    assert!(
        err.to_string().contains("no such file or directory"),
        "{err}"
    );
}

#[test]
fn readers_never_see_a_mixed_version() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().to_path_buf();
    let w = AtomicWriter::new(&dir, "test").expect("writer");
    w.write(&payload(&[("a", "0"), ("b", "0")]), None, at(0))
        .expect("v0");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let dir = dir.clone();
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Resolve ..data once, as a consumer watching it would.
                let Ok(target) = fs::read_link(dir.join(DATA_DIR_NAME)) else {
                    continue;
                };
                let base = dir.join(target);
                let (Ok(a), Ok(b)) = (
                    fs::read_to_string(base.join("a")),
                    fs::read_to_string(base.join("b")),
                ) else {
                    continue; // the old version was removed under us
                };
                assert_eq!(a, b, "a mixed version was visible");
                // The user-visible links always resolve to one version too.
                if let (Ok(a), Ok(b)) = (
                    fs::read_to_string(dir.join("a")),
                    fs::read_to_string(dir.join("b")),
                ) {
                    assert!(a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
                }
                reads += 1;
            }
            reads
        })
    };
    for i in 1..200u32 {
        let v = i.to_string();
        w.write(&payload(&[("a", &v), ("b", &v)]), None, at(i as u64))
            .expect("write");
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader");
    assert!(reads > 0);
    assert_eq!(ts_dirs(&dir).len(), 1, "old versions are removed");
    assert_eq!(fs::read_to_string(dir.join("a")).expect("a"), "199");
}
