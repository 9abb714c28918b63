//! Kernel memcg threshold notification (cgroup v1, `kernelMemcgNotification`):
//! an eventfd registered through `cgroup.event_control` on a memory cgroup's
//! `memory.usage_in_bytes` fires when usage crosses the level at which the
//! memory eviction threshold would be met, so the manager synchronizes at
//! once instead of at its next interval. cgroup v2 has no such interface;
//! there the manager relies on its interval alone, as Go does.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::threshold::{Threshold, get_threshold_quantity};
use crate::kubelet::stats::MemoryStats;
use crate::util::quantity::Quantity;

/// The cgroup file whose crossing is watched.
pub const MEMORY_USAGE_ATTRIBUTE: &str = "memory.usage_in_bytes";

/// A notifier that could not be set up or failed while waiting.
#[derive(Debug, thiserror::Error)]
pub enum MemcgError {
    #[error("memcg notifier {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("memcg notifier: stats incomplete, need usage, working set and available bytes")]
    IncompleteStats,
}

/// The `memory.usage_in_bytes` level at which `threshold` is met: usage
/// counts the inactive file cache the working set leaves out, so the level
/// is capacity − threshold quantity + inactive file.
pub fn memcg_threshold(threshold: &Threshold, memory: &MemoryStats) -> Result<i64, MemcgError> {
    let (Some(usage), Some(ws), Some(available)) = (
        memory.usage_bytes,
        memory.working_set_bytes,
        memory.available_bytes,
    ) else {
        return Err(MemcgError::IncompleteStats);
    };
    let inactive_file = usage.saturating_sub(ws) as i64;
    let capacity = Quantity::from_binary((available + ws) as i64);
    let quantity = get_threshold_quantity(&threshold.value, &capacity);
    Ok(capacity.value() - quantity.value() + inactive_file)
}

/// One registered eventfd on a memory cgroup.
pub struct CgroupNotifier {
    path: PathBuf,
    fd: AsyncFd<OwnedFd>,
}

impl CgroupNotifier {
    /// Registers an eventfd that fires when `attribute` of the cgroup at
    /// `dir` crosses `threshold` (blocking: a few small file writes).
    pub fn register(dir: &Path, attribute: &str, threshold: i64) -> Result<Self, MemcgError> {
        let io = |path: PathBuf| move |source| MemcgError::Io { path, source };
        let watch_path = dir.join(attribute);
        let watch = std::fs::File::open(&watch_path).map_err(io(watch_path.clone()))?;
        let control_path = dir.join("cgroup.event_control");
        let mut control = std::fs::OpenOptions::new()
            .write(true)
            .open(&control_path)
            .map_err(io(control_path.clone()))?;
        // SAFETY: eventfd(2) returns a new descriptor we own, or -1.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(MemcgError::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: `raw` is a valid descriptor nothing else owns.
        let eventfd = unsafe { OwnedFd::from_raw_fd(raw) };
        let line = format!(
            "{} {} {}",
            eventfd.as_raw_fd(),
            watch.as_raw_fd(),
            threshold
        );
        control
            .write_all(line.as_bytes())
            .map_err(io(control_path))?;
        // SAFETY: the descriptor is owned by the `OwnedFd` moved into the
        // `AsyncFd`, stays open until it is dropped, and `as_raw_fd` always
        // returns that same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(eventfd, Interest::READABLE) }.map_err(
            |e| MemcgError::Io {
                path: dir.to_path_buf(),
                source: e.into_parts().1,
            },
        )?;
        Ok(CgroupNotifier {
            path: dir.to_path_buf(),
            fd,
        })
    }

    /// Resolves when the threshold is crossed (either way).
    pub async fn crossed(&self) -> Result<(), MemcgError> {
        loop {
            let mut guard = self.fd.readable().await.map_err(|source| MemcgError::Io {
                path: self.path.clone(),
                source,
            })?;
            let mut buf = [0u8; 8];
            match guard.try_io(|inner| {
                nix::unistd::read(inner.get_ref(), &mut buf).map_err(std::io::Error::from)
            }) {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(source)) => {
                    return Err(MemcgError::Io {
                        path: self.path.clone(),
                        source,
                    });
                }
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::eviction::threshold::Signal;
    use crate::kubelet::eviction::threshold::parse_threshold_statement;

    #[test]
    fn threshold_level_adds_back_the_inactive_file_cache() {
        let mib = 1024 * 1024;
        let memory = MemoryStats {
            usage_bytes: Some(700 * mib),
            working_set_bytes: Some(500 * mib),
            available_bytes: Some(1500 * mib),
            ..Default::default()
        };
        let t = parse_threshold_statement(Signal::MemoryAvailable, "100Mi")
            .unwrap()
            .unwrap();
        // capacity 2000Mi − 100Mi + 200Mi inactive file.
        assert_eq!(memcg_threshold(&t, &memory).unwrap(), (2100 * mib) as i64);
        let t = parse_threshold_statement(Signal::MemoryAvailable, "10%")
            .unwrap()
            .unwrap();
        // 10% of 2000Mi as Go rounds it (float32 percentage, truncated).
        let ten_percent = ((2000 * mib) as f64 * f64::from(0.1f32)) as i64;
        assert_eq!(
            memcg_threshold(&t, &memory).unwrap(),
            (2000 * mib) as i64 - ten_percent + (200 * mib) as i64
        );
        assert!(memcg_threshold(&t, &MemoryStats::default()).is_err());
    }
}
