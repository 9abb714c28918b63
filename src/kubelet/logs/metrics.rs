//! `kubelet_container_log_filesystem_used_bytes`: the disk each container's
//! logs take under the pod logs root (`<ns>_<pod>_<uid>/<container>/`),
//! measured when /metrics is scraped (Go's log metrics collector).

use std::path::{Path, PathBuf};

use crate::kubelet::stats::dir_usage;
use crate::metrics::{Collector, Desc, GaugeVec, Stability};

/// The family's name.
pub const LOG_FILESYSTEM_USED_BYTES: &str = "kubelet_container_log_filesystem_used_bytes";

/// Collects the family from a pod logs root at each scrape (blocking
/// file-system walk; the /metrics handler renders off the runtime threads).
#[derive(Debug)]
pub struct LogMetricsCollector {
    root: PathBuf,
}

impl LogMetricsCollector {
    pub fn new(root: PathBuf) -> Self {
        LogMetricsCollector { root }
    }

    fn desc() -> Desc {
        Desc::new(
            LOG_FILESYSTEM_USED_BYTES,
            "Bytes a container's logs take on the filesystem.",
            &["container", "namespace", "pod", "uid"],
            Stability::Alpha,
        )
    }
}

fn dirs(path: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(path) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect()
}

impl Collector for LogMetricsCollector {
    fn name(&self) -> &str {
        LOG_FILESYSTEM_USED_BYTES
    }

    fn encode(&self, out: &mut String) {
        let gauge = GaugeVec::new(Self::desc());
        for (pod_dir, pod_path) in dirs(&self.root) {
            let mut parts = pod_dir.splitn(3, '_');
            let (Some(ns), Some(pod), Some(uid)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            for (container, path) in dirs(&pod_path) {
                if let Ok((bytes, _)) = dir_usage(&path) {
                    gauge.set(&[&container, ns, pod, uid], bytes as f64);
                }
            }
        }
        gauge.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_container_log_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let c = tmp.path().join("default_web_u-1/app");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("0.log"), vec![b'x'; 10_000]).unwrap();
        std::fs::create_dir_all(tmp.path().join("not-a-pod-dir/x")).unwrap();
        let mut out = String::new();
        LogMetricsCollector::new(tmp.path().to_path_buf()).encode(&mut out);
        let line = out
            .lines()
            .find(|l| l.starts_with(LOG_FILESYSTEM_USED_BYTES))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            line.starts_with(
                "kubelet_container_log_filesystem_used_bytes{container=\"app\",namespace=\"default\",pod=\"web\",uid=\"u-1\"} "
            ),
            "{line}"
        );
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(v >= 10_000.0, "{v}");
        assert_eq!(
            out.lines().filter(|l| !l.starts_with('#')).count(),
            1,
            "{out}"
        );
    }
}
