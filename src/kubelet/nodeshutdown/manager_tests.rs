//! The manager over a fake logind and a fake pod killer (paused time): the
//! inhibitor's life, the state the admission and the Ready condition read,
//! pods stopped by priority range within their grace, the drop-in when
//! logind's maximum is too short, reconnection.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodSpec};
use tokio::sync::mpsc;

use super::*;
use crate::apis::config::types::ShutdownGracePeriodByPodPriority;
use crate::kubelet::events::{EventRecorder, EventType, NodeEvents};
use crate::util::clock::RealClock;
use crate::util::lifecycle::TaskSet;

/// Whether the write end of an inhibitor pipe is still open somewhere.
fn held(read_end: &OwnedFd) -> bool {
    let mut fds = [libc::pollfd {
        fd: read_end.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one valid pollfd, no timeout.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) };
    n == 0 || fds[0].revents & libc::POLLHUP == 0
}

#[derive(Default)]
struct Bus {
    delay: Mutex<Duration>,
    /// What a reload sets the delay to.
    delay_after_reload: Mutex<Option<Duration>>,
    reloads: Mutex<usize>,
    connects: Mutex<usize>,
    /// The read ends of every inhibitor handed out.
    locks: Mutex<Vec<OwnedFd>>,
    /// The signal sender of the newest session.
    signals: Mutex<Option<mpsc::UnboundedSender<bool>>>,
}

impl Bus {
    fn held_locks(&self) -> usize {
        self.locks
            .lock()
            .unwrap()
            .iter()
            .filter(|f| held(f))
            .count()
    }
    fn signal(&self, v: bool) {
        let tx = self.signals.lock().unwrap().clone().expect("a session");
        tx.send(v).expect("session alive");
    }
    fn end_session(&self) {
        self.signals.lock().unwrap().take();
    }
}

struct Conn(Arc<Bus>);

#[async_trait]
impl LogindBus for Arc<Bus> {
    async fn connect(&self) -> Result<Box<dyn Logind>, ShutdownError> {
        *self.connects.lock().unwrap() += 1;
        Ok(Box::new(Conn(self.clone())))
    }
}

#[async_trait]
impl Logind for Conn {
    async fn current_inhibit_delay(&self) -> Result<Duration, ShutdownError> {
        Ok(*self.0.delay.lock().unwrap())
    }
    async fn inhibit_shutdown(&self) -> Result<InhibitLock, ShutdownError> {
        let (r, w) = std::io::pipe().expect("pipe");
        self.0.locks.lock().unwrap().push(OwnedFd::from(r));
        Ok(InhibitLock::new(OwnedFd::from(w)))
    }
    async fn reload_logind_conf(&self) -> Result<(), ShutdownError> {
        *self.0.reloads.lock().unwrap() += 1;
        if let Some(d) = *self.0.delay_after_reload.lock().unwrap() {
            *self.0.delay.lock().unwrap() = d;
        }
        Ok(())
    }
    async fn monitor_shutdown(&self) -> Result<BoxStream<'static, bool>, ShutdownError> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.0.signals.lock().unwrap() = Some(tx);
        Ok(tokio_stream::wrappers::UnboundedReceiverStream::new(rx).boxed())
    }
}

/// Kills take `secs` of (paused) time per pod name, recorded with when
/// they began and the grace they were given.
#[derive(Default)]
struct Killer {
    takes: Mutex<Vec<(String, u64)>>,
    kills: Mutex<Vec<(String, i64, Duration)>>,
}

#[async_trait]
impl ShutdownKiller for Killer {
    async fn kill_for_shutdown(&self, pod: &Arc<Pod>, grace: i64) -> Result<(), ShutdownError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let started = tokio::time::Instant::now();
        self.kills
            .lock()
            .unwrap()
            .push((name.clone(), grace, started.elapsed()));
        let secs = (self.takes.lock().unwrap().iter())
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(secs)).await;
        Ok(())
    }
}

#[derive(Default)]
struct Events(Mutex<Vec<(String, String)>>);

impl EventRecorder for Events {
    fn event(&self, object: &ObjectReference, _t: EventType, reason: &str, message: &str) {
        assert_eq!(object.kind.as_deref(), Some("Node"));
        self.0
            .lock()
            .unwrap()
            .push((reason.to_string(), message.to_string()));
    }
}

fn pod(name: &str, priority: i32, grace: Option<i64>) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("ns".into());
    p.spec = Some(PodSpec {
        priority: Some(priority),
        termination_grace_period_seconds: grace,
        ..Default::default()
    });
    Arc::new(p)
}

struct Rig {
    bus: Arc<Bus>,
    killer: Arc<Killer>,
    events: Arc<Events>,
    manager: Arc<ShutdownManager>,
    dir: tempfile::TempDir,
    tasks: TaskSet,
}

fn rig(ranges: &[(i32, i64)], delay: Duration, pods: Vec<Arc<Pod>>) -> Rig {
    let dir = tempfile::tempdir().expect("tempdir");
    let bus = Arc::new(Bus::default());
    *bus.delay.lock().unwrap() = delay;
    let killer = Arc::new(Killer::default());
    let events = Arc::new(Events::default());
    let by: Vec<ShutdownGracePeriodByPodPriority> = ranges
        .iter()
        .map(|&(priority, s)| ShutdownGracePeriodByPodPriority {
            priority,
            shutdown_grace_period_seconds: s,
        })
        .collect();
    let manager = ShutdownManager::new(
        ShutdownConfig {
            ranges: ShutdownRanges::from_config(&by, true, Duration::ZERO, Duration::ZERO),
            logind_conf_dir: dir.path().join("logind.conf.d"),
            state_file: Some(StateFile::in_dir(dir.path())),
        },
        ShutdownDeps {
            bus: Arc::new(bus.clone()),
            killer: killer.clone(),
            active_pods: Arc::new(move || pods.clone()),
            events: NodeEvents::new(events.clone(), "node-a"),
            clock: Arc::new(RealClock),
        },
    );
    Rig {
        bus,
        killer,
        events,
        manager,
        dir,
        tasks: TaskSet::new(),
    }
}

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_pods_by_priority_within_their_grace_then_releases_the_inhibitor() {
    let r = rig(
        &[(0, 10), (1000, 5), (2_000_000_000, 3)],
        Duration::from_secs(60),
        vec![
            pod("critical", 2_000_001_000, None),
            pod("low", 0, Some(30)),
            pod("quick", 500, Some(2)),
            pod("mid", 1000, None),
        ],
    );
    // "low" outlives its range's 10 s; "mid" takes 1 s.
    *r.killer.takes.lock().unwrap() = vec![("low".into(), 60), ("mid".into(), 1)];
    let mut status = r.manager.status();
    r.manager.start(&r.tasks).await.expect("start");
    assert_eq!(r.bus.held_locks(), 1);
    assert!(!status.shutting_down());
    assert!(status.admit(&pod("new", 0, None)).admit);
    assert!(status.errors().is_empty());

    let t0 = tokio::time::Instant::now();
    r.bus.signal(true);
    assert!(status.changed().await);
    assert!(status.shutting_down());
    let refused = status.admit(&pod("new", 0, None));
    assert_eq!(
        (
            refused.admit,
            refused.reason.as_str(),
            refused.message.as_str()
        ),
        (
            false,
            "NodeShutdown",
            "Pod was rejected as the node is shutting down."
        )
    );
    assert_eq!(status.errors(), vec!["node is shutting down".to_string()]);
    // The lowest range first, its pods together, the inhibitor held.
    settle().await;
    assert_eq!(r.bus.held_locks(), 1);
    // The lowest range waits its 10 s for "low", then the next range.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(
        r.killer.kills.lock().unwrap().len(),
        2,
        "only the lowest range so far"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    settle().await;
    let kills: Vec<(String, i64)> = (r.killer.kills.lock().unwrap().iter())
        .map(|(n, g, _)| (n.clone(), *g))
        .collect();
    // Each pod's grace: its range's, or its own when shorter.
    assert_eq!(
        kills,
        vec![
            ("low".to_string(), 10),
            ("quick".to_string(), 2),
            ("mid".to_string(), 5),
        ]
    );
    // "mid" takes 1 s: the critical range follows at once, then the
    // inhibitor goes.
    assert_eq!(r.bus.held_locks(), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(
        r.killer
            .kills
            .lock()
            .unwrap()
            .last()
            .map(|k| (k.0.clone(), k.1)),
        Some(("critical".to_string(), 3))
    );
    assert_eq!(r.bus.held_locks(), 0, "released after the last range");
    assert!(t0.elapsed() < Duration::from_secs(12));
    assert_eq!(
        r.events.0.lock().unwrap().clone(),
        vec![(
            "Shutdown".to_string(),
            "Shutdown manager detected shutdown event".to_string()
        )]
    );
    let state = StateFile::in_dir(r.dir.path()).load().expect("state");
    assert!(state.start.is_some() && state.end.is_some() && state.end >= state.start);
    let gauges = crate::metrics::render_text();
    for family in [
        "kubelet_graceful_shutdown_start_time_seconds ",
        "kubelet_graceful_shutdown_end_time_seconds ",
    ] {
        let value: f64 = gauges
            .lines()
            .find_map(|l| l.strip_prefix(family))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(value > 1_600_000_000.0, "{family}{value}");
    }

    // Cancelled: admitted again, the inhibitor taken again.
    r.bus.signal(false);
    assert!(status.changed().await);
    settle().await;
    assert!(!status.shutting_down());
    assert_eq!(r.bus.held_locks(), 1);
    assert_eq!(
        r.events.0.lock().unwrap().last().map(|e| e.1.clone()),
        Some("Shutdown manager detected shutdown cancellation".to_string())
    );
}

#[tokio::test(start_paused = true)]
async fn a_short_logind_maximum_is_raised_by_a_drop_in_or_refused() {
    let r = rig(
        &[(0, 20), (2_000_000_000, 10)],
        Duration::from_secs(5),
        vec![],
    );
    *r.bus.delay_after_reload.lock().unwrap() = Some(Duration::from_secs(30));
    r.manager.start(&r.tasks).await.expect("raised");
    let conf = std::fs::read_to_string(r.dir.path().join("logind.conf.d/99-kubelet.conf"))
        .expect("drop-in");
    assert!(conf.contains("[Login]\nInhibitDelayMaxSec=30\n"), "{conf}");
    assert_eq!(*r.bus.reloads.lock().unwrap(), 1);
    assert_eq!(r.bus.held_locks(), 1);

    let r = rig(
        &[(0, 20), (2_000_000_000, 10)],
        Duration::from_secs(5),
        vec![],
    );
    let err = r.manager.start(&r.tasks).await.expect_err("still short");
    assert!(
        err.to_string().contains(
            "unable to update logind InhibitDelayMaxSec to 30s (ShutdownGracePeriod), current value of InhibitDelayMaxSec (5s)"
        ),
        "{err}"
    );
    assert_eq!(r.bus.held_locks(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_ended_session_is_reopened_a_second_later() {
    let r = rig(&[(0, 20)], Duration::from_secs(60), vec![]);
    r.manager.start(&r.tasks).await.expect("start");
    assert_eq!(*r.bus.connects.lock().unwrap(), 1);
    r.bus.end_session();
    settle().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    settle().await;
    assert_eq!(*r.bus.connects.lock().unwrap(), 2);
    assert_eq!(
        r.bus.held_locks(),
        1,
        "the old inhibitor went with its session"
    );
    r.bus.signal(true);
    let mut status = r.manager.status();
    let _ = tokio::time::timeout(Duration::from_secs(1), status.changed()).await;
    assert!(r.manager.status().shutting_down());
    r.tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(1))
        .await
        .expect("stops");
}
