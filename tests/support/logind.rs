//! A private system bus for tests: Debian's `dbus-daemon` on a socket in a
//! temp dir, and a systemd-logind double on it that speaks the real
//! org.freedesktop.login1.Manager interface the kubelet uses (Inhibit,
//! InhibitDelayMaxUSec, PrepareForShutdown). An inhibitor's file
//! descriptor is the write end of a pipe, as logind's is: the double sees
//! the kubelet release it when the pipe hangs up.

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct SystemBus {
    child: Child,
    _dir: tempfile::TempDir,
    /// `unix:path=…`, for DBUS_SYSTEM_BUS_ADDRESS.
    pub address: String,
}

impl Drop for SystemBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const CONFIG: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=SOCKET</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#;

impl SystemBus {
    /// Starts the bus; `None` (after a SKIPPED line) without dbus-daemon
    /// outside CI.
    pub fn start(test: &str) -> Option<SystemBus> {
        if Command::new("dbus-daemon")
            .arg("--version")
            .output()
            .is_err()
        {
            super::skip(test, "dbus-daemon is not installed (deploy/rig/install.sh)");
            return None;
        }
        let dir = tempfile::tempdir().expect("bus dir");
        let socket = dir.path().join("system_bus_socket");
        let config = dir.path().join("system.conf");
        std::fs::write(
            &config,
            CONFIG.replace("SOCKET", &socket.display().to_string()),
        )
        .expect("bus config");
        let child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .arg("--nofork")
            .arg("--nopidfile")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("dbus-daemon");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "dbus-daemon never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(SystemBus {
            child,
            address: format!("unix:path={}", socket.display()),
            _dir: dir,
        })
    }
}

/// What the double saw.
#[derive(Default)]
pub struct LogindState {
    delay_usec: u64,
    /// (what, who, why, mode) of every Inhibit call.
    pub inhibits: Mutex<Vec<(String, String, String, String)>>,
    /// The read ends of the inhibitors handed out.
    read_ends: Mutex<Vec<OwnedFd>>,
}

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

struct Manager(Arc<LogindState>);

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    async fn inhibit(
        &self,
        what: &str,
        who: &str,
        why: &str,
        mode: &str,
    ) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
        self.0.inhibits.lock().unwrap().push((
            what.to_string(),
            who.to_string(),
            why.to_string(),
            mode.to_string(),
        ));
        let (r, w) = std::io::pipe().map_err(|e| zbus::fdo::Error::IOError(e.to_string()))?;
        self.0.read_ends.lock().unwrap().push(OwnedFd::from(r));
        Ok(zbus::zvariant::OwnedFd::from(OwnedFd::from(w)))
    }

    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> u64 {
        self.0.delay_usec
    }

    #[zbus(signal, name = "PrepareForShutdown")]
    async fn prepare_for_shutdown(
        emitter: &zbus::object_server::SignalEmitter<'_>,
        start: bool,
    ) -> zbus::Result<()>;
}

const PATH: &str = "/org/freedesktop/login1";

/// The logind double, serving org.freedesktop.login1 on `bus`.
pub struct Logind {
    conn: zbus::Connection,
    pub state: Arc<LogindState>,
}

impl Logind {
    pub async fn start(bus: &SystemBus, inhibit_delay_max: Duration) -> Logind {
        let state = Arc::new(LogindState {
            delay_usec: inhibit_delay_max.as_micros() as u64,
            ..Default::default()
        });
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .expect("bus address")
            .name("org.freedesktop.login1")
            .expect("name")
            .serve_at(PATH, Manager(state.clone()))
            .expect("serve")
            .build()
            .await
            .expect("logind double on the bus");
        Logind { conn, state }
    }

    /// Emits PrepareForShutdown(`start`).
    pub async fn prepare_for_shutdown(&self, start: bool) {
        let iface = self
            .conn
            .object_server()
            .interface::<_, Manager>(PATH)
            .await
            .expect("interface");
        Manager::prepare_for_shutdown(iface.signal_emitter(), start)
            .await
            .expect("signal");
    }

    /// How many inhibitors are held now.
    pub fn held(&self) -> usize {
        self.state
            .read_ends
            .lock()
            .unwrap()
            .iter()
            .filter(|f| held(f))
            .count()
    }

    pub fn inhibit_calls(&self) -> Vec<(String, String, String, String)> {
        self.state.inhibits.lock().unwrap().clone()
    }
}
