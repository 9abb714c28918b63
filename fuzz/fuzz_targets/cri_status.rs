//! What the container runtime answers, as protobuf bytes: a container's
//! status and a sandbox's, checked (and the container's converted) as the kubelet converts
//! them (a runtime's answer is outside input too).
#![no_main]

use kubelet::cri::api;
use kubelet::cri::verify::{verify_container_status, verify_sandbox_status};
use kubelet::kubelet::kuberuntime::status::to_kube_container_status;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(resp) = api::ContainerStatusResponse::decode(data)
        && let Some(status) = resp.status
    {
        let _ = verify_container_status(&status);
        let _ = to_kube_container_status(&status, "containerd");
    }
    if let Ok(resp) = api::PodSandboxStatusResponse::decode(data)
        && let Some(status) = resp.status
    {
        let _ = verify_sandbox_status(&status);
    }
});
