//! Compiles the .proto files with protox (pure Rust, no protoc) and generates
//! the prost messages and tonic stubs into OUT_DIR:
//! - proto/api.proto (CRI v1): clients only.
//! - proto/health.proto (grpc.health.v1): the client the gRPC probe uses, and
//!   the server side so tests can serve health checks.
//! - proto/deviceplugin_v1beta1.proto (package v1beta1): the kubelet serves
//!   Registration and calls DevicePlugin; both sides of both services are
//!   generated so tests can be a device plugin. Maps are BTreeMaps so an
//!   AllocateResponse encodes as Go's (sorted keys) in the checkpoint.
//! - proto/podresources_v1.proto, proto/podresources_v1alpha1.proto
//!   (packages v1, v1alpha1): the pod-resources server and its client.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for p in [
        "proto/api.proto",
        "proto/health.proto",
        "proto/deviceplugin_v1beta1.proto",
        "proto/podresources_v1.proto",
        "proto/podresources_v1alpha1.proto",
    ] {
        println!("cargo:rerun-if-changed={p}");
    }
    let descriptors = protox::compile(["proto/api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(descriptors)?;
    let health = protox::compile(["proto/health.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(health)?;
    let device_plugin = protox::compile(["proto/deviceplugin_v1beta1.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .btree_map(".")
        .compile_fds(device_plugin)?;
    let pod_resources = protox::compile(
        [
            "proto/podresources_v1.proto",
            "proto/podresources_v1alpha1.proto",
        ],
        ["proto"],
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(pod_resources)?;
    Ok(())
}
