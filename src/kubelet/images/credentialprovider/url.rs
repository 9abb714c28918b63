//! Registry locations as the credential keyring compares them (Go's
//! ParseSchemelessURL, SplitURL and URLsMatch): a location is read as the
//! authority and path of an `https://` URL, its host split into labels
//! and port; a pattern matches a target with the same port, the same
//! number of labels each matching as a shell glob (`*.corp.io`), and a path
//! that prefixes the target's. Wildcards work in host labels only.

/// Text that is not a schemeless URL, with Go's `url.Parse` messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("parse {url:?}: net/url: invalid control character in URL")]
    ControlCharacter { url: String },
    #[error("parse {url:?}: invalid URL escape {escape:?}")]
    Escape { url: String, escape: String },
    #[error("parse {url:?}: invalid character {character:?} in host name")]
    HostCharacter { url: String, character: String },
    #[error("parse {url:?}: invalid port {port:?} after host")]
    Port { url: String, port: String },
    #[error("parse {url:?}: missing ']' in host")]
    MissingBracket { url: String },
    #[error("parse {url:?}: net/url: invalid userinfo")]
    Userinfo { url: String },
}

/// The parts of a location the keyring compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemelessUrl {
    /// `host[:port]`, IPv6 literals in brackets.
    pub host: String,
    /// The unescaped path, `""` or starting with `/`.
    pub path: String,
}

/// Which part of the URL an escape is read in (Go's encoding modes that
/// differ in what they refuse).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Host,
    Other,
}

fn unhex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Whether an ASCII byte may appear as itself in a host name.
fn host_byte_ok(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!$&'()*+,;=:[]<>\"-_.~".contains(&c)
}

/// Decodes `%XX` escapes, refusing bad escapes (and, in a host, ASCII
/// escapes other than `%25` and bytes a host may not hold).
fn unescape(url: &str, s: &str, part: Part) -> Result<String, UrlError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b
                    .get(i + 1)
                    .copied()
                    .and_then(unhex)
                    .zip(b.get(i + 2).copied().and_then(unhex));
                let escape = || UrlError::Escape {
                    url: url.to_string(),
                    escape: s[i..].chars().take(3).collect(),
                };
                let Some((hi, lo)) = hex else {
                    return Err(escape());
                };
                if part == Part::Host && hi < 8 && &s[i..i + 3] != "%25" {
                    return Err(escape());
                }
                out.push(hi << 4 | lo);
                i += 3;
            }
            c if part == Part::Host && c < 0x80 && !host_byte_ok(c) => {
                return Err(UrlError::HostCharacter {
                    url: url.to_string(),
                    character: (c as char).to_string(),
                });
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `""` or `:` followed by digits.
fn valid_optional_port(port: &str) -> bool {
    match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => digits.bytes().all(|c| c.is_ascii_digit()),
    }
}

fn parse_host(url: &str, host: &str) -> Result<String, UrlError> {
    let port_error = |port: &str| UrlError::Port {
        url: url.to_string(),
        port: port.to_string(),
    };
    if host.starts_with('[') {
        let Some(end) = host.rfind(']') else {
            return Err(UrlError::MissingBracket {
                url: url.to_string(),
            });
        };
        let port = &host[end + 1..];
        if !valid_optional_port(port) {
            return Err(port_error(port));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_optional_port(port) {
            return Err(port_error(port));
        }
    }
    unescape(url, host, Part::Host)
}

/// Reads `s` as the rest of an `https://` URL (ParseSchemelessURL).
pub fn parse_schemeless(s: &str) -> Result<SchemelessUrl, UrlError> {
    let url = format!("https://{s}");
    if url.bytes().any(|c| c < 0x20 || c == 0x7f) {
        return Err(UrlError::ControlCharacter { url });
    }
    let (rest, fragment) = s.split_once('#').unwrap_or((s, ""));
    unescape(&url, fragment, Part::Other)?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let host = match authority.rfind('@') {
        Some(i) => {
            let userinfo = &authority[..i];
            let ok = userinfo
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
            if !ok {
                return Err(UrlError::Userinfo { url });
            }
            unescape(&url, userinfo, Part::Other)?;
            &authority[i + 1..]
        }
        None => authority,
    };
    let host = parse_host(&url, host)?;
    let path = unescape(&url, path, Part::Other)?;
    Ok(SchemelessUrl { host, path })
}

/// Host name and port of `host[:port]` as Go's net.SplitHostPort reads
/// them; a host it refuses (no port, too many colons) is all name.
fn split_host_port(hostport: &str) -> (&str, &str) {
    let whole = (hostport, "");
    let Some(i) = hostport.rfind(':') else {
        return whole;
    };
    let (host, after) = if hostport.starts_with('[') {
        let Some(end) = hostport.find(']') else {
            return whole;
        };
        if end + 1 != i {
            return whole;
        }
        (&hostport[1..end], end + 1)
    } else {
        let host = &hostport[..i];
        if host.contains(':') {
            return whole;
        }
        (host, i)
    };
    let inner_start = usize::from(hostport.starts_with('['));
    if hostport[inner_start..].contains('[') || hostport[after..].contains(']') {
        return whole;
    }
    (host, &hostport[i + 1..])
}

/// Host labels and port of a parsed location (SplitURL).
fn split_url(url: &SchemelessUrl) -> (Vec<&str>, &str) {
    let (host, port) = split_host_port(&url.host);
    (host.split('.').collect(), port)
}

/// Whether `target` falls under the pattern `glob` (URLsMatch).
pub fn urls_match(glob: &SchemelessUrl, target: &SchemelessUrl) -> bool {
    let (glob_labels, glob_port) = split_url(glob);
    let (target_labels, target_port) = split_url(target);
    glob_port == target_port
        && glob_labels.len() == target_labels.len()
        && target.path.starts_with(&glob.path)
        && glob_labels
            .iter()
            .zip(&target_labels)
            .all(|(g, t)| glob_match(g, t))
}

/// [`urls_match`] on unparsed locations; either failing to parse is no
/// match (URLsMatchStr).
pub fn urls_match_str(glob: &str, target: &str) -> bool {
    match (parse_schemeless(glob), parse_schemeless(target)) {
        (Ok(g), Ok(t)) => urls_match(&g, &t),
        _ => false,
    }
}

/// Shell-style matching of one label: `*`, `?` and `[...]` classes (Go's
/// filepath.Match within a label, which has no separators); a malformed
/// pattern matches nothing.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    fn class(p: &[char], c: char) -> Option<(bool, usize)> {
        // p starts after '['; returns (matched, length consumed incl. ']').
        let mut i = 0;
        let negate = matches!(p.first(), Some('^') | Some('!'));
        if negate {
            i += 1;
        }
        let mut matched = false;
        let mut first = true;
        while i < p.len() {
            if p[i] == ']' && !first {
                return Some((matched != negate, i + 1));
            }
            first = false;
            let lo = p[i];
            if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
                if lo <= c && c <= p[i + 2] {
                    matched = true;
                }
                i += 3;
            } else {
                if lo == c {
                    matched = true;
                }
                i += 1;
            }
        }
        None
    }
    fn go(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|k| go(&p[1..], &t[k..])),
            Some('?') => !t.is_empty() && go(&p[1..], &t[1..]),
            Some('[') => match (t.first(), class(&p[1..], *t.first().unwrap_or(&'\0'))) {
                (Some(_), Some((true, used))) => go(&p[1 + used..], &t[1..]),
                _ => false,
            },
            Some('\\') if p.len() > 1 => t.first() == Some(&p[1]) && go(&p[2..], &t[1..]),
            Some(c) => t.first() == Some(c) && go(&p[1..], &t[1..]),
        }
    }
    go(&p, &t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_go_reads_an_https_url() {
        let ok: &[(&str, &str, &str)] = &[
            ("registry.io", "registry.io", ""),
            ("registry.io:5000/team/app", "registry.io:5000", "/team/app"),
            ("*.corp.io", "*.corp.io", ""),
            ("[::1]:5000/x", "[::1]:5000", "/x"),
            ("user:pw@host.io/p", "host.io", "/p"),
            ("host.io/a%2Fb?q=1#frag", "host.io", "/a/b"),
            ("host.io:", "host.io:", ""),
            ("", "", ""),
        ];
        for (input, host, path) in ok {
            let u = parse_schemeless(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(
                (u.host.as_str(), u.path.as_str()),
                (*host, *path),
                "{input}"
            );
        }
        let bad: &[(&str, &str)] = &[
            (
                "registry.io:abc",
                r#"parse "https://registry.io:abc": invalid port ":abc" after host"#,
            ),
            (
                "bad host.io",
                r#"parse "https://bad host.io": invalid character " " in host name"#,
            ),
            (
                "host.io/%zz",
                r#"parse "https://host.io/%zz": invalid URL escape "%zz""#,
            ),
            (
                "h%41.io",
                r#"parse "https://h%41.io": invalid URL escape "%41""#,
            ),
            ("[::1", r#"parse "https://[::1": missing ']' in host"#),
            (
                "a\tb",
                r#"parse "https://a\tb": net/url: invalid control character in URL"#,
            ),
            (
                "us^er@h.io",
                r#"parse "https://us^er@h.io": net/url: invalid userinfo"#,
            ),
        ];
        for (input, want) in bad {
            let err = parse_schemeless(input).expect_err(input);
            assert_eq!(err.to_string(), *want, "{input}");
        }
    }

    #[test]
    fn matches_hosts_ports_and_paths_as_go() {
        let cases: &[(&str, &str, bool)] = &[
            ("registry.io", "registry.io/app", true),
            ("registry.io", "registry.io", true),
            ("*.registry.io", "eu.registry.io/app", true),
            ("*.registry.io", "registry.io/app", false),
            ("*.registry.io", "a.eu.registry.io/app", false),
            ("*.*.registry.io", "a.eu.registry.io/app", true),
            ("registry.io:5000", "registry.io:5000/app", true),
            ("registry.io:5000", "registry.io/app", false),
            ("registry.io", "registry.io:5000/app", false),
            ("registry.io/team", "registry.io/team/app", true),
            ("registry.io/team", "registry.io/teams/app", true),
            ("registry.io/team", "registry.io/other/app", false),
            ("reg*.io", "registry.io/x", true),
            ("registry.io", "*.io/x", false),
            ("[::1]:5000", "[::1]:5000/app", true),
            ("registry.io:x", "registry.io/app", false),
            ("[bad", "registry.io/app", false),
        ];
        for (glob, target, want) in cases {
            assert_eq!(urls_match_str(glob, target), *want, "{glob} vs {target}");
        }
    }

    #[test]
    fn host_and_port_split_as_net_split_host_port() {
        let cases: &[(&str, (&str, &str))] = &[
            ("host", ("host", "")),
            ("host:80", ("host", "80")),
            ("host:", ("host", "")),
            ("[::1]:80", ("::1", "80")),
            ("[::1]", ("[::1]", "")),
            ("a:b:80", ("a:b:80", "")),
        ];
        for (input, want) in cases {
            assert_eq!(split_host_port(input), *want, "{input}");
        }
    }

    #[test]
    fn label_globs_as_shell_patterns() {
        let cases = [
            ("*", "anything", true),
            ("reg?", "reg1", true),
            ("reg?", "reg12", false),
            ("[a-c]x", "bx", true),
            ("[!a-c]x", "bx", false),
            ("[^a-c]x", "dx", true),
            ("a*b", "ab", true),
            ("a*b", "acccb", true),
            ("a*b", "acccd", false),
            ("[", "[", false),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(glob_match(pattern, text), want, "{pattern} {text}");
        }
    }
}
