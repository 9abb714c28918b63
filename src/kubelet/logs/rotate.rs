//! The file steps of one rotation, all blocking (the manager runs them on
//! the blocking pool): list a log's rotated siblings, drop the leftovers of
//! an interrupted rotation, trim to the policy's count, compress, and name
//! the live file with its rotation time.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use jiff::tz::TimeZone;

use super::RotateError;

/// What a compressed rotated log ends with.
pub const COMPRESS_SUFFIX: &str = ".gz";
/// What a compression in progress writes to.
pub const TMP_SUFFIX: &str = ".tmp";
/// The rotation time in a rotated log's name (Go's "20060102-150405").
pub const TIMESTAMP_FORMAT: &str = "%Y%m%d-%H%M%S";

/// `path` with `suffix` appended to its last component.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn ends_with(path: &Path, suffix: &str) -> bool {
    path.as_os_str()
        .as_encoded_bytes()
        .ends_with(suffix.as_bytes())
}

/// The rotated siblings of `log` (`<log>.*`), sorted by name: oldest first,
/// since the names carry the rotation time.
pub fn rotated_logs(log: &Path) -> Result<Vec<PathBuf>, RotateError> {
    let list_err = |source| RotateError::ListRotated {
        path: log.to_path_buf(),
        source,
    };
    let (Some(dir), Some(base)) = (log.parent(), log.file_name()) else {
        return Ok(Vec::new());
    };
    let mut prefix = base.as_encoded_bytes().to_vec();
    prefix.push(b'.');
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list_err)? {
        let entry = entry.map_err(list_err)?;
        if entry.file_name().as_encoded_bytes().starts_with(&prefix) {
            logs.push(dir.join(entry.file_name()));
        }
    }
    logs.sort();
    Ok(logs)
}

/// Whether a rotated log still counts: temporary files never do, and an
/// uncompressed file whose compressed twin exists is a leftover.
fn is_in_use(log: &Path, all: &[PathBuf]) -> bool {
    if ends_with(log, TMP_SUFFIX) {
        return false;
    }
    if ends_with(log, COMPRESS_SUFFIX) {
        return true;
    }
    let twin = with_suffix(log, COMPRESS_SUFFIX);
    !all.contains(&twin)
}

/// Splits rotated logs into (in use, unused), keeping their order.
pub fn split_unused(logs: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    logs.iter().cloned().partition(|l| is_in_use(l, logs))
}

/// Removes what an interrupted rotation left behind; returns the logs in use.
pub fn remove_unused(logs: &[PathBuf]) -> Result<Vec<PathBuf>, RotateError> {
    let (in_use, unused) = split_unused(logs);
    for path in unused {
        std::fs::remove_file(&path).map_err(|source| RotateError::RemoveUnused { path, source })?;
    }
    Ok(in_use)
}

/// Removes the oldest rotated logs so that, with the live log and the one
/// about to be rotated, at most `max_files` remain; returns the rest.
pub fn remove_excess(
    mut logs: Vec<PathBuf>,
    max_files: usize,
) -> Result<Vec<PathBuf>, RotateError> {
    logs.sort();
    let keep = max_files.saturating_sub(2);
    let excess = logs.len().saturating_sub(keep);
    for path in logs.drain(..excess) {
        std::fs::remove_file(&path).map_err(|source| RotateError::RemoveExcess { path, source })?;
    }
    Ok(logs)
}

/// Compresses `log` into `<log>.gz` through `<log>.tmp`, then removes it.
pub fn compress(log: &Path) -> Result<(), RotateError> {
    let tmp = with_suffix(log, TMP_SUFFIX);
    let result = compress_to(log, &tmp);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|source| RotateError::Compress {
        path: log.to_path_buf(),
        source,
    })
}

fn compress_to(log: &Path, tmp: &Path) -> io::Result<()> {
    let mut src = BufReader::new(File::open(log)?);
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(tmp)?;
    let mut gz = flate2::write::GzEncoder::new(BufWriter::new(out), flate2::Compression::default());
    io::copy(&mut src, &mut gz)?;
    gz.finish()?.flush()?;
    std::fs::rename(tmp, with_suffix(log, COMPRESS_SUFFIX))?;
    std::fs::remove_file(log)
}

/// Everything before the live log is renamed: leftovers removed, the count
/// trimmed to the policy, every older rotated log compressed.
pub fn prepare(log: &Path, max_files: usize) -> Result<(), RotateError> {
    let logs = rotated_logs(log)?;
    let logs = remove_unused(&logs)?;
    let logs = remove_excess(logs, max_files)?;
    for l in logs.iter().filter(|l| !ends_with(l, COMPRESS_SUFFIX)) {
        compress(l)?;
    }
    Ok(())
}

/// `<log>.<YYYYMMDD-HHMMSS>` for a rotation at `now` in `tz`.
pub fn rotated_name(log: &Path, now: SystemTime, tz: &TimeZone) -> PathBuf {
    let ts = jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let stamp = ts
        .to_zoned(tz.clone())
        .strftime(TIMESTAMP_FORMAT)
        .to_string();
    with_suffix(log, &format!(".{stamp}"))
}

/// The size of the file at `path`; `None` when there is none.
pub fn size_of(path: &Path) -> io::Result<Option<u64>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
