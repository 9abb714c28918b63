//! Shared helpers for integration tests: `mod support;` in a test binary.
//! Not every binary uses every helper.
#![allow(dead_code)]

pub mod apiserver;
pub mod containerd;
pub mod cri_requests;
pub mod logind;
pub mod process;
pub mod registry;
pub mod runtime_view;

use std::path::{Path, PathBuf};

/// The repository root (where Cargo.toml is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Reports a skipped test: written straight to the process's stderr (not
/// through the test harness's capture) so it shows in every run. Under CI
/// (`CI` set) a skip is a failure: CI must run every test.
pub fn skip(test: &str, why: &str) {
    use std::io::Write as _;
    if std::env::var_os("CI").is_some() {
        panic!("{test} cannot run here ({why}), and CI must not skip tests");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Mount points of the cgroup hierarchies: (controllers, mount point); the
/// unified (v2) hierarchy has an empty controller list.
pub fn cgroup_mounts() -> Vec<(Vec<String>, PathBuf)> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in info.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        let (Some(mount), Some(fstype)) = (pre.get(4), post.first()) else {
            continue;
        };
        match *fstype {
            "cgroup2" => out.push((Vec::new(), PathBuf::from(mount))),
            "cgroup" => {
                let opts = post.get(2).copied().unwrap_or_default();
                let controllers = opts
                    .split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                    .map(str::to_string)
                    .collect();
                out.push((controllers, PathBuf::from(mount)));
            }
            _ => {}
        }
    }
    out
}

/// The file `v1_file` of controller `v1_controller` (cgroup v1), or
/// `v2_file` (unified hierarchy), for the cgroup process `pid` is in — read
/// via /proc/<pid>/cgroup so it works whatever the cgroup layout.
pub fn cgroup_file_of_pid(
    pid: u32,
    v1_controller: &str,
    v1_file: &str,
    v2_file: &str,
) -> Option<PathBuf> {
    let membership = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mounts = cgroup_mounts();
    // Prefer the v1 controller when the controller is mounted as v1.
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrls.split(',').any(|c| c == v1_controller)
            && let Some((_, mnt)) = mounts
                .iter()
                .find(|(cs, _)| cs.iter().any(|c| c == v1_controller))
        {
            return Some(join_cgroup(mnt, path).join(v1_file));
        }
    }
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (id, _, path) = (parts.next()?, parts.next()?, parts.next()?);
        if id == "0"
            && let Some((_, mnt)) = mounts.iter().find(|(cs, _)| cs.is_empty())
        {
            return Some(join_cgroup(mnt, path).join(v2_file));
        }
    }
    None
}

fn join_cgroup(mount: &Path, path: &str) -> PathBuf {
    mount.join(path.trim_start_matches('/'))
}

/// Polls `f` every 100 ms until it returns `Some` or `within` passes.
pub async fn eventually<T, F, Fut>(within: std::time::Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
