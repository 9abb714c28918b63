//! Compiles the .proto files with protox (pure Rust, no protoc) and generates
//! the prost messages and tonic stubs into OUT_DIR:
//! - proto/api.proto (CRI v1): clients only.
//! - proto/health.proto (grpc.health.v1): the client the gRPC probe uses, and
//!   the server side so tests can serve health checks.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/api.proto");
    println!("cargo:rerun-if-changed=proto/health.proto");
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
    Ok(())
}
