//! Image references as the kubelet reads them (the docker reference grammar
//! the Go kubelet uses): validation, the default `:latest` tag, and the
//! fully qualified repository credentials are looked up by.

/// Why an image reference is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("couldn't parse image reference {image:?}: {reason}")]
    Invalid { image: String, reason: &'static str },
}

/// The parts of a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedReference {
    /// The registry host (and port), if the reference names one.
    pub domain: Option<String>,
    /// The repository path within the registry.
    pub path: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

const DEFAULT_DOMAIN: &str = "docker.io";
const OFFICIAL_REPO_PREFIX: &str = "library/";

fn invalid(image: &str, reason: &'static str) -> ReferenceError {
    ReferenceError::Invalid {
        image: image.to_string(),
        reason,
    }
}

/// One path component: lowercase alphanumerics joined by `.`, `_`, `__`
/// or runs of `-`.
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let ch = b[i];
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            i += 1;
            continue;
        }
        let sep_start = i;
        while i < b.len() && matches!(b[i], b'.' | b'_' | b'-') {
            i += 1;
        }
        let sep = &c[sep_start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok || sep.is_empty() {
            return false;
        }
    }
    true
}

fn valid_domain(d: &str) -> bool {
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => (h, Some(p)),
        _ => (d, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit())) {
        return false;
    }
    if host.starts_with('[') {
        return host.ends_with(']')
            && host[1..host.len() - 1]
                .parse::<std::net::Ipv6Addr>()
                .is_ok();
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

fn valid_digest(d: &str) -> bool {
    let Some((alg, hex)) = d.split_once(':') else {
        return false;
    };
    !alg.is_empty()
        && alg.bytes().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'+' | b'.' | b'_' | b'-')
        })
        && hex.len() >= 32
        && hex.bytes().all(|c| c.is_ascii_hexdigit())
}

/// Parses a reference the way the kubelet's docker reference parser does
/// (normalized form: a bare name is a Docker Hub repository).
pub fn parse_reference(image: &str) -> Result<ParsedReference, ReferenceError> {
    if image.is_empty() {
        return Err(invalid(
            image,
            "repository name must have at least one component",
        ));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => {
            if !valid_digest(d) {
                return Err(invalid(image, "invalid digest format"));
            }
            (r, Some(d.to_string()))
        }
        None => (image, None),
    };
    let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => {
            let t = &rest[last_slash + i + 1..];
            if !valid_tag(t) {
                return Err(invalid(image, "invalid reference format"));
            }
            (&rest[..last_slash + i], Some(t.to_string()))
        }
        None => (rest, None),
    };
    if name.len() > 255 {
        return Err(invalid(
            image,
            "repository name must not be more than 255 characters",
        ));
    }
    let (domain, path) = match name.split_once('/') {
        Some((first, p))
            if first.contains('.')
                || first.contains(':')
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            (Some(first.to_string()), p.to_string())
        }
        _ => (None, name.to_string()),
    };
    if let Some(d) = &domain
        && !valid_domain(d)
    {
        return Err(invalid(image, "invalid reference format"));
    }
    if path.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(invalid(image, "repository name must be lowercase"));
    }
    if !path.split('/').all(valid_component) {
        return Err(invalid(image, "invalid reference format"));
    }
    if domain.is_none() && path.len() == 64 && path.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(invalid(
            image,
            "invalid repository name (64 hex characters), cannot specify 64-byte hexadecimal strings",
        ));
    }
    Ok(ParsedReference {
        domain,
        path,
        tag,
        digest,
    })
}

/// The image with `:latest` appended when it names neither tag nor digest.
/// The name itself is kept as written (not qualified with docker.io).
pub fn apply_default_image_tag(image: &str) -> Result<String, ReferenceError> {
    let parsed = parse_reference(image)?;
    if parsed.tag.is_none() && parsed.digest.is_none() {
        Ok(format!("{image}:latest"))
    } else {
        Ok(image.to_string())
    }
}

/// The fully qualified repository (`docker.io/library/busybox`) that
/// registry credentials are matched against.
pub fn repository_to_pull(image: &str) -> Result<String, ReferenceError> {
    let parsed = parse_reference(image)?;
    Ok(match parsed.domain {
        Some(d) => format!("{d}/{}", parsed.path),
        None if parsed.path.contains('/') => format!("{DEFAULT_DOMAIN}/{}", parsed.path),
        None => format!("{DEFAULT_DOMAIN}/{OFFICIAL_REPO_PREFIX}{}", parsed.path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_tag_table() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let with_digest = format!("busybox@{digest}");
        let cases: Vec<(&str, Result<String, ()>)> = vec![
            ("busybox", Ok("busybox:latest".into())),
            ("busybox:1.35", Ok("busybox:1.35".into())),
            (
                "registry.k8s.io/pause:3.8",
                Ok("registry.k8s.io/pause:3.8".into()),
            ),
            ("localhost:5000/app", Ok("localhost:5000/app:latest".into())),
            (
                "kubelet-rs.local/busybox",
                Ok("kubelet-rs.local/busybox:latest".into()),
            ),
            (with_digest.as_str(), Ok(with_digest.clone())),
            ("Busybox", Err(())),
            ("busy box", Err(())),
            ("", Err(())),
            ("busybox:", Err(())),
            ("a//b", Err(())),
            ("busybox@sha256:zz", Err(())),
        ];
        for (image, want) in cases {
            let got = apply_default_image_tag(image).map_err(|_| ());
            assert_eq!(got, want, "{image:?}");
        }
    }

    #[test]
    fn repository_to_pull_table() {
        let cases = [
            ("busybox", "docker.io/library/busybox"),
            ("busybox:1", "docker.io/library/busybox"),
            ("user/app:2", "docker.io/user/app"),
            ("registry.k8s.io/pause:3.8", "registry.k8s.io/pause"),
            ("localhost/app", "localhost/app"),
            ("host:5000/a/b:c", "host:5000/a/b"),
        ];
        for (image, want) in cases {
            assert_eq!(repository_to_pull(image).as_deref(), Ok(want), "{image}");
        }
    }
}
