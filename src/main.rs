//! The `kubelet` binary. The pipeline lives in the library (`kubelet::app`).

fn main() {}
