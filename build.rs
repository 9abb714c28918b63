//! Compiles proto/api.proto (CRI v1) with protox (pure Rust, no protoc) and
//! generates the prost messages and tonic clients into OUT_DIR.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/api.proto");
    let descriptors = protox::compile(["proto/api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
