//! CRI v1: the generated API, and (issue 3) the remote runtime and image clients.

/// Messages and gRPC clients generated from proto/api.proto at build time.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod api {
    tonic::include_proto!("runtime.v1");
}
