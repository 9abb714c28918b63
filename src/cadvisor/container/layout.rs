//! Where a cgroup's files are: one directory per controller on cgroup v1,
//! one directory on the unified hierarchy (v2).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The host's cgroup mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLayout {
    /// Controller name (`cpu`, `cpuacct`, `memory`, `pids`, …) → mount point.
    V1(BTreeMap<String, PathBuf>),
    /// The unified mount.
    V2(PathBuf),
}

impl CgroupLayout {
    /// Whether this is the unified hierarchy.
    pub fn is_unified(&self) -> bool {
        matches!(self, CgroupLayout::V2(_))
    }

    /// The directory of cgroup `name` (`/kubepods/pod<uid>`) for
    /// `controller`; `None` when v1 has no such controller mounted.
    pub fn dir(&self, controller: &str, name: &str) -> Option<PathBuf> {
        let rel = Path::new(name.trim_start_matches('/'));
        match self {
            CgroupLayout::V1(mounts) => mounts.get(controller).map(|m| m.join(rel)),
            CgroupLayout::V2(mount) => Some(mount.join(rel)),
        }
    }

    /// The hierarchy the container tree is walked in: the memory
    /// controller's on v1 (every pod and container cgroup has one).
    pub fn walk_root(&self) -> Option<&Path> {
        match self {
            CgroupLayout::V1(mounts) => mounts.get("memory").map(PathBuf::as_path),
            CgroupLayout::V2(mount) => Some(mount),
        }
    }

    /// Every cgroup name at or below `name` in the walk hierarchy, parents
    /// before children (sorted by name), `name` first when it exists.
    pub fn subtree(&self, name: &str) -> Vec<String> {
        let Some(root) = self.walk_root() else {
            return Vec::new();
        };
        let base = name.trim_end_matches('/');
        let start = root.join(base.trim_start_matches('/'));
        if !start.is_dir() {
            return Vec::new();
        }
        let mut out = vec![if base.is_empty() {
            "/".to_string()
        } else {
            base.to_string()
        }];
        let mut stack = vec![(start, base.to_string())];
        while let Some((dir, cg)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut children: Vec<(PathBuf, String)> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| {
                    let child = format!("{cg}/{}", e.file_name().to_string_lossy());
                    (e.path(), child)
                })
                .collect();
            for (path, child) in children.drain(..) {
                out.push(child.clone());
                stack.push((path, child));
            }
        }
        // Sorted, a parent comes before its children.
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_and_subtrees_on_v1_and_v2() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        for d in ["kubepods/burstable/podA/c1", "kubepods/besteffort", "other"] {
            std::fs::create_dir_all(mem.join(d)).unwrap();
        }
        let v1 = CgroupLayout::V1(BTreeMap::from([
            ("memory".to_string(), mem.clone()),
            ("cpu".to_string(), tmp.path().join("cpu")),
        ]));
        assert_eq!(
            v1.dir("cpu", "/kubepods/x"),
            Some(tmp.path().join("cpu/kubepods/x"))
        );
        assert_eq!(v1.dir("pids", "/kubepods"), None);
        assert_eq!(
            v1.subtree("/kubepods"),
            vec![
                "/kubepods",
                "/kubepods/besteffort",
                "/kubepods/burstable",
                "/kubepods/burstable/podA",
                "/kubepods/burstable/podA/c1",
            ]
        );
        assert!(v1.subtree("/missing").is_empty());
        let v2 = CgroupLayout::V2(mem.clone());
        assert!(v2.is_unified());
        assert_eq!(v2.dir("memory", "/"), Some(mem.join("")));
        assert_eq!(v2.subtree("/").first().map(String::as_str), Some("/"));
        assert!(v2.subtree("/").contains(&"/other".to_string()));
    }
}
