use std::collections::BTreeSet;
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::rotate::{self, COMPRESS_SUFFIX};
use super::*;

const TS1: &str = "20240101-000001";
const TS2: &str = "20240101-000002";
const TS3: &str = "20240101-000003";

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn touch(dir: &Path, files: &[&str]) {
    for f in files {
        std::fs::write(dir.join(f), format!("content of {f}\n")).expect("write");
    }
}

fn set(files: &[&str]) -> BTreeSet<String> {
    files.iter().map(|s| s.to_string()).collect()
}

/// (containerLogMaxSize, containerLogMaxFiles, the policy or a part of the error).
type PolicyCase = (&'static str, i32, Result<(u64, usize), &'static str>);

#[test]
fn policy_from_configuration_table() {
    let mi = 1024 * 1024;
    let cases: &[PolicyCase] = &[
        ("10Mi", 5, Ok((10 * mi, 5))),
        ("1Mi", 3, Ok((mi, 3))),
        ("1.5Ki", 2, Ok((1536, 2))),
        ("0", 2, Ok((0, 2))),
        (
            "10Mi",
            1,
            Err("invalid MaxFiles 1, must be > 1 (containerLogMaxFiles"),
        ),
        ("10Mi", 0, Err("invalid MaxFiles 0, must be > 1")),
        ("10Mi", -3, Err("invalid MaxFiles -3, must be > 1")),
        (
            "ten",
            5,
            Err("failed to parse container log max size \"ten\" (containerLogMaxSize"),
        ),
        ("500m", 5, Err("invalid max log size")),
        ("-1Mi", 5, Err("negative max log size -1048576")),
        ("", 5, Err("containerLogMaxSize")),
    ];
    for (size, files, want) in cases {
        let got = LogRotatePolicy::new(size, *files);
        match (got, want) {
            (Ok(p), Ok((bytes, n))) => {
                assert_eq!((p.max_size, p.max_files), (*bytes, *n), "{size} {files}")
            }
            (Err(e), Err(text)) => {
                assert!(e.to_string().contains(text), "{size} {files}: {e}")
            }
            (got, want) => panic!("{size} {files}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn rotated_logs_are_the_log_name_and_a_dot_sorted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("0.log");
    touch(
        dir.path(),
        &[
            "0.log",
            "1.log",
            "1.log.20240101-000001",
            "10.log",
            &format!("0.log.{TS2}.gz"),
            &format!("0.log.{TS1}"),
            &format!("0.log.{TS3}.tmp"),
            "0.logs",
        ],
    );
    let got: Vec<String> = rotate::rotated_logs(&log)
        .expect("list")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        got,
        vec![
            format!("0.log.{TS1}"),
            format!("0.log.{TS2}.gz"),
            format!("0.log.{TS3}.tmp"),
        ]
    );
    assert!(
        rotate::rotated_logs(&dir.path().join("gone/0.log")).is_err(),
        "a missing directory is an error"
    );
}

#[test]
fn unused_logs_table() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("nothing", &[], &[]),
        (
            "compressed and plain are in use",
            &["a.1.gz", "a.2"],
            &["a.1.gz", "a.2"],
        ),
        ("temporary files are not", &["a.1.tmp", "a.2"], &["a.2"]),
        (
            "a plain file with its compressed twin is not",
            &["a.1", "a.1.gz", "a.2"],
            &["a.1.gz", "a.2"],
        ),
        (
            "a compression in progress",
            &["a.1", "a.1.gz.tmp"],
            &["a.1"],
        ),
    ];
    for (name, logs, want) in cases {
        let logs: Vec<PathBuf> = logs.iter().map(PathBuf::from).collect();
        let (in_use, unused) = rotate::split_unused(&logs);
        let want: Vec<PathBuf> = want.iter().map(PathBuf::from).collect();
        assert_eq!(in_use, want, "{name}");
        assert_eq!(in_use.len() + unused.len(), logs.len(), "{name}");
    }
}

#[test]
fn excess_logs_table() {
    let all = [
        format!("0.log.{TS3}"),
        format!("0.log.{TS1}.gz"),
        format!("0.log.{TS2}.gz"),
    ];
    // (max files, what is kept): the live log and the one about to be
    // rotated take two of the files.
    let cases: &[(usize, &[usize])] = &[
        (2, &[]),
        (3, &[0]),
        (4, &[2, 0]),
        (5, &[1, 2, 0]),
        (10, &[1, 2, 0]),
    ];
    for (max_files, keep) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        touch(dir.path(), &refs);
        let logs: Vec<PathBuf> = all.iter().map(|f| dir.path().join(f)).collect();
        let left = rotate::remove_excess(logs, *max_files).expect("remove");
        let want: Vec<PathBuf> = keep.iter().map(|i| dir.path().join(&all[*i])).collect();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(left, want_sorted, "max files {max_files}");
        let on_disk: BTreeSet<String> = names(dir.path());
        let want_names: BTreeSet<String> = keep.iter().map(|i| all[*i].clone()).collect();
        assert_eq!(on_disk, want_names, "max files {max_files}");
    }
}

#[test]
fn compress_writes_gzip_and_removes_the_original() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join(format!("0.log.{TS1}"));
    let body = "2024-01-01T00:00:00.000000000Z stdout F hello\n".repeat(1000);
    std::fs::write(&log, &body).expect("write");
    rotate::compress(&log).expect("compress");
    assert_eq!(names(dir.path()), set(&[&format!("0.log.{TS1}.gz")]));
    let gz = std::fs::File::open(rotate::with_suffix(&log, COMPRESS_SUFFIX)).expect("open");
    let mut out = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut out)
        .expect("gunzip");
    assert_eq!(out, body);
    let err = rotate::compress(&dir.path().join("missing")).expect_err("missing");
    assert!(matches!(err, RotateError::Compress { .. }), "{err}");
    assert_eq!(names(dir.path()).len(), 1, "no temporary file is left");
}

#[test]
fn prepare_table() {
    let gz = |ts: &str| format!("0.log.{ts}.gz");
    let plain = |ts: &str| format!("0.log.{ts}");
    let cases: Vec<(&str, usize, Vec<String>, Vec<String>)> = vec![
        ("first rotation", 3, vec![], vec![]),
        (
            "the last rotated log is compressed",
            3,
            vec![plain(TS1)],
            vec![gz(TS1)],
        ),
        (
            "the oldest goes, the newest is compressed",
            3,
            vec![gz(TS1), plain(TS2)],
            vec![gz(TS2)],
        ),
        (
            "leftovers of an interrupted compression",
            4,
            vec![
                plain(TS1),
                gz(TS1),
                format!("{}.tmp", plain(TS2)),
                plain(TS2),
            ],
            vec![gz(TS1), gz(TS2)],
        ),
        (
            "two files: no rotated log is kept",
            2,
            vec![gz(TS1), plain(TS2)],
            vec![],
        ),
        (
            "within the count nothing is removed",
            5,
            vec![gz(TS1), gz(TS2), plain(TS3)],
            vec![gz(TS1), gz(TS2), gz(TS3)],
        ),
    ];
    for (name, max_files, before, after) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut files: Vec<&str> = before.iter().map(String::as_str).collect();
        files.push("0.log");
        touch(dir.path(), &files);
        rotate::prepare(&dir.path().join("0.log"), max_files).expect(name);
        let mut want: BTreeSet<String> = after.into_iter().collect();
        want.insert("0.log".into());
        assert_eq!(names(dir.path()), want, "{name}");
    }
}

#[test]
fn rotated_name_has_the_rotation_time() {
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_709_618_828); // 2024-03-05T06:07:08Z
    let got = rotate::rotated_name(Path::new("/logs/c/0.log"), at, &TimeZone::UTC);
    assert_eq!(got, PathBuf::from("/logs/c/0.log.20240305-060708"));
    let plus2 = TimeZone::fixed(jiff::tz::offset(2));
    let got = rotate::rotated_name(Path::new("/logs/c/0.log"), at, &plus2);
    assert_eq!(got, PathBuf::from("/logs/c/0.log.20240305-080708"));
}

/// A clock whose wall time moves only when told.
struct StepClock(Mutex<SystemTime>);

impl StepClock {
    fn new() -> Arc<Self> {
        Arc::new(StepClock(Mutex::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_709_618_828),
        )))
    }

    fn step(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for StepClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }

    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

/// The runtime's side: containers with log paths; a reopen creates the
/// live file as containerd does, unless told to fail.
#[derive(Default)]
struct FakeRuntime {
    containers: Mutex<Vec<(String, ContainerState, PathBuf)>>,
    fail_list: Mutex<bool>,
    fail_reopen: Mutex<bool>,
    no_status: Mutex<bool>,
    reopened: Mutex<Vec<String>>,
    listed: Mutex<usize>,
}

fn unavailable(rpc: &'static str) -> CriError {
    CriError::Unavailable {
        endpoint: "fake".into(),
        rpc,
        message: "the runtime is away".into(),
    }
}

impl FakeRuntime {
    fn with(containers: &[(&str, ContainerState, &Path)]) -> Arc<Self> {
        let me = FakeRuntime::default();
        *me.containers.lock().unwrap() = containers
            .iter()
            .map(|(id, s, p)| (id.to_string(), *s, p.to_path_buf()))
            .collect();
        Arc::new(me)
    }
}

#[async_trait]
impl LogRuntime for FakeRuntime {
    async fn list_containers(&self) -> Result<Vec<Container>, CriError> {
        *self.listed.lock().unwrap() += 1;
        if *self.fail_list.lock().unwrap() {
            return Err(unavailable("ListContainers"));
        }
        Ok(self
            .containers
            .lock()
            .unwrap()
            .iter()
            .map(|(id, state, _)| Container {
                id: id.clone(),
                state: *state as i32,
                ..Default::default()
            })
            .collect())
    }

    async fn container_status(&self, id: &str) -> Result<Option<ContainerStatus>, CriError> {
        if *self.no_status.lock().unwrap() {
            return Ok(None);
        }
        let containers = self.containers.lock().unwrap();
        let (_, state, path) = containers
            .iter()
            .find(|(c, _, _)| c == id)
            .ok_or_else(|| unavailable("ContainerStatus"))?;
        Ok(Some(ContainerStatus {
            id: id.to_string(),
            state: *state as i32,
            log_path: path.display().to_string(),
            ..Default::default()
        }))
    }

    async fn reopen_container_log(&self, id: &str) -> Result<(), CriError> {
        self.reopened.lock().unwrap().push(id.to_string());
        if *self.fail_reopen.lock().unwrap() {
            return Err(unavailable("ReopenContainerLog"));
        }
        let path = self
            .containers
            .lock()
            .unwrap()
            .iter()
            .find(|(c, _, _)| c == id)
            .map(|(_, _, p)| p.clone())
            .ok_or_else(|| unavailable("ReopenContainerLog"))?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(|_| ())
            .map_err(|_| unavailable("ReopenContainerLog"))
    }
}

fn manager(
    runtime: Arc<FakeRuntime>,
    max_size: u64,
    max_files: usize,
) -> (ContainerLogManager, Arc<StepClock>) {
    let clock = StepClock::new();
    let m = ContainerLogManager::new(
        runtime,
        LogRotatePolicy {
            max_size,
            max_files,
        },
        clock.clone(),
        TimeZone::UTC,
    );
    (m, clock)
}

fn write_bytes(path: &Path, n: usize) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open");
    f.write_all(&vec![b'x'; n]).expect("write");
}

#[tokio::test]
async fn one_container_table() {
    enum Setup {
        /// The live log has this many bytes.
        Live(usize),
        /// No live log.
        Missing,
    }
    struct Case {
        name: &'static str,
        setup: Setup,
        fail_reopen: bool,
        no_status: bool,
        want: Result<bool, &'static str>,
        reopens: usize,
        files: &'static [&'static str],
    }
    const ROTATED: &str = "0.log.20240305-060708";
    let cases = [
        Case {
            name: "below the limit",
            setup: Setup::Live(99),
            fail_reopen: false,
            no_status: false,
            want: Ok(false),
            reopens: 0,
            files: &["0.log"],
        },
        Case {
            name: "at the limit",
            setup: Setup::Live(100),
            fail_reopen: false,
            no_status: false,
            want: Ok(true),
            reopens: 1,
            files: &["0.log", ROTATED],
        },
        Case {
            name: "reopen fails: renamed back",
            setup: Setup::Live(500),
            fail_reopen: true,
            no_status: false,
            want: Err("failed to reopen the log"),
            reopens: 1,
            files: &["0.log"],
        },
        Case {
            name: "missing live log is recovered by a reopen",
            setup: Setup::Missing,
            fail_reopen: false,
            no_status: false,
            want: Ok(false),
            reopens: 1,
            files: &["0.log"],
        },
        Case {
            name: "missing live log and reopen fails",
            setup: Setup::Missing,
            fail_reopen: true,
            no_status: false,
            want: Err("is missing and reopening it failed"),
            reopens: 1,
            files: &[],
        },
        Case {
            name: "no status",
            setup: Setup::Live(500),
            fail_reopen: false,
            no_status: true,
            want: Err("has no status"),
            reopens: 0,
            files: &["0.log"],
        },
    ];
    for case in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("0.log");
        if let Setup::Live(n) = case.setup {
            write_bytes(&log, n);
        }
        let rt = FakeRuntime::with(&[("c1", ContainerState::ContainerRunning, &log)]);
        *rt.fail_reopen.lock().unwrap() = case.fail_reopen;
        *rt.no_status.lock().unwrap() = case.no_status;
        let (m, _) = manager(rt.clone(), 100, 3);
        let got = m.rotate_container("c1").await;
        match (&got, case.want) {
            (Ok(outcome), Ok(rotates)) => {
                assert_eq!(
                    matches!(outcome, Outcome::Rotated(_)),
                    rotates,
                    "{}",
                    case.name
                )
            }
            (Err(e), Err(text)) => assert!(e.to_string().contains(text), "{}: {e}", case.name),
            _ => panic!("{}: got {got:?}", case.name),
        }
        assert_eq!(
            rt.reopened.lock().unwrap().len(),
            case.reopens,
            "{}",
            case.name
        );
        assert_eq!(names(dir.path()), set(case.files), "{}", case.name);
    }
}

#[tokio::test]
async fn a_round_rotates_running_containers_only_and_goes_on_after_failures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (
        dir.path().join("a.log"),
        dir.path().join("b.log"),
        dir.path().join("c.log"),
    );
    for p in [&a, &b, &c] {
        write_bytes(p, 200);
    }
    let rt = FakeRuntime::with(&[
        ("exited", ContainerState::ContainerExited, &a),
        (
            "gone",
            ContainerState::ContainerRunning,
            &dir.path().join("x/none.log"),
        ),
        ("running", ContainerState::ContainerRunning, &b),
        ("created", ContainerState::ContainerCreated, &c),
    ]);
    let (m, _) = manager(rt.clone(), 100, 3);
    m.rotate_logs().await.expect("a round");
    assert_eq!(
        names(dir.path()),
        set(&["a.log", "b.log", "b.log.20240305-060708", "c.log"])
    );
    *rt.fail_list.lock().unwrap() = true;
    let err = m.rotate_logs().await.expect_err("listing fails");
    assert!(matches!(err, RotateError::ListContainers(_)), "{err}");
}

/// A container that writes between rounds: the files never exceed the
/// policy's count, older rotations are compressed, the newest kept whole.
#[tokio::test]
async fn rounds_keep_the_file_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("0.log");
    let rt = FakeRuntime::with(&[("c1", ContainerState::ContainerRunning, &log)]);
    write_bytes(&log, 10);
    let (m, clock) = manager(rt.clone(), 1024, 3);
    for round in 0..6 {
        write_bytes(&log, 4096);
        m.rotate_logs().await.expect("round");
        clock.step(Duration::from_secs(10));
        let files = names(dir.path());
        assert!(files.len() <= 3, "round {round}: {files:?}");
        assert!(files.contains("0.log"), "round {round}: {files:?}");
        let plain = files.iter().filter(|f| !f.ends_with(".gz")).count();
        assert_eq!(
            plain, 2,
            "round {round}: the live log and the newest rotation: {files:?}"
        );
        if round > 0 {
            assert_eq!(files.len(), 3, "round {round}: {files:?}");
        }
    }
    assert_eq!(rt.reopened.lock().unwrap().len(), 6);
    assert_eq!(
        names(dir.path()),
        set(&["0.log", "0.log.20240305-060758", "0.log.20240305-060748.gz"])
    );
}

/// Started on a TaskSet: a round at once, then every 10 s (paused time).
#[tokio::test(start_paused = true)]
async fn started_manager_runs_every_ten_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("0.log");
    write_bytes(&log, 1);
    let rt = FakeRuntime::with(&[("c1", ContainerState::ContainerRunning, &log)]);
    let (m, _) = manager(rt.clone(), 1 << 20, 5);
    let tasks = TaskSet::new();
    Arc::new(m).start(&tasks);
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(*rt.listed.lock().unwrap(), 3, "rounds at 0, 10 and 20 s");
    *rt.fail_list.lock().unwrap() = true;
    tokio::time::sleep(Duration::from_secs(10)).await;
    *rt.fail_list.lock().unwrap() = false;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        *rt.listed.lock().unwrap(),
        5,
        "a failed round does not stop the loop"
    );
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .expect("stops");
}

#[test]
fn a_bad_setting_fails_the_build_naming_the_field() {
    let err = crate::kubelet::build::BuildError::from(PolicyError::MaxFiles(1));
    assert_eq!(
        err.to_string(),
        "failed to initialize container log manager: invalid MaxFiles 1, must be > 1 (containerLogMaxFiles, --container-log-max-files)"
    );
}
