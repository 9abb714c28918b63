//! pkg/kubelet/status: the API half of the status manager ([`sync`]).

pub mod sync;
