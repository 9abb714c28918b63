//! oom_score_adj of a process (the kubelet's own, `--oom-score-adj`).

use std::path::Path;
use std::time::Duration;

use super::error::CmError;

/// Writes `value` to `<proc>/<pid>/oom_score_adj` (`self` for pid 0), trying
/// twice. Lowering the value needs CAP_SYS_RESOURCE; callers warn and go on.
pub fn apply_oom_score_adj(proc: &Path, pid: u32, value: i32) -> Result<(), CmError> {
    let who = if pid == 0 {
        "self".to_string()
    } else {
        pid.to_string()
    };
    let path = proc.join(who).join("oom_score_adj");
    crate::vlog!(4, path = %path.display(), value, "attempting to set oom_score_adj");
    let mut last = None;
    for attempt in 0..2 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, value.to_string().as_bytes()))
        {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CmError::io("write", &path, e));
            }
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(CmError::io("write", &path, e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_under_the_proc_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("42")).unwrap();
        std::fs::write(dir.path().join("42/oom_score_adj"), "0").unwrap();
        apply_oom_score_adj(dir.path(), 42, -999).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("42/oom_score_adj")).unwrap(),
            "-999"
        );
        assert!(
            apply_oom_score_adj(dir.path(), 43, -999)
                .unwrap_err()
                .is_not_found()
        );
    }
}
