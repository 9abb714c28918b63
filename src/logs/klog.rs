//! klog's text format:
//!
//! ```text
//! I1122 10:20:57.208900    2168 server.rs:49] "Starting kubelet" version="v1.25.16" pod="ns/name"
//! ```
//!
//! severity letter, month and day, local time to the microsecond, the
//! process id right-aligned in seven columns, `file:line]`, then the quoted
//! message, `err="…"` when there is an error, and `key=value` pairs: text
//! quoted as Go quotes it, numbers and booleans bare, and text spanning lines
//! written as an indented block (`key=<` … ` >`).

use super::record::{Record, Value};

/// Wall-clock time broken down for the header (local time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderTime {
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

impl HeaderTime {
    /// The current local time.
    pub fn now() -> Self {
        let now = jiff::Zoned::now();
        HeaderTime {
            month: now.month() as u8,
            day: now.day() as u8,
            hour: now.hour() as u8,
            minute: now.minute() as u8,
            second: now.second() as u8,
            micros: (now.subsec_nanosecond() / 1_000) as u32,
        }
    }
}

fn is_unprintable(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c, '\u{00ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
}

/// Go's `strconv.Quote`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if is_unprintable(c) => {
                let n = c as u32;
                if n < 0x80 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Appends ` key=value` as klog writes it.
fn push_pair(out: &mut String, key: &str, value: &Value) {
    out.push(' ');
    out.push_str(key);
    match value {
        Value::Text(t) => push_text(out, t),
        Value::Int(i) => out.push_str(&format!("={i}")),
        Value::Uint(u) => out.push_str(&format!("={u}")),
        Value::Float(f) => out.push_str(&format!("={f}")),
        Value::Bool(b) => out.push_str(&format!("={b}")),
    }
}

fn push_text(out: &mut String, text: &str) {
    if !text.contains('\n') {
        out.push('=');
        out.push_str(&go_quote(text));
        return;
    }
    out.push_str("=<\n");
    let mut rest = text;
    while let Some(i) = rest.find('\n') {
        out.push('\t');
        out.push_str(&rest[..=i]);
        rest = &rest[i + 1..];
    }
    if rest.is_empty() {
        out.push_str(" >");
    } else {
        out.push('\t');
        out.push_str(rest);
        out.push_str("\n >");
    }
}

/// The file's base name, as klog prints callers.
pub fn base_name(file: &str) -> &str {
    file.rsplit(['/', '\\']).next().unwrap_or(file)
}

/// The file's parent directory and name (`--add-dir-header`).
fn dir_and_name(file: &str) -> &str {
    let mut seps = file.rmatch_indices(['/', '\\']);
    match (seps.next(), seps.next()) {
        (Some(_), Some((i, _))) => &file[i + 1..],
        _ => file,
    }
}

/// klog's header switches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeaderOptions {
    /// `--skip-headers`: no header at all.
    pub skip_headers: bool,
    /// `--add-dir-header`: the file's directory in the header.
    pub add_dir: bool,
}

/// Formats one entry as a klog text line (with its newline).
pub fn format(record: &Record, time: &HeaderTime, pid: u32) -> String {
    format_with(record, time, pid, HeaderOptions::default())
}

/// [`format`] with klog's header switches.
pub fn format_with(record: &Record, time: &HeaderTime, pid: u32, options: HeaderOptions) -> String {
    let message = if record.printf {
        record.message.clone()
    } else {
        go_quote(&record.message)
    };
    let mut out = if options.skip_headers {
        message
    } else {
        format!(
            "{}{:02}{:02} {:02}:{:02}:{:02}.{:06} {:>7} {}:{}] {message}",
            record.severity.letter(),
            time.month,
            time.day,
            time.hour,
            time.minute,
            time.second,
            time.micros,
            pid,
            if options.add_dir {
                dir_and_name(&record.file)
            } else {
                base_name(&record.file)
            },
            record.line,
        )
    };
    if let Some(err) = &record.err {
        push_pair(&mut out, "err", &Value::Text(err.clone()));
    }
    for (k, v) in &record.fields {
        push_pair(&mut out, k, v);
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::record::Severity;

    const T: HeaderTime = HeaderTime {
        month: 11,
        day: 22,
        hour: 10,
        minute: 20,
        second: 57,
        micros: 208_900,
    };

    #[test]
    fn golden_lines() {
        let cases: Vec<(Record, u32, &str)> = vec![
            (
                Record::new(Severity::Info, "src/app/server.rs", 49, "Starting kubelet")
                    .with("version", Value::Text("v1.25.16+kubelet-rs.0.1.0".into()))
                    .with("pod", Value::Text("ns/name".into())),
                2168,
                "I1122 10:20:57.208900    2168 server.rs:49] \"Starting kubelet\" version=\"v1.25.16+kubelet-rs.0.1.0\" pod=\"ns/name\"\n",
            ),
            (
                Record {
                    err: Some("open /x: no such file".into()),
                    ..Record::new(Severity::Error, "src/a/b.rs", 7, "Failed")
                }
                .with("count", Value::Int(-3))
                .with("ok", Value::Bool(true)),
                1,
                "E1122 10:20:57.208900       1 b.rs:7] \"Failed\" err=\"open /x: no such file\" count=-3 ok=true\n",
            ),
            (
                Record::new(Severity::Warning, "w.rs", 1, "say \"hi\"\tnow")
                    .with("path", Value::Text("C:\\x".into())),
                12345678,
                "W1122 10:20:57.208900 12345678 w.rs:1] \"say \\\"hi\\\"\\tnow\" path=\"C:\\\\x\"\n",
            ),
            (
                Record::new(Severity::Info, "m.rs", 3, "multi")
                    .with("text", Value::Text("line 1\nline 2".into()))
                    .with("ends", Value::Text("a\n".into())),
                42,
                "I1122 10:20:57.208900      42 m.rs:3] \"multi\" text=<\n\tline 1\n\tline 2\n > ends=<\n\ta\n >\n",
            ),
        ];
        let printf = Record {
            printf: true,
            ..Record::new(Severity::Info, "src/app/command.rs", 64, "FLAG: --v=\"2\"")
        };
        assert_eq!(
            format(&printf, &T, 7),
            "I1122 10:20:57.208900       7 command.rs:64] FLAG: --v=\"2\"\n"
        );
        for (record, pid, want) in cases {
            assert_eq!(format(&record, &T, pid), want);
        }
    }

    #[test]
    fn header_switches() {
        let r = Record::new(Severity::Info, "src/app/run.rs", 9, "hi");
        let skip = HeaderOptions {
            skip_headers: true,
            add_dir: false,
        };
        assert_eq!(format_with(&r, &T, 1, skip), "\"hi\"\n");
        let dir = HeaderOptions {
            skip_headers: false,
            add_dir: true,
        };
        assert_eq!(
            format_with(&r, &T, 1, dir),
            "I1122 10:20:57.208900       1 app/run.rs:9] \"hi\"\n"
        );
    }

    #[test]
    fn quoting_follows_go() {
        let cases = [
            ("plain", "\"plain\""),
            ("é ü 中", "\"é ü 中\""),
            ("\u{0}\u{7f}", "\"\\x00\\x7f\""),
            ("\u{a0}", "\"\\u00a0\""),
            ("\u{7}\u{8}\u{c}\u{b}\r", "\"\\a\\b\\f\\v\\r\""),
        ];
        for (input, want) in cases {
            assert_eq!(go_quote(input), want, "{input:?}");
        }
    }
}
