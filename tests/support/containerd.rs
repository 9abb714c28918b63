//! A private containerd for one test: built on deploy/rig/containerd.sh, so
//! tests and people use the same rig. Each instance has its own root, state,
//! socket, CNI network (bridge, subnet) and cgroup root; dropping it removes
//! every sandbox and container through CRI, then stops containerd and cleans
//! what is left (shims, mounts, netns, iptables rules, cgroups, files).
//!
//! ```ignore
//! mod support;
//! let Some(rig) = support::containerd::Containerd::start("my_test") else { return };
//! let runtime = RemoteRuntimeService::connect(&rig.endpoint(), rig.timeout()).await?;
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use kubelet::cri::{RemoteRuntimeService, RuntimeService};

/// Image names the rig imports (from deploy/rig/images.env).
#[derive(Debug, Clone)]
pub struct Images {
    /// Sandbox image (`registry.k8s.io/pause:3.8`).
    pub pause: String,
    /// busybox-static with applets.
    pub busybox: String,
    /// The busybox image under its e2e name.
    pub busybox_e2e: String,
    /// busybox httpd serving an index on port 80, under the e2e name.
    pub httpd_e2e: String,
    /// A distinct image tests may delete.
    pub throwaway: String,
    /// A name that exists nowhere.
    pub absent: String,
}

const IMAGES_ENV: &str = include_str!("../../deploy/rig/images.env");

fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The image names, shared with the scripts.
pub fn images() -> &'static Images {
    static IMAGES: OnceLock<Images> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let env = parse_env(IMAGES_ENV);
        let get = |k: &str| {
            env.get(k)
                .cloned()
                .unwrap_or_else(|| panic!("deploy/rig/images.env lacks {k}"))
        };
        Images {
            pause: get("PAUSE_IMAGE"),
            busybox: get("BUSYBOX_IMAGE"),
            busybox_e2e: get("BUSYBOX_E2E_IMAGE"),
            httpd_e2e: get("HTTPD_E2E_IMAGE"),
            throwaway: get("THROWAWAY_IMAGE"),
            absent: get("ABSENT_IMAGE"),
        }
    })
}

fn rig_script() -> PathBuf {
    super::repo_root().join("deploy/rig/containerd.sh")
}

/// A running private containerd.
#[derive(Debug)]
pub struct Containerd {
    test: String,
    dir: PathBuf,
    env: HashMap<String, String>,
    keep: bool,
    stopped: bool,
}

impl Containerd {
    /// Starts a containerd for `test` and imports the test images; `None`
    /// (after a SKIPPED line) when not root. Any other failure panics with
    /// the rig's output, so a broken rig fails tests instead of skipping them.
    pub fn start(test: &str) -> Option<Containerd> {
        if !super::is_root() {
            super::skip(test, "needs root to run containerd");
            return None;
        }
        let base = std::env::var_os("KUBELET_RS_RIG_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&base).unwrap_or_else(|e| panic!("create {base:?}: {e}"));
        let dir = tempfile::Builder::new()
            .prefix("kubelet-rs-rig.")
            .tempdir_in(&base)
            .unwrap_or_else(|e| panic!("temp dir in {base:?}: {e}"))
            .keep();
        let mut rig = Containerd {
            test: test.to_string(),
            dir,
            env: HashMap::new(),
            keep: std::env::var_os("KUBELET_RS_RIG_KEEP").is_some(),
            stopped: false,
        };
        rig.script("start");
        let env_text = std::fs::read_to_string(rig.dir.join("rig.env"))
            .unwrap_or_else(|e| panic!("{}: rig.env: {e}", rig.test));
        rig.env = parse_env(&env_text);
        Some(rig)
    }

    fn script(&self, action: &str) -> String {
        let out = Command::new("bash")
            .arg(rig_script())
            .arg(action)
            .arg(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("{}: run containerd.sh {action}: {e}", self.test));
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "{}: containerd.sh {action} {} failed ({}):\n{stderr}\n--- containerd.log (last lines, newest first) ---\n{}",
                self.test,
                self.dir.display(),
                out.status,
                tail.join("\n")
            );
        }
        stderr
    }

    fn var(&self, key: &str) -> &str {
        self.env.get(key).map(String::as_str).unwrap_or_default()
    }

    /// `unix://` endpoint of the CRI socket.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// Path of the socket.
    pub fn socket(&self) -> PathBuf {
        PathBuf::from(self.var("RIG_SOCKET"))
    }

    /// The rig directory (config, log, root, state).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A request timeout suitable for tests.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(60)
    }

    /// The snapshotter in use (`overlayfs` or `native`).
    pub fn snapshotter(&self) -> &str {
        self.var("RIG_SNAPSHOTTER")
    }

    /// The pod subnet of this rig's CNI network (e.g. `10.244.3.0/24`).
    pub fn pod_subnet(&self) -> &str {
        self.var("RIG_POD_SUBNET")
    }

    /// Name of the top cgroup this rig owns (every sandbox goes below it).
    pub fn cgroup_root(&self) -> &str {
        self.var("RIG_CGROUP_ROOT")
    }

    /// A cgroup parent for a sandbox, below the rig's own root, in the
    /// cgroupfs form the kubelet passes (`/<root>/pod<uid>`).
    pub fn cgroup_parent(&self, pod_uid: &str) -> String {
        format!("/{}/pod{pod_uid}", self.cgroup_root())
    }

    /// A directory for pod logs, inside the rig directory.
    pub fn log_dir(&self, name: &str) -> PathBuf {
        let dir = self.dir.join("pod-logs").join(name);
        let _ = std::fs::create_dir_all(&dir);
        dir
    }

    /// Process id of containerd.
    pub fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.join("containerd.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills containerd with SIGKILL, as a crash would (shims survive).
    pub fn kill(&self) {
        let pid = self
            .pid()
            .unwrap_or_else(|| panic!("{}: containerd has no pid", self.test));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        for _ in 0..100 {
            if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(self.dir.join("containerd.pid"));
    }

    /// Starts containerd again on the same root, state and socket.
    pub fn restart(&self) {
        self.script("start");
    }

    /// The containerd log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    /// Removes every sandbox and container through CRI, so the runtime
    /// tears down networking properly (CNI DEL) before the script runs.
    fn remove_everything_via_cri(&self) {
        let endpoint = self.endpoint();
        let work = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async move {
                let svc = RemoteRuntimeService::new_lazy(
                    &endpoint,
                    Duration::from_secs(30),
                    std::sync::Arc::new(kubelet::util::clock::RealClock),
                )
                .ok()?;
                for sandbox in svc.list_pod_sandbox(None).await.ok()? {
                    let _ = svc.stop_pod_sandbox(&sandbox.id).await;
                    let _ = svc.remove_pod_sandbox(&sandbox.id).await;
                }
                for container in svc.list_containers(None).await.unwrap_or_default() {
                    let _ = svc.remove_container(&container.id).await;
                }
                Some(())
            })
        });
        let _ = work.join();
    }

    /// Stops and cleans up now (also done on drop).
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if self.pid().is_some() {
            self.remove_everything_via_cri();
        }
        self.script("stop");
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("{}: kept rig directory {}", self.test, self.dir.display());
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Keep the failure visible: clean up, but never panic twice.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.stop()));
            if result.is_err() {
                eprintln!(
                    "{}: rig clean-up failed in {}",
                    self.test,
                    self.dir.display()
                );
            }
        } else {
            self.stop();
        }
    }
}
