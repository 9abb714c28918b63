//! The Prometheus text exposition format (version 0.0.4) as the Go client
//! writes it: float spelling, label-value and help-text escaping.

use std::fmt::Write as _;

/// Content type of what [`super::render_text`] returns.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Spells a sample value the way the Go exposition writer does: `+Inf`,
/// `-Inf`, `NaN`, and otherwise the shortest round-tripping digits in `%g`
/// style: scientific notation when the decimal exponent is below -4 or at
/// least 6, plain decimal otherwise.
pub fn format_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` yields the shortest round-tripping digits: "d.ddde±x".
    let sci = format!("{:e}", value.abs());
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let nd = digits.len() as i32;
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push_str(&digits[..1]);
        if nd > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exp.abs());
        return out;
    }
    // Plain decimal: the point sits after `exp + 1` digits.
    let dp = exp + 1;
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(&digits);
    } else if dp >= nd {
        out.push_str(&digits);
        for _ in 0..(dp - nd) {
            out.push('0');
        }
    } else {
        let split = dp as usize;
        out.push_str(&digits[..split]);
        out.push('.');
        out.push_str(&digits[split..]);
    }
    out
}

/// Escapes a label value: backslash, double quote and newline.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes help text: backslash and newline.
pub fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Writes `{name="value",...}` (nothing when there are no pairs).
pub fn write_labels(out: &mut String, pairs: &[(&str, &str)]) {
    if pairs.is_empty() {
        return;
    }
    out.push('{');
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{name}=\"{}\"", escape_label_value(value));
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_spelled_as_go_does() {
        // Expected strings are what Go's strconv.FormatFloat(v, 'g', -1, 64)
        // and the exposition writer produce for these values.
        let table: &[(f64, &str)] = &[
            (0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (2.0, "2"),
            (0.005, "0.005"),
            (0.0125, "0.0125"),
            (0.48828125, "0.48828125"),
            (298.0232238769531, "298.0232238769531"),
            (745.0580596923828, "745.0580596923828"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e6, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000015, "1.5e-05"),
            (1e21, "1e+21"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for (value, want) in table {
            assert_eq!(format_float(*value), *want, "value {value:?}");
        }
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        assert_eq!(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_help("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");
        let mut s = String::new();
        write_labels(&mut s, &[("operation_type", "version"), ("le", "+Inf")]);
        assert_eq!(s, "{operation_type=\"version\",le=\"+Inf\"}");
        let mut empty = String::new();
        write_labels(&mut empty, &[]);
        assert_eq!(empty, "");
    }
}
