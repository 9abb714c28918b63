//! Plugin names on disk: `kubernetes.io/empty-dir` is stored as
//! `kubernetes.io~empty-dir` (k8s.io/utils/strings).

/// `/` → `~`.
pub fn escape_qualified_name(name: &str) -> String {
    name.replace('/', "~")
}

/// `~` → `/`.
pub fn unescape_qualified_name(name: &str) -> String {
    name.replace('~', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_table() {
        let cases = [
            ("kubernetes.io/empty-dir", "kubernetes.io~empty-dir"),
            ("kubernetes.io/configmap", "kubernetes.io~configmap"),
            ("plain", "plain"),
            ("a/b/c", "a~b~c"),
        ];
        for (name, escaped) in cases {
            assert_eq!(escape_qualified_name(name), escaped);
            assert_eq!(unescape_qualified_name(escaped), name);
        }
    }
}
