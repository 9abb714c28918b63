//! The container hash the kubelet stores in `io.kubernetes.container.hash`
//! and compares on every sync: a changed hash restarts the container.
//!
//! v1.25 computes it as FNV-1a (32 bit) over go-spew's `%#v` rendering of the
//! byte slice `json.Marshal(container)` returns. For a `[]byte` that rendering
//! is the type in parentheses followed by the decimal byte values:
//! `([]uint8)[123 34 110 ...]`. The JSON comes from [`super::gojson`].

use k8s_openapi::api::core::v1::Container;

use super::gojson::container_to_go_json;

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// 32-bit FNV-1a over `bytes`, continuing from `state`.
fn fnv1a32(mut state: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        state ^= u32::from(*b);
        state = state.wrapping_mul(FNV32_PRIME);
    }
    state
}

/// FNV-1a of go-spew's `%#v` dump of a byte slice, without building the dump.
fn hash_spew_bytes(data: &[u8]) -> u32 {
    let mut h = fnv1a32(FNV32_OFFSET, b"([]uint8)[");
    let mut num = itoa_buf();
    for (i, b) in data.iter().enumerate() {
        if i > 0 {
            h = fnv1a32(h, b" ");
        }
        h = fnv1a32(h, decimal(*b, &mut num));
    }
    fnv1a32(h, b"]")
}

fn itoa_buf() -> [u8; 3] {
    [0; 3]
}

fn decimal(v: u8, buf: &mut [u8; 3]) -> &[u8] {
    if v >= 100 {
        buf[0] = b'0' + v / 100;
        buf[1] = b'0' + (v / 10) % 10;
        buf[2] = b'0' + v % 10;
        &buf[..3]
    } else if v >= 10 {
        buf[0] = b'0' + v / 10;
        buf[1] = b'0' + v % 10;
        &buf[..2]
    } else {
        buf[0] = b'0' + v;
        &buf[..1]
    }
}

/// The container's hash as v1.25's `HashContainer` computes it.
pub fn hash_container(container: &Container) -> u64 {
    u64::from(hash_spew_bytes(container_to_go_json(container).as_bytes()))
}

/// The hash as the annotation writes it: lower-case hex, no padding.
pub fn hash_container_hex(container: &Container) -> String {
    format!("{:x}", hash_container(container))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The literal dump, to check the streaming hash against.
    fn spew_dump(data: &[u8]) -> String {
        let items: Vec<String> = data.iter().map(|b| b.to_string()).collect();
        format!("([]uint8)[{}]", items.join(" "))
    }

    #[test]
    fn streaming_hash_equals_hash_of_dump() {
        for data in [&b""[..], b"{}", b"\x00\xff\x09abc", b"{\"name\":\"x\"}"] {
            assert_eq!(
                hash_spew_bytes(data),
                fnv1a32(FNV32_OFFSET, spew_dump(data).as_bytes())
            );
        }
    }

    #[test]
    fn fnv_known_vectors() {
        // Published FNV-1a 32-bit test vectors.
        assert_eq!(fnv1a32(FNV32_OFFSET, b""), 0x811c9dc5);
        assert_eq!(fnv1a32(FNV32_OFFSET, b"a"), 0xe40c292c);
        assert_eq!(fnv1a32(FNV32_OFFSET, b"foobar"), 0xbf9cf968);
    }

    #[test]
    fn hash_changes_with_spec_and_ignores_newer_fields() {
        let base: Container = serde_json::from_value(serde_json::json!({
            "name": "app", "image": "busybox", "command": ["sleep", "1"]
        }))
        .expect("container");
        let mut changed = base.clone();
        changed.command = Some(vec!["sleep".into(), "2".into()]);
        assert_ne!(hash_container(&base), hash_container(&changed));

        let mut newer = base.clone();
        newer.restart_policy = Some("Always".into());
        assert_eq!(hash_container(&base), hash_container(&newer));
    }

    #[test]
    fn hashes_of_reference_shapes() {
        // Containers of the reference pods (tests/fixtures/go-kubelet-examples)
        // as the API server returned them, and the hash the Go kubelet wrote.
        let cases = [
            (
                serde_json::json!({"command": ["/bin/sh", "-c", "echo init done"],
                    "image": "k8s.gcr.io/e2e-test-images/busybox:1.29-2",
                    "imagePullPolicy": "IfNotPresent", "name": "init", "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "name": "kube-api-access-htn9j", "readOnly": true}]}),
                "cf1701e3",
            ),
            (
                serde_json::json!({"command": ["/bin/sh", "-c", "sleep 3600"],
                    "image": "k8s.gcr.io/e2e-test-images/busybox:1.29-2",
                    "imagePullPolicy": "IfNotPresent", "name": "app", "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "name": "kube-api-access-htn9j", "readOnly": true}]}),
                "1b8d18b7",
            ),
        ];
        for (json, want) in cases {
            let c: Container = serde_json::from_value(json).expect("container");
            assert_eq!(hash_container_hex(&c), want, "container {}", c.name);
        }
    }
}
