//! KubeletConfiguration (kubelet.config.k8s.io/v1beta1): types, defaulting,
//! file loading and validation (issue 2).
