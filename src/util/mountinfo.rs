//! /proc/<pid>/mountinfo: one parser for every reader (cgroup layout, file
//! system of a directory, volume mounts).
//!
//! A line reads `id parent major:minor root mountpoint options [optional
//! fields...] - fstype source superoptions`.

use std::path::{Path, PathBuf};

/// One line of a mountinfo file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    pub id: u32,
    pub parent_id: u32,
    /// `major:minor` of the device.
    pub major_minor: String,
    /// The root of the mount within its file system.
    pub root: String,
    pub mount_point: PathBuf,
    /// Per-mount options (`rw`, `relatime`, ...).
    pub options: Vec<String>,
    /// Optional fields (`shared:1`, `master:2`, ...).
    pub optional_fields: Vec<String>,
    pub fs_type: String,
    pub source: String,
    /// Per-superblock options (`size=...`, `pagesize=2M`, ...).
    pub super_options: Vec<String>,
}

/// Decodes the octal escapes (`\040`) the kernel writes for spaces, tabs,
/// newlines and backslashes in paths.
fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = u32::from(bytes[i + 1] - b'0') * 64
                + u32::from(bytes[i + 2] - b'0') * 8
                + u32::from(bytes[i + 3] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One mountinfo line; `None` when it is malformed.
pub fn parse_mountinfo_line(line: &str) -> Option<MountInfo> {
    let (pre, post) = line.split_once(" - ")?;
    let pre: Vec<&str> = pre.split(' ').collect();
    let post: Vec<&str> = post.split(' ').collect();
    if pre.len() < 6 || post.len() < 2 {
        return None;
    }
    let (Ok(id), Ok(parent_id)) = (pre[0].parse(), pre[1].parse()) else {
        return None;
    };
    Some(MountInfo {
        id,
        parent_id,
        major_minor: pre[2].to_string(),
        root: unescape_octal(pre[3]),
        mount_point: PathBuf::from(unescape_octal(pre[4])),
        options: pre[5].split(',').map(str::to_string).collect(),
        optional_fields: pre[6..]
            .iter()
            .filter(|f| !f.is_empty())
            .map(|f| f.to_string())
            .collect(),
        fs_type: post[0].to_string(),
        source: unescape_octal(post[1]),
        super_options: post
            .get(2)
            .map(|o| o.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
    })
}

/// Parses the text of a mountinfo file; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

/// The mount holding `path`: the longest mount point that contains it (the
/// last one listed among equals, as it is mounted over the others).
pub fn find_mount_info<'a>(path: &Path, mounts: &'a [MountInfo]) -> Option<&'a MountInfo> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
42 22 0:39 / /tmp/a\\040b rw,relatime shared:2 master:1 - tmpfs tmpfs rw,size=1024k
43 22 0:40 / /dev/hugepages rw,relatime - hugetlbfs hugetlbfs rw,pagesize=2M
bogus line
";

    #[test]
    fn mountinfo_is_parsed() {
        let m = parse_mountinfo(SAMPLE);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].mount_point, PathBuf::from("/"));
        assert_eq!(m[0].optional_fields, vec!["shared:1"]);
        assert_eq!(m[1].mount_point, PathBuf::from("/tmp/a b"));
        assert_eq!(m[1].fs_type, "tmpfs");
        assert_eq!(m[1].optional_fields, vec!["shared:2", "master:1"]);
        assert_eq!(m[1].super_options, vec!["rw", "size=1024k"]);
        assert_eq!(m[2].optional_fields, Vec::<String>::new());
        assert_eq!(m[2].super_options[1], "pagesize=2M");
        let found = find_mount_info(Path::new("/tmp/a b/c"), &m).expect("found");
        assert_eq!(found.id, 42);
        let found = find_mount_info(Path::new("/var/lib"), &m).expect("root");
        assert_eq!(found.id, 22);
    }

    #[test]
    fn line_escapes() {
        let e = parse_mountinfo_line("1 2 0:1 / /mnt/a\\040b rw - ext4 /dev/x rw").unwrap();
        assert_eq!(e.mount_point, PathBuf::from("/mnt/a b"));
        assert_eq!(e.fs_type, "ext4");
        assert_eq!(e.source, "/dev/x");
    }

    #[test]
    fn malformed_lines_table() {
        let cases = [
            "bogus line",
            "1 2 0:1 / /mnt rw ext4 /dev/x rw",
            "1 2 0:1 / /mnt - ext4 /dev/x rw",
            "x 2 0:1 / /mnt rw - ext4 /dev/x rw",
            "1 2 0:1 / /mnt rw - ext4",
        ];
        for line in cases {
            assert!(parse_mountinfo_line(line).is_none(), "{line:?}");
        }
    }
}
