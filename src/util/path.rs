//! Lexical path clean-up with Go's `path.Clean` rules: repeated slashes
//! collapse, `.` elements go, `..` folds into the element before it (and
//! is dropped at the root), an empty result is `.`. No file system access,
//! no symlink resolution.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The cleaned form of a slash-separated byte path.
fn clean_bytes(p: &[u8]) -> Vec<u8> {
    let absolute = p.first() == Some(&b'/');
    let mut parts: Vec<&[u8]> = Vec::new();
    for seg in p.split(|b| *b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                if parts.last().is_some_and(|l| *l != b"..") {
                    parts.pop();
                } else if !absolute {
                    parts.push(b"..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join(&b'/');
    match (absolute, joined.is_empty()) {
        (true, _) => [b"/".as_slice(), &joined].concat(),
        (false, true) => b".".to_vec(),
        (false, false) => joined,
    }
}

/// Go's `path.Clean` on a string.
pub fn clean(p: &str) -> String {
    // Splitting and joining on the ASCII '/' keeps UTF-8 valid.
    String::from_utf8_lossy(&clean_bytes(p.as_bytes())).into_owned()
}

/// Go's `filepath.Clean` on a Unix path (non-UTF-8 bytes kept as they are).
pub fn clean_path(p: &Path) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&clean_bytes(p.as_os_str().as_bytes())))
}

/// The canonical form of a URL path (Go's net/http `cleanPath`): rooted,
/// cleaned, a trailing slash kept when the input had one.
pub fn clean_url_path(p: &str) -> String {
    if p.is_empty() {
        return "/".to_string();
    }
    let mut out = if p.starts_with('/') {
        clean(p)
    } else {
        clean(&format!("/{p}"))
    };
    if p.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_table() {
        let cases = [
            ("", "."),
            (".", "."),
            ("/", "/"),
            ("//", "/"),
            ("a/b", "a/b"),
            ("a//b/", "a/b"),
            ("./a", "a"),
            ("a/./b", "a/b"),
            ("a/../b", "b"),
            ("a/..", "."),
            ("../a", "../a"),
            ("a/../../b", "../b"),
            ("../../a/..", "../.."),
            ("/..", "/"),
            ("/../a", "/a"),
            ("/a/b/../../..", "/"),
            ("/var/lib/kubelet/", "/var/lib/kubelet"),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input), want, "{input:?}");
            assert_eq!(clean_path(Path::new(input)), Path::new(want), "{input:?}");
        }
    }

    #[test]
    fn clean_path_keeps_non_utf8_bytes() {
        let raw = OsStr::from_bytes(b"/a/\xff/./b/../c");
        assert_eq!(
            clean_path(Path::new(raw)).as_os_str().as_bytes(),
            b"/a/\xff/c"
        );
    }

    #[test]
    fn clean_url_path_table() {
        let cases = [
            ("", "/"),
            ("/", "/"),
            ("a/b", "/a/b"),
            ("/a/./b", "/a/b"),
            ("/a/../b", "/b"),
            ("/../a", "/a"),
            ("/a/b/", "/a/b/"),
            ("//a//b//", "/a/b/"),
            ("/a/..", "/"),
            ("/a/../", "/"),
        ];
        for (input, want) in cases {
            assert_eq!(clean_url_path(input), want, "{input:?}");
        }
    }
}
