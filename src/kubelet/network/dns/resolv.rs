//! resolv.conf parsing as the kubelet does it: `nameserver` lines accumulate,
//! the last `search` line wins (trailing dots dropped, a lone `.` kept), the
//! last `options` line wins, `#` comment lines are skipped.

use std::io::Read;
use std::path::Path;

/// Files larger than this are refused.
pub const MAX_RESOLV_CONF_LENGTH: usize = 10 << 20;

/// Errors reading or parsing a resolv.conf.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("could not open resolv.conf {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not read resolv.conf {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("resolv.conf is larger than {MAX_RESOLV_CONF_LENGTH} bytes")]
    TooLarge,
    #[error("error parsing resolv.conf: {}", .0.join(", "))]
    Parse(Vec<String>),
}

/// The three settings the kubelet takes from a resolv.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// Parses resolv.conf content. Returns what was parsed together with any
/// per-line problems (the kubelet refuses the file when there are some).
pub fn parse_resolv_conf(content: &[u8]) -> Result<ResolvConf, DnsError> {
    if content.len() > MAX_RESOLV_CONF_LENGTH {
        return Err(DnsError::TooLarge);
    }
    let text = String::from_utf8_lossy(content);
    let mut out = ResolvConf::default();
    let mut errors = Vec::new();
    for line in text.split('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        let Some(first) = fields.first() else {
            continue;
        };
        match *first {
            "nameserver" => match fields.get(1) {
                Some(ns) => out.nameservers.push(ns.to_string()),
                None => errors.push("nameserver list is empty".to_string()),
            },
            "search" => {
                out.searches = fields[1..]
                    .iter()
                    .map(|s| {
                        if *s == "." {
                            s.to_string()
                        } else {
                            s.strip_suffix('.').unwrap_or(s).to_string()
                        }
                    })
                    .collect();
            }
            "options" => {
                out.options = fields[1..].iter().map(|s| s.to_string()).collect();
            }
            _ => {}
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(DnsError::Parse(errors))
    }
}

/// Reads and parses a resolv.conf. Blocking: call from `spawn_blocking`.
pub fn read_resolv_conf(path: &Path) -> Result<ResolvConf, DnsError> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| DnsError::Open {
        path: shown.clone(),
        source,
    })?;
    let mut buf = Vec::new();
    file.take(MAX_RESOLV_CONF_LENGTH as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|source| DnsError::Read {
            path: shown,
            source,
        })?;
    parse_resolv_conf(&buf)
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parse_table() {
        let cases: &[(&str, &str, Result<(&[&str], &[&str], &[&str]), ()>)] = &[
            ("empty", "", Ok((&[], &[], &[]))),
            ("blank lines", "\n\n", Ok((&[], &[], &[]))),
            (
                "one nameserver",
                "nameserver 1.2.3.4",
                Ok((&["1.2.3.4"], &[], &[])),
            ),
            (
                "surrounding space",
                " nameserver 1.2.3.4 ",
                Ok((&["1.2.3.4"], &[], &[])),
            ),
            (
                "tabs",
                "\tnameserver\t1.2.3.4\t",
                Ok((&["1.2.3.4"], &[], &[])),
            ),
            (
                "nameservers accumulate",
                "nameserver 1.2.3.4\nnameserver 5.6.7.8",
                Ok((&["1.2.3.4", "5.6.7.8"], &[], &[])),
            ),
            (
                "extra fields ignored",
                "nameserver 1.2.3.4 #comment",
                Ok((&["1.2.3.4"], &[], &[])),
            ),
            (
                "comment line",
                "# nameserver 1.2.3.4\nnameserver 5.6.7.8",
                Ok((&["5.6.7.8"], &[], &[])),
            ),
            ("search", "search foo", Ok((&[], &["foo"], &[]))),
            (
                "search several",
                "search foo bar",
                Ok((&[], &["foo", "bar"], &[])),
            ),
            (
                "last search wins",
                "search foo\nsearch bar baz",
                Ok((&[], &["bar", "baz"], &[])),
            ),
            (
                "trailing dots dropped",
                "search foo. bar.",
                Ok((&[], &["foo", "bar"], &[])),
            ),
            ("root kept", "search .", Ok((&[], &["."], &[]))),
            (
                "empty search line clears",
                "search foo\nsearch",
                Ok((&[], &[], &[])),
            ),
            (
                "options",
                "options ndots:5 attempts:2",
                Ok((&[], &[], &["ndots:5", "attempts:2"])),
            ),
            (
                "last options wins",
                "options timeout:1\noptions attempts:3",
                Ok((&[], &[], &["attempts:3"])),
            ),
            (
                "everything",
                "nameserver 1.2.3.4\nsearch foo\noptions ndots:5\nnameserver 5.6.7.8",
                Ok((&["1.2.3.4", "5.6.7.8"], &["foo"], &["ndots:5"])),
            ),
            (
                "unknown keywords ignored",
                "domain example.com\nsortlist 10.0.0.0",
                Ok((&[], &[], &[])),
            ),
            ("nameserver without address", "nameserver", Err(())),
        ];
        for (name, input, want) in cases {
            let got = parse_resolv_conf(input.as_bytes()).map_err(|_| ());
            let want = want.map(|(n, s, o)| ResolvConf {
                nameservers: v(n),
                searches: v(s),
                options: v(o),
            });
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn too_large_is_refused() {
        let big = vec![b'#'; MAX_RESOLV_CONF_LENGTH + 1];
        assert!(matches!(parse_resolv_conf(&big), Err(DnsError::TooLarge)));
    }

    #[test]
    fn reads_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("resolv.conf");
        std::fs::write(&path, "nameserver 9.9.9.9\nsearch a.b.\n").expect("write");
        let got = read_resolv_conf(&path).expect("parse");
        assert_eq!(got.nameservers, v(&["9.9.9.9"]));
        assert_eq!(got.searches, v(&["a.b"]));
        assert!(matches!(
            read_resolv_conf(&dir.path().join("missing")),
            Err(DnsError::Open { .. })
        ));
    }
}
