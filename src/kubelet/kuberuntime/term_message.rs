//! Termination messages: what a container wrote to its termination-message
//! file (the last 4 KiB), or with FallbackToLogsOnError the tail of its CRI
//! log (the last 80 lines, at most 2 KiB). Blocking file I/O: call from
//! `spawn_blocking`.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::cri::api::ContainerStatus as CriContainerStatus;

/// Bytes kept from a termination-message file.
pub const MAX_TERMINATION_MESSAGE_LENGTH: u64 = 4 * 1024;
/// Bytes kept from the log tail.
pub const MAX_TERMINATION_MESSAGE_LOG_LENGTH: usize = 2 * 1024;
/// Log lines read for the log tail.
pub const MAX_TERMINATION_MESSAGE_LOG_LINES: usize = 80;

/// The last `max` bytes of a file.
pub fn read_at_most(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let size = f.metadata()?.len();
    if size > max {
        f.seek(SeekFrom::Start(size - max))?;
    }
    let mut buf = Vec::with_capacity(size.min(max) as usize);
    f.take(max).read_to_end(&mut buf)?;
    Ok(buf)
}

/// The message from the container's termination-message file, and whether
/// the logs should be read instead (fallback asked and nothing written).
pub fn termination_message_from_file(
    status: &CriContainerStatus,
    termination_message_path: &str,
    fallback_to_logs: bool,
) -> (String, bool) {
    if termination_message_path.is_empty() {
        return (String::new(), fallback_to_logs);
    }
    let Some(mount) = status
        .mounts
        .iter()
        .find(|m| m.container_path == termination_message_path)
    else {
        return (String::new(), fallback_to_logs);
    };
    match read_at_most(Path::new(&mount.host_path), MAX_TERMINATION_MESSAGE_LENGTH) {
        Ok(data) => {
            let empty = data.is_empty();
            (
                String::from_utf8_lossy(&data).into_owned(),
                fallback_to_logs && empty,
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), fallback_to_logs),
        Err(e) => (
            format!("Error on reading termination log {}: {e}", mount.host_path),
            false,
        ),
    }
}

/// One parsed CRI log line: `<time> <stream> <P|F> <content>`.
fn parse_cri_line(line: &[u8]) -> Option<(&[u8], bool)> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let _time = parts.next()?;
    let _stream = parts.next()?;
    let tag = parts.next()?;
    let content = parts.next().unwrap_or(&[]);
    let full = tag.split(|b| *b == b':').next() != Some(b"P");
    Some((content, full))
}

/// The tail of a CRI-format log: the content of its last `lines` lines,
/// keeping the last `max_bytes` bytes.
pub fn read_log_tail(path: &Path, lines: usize, max_bytes: usize) -> std::io::Result<String> {
    let data = std::fs::read(path)?;
    let mut all: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if all.last().is_some_and(|l| l.is_empty()) {
        all.pop();
    }
    let start = all.len().saturating_sub(lines);
    let mut out: Vec<u8> = Vec::new();
    for line in &all[start..] {
        let Some((content, full)) = parse_cri_line(line) else {
            continue;
        };
        out.extend_from_slice(content);
        if full {
            out.push(b'\n');
        }
    }
    if out.len() > max_bytes {
        out.drain(..out.len() - max_bytes);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The log-tail termination message, or the error text in its place.
pub fn termination_message_from_logs(log_path: &str) -> String {
    match read_log_tail(
        Path::new(log_path),
        MAX_TERMINATION_MESSAGE_LOG_LINES,
        MAX_TERMINATION_MESSAGE_LOG_LENGTH,
    ) {
        Ok(s) => s,
        Err(e) => format!("Error on reading termination message from logs: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::api::Mount;

    #[test]
    fn file_message_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let written = dir.path().join("written");
        std::fs::write(&written, "bye").expect("write");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").expect("write");
        let big = dir.path().join("big");
        std::fs::write(&big, format!("{}{}", "a".repeat(100), "b".repeat(4096))).expect("write");
        let status = |host: &Path| CriContainerStatus {
            mounts: vec![Mount {
                container_path: "/dev/termination-log".into(),
                host_path: host.display().to_string(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let missing = dir.path().join("missing");
        let cases: Vec<(&Path, &str, bool, (String, bool))> = vec![
            (
                &written,
                "/dev/termination-log",
                false,
                ("bye".into(), false),
            ),
            (
                &written,
                "/dev/termination-log",
                true,
                ("bye".into(), false),
            ),
            (&empty, "/dev/termination-log", true, (String::new(), true)),
            (
                &empty,
                "/dev/termination-log",
                false,
                (String::new(), false),
            ),
            (
                &missing,
                "/dev/termination-log",
                true,
                (String::new(), true),
            ),
            (&written, "", true, (String::new(), true)),
            (&written, "/other", false, (String::new(), false)),
            (
                &big,
                "/dev/termination-log",
                false,
                ("b".repeat(4096), false),
            ),
        ];
        for (i, (host, path, fallback, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                termination_message_from_file(&status(host), path, fallback),
                want,
                "case {i}"
            );
        }
    }

    #[test]
    fn log_tail_joins_partials_and_keeps_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("0.log");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!(
                "2024-01-01T00:00:00.000000000Z stdout F line {i}\n"
            ));
        }
        text.push_str("2024-01-01T00:00:00.000000000Z stderr P par\n");
        text.push_str("2024-01-01T00:00:00.000000000Z stderr F tial\n");
        std::fs::write(&log, &text).expect("write");
        let tail = read_log_tail(&log, 80, 1 << 20).expect("tail");
        let lines: Vec<&str> = tail.lines().collect();
        assert_eq!(
            lines.len(),
            79,
            "80 raw lines, two of them one logical line"
        );
        assert_eq!(lines.first(), Some(&"line 22"));
        assert_eq!(lines.last(), Some(&"partial"));
        let capped = read_log_tail(&log, 80, 20).expect("tail");
        assert_eq!(capped.len(), 20);
        assert!(capped.ends_with("line 99\npartial\n"));
        assert!(
            termination_message_from_logs("/nonexistent/0.log").starts_with("Error on reading")
        );
    }
}
