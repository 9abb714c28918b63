use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

/// A container that runs while the flag is set.
struct Flag(Arc<AtomicBool>);

#[async_trait::async_trait]
impl ContainerRunning for Flag {
    async fn is_running(&self, _id: &str) -> Result<bool, LogsError> {
        Ok(self.0.load(Ordering::SeqCst))
    }
}

const LOG: &str = "\
2026-11-22T08:00:01.000000001Z stdout F one\n\
2026-11-22T08:00:02.000000002Z stderr F two\n\
2026-11-22T08:00:03.000000003Z stdout P thr\n\
2026-11-22T08:00:03.500000000Z stdout F ee\n\
2026-11-22T08:00:04.000000004Z stdout F four\n";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

async fn read(text: &str, opts: LogOptions) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    std::fs::write(&path, text).unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    read_logs(
        &path,
        "id",
        &opts,
        &Flag(Arc::new(AtomicBool::new(false))),
        &tx,
    )
    .await
    .unwrap();
    drop(tx);
    let mut out = Vec::new();
    while let Some(b) = rx.recv().await {
        out.extend_from_slice(&b);
    }
    String::from_utf8(out).unwrap()
}

fn opts() -> LogOptions {
    LogOptions::new(&PodLogOptions::default(), ts("2026-11-22T09:00:00Z"))
}

#[tokio::test]
async fn options_table() {
    type Case = (&'static str, Box<dyn Fn(&mut LogOptions)>, &'static str);
    let cases: Vec<Case> = vec![
        ("all", Box::new(|_| {}), "one\ntwo\nthree\nfour\n"),
        ("tail 1", Box::new(|o| o.tail = 1), "four\n"),
        // Tail counts lines of the file: a partial line is a line.
        ("tail 2", Box::new(|o| o.tail = 2), "ee\nfour\n"),
        ("tail 0", Box::new(|o| o.tail = 0), ""),
        ("limit 6", Box::new(|o| o.bytes = 6), "one\ntw"),
        (
            "since",
            Box::new(|o| o.since = Some(ts("2026-11-22T08:00:02.5Z"))),
            "three\nfour\n",
        ),
        (
            "timestamps",
            Box::new(|o| {
                o.timestamp = true;
                o.tail = 3
            }),
            // The second half of a split line gets no prefix of its own.
            "2026-11-22T08:00:03.000000003Z three\n2026-11-22T08:00:04.000000004Z four\n",
        ),
    ];
    for (name, set, want) in cases {
        let mut o = opts();
        set(&mut o);
        assert_eq!(read(LOG, o).await, want, "{name}");
    }
}

#[test]
fn since_seconds_and_since_time() {
    let now = ts("2026-11-22T09:00:00Z");
    let later = ts("2026-11-22T08:59:50Z");
    let cases = [
        (Some(60), None, Some(ts("2026-11-22T08:59:00Z"))),
        (None, Some(later), Some(later)),
        (Some(60), Some(later), Some(later)),
        (Some(5), Some(later), Some(ts("2026-11-22T08:59:55Z"))),
        (None, None, None),
    ];
    for (secs, time, want) in cases {
        let o = LogOptions::new(
            &PodLogOptions {
                since_seconds: secs,
                since_time: time,
                ..Default::default()
            },
            now,
        );
        assert_eq!(o.since, want, "{secs:?} {time:?}");
    }
}

#[tokio::test]
async fn json_file_format_and_bad_lines() {
    let text = "{\"log\":\"a\\n\",\"stream\":\"stdout\",\"time\":\"2016-10-20T18:39:20.57606443Z\"}\n\
                not json\n\
                {\"log\":\"b\\n\",\"stream\":\"stderr\",\"time\":\"2016-10-20T18:39:21Z\"}\n";
    assert_eq!(read(text, opts()).await, "a\nb\n");
}

#[tokio::test]
async fn an_unknown_format_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    std::fs::write(&path, "plain text\n").unwrap();
    let (tx, _rx) = mpsc::channel(4);
    let err = read_logs(&path, "id", &opts(), &Flag(Arc::default()), &tx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unsupported log format"), "{err}");
    let err = read_logs(
        &dir.path().join("absent.log"),
        "id",
        &opts(),
        &Flag(Arc::default()),
        &tx,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LogsError::Resolve { .. }), "{err}");
}

/// A follower (`follow=true`) of `dir/0.log`, which starts with the line
/// "one", until [`Follower::stop`].
struct Follower {
    path: PathBuf,
    running: Arc<AtomicBool>,
    rx: mpsc::Receiver<Bytes>,
    reader: tokio::task::JoinHandle<Result<(), LogsError>>,
}

impl Follower {
    fn start(dir: &Path) -> Follower {
        let path = dir.join("0.log");
        std::fs::write(&path, "2026-11-22T08:00:01Z stdout F one\n").unwrap();
        let running = Arc::new(AtomicBool::new(true));
        let (tx, rx) = mpsc::channel(64);
        let mut o = opts();
        o.follow = true;
        let reader = {
            let (path, running) = (path.clone(), running.clone());
            tokio::spawn(async move { read_logs(&path, "id", &o, &Flag(running), &tx).await })
        };
        Follower {
            path,
            running,
            rx,
            reader,
        }
    }

    /// The next line sent, within 5 s.
    async fn next(&mut self) -> Bytes {
        tokio::time::timeout(Duration::from_secs(5), self.rx.recv())
            .await
            .unwrap()
            .unwrap()
    }

    /// The container stops: the follower ends at its next check.
    async fn stop(self) {
        self.running.store(false, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(5), self.reader)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

fn append(p: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[tokio::test]
async fn follow_streams_new_lines_and_rotation_until_the_container_stops() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = Follower::start(dir.path());
    let path = f.path.clone();
    assert_eq!(f.next().await, "one\n");
    // A line written in two parts arrives once, whole.
    append(&path, "2026-11-22T08:00:02Z stdout F t");
    tokio::time::sleep(Duration::from_millis(100)).await;
    append(&path, "wo\n");
    assert_eq!(f.next().await, "two\n");
    // The runtime rotates the file: the follower reopens it.
    std::fs::rename(&path, dir.path().join("0.log.1")).unwrap();
    std::fs::write(&path, "2026-11-22T08:00:03Z stderr F three\n").unwrap();
    assert_eq!(f.next().await, "three\n");
    append(&path, "2026-11-22T08:00:04Z stdout F last\n");
    assert_eq!(f.next().await, "last\n");
    f.stop().await;
}

/// The log manager's rotation: the live file is renamed, the runtime may
/// still write to it until the reopen, then writes to a new file. The
/// follower sends what the old file got last, then the new file's lines.
#[tokio::test]
async fn follow_finishes_the_rotated_file_before_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let rotated = dir.path().join("0.log.20261122-080000");
    let mut f = Follower::start(dir.path());
    let path = f.path.clone();
    assert_eq!(f.next().await, "one\n");
    // Let the follower wait on its watch first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    std::fs::rename(&path, &rotated).unwrap();
    append(&rotated, "2026-11-22T08:00:02Z stdout F late\n");
    std::fs::write(&path, "2026-11-22T08:00:03Z stdout F fresh\n").unwrap();
    assert_eq!(f.next().await, "late\n");
    assert_eq!(f.next().await, "fresh\n");
    // Rotated again, and compressed away: the follower stays on the path.
    std::fs::rename(&path, dir.path().join("0.log.20261122-080010")).unwrap();
    std::fs::remove_file(&rotated).unwrap();
    std::fs::write(&path, "2026-11-22T08:00:04Z stdout F again\n").unwrap();
    assert_eq!(f.next().await, "again\n");
    f.stop().await;
}

#[tokio::test]
async fn a_follower_stops_when_the_client_goes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    std::fs::write(&path, "2026-11-22T08:00:01Z stdout F one\n").unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    let mut o = opts();
    o.follow = true;
    let reader = tokio::spawn(async move {
        read_logs(&path, "id", &o, &Flag(Arc::new(AtomicBool::new(true))), &tx).await
    });
    assert_eq!(rx.recv().await.unwrap(), "one\n");
    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
