//! Pod networking helpers the kubelet owns itself (pkg/kubelet/network):
//! DNS configuration and pod hostnames.

pub mod dns;
