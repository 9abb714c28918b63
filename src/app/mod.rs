//! cmd/kubelet/app: the start-up pipeline up to RunKubelet (issue 2).

pub mod options;
