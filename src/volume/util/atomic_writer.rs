//! Atomic projection of a set of files into a volume directory
//! (atomic_writer.go). The real files live in a hidden timestamped
//! directory (`..2026_11_22_04_03_42.2111698581`); `..data` is a symlink to
//! it, and each top-level user-visible name is a symlink into `..data`
//! (`greeting -> ..data/greeting`). An update writes a new timestamped
//! directory and renames a fresh `..data_tmp` link over `..data`, so
//! readers see either the old or the new set, never a mix.
//!
//! Names starting with `..` are reserved. The writer is not safe for
//! concurrent use on one directory: callers serialise (the volume manager
//! runs one operation per volume at a time). Blocking: call it from
//! `spawn_blocking`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::volume::error::VolumeError;

const MAX_FILE_NAME_LENGTH: usize = 255;
const MAX_PATH_LENGTH: usize = 4096;

/// The symlink to the current timestamped directory.
pub const DATA_DIR_NAME: &str = "..data";
/// The link renamed over `..data` to switch versions.
pub const NEW_DATA_DIR_NAME: &str = "..data_tmp";

/// One file to project: contents, mode and optional owner.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileProjection {
    pub data: Vec<u8>,
    pub mode: u32,
    /// chown the file to this user (group unchanged).
    pub fs_user: Option<i64>,
}

/// Relative path → file.
pub type Payload = BTreeMap<String, FileProjection>;

/// Kept for callers that name the writer's error type.
pub type AtomicWriteError = VolumeError;

/// Applies ownership to a new timestamped directory (by name) before it
/// is published.
pub type SetPerms<'a> = &'a dyn Fn(&str) -> Result<(), VolumeError>;

/// Writes payloads into one target directory.
#[derive(Debug, Clone)]
pub struct AtomicWriter {
    target_dir: PathBuf,
    log_context: String,
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> VolumeError + 'a {
    move |e| VolumeError::io(op, path, &e)
}

/// Lexical `filepath.Clean` of a relative path.
fn clean_relative(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// Checks one payload path: relative, no `..` element, not starting with
/// `..`, names of at most 255 bytes, at most 4096 bytes in all.
pub fn validate_path(target: &str) -> Result<(), VolumeError> {
    if target.is_empty() {
        return Err(VolumeError::other(
            "invalid path: must not be empty: \"\"".to_string(),
        ));
    }
    if target.starts_with('/') {
        return Err(VolumeError::other(format!(
            "invalid path: must be relative path: {target}"
        )));
    }
    if target.len() > MAX_PATH_LENGTH {
        return Err(VolumeError::other(format!(
            "invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters"
        )));
    }
    let items: Vec<&str> = target.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err(VolumeError::other(format!(
                "invalid path: must not contain '..': {target}"
            )));
        }
        if item.len() > MAX_FILE_NAME_LENGTH {
            return Err(VolumeError::other(format!(
                "invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} characters"
            )));
        }
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return Err(VolumeError::other(format!(
            "invalid path: must not start with '..': {target}"
        )));
    }
    Ok(())
}

/// Validates every path and returns the payload keyed by cleaned paths.
pub fn validate_payload(payload: &Payload) -> Result<Payload, VolumeError> {
    let mut out = Payload::new();
    for (k, v) in payload {
        validate_path(k)?;
        out.insert(clean_relative(k), v.clone());
    }
    Ok(out)
}

/// The `..YYYY_MM_DD_HH_MM_SS.` prefix of a timestamped directory (UTC).
pub fn timestamp_prefix(now: SystemTime) -> String {
    match jiff::Timestamp::try_from(now) {
        Ok(ts) => ts
            .to_zoned(jiff::tz::TimeZone::UTC)
            .strftime("..%Y_%m_%d_%H_%M_%S.")
            .to_string(),
        Err(_) => "..1970_01_01_00_00_00.".to_string(),
    }
}

impl AtomicWriter {
    /// A writer for `target_dir`, which must exist.
    pub fn new(target_dir: &Path, log_context: impl Into<String>) -> Result<Self, VolumeError> {
        match fs::metadata(target_dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(VolumeError::io("stat", target_dir, &e))
            }
            _ => Ok(AtomicWriter {
                target_dir: target_dir.to_path_buf(),
                log_context: log_context.into(),
            }),
        }
    }

    pub fn target_dir(&self) -> &Path {
        &self.target_dir
    }

    /// Projects `payload` into the target directory, atomically replacing
    /// what an earlier write projected. `set_perms` runs on the new
    /// timestamped directory's name before it is published. `now` names
    /// the timestamped directory. Nothing is written when the payload
    /// equals what is on disk.
    pub fn write(
        &self,
        payload: &Payload,
        set_perms: Option<SetPerms<'_>>,
        now: SystemTime,
    ) -> Result<(), VolumeError> {
        let ctx = self.log_context.as_str();
        let clean = validate_payload(payload).inspect_err(|e| {
            tracing::error!(context = ctx, error = %e, "Invalid payload");
        })?;

        let data_dir_path = self.target_dir.join(DATA_DIR_NAME);
        let old_ts_dir = match fs::read_link(&data_dir_path) {
            Ok(p) => Some(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                tracing::error!(context = ctx, error = %e, "Error reading link for data directory");
                return Err(VolumeError::io("readlink", &data_dir_path, &e));
            }
        };
        let old_ts_path = old_ts_dir.as_ref().map(|d| self.target_dir.join(d));

        let mut to_remove = BTreeSet::new();
        if let Some(old) = &old_ts_path {
            to_remove = self.paths_to_remove(&clean, old)?;
            let should = should_write_payload(&clean, old)?;
            if !should && to_remove.is_empty() {
                crate::vlog!(4, context = ctx, dir = %self.target_dir.display(), "No update required for target directory");
                return Ok(());
            }
            crate::vlog!(4, context = ctx, dir = %self.target_dir.display(), "Write required for target directory");
        }

        let ts_dir = self.new_timestamp_dir(now)?;
        let ts_name = ts_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();

        write_payload_to_dir(&clean, &ts_dir).inspect_err(|e| {
            tracing::error!(context = ctx, dir = %ts_dir.display(), error = %e, "Error writing payload to ts data directory");
        })?;
        crate::vlog!(4, context = ctx, dir = %ts_dir.display(), "Performed write of new data to ts data directory");

        if let Some(set_perms) = set_perms {
            set_perms(&ts_name).inspect_err(|e| {
                tracing::error!(context = ctx, error = %e, "Error applying ownership settings");
            })?;
        }

        let new_data_dir_path = self.target_dir.join(NEW_DATA_DIR_NAME);
        if let Err(e) = std::os::unix::fs::symlink(&ts_name, &new_data_dir_path) {
            let _ = fs::remove_dir_all(&ts_dir);
            tracing::error!(context = ctx, error = %e, "Error creating symbolic link for atomic update");
            return Err(VolumeError::io("symlink", &new_data_dir_path, &e));
        }

        if let Err(e) = fs::rename(&new_data_dir_path, &data_dir_path) {
            let _ = fs::remove_file(&new_data_dir_path);
            let _ = fs::remove_dir_all(&ts_dir);
            tracing::error!(context = ctx, error = %e, "Error renaming symbolic link for data directory");
            return Err(VolumeError::io("rename", &new_data_dir_path, &e));
        }

        self.create_user_visible_files(&clean).inspect_err(|e| {
            tracing::error!(context = ctx, error = %e, "Error creating visible symlinks");
        })?;

        self.remove_user_visible_paths(&to_remove)?;

        if let Some(old) = &old_ts_path {
            fs::remove_dir_all(old).map_err(|e| {
                tracing::error!(context = ctx, dir = %old.display(), error = %e, "Error removing old data directory");
                VolumeError::io("unlinkat", old, &e)
            })?;
        }
        Ok(())
    }

    /// Paths of the old version that the new payload no longer has.
    fn paths_to_remove(
        &self,
        payload: &Payload,
        old_ts_dir: &Path,
    ) -> Result<BTreeSet<String>, VolumeError> {
        let mut paths = BTreeSet::new();
        match walk_relative(old_ts_dir, old_ts_dir, &mut paths) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
            Err(e) => return Err(VolumeError::io("lstat", old_ts_dir, &e)),
        }
        let mut new_paths = BTreeSet::new();
        for file in payload.keys() {
            let mut sub = file.as_str();
            loop {
                new_paths.insert(sub.to_string());
                match sub.rfind('/') {
                    Some(i) => sub = &sub[..i],
                    None => break,
                }
            }
        }
        let result: BTreeSet<String> = paths.difference(&new_paths).cloned().collect();
        crate::vlog!(5, dir = %self.target_dir.display(), remove = ?result, "Paths to remove");
        Ok(result)
    }

    /// A new `..<timestamp>.<random>` directory with mode 0755.
    fn new_timestamp_dir(&self, now: SystemTime) -> Result<PathBuf, VolumeError> {
        let prefix = timestamp_prefix(now);
        for _ in 0..10_000 {
            let name = format!("{prefix}{}", rand::random::<u32>());
            let path = self.target_dir.join(name);
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                        .map_err(io_err("chmod", &path))?;
                    return Ok(path);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    tracing::error!(context = %self.log_context, error = %e, "Unable to create new temp directory");
                    return Err(VolumeError::io("mkdir", &path, &e));
                }
            }
        }
        Err(VolumeError::other(format!(
            "mkdirtemp {}: too many attempts",
            self.target_dir.display()
        )))
    }

    /// `name -> ..data/name` for each top-level name of the payload that
    /// has no link yet.
    fn create_user_visible_files(&self, payload: &Payload) -> Result<(), VolumeError> {
        for path in payload.keys() {
            let link_name = path.split('/').next().unwrap_or(path);
            let visible = self.target_dir.join(link_name);
            match fs::read_link(&visible) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let target = Path::new(DATA_DIR_NAME).join(link_name);
                    std::os::unix::fs::symlink(&target, &visible)
                        .map_err(io_err("symlink", &visible))?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Removes the stale top-level links; reports the last failure.
    fn remove_user_visible_paths(&self, paths: &BTreeSet<String>) -> Result<(), VolumeError> {
        let mut last = None;
        for p in paths.iter().filter(|p| !p.contains('/')) {
            let full = self.target_dir.join(p);
            if let Err(e) = remove(&full) {
                tracing::error!(context = %self.log_context, path = %p, error = %e, "Error pruning old user-visible path");
                last = Some(VolumeError::io("remove", &full, &e));
            }
        }
        last.map_or(Ok(()), Err)
    }
}

/// `os.Remove`: a file, a link or an empty directory.
fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => fs::remove_dir(path),
        other => other,
    }
}

/// Collects every path under `dir` relative to `base` (lexical order, not
/// following links), as filepath.Walk visits them.
fn walk_relative(base: &Path, dir: &Path, out: &mut BTreeSet<String>) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    if dir != base
        && let Ok(rel) = dir.strip_prefix(base)
    {
        out.insert(rel.to_string_lossy().into_owned());
    }
    if !meta.is_dir() {
        return Ok(());
    }
    let mut names: Vec<_> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    for n in names {
        walk_relative(base, &dir.join(n), out)?;
    }
    Ok(())
}

/// Whether any file of the payload differs from (or is missing in) the old
/// timestamped directory.
fn should_write_payload(payload: &Payload, old_ts_dir: &Path) -> Result<bool, VolumeError> {
    for (path, fp) in payload {
        let full = old_ts_dir.join(path);
        match fs::symlink_metadata(&full) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            _ => {}
        }
        let on_disk = fs::read(&full).map_err(io_err("open", &full))?;
        if on_disk != fp.data {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Writes each file with its exact mode (umask aside) and owner.
fn write_payload_to_dir(payload: &Payload, dir: &Path) -> Result<(), VolumeError> {
    for (path, fp) in payload {
        let full = dir.join(path);
        if let Some(base) = full.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o777)
                .create(base)
                .map_err(io_err("mkdir", base))?;
        }
        let mode = fp.mode & 0o7777;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&full)
            .map_err(io_err("open", &full))?;
        f.write_all(&fp.data).map_err(io_err("write", &full))?;
        drop(f);
        fs::set_permissions(&full, fs::Permissions::from_mode(mode))
            .map_err(io_err("chmod", &full))?;
        if let Some(uid) = fp.fs_user {
            nix::unistd::chown(&full, Some(nix::unistd::Uid::from_raw(uid as u32)), None)
                .map_err(|e| VolumeError::io("chown", &full, &io::Error::from(e)))?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "atomic_writer_tests.rs"]
mod tests;
