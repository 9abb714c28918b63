//! A static pod manifest from staticPodPath or staticPodURL (a Pod or a
//! PodList, YAML or JSON, any bytes; aliases included).
#![no_main]

use kubelet::kubelet::config::common::StaticPodOrigin;
use kubelet::kubelet::config::decode::{decode_pod_list, decode_single_pod, to_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = to_json(data);
    let _ = decode_single_pod(
        data,
        StaticPodOrigin::File(std::path::Path::new("/etc/kubernetes/manifests/fuzz.yaml")),
        "node-a",
    );
    let _ = decode_pod_list(data, StaticPodOrigin::Url("http://127.0.0.1/pods"), "node-a");
});
