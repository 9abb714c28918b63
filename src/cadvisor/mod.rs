//! Machine information, the part cadvisor plays for the kubelet at start-up (issue 4).
