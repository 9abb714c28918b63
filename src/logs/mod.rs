//! Logging as klog does it: `-v` verbosity levels (and `-vmodule` per
//! file), klog-style text lines by default and JSON with
//! `--logging-format=json`, on stderr.
//!
//! Severity maps onto tracing levels (`error!` → E, `warn!` → W, `info!` → I).
//! Verbosity is klog's, not tracing's: write `vlog!(4, ...)` for what Go
//! writes as `klog.V(4).InfoS(...)`; it is an `info!` event emitted only when
//! the process runs with `-v` of at least that level (or a `-vmodule`
//! pattern matching the calling file says so). Library `debug!` events show
//! from `-v=6`, `trace!` from `-v=9`.
//!
//! [`init_default`] installs the writer before flags are read (text, `-v=0`,
//! like klog before configuration); [`apply`] then switches to the
//! configured format and verbosity.

pub mod config;
pub mod json;
pub mod klog;
pub mod layer;
pub mod legacy;
pub mod record;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Once, RwLock};

use tracing_subscriber::layer::SubscriberExt;

pub use config::LoggingConfiguration;
pub use legacy::{LegacyOutput, set_legacy_output};

/// Events with this target print their message as it is, as klog's
/// printf-style calls do (`I… flags.go:64] FLAG: --v="2"`), instead of quoted.
pub const PRINTF_TARGET: &str = "klog_printf";

static VERBOSITY: AtomicU32 = AtomicU32::new(0);
static HAS_VMODULE: AtomicBool = AtomicBool::new(false);
static VMODULE: RwLock<Vec<(String, u32)>> = RwLock::new(Vec::new());

/// Sets the process-wide klog verbosity (`-v`).
pub fn set_verbosity(level: u32) {
    VERBOSITY.store(level, Ordering::Relaxed);
}

/// The current klog verbosity.
pub fn verbosity() -> u32 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Whether `klog.V(level)` would log.
#[inline]
pub fn v_enabled(level: u32) -> bool {
    verbosity() >= level
}

/// Whether `klog.V(level)` would log in `file` (`-v`, or a matching `-vmodule`).
#[inline]
pub fn v_enabled_in(level: u32, file: &str) -> bool {
    if v_enabled(level) {
        return true;
    }
    if !HAS_VMODULE.load(Ordering::Relaxed) {
        return false;
    }
    vmodule_level(file).is_some_and(|v| v >= level)
}

/// Sets the per-file verbosity patterns (`-vmodule`).
pub fn set_vmodule(items: &[config::VModuleItem]) {
    let mut slot = VMODULE.write().unwrap_or_else(|e| e.into_inner());
    *slot = items
        .iter()
        .map(|i| (i.file_pattern.clone(), i.verbosity))
        .collect();
    HAS_VMODULE.store(!slot.is_empty(), Ordering::Relaxed);
}

/// The verbosity the first matching `-vmodule` pattern gives `file`: a
/// pattern with a `/` matches the path, others the file name without `.rs`.
fn vmodule_level(file: &str) -> Option<u32> {
    let slot = VMODULE.read().unwrap_or_else(|e| e.into_inner());
    let path = file.strip_suffix(".rs").unwrap_or(file);
    let base = klog::base_name(path);
    slot.iter()
        .find(|(pattern, _)| {
            if pattern.contains('/') {
                glob_match(pattern, path)
            } else {
                glob_match(pattern, base)
            }
        })
        .map(|(_, v)| *v)
}

/// `*` and `?` glob matching.
fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// `vlog!(level, tracing-info-args...)`: an info event gated on `-v`.
///
/// ```
/// kubelet::vlog!(2, pod = "ns/name", "SyncLoop ADD");
/// ```
#[macro_export]
macro_rules! vlog {
    ($level:expr, $($arg:tt)+) => {
        if $crate::logs::v_enabled_in($level, file!()) {
            ::tracing::info!(v = $level, $($arg)+);
        }
    };
}

/// A logging configuration that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogsError {
    #[error("initialize logging: {0}")]
    Invalid(String),
}

static INSTALL: Once = Once::new();

/// Installs the klog writer as the global tracing subscriber (once; later
/// calls do nothing). Until [`apply`] runs it writes text at `-v=0`.
pub fn init_default() {
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(layer::KlogLayer);
        // Another subscriber may already be installed (tests); keep it then.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Switches logging to `config`: format, verbosity, per-file verbosity and
/// the JSON format's split streams. The configuration must have been
/// validated (`LoggingConfiguration::validate`).
pub fn apply(config: &LoggingConfiguration) -> Result<(), LogsError> {
    let format = match config.format.as_str() {
        "" | config::TEXT_FORMAT => layer::Format::Text,
        config::JSON_FORMAT => layer::Format::Json,
        other => {
            return Err(LogsError::Invalid(format!(
                "logging.format: unsupported log format {other:?}"
            )));
        }
    };
    layer::set_format(format, config.options.json.split_stream);
    set_verbosity(config.verbosity);
    set_vmodule(&config.vmodule);
    Ok(())
}

/// Installs the writer and applies `config`: the logging options' entry point.
pub fn init(config: &LoggingConfiguration) -> Result<(), LogsError> {
    init_default();
    apply(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_gates_levels() {
        set_verbosity(3);
        assert!(v_enabled(0));
        assert!(v_enabled(3));
        assert!(!v_enabled(4));
        set_verbosity(0);
    }

    #[test]
    fn globs() {
        let cases = [
            ("server", "server", true),
            ("serv*", "server", true),
            ("*er", "server", true),
            ("s?rver", "server", true),
            ("client", "server", false),
            ("*", "", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ];
        for (p, t, want) in cases {
            assert_eq!(glob_match(p, t), want, "{p} {t}");
        }
    }

    #[test]
    fn vmodule_matches_files() {
        set_vmodule(&[
            config::VModuleItem {
                file_pattern: "sync_*".into(),
                verbosity: 4,
            },
            config::VModuleItem {
                file_pattern: "src/app/*".into(),
                verbosity: 2,
            },
        ]);
        assert_eq!(vmodule_level("src/kubelet/sync_loop.rs"), Some(4));
        assert_eq!(vmodule_level("src/app/run.rs"), Some(2));
        assert_eq!(vmodule_level("src/cm/mod.rs"), None);
        assert!(v_enabled_in(4, "src/kubelet/sync_loop.rs"));
        assert!(!v_enabled_in(5, "src/kubelet/sync_loop.rs"));
        set_vmodule(&[]);
        assert!(!v_enabled_in(1, "src/kubelet/sync_loop.rs"));
    }
}
