//! The name checks the kubelet applies at run time (hostnames, subdomains,
//! env var names, label and annotation keys), with the rules of
//! apimachinery's validation package. Each returns the list of problems;
//! empty means valid.

/// Longest RFC 1123 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest RFC 1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest name part of a qualified name.
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            is_lower_alnum(*f)
                && is_lower_alnum(*l)
                && b.iter().all(|c| is_lower_alnum(*c) || *c == b'-')
        }
        _ => false,
    }
}

/// Checks an RFC 1123 label (a hostname or subdomain part).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {DNS1123_LABEL_MAX_LENGTH} characters"
        ));
    }
    if !matches_dns1123_label(value) {
        errs.push(
            "must be a lowercase RFC 1123 label: lower case alphanumeric characters or '-', \
             starting and ending with an alphanumeric character (regex '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                .to_string(),
        );
    }
    errs
}

/// Checks an RFC 1123 subdomain (dot-separated labels).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
        ));
    }
    if !value.split('.').all(matches_dns1123_label) {
        errs.push(
            "must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', \
             starting and ending with an alphanumeric character"
                .to_string(),
        );
    }
    errs
}

/// Checks an environment variable name: `[-._a-zA-Z][-._a-zA-Z0-9]*`, and not
/// `.`, `..` or anything starting with `..`.
pub fn is_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let b = value.as_bytes();
    let first_ok = b
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'.' | b'_'));
    let rest_ok = b
        .iter()
        .skip(1)
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !(first_ok && rest_ok) {
        errs.push(
            "a valid environment variable name consists of alphabetic characters, digits, '_', '-' \
             or '.', and does not start with a digit (regex '[-._a-zA-Z][-._a-zA-Z0-9]*')"
                .to_string(),
        );
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Checks a qualified name (`[prefix/]name`) such as a label key.
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
            errs.push(
                "a qualified name is an optional DNS subdomain prefix and '/' followed by \
                 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"
                    .to_string(),
            );
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters"
        ));
    }
    if !matches_qualified_name_part(name) {
        errs.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', starting and \
             ending with an alphanumeric character"
                .to_string(),
        );
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_label_table() {
        let long = "a".repeat(64);
        let cases: &[(&str, bool)] = &[
            ("a", true),
            ("abc-123", true),
            ("0", true),
            ("A", false),
            ("-a", false),
            ("a-", false),
            ("a.b", false),
            ("", false),
            (&long, false),
        ];
        for (v, ok) in cases {
            assert_eq!(is_dns1123_label(v).is_empty(), *ok, "{v:?}");
        }
    }

    #[test]
    fn dns1123_subdomain_table() {
        let cases: &[(&str, bool)] = &[
            ("example.com", true),
            ("a", true),
            ("a..b", false),
            (".a", false),
            ("Example.com", false),
        ];
        for (v, ok) in cases {
            assert_eq!(is_dns1123_subdomain(v).is_empty(), *ok, "{v:?}");
        }
    }

    #[test]
    fn env_var_name_table() {
        let cases: &[(&str, bool)] = &[
            ("MY_VAR", true),
            ("my.env-name", true),
            ("_x", true),
            ("-x", true),
            ("1ABC", false),
            ("A B", false),
            ("", false),
            (".", false),
            ("..", false),
            ("..x", false),
            (".x", true),
        ];
        for (v, ok) in cases {
            assert_eq!(is_env_var_name(v).is_empty(), *ok, "{v:?}");
        }
    }

    #[test]
    fn qualified_name_table() {
        let cases: &[(&str, bool)] = &[
            ("app", true),
            ("example.com/app", true),
            ("MyName", true),
            ("my.name", true),
            ("/app", false),
            ("a/b/c", false),
            ("example.com/", false),
            ("-app", false),
            ("Example.com/app", false),
        ];
        for (v, ok) in cases {
            assert_eq!(is_qualified_name(v).is_empty(), *ok, "{v:?}");
        }
    }
}
