//! Mounting and mount-point queries (k8s.io/mount-utils), over mount(2) and
//! umount2(2) rather than the mount binaries, and /proc/self/mountinfo.

use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use crate::volume::error::VolumeError;

/// One line of /proc/self/mountinfo.
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

/// Decodes the octal escapes (`\040`) the kernel writes for special
/// characters in paths.
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
            let v = (bytes[i + 1] - b'0') as u32 * 64
                + (bytes[i + 2] - b'0') as u32 * 8
                + (bytes[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses the text of a mountinfo file; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 6 || post.len() < 2 {
            continue;
        }
        let (Ok(id), Ok(parent_id)) = (pre[0].parse(), pre[1].parse()) else {
            continue;
        };
        out.push(MountInfo {
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
        });
    }
    out
}

/// Mount operations the volume plugins need (mount.Interface).
pub trait MountInterface: Send + Sync {
    /// Mounts `source` on `target` with `-t fstype -o options` semantics.
    fn mount(
        &self,
        source: &str,
        target: &Path,
        fstype: &str,
        options: &[String],
    ) -> Result<(), VolumeError>;
    /// Unmounts `target`.
    fn unmount(&self, target: &Path) -> Result<(), VolumeError>;
    /// Cheap check: true unless `path` sits on another device than its
    /// parent. Bind mounts within one file system go undetected.
    fn is_likely_not_mount_point(&self, path: &Path) -> io::Result<bool>;
    /// Every mount of this mount namespace.
    fn list(&self) -> io::Result<Vec<MountInfo>>;
}

/// The host's mount table, through system calls.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemMounter;

/// Splits `-o` options into mount(2) flags and file-system data.
pub fn parse_mount_options(options: &[String]) -> (MsFlags, Vec<String>) {
    let mut flags = MsFlags::empty();
    let mut data = Vec::new();
    for o in options {
        match o.as_str() {
            "bind" => flags |= MsFlags::MS_BIND,
            "rbind" => flags |= MsFlags::MS_BIND | MsFlags::MS_REC,
            "ro" => flags |= MsFlags::MS_RDONLY,
            "rw" | "defaults" => {}
            "remount" => flags |= MsFlags::MS_REMOUNT,
            "nosuid" => flags |= MsFlags::MS_NOSUID,
            "nodev" => flags |= MsFlags::MS_NODEV,
            "noexec" => flags |= MsFlags::MS_NOEXEC,
            "noatime" => flags |= MsFlags::MS_NOATIME,
            "nodiratime" => flags |= MsFlags::MS_NODIRATIME,
            "relatime" => flags |= MsFlags::MS_RELATIME,
            "sync" => flags |= MsFlags::MS_SYNCHRONOUS,
            "private" => flags |= MsFlags::MS_PRIVATE,
            "rprivate" => flags |= MsFlags::MS_PRIVATE | MsFlags::MS_REC,
            "shared" => flags |= MsFlags::MS_SHARED,
            "rshared" => flags |= MsFlags::MS_SHARED | MsFlags::MS_REC,
            "slave" => flags |= MsFlags::MS_SLAVE,
            "rslave" => flags |= MsFlags::MS_SLAVE | MsFlags::MS_REC,
            other => data.push(other.to_string()),
        }
    }
    (flags, data)
}

fn mount_error(
    source: &str,
    target: &Path,
    fstype: &str,
    options: &[String],
    e: nix::Error,
) -> VolumeError {
    let mut args = String::new();
    if !fstype.is_empty() {
        args.push_str(&format!("-t {fstype} "));
    }
    if !options.is_empty() {
        args.push_str(&format!("-o {} ", options.join(",")));
    }
    VolumeError::other(format!(
        "mount failed: {}\nMounting arguments: {args}{source} {}",
        e.desc().to_lowercase(),
        target.display()
    ))
}

impl MountInterface for SystemMounter {
    fn mount(
        &self,
        source: &str,
        target: &Path,
        fstype: &str,
        options: &[String],
    ) -> Result<(), VolumeError> {
        let (flags, data) = parse_mount_options(options);
        let data = data.join(",");
        let fs = (!fstype.is_empty()).then_some(fstype);
        let data_opt = (!data.is_empty()).then_some(data.as_str());
        let err = |e| mount_error(source, target, fstype, options, e);
        let bind = flags.contains(MsFlags::MS_BIND);
        let extra = flags - (MsFlags::MS_BIND | MsFlags::MS_REC);
        if bind && !extra.is_empty() {
            // A bind mount takes its other flags only on a remount.
            nix::mount::mount(
                Some(source),
                target,
                fs,
                flags & (MsFlags::MS_BIND | MsFlags::MS_REC),
                data_opt,
            )
            .map_err(err)?;
            return nix::mount::mount(
                Some(source),
                target,
                fs,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | extra,
                data_opt,
            )
            .map_err(err);
        }
        nix::mount::mount(Some(source), target, fs, flags, data_opt).map_err(err)
    }

    fn unmount(&self, target: &Path) -> Result<(), VolumeError> {
        crate::vlog!(4, path = %target.display(), "Unmounting");
        nix::mount::umount2(target, MntFlags::empty()).map_err(|e| {
            VolumeError::other(format!(
                "unmount failed: {}\nUnmounting arguments: {}",
                e.desc().to_lowercase(),
                target.display()
            ))
        })
    }

    fn is_likely_not_mount_point(&self, path: &Path) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let st = std::fs::metadata(path)?;
        let text = path.to_string_lossy();
        let trimmed = text.strip_suffix('/').unwrap_or(&text);
        let parent = Path::new(trimmed)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let parent = if parent.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            parent
        };
        let root = std::fs::metadata(parent)?;
        Ok(st.dev() == root.dev())
    }

    fn list(&self) -> io::Result<Vec<MountInfo>> {
        Ok(parse_mountinfo(&std::fs::read_to_string(
            "/proc/self/mountinfo",
        )?))
    }
}

/// Whether `path` exists (following links). A corrupted mount (ENOTCONN,
/// ESTALE, EIO, EHOSTDOWN) counts as existing, with its error.
pub fn path_exists(path: &Path) -> Result<bool, io::Error> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Errors that mean the mount behind a path is broken.
pub fn is_corrupted_mnt(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOTCONN)
            | Some(libc::ESTALE)
            | Some(libc::EIO)
            | Some(libc::EACCES)
            | Some(libc::EHOSTDOWN)
    )
}

/// Thorough check (IsNotMountPoint): the device comparison first, then the
/// mount table for bind mounts within one file system.
pub fn is_not_mount_point(m: &dyn MountInterface, path: &Path) -> io::Result<bool> {
    let not_mnt = match m.is_likely_not_mount_point(path) {
        Ok(v) => v,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => true,
        Err(e) => return Err(e),
    };
    if !not_mnt {
        return Ok(false);
    }
    let resolved = std::fs::canonicalize(path)?;
    Ok(!m.list()?.iter().any(|mi| mi.mount_point == resolved))
}

/// Unmounts `path` if it is a mount point and removes it
/// (CleanupMountPoint). A missing path is fine.
pub fn cleanup_mount_point(
    path: &Path,
    m: &dyn MountInterface,
    extensive: bool,
) -> Result<(), VolumeError> {
    let corrupted = match path_exists(path) {
        Ok(false) => {
            tracing::warn!(path = %path.display(), "Unmount skipped because path does not exist");
            return Ok(());
        }
        Ok(true) => false,
        Err(e) if is_corrupted_mnt(&e) => true,
        Err(e) => {
            return Err(VolumeError::other(format!(
                "Error checking path: {}",
                VolumeError::io("stat", path, &e)
            )));
        }
    };
    if !corrupted && remove_path_if_not_mount_point(path, m, extensive)? {
        return Ok(());
    }
    crate::vlog!(4, path = %path.display(), "Path is a mountpoint, unmounting");
    m.unmount(path)?;
    if remove_path_if_not_mount_point(path, m, extensive)? {
        crate::vlog!(4, path = %path.display(), "Path is unmounted, deleted the directory");
        return Ok(());
    }
    Err(VolumeError::other(format!(
        "Failed to unmount path {}",
        path.display()
    )))
}

fn remove_path_if_not_mount_point(
    path: &Path,
    m: &dyn MountInterface,
    extensive: bool,
) -> Result<bool, VolumeError> {
    let not_mnt = if extensive {
        is_not_mount_point(m, path)
    } else {
        m.is_likely_not_mount_point(path)
    };
    match not_mnt {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(VolumeError::io("stat", path, &e)),
        Ok(false) => Ok(false),
        Ok(true) => {
            crate::vlog!(4, path = %path.display(), "Path is not a mountpoint, deleting");
            match std::fs::remove_dir(path).or_else(|e| {
                if e.raw_os_error() == Some(libc::ENOTDIR) {
                    std::fs::remove_file(path)
                } else {
                    Err(e)
                }
            }) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
                Err(e) => Err(VolumeError::io("remove", path, &e)),
            }
        }
    }
}

/// The mount that holds `path`: the one with the longest mount point that
/// is a prefix of it.
pub fn find_mount_info<'a>(path: &Path, mounts: &'a [MountInfo]) -> Option<&'a MountInfo> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
}

/// Makes `path` a mount point with shared propagation (bind-mounting it on
/// itself first), unless the mount it lives on is already shared.
pub fn make_rshared(path: &Path, m: &dyn MountInterface) -> Result<(), String> {
    let mounts = m
        .list()
        .map_err(|e| format!("error reading mountinfo: {e}"))?;
    let shared = find_mount_info(path, &mounts)
        .ok_or_else(|| format!("cannot find mount point for {:?}", path))?
        .optional_fields
        .iter()
        .any(|f| f.starts_with("shared:"));
    if shared {
        crate::vlog!(4, path = %path.display(), "Directory is already on a shared mount");
        return Ok(());
    }
    crate::vlog!(2, path = %path.display(), "Bind-mounting with shared mount propagation");
    let p = path.to_string_lossy();
    nix::mount::mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| format!("failed to bind-mount {p}: {}", e.desc().to_lowercase()))?;
    nix::mount::mount(
        None::<&str>,
        path,
        None::<&str>,
        MsFlags::MS_SHARED | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| format!("failed to make {p} shared: {}", e.desc().to_lowercase()))
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
    fn options_table() {
        let cases: &[(&[&str], MsFlags, &[&str])] = &[
            (&["size=100"], MsFlags::empty(), &["size=100"]),
            (&["bind"], MsFlags::MS_BIND, &[]),
            (&["bind", "ro"], MsFlags::MS_BIND | MsFlags::MS_RDONLY, &[]),
            (
                &["rw", "nodev", "pagesize=2Mi"],
                MsFlags::MS_NODEV,
                &["pagesize=2Mi"],
            ),
            (&["rbind"], MsFlags::MS_BIND | MsFlags::MS_REC, &[]),
        ];
        for (input, flags, data) in cases {
            let opts: Vec<String> = input.iter().map(|s| s.to_string()).collect();
            let (f, d) = parse_mount_options(&opts);
            assert_eq!(f, *flags, "{input:?}");
            assert_eq!(d, data.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn likely_not_mount_point_on_plain_dirs() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).expect("mkdir");
        assert!(SystemMounter.is_likely_not_mount_point(&d).expect("check"));
        assert!(is_not_mount_point(&SystemMounter, &d).expect("check"));
        let err = SystemMounter
            .is_likely_not_mount_point(&tmp.path().join("missing"))
            .expect_err("missing");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        // "/" is on the same device as its parent ("/" itself).
        assert!(!SystemMounter.list().expect("list").is_empty());
    }

    #[test]
    fn cleanup_removes_plain_dirs_and_skips_missing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).expect("mkdir");
        cleanup_mount_point(&d, &SystemMounter, true).expect("cleanup");
        assert!(!d.exists());
        cleanup_mount_point(&d, &SystemMounter, true).expect("missing is fine");
        let f = tmp.path().join("f");
        std::fs::write(&f, b"").expect("file");
        cleanup_mount_point(&f, &SystemMounter, false).expect("file");
        assert!(!f.exists());
    }
}

#[cfg(test)]
mod shared_tests {
    use super::*;

    #[test]
    fn make_rshared_bind_mounts_a_private_dir_once() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED make_rshared_bind_mounts_a_private_dir_once: needs root");
            return;
        }
        let tmp = tempfile::tempdir().expect("tmp");
        // A private mount to start from: a tmpfs with private propagation.
        let base = tmp.path().join("base");
        std::fs::create_dir(&base).expect("mkdir");
        SystemMounter
            .mount("tmpfs", &base, "tmpfs", &["size=1m".to_string()])
            .expect("tmpfs");
        nix::mount::mount(
            None::<&str>,
            &base,
            None::<&str>,
            MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .expect("private");
        let root = base.join("kubelet");
        std::fs::create_dir(&root).expect("mkdir");
        let info = |p: &Path| {
            SystemMounter
                .list()
                .expect("list")
                .into_iter()
                .filter(|m| m.mount_point == p)
                .collect::<Vec<_>>()
        };
        make_rshared(&root, &SystemMounter).expect("rshared");
        let mounts = info(&root);
        assert_eq!(mounts.len(), 1, "bind-mounted on itself");
        assert!(
            mounts[0]
                .optional_fields
                .iter()
                .any(|f| f.starts_with("shared:"))
        );
        make_rshared(&root, &SystemMounter).expect("again");
        assert_eq!(info(&root).len(), 1, "already shared: nothing more");
        SystemMounter.unmount(&root).expect("umount root");
        SystemMounter.unmount(&base).expect("umount base");
    }
}
