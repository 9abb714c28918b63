//! One line of a container log file, in either format a runtime writes: the
//! CRI format (`<RFC 3339 time> <stream> <tag> <content>`, tag `P` for a
//! partial line and `F` for a full one) or the legacy JSON file format
//! (`{"log":..,"stream":..,"time":..}`).

use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};

/// Why a log line could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("{0} is not found")]
    Missing(&'static str),
    #[error("unexpected timestamp format {text:?}: {source}")]
    Timestamp { text: String, source: jiff::Error },
    #[error("unexpected stream type {0:?}")]
    Stream(String),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("unsupported log format: {0:?}")]
    Unsupported(String),
}

/// The stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn parse(text: &[u8]) -> Result<Self, ParseError> {
        match text {
            b"stdout" => Ok(Stream::Stdout),
            b"stderr" => Ok(Stream::Stderr),
            other => Err(ParseError::Stream(
                String::from_utf8_lossy(other).into_owned(),
            )),
        }
    }
}

/// A parsed log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogMessage {
    pub timestamp: Timestamp,
    /// The offset the runtime wrote the time in, kept for output.
    pub offset_seconds: i32,
    pub stream: Stream,
    /// The content: a full line keeps its newline, a partial one has none.
    pub log: Vec<u8>,
}

/// Parses an RFC 3339 time with nanoseconds, keeping its offset.
pub fn parse_time(text: &str) -> Result<(Timestamp, i32), ParseError> {
    let ts: Timestamp = text.parse().map_err(|source| ParseError::Timestamp {
        text: text.to_string(),
        source,
    })?;
    let offset = if text.ends_with('Z') || text.ends_with('z') {
        0
    } else {
        let tail = text.get(text.len().saturating_sub(6)..).unwrap_or_default();
        let sign = if tail.starts_with('-') { -1 } else { 1 };
        let hours: i32 = tail.get(1..3).and_then(|h| h.parse().ok()).unwrap_or(0);
        let minutes: i32 = tail.get(4..6).and_then(|m| m.parse().ok()).unwrap_or(0);
        sign * (hours * 3600 + minutes * 60)
    };
    Ok((ts, offset))
}

/// Formats a time as the kubelet prints log timestamps: nine fraction
/// digits always, `Z` for UTC or the `±hh:mm` offset it was written in.
pub fn format_time(ts: Timestamp, offset_seconds: i32) -> String {
    let offset = Offset::from_seconds(offset_seconds).unwrap_or(Offset::UTC);
    let dt = ts.to_zoned(TimeZone::fixed(offset)).datetime();
    let zone = if offset_seconds == 0 {
        "Z".to_string()
    } else {
        let sign = if offset_seconds < 0 { '-' } else { '+' };
        let abs = offset_seconds.unsigned_abs();
        format!("{sign}{:02}:{:02}", abs / 3600, (abs % 3600) / 60)
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}{zone}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond()
    )
}

fn split_field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let idx = line.iter().position(|b| *b == b' ')?;
    Some((&line[..idx], &line[idx + 1..]))
}

/// Parses a CRI-format line (with its trailing newline, if any).
pub fn parse_cri_log(line: &[u8]) -> Result<LogMessage, ParseError> {
    let (time, rest) = split_field(line).ok_or(ParseError::Missing("timestamp"))?;
    let (timestamp, offset_seconds) = parse_time(&String::from_utf8_lossy(time))?;
    let (stream, rest) = split_field(rest).ok_or(ParseError::Missing("stream type"))?;
    let stream = Stream::parse(stream)?;
    let (tag, content) = split_field(rest).ok_or(ParseError::Missing("log tag"))?;
    // Tags may carry more fields after a ':'; the first says partial or full.
    let partial = tag.split(|b| *b == b':').next() == Some(b"P");
    let mut log = content.to_vec();
    if partial && log.last() == Some(&b'\n') {
        log.pop();
    }
    Ok(LogMessage {
        timestamp,
        offset_seconds,
        stream,
        log,
    })
}

#[derive(serde::Deserialize)]
struct JsonLine {
    log: String,
    stream: String,
    time: String,
}

/// Parses a JSON-file-format line.
pub fn parse_json_log(line: &[u8]) -> Result<LogMessage, ParseError> {
    let l: JsonLine = serde_json::from_slice(line)?;
    let (timestamp, offset_seconds) = parse_time(&l.time)?;
    Ok(LogMessage {
        timestamp,
        offset_seconds,
        stream: Stream::parse(l.stream.as_bytes())?,
        log: l.log.into_bytes(),
    })
}

/// A line parser.
pub type ParseFn = fn(&[u8]) -> Result<LogMessage, ParseError>;

/// The parser that understands `first`, the file's first line read.
pub fn parser_for(first: &[u8]) -> Result<ParseFn, ParseError> {
    for parse in [parse_cri_log as ParseFn, parse_json_log] {
        if parse(first).is_ok() {
            return Ok(parse);
        }
    }
    Err(ParseError::Unsupported(
        String::from_utf8_lossy(first).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_lines() {
        let cases: &[(&str, Stream, &str)] = &[
            (
                "2026-11-22T08:55:01.123456789Z stdout F hello\n",
                Stream::Stdout,
                "hello\n",
            ),
            (
                "2026-11-22T08:55:01.123456789Z stderr P part\n",
                Stream::Stderr,
                "part",
            ),
            (
                "2026-11-22T08:55:01Z stdout F:x with  spaces \n",
                Stream::Stdout,
                "with  spaces \n",
            ),
            ("2026-11-22T08:55:01Z stdout F \n", Stream::Stdout, "\n"),
        ];
        for (line, stream, log) in cases {
            let m = parse_cri_log(line.as_bytes()).unwrap();
            assert_eq!(m.stream, *stream, "{line}");
            assert_eq!(String::from_utf8_lossy(&m.log), *log, "{line}");
        }
    }

    #[test]
    fn bad_cri_lines() {
        let cases = [
            ("nospace", "timestamp is not found"),
            ("notatime stdout F x", "unexpected timestamp format"),
            ("2026-11-22T08:55:01Z", "timestamp is not found"),
            ("2026-11-22T08:55:01Z stdout", "stream type is not found"),
            ("2026-11-22T08:55:01Z stdin F x", "unexpected stream type"),
            ("2026-11-22T08:55:01Z stdout F", "log tag is not found"),
        ];
        for (line, want) in cases {
            let err = parse_cri_log(line.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(want), "{line}: {err}");
        }
    }

    #[test]
    fn json_lines_and_format_detection() {
        let line = br#"{"log":"hi\n","stream":"stderr","time":"2016-10-20T18:39:20.57606443Z"}"#;
        let parse = parser_for(line).unwrap();
        let m = parse(line).unwrap();
        assert_eq!((m.stream, m.log.as_slice()), (Stream::Stderr, &b"hi\n"[..]));
        assert!(
            parser_for(b"garbage")
                .unwrap_err()
                .to_string()
                .contains("unsupported log format")
        );
    }

    #[test]
    fn times_print_with_nine_digits_in_their_own_offset() {
        let cases = [
            ("2026-11-22T08:55:01.5Z", "2026-11-22T08:55:01.500000000Z"),
            (
                "2026-11-22T08:55:01.123456789+08:00",
                "2026-11-22T08:55:01.123456789+08:00",
            ),
            (
                "2026-11-22T08:55:01-05:30",
                "2026-11-22T08:55:01.000000000-05:30",
            ),
        ];
        for (input, want) in cases {
            let (ts, off) = parse_time(input).unwrap();
            assert_eq!(format_time(ts, off), want);
        }
    }
}
