//! What a hollow container does, scripted by its pod's annotations (the
//! sandbox config carries the pod's annotations into CreateContainer):
//!
//! | annotation | value | effect |
//! |---|---|---|
//! | `hollow.kubelet-rs.io/exit-after.<container>` | seconds (`2`, `0.5`) | the container exits that long after it started |
//! | `hollow.kubelet-rs.io/exit-code.<container>` | integer | its exit code (default 0, `Completed`; else `Error`) |
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

/// One container's script.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Script {
    /// How long after its start the container exits; `None`: runs until stopped.
    pub exit_after: Option<Duration>,
    /// The code it exits with when it exits on its own.
    pub exit_code: i32,
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
        let exit_after =
            annotation(annotations, EXIT_AFTER, container).and_then(|v| match v.parse::<f64>() {
                Ok(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
                _ => {
                    tracing::warn!(
                        container,
                        value = v,
                        "Ignoring unparsable hollow exit-after annotation"
                    );
                    None
                }
            });
        let exit_code = annotation(annotations, EXIT_CODE, container)
            .and_then(|v| match v.parse::<i32>() {
                Ok(c) => Some(c),
                Err(_) => {
                    tracing::warn!(
                        container,
                        value = v,
                        "Ignoring unparsable hollow exit-code annotation"
                    );
                    None
                }
            })
            .unwrap_or(0);
        Script {
            exit_after,
            exit_code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_table() {
        let cases: [(&[(&str, &str)], Script); 5] = [
            (&[], Script::default()),
            (
                &[("hollow.kubelet-rs.io/exit-after.app", "2")],
                Script {
                    exit_after: Some(Duration::from_secs(2)),
                    exit_code: 0,
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
}
