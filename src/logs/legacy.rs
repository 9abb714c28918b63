//! klog's own output flags, deprecated but still honoured with the text
//! format: `--logtostderr=false` sends entries to `--log-file` (or
//! `kubelet.log` in `--log-dir`), `--alsologtostderr` and
//! `--stderrthreshold` copy them to stderr, `--skip-headers` drops the
//! header and `--add-dir-header` shows the source directory.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use super::LogsError;
use super::record::Severity;

/// The klog output settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyOutput {
    pub logtostderr: bool,
    pub alsologtostderr: bool,
    /// Entries at or above this severity also go to stderr when logging to
    /// a file; `None` (FATAL) copies nothing.
    pub stderr_threshold: Option<Severity>,
    pub log_file: Option<PathBuf>,
    pub log_dir: Option<PathBuf>,
    pub skip_headers: bool,
    pub add_dir_header: bool,
}

impl Default for LegacyOutput {
    fn default() -> Self {
        LegacyOutput {
            logtostderr: true,
            alsologtostderr: false,
            stderr_threshold: Some(Severity::Error),
            log_file: None,
            log_dir: None,
            skip_headers: false,
            add_dir_header: false,
        }
    }
}

/// klog's threshold text (`0`–`3` or a severity name) as a severity;
/// FATAL and above mean nothing is copied.
pub fn parse_threshold(text: &str) -> Option<Severity> {
    match text.to_ascii_uppercase().as_str() {
        "0" | "INFO" => Some(Severity::Info),
        "1" | "WARNING" => Some(Severity::Warning),
        "2" | "ERROR" => Some(Severity::Error),
        _ => None,
    }
}

pub(super) struct Output {
    pub settings: LegacyOutput,
    file: Option<Mutex<File>>,
}

static OUTPUT: RwLock<Option<Arc<Output>>> = RwLock::new(None);

/// Applies the klog output settings (opens the log file if one is used).
pub fn set_legacy_output(settings: LegacyOutput) -> Result<(), LogsError> {
    let file = if settings.logtostderr {
        None
    } else {
        let path = match (&settings.log_file, &settings.log_dir) {
            (Some(f), _) => f.clone(),
            (None, Some(d)) => d.join("kubelet.log"),
            (None, None) => std::env::temp_dir().join("kubelet.log"),
        };
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| LogsError::Invalid(format!("cannot open log file {path:?}: {e}")))?;
        Some(Mutex::new(f))
    };
    let mut slot = OUTPUT.write().unwrap_or_else(|e| e.into_inner());
    *slot = Some(Arc::new(Output { settings, file }));
    Ok(())
}

pub(super) fn current() -> Option<Arc<Output>> {
    OUTPUT.read().unwrap_or_else(|e| e.into_inner()).clone()
}

impl Output {
    /// Writes a text line where the settings send an entry of `severity`.
    pub fn write(&self, severity: Severity, line: &str) {
        let s = &self.settings;
        let rank = |sev: Severity| match sev {
            Severity::Info => 0,
            Severity::Warning => 1,
            Severity::Error => 2,
        };
        let over_threshold = s
            .stderr_threshold
            .is_some_and(|t| rank(severity) >= rank(t));
        let to_stderr = s.logtostderr || s.alsologtostderr || over_threshold;
        if let Some(file) = &self.file {
            let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = f.write_all(line.as_bytes());
        }
        if to_stderr {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        assert_eq!(parse_threshold("2"), Some(Severity::Error));
        assert_eq!(parse_threshold("warning"), Some(Severity::Warning));
        assert_eq!(parse_threshold("3"), None);
    }
}
