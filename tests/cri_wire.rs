//! The generated CRI messages against bytes recorded from containerd 1.6:
//! decoding and re-encoding must give the same bytes (up to the order of
//! map entries, which Go writes in random order), so no field the runtime
//! sends is unknown to our proto or mistyped.
//!
//! The fixtures in tests/fixtures/cri/ were recorded with
//! `KUBELET_RS_CAPTURE_CRI_FIXTURES=1 cargo test --test cri_wire capture`,
//! which runs a kubelet-shaped pod on a private containerd and stores each
//! response body exactly as it came off the wire.

mod support;

use std::path::PathBuf;

use kubelet::cri::api;
use prost::Message;

fn fixture_dir() -> PathBuf {
    support::repo_root().join("tests/fixtures/cri")
}

fn fixture(name: &str) -> Vec<u8> {
    let path = fixture_dir().join(format!("{name}.bin"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

// --- a schema-free view of the wire format --------------------------------

fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Splits a message into (field number, wire type, raw value) records, or
/// `None` if the bytes are not a well-formed message.
fn records(buf: &[u8]) -> Option<Vec<(u64, u8, Vec<u8>)>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (field, wire) = (key >> 3, (key & 7) as u8);
        if field == 0 {
            return None;
        }
        let start = pos;
        match wire {
            0 => {
                varint(buf, &mut pos)?;
            }
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
                let start = pos;
                pos = pos.checked_add(len)?;
                if pos > buf.len() {
                    return None;
                }
                out.push((field, wire, buf[start..pos].to_vec()));
                continue;
            }
            _ => return None,
        }
        if pos > buf.len() {
            return None;
        }
        out.push((field, wire, buf[start..pos].to_vec()));
    }
    Some(out)
}

/// A canonical form: embedded messages canonicalized recursively, and each
/// run of consecutive records of one field (how map entries are written)
/// sorted. Two encodings that differ only in map-entry order canonicalize to
/// the same bytes; a dropped, added or changed field still shows.
fn canonical(buf: &[u8]) -> Vec<u8> {
    let Some(recs) = records(buf) else {
        return buf.to_vec();
    };
    let mut encoded: Vec<(u64, Vec<u8>)> = recs
        .into_iter()
        .map(|(field, wire, value)| {
            let mut rec = Vec::new();
            put_varint(&mut rec, (field << 3) | u64::from(wire));
            if wire == 2 {
                let inner = canonical(&value);
                put_varint(&mut rec, inner.len() as u64);
                rec.extend(inner);
            } else {
                rec.extend(value);
            }
            (field, rec)
        })
        .collect();
    let mut i = 0;
    while i < encoded.len() {
        let mut j = i + 1;
        while j < encoded.len() && encoded[j].0 == encoded[i].0 {
            j += 1;
        }
        encoded[i..j].sort_by(|a, b| a.1.cmp(&b.1));
        i = j;
    }
    encoded.into_iter().flat_map(|(_, rec)| rec).collect()
}

/// Decodes `name`, re-encodes it, and checks the bytes survive.
fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(name: &str) -> M {
    let original = fixture(name);
    assert!(!original.is_empty(), "{name}: empty fixture");
    let msg = M::decode(original.as_slice()).unwrap_or_else(|e| panic!("{name}: decode: {e}"));
    let again = msg.encode_to_vec();
    assert_eq!(
        again.len(),
        original.len(),
        "{name}: re-encoded length differs"
    );
    assert_eq!(
        canonical(&again),
        canonical(&original),
        "{name}: re-encoded bytes differ beyond map-entry order"
    );
    let twice = M::decode(again.as_slice()).unwrap_or_else(|e| panic!("{name}: decode again: {e}"));
    assert_eq!(twice, msg, "{name}: decode(encode(m)) != m");
    msg
}

#[test]
fn canonical_form_ignores_only_map_order() {
    let a = api::PodSandboxMetadata {
        name: "x".into(),
        ..Default::default()
    };
    let one = api::PodSandboxConfig {
        metadata: Some(a.clone()),
        labels: [("a".to_string(), "1".to_string())].into(),
        ..Default::default()
    };
    let mut two = one.clone();
    two.labels.insert("b".into(), "2".into());
    // Hand-build both entry orders of the two-entry map.
    let entry = |k: &str, v: &str| {
        let e = api::PodSandboxConfig {
            labels: [(k.to_string(), v.to_string())].into(),
            ..Default::default()
        };
        e.encode_to_vec()
    };
    let meta = api::PodSandboxConfig {
        metadata: Some(a),
        ..Default::default()
    }
    .encode_to_vec();
    let ab = [meta.clone(), entry("a", "1"), entry("b", "2")].concat();
    let ba = [meta, entry("b", "2"), entry("a", "1")].concat();
    assert_ne!(ab, ba);
    assert_eq!(canonical(&ab), canonical(&ba));
    assert_ne!(
        canonical(&ab),
        canonical(&one.encode_to_vec()),
        "a missing entry shows"
    );
    assert_eq!(
        records(b"\x0b").map(|r| r.len()),
        None,
        "groups are not messages"
    );
}

#[test]
fn version_response_round_trips_byte_for_byte() {
    let original = fixture("version");
    let v: api::VersionResponse = round_trip("version");
    assert_eq!(
        v.encode_to_vec(),
        original,
        "no maps: bytes must be identical"
    );
    assert_eq!(v.version, "0.1.0");
    assert_eq!(v.runtime_name, "containerd");
    assert_eq!(v.runtime_api_version, "v1");
    assert!(
        v.runtime_version.starts_with("1.6"),
        "{}",
        v.runtime_version
    );
}

#[test]
fn status_response_round_trips() {
    let s: api::StatusResponse = round_trip("status");
    let conditions = s.status.expect("status").conditions;
    let kinds: Vec<&str> = conditions.iter().map(|c| c.r#type.as_str()).collect();
    assert_eq!(kinds, vec!["RuntimeReady", "NetworkReady"]);
    assert!(conditions.iter().all(|c| c.status));
}

#[test]
fn pod_sandbox_status_round_trips() {
    let r: api::PodSandboxStatusResponse = round_trip("pod_sandbox_status");
    let s = r.status.expect("status");
    let meta = s.metadata.expect("metadata");
    assert_eq!(
        (meta.name.as_str(), meta.namespace.as_str()),
        ("wire", "refpack")
    );
    assert_eq!(s.labels.get("io.kubernetes.pod.uid"), Some(&meta.uid));
    assert_eq!(s.labels.len(), 3);
    assert_eq!(
        s.annotations
            .get("kubernetes.io/config.source")
            .map(String::as_str),
        Some("api")
    );
    assert_eq!(s.state, api::PodSandboxState::SandboxReady as i32);
    assert!(s.created_at > 0);
    assert!(!s.network.expect("network").ip.is_empty());
    let opts = s
        .linux
        .and_then(|l| l.namespaces)
        .and_then(|n| n.options)
        .expect("options");
    assert_eq!(opts.pid, api::NamespaceMode::Container as i32);
    assert_eq!(s.runtime_handler, "");
}

#[test]
fn container_status_and_list_round_trip() {
    let r: api::ContainerStatusResponse = round_trip("container_status");
    let s = r.status.expect("status");
    assert_eq!(s.metadata.as_ref().map(|m| m.name.as_str()), Some("main"));
    assert_eq!(s.state, api::ContainerState::ContainerRunning as i32);
    assert!(s.image_ref.starts_with("sha256:"));
    assert_eq!(
        s.labels
            .get("io.kubernetes.container.name")
            .map(String::as_str),
        Some("main")
    );
    assert!(s.log_path.ends_with("main/0.log"));
    assert!(s.created_at > 0 && s.started_at >= s.created_at);

    let list: api::ListContainersResponse = round_trip("list_containers");
    assert_eq!(list.containers.len(), 1);
    assert_eq!(list.containers[0].id, s.id);
    assert_eq!(
        list.containers[0].state,
        api::ContainerState::ContainerRunning as i32
    );

    let stats: api::ContainerStatsResponse = round_trip("container_stats");
    let stats = stats.stats.expect("stats");
    assert_eq!(stats.attributes.map(|a| a.id), Some(s.id));
    assert!(stats.memory.and_then(|m| m.working_set_bytes).is_some());
}

#[test]
fn image_responses_round_trip() {
    let r: api::ImageStatusResponse = round_trip("image_status");
    let img = r.image.expect("image");
    assert!(
        img.repo_tags
            .iter()
            .any(|t| t == "kubelet-rs.local/busybox:1.35"),
        "{:?}",
        img.repo_tags
    );
    assert!(img.size > 0);
    assert!(img.id.starts_with("sha256:"));

    let original = fixture("image_fs_info");
    let fs: api::ImageFsInfoResponse = round_trip("image_fs_info");
    assert_eq!(
        fs.encode_to_vec(),
        original,
        "no maps: bytes must be identical"
    );
    assert_eq!(fs.image_filesystems.len(), 1);
    assert!(
        fs.image_filesystems[0]
            .fs_id
            .as_ref()
            .is_some_and(|f| !f.mountpoint.is_empty())
    );
}

// --- recording ---------------------------------------------------------------

mod capture {
    use std::marker::PhantomData;

    use bytes::Buf;
    use prost::Message;
    use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
    use tonic::transport::Channel;

    /// Sends a prost message, hands back the response body untouched.
    pub struct RawCodec<T>(PhantomData<T>);

    impl<T> Default for RawCodec<T> {
        fn default() -> Self {
            RawCodec(PhantomData)
        }
    }

    pub struct Enc<T>(PhantomData<T>);
    pub struct Dec;

    impl<T: Message + Send + 'static> Encoder for Enc<T> {
        type Item = T;
        type Error = tonic::Status;
        fn encode(&mut self, item: T, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
            item.encode(dst)
                .map_err(|e| tonic::Status::internal(e.to_string()))
        }
    }

    impl Decoder for Dec {
        type Item = Vec<u8>;
        type Error = tonic::Status;
        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
            let n = src.remaining();
            Ok(Some(src.copy_to_bytes(n).to_vec()))
        }
    }

    impl<T: Message + Send + 'static> Codec for RawCodec<T> {
        type Encode = T;
        type Decode = Vec<u8>;
        type Encoder = Enc<T>;
        type Decoder = Dec;
        fn encoder(&mut self) -> Enc<T> {
            Enc(PhantomData)
        }
        fn decoder(&mut self) -> Dec {
            Dec
        }
    }

    /// Calls `path` with `req` and returns the raw response body.
    pub async fn raw<T: Message + Send + Sync + 'static>(
        channel: &Channel,
        path: &'static str,
        req: T,
    ) -> Vec<u8> {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await.expect("channel ready");
        grpc.unary(
            tonic::Request::new(req),
            http::uri::PathAndQuery::from_static(path),
            RawCodec::<T>::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .into_inner()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_fixtures_from_containerd() {
    if std::env::var_os("KUBELET_RS_CAPTURE_CRI_FIXTURES").is_none() {
        eprintln!(
            "not recording CRI fixtures (set KUBELET_RS_CAPTURE_CRI_FIXTURES=1 to re-record)"
        );
        return;
    }
    use kubelet::cri::{RemoteRuntimeService, RuntimeService};
    use support::cri_requests::{container, pod};

    let Some(rig) = support::containerd::Containerd::start("capture_fixtures_from_containerd")
    else {
        return;
    };
    let rt = RemoteRuntimeService::connect(&rig.endpoint(), rig.timeout())
        .await
        .expect("connect");
    let p = pod(&rig, "wire", "refpack");
    let sandbox = rt.run_pod_sandbox(&p.config, "").await.expect("sandbox");
    let cfg = container(
        &p,
        "main",
        &support::containerd::images().busybox,
        &["sleep", "3600"],
    );
    let id = rt
        .create_container(&sandbox, &cfg, &p.config)
        .await
        .expect("create");
    rt.start_container(&id).await.expect("start");

    let ep = kubelet::cri::connection::parse_endpoint(&rig.endpoint()).expect("endpoint");
    let ch = kubelet::cri::connection::unix_channel(&ep, rig.timeout()).expect("channel");
    let busybox = api::ImageSpec {
        image: support::containerd::images().busybox.clone(),
        ..Default::default()
    };
    let recordings: Vec<(&str, Vec<u8>)> = vec![
        (
            "version",
            capture::raw(
                &ch,
                "/runtime.v1.RuntimeService/Version",
                api::VersionRequest {
                    version: "0.1.0".into(),
                },
            )
            .await,
        ),
        (
            "status",
            capture::raw(
                &ch,
                "/runtime.v1.RuntimeService/Status",
                api::StatusRequest { verbose: false },
            )
            .await,
        ),
        (
            "pod_sandbox_status",
            capture::raw(
                &ch,
                "/runtime.v1.RuntimeService/PodSandboxStatus",
                api::PodSandboxStatusRequest {
                    pod_sandbox_id: sandbox.clone(),
                    verbose: false,
                },
            )
            .await,
        ),
        (
            "container_status",
            capture::raw(
                &ch,
                "/runtime.v1.RuntimeService/ContainerStatus",
                api::ContainerStatusRequest {
                    container_id: id.clone(),
                    verbose: false,
                },
            )
            .await,
        ),
        (
            "list_containers",
            capture::raw(
                &ch,
                "/runtime.v1.RuntimeService/ListContainers",
                api::ListContainersRequest::default(),
            )
            .await,
        ),
        (
            "container_stats",
            capture::raw(
                &ch,
                "/runtime.v1.RuntimeService/ContainerStats",
                api::ContainerStatsRequest {
                    container_id: id.clone(),
                },
            )
            .await,
        ),
        (
            "image_status",
            capture::raw(
                &ch,
                "/runtime.v1.ImageService/ImageStatus",
                api::ImageStatusRequest {
                    image: Some(busybox),
                    verbose: false,
                },
            )
            .await,
        ),
        (
            "image_fs_info",
            capture::raw(
                &ch,
                "/runtime.v1.ImageService/ImageFsInfo",
                api::ImageFsInfoRequest {},
            )
            .await,
        ),
    ];
    std::fs::create_dir_all(fixture_dir()).expect("fixture dir");
    for (name, bytes) in recordings {
        let path = fixture_dir().join(format!("{name}.bin"));
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        eprintln!("recorded {} bytes into {}", bytes.len(), path.display());
    }
}
