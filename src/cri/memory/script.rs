//! What a hollow container does, scripted by its pod's annotations (the
//! sandbox config carries the pod's annotations into CreateContainer):
//!
//! | annotation | value | effect |
//! |---|---|---|
//! | `hollow.kubelet-rs.io/exit-after.<container>` | seconds (`2`, `0.5`) | the container exits that long after it started |
//! | `hollow.kubelet-rs.io/exit-code.<container>` | integer | its exit code (default 0, `Completed`; else `Error`) |
//! | `hollow.kubelet-rs.io/probe-pass-after.<container>` | seconds | exec commands (exec probes) fail until that long after its start (readiness that comes late) |
//! | `hollow.kubelet-rs.io/probe-fail-after.<container>` | seconds | exec commands fail from that long after its start (a liveness probe that starts failing) |
//! | `hollow.kubelet-rs.io/pull-error` (pod-wide) | message | every image pull for the pod fails with that message (`ErrImagePull`, then `ImagePullBackOff`) |
//!
//! A container without annotations runs until it is stopped. With the
//! pod's restartPolicy `Always`, a non-zero exit code after a short delay
//! is a crash loop (restarts, then `CrashLoopBackOff`).

use std::collections::HashMap;
use std::time::Duration;

/// The prefix of every scripting annotation.
pub const ANNOTATION_PREFIX: &str = "hollow.kubelet-rs.io/";
/// `<prefix>exit-after.<container>`: seconds until the container exits.
pub const EXIT_AFTER: &str = "exit-after";
/// `<prefix>exit-code.<container>`: the exit code it exits with.
pub const EXIT_CODE: &str = "exit-code";
/// `<prefix>probe-pass-after.<container>`: seconds before exec commands pass.
pub const PROBE_PASS_AFTER: &str = "probe-pass-after";
/// `<prefix>probe-fail-after.<container>`: seconds until exec commands fail.
pub const PROBE_FAIL_AFTER: &str = "probe-fail-after";
/// `<prefix>pull-error`: the error every image pull of the pod fails with.
pub const PULL_ERROR: &str = "pull-error";

/// The exit code of an exec command the script fails.
pub const PROBE_FAILURE_EXIT_CODE: i32 = 1;

/// One container's script.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Script {
    /// How long after its start the container exits; `None`: runs until stopped.
    pub exit_after: Option<Duration>,
    /// The code it exits with when it exits on its own.
    pub exit_code: i32,
    /// Exec commands fail until this long after its start.
    pub probe_pass_after: Option<Duration>,
    /// Exec commands fail from this long after its start.
    pub probe_fail_after: Option<Duration>,
}

/// The pull error a pod's annotations script for every image it pulls.
pub fn pull_error(annotations: &HashMap<String, String>) -> Option<&str> {
    annotations
        .get(&format!("{ANNOTATION_PREFIX}{PULL_ERROR}"))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

/// A duration annotation in seconds; unparsable values are logged and
/// ignored.
fn seconds(annotations: &HashMap<String, String>, what: &str, container: &str) -> Option<Duration> {
    let v = annotation(annotations, what, container)?;
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
        _ => {
            tracing::warn!(
                container,
                annotation = what,
                value = v,
                "Ignoring unparsable hollow script annotation"
            );
            None
        }
    }
}

fn annotation<'a>(
    annotations: &'a HashMap<String, String>,
    what: &str,
    container: &str,
) -> Option<&'a str> {
    annotations
        .get(&format!("{ANNOTATION_PREFIX}{what}.{container}"))
        .map(|v| v.trim())
}

impl Script {
    /// The script of `container` from the pod's annotations; values that do
    /// not parse are ignored (logged).
    pub fn from_annotations(annotations: &HashMap<String, String>, container: &str) -> Self {
        let exit_after = seconds(annotations, EXIT_AFTER, container);
        let exit_code = annotation(annotations, EXIT_CODE, container)
            .and_then(|v| match v.parse::<i32>() {
                Ok(c) => Some(c),
                Err(_) => {
                    tracing::warn!(
                        container,
                        value = v,
                        annotation = EXIT_CODE,
                        "Ignoring unparsable hollow script annotation"
                    );
                    None
                }
            })
            .unwrap_or(0);
        Script {
            exit_after,
            exit_code,
            probe_pass_after: seconds(annotations, PROBE_PASS_AFTER, container),
            probe_fail_after: seconds(annotations, PROBE_FAIL_AFTER, container),
        }
    }

    /// Whether an exec command in the container passes `running_for` after
    /// its start.
    pub fn exec_passes(&self, running_for: Duration) -> bool {
        self.probe_pass_after.is_none_or(|d| running_for >= d)
            && self.probe_fail_after.is_none_or(|d| running_for < d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_table() {
        let cases: [(&[(&str, &str)], Script); 6] = [
            (&[], Script::default()),
            (
                &[("hollow.kubelet-rs.io/exit-after.app", "2")],
                Script {
                    exit_after: Some(Duration::from_secs(2)),
                    ..Default::default()
                },
            ),
            (
                &[
                    ("hollow.kubelet-rs.io/exit-after.app", "0.5"),
                    ("hollow.kubelet-rs.io/exit-code.app", "3"),
                ],
                Script {
                    exit_after: Some(Duration::from_millis(500)),
                    exit_code: 3,
                    ..Default::default()
                },
            ),
            (
                &[
                    ("hollow.kubelet-rs.io/probe-pass-after.app", "5"),
                    ("hollow.kubelet-rs.io/probe-fail-after.app", "20"),
                ],
                Script {
                    probe_pass_after: Some(Duration::from_secs(5)),
                    probe_fail_after: Some(Duration::from_secs(20)),
                    ..Default::default()
                },
            ),
            // Another container's script is not this one's.
            (
                &[("hollow.kubelet-rs.io/exit-after.other", "1")],
                Script::default(),
            ),
            // Unparsable values are ignored.
            (
                &[
                    ("hollow.kubelet-rs.io/exit-after.app", "soon"),
                    ("hollow.kubelet-rs.io/exit-code.app", "x"),
                    ("hollow.kubelet-rs.io/probe-pass-after.app", "-1"),
                    ("hollow.kubelet-rs.io/probe-fail-after.app", "NaN"),
                ],
                Script::default(),
            ),
        ];
        for (annotations, want) in cases {
            let map: HashMap<String, String> = annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(
                Script::from_annotations(&map, "app"),
                want,
                "{annotations:?}"
            );
        }
    }

    #[test]
    fn exec_passes_table() {
        let script = |pass: Option<u64>, fail: Option<u64>| Script {
            probe_pass_after: pass.map(Duration::from_secs),
            probe_fail_after: fail.map(Duration::from_secs),
            ..Default::default()
        };
        let cases = [
            ("unscripted", script(None, None), 0, true),
            ("before pass-after", script(Some(5), None), 4, false),
            ("at pass-after", script(Some(5), None), 5, true),
            ("before fail-after", script(None, Some(10)), 9, true),
            ("at fail-after", script(None, Some(10)), 10, false),
            ("inside the window", script(Some(5), Some(10)), 7, true),
            ("after the window", script(Some(5), Some(10)), 12, false),
        ];
        for (name, s, secs, want) in cases {
            assert_eq!(s.exec_passes(Duration::from_secs(secs)), want, "{name}");
        }
    }

    #[test]
    fn pull_error_table() {
        type Annotations<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Annotations, Option<&str>); 3] = [
            (&[], None),
            (&[("hollow.kubelet-rs.io/pull-error", "  ")], None),
            (
                &[("hollow.kubelet-rs.io/pull-error", "manifest unknown")],
                Some("manifest unknown"),
            ),
        ];
        for (annotations, want) in cases {
            let map: HashMap<String, String> = annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(pull_error(&map), want, "{annotations:?}");
        }
    }
}
