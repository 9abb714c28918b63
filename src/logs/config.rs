//! The logging block of the configuration (component-base's
//! LoggingConfiguration of the v1.25 line): format, flush frequency,
//! verbosity, per-file verbosity and the JSON format's options; its defaults
//! and its validation.

use serde::{Deserialize, Serialize};

use crate::apis::config::duration::{self, Duration};
use crate::features::{self, FeatureGate};
use crate::util::quantity::Quantity;

/// The text format, the default.
pub const TEXT_FORMAT: &str = "text";
/// The JSON format.
pub const JSON_FORMAT: &str = "json";
/// How often buffered log output is flushed unless set.
pub const DEFAULT_FLUSH_FREQUENCY: Duration = Duration::from_secs(5);

/// Logging settings, from the `logging` block and the logging flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct LoggingConfiguration {
    /// `text` or `json`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub format: String,
    /// Encoded as nanoseconds in the v1.25 line's file format.
    #[serde(with = "duration::as_nanos")]
    pub flush_frequency: Duration,
    /// klog's `-v`.
    pub verbosity: u32,
    /// klog's `-vmodule`: per-file verbosity.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vmodule: Vec<VModuleItem>,
    pub options: FormatOptions,
}

/// One `pattern=N` entry of `-vmodule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct VModuleItem {
    pub file_pattern: String,
    pub verbosity: u32,
}

/// Options of the non-default formats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct FormatOptions {
    pub json: JsonOptions,
}

/// Options of the JSON format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JsonOptions {
    /// Errors to stderr, everything else to stdout.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub split_stream: bool,
    /// Bytes of info output buffered when the stream is split.
    #[serde(with = "crate::apis::config::quantity_serde")]
    pub info_buffer_size: Quantity,
}

impl Default for JsonOptions {
    fn default() -> Self {
        JsonOptions {
            split_stream: false,
            info_buffer_size: Quantity::from_decimal(0),
        }
    }
}

impl LoggingConfiguration {
    /// The recommended settings: what the defaults of the file format give.
    pub fn recommended() -> Self {
        let mut c = LoggingConfiguration::default();
        c.set_recommended();
        c
    }

    /// Fills unset fields with the recommended values.
    pub fn set_recommended(&mut self) {
        if self.format.is_empty() {
            self.format = TEXT_FORMAT.to_string();
        }
        if self.flush_frequency.is_zero() {
            self.flush_frequency = DEFAULT_FLUSH_FREQUENCY;
        }
    }

    /// The `-vmodule` text form: `pattern=N,pattern=N`.
    pub fn vmodule_string(&self) -> String {
        self.vmodule
            .iter()
            .map(|i| format!("{}={}", i.file_pattern, i.verbosity))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Validation of the logging block; each message starts with the field
    /// path under `logging`. `changed_legacy_flags` names klog-only flags the
    /// user set, which a non-text format cannot honour.
    pub fn validate(&self, gate: &FeatureGate, changed_legacy_flags: &[String]) -> Vec<String> {
        let mut errs = Vec::new();
        if self.format != TEXT_FORMAT {
            for flag in changed_legacy_flags {
                errs.push(format!(
                    "logging.format: Invalid value: {:?}: the {} format cannot honour --{flag}",
                    self.format, self.format
                ));
            }
        }
        match self.format.as_str() {
            TEXT_FORMAT => {}
            JSON_FORMAT => {
                if !gate.enabled(features::LOGGING_BETA_OPTIONS) {
                    errs.push(format!(
                        "logging.format: Forbidden: the json format needs the {} feature gate",
                        features::LOGGING_BETA_OPTIONS
                    ));
                }
            }
            other => errs.push(format!(
                "logging.format: Invalid value: {other:?}: unsupported log format (text or json)"
            )),
        }
        if self.verbosity > i32::MAX as u32 {
            errs.push(format!(
                "logging.verbosity: Invalid value: {}: must be <= {}",
                self.verbosity,
                i32::MAX
            ));
        }
        if !self.vmodule.is_empty() && !self.format.is_empty() && self.format != TEXT_FORMAT {
            errs.push("logging.vmodule: Forbidden: only the text format supports it".to_string());
        }
        for (i, item) in self.vmodule.iter().enumerate() {
            if item.file_pattern.is_empty() {
                errs.push(format!(
                    "logging.vmodule[{i}]: Required value: the file pattern must not be empty"
                ));
            }
            if item.file_pattern.contains(['=', ',']) {
                errs.push(format!(
                    "logging.vmodule[{i}]: Invalid value: {:?}: the file pattern must not contain '=' or ','",
                    item.file_pattern
                ));
            }
            if item.verbosity > i32::MAX as u32 {
                errs.push(format!(
                    "logging.vmodule[{i}]: Invalid value: {}: must be <= {}",
                    item.verbosity,
                    i32::MAX
                ));
            }
        }
        let alpha = gate.enabled(features::LOGGING_ALPHA_OPTIONS);
        if self.options.json.split_stream && !alpha {
            errs.push(format!(
                "logging.options.json.splitStream: Forbidden: needs the {} feature gate",
                features::LOGGING_ALPHA_OPTIONS
            ));
        }
        if !self.options.json.info_buffer_size.is_zero() && !alpha {
            errs.push(format!(
                "logging.options.json.infoBufferSize: Forbidden: needs the {} feature gate",
                features::LOGGING_ALPHA_OPTIONS
            ));
        }
        errs
    }
}

/// A `-vmodule` entry that is not `pattern=N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VModuleError {
    #[error("{0:?} does not have the pattern=N format")]
    Format(String),
    #[error("parsing verbosity in {part:?}: {level:?} is not a level")]
    Level { part: String, level: String },
}

/// Parses `-vmodule`'s `pattern=N,pattern=N`.
pub fn parse_vmodule(text: &str) -> Result<Vec<VModuleItem>, VModuleError> {
    let mut items = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let fields: Vec<&str> = part.split('=').collect();
        let [pattern, level] = fields.as_slice() else {
            return Err(VModuleError::Format(part.to_string()));
        };
        if pattern.is_empty() || level.is_empty() {
            return Err(VModuleError::Format(part.to_string()));
        }
        let verbosity = level
            .parse::<u32>()
            .ok()
            .filter(|v| *v <= i32::MAX as u32 && level.bytes().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| VModuleError::Level {
                part: part.to_string(),
                level: level.to_string(),
            })?;
        items.push(VModuleItem {
            file_pattern: pattern.to_string(),
            verbosity,
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recommended_matches_the_defaults() {
        let c = LoggingConfiguration::recommended();
        assert_eq!(c.format, "text");
        assert_eq!(c.flush_frequency, Duration::from_secs(5));
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({
                "format": "text",
                "flushFrequency": 5000000000i64,
                "verbosity": 0,
                "options": {"json": {"infoBufferSize": "0"}},
            })
        );
    }

    #[test]
    fn validation_table() {
        let gate = FeatureGate::new();
        let mut alpha = FeatureGate::new();
        alpha
            .set_from_map(
                &[("LoggingAlphaOptions".to_string(), true)]
                    .into_iter()
                    .collect(),
            )
            .unwrap();
        type Mutate = fn(&mut LoggingConfiguration);
        let cases: Vec<(&str, Mutate, &FeatureGate, Option<&str>)> = vec![
            ("defaults", |_| {}, &gate, None),
            ("json", |c| c.format = "json".into(), &gate, None),
            (
                "unknown format",
                |c| c.format = "xml".into(),
                &gate,
                Some("logging.format"),
            ),
            (
                "vmodule with json",
                |c| {
                    c.format = "json".into();
                    c.vmodule = vec![VModuleItem {
                        file_pattern: "a".into(),
                        verbosity: 2,
                    }];
                },
                &gate,
                Some("logging.vmodule"),
            ),
            (
                "empty vmodule pattern",
                |c| c.vmodule = vec![VModuleItem::default()],
                &gate,
                Some("logging.vmodule[0]"),
            ),
            (
                "split stream needs alpha",
                |c| c.options.json.split_stream = true,
                &gate,
                Some("logging.options.json.splitStream"),
            ),
            (
                "split stream with alpha",
                |c| c.options.json.split_stream = true,
                &alpha,
                None,
            ),
            (
                "verbosity too large",
                |c| c.verbosity = u32::MAX,
                &gate,
                Some("logging.verbosity"),
            ),
        ];
        for (name, mutate, gate, want) in cases {
            let mut c = LoggingConfiguration::recommended();
            mutate(&mut c);
            let errs = c.validate(gate, &[]);
            match want {
                None => assert!(errs.is_empty(), "{name}: {errs:?}"),
                Some(field) => assert!(
                    errs.iter().any(|e| e.starts_with(field)),
                    "{name}: {errs:?}"
                ),
            }
        }
    }

    #[test]
    fn json_format_refuses_legacy_flags() {
        let mut c = LoggingConfiguration::recommended();
        c.format = "json".into();
        let errs = c.validate(&FeatureGate::new(), &["log-file".to_string()]);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].contains("--log-file"), "{errs:?}");
    }

    #[test]
    fn vmodule_text_form() {
        let items = parse_vmodule("server=2,kubelet*=4").unwrap();
        assert_eq!(items.len(), 2);
        let c = LoggingConfiguration {
            vmodule: items,
            ..Default::default()
        };
        assert_eq!(c.vmodule_string(), "server=2,kubelet*=4");
        assert!(parse_vmodule("server").is_err());
        assert!(parse_vmodule("server=x").is_err());
    }
}
