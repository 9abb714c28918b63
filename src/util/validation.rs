//! Name rules of the API machinery (apimachinery util/validation), returning
//! the same messages. The one home for DNS-1123 names, qualified names, label
//! values, env var names, config keys, ports and IPs: every check in the
//! kubelet (flags, static pods, node name, hostnames, env) goes through here.

/// Longest RFC 1123 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest RFC 1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest name part of a qualified name, and longest label value.
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const ENV_VAR_NAME_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const HTTP_HEADER_NAME_FMT: &str = "[-A-Za-z0-9]+";
const HTTP_HEADER_NAME_MSG: &str =
    "a valid HTTP header must consist of alphanumeric characters or '-'";

/// "must be no more than N characters"
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// A message with examples and the regular expression that was applied.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn matches_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && lower_alnum(b[0])
        && lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// An RFC 1123 label: at most 63 characters of `[a-z0-9-]`, alphanumeric ends.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns_label(value) {
        errs.push(regex_error(
            DNS1123_LABEL_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// An RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !value.split('.').all(matches_dns_label) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A qualified name: `[prefix/]name`, name at most 63 characters.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// A label value: empty, or up to 63 characters like a qualified name part.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// An IANA service name, as container port names must be.
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if !port.bytes().all(lower_alnum_or_hyphen) {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

fn lower_alnum_or_hyphen(c: u8) -> bool {
    lower_alnum(c) || c == b'-'
}

/// 1..=65535.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// "must be between lo and hi, inclusive"
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// 0..=2147483647.
pub fn is_valid_id(id: i64) -> Vec<String> {
    if (0..=i64::from(i32::MAX)).contains(&id) {
        Vec::new()
    } else {
        vec![inclusive_range_error(0, i64::from(i32::MAX))]
    }
}

/// An environment variable name (v1.25 rules: not starting with a digit,
/// not `.`, `..` or `..`-prefixed).
pub fn is_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let b = value.as_bytes();
    let ok_char = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_');
    let matches = !b.is_empty() && !b[0].is_ascii_digit() && b.iter().all(|&c| ok_char(c));
    if !matches {
        errs.push(regex_error(
            ENV_VAR_NAME_MSG,
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    errs.extend(ch_dir_prefix(value));
    errs
}

fn ch_dir_prefix(value: &str) -> Option<String> {
    if value == "." {
        Some("must not be '.'".into())
    } else if value == ".." {
        Some("must not be '..'".into())
    } else if value.starts_with("..") {
        Some("must not start with '..'".into())
    } else {
        None
    }
}

/// A configMap or secret key.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
    {
        errs.push(regex_error(
            CONFIG_MAP_KEY_MSG,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(ch_dir_prefix(value));
    errs
}

/// An HTTP header name.
pub fn is_http_header_name(value: &str) -> Vec<String> {
    if !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-')
    {
        Vec::new()
    } else {
        vec![regex_error(
            HTTP_HEADER_NAME_MSG,
            HTTP_HEADER_NAME_FMT,
            &["X-Header-Name"],
        )]
    }
}

/// Whether Go's sloppy IP parser (leading zeros allowed) accepts it.
pub fn is_ip(value: &str) -> bool {
    if value.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|c| c.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        let label_cases = [
            ("abc", true),
            ("a-1", true),
            ("A", false),
            ("-a", false),
            ("a.b", false),
            (&"a".repeat(64), false),
        ];
        for (v, ok) in label_cases {
            assert_eq!(is_dns1123_label(v).is_empty(), ok, "{v}");
        }
        let sub_cases = [
            ("a.b-c", true),
            ("a..b", false),
            ("a.", false),
            ("Web", false),
        ];
        for (v, ok) in sub_cases {
            assert_eq!(is_dns1123_subdomain(v).is_empty(), ok, "{v}");
        }
        let q_cases = [
            ("app", true),
            ("example.com/App_1", true),
            ("/a", false),
            ("a/b/c", false),
            ("a_", false),
            ("Example.com/a", false),
        ];
        for (v, ok) in q_cases {
            assert_eq!(is_qualified_name(v).is_empty(), ok, "{v}");
        }
        let port_cases = [
            ("http", true),
            ("h-2", true),
            ("80", false),
            ("a--b", false),
            ("HTTP", false),
            ("sixteen-chars-ab", false),
        ];
        for (v, ok) in port_cases {
            assert_eq!(is_valid_port_name(v).is_empty(), ok, "{v}");
        }
        let env_cases = [
            ("A_B", true),
            ("my.env-name", true),
            ("1A", false),
            ("..a", false),
            ("A B", false),
        ];
        for (v, ok) in env_cases {
            assert_eq!(is_env_var_name(v).is_empty(), ok, "{v}");
        }
        assert!(is_ip("10.0.0.1") && is_ip("::1") && is_ip("010.001.0.1"));
        assert!(!is_ip("10.0.0") && !is_ip("dns.example"));
    }

    #[test]
    fn messages_match_the_api_machinery() {
        assert_eq!(
            is_dns1123_label("Bad"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        assert_eq!(
            is_valid_port_num(0),
            vec!["must be between 1 and 65535, inclusive".to_string()]
        );
    }
}
