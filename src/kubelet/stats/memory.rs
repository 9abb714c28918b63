//! Memory of a cgroup as the kubelet's summary reports it: usage, and the
//! working set (usage less the inactive file cache: `total_inactive_file` on
//! cgroup v1, `inactive_file` on v2), read from the cgroup's files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A cgroup or /proc file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryReadError {
    #[error("read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parse {path}: {detail}")]
    Parse { path: PathBuf, detail: String },
}

fn read(path: &Path) -> Result<String, MemoryReadError> {
    std::fs::read_to_string(path).map_err(|source| MemoryReadError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn read_u64(path: &Path) -> Result<u64, MemoryReadError> {
    let text = read(path)?;
    text.trim().parse().map_err(|e| MemoryReadError::Parse {
        path: path.to_path_buf(),
        detail: format!("{e}: {:?}", text.trim()),
    })
}

/// The `key value` lines of a `memory.stat` (or any flat keyed) file.
pub fn read_memory_stat(path: &Path) -> Result<BTreeMap<String, u64>, MemoryReadError> {
    let text = read(path)?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?))
        })
        .collect())
}

/// (usage, working set) of a cgroup v1 memory cgroup directory.
pub fn cgroup_v1_working_set(dir: &Path) -> Result<(u64, u64), MemoryReadError> {
    let usage = read_u64(&dir.join("memory.usage_in_bytes"))?;
    let stat = read_memory_stat(&dir.join("memory.stat"))?;
    let inactive = stat.get("total_inactive_file").copied().unwrap_or(0);
    Ok((usage, usage.saturating_sub(inactive)))
}

/// (usage, working set) of a cgroup v2 directory.
pub fn cgroup_v2_working_set(dir: &Path) -> Result<(u64, u64), MemoryReadError> {
    let usage = read_u64(&dir.join("memory.current"))?;
    let stat = read_memory_stat(&dir.join("memory.stat"))?;
    let inactive = stat.get("inactive_file").copied().unwrap_or(0);
    Ok((usage, usage.saturating_sub(inactive)))
}

/// The memory limit of a cgroup directory; `None` when unlimited.
pub fn cgroup_memory_limit(dir: &Path, unified: bool) -> Result<Option<u64>, MemoryReadError> {
    if unified {
        let path = dir.join("memory.max");
        let text = read(&path)?;
        let text = text.trim();
        if text == "max" {
            return Ok(None);
        }
        return text.parse().map(Some).map_err(|e| MemoryReadError::Parse {
            path,
            detail: format!("{e}: {text:?}"),
        });
    }
    let limit = read_u64(&dir.join("memory.limit_in_bytes"))?;
    // v1 reports "no limit" as the largest page-aligned i64.
    Ok((limit < (1u64 << 62)).then_some(limit))
}

/// `/proc/meminfo` values in bytes (`MemTotal`, `MemFree`, `Inactive(file)` …).
pub fn read_meminfo(path: &Path) -> Result<BTreeMap<String, u64>, MemoryReadError> {
    let text = read(path)?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (key, rest) = l.split_once(':')?;
            let mut it = rest.split_whitespace();
            let value: u64 = it.next()?.parse().ok()?;
            let factor = if it.next() == Some("kB") { 1024 } else { 1 };
            Some((key.trim().to_string(), value.saturating_mul(factor)))
        })
        .collect())
}

/// (usage, working set) of the whole machine on cgroup v2, whose root has no
/// `memory.current`: used memory from meminfo, the inactive file cache from
/// the root `memory.stat` when the kernel has one, else from meminfo.
pub fn unified_root_working_set(
    cgroup_root: &Path,
    meminfo: &Path,
) -> Result<(u64, u64), MemoryReadError> {
    let info = read_meminfo(meminfo)?;
    let total = info.get("MemTotal").copied().unwrap_or(0);
    let free = info.get("MemFree").copied().unwrap_or(0);
    let usage = total.saturating_sub(free);
    let inactive = read_memory_stat(&cgroup_root.join("memory.stat"))
        .ok()
        .and_then(|s| s.get("inactive_file").copied())
        .or_else(|| info.get("Inactive(file)").copied())
        .unwrap_or(0);
    Ok((usage, usage.saturating_sub(inactive)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_working_sets_subtract_inactive_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("memory.usage_in_bytes"), "1000\n").unwrap();
        std::fs::write(p.join("memory.current"), "2000\n").unwrap();
        std::fs::write(
            p.join("memory.stat"),
            "cache 10\ninactive_file 300\ntotal_inactive_file 400\n",
        )
        .unwrap();
        assert_eq!(cgroup_v1_working_set(p).unwrap(), (1000, 600));
        assert_eq!(cgroup_v2_working_set(p).unwrap(), (2000, 1700));
        std::fs::write(p.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_memory_limit(p, false).unwrap(), None);
        std::fs::write(p.join("memory.limit_in_bytes"), "4096\n").unwrap();
        assert_eq!(cgroup_memory_limit(p, false).unwrap(), Some(4096));
        std::fs::write(p.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_memory_limit(p, true).unwrap(), None);
        std::fs::write(p.join("memory.max"), "8192\n").unwrap();
        assert_eq!(cgroup_memory_limit(p, true).unwrap(), Some(8192));
    }

    #[test]
    fn meminfo_is_in_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("meminfo");
        std::fs::write(
            &f,
            "MemTotal: 100 kB\nMemFree: 40 kB\nInactive(file): 10 kB\n",
        )
        .unwrap();
        let root = dir.path().join("nocgroup");
        assert_eq!(
            unified_root_working_set(&root, &f).unwrap(),
            (60 * 1024, 50 * 1024)
        );
    }
}
